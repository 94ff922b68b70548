"""summary() and its table (README.md's summary table)."""

import copy

import pytest
import torch
from torch import nn

from torchscan_lsp import IncompleteAnalysisError, crawl_module, summary
from torchscan_lsp.engine.reporting.table import (
    aggregate_info,
    format_info,
    format_line_str,
    format_name,
    format_s,
    unit_scale,
    wrap_string,
)

CONV_TABLE = """\
__________________________________________________________
Layer     Type      Output Shape      Param #    Trainable
==========================================================
conv2d    Conv2d    (1, 8, 30, 30)    224        True     
==========================================================
Trainable params: 224
Non-trainable params: 0
Total params: 224
----------------------------------------------------------
Model size (params + buffers): 0.00 Mb
----------------------------------------------------------
Module-formula forward FLOPs: 388.80 kFLOPs
Module-formula forward MACs: 194.40 kMACs
Module-formula forward DMAs: 201.82 kDMAs
Operator forward FLOPs: 388.80 kFLOPs
Operator forward MACs: 194.40 kMACs
__________________________________________________________
"""


class Unsup(nn.Module):
    def forward(self, x):
        return x * 2


def partial_model():
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Sequential(nn.MaxPool2d(2), Unsup()),
        nn.Flatten(), nn.LayerNorm(64), nn.Linear(64, 2),
    )


def test_reference_table(capsys):
    report = summary(nn.Conv2d(3, 8, 3), (3, 32, 32))
    assert capsys.readouterr().out == CONV_TABLE
    assert report["totals"]["module_flops"]["value"] == 388800


def test_summary_returns_what_crawl_module_returns(capsys):
    model = partial_model()
    report = summary(model, (3, 8, 8), max_depth=1)
    again = crawl_module(model, (3, 8, 8))
    for report_ in (report, again):
        report_["context"].pop("python_version")
    assert report == again  # unfiltered, whatever max_depth printed
    out = capsys.readouterr().out
    assert "└─0" not in out and "├─3" in out


def test_nested_table_with_receptive_field_columns(capsys):
    summary(partial_model(), (3, 8, 8), receptive_field=True, effective_rf_stats=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "Layer         Type           Output Shape    Param #    Trainable    Receptive field    "
        "Effective stride    Effective padding"
    )
    rows = [line.rstrip() for line in lines[3:13]]
    assert rows[0] == "sequential    Sequential     (1, 2)          0          -            ?                  ?                   ?"
    assert rows[1] == "├─0           Conv2d         (1, 4, 8, 8)    112        True         3                  1                   1"
    # cumulative (docs/metrics.md): BatchNorm keeps the conv's field; MaxPool2d(2): 3 + (2 - 1)·1 = 4, jump 2
    assert rows[2] == "├─1           BatchNorm2d    (1, 4, 8, 8)    17         True         3                  1                   1"
    assert rows[4] == "├─3           Sequential     (1, 4, 4, 4)    0          -            ?                  ?                   ?"
    assert rows[5] == "|    └─0      MaxPool2d      (1, 4, 4, 4)    0          -            4                  2                   1"
    assert rows[6] == "|    └─1      Unsup          (1, 4, 4, 4)    0          -            ?                  ?                   ?"
    assert all(len(line) == len(lines[0]) for line in lines[1:14] if not line.startswith(("=", "_")))
    text = "\n".join(lines)
    assert "Module-formula forward FLOPs: known " in text
    assert "Diagnostics: " in text and "(inspect report['diagnostics'])" in text


def test_six_columns_with_receptive_field_only(capsys):
    summary(nn.Conv2d(3, 8, 3), (3, 32, 32), receptive_field=True)
    header = capsys.readouterr().out.splitlines()[1]
    assert header.split("    ")[-1].strip() == "Receptive field"


def test_structure_mode_footer(capsys):
    summary(partial_model(), (3, 8, 8), mode="structure")
    out = capsys.readouterr().out
    for label in ("Module-formula forward FLOPs", "Module-formula forward MACs", "Module-formula forward DMAs", "Operator forward FLOPs",
                  "Operator forward MACs"):
        assert f"{label}: unavailable" in out
    assert "Diagnostics" not in out


def test_strict_summary_raises_before_printing(capsys):
    with pytest.raises(IncompleteAnalysisError):
        summary(partial_model(), (3, 8, 8), strict=["dmas"])  # Unsup has no module formula
    assert capsys.readouterr().out == ""


def test_summary_accepts_provided_inputs(capsys):
    report = summary(nn.Linear(3, 2), args=(torch.rand(4, 3),), dtype=None)
    assert report["inputs"]["source"] == "provided"
    assert "(4, 2)" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------------
# helpers


def test_format_name():
    assert format_name("conv", 0) == "conv"
    assert format_name("conv", 1) == "├─conv"
    assert format_name("conv", 3) == "|    |    └─conv"


def test_wrap_string():
    assert wrap_string("short", 10) == "short"
    assert wrap_string("abcdefghijkl", 10, mode=None) == "abcdefghijkl"
    assert wrap_string("abcdefghijkl", 10, mode="end") == "abcde[...]"
    assert wrap_string("features.block.conv", 15, mode="mid") == "featu[...].conv"
    with pytest.raises(ValueError):
        wrap_string("abcdefghijkl", 5, mode="left")


