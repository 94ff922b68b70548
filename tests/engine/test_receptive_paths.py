"""Cumulative receptive field along the executed path (docs/metrics.md).

Every expected value is derived by hand in the comments with the composition rule
``rf' = rf + (k_eff - 1)·jump``, ``jump' = jump·s``, ``padding' = padding + p·jump``
(``k_eff = d·(k - 1) + 1``), or by counting input elements directly.
"""

from __future__ import annotations

import json

import torch
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module

RF = ("receptive_field", "effective_stride", "effective_padding")
LOCAL = ("local_receptive_field", "local_stride", "local_padding")


def fields(report, names=RF):
    """path -> (rf, jump, padding) values (None when not complete)."""
    return {
        layer["path"]: tuple(layer["metrics"][n]["value"] for n in names)
        for layer in report["layers"]
        if names[0] in layer["metrics"]
    }


def statuses(report, path):
    (layer,) = [layer for layer in report["layers"] if layer["path"] == path]
    return tuple(layer["metrics"][n]["status"] for n in RF)


def rf_diagnostics(report):
    return [d for d in report["diagnostics"] if d["code"] == "receptive_field_path"]


def test_three_3x3_convs_grow_by_two():
    # 3, then 3 + 2·1 = 5, then 5 + 2·1 = 7; stride 1 throughout; no padding
    model = nn.Sequential(nn.Conv2d(1, 1, 3), nn.Conv2d(1, 1, 3), nn.Conv2d(1, 1, 3))
    report = crawl_module(model, (1, 16, 16))
    assert fields(report) == {"0": (3, 1, 0), "1": (5, 1, 0), "2": (7, 1, 0)}
    # the module-local values stay beside them
    assert fields(report, LOCAL) == {"0": (3, 1, 0), "1": (3, 1, 0), "2": (3, 1, 0)}
    assert rf_diagnostics(report) == []
    assert json.loads(json.dumps(report)) == report


def test_strided_conv_multiplies_the_jump():
    # conv3x3 s2 p1: (3, 2, 1); conv3x3 p1: rf 3 + 2·2 = 7, jump 2, padding 1 + 1·2 = 3
    model = nn.Sequential(nn.Conv2d(1, 1, 3, stride=2, padding=1), nn.Conv2d(1, 1, 3, padding=1))
    report = crawl_module(model, (1, 16, 16))
    assert fields(report) == {"0": (3, 2, 1), "1": (7, 2, 3)}


def test_dilation_uses_the_effective_kernel():
    # k3 d2: k_eff = 2·(3 - 1) + 1 = 5; then k3 d1: 5 + 2·1 = 7; then k3 d4: k_eff 9, 7 + 8 = 15
    model = nn.Sequential(nn.Conv1d(1, 1, 3, dilation=2), nn.Conv1d(1, 1, 3), nn.Conv1d(1, 1, 3, dilation=4))
    report = crawl_module(model, (1, 40))
    assert fields(report) == {"0": (5, 1, 0), "1": (7, 1, 0), "2": (15, 1, 0)}


def test_pooling_and_pointwise_modules_compose():
    # conv3x3 p1 (3, 1, 1) -> BatchNorm, ReLU keep it -> MaxPool2d(2): 3 + 1·1 = 4, jump 2, padding 1
    # -> conv3x3: 4 + 2·2 = 8, jump 2, padding 1 + 0·2 = 1
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(inplace=True), nn.MaxPool2d(2), nn.Conv2d(2, 2, 3)
    )
    report = crawl_module(model, (1, 16, 16))
    assert fields(report) == {"0": (3, 1, 1), "1": (3, 1, 1), "2": (3, 1, 1), "3": (4, 2, 1), "4": (8, 2, 1)}


def test_padding_same_gives_numbers_not_strings():
    # padding="same", k3: PyTorch pads 1 before; two of them: rf 5, padding 1 + 1 = 2.
    # k4 "same" pads d·(k - 1) // 2 = 1 before (the extra element goes after): rf 5 + 3 = 8, padding 3
    model = nn.Sequential(nn.Conv1d(1, 1, 3, padding="same"), nn.Conv1d(1, 1, 3, padding="same"),
                          nn.Conv1d(1, 1, 4, padding="same"))
    report = crawl_module(model, (1, 20))
    assert fields(report) == {"0": (3, 1, 1), "1": (5, 1, 2), "2": (8, 1, 3)}
    assert all(isinstance(v, int) for values in fields(report).values() for v in values)


