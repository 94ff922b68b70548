"""nn.MultiheadAttention formulas; expected values derived by hand, MACs cross-checked against
FlopCounterMode on the meta device (where MHA decomposes into addmm and bmm)."""

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.formulas import flops_mha, module_dmas, module_flops, module_macs


def _mha(embed, heads, **kwargs):
    torch.manual_seed(0)
    return nn.MultiheadAttention(embed, heads, **kwargs)


def test_contract_oracle_2649(measure):
    # docs/formulas.md: MHA(8, 2, batch_first) on q = k = v = (1, 4, 8), default call. B=1 T=S=4 E=8 H=2 hd=4
    # projections 3·(4·8·(16 − 1 + 1)) = 1536; scaling 1 + 2·4·4 = 33; scores 2·4·4·7 = 224;
    # softmax 2·4·11 = 88; weighted 2·4·4·7 = 224; out_proj 8·4·15 + 32 = 512;
    # averaged weights 2·4·4 = 32 → 2649
    # MACs: 3·4·8·8 = 768 + 2·4·4·8 = 256 + 4·8·8 = 256 → 1280
    # DMAs: projections 3·(32 + 64 + 8 + 32) = 408; scores 32 + 32 + 32 = 96;
    #   softmax 2·32 + 2·8 = 80; weighted 32 + 32 + 32 = 96; out_proj 32 + 72 + 32 = 136;
    #   averaged weights 32 + 16 = 48 → 864
    mha, x = _mha(8, 2, batch_first=True), torch.randn(1, 4, 8)
    got = measure(mha, x, x, x)
    assert (got.flops, got.macs, got.dmas) == (2649, 1280, 864)
    assert any("Receptive field is not defined for MultiheadAttention" in t for t in got.warnings)
    assert not any("not supported" in t for t in got.warnings)


def test_case_p04_macs(measure, meta_operator_flops):
    # case P04: E=16, H=2, L=10: in_proj 3·10·256 = 7680, QKᵀ 10·10·16 = 1600, AV 1600,
    # out_proj 10·256 = 2560 → 13440 (train mode, as the case runs it)
    mha, x = _mha(16, 2, batch_first=True), torch.randn(1, 10, 16)
    got = measure(mha, x, x, x, train=True)
    assert got.macs == 13440
    assert meta_operator_flops(mha, x, x, x) == 2 * 13440


def test_sequence_first_layout(measure):
    # batch_first=False: (L, B, E) = (4, 1, 8) is the same call as the oracle
    mha, x = _mha(8, 2), torch.randn(4, 1, 8)
    got = measure(mha, x, x, x)
    assert (got.flops, got.macs, got.dmas) == (2649, 1280, 864)


def test_unbatched_call(measure):
    # (L, E) = (4, 8) is B = 1
    mha, x = _mha(8, 2), torch.randn(4, 8)
    got = measure(mha, x, x, x)
    assert (got.flops, got.macs, got.dmas) == (2649, 1280, 864)


def test_need_weights_false_and_per_head_weights(measure):
    # no returned weights: 2649 − 32 = 2617 FLOPs, 864 − 48 = 816 DMAs; MACs unchanged
    mha, x = _mha(8, 2, batch_first=True), torch.randn(1, 4, 8)
    got = measure(mha, x, x, x, need_weights=False)
    assert (got.flops, got.macs, got.dmas) == (2617, 1280, 816)
    # per-head weights (1, 2, 4, 4) are the probabilities already written: no averaging term
    got = measure(mha, x, x, x, average_attn_weights=False)
    assert (got.flops, got.dmas) == (2617, 816)


def test_masks(measure):
    # attn_mask (4, 4) and key_padding_mask (1, 4): 2·B·H·T·S = 2·32 = 64 more FLOPs;
    # DMAs read 16 + 4 mask elements more; MACs unchanged (dense work)
    mha, x = _mha(8, 2, batch_first=True), torch.randn(1, 4, 8)
    attn_mask = torch.zeros(4, 4, dtype=torch.bool)
    padding = torch.zeros(1, 4, dtype=torch.bool)
    got = measure(mha, x, x, x, key_padding_mask=padding, attn_mask=attn_mask)
    assert (got.flops, got.macs, got.dmas) == (2649 + 64, 1280, 864 + 20)


def test_cross_attention_with_kdim_vdim(measure, meta_operator_flops):
    # MHA(8, 2, kdim=6, vdim=4, batch_first): q (2, 3, 8), k (2, 5, 6), v (2, 5, 4)
    # B=2 T=3 S=5 E=8 H=2 hd=4
    # FLOPs: q proj 2·3·8·16 = 768, k 2·5·8·12 = 960, v 2·5·8·8 = 640; scaling 1 + 2·2·3·4 = 49;
    #   scores 2·2·3·5·7 = 420; softmax 12·14 = 168; weighted 2·2·3·4·9 = 432;
    #   out_proj 8·6·15 + 48 = 768; averaged 2·2·3·5 = 60 → 4265
    # MACs: 2·3·8·8 = 384 + 2·5·8·(6 + 4) = 800 + 2·2·3·5·8 = 480 + 6·8·8 = 384 → 2048
    mha = _mha(8, 2, kdim=6, vdim=4, batch_first=True)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 4)
    got = measure(mha, q, k, v)
    assert (got.flops, got.macs) == (4265, 2048)
    assert meta_operator_flops(mha, q, k, v) == 2 * 2048


def test_macs_without_inputs_assume_self_attention():
    mha, x = _mha(8, 2, batch_first=True), torch.randn(1, 4, 8)
    assert module_macs(mha, x, torch.zeros(1, 4, 8)) == 1280
    assert module_dmas(mha, x, torch.zeros(1, 4, 8)) == 864


def test_flops_from_flags_when_out_is_only_the_first_tensor():
    # out given as the attention output alone: the need_weights/average inputs decide the term
    mha, x = _mha(8, 2, batch_first=True), torch.randn(1, 4, 8)
    y = torch.zeros(1, 4, 8)
    assert module_flops(mha, (x, x, x, None, True, None, True, False), y) == 2649
    assert module_flops(mha, (x, x, x, None, False, None, True, False), y) == 2617
    assert flops_mha(mha, (x, x, x)) == 2649


def test_bias_kv_and_zero_attention(measure):
    # add_bias_kv and add_zero_attn append 2 key positions: S' = 6, self-attention on (1, 4, 8)
    # projections 1536; scaling 33; scores 2·4·6·7 = 336; softmax 8·17 = 136;
    # weighted 2·4·4·11 = 352; out_proj 512; averaged 2·4·6 = 48 → 2953
    # MACs 768 + 2·4·6·8 = 384 + 256 → 1408
    mha = _mha(8, 2, add_bias_kv=True, add_zero_attn=True, batch_first=True)
    x = torch.randn(1, 4, 8)
    got = measure(mha, x, x, x)
    assert (got.flops, got.macs) == (2953, 1408)


def test_training_dropout_on_attention_weights(measure):
    # dropout 0.1 in training: + B·H·T·S = 32 FLOPs, + 2·32 DMAs
    mha, x = _mha(8, 2, dropout=0.1, batch_first=True), torch.randn(1, 4, 8)
    got = measure(mha, x, x, x, train=True)
    assert (got.flops, got.dmas) == (2649 + 32, 864 + 64)


def test_four_dimensional_input_raises():
    mha = _mha(8, 2, batch_first=True)
    x = torch.zeros(1, 1, 4, 8)
    with pytest.raises(NotImplementedError, match="2-D .* or 3-D"):
        module_flops(mha, (x, x, x), None)
