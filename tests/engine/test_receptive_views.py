"""Views of parameters and patch grids in the cumulative receptive field (docs/metrics.md).

A learned token (``nn.Parameter``) initialised in place has version 1 before the forward; a view
of it made in the forward (``expand``) shares that counter. The data flow must not mistake that for
an in-place change it missed. Expected fields by the composition rule ``rf' = rf + (k - 1)·jump``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module


def _field(report, path):
    (layer,) = [layer for layer in report["layers"] if layer["path"] == path]
    metric = layer["metrics"]["receptive_field"]
    return metric["status"], metric["value"]


def _causes(report):
    return [d["message"] for d in report["diagnostics"] if d["code"] == "receptive_field_path"]


class TokenChannel(nn.Module):
    """conv 3x3, then a learned channel (expanded parameter) concatenated, then conv 3x3."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 4, 3, padding=1)
        self.token = nn.Parameter(torch.empty(1, 1, 8, 8))
        nn.init.zeros_(self.token)  # in place: version 1, as transformers' initialisation leaves it
        self.second = nn.Conv2d(5, 4, 3, padding=1)

    def forward(self, x):
        return self.second(torch.cat([self.first(x), self.token.expand(x.shape[0], -1, -1, -1)], dim=1))


def test_an_expanded_parameter_is_not_taken_for_an_in_place_change():
    assert TokenChannel().token._version == 1
    report = crawl_module(TokenChannel(), (3, 8, 8))
    # the token depends on no input; the channels of the first conv carry field 3; the second conv
    # adds (3 - 1)·1: 3 + 2 = 5, complete, and nothing is said about an in-place change
    assert _field(report, "second") == ("complete", 5)
    assert not any("modified in place" in cause for cause in _causes(report))


class PatchViT(nn.Module):
    """A ViT's embeddings: patch conv, flatten(2).transpose(1, 2), CLS token concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.projection = nn.Conv2d(3, 8, 4, stride=4)
        self.cls_token = nn.Parameter(torch.empty(1, 1, 8))
        nn.init.normal_(self.cls_token)  # in place, as transformers' ViT initialises it
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        patches = self.projection(x).flatten(2).transpose(1, 2)
        return self.norm(torch.cat((self.cls_token.expand(x.shape[0], -1, -1), patches), dim=1))


def test_a_vit_patch_grid_names_the_flatten_not_an_in_place_change():
    report = crawl_module(PatchViT(), (3, 8, 8))
    # the (1, 8, 2, 2) patch grid becomes (1, 8, 4): two spatial axes flattened into one sequence;
    # that is where the field is lost, before the CLS token is concatenated
    assert _field(report, "norm") == ("unavailable", None)
    (cause,) = _causes(report)
    assert cause == ("The cumulative receptive field of 'norm' is unavailable: aten.view in the root module "
                     "flattened the spatial axes into one ((1, 8, 2, 2) -> (1, 8, 4)).")


def test_transformers_vit_names_the_real_cause():
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=64, image_size=32, patch_size=8)
    model = transformers.ViTModel(config).eval()
    report = crawl_module(model, args=(torch.rand(1, 3, 32, 32),))
    causes = _causes(report)
    # 32 / 8 = 4: the (1, 32, 4, 4) patch grid is flattened to 16 positions in the patch embeddings
    assert causes[0] == ("The cumulative receptive field of 'embeddings.dropout' is unavailable: aten.view in "
                         "'embeddings.patch_embeddings' flattened the spatial axes into one ((1, 32, 4, 4) -> "
                         "(1, 32, 16)).")
    assert not any("modified in place" in cause for cause in causes)
