"""Fused CPU kernels (SDPA, oneDNN LSTM, native MHA, native encoder layer): hand-derived values,
the public bug cases P05, P06, P10, P17, and cross-checks against the same models on the meta
device, where the kernels decompose into matmuls that PyTorch counts itself."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from opformula_models import count, op_flops
from torch import nn

MATMUL = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm")


def matmul_flops(flops: dict[str, int]) -> int:
    return sum(v for k, v in flops.items() if k in MATMUL)


def build(device: str, factory):
    torch.manual_seed(0)
    with torch.device(device):
        return factory()


# --- scaled dot-product attention ---------------------------------------------------------------


def test_p06_sdpa_cpu():
    """P06: q = k = v (1, 2, 16, 8). QK^T: B*H*L*S*D = 4096 MACs, AV 4096 -> 16384 FLOPs (dense).
    Element-wise: scaling of the B*H*L*S = 512 scores, softmax 3*512 - B*H*L (32) = 1504.
    Total 16384 + 512 + 1504 = 18400 >= the case's 16384 matmul FLOPs, and counted (not 0)."""
    q = torch.randn(1, 2, 16, 8)
    flops, calls = count(lambda: F.scaled_dot_product_attention(q, q, q))
    assert calls == {"aten._scaled_dot_product_flash_attention_for_cpu": 1}
    assert flops == {"aten._scaled_dot_product_flash_attention_for_cpu": 18400}
    # the matmul part is PyTorch's own dense SDPA convention
    assert torch.utils.flop_counter.sdpa_flop_count((1, 2, 16, 8), (1, 2, 16, 8), (1, 2, 16, 8)) == 16384


def test_sdpa_mask_causal_and_gqa():
    q = torch.randn(1, 2, 16, 8)
    mask = torch.zeros(16, 16)
    # an additive mask adds one addition per score: 18400 + 512
    assert op_flops(lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=mask)) == {
        "aten._scaled_dot_product_flash_attention_for_cpu": 18912}
    # is_causal keeps the dense count (as PyTorch's sdpa_flop_count does)
    assert op_flops(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)) == {
        "aten._scaled_dot_product_flash_attention_for_cpu": 18400}
    # grouped-query attention: 4 query heads share 2 kv heads; q (1,4,6,8), k = v (1,2,6,8):
    # matmul 4 * B*Hq*L*S*D = 4*4*6*6*8 = 4608, scaling 144, softmax 3*144 - 24 = 408 -> 5160
    qg, kg = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8)
    assert op_flops(lambda: F.scaled_dot_product_attention(qg, kg, kg, enable_gqa=True)) == {
        "aten._scaled_dot_product_flash_attention_for_cpu": 5160}


def test_sdpa_matches_meta_decomposition():
    """On meta SDPA decomposes into mul (q and k by sqrt(scale)), bmm, _safe_softmax, bmm. The matmul
    part is identical; the element-wise parts differ only by where the scaling happens."""
    shape = (2, 3, 10, 4)  # B=2, H=3, L=S=10, D=4
    q = torch.randn(shape)
    qm = torch.randn(shape, device="meta")
    fused = op_flops(lambda: F.scaled_dot_product_attention(q, q, q))["aten._scaled_dot_product_flash_attention_for_cpu"]
    meta = op_flops(lambda: F.scaled_dot_product_attention(qm, qm, qm))
    assert set(meta) == {"aten.mul", "aten.bmm", "aten._safe_softmax"}
    bhls, bhld = 2 * 3 * 10 * 10, 2 * 3 * 10 * 4
    assert matmul_flops(meta) == 4 * bhls * 4  # 4 * B*H*L*S*D = 9600
    assert meta["aten._safe_softmax"] == 3 * bhls - 2 * 3 * 10
    assert meta["aten.mul"] == 2 * bhld  # q and k scaled
    assert fused == sum(meta.values()) - 2 * bhld + bhls  # the kernel scales the scores instead


# --- LSTM (oneDNN) ------------------------------------------------------------------------------


