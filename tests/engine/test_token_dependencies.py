"""Token dependencies of attention and Transformer calls (docs/report-schema.md)."""

from __future__ import annotations

import torch
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module


def deps(report, path=""):
    (layer,) = [layer for layer in report["layers"] if layer["path"] == path]
    return layer["token_dependencies"]["dependencies"]


def token_diags(report):
    return [d for d in report["diagnostics"] if d["code"] == "token_dependencies_unknown"]


def mha(batch_first=True):
    return nn.MultiheadAttention(8, 2, batch_first=batch_first)


def test_unmasked_self_attention_sees_all_tokens_and_has_no_spatial_field():
    x = torch.rand(1, 6, 8)
    report = crawl_module(mha(), args=(x, x, x))
    (dep,) = deps(report)
    assert dep["relation"] == "all_tokens"
    assert dep["query_axis"] == {"role": "query", "dim": 1, "length": 6}
    assert dep["key_axis"] == {"role": "key", "dim": 1, "length": 6}
    metrics = report["layers"][0]["metrics"]
    for name in ("receptive_field", "effective_stride", "effective_padding"):
        assert metrics[name]["status"] == "unavailable"
    assert token_diags(report) == []


def test_cross_attention_distinguishes_query_and_key_axes_sequence_first():
    # batch_first=False: (L, N, E) — the sequence is dimension 0; 4 queries attend to 7 keys
    q, kv = torch.rand(4, 2, 8), torch.rand(7, 2, 8)
    report = crawl_module(mha(batch_first=False), args=(q, kv, kv), kwargs={"need_weights": False})
    (dep,) = deps(report)
    assert dep["query_axis"] == {"role": "query", "dim": 0, "length": 4}
    assert dep["key_axis"] == {"role": "key", "dim": 0, "length": 7}
    assert dep["relation"] == "all_tokens"


def test_causal_masks_are_recognised_by_their_pattern():
    x = torch.rand(1, 5, 8)
    float_mask = nn.Transformer.generate_square_subsequent_mask(5)  # -inf above the diagonal
    bool_mask = torch.ones(5, 5, dtype=torch.bool).triu(1)  # True = not allowed, above the diagonal
    for mask in (float_mask, bool_mask):
        report = crawl_module(mha(), args=(x, x, x), kwargs={"attn_mask": mask})
        (dep,) = deps(report)
        assert dep["relation"] == "causal", dep
        assert "attn_mask is causal" in dep["reason"]


def test_is_causal_flag():
    x = torch.rand(1, 5, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    report = crawl_module(mha(), args=(x, x, x), kwargs={"attn_mask": mask, "is_causal": True})
    assert deps(report)[0]["relation"] == "causal" and deps(report)[0]["reason"] == "is_causal=True"


def test_all_visible_and_bias_masks_are_all_tokens():
    x = torch.rand(1, 4, 8)
    for mask in (torch.zeros(4, 4, dtype=torch.bool), torch.full((4, 4), 0.5)):
        report = crawl_module(mha(), args=(x, x, x), kwargs={"attn_mask": mask})
        assert deps(report)[0]["relation"] == "all_tokens"


def test_arbitrary_mask_is_unknown_with_a_diagnostic():
    # a band: query i sees keys i-1..i+1 only — neither all-visible nor causal
    x = torch.rand(1, 5, 8)
    idx = torch.arange(5)
    band = (idx[:, None] - idx[None, :]).abs() > 1
    report = crawl_module(mha(), args=(x, x, x), kwargs={"attn_mask": band})
    (dep,) = deps(report)
    assert dep["relation"] == "unknown"
    # 25 pairs, 13 visible (5 diagonal + 2·4 neighbours): 12 blocked
    assert "blocks 12 of 25" in dep["reason"]
    (diag,) = token_diags(report)
    assert diag["path"] == "" and diag["metric"] == "token_dependencies"


def test_key_padding_mask_is_unknown():
    x = torch.rand(2, 4, 8)
    padding = torch.tensor([[False, False, False, True], [False, False, False, False]])
    report = crawl_module(mha(), args=(x, x, x), kwargs={"key_padding_mask": padding})
    (dep,) = deps(report)
    assert dep["relation"] == "unknown" and "hides 1 of 4" in dep["reason"]


def test_encoder_layer_self_attention_and_token_local_children():
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    x = torch.rand(1, 6, 16)
    mask = nn.Transformer.generate_square_subsequent_mask(6)
    report = crawl_module(layer, args=(x,), kwargs={"src_mask": mask})
    (dep,) = deps(report)
    assert dep["stage"] == "self_attention" and dep["relation"] == "causal"
    assert dep["query_axis"] == dep["key_axis"] == {"role": "src", "dim": 1, "length": 6}


def test_layer_norm_and_feed_forward_are_token_local():
    model = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    report = crawl_module(model, (5, 8))
    for path in ("0", "1", "3"):
        (dep,) = deps(report, path)
        assert dep["relation"] == "token_local"
    # a 2-D input has no token axis: no record
    flat = crawl_module(nn.Linear(8, 2), (8,))
    assert "token_dependencies" not in flat["layers"][0]


def test_decoder_layer_has_self_and_cross_stages():
    layer = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    tgt, memory = torch.rand(1, 4, 16), torch.rand(1, 7, 16)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    report = crawl_module(layer, args=(tgt, memory), kwargs={"tgt_mask": mask})
    by_stage = {d["stage"]: d for d in deps(report)}
    assert by_stage["self_attention"]["relation"] == "causal"
    assert by_stage["cross_attention"]["relation"] == "all_tokens"
    assert by_stage["cross_attention"]["query_axis"]["length"] == 4
    assert by_stage["cross_attention"]["key_axis"] == {"role": "memory", "dim": 1, "length": 7}


def test_masks_on_the_meta_device_are_unknown_unless_is_causal():
    with torch.device("meta"):
        attention = mha()
        x = torch.empty(1, 5, 8)
        band = torch.zeros(5, 5, dtype=torch.bool)
    report = crawl_module(attention, args=(x, x, x), kwargs={"attn_mask": band})
    (dep,) = deps(report)
    assert dep["relation"] == "unknown" and "meta" in dep["reason"]
    unmasked = crawl_module(attention, args=(x, x, x))
    assert deps(unmasked)[0]["relation"] == "all_tokens"