def test_a_name_cut_to_a_narrow_column_says_so():
    report = crawl_module(nn.Sequential(), (2,))
    report = copy.deepcopy(report)
    layer = dict(report["layers"][0], name="a_really_long_module_name_abcdef", depth=1)
    assert len(layer["name"]) == 32
    cells = format_line_str(layer, [27, 20, 25, 15, 9, 15, 16, 17])
    # "├─" + 32 characters do not fit 27: the first 26 characters, then the mark of the cut
    assert cells[0] == "├─a_really_long_module_nam…"
    dotted = dict(layer, name="encoder.layers.11.self_attention_block")
    # "mid" keeps the last path part whole: 27 = 2 ("├─") + 3 ("enc") + 1 ("…") + 21 (".self_attention_block")
    assert format_line_str(dotted, [27, 20, 25, 15, 9, 15, 16, 17])[0] == "├─enc….self_attention_block"


def test_the_table_widens_its_layer_column_to_the_longest_name():
    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.a_module_name_longer_than_twenty_seven_characters = nn.Linear(2, 2)

        def forward(self, x):
            return self.a_module_name_longer_than_twenty_seven_characters(x)

    text = format_info(crawl_module(Wide(), (2,)))
    # the whole name, never cut: its row is "├─" + the 51-character name, padded to the column
    row = next(line for line in text.splitlines() if "Linear" in line)
    assert row.startswith("├─a_module_name_longer_than_twenty_seven_characters    Linear")


def test_unit_scale():
    assert unit_scale(388800) == pytest.approx((388.8, "k"))
    assert unit_scale(16) == (16, "")
    assert unit_scale(2.5e6)[1] == "M" and unit_scale(3e9)[1] == "G" and unit_scale(4e12)[1] == "T"


def test_format_s():
    assert format_s("ab", 4) == "ab  "
    assert format_s("abcdef", 2, 4) == "abcd"
    assert format_s("ab") == "ab"


def test_output_shape_text_for_containers():
    report = crawl_module(nn.Sequential(), (2,))
    layer = dict(report["layers"][0])
    layer["output"] = {"kind": "mapping", "type": "dict", "items": [
        {"key": "features", "key_type": "str", "value": {"kind": "tuple", "items": [
            {"kind": "tensor", "shape": [1], "dtype": "torch.float32", "device": "cpu", "requires_grad": False},
            {"kind": "list", "items": [{"kind": "none"}]},
        ]}},
    ]}
    assert format_line_str(layer)[2].rstrip() == "{((1,), [none])}"


def test_aggregate_info():
    report = crawl_module(partial_model(), (3, 8, 8))
    shallow = aggregate_info(report, 1)
    assert [l["path"] for l in shallow["layers"]] == ["", "0", "1", "2", "3", "4", "5", "6"]
    assert len(report["layers"]) == 10  # the original is untouched
    with pytest.raises(ValueError, match="non-negative"):
        aggregate_info(report, -1)
    with pytest.raises(ValueError, match="The `max_depth` argument cannot be higher than module depth."):
        aggregate_info(report, 3)


def test_format_info_on_a_minimal_report():
    text = format_info({"layers": [], "totals": {}})
    assert "Trainable params: 0" in text and "Module-formula forward FLOPs: unavailable" in text
    assert "Operator forward FLOPs" not in text


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


class _Blocks(nn.Module):
    """``blocks`` (a ModuleList) and ``heads`` (a ModuleDict) are never called themselves."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.blocks = nn.ModuleList([_Block(), _Block()])
        self.heads = nn.ModuleDict({"out": nn.Linear(4, 2)})

    def forward(self, x):
        x = self.proj(x)
        for block in self.blocks:
            x = block(x)
        return self.heads["out"](x)


def test_children_of_an_uncalled_container_are_named_from_the_root():
    report = crawl_module(_Blocks(), (4,))
    table = format_info(report)
    lines = table.splitlines()
    type_column = lines[1].index("Type")
    names = [row[:type_column].rstrip() for row in lines[3:3 + len(report["layers"])]]
    # one row per layer record; blocks.0 sits under the root, not under proj
    assert names == [
        "_blocks", "├─proj", "├─blocks.0", "|    └─fc", "├─blocks.1", "|    └─fc", "├─heads.out",
    ]
    # the records themselves are unchanged
    assert [layer["name"] for layer in report["layers"]] == ["_blocks", "proj", "0", "fc", "1", "fc", "out"]


def test_the_diagnostics_footer_can_be_left_to_the_caller():
    report = crawl_module(partial_model(), (3, 8, 8))
    count = len(report["diagnostics"])
    assert count > 0
    assert f"Diagnostics: {count} (inspect report['diagnostics'])" in format_info(report)
    assert "Diagnostics:" not in format_info(report, diagnostics_footer=False)


def test_complete_mac_counts_that_differ_by_convention_say_so(capsys):
    # Conv2d(1, 2, 3) on (1, 1, 5, 5): 2·3·3 = 18 outputs · 9 = 162 MACs by both methods; BatchNorm2d(2)
    # on those 18 elements: 2 MACs each by the module formulas' (reference) convention = 36, none for
    # the operators. Both totals complete, 198 against 162: the table names the convention.
    model = nn.Sequential(nn.Conv2d(1, 2, 3, bias=False), nn.BatchNorm2d(2)).eval()
    text = format_info(crawl_module(model, (1, 5, 5)))
    assert "Module-formula forward MACs: 198.00 MACs" in text and "Operator forward MACs: 162.00 MACs" in text
    assert "(both MAC counts are complete; the module formulas count some per-element work as MACs too" in text
    # where they agree, nothing is said
    assert "both MAC counts" not in format_info(crawl_module(nn.Conv2d(1, 2, 3), (1, 5, 5)))
