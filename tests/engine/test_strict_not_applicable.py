"""Strict mode fails only on real incompleteness (docs/report-schema.md, strict mode).

A spatial receptive field does not apply to attention (token dependencies describe it): that is a
``metric_not_applicable`` diagnostic, not a missing number. ``strict=True`` (the reference's rule:
every count by every method) passes on plain ViT, GPT-2 and BERT models whose counts are complete
and raises where a module formula misses work that the operators counted; ``strict="headline"``
accepts that work (a count is complete when one of its methods is), and still raises where both
methods miss work.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_lsp import IncompleteAnalysisError, crawl_module

pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")


def _encoder(dim: int, heads: int, ff: int, depth: int, **options) -> nn.TransformerEncoder:
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, heads, ff, dropout=0.0, batch_first=True, **options), depth)


class PatchEmbed(nn.Module):
    def __init__(self, dim: int = 32, patch: int = 4) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # views only: no work outside a module


class ViT(nn.Module):
    def __init__(self, position: bool = False) -> None:
        super().__init__()
        self.patches = PatchEmbed()
        self.position = nn.Parameter(torch.zeros(1, 16, 32)) if position else None
        self.encoder = _encoder(32, 4, 64, 2)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.patches(x)
        if self.position is not None:
            x = x + self.position  # work in the container's own forward: no module formula sees it
        return self.head(self.norm(self.encoder(x))[:, 0])


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(50, 32)
        self.blocks = _encoder(32, 4, 128, 2, norm_first=True)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 50, bias=False)
        self.head.weight = self.tokens.weight  # tied
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(8), persistent=False)

    def forward(self, ids):
        return self.head(self.norm(self.blocks(self.tokens(ids), mask=self.causal, is_causal=True)))


class BERT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(50, 32)
        self.encoder = _encoder(32, 4, 128, 2)
        self.pooler = nn.Linear(32, 32)

    def forward(self, ids):
        return self.pooler(self.encoder(self.tokens(ids))[:, 0])


def _layer_macs(tokens: int, dim: int, ff: int) -> int:
    """One encoder layer (case P05): qkv L*3*d^2, out-proj L*d^2, FFN L*2*d*ff, QK^T + AV 2*L^2*d."""
    return tokens * 3 * dim * dim + tokens * dim * dim + tokens * 2 * dim * ff + 2 * tokens * tokens * dim


IDS = torch.arange(8).reshape(1, 8)
CASES = {
    # conv 32*3*4*4 per patch * 16 patches = 24576; 2 layers of L=16, d=32, ff=64; head 32*10 (one token)
    "vit": (ViT, (torch.rand(1, 3, 16, 16),), 24_576 + 2 * _layer_macs(16, 32, 64) + 320),
    # embedding 0; 2 layers of L=8, d=32, ff=128 (the causal mask does not change dense work);
    # LayerNorm 0; tied head 8*32*50
    "gpt2": (GPT, (IDS,), 2 * _layer_macs(8, 32, 128) + 12_800),
    # embedding 0; 2 layers of L=8, d=32, ff=128; pooler 32*32 on the first token
    "bert": (BERT, (IDS,), 2 * _layer_macs(8, 32, 128) + 1_024),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_passes_on_complete_attention_models(name):
    build, args, macs = CASES[name]
    report = crawl_module(build(), args=args, strict=True)  # used to raise "incomplete for: receptive_field"
    assert report["totals"]["macs"] == {**report["totals"]["macs"], "status": "complete", "value": macs}
    assert report["totals"]["operator_flops"]["status"] == "complete"
    not_applicable = [d for d in report["diagnostics"] if d["metric"] == "receptive_field"]
    assert not_applicable and all(d["code"] == "metric_not_applicable" for d in not_applicable)
    layer = next(layer for layer in report["layers"] if layer["type"] == "TransformerEncoderLayer")
    assert layer["metrics"]["receptive_field"]["status"] == "unavailable"
    assert layer["token_dependencies"]["dependencies"][0]["relation"] == ("causal" if name == "gpt2" else "all_tokens")


def test_strict_headline_accepts_work_only_the_operators_counted():
    # the position add escaped the module formulas, but the dispatcher counted it: FLOPs and MACs
    # are complete by one method, so strict="headline" (FLOPs, MACs, parameters) passes
    report = crawl_module(ViT(position=True), args=(torch.rand(1, 3, 16, 16),), strict="headline")
    assert report["totals"]["module_flops"]["status"] == "partial"
    assert report["totals"]["operator_flops"]["status"] == "complete"


def test_strict_true_refuses_work_only_the_operators_counted():
    # the reference's rule: the add (an element-wise op, no MACs) leaves module FLOPs and DMAs
    # partial; MACs stay complete (no matrix work escaped), the receptive field does not apply
    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(ViT(position=True), args=(torch.rand(1, 3, 16, 16),), strict=True)
    assert str(info.value) == "Analysis is incomplete for: flops (module_flops partial); dmas (dmas partial)."


def test_strict_true_raises_on_a_module_only_the_operators_count():
    # the case: no module formula covers a forward of torch.cumsum, which the operator
    # formulas count (an inclusive scan of 4 elements: 3 additions)
    class Scan(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, -1)

    assert crawl_module(Scan(), (4,), strict="headline")["totals"]["operator_flops"]["value"] == 4 - 1
    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(Scan(), (4,), strict=True)
    assert str(info.value) == ("Analysis is incomplete for: flops (module_flops partial); macs (macs partial); "
                               "dmas (dmas partial); receptive_field (incomplete in 1 call(s)).")


def test_strict_dmas_raises_on_the_partial_dmas():
    # DMAs have one method, the module formulas: the add they did not see makes them partial;
    # the receptive field is asked for too and not named: it does not apply to attention
    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(ViT(position=True), args=(torch.rand(1, 3, 16, 16),), strict=["dmas", "receptive_field"])
    assert str(info.value) == "Analysis is incomplete for: dmas (dmas partial)."


def test_strict_still_raises_when_both_methods_miss_work():
    class Odd(nn.Module):  # a leaf without a module formula, running an operator without a FLOP formula
        def forward(self, x):
            return torch.special.bessel_j0(x)

    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(nn.Sequential(_encoder(32, 4, 64, 1), Odd()), args=(torch.rand(1, 4, 32),), strict="headline")
    assert str(info.value) == ("Analysis is incomplete for: flops (module_flops partial, operator_flops partial); "
                               "macs (macs partial, operator_macs partial).")
