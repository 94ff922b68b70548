"""Hand-derived MACs of the example gallery (examples/*.py), independent of the engine.

MACs are the multiply-accumulates of the matrix products, convolutions and attention of one forward
pass: bias adds, activations, norms, softmax and element-wise work are excluded (docs/metrics.md).
Each value is derived below from the layer sizes; each was also cross-checked once against
PyTorch's FlopCounterMode (eager attention, FLOPs / 2).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Expected:
    file: str      # workspace-relative
    target: str    # factory or class name
    macs: int      # hand count
    label: str     # the same, as the editor rounds it (3 significant digits)
    parameters: int | None = None
    # lines (by a piece of their text, its first occurrence in the file) that must carry hints of
    # their own: the model's children, each child of a multi-line constructor, class lines, the
    # line that built a library model, lines that compute without a module call
    children: tuple[str, ...] = ()
    shared: str | None = None   # the line of a head whose weight is tied to another module's


def _gpt() -> int:
    # nanoGPT-style: T=16 tokens, C=64, 2 layers, V=256, tied head.
    T, C, L, V = 16, 64, 2, 256
    linears = 12 * T * C * C          # c_attn 3C² + c_proj C² + c_fc 4C² + mlp c_proj 4C², per token
    attention = 2 * T * T * C         # QKᵀ (T·T·C over all heads) + AV (same), dense convention
    head = T * C * V                  # lm_head
    return L * (linears + attention) + head  # 2*(786,432 + 32,768) + 262,144 = 1,900,544


def _vit() -> int:
    # 32² image, 8² patches: 16 patches + class token = N=17; D=64, 4 heads of 16, MLP 128, depth 2.
    P, N, D, H, dh, M, L, K = 16, 17, 64, 4, 16, 128, 2, 10
    patch = P * (3 * 8 * 8) * D       # Linear(192, 64) on 16 patches: 196,608
    qkv = N * D * 3 * H * dh          # 208,896
    attention = 2 * H * N * N * dh    # q @ kᵀ and attn @ v: 36,992
    out = N * H * dh * D              # 69,632
    ffn = 2 * N * D * M               # 278,528
    head = D * K                      # class token only: 640
    return patch + L * (qkv + attention + out + ffn) + head  # 1,385,344


def _small_resnet() -> int:
    # examples/cnn.py SmallResNet on 64²: MACs of a conv = H_out·W_out·C_out·C_in·k².
    stem = 64 * 64 * 32 * 3 * 9
    stage1 = 4 * (64 * 64 * 32 * 32 * 9)
    def stage(h, cin, cout):  # a strided block with a 1x1 shortcut, then a plain block
        return h * h * cout * cin * 9 + 3 * (h * h * cout * cout * 9) + h * h * cout * cin
    head = 128 * 10
    return stem + stage1 + stage(32, 32, 64) + stage(16, 64, 128) + head  # 422,970,624


def _gpt2() -> int:
    T, C, L, V = 32, 128, 2, 1000
    return L * (12 * T * C * C + 2 * T * T * C) + T * C * V  # 17,203,200


def _bert() -> int:
    T, C, L, I = 32, 128, 2, 512
    per_layer = 4 * T * C * C + 2 * T * C * I + 2 * T * T * C
    pooler = C * C  # the [CLS] token's dense layer
    return L * per_layer + pooler  # 13,123,584


def _llama() -> int:
    # hidden 128, 4 heads of 32, 2 key-value heads (k, v are 64 wide), gated MLP 344, V=1000.
    T, C, KV, I, L, V = 32, 128, 64, 344, 2, 1000
    per_layer = 2 * T * C * C + 2 * T * C * KV + 3 * T * C * I + 2 * T * T * C
    return L * per_layer + T * C * V  # 16,220,160


def _t5() -> int:
    # d=128, 4 heads of 32 (inner 128), d_ff=512, 32 source / 8 target tokens, 2 + 2 layers, V=1000.
    Te, Td, d, inner, ff, H, dkv, V = 32, 8, 128, 128, 512, 4, 32, 1000
    encoder = 4 * Te * d * inner + 2 * Te * d * ff + 2 * H * Te * Te * dkv
    decoder = (
        4 * Td * d * inner               # self-attention q, k, v, o
        + 2 * Td * d * inner             # cross-attention q, o
        + 2 * Te * d * inner             # cross-attention k, v over the encoder output
        + 2 * Td * d * ff
        + 2 * H * Td * Td * dkv          # self-attention scores and values
        + 2 * H * Td * Te * dkv          # cross-attention scores and values
    )
    return 2 * encoder + 2 * decoder + Td * d * V  # 20,062,208


def _llama2c() -> int:
    # llama2.c's Transformer: D=64, 2 layers, 4 heads of 16 over 2 key-value heads (k and v 32 wide),
    # feed-forward 192 (multiple_of 32 over 2/3 of 4·D), T=32 tokens, V=256, the head on the last token.
    T, D, KV, F, L, V, H, hd = 32, 64, 32, 192, 2, 256, 4, 16
    attention = 2 * T * D * D + 2 * T * D * KV + 2 * H * T * T * hd  # wq, wo; wk, wv; QKᵀ and AV
    ffn = 3 * T * D * F                                              # w1, w3, w2
    return L * (attention + ffn) + D * V  # 2 * (262,144 + 131,072 + 131,072 + 1,179,648) + 16,384 = 3,424,256


def _whisper() -> int:
    # Whisper: 16 mel bins over 32 frames; C=32, 4 heads of 8, MLP 128; the encoder's 2 blocks on
    # Te=16 frames (conv2 has stride 2), the decoder's 2 on Td=8 tokens, V=64 (logits: x @ embeddingᵀ).
    M, Fr, C, I, Te, Td, V = 16, 32, 32, 128, 16, 8, 64
    convs = Fr * C * M * 3 + Te * C * C * 3                       # 49,152 + 49,152
    encoder = 4 * Te * C * C + 2 * Te * Te * C + 2 * Te * C * I   # 65,536 + 16,384 + 131,072 per block
    decoder = (4 * Td * C * C + 2 * Td * Td * C                   # self-attention: 32,768 + 4,096
               + 2 * Td * C * C + 2 * Te * C * C + 2 * Td * Te * C  # cross: q, out; k, v over frames; QKᵀ, AV
               + 2 * Td * C * I)                                  # 65,536
    return convs + 2 * encoder + 2 * decoder + Td * C * V  # 98,304 + 425,984 + 319,488 + 16,384 = 860,160


def _sam_encoder() -> int:
    # 64² image, 8² patches: an 8x8 grid of 32-wide tokens, 2 heads of 16, MLP 128, a neck to 16 channels.
    # Block 0 pads the grid to 9x9 and attends within 9 windows of 3x3 (9 tokens each); block 1 over all 64.
    patch = 64 * 32 * 3 * 8 * 8  # 393,216

    def block(tokens: int, windows: int, n: int, side: int) -> int:
        qkv = tokens * 32 * 96
        scores = 2 * windows * 2 * n * n * 16             # q @ kᵀ and attn @ v, 2 heads of 16
        rel = 2 * windows * 2 * side * side * side * 16   # add_decomposed_rel_pos's two einsums
        proj = tokens * 32 * 32
        mlp = 2 * 64 * 32 * 128                           # after unpartitioning: the 64 real tokens
        return qkv + scores + rel + proj + mlp

    neck = 64 * 16 * 32 + 64 * 16 * 16 * 9
    return patch + block(81, 9, 9, 3) + block(64, 1, 64, 8) + neck  # 393,216 + 918,272 + 1,081,344 + 180,224


def _unet() -> int:
    # Convolutions only, H_out·W_out·C_out·C_in·k² each, on a 32x32 image; channels 8, 16, 32.
    def conv(side: int, cout: int, cin: int, k: int = 3) -> int:
        return side * side * cout * cin * k * k

    down = conv(32, 8, 8) + conv(16, 8, 8) + conv(16, 16, 8) + conv(8, 16, 16) + conv(8, 32, 16) + conv(4, 32, 32)
    up = conv(8, 32, 64) + conv(16, 16, 48) + conv(32, 8, 24)  # each after the skip's concatenation
    return conv(32, 8, 3) + down + conv(4, 32, 32) + up + conv(32, 3, 8)  # 6,930,432


GALLERY = [
    Expected("examples/gpt.py", "gpt_small", _gpt(), "1.90 MMACs",
             children=("class LayerNorm", "class CausalSelfAttention", "self.c_attn = nn.Linear", "self.c_fc = nn.Linear",
                       "self.ln_1 = LayerNorm", "self.attn = CausalSelfAttention", "wte=nn.Embedding", "wpe=nn.Embedding",
                       "h=nn.ModuleList", "ln_f=LayerNorm", "self.lm_head = nn.Linear",
                       "y = F.scaled_dot_product_attention", "x = x + self.attn"),
             shared="self.lm_head = nn.Linear"),
    Expected("examples/vit.py", "vit_tiny", _vit(), "1.39 MMACs",
             children=("class Attention", "Rearrange(", "nn.Linear(patch_dim, dim)", "self.to_qkv = nn.Linear",
                       "nn.Linear(dim, hidden_dim)", "self.to_out = nn.Sequential", "self.mlp_head = nn.Linear",
                       "dots = (q @ k.transpose(-2, -1))", "out = attn @ v")),
    Expected("examples/cnn.py", "small_resnet", _small_resnet(), "423 MMACs",
             children=("class BasicBlock", "self.conv1 = nn.Conv2d", "nn.Conv2d(in_channels, out_channels, 1",
                       "nn.Conv2d(3, width, 3", "self.stage1 = nn.Sequential", "self.head = nn.Linear",
                       "return self.relu(out + identity)")),
    Expected("examples/transformer_models.py", "gpt2_small", _gpt2(), "17.2 MMACs",
             children=("model = GPT2LMHeadModel(config)",)),
    Expected("examples/transformer_models.py", "bert_small", _bert(), "13.1 MMACs",
             children=("model = BertModel(config)",)),
    Expected("examples/transformer_models.py", "llama_small", _llama(), "16.2 MMACs",
             children=("model = LlamaForCausalLM(config)",)),
    Expected("examples/transformer_models.py", "mistral_small", _llama(), "16.2 MMACs",
             children=("model = MistralForCausalLM(config)",)),
    Expected("examples/transformer_models.py", "t5_small", _t5(), "20.1 MMACs",
             children=("model = T5ForConditionalGeneration(config)",)),
    Expected("examples/llama2c.py", "llama2c_tiny", _llama2c(), "3.42 MMACs",
             children=("class Attention", "class FeedForward", "self.wq = nn.Linear", "self.attention = Attention(args)",
                       "self.feed_forward = FeedForward(", "self.layers.append(TransformerBlock", "model = Transformer(",
                       "        xq, xk = apply_rotary_emb(", "xk = repeat_kv(xk", "h = x + self.attention.forward("),
             shared="self.output = nn.Linear"),
    Expected("examples/whisper.py", "whisper_tiny", _whisper(), "860 kMACs",
             children=("class MultiHeadAttention", "self.query = Linear", "    model = Whisper(dims)",
                       "[ResidualAttentionBlock(n_state, n_head) for _ in range(n_layer)]",
                       "ResidualAttentionBlock(n_state, n_head, cross_attention=True)",
                       "        wv, qk = self.qkv_attention(q, k, v, mask)", "x = block(x)")),
    Expected("examples/sam_encoder.py", "sam_encoder_tiny", _sam_encoder(), "2.57 MMACs",
             children=("class Attention", "self.qkv = nn.Linear", "block = Block(", "self.pos_embed = nn.Parameter",
                       "            x, pad_hw = window_partition(", "            attn = add_decomposed_rel_pos(", "q, k, v = qkv.reshape(")),
    Expected("examples/unet.py", "unet_small", _unet(), "6.93 MMACs",
             children=("class DownBlock2D", "self.conv = nn.Conv2d(in_channels, out_channels",
                       "self.down_blocks.append(", "            sample, res_samples = downsample_block(",
                       "sample = upsample_block(")),
    # conv 8→16 3x3 on 4x4 (16 positions) + head Linear(16, 4) on 16 tokens
    Expected("examples/layers.py", "TokenNet", 16 * 16 * 8 * 9 + 16 * 16 * 4, "19.5 kMACs",
             children=("class Tokenizer", "class ChannelNorm", "self.conv = nn.Conv2d(8, 16", "self.tokens = Tokenizer()",
                       "self.norm = ChannelNorm(16)", "self.head = nn.Linear(16, 4)")),
    Expected("examples/layers.py", "mlp_stack", 32 * 64 + 64 * 64 + 64 * 10, "6.78 kMACs",
             children=("nn.Linear(32, 64)", "nn.ReLU()", "nn.Linear(64, 64)", "nn.GELU()", "nn.Linear(64, 10)")),
]

#: MixerNet's QR has no formula: its known MACs are the three products, a lower bound.
#: proj 16·16 + x @ q 16·16 + head 16·4 = 576
MIXER_KNOWN_MACS = 16 * 16 + 16 * 16 + 16 * 4
MIXER = Expected("examples/layers.py", "MixerNet", MIXER_KNOWN_MACS, "≥ 576 MACs",
                 children=("self.proj = nn.Linear(16, 16)", "self.mix = OrthogonalMixer(16)"))
#: the one line that ran the operator without a formula
MIXER_UNCOUNTED = "q, _ = torch.linalg.qr(self.weight)"


@dataclass(frozen=True)
class Line:
    """A line of the gallery (by a piece of its text, its first occurrence) and the hint it must
    carry, derived by hand; ``prefix``: the label starts with it (the rest checked elsewhere)."""

    file: str
    needle: str
    label: str
    prefix: bool = False


def attention_flops() -> int:
    """FLOPs of one call of llama2.c's Attention in the gallery, by hand."""
    # one llama2.c Attention call on T=32 tokens, D=64, 4 heads of 16 over 2 key-value heads:
    T, D, KV, H, hd = 32, 64, 32, 4, 16
    linears = 2 * T * (D * D + D * KV + D * KV + D * D)   # wq, wk, wv, wo: 786,432
    products = 2 * 2 * H * T * T * hd                      # SDPA's QKᵀ and AV: 262,144
    scale = H * T * T                                      # one multiplication per score: 4,096
    softmax = 3 * H * T * T - H * T                        # the engine's softmax convention: 12,160
    rotary = 6 * (T * H * hd // 2) + 6 * (T * KV // 2)    # 4 products and 2 sums over q's and k's pairs: 9,216
    return linears + products + scale + softmax + rotary   # 1,074,048


# Shapes: x is (1, 32, 64) in llama2.c; in Whisper the encoder's 16 frames and the decoder's 8 tokens are
# 32 wide, 4 heads of 8; in SAM's windowed block the 8x8 grid is padded to 9x9, 9 windows of 3x3,
# 18 = 9 windows · 2 heads, and the global block is 1 · 2 heads over 64 tokens.
LINES = [
    Line("examples/llama2c.py", "        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)",
         "xq (1, 32, 64) · xk (1, 32, 32) · xv (1, 32, 32)"),
    Line("examples/llama2c.py", "        xq, xk = apply_rotary_emb(", "xq (1, 32, 4, 16) · xk (1, 32, 2, 16)"),
    Line("examples/llama2c.py", "xk = repeat_kv(xk", "→ (1, 32, 4, 16)"),
    Line("examples/llama2c.py", "h = x + self.attention.forward(", "→ (1, 32, 64)"),
    # its own work counted: 2 · 1,074,048 = 2,148,096 FLOPs; parameters 2 · (64·64 + 2·64·32 + 64·64)
    Line("examples/llama2c.py", "class Attention", f"×2 · 24.6k params · {attention_flops() * 2 / 1e6:.2f} MFLOPs"),
    Line("examples/whisper.py", "        wv, qk = self.qkv_attention(q, k, v, mask)",
         "wv (1, 16, 32) · qk (1, 4, 16, 16) · ×6 runs, shapes vary"),
    Line("examples/whisper.py", "x = block(x)", "→ (1, 16, 32)"),
    Line("examples/whisper.py", "x = block(x, xa, mask=self.mask)", "→ (1, 8, 32)"),
    # a decoder block: 2 attentions of 4·32·32 weights and 3·32 biases, 3 LayerNorms of 64, MLP
    # 32·128 + 128 + 128·32 + 32: 16,928 parameters, two of them
    Line("examples/whisper.py", "ResidualAttentionBlock(n_state, n_head, cross_attention=True)", "×2 · 33.9k params · ",
         prefix=True),
    Line("examples/sam_encoder.py", "            x, pad_hw = window_partition(x, self.window_size)", "x (9, 3, 3, 32)"),
    Line("examples/sam_encoder.py", "            attn = add_decomposed_rel_pos(",
         "→ (18, 9, 9) · ×2 runs, shapes vary (2..18, 9..64, 9..64)"),
    Line("examples/sam_encoder.py", "q, k, v = qkv.reshape(",
         "q (18, 9, 16) · k (18, 9, 16) · v (18, 9, 16) · ×2 runs, shapes vary"),
    Line("examples/sam_encoder.py", "x = blk(x)", "→ (1, 8, 8, 32)"),
    # the first down block: (1, 8, 32, 32) convolved, kept as the skip, then halved to (1, 8, 16, 16);
    # the next two give (1, 16, 8, 8) and (1, 32, 4, 4)
    Line("examples/unet.py", "            sample, res_samples = downsample_block(",
         "sample (1, 8, 16, 16) · res_samples ((1, 8, 32, 32),) · ×3 runs, shapes vary"),
    # the up blocks give (1, 32, 8, 8), (1, 16, 16, 16), (1, 8, 32, 32)
    Line("examples/unet.py", "sample = upsample_block(sample, res_samples)",
         "→ (1, 32, 8, 8) · ×3 runs, shapes vary (1, 8..32, 8..32, 8..32)"),
]

#: Lines that built a target's model in its factory: their hint is the model's parameters and FLOPs,
#: the numbers of the target's totals.
BUILT = [("examples/llama2c.py", "llama2c_tiny", "model = Transformer(ModelArgs())"),
         ("examples/whisper.py", "whisper_tiny", "    model = Whisper(dims)")]

#: Hovers (file, line by a piece of its text, what they must say, what they must not): the call of a
#: module through .forward is a call like any other, the work under a plain function is summed
#: (2 runs of llama2.c's rotary embedding: 2 · 9,216 FLOPs), the model's own line names its class.
HOVERS = [
    ("examples/llama2c.py", "        h = x + self.attention.forward(", ("`layers.0.attention` → (1, 32, 64)",),
     ("Never called itself",)),
    # its inputs: x (1, 32, 64) and the rotary tables, (32 positions, 16 / 2 frequencies) each
    ("examples/llama2c.py", "self.attention = Attention(args)",
     ("Input: (1, 32, 64), (32, 8), (32, 8) → output: (1, 32, 64) (first of 2 calls)", "Called through `.forward(...)`"),
     ("Never called itself",)),
    ("examples/llama2c.py", "        xq, xk = apply_rotary_emb(",
     ("outside module calls: 18.4 kFLOPs over its 2 runs", "Assigned in its first run"), ()),
    ("examples/whisper.py", "    model = Whisper(dims)", ("### Whisper",), ()),
    ("examples/sam_encoder.py", "            attn = add_decomposed_rel_pos(",
     ("Ran 2 times; the first run is shown; shapes vary: (2..18, 9..64, 9..64)",), ()),
]