def test_p10_lstm_cpu():
    """P10: LSTM(5, 5), x (3, 1, 5). Gate products T*4H*(I+H) = 3*20*10 = 600 MACs = 1200 FLOPs.
    Cell work per hidden unit and step: gate sum 4, three sigmoids 12, tanh 6, c' = f*c + i*g 3,
    h' = o*tanh(c') 7 -> 32; 32 * T*B*H = 32 * 15 = 480. Total 1680; the nested (out, (h, c))
    output does not matter to the operator counter."""
    lstm = nn.LSTM(5, 5).eval()
    x = torch.randn(3, 1, 5)
    flops, calls = count(lambda: lstm(x))
    assert calls["aten.mkldnn_rnn_layer"] == 1
    assert flops == {"aten.mkldnn_rnn_layer": 1680}


@pytest.mark.parametrize("grad", [False, True])
def test_lstm_matches_meta_decomposition(grad):
    """Bidirectional 2-layer LSTM with batch_first: oneDNN runs one mkldnn_rnn_layer per layer and
    direction; on meta the same LSTM decomposes into addmm and the cell's element-wise operators.
    Both give the same count: hand-derived, layer 1: 2 dirs * (2*T*B*4H*(I+H) + 32*T*B*H) with
    T=5, B=2, H=6, I=3 -> 2 * (2*10*24*9 + 32*60) = 2 * (4320 + 1920) = 12480; layer 2 has I = 2H = 12:
    2 * (2*10*24*18 + 1920) = 2 * (8640 + 1920) = 21120; total 33600."""
    fused_lstm = build("cpu", lambda: nn.LSTM(3, 6, num_layers=2, bidirectional=True, batch_first=True).eval())
    meta_lstm = build("meta", lambda: nn.LSTM(3, 6, num_layers=2, bidirectional=True, batch_first=True).eval())
    x, xm = torch.randn(2, 5, 3), torch.randn(2, 5, 3, device="meta")
    with torch.set_grad_enabled(grad):
        fused, calls = count(lambda: fused_lstm(x))
        meta = op_flops(lambda: meta_lstm(xm))
    assert calls["aten.mkldnn_rnn_layer"] == 4
    assert fused == {"aten.mkldnn_rnn_layer": 33600}
    assert sum(meta.values()) == 33600
    assert matmul_flops(meta) == 4320 * 2 + 8640 * 2


def test_gru_and_projected_lstm_decompose_and_are_covered():
    # GRU(4, 3) on CPU runs the composite cell: per step per unit 21 element-wise FLOPs
    # T=2, B=1, H=3: products 2*T*B*3H*(I+H) = 2*2*9*7 = 252, cell 21*6 = 126 -> 378
    gru = nn.GRU(4, 3).eval()
    assert sum(op_flops(lambda: gru(torch.randn(2, 1, 4))).values()) == 378
    # LSTM with proj_size (oneDNN refuses it: composite path). I=4, H=3, P=2, T=2, B=1:
    # products 2*T*4H*(I+P) = 2*2*12*6 = 288, projection 2*T*H*P = 24, cell 32*T*H = 192 -> 504
    lstm = nn.LSTM(4, 3, proj_size=2).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "LSTM with projections is not supported with oneDNN" (once)
        counted = op_flops(lambda: lstm(torch.randn(2, 1, 4)))
    assert sum(counted.values()) == 504


# --- element-wise recurrence (P17) --------------------------------------------------------------


def test_p17_leaky_rnn_cell():
    """P17: h + 0.1 * (tanh(x @ W) - h), x, h (4, 8), W (8, 8): mm 4*8*8 = 256 MACs = 512 FLOPs;
    tanh 6 * 32 = 192, sub 32, mul 32, add 32 -> 800; every operator counted."""
    x, h, w = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8, 8)
    assert op_flops(lambda: h + 0.1 * (torch.tanh(x @ w) - h)) == {
        "aten.mm": 512, "aten.tanh": 192, "aten.sub": 32, "aten.mul": 32, "aten.add": 32}


