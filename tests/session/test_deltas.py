"""A result against its baseline (session/deltas.py) and the labels the editor makes of it
(server/labels.py, inlay_hints.py, comparison_card.py, code_lens.py), on reports of real models.

The numbers are derived by hand: Conv2d(3, c, 3) on (1, 3, 32, 32) has 27c + c parameters and
c·30·30 outputs of 2·27 FLOPs each (27 products, 26 sums, the bias), so widening it from 8 to 12
channels adds 4·28 = 112 parameters and 4·900·54 = 194,400 FLOPs: +50 %.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.server.code_lens import build_code_lenses
from torchscan_lsp.engine.reporting.html import render_report
from torchscan_lsp.server.comparison_card import comparison_card, layer_table
from torchscan_lsp.server.inlay_hints import module_label
from torchscan_lsp.server.labels import totals_label
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.deltas import Change, compare_views, metric_change
from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.state import TargetKey, TargetState


def view(model: nn.Module, shape=(3, 32, 32), **options) -> ResultView:
    return ResultView({"ok": True, "report": crawl_module(model.eval(), shape, **options), "source_map": {},
                       "imported_files": []})


def conv(channels: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, channels, 3))


def params(c: int) -> int:
    return 27 * c + c


def flops(c: int) -> int:
    return c * 30 * 30 * 54


@pytest.fixture(scope="module")
def widened():
    return compare_views(view(conv(8)), view(conv(12)), "HEAD", "1a2b3c4")


def test_totals_and_a_layer_change_by_hand(widened):
    assert (params(8), params(12), flops(8), flops(12)) == (224, 336, 388_800, 583_200)
    assert widened.total("parameters") == Change(224, 336)
    assert widened.total("operator_flops") == Change(388_800, 583_200)
    assert widened.total("module_flops").delta == 194_400          # the other method agrees
    assert widened.line_change(["0"], "operator_flops") == (Change(224, 336), Change(388_800, 583_200))
    (row,) = widened.layer_rows("operator_flops")
    assert (row.path, row.kind, row.type, row.params, row.flops) == ("0", "changed", "Conv2d", Change(224, 336),
                                                                     Change(388_800, 583_200))
    assert [meta["shape"] for meta in row.shapes] == [[1, 8, 30, 30], [1, 12, 30, 30]]


def test_labels_carry_the_changes(widened):
    current = widened.current
    assert totals_label(current.totals, "operators", widened) == (
        "336 params (+112) · 583 kFLOPs (+50 %)")   # the MACs (12·900·27 = 291,600) in the hover and lens
    label, tooltip = module_label(current, ["0"], "operators", widened)
    assert label == "336 params (+112) · 583 kFLOPs (+50 %)"
    assert "Since HEAD (1a2b3c4): parameters 224 → 336 (+112); FLOPs 389 kFLOPs → 583 kFLOPs (+50 %)" in tooltip
    card = comparison_card(widened, "operators")
    assert card.startswith("**Changes since HEAD (1a2b3c4)**: +112 params · +50 % MACs · +50 % FLOPs")
    assert ("| `0` | Conv2d | changed | 224 → 336 (+112) | 389 kFLOPs → 583 kFLOPs (+50 %) "
            "| (1, 8, 30, 30) → (1, 12, 30, 30) |") in card


def test_the_full_diff_page_has_the_hovers_layer_table(widened, tmp_path):
    # the page the Compare lens opens: the diff with every row of the hover's table, parameters,
    # FLOPs and output shapes before and after (224 → 336, 388,800 → 583,200 FLOPs, 8 → 12 channels)
    page = render_report({**widened.diff, "layer_table": layer_table(widened, "operators")}, tmp_path / "diff.html")
    text = page.read_text(encoding="utf-8")
    assert "<h2>Per layer</h2>" in text
    assert ("<tr><td>0</td><td>Conv2d</td><td>changed</td><td>224 → 336 (+112)</td>"
            "<td>389 kFLOPs → 583 kFLOPs (+50 %)</td><td>(1, 8, 30, 30) → (1, 12, 30, 30)</td></tr>") in text


def test_the_compare_lens_names_the_baseline_and_the_change(widened):
    state = TargetState(TargetKey("/ws", "m.py", "build"), SimpleNamespace(name="build", line=3, options={}),
                        view=widened.current, comparison=widened)
    titles = [lens.command.title for lens in build_code_lenses("file:///ws/m.py", Lines("a\nb\ndef build():\n", len),
                                                               [state])]
    assert titles[-1] == "Compare with HEAD: +112 params · +50 % FLOPs"
    assert build_code_lenses("file:///ws/m.py", Lines("a\nb\ndef build():\n", len), [state])[-1].command.command == \
        "torchscan.compareReport"


def test_no_number_changed_no_delta():
    same = compare_views(view(conv(8)), view(conv(8)), "HEAD")
    assert same.unchanged("operator_flops", "operator_macs")
    assert totals_label(same.current.totals, "operators", same) == "224 params · 194 kMACs · 389 kFLOPs"
    assert module_label(same.current, ["0"], "operators", same)[0] == "224 params · 389 kFLOPs"
    assert comparison_card(same) == "**No change since HEAD**."


def test_an_added_layer_is_new_and_one_row():
    # Sequential(Conv2d(3, 8, 3)) -> Sequential(Conv2d(3, 8, 3), Flatten, Linear(7200, 10)):
    # the Linear adds 7200·10 + 10 = 72,010 parameters and 10·(2·7200) = 144,000 FLOPs (a bias add
    # each, counted in addmm's 2·in·out: 72,000 products and 72,000 sums)
    before = view(conv(8))
    after = view(nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(7200, 10)))
    comparison = compare_views(before, after, "main")
    assert comparison.total("parameters").delta == 72_010
    assert module_label(after, ["2"], "operators", comparison)[0].endswith(" (new)")
    rows = {row.path: row for row in comparison.layer_rows("operator_flops")}
    assert (rows["2"].kind, rows["2"].params, rows["2"].flops) == ("added", Change(None, 72_010), Change(None, 144_000))


def test_a_change_between_lower_bounds_is_said_as_such():
    class QR(nn.Module):
        """A Linear then torch.linalg.qr, which has no FLOP formula: the counts are lower bounds."""

        def __init__(self, width):
            super().__init__()
            self.lin = nn.Linear(4, width)

        def forward(self, x):
            return torch.linalg.qr(self.lin(x))[0]

    comparison = compare_views(view(QR(4), (4, 4)), view(QR(8), (4, 4)), "HEAD")
    change = comparison.total("operator_flops")
    assert change.known
    # the Linear's FLOPs, 2·rows·in·out: 2·4·4·4 = 128 → 2·4·4·8 = 256, +128; the qr's are not counted either side
    assert (change.before, change.after) == (128, 256)
    label = totals_label(comparison.current.totals, "operators", comparison)
    # 4·4 + 4 = 20 → 4·8 + 8 = 40 parameters: exact, counted on both sides
    assert label == "40 params (+20) · ≥ 256 FLOPs (+128 known)"


def test_metric_change_follows_the_status_rules():
    complete = {"status": "complete", "value": 10, "known_value": 10}
    partial = {"status": "partial", "value": None, "known_value": 7}
    unavailable = {"status": "unavailable", "value": None, "known_value": None}
    assert metric_change(complete, {**complete, "value": 12, "known_value": 12}) == Change(10, 12)
    assert metric_change(complete, partial) == Change(10, 7, known=True)
    assert metric_change(complete, unavailable).delta is None
    assert metric_change(None, complete).changed and not metric_change(None, None).changed


def test_reports_that_do_not_compare_give_the_reason():
    full, structure = view(conv(8)), view(conv(8), mode="structure")
    refused = compare_views(structure, full, "HEAD")
    assert not refused.ready and refused.note.startswith("the two reports do not compare: metric ")
    assert comparison_card(refused).startswith("No delta against HEAD: the two reports do not compare")


def _built_on_one_line(model: nn.Module) -> ResultView:
    """``model`` (a ``Sequential``) as built on line 5 of ``net.py``, root and children alike (a
    factory's ``return nn.Sequential(A(), B())``), its first child's class defined on line 2."""
    report = crawl_module(model.eval(), (4,))
    modules = [{"layer": index, "defined_at": {"file": "net.py", "line": 5}, "called_at": None}
               for index in range(len(report["layers"]))]
    return ResultView({"ok": True, "report": report, "imported_files": [], "source_map": {
        "modules": modules, "classes": [{"file": "net.py", "line": 2, "name": "A", "paths": ["0"]}]}})


def test_the_summaries_hints_compare_are_computed_ahead_on_both_sides(monkeypatch):
    # Linear(4, 4) then Linear(4, 2) on one token: 20 + 10 parameters, 2·4·4 + 2·4·2 = 48 FLOPs by
    # the dispatcher; the baseline had the first alone: 20 parameters, 32 FLOPs
    baseline = _built_on_one_line(nn.Sequential(nn.Linear(4, 4)))
    current = _built_on_one_line(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)))
    assert sorted(current.hint_paths("net.py")) == [[""], ["0"]]     # the factory line, the class line
    comparison = compare_views(baseline, current, "HEAD")
    comparison.warm("net.py")

    def computed_again(*_):
        raise AssertionError("a summary the hints show was not computed ahead")

    monkeypatch.setattr("torchscan_lsp.session.results.subtree_layers", computed_again)
    assert comparison.line_change([""], "operator_flops") == (Change(20, 30), Change(32, 48))
    assert comparison.line_change(["0"], "operator_flops") == (Change(20, 20), Change(32, 32))
