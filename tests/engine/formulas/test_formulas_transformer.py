"""Native Transformer formulas; the reference oracles of docs/formulas.md, MACs from matrix dimensions
(case P05) cross-checked against FlopCounterMode on the meta device, and hand-derived DMAs."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp.engine.formulas import (
    flops_transformer_decoderlayer,
    flops_transformer_encoderlayer,
    module_dmas,
    module_flops,
    module_macs,
)


def _transformer():
    torch.manual_seed(0)
    return nn.Transformer(
        d_model=4,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=8,
        dropout=0.0,
        batch_first=True,
    ).eval()


def test_reference_layer_oracles():
    # docs/formulas.md: encoder layer 1195, decoder layer 1270 for d=4, h=2, ff=8, src (1,3,4), tgt (1,2,4)
    # encoder: attention 288 + 13 + 54 + 48 + 60 + 96 = 559; residuals 2·12; norms 2·102;
    #   feed-forward 192 + 24 + 192 = 408 → 1195
    model = _transformer()
    src, tgt = torch.randn(1, 3, 4), torch.randn(1, 2, 4)
    assert flops_transformer_encoderlayer(model.encoder.layers[0], (src,)) == 1195
    assert flops_transformer_decoderlayer(model.decoder.layers[0], (tgt, src)) == 1270


def test_whole_transformer_and_masks(measure):
    # 1195 + 1270 + 102 + 68 (final norms) = 2635
    model = _transformer()
    src, tgt = torch.randn(1, 3, 4), torch.randn(1, 2, 4)
    assert measure(model, src, tgt).flops == 2635
    # six boolean masks: attention masks 18 + 8 + 12, padding masks 18 + 8 + 12 → +76 = 2711
    masks = dict(
        src_mask=torch.zeros(3, 3, dtype=torch.bool),
        tgt_mask=torch.zeros(2, 2, dtype=torch.bool),
        memory_mask=torch.zeros(2, 3, dtype=torch.bool),
        src_key_padding_mask=torch.zeros(1, 3, dtype=torch.bool),
        tgt_key_padding_mask=torch.zeros(1, 2, dtype=torch.bool),
        memory_key_padding_mask=torch.zeros(1, 3, dtype=torch.bool),
    )
    assert measure(model, src, tgt, **masks).flops == 2711


def test_encoder_layer_case_p05(measure, meta_operator_flops):
    # case P05: TransformerEncoderLayer(32, 4, ff=64) on (1, 8, 32):
    # qkv 8·3·32·32 = 24576, out 8·32·32 = 8192, ffn 8·2·32·64 = 32768, QKᵀ + AV 2·8·8·32 = 4096
    # → 69632 MACs
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x = torch.randn(1, 8, 32)
    got = measure(layer, x)
    assert got.macs == 69632
    assert meta_operator_flops(layer.eval(), x) == 2 * 69632


def test_encoder_layer_macs_and_staged_dmas(measure):
    # d=4, h=2, ff=8 on (1, 3, 4), n = 12, eval (dropout elided)
    # MACs: attention 3·3·16 + 2·3·3·4 + 3·16 = 264; feed-forward 2·3·4·8 = 192 → 456
    # DMAs: attention — projections 3·(12 + 16 + 4 + 12) = 132, scores 12 + 12 + 18 = 42,
    #   softmax 2·18 + 2·6 = 48, weighted 18 + 12 + 12 = 42, out_proj 12 + 20 + 12 = 44 → 308;
    #   residual 36; norm 12 + 8 + 12 + 4·3 = 44; feed-forward: linear1 12 + 40 + 24 = 76,
    #   relu 48, linear2 24 + 36 + 12 = 72 → 196; residual 36; norm 44 → 664
    layer = _transformer().encoder.layers[0]
    got = measure(layer, torch.randn(1, 3, 4))
    assert (got.flops, got.macs, got.dmas) == (1195, 456, 664)
    assert any("Receptive field is not defined for TransformerEncoderLayer" in t for t in got.warnings)


def test_sequence_first_layer_gives_the_same_counts(measure):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0)  # (L, B, E)
    got = measure(layer, torch.randn(3, 1, 4))
    assert (got.flops, got.macs, got.dmas) == (1195, 456, 664)


def test_decoder_layer_needs_the_memory(measure):
    # decoder MACs: self-attention on 2 tokens 2·48 + 2·2·2·4 + 2·16 = 96 + 32 + 32 = 160;
    # cross-attention 2·16 + 3·4·8 + 2·2·3·4 + 2·16 = 32 + 96 + 48 + 32 = 208;
    # feed-forward 2·2·4·8 = 128 → 496
    layer = _transformer().decoder.layers[0]
    tgt, memory = torch.randn(1, 2, 4), torch.randn(1, 3, 4)
    got = measure(layer, tgt, memory)
    assert (got.flops, got.macs) == (1270, 496)
    with pytest.raises(ValueError, match="memory"):
        module_macs(layer, tgt, tgt)


def test_transformer_macs_from_src_and_output():
    # nn.Transformer: 456 (encoder layer) + 496 (decoder layer) = 952; the output is shaped like tgt
    model = _transformer()
    src, tgt = torch.randn(1, 3, 4), torch.randn(1, 2, 4)
    out = model(src, tgt)
    assert module_macs(model, src, out) == 952
    assert module_macs(model, src, out, inputs=(src, tgt)) == 952
    assert module_dmas(model, src, out) == module_dmas(model, src, out, inputs=(src, tgt))


def test_encoder_stack_with_final_norm(measure):
    # two encoder layers + LayerNorm(4) on (1, 3, 4): 2·1195 + 102 = 2492
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    stack = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(4), enable_nested_tensor=False)
    got = measure(stack, torch.randn(1, 3, 4))
    assert (got.flops, got.macs) == (2492, 2 * 456)


def test_gelu_activation(measure):
    # activation="gelu": 5 instead of 1 per hidden element, H = 3·8 = 24 → 1195 + 4·24 = 1291
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation="gelu", batch_first=True)
    assert measure(layer, torch.randn(1, 3, 4)).flops == 1291
    # an activation module of the activation table: SiLU costs 5 per element as well
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=nn.SiLU(), batch_first=True)
    assert measure(layer, torch.randn(1, 3, 4)).flops == 1291


def test_unknown_activation_raises():
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=lambda t: F.relu(t) * 2, batch_first=True)
    x = torch.zeros(1, 3, 4)
    with pytest.raises(NotImplementedError, match="activation"):
        module_flops(layer, (x,), x)


def test_custom_encoder_raises():
    class Custom(nn.Module):
        def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
            return src

    model = nn.Transformer(d_model=4, nhead=2, dim_feedforward=8, custom_encoder=Custom(), batch_first=True)
    x = torch.zeros(1, 3, 4)
    with pytest.raises(NotImplementedError, match="native encoder and decoder"):
        module_flops(model, (x, x), x)


def test_transformer_and_decoder_macs_match_flop_counter(meta_operator_flops):
    # On the meta device the fused paths decompose into addmm/bmm, which FlopCounterMode counts
    # as 2·MACs; masks and norms add no matmul work.
    torch.manual_seed(0)
    model = nn.Transformer(
        d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16,
        dropout=0.0, batch_first=True,
    ).eval()  # fmt: skip
    src, tgt = torch.randn(2, 5, 8), torch.randn(2, 3, 8)
    # encoder layer (10 tokens): attention 10·3·64 + 2·2·5·5·8 + 10·64 = 1920 + 800 + 640 = 3360,
    #   feed-forward 10·2·8·16 = 2560 → 5920, two layers 11840
    # decoder layer (6 target tokens, 10 memory tokens): self-attention 6·3·64 + 2·2·3·3·8 + 6·64
    #   = 1152 + 288 + 384 = 1824; cross-attention 6·64 + 10·2·64 + 2·2·3·5·8 + 6·64
    #   = 384 + 1280 + 480 + 384 = 2528; feed-forward 6·2·8·16 = 1536 → 5888
    macs = module_macs(model, src, model(src, tgt), inputs=(src, tgt))
    assert macs == 2 * 5920 + 5888 == 17728
    assert meta_operator_flops(model, src, tgt) == 2 * macs
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    assert module_macs(layer, tgt, tgt, inputs=(tgt, src)) == 5888
    assert meta_operator_flops(layer, tgt, src) == 2 * 5888