def test_transposed_convolution_fractional_jump():
    # ConvTranspose1d(k=2, s=2): each output element comes from exactly one input element (rf 1)
    # and two outputs share an input (jump 1/2). A following conv k3 reads 3 consecutive upsampled
    # elements u[i..i+2], which come from at most 2 input elements: rf 1 + 2·(1/2) = 2.
    model = nn.Sequential(nn.ConvTranspose1d(1, 1, 2, stride=2), nn.Conv1d(1, 1, 3))
    report = crawl_module(model, (1, 10))
    values = fields(report)
    assert values["0"][:2] == (1, 0.5)
    assert values["1"][:2] == (2, 0.5)
    assert all(v >= 0 and not isinstance(v, str) for v in (*values["0"], *values["1"]))


def test_transposed_convolution_stride_one_is_a_convolution():
    # ConvTranspose1d(k3, s1, p1) equals a conv k3 p1: local (3, 1, (2 - 1)/1 = 1); after a conv k3 p1:
    # rf 3 + 2 = 5, jump 1, padding 1 + 1 = 2
    model = nn.Sequential(nn.Conv1d(1, 1, 3, padding=1), nn.ConvTranspose1d(1, 1, 3, padding=1))
    report = crawl_module(model, (1, 10))
    assert fields(report)["1"] == (5, 1, 2)


class Residual(nn.Module):
    """y = c2(c1(x)) + x, then a strided conv."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(2, 2, 3, padding=1)
        self.c2 = nn.Conv2d(2, 2, 3, padding=1)
        self.c3 = nn.Conv2d(2, 2, 3, stride=2)

    def forward(self, x):
        return self.c3(self.c2(self.c1(x)) + x)


def test_residual_add_is_the_union_of_both_branches():
    # c1: (3, 1, 1); c2: (5, 1, 2). The skip branch x is the input: (1, 1, 0).
    # Output element i depends on input [i - 2, i + 2] (conv path) ∪ [i, i] (skip) = 5 elements
    # starting 2 before: (5, 1, 2). c3 (k3 s2): 5 + 2·1 = 7, jump 2, padding 2 + 0 = 2.
    report = crawl_module(Residual(), (2, 16, 16))
    assert fields(report) == {"c1": (3, 1, 1), "c2": (5, 1, 2), "c3": (7, 2, 2)}
    assert rf_diagnostics(report) == []


class TwoScales(nn.Module):
    """Adds a stride-2 branch of an input of 16 to a stride-1 branch of an input of 8."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv1d(1, 1, 2, stride=2)
        self.same = nn.Conv1d(1, 1, 3, padding=1)
        self.head = nn.Conv1d(1, 1, 1)

    def forward(self, big, small):
        return self.head(self.down(big) + self.same(small))


def test_merging_branches_of_different_strides_is_partial_with_a_diagnostic():
    # down: (2, 2, 0); same: (3, 1, 1). Jumps 2 and 1 cannot be one field: the union's field is at
    # least the larger branch field, 3 -> partial, known 3; stride and padding unavailable.
    report = crawl_module(TwoScales(), args=(torch.rand(1, 1, 16), torch.rand(1, 1, 8)))
    (head,) = [layer["metrics"] for layer in report["layers"] if layer["path"] == "head"]
    assert head["receptive_field"]["status"] == "partial" and head["receptive_field"]["known_value"] == 3
    assert head["effective_stride"]["status"] == head["effective_padding"]["status"] == "unavailable"
    (diag,) = rf_diagnostics(report)
    assert diag["path"] == "head" and "aten.add" in diag["message"] and "different effective strides" in diag["message"]


class SpatialConcat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, 1, 3)
        self.b = nn.Conv1d(1, 1, 3)

    def forward(self, x):
        return self.b(torch.cat([self.a(x), x], dim=2))


def test_concatenation_along_the_spatial_axis_is_unavailable_with_a_diagnostic():
    report = crawl_module(SpatialConcat(), (1, 10))
    assert statuses(report, "b") == ("unavailable",) * 3
    (diag,) = rf_diagnostics(report)
    assert diag["path"] == "b" and "aten.cat in the root module" in diag["message"] and "spatial axis" in diag["message"]


class ChannelConcat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, 1, 5, padding=2)
        self.b = nn.Conv1d(1, 1, 3, padding=1)
        self.head = nn.Conv1d(2, 1, 1)

    def forward(self, x):
        return self.head(torch.cat([self.a(x), self.b(x)], dim=1))