# --- native multi-head attention ------------------------------------------------------------------


def test_native_mha_hand_derived():
    """MHA(16, 2, batch_first) self-attention on (2, 5, 16), eval + no_grad (fast path).
    Per sequence L = S = 5, E = 16, H = 2: projections q 2*L*E^2 = 2560, k and v 4*S*E^2 = 5120,
    out 2*L*E^2 = 2560; scores + weighted sum 4*L*S*E = 1600 -> 11840 per sequence, 23680 for B=2.
    need_weights=True (default): q rescaled L*E = 80, softmax 3*H*L*S - H*L = 150 - 10 = 140, averaged
    weights H*L*S = 50 -> 270 per sequence; total 23680 + 540 = 24220.
    need_weights=False: fused SDPA scales the H*L*S = 50 scores, no averaging -> 190 per sequence,
    23680 + 380 = 24060."""
    mha = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        assert count(lambda: mha(x, x, x)) == ({"aten._native_multi_head_attention": 24220},
                                               {"aten._native_multi_head_attention": 1})
        assert op_flops(lambda: mha(x, x, x, need_weights=False)) == {"aten._native_multi_head_attention": 24060}
        # a key padding mask (mask path): + H*L*S = 50 per sequence for applying it, 24220 + 100;
        # converting the bool mask costs a masked_fill_ (10 elements)
        pad = torch.zeros(2, 5, dtype=torch.bool)
        pad[0, 3:] = True
        assert op_flops(lambda: mha(x, x, x, key_padding_mask=pad)) == {
            "aten._native_multi_head_attention": 24320, "aten.masked_fill_": 10}


def test_native_mha_matches_meta_decomposition():
    fast = build("cpu", lambda: nn.MultiheadAttention(16, 2, batch_first=True).eval())
    meta = build("meta", lambda: nn.MultiheadAttention(16, 2, batch_first=True).eval())
    x, xm = torch.randn(2, 5, 16), torch.randn(2, 5, 16, device="meta")
    with torch.no_grad():
        fused = op_flops(lambda: fast(x, x, x))["aten._native_multi_head_attention"]
        decomposed = op_flops(lambda: meta(xm, xm, xm))
    assert matmul_flops(decomposed) == 23680
    # On meta the packed in-projection of the 3-D input is mm + a separate bias add (3E per token,
    # 48 * 10 = 480 FLOPs) which the fused kernel (like addmm) folds into the product; the rest —
    # q scaling 160, softmax 280, head averaging 100 — is the same.
    assert decomposed["aten.add"] == 480
    assert fused == sum(decomposed.values()) - 480


# --- native Transformer encoder layer -------------------------------------------------------------


def _encoder_layer():
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    for p in layer.parameters():
        p.requires_grad_(False)
    return layer.eval()


def test_p05_encoder_layer_fast_path():
    """P05: TransformerEncoderLayer(32, 4, ff=64, dropout=0, batch_first), frozen, eval, no_grad,
    x (1, 8, 32). MACs: qkv 8*3*32*32 = 24576, out 8*32*32 = 8192, ffn 8*2*32*64 = 32768,
    QK^T + AV 2*8*8*32 = 4096 -> 69632 MACs = 139264 FLOPs.
    Element-wise (T = 8 tokens, E = 32, H = 4): score scaling H*L*S = 256, softmax 3*256 - 32 = 736,
    2 residual adds 2*T*E = 512, 2 LayerNorms 2*(6*256 + 2*8 + 2*256) = 4128, ReLU T*F = 512
    -> 6144. Total 145408 — counted, instead of 0."""
    layer = _encoder_layer()
    x = torch.randn(1, 8, 32)
    with torch.no_grad():
        flops, calls = count(lambda: layer(x))
    assert calls == {"aten._transformer_encoder_layer_fwd": 1}
    assert flops == {"aten._transformer_encoder_layer_fwd": 145408}


