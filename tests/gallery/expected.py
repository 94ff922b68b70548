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