def test_concatenation_of_channels_merges_the_branches():
    # a: (5, 1, 2); b: (3, 1, 1); element i depends on [i - 2, i + 2] ∪ [i - 1, i + 1]: (5, 1, 2)
    report = crawl_module(ChannelConcat(), (1, 12))
    assert fields(report)["head"] == (5, 1, 2)


class Cached(nn.Module):
    """Adds a tensor kept as a plain attribute: not an input, parameter or buffer of the model."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 1, 3)
        self.head = nn.Conv1d(1, 1, 3)
        self.cache = torch.rand(1, 1, 8)

    def forward(self, x):
        return self.head(self.conv(x) + self.cache)


def test_a_branch_the_crawler_cannot_follow_gives_a_lower_bound():
    # the followed branch has field 3, so the sum depends on at least 3 input elements; head: partial
    report = crawl_module(Cached(), (1, 10))
    head = [layer["metrics"] for layer in report["layers"] if layer["path"] == "head"][0]
    assert head["receptive_field"]["status"] == "partial" and head["receptive_field"]["known_value"] == 3
    (diag,) = rf_diagnostics(report)
    assert diag["path"] == "head" and "not produced by a module call or operator" in diag["message"]


def test_flatten_then_linear_sees_every_position():
    # conv k3 on width 8 -> 6 positions, field 3, jump 1. Flatten folds the 6 positions into the
    # features; the Linear combines all of them: 3 + (6 - 1)·1 = 8, the whole input width.
    model = nn.Sequential(nn.Conv2d(1, 1, 3), nn.ReLU(), nn.Flatten(), nn.Linear(36, 4), nn.ReLU(), nn.Linear(4, 2))
    report = crawl_module(model, (1, 8, 8))
    values = fields(report)
    assert values["2"] == (3, 1, 0)  # each flattened element still depends on one window
    assert values["3"][0] == 8 and values["5"][0] == 8


class FunctionalFlatten(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3, stride=2)
        self.fc = nn.Linear(2 * 4, 3)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1))


def test_flatten_in_a_container_is_followed():
    # conv k3 s2 on width 9 -> 4 positions, (3, 2, 0); flatten(1) in the container folds 4 positions;
    # fc: 3 + (4 - 1)·2 = 9: the whole input
    report = crawl_module(FunctionalFlatten(), (1, 9))
    assert fields(report)["fc"][0] == 9


def test_attention_breaks_the_chain_once():
    # MultiheadAttention has no spatial field: it and everything after it are unavailable, with the
    # module's own diagnostic and no repeated path diagnostics downstream
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.fc1 = nn.Linear(8, 8)
            self.fc2 = nn.Linear(8, 8)

        def forward(self, x):
            return self.fc2(self.fc1(self.attn(x, x, x, need_weights=False)[0]))

    report = crawl_module(Model(), (5, 8))
    for path in ("attn", "fc1", "fc2"):
        assert statuses(report, path) == ("unavailable",) * 3
    assert rf_diagnostics(report) == []
    assert any(d["path"] == "attn" and d["metric"] == "receptive_field" for d in report["diagnostics"] if "path" in d)


def test_table_shows_cumulative_values_and_lower_bounds(capsys):
    from torchscan_lsp.engine.reporting.summary import summary

    summary(TwoScales(), args=(torch.rand(1, 1, 16), torch.rand(1, 1, 8)), receptive_field=True)
    rows = capsys.readouterr().out.splitlines()
    (head,) = [row for row in rows if row.startswith("├─head")]
    assert head.split()[-1] == "≥3"  # a lower bound of 3


class SqueezeExcite(nn.Module):
    """y = conv(x); y · sigmoid(fc(pool(y))): the scale is one position broadcast over all of them."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Conv2d(2, 2, 1)
        self.head = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        y = self.conv(x)
        return self.head(y * torch.sigmoid(self.fc(self.pool(y))))


def test_broadcast_scale_makes_every_position_see_the_whole_input():
    # conv k3 p1 on 8 positions: (3, 1, 1). The global pool's window is all 8 positions:
    # 3 + (8 - 1)·1 = 10, jump 8, padding 1: input [-1, 8]. y·scale at position i depends on
    # [i - 1, i + 1] ∪ [-1, 8] = [-1, 8] for every i: field 10, stride 1 (y's), padding 1.
    report = crawl_module(SqueezeExcite(), (2, 8, 8))
    values = fields(report)
    assert values["pool"] == (10, 8, 1)
    assert values["head"] == (10, 1, 1)
    assert rf_diagnostics(report) == []