def test_encoder_layer_gelu_and_norm_first():
    # GELU instead of ReLU: 5 per element instead of 1 on T*F = 512 -> 145408 + 4*512 = 147456
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu").eval()
    x = torch.randn(1, 8, 32)
    with torch.no_grad():
        assert op_flops(lambda: layer(x)) == {"aten._transformer_encoder_layer_fwd": 147456}
        first = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True).eval()
        assert op_flops(lambda: first(x)) == {"aten._transformer_encoder_layer_fwd": 145408}


def test_transformer_encoder_fast_path_matches_meta():
    """A 4-layer nn.TransformerEncoder in eval + no_grad: the fast path (one fused kernel per layer,
    uncounted by PyTorch) counts the same matmul FLOPs as its meta-device decomposition, and the
    element-wise totals differ only in (a) where attention scaling happens (scores B*H*L*S on the
    fast path, q and k B*L*E each on meta) and (b) the packed in-projection's bias, which meta adds
    with a separate aten.add (3E per token) and the fused kernel folds into the product (as addmm)."""
    def make():
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()

    fast, meta = build("cpu", make), build("meta", make)
    x, xm = torch.randn(2, 12, 64), torch.randn(2, 12, 64, device="meta")
    with torch.no_grad():
        fused, calls = count(lambda: fast(x))
        decomposed = op_flops(lambda: meta(xm))
    assert calls == {"aten._transformer_encoder_layer_fwd": 4}
    # per layer (B=2, L=12, E=64, F=128): 2*24*64*192 + 4*2*12*12*64... computed by hand:
    # qkv 2*24*64*192 = 589824, scores+AV 4*B*L*L*E = 73728, out 2*24*64*64 = 196608,
    # ffn 2*2*24*64*128 = 786432 -> 1646592 per layer
    assert matmul_flops(decomposed) == 4 * 1646592
    bhls, ble = 2 * 4 * 12 * 12, 2 * 12 * 64
    in_proj_bias = 3 * ble
    assert fused["aten._transformer_encoder_layer_fwd"] == (
        sum(decomposed.values()) + 4 * (bhls - 2 * ble) - 4 * in_proj_bias)


def test_nested_tensor_input_counts_each_sequence():
    """With a padding mask the encoder runs on a nested tensor: sequences of lengths 6 and 4 cost
    what they cost alone (the padding is never computed)."""
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2).eval()
    x = torch.randn(2, 6, 32)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype (warned once)
        nested, calls = count(lambda: enc(x, src_key_padding_mask=pad))
    assert calls["aten._nested_tensor_from_mask"] == 1
    with torch.no_grad():
        alone = op_flops(lambda: enc(x[:1]))["aten._transformer_encoder_layer_fwd"]
        alone += op_flops(lambda: enc(x[1:, :4]))["aten._transformer_encoder_layer_fwd"]
    assert nested["aten._transformer_encoder_layer_fwd"] == alone


def test_public_cases_complete_through_measure_flops():
    """The engine's measure_flops uses DEFAULT_FORMULAS by default: P05, P06, P10 and P17 report
    complete operator FLOPs with the values derived above."""
    from torchscan_lsp import measure_flops

    layer = _encoder_layer()
    x = torch.randn(1, 8, 32)

    def p05():
        with torch.no_grad():
            layer(x)

    q = torch.randn(1, 2, 16, 8)
    lstm = nn.LSTM(5, 5).eval()
    xl = torch.randn(3, 1, 5)
    xr, h, w = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8, 8)
    cases = {
        "P05": (p05, 145408),
        "P06": (lambda: F.scaled_dot_product_attention(q, q, q), 18400),
        "P10": (lambda: lstm(xl), 1680),
        "P17": (lambda: h + 0.1 * (torch.tanh(xr @ w) - h), 800),
    }
    for case, (workload, expected) in cases.items():
        report = measure_flops(workload)
        assert report["total"]["status"] == "complete", case
        assert report["total"]["value"] == expected, case
        assert report["diagnostics"] == [], case
