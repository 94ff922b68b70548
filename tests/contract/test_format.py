"""The one formatter, against texts derived by hand from each rule (three significant digits,
powers of 1000 for counts and 1024 for bytes, ``≥`` for a lower bound, ``?`` for no number)."""

import pytest

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.server import labels


def _metric(status, value, unit="FLOPs"):
    return {"status": status, "value": value if status == "complete" else None,
            "known_value": None if status == "unavailable" else value, "unit": unit, "scope": "forward",
            "method": "torchscan_module_formula"}


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (224, "", "224"),                    # below 1000: exact
        (11_689_512, "", "11.7M"),           # 11.689512 M, three significant digits
        (1_820_000_000, "MACs", "1.82 GMACs"),
        (388_800, "FLOPs", "389 kFLOPs"),    # 388.8 k rounds to 389
        (999_999, "FLOPs", "1.00 MFLOPs"),   # 999.999 k rounds to 1000 k: carried to 1.00 M
        (16, "FLOPs", "16 FLOPs"),
        (0, "FLOPs", "0 FLOPs"),
        (0.5, "", "0.50"),                   # a fraction keeps three significant digits
    ],
)
def test_number(value, unit, expected):
    assert fmt.number(value, unit) == expected


def test_metric_statuses():
    assert fmt.metric_text(_metric("complete", 3_640_000_000)) == "3.64 GFLOPs"
    assert fmt.metric_text(_metric("partial", 1_200_000_000)) == "≥ 1.20 GFLOPs"   # never shown as exact
    assert fmt.metric_text(_metric("unavailable", None)) == "? FLOPs"              # never a fabricated zero
    assert fmt.metric_text(None, "MACs") == "? MACs"


def test_metric_units_params_bytes_seconds():
    assert fmt.metric_text(_metric("complete", 11_689_512, "elements"), "params") == "11.7M params"
    # 3 MiB = 3 * 1024**2 bytes
    assert fmt.metric_text(_metric("partial", 3 * 1024**2, "bytes")) == "≥ 3.00 MiB"
    assert fmt.metric_text(_metric("complete", 0.0123, "seconds")) == "12.3 ms"
    assert fmt.metric_text(_metric("unavailable", None, "seconds")) == "? s"


def test_full_numbers_for_evidence():
    assert fmt.metric_text(_metric("complete", 388_800), full=True) == "388,800 FLOPs"
    assert fmt.metric_text(_metric("partial", 10), full=True) == "≥ 10 FLOPs"
    # 1,048,576 B = 1024**2 = 1.00 MiB; below 1 KiB no scaled form is added
    assert fmt.metric_text(_metric("complete", 1_048_576, "bytes"), full=True) == "1,048,576 B (1.00 MiB)"
    assert fmt.metric_text(_metric("complete", 896, "bytes"), full=True) == "896 B"
    assert fmt.exact(2.0) == "2.0" and fmt.exact(1234567) == "1,234,567"


def test_reference_table_scaling():
    # the reference's floor-based prefix and two decimals (README.md's summary table)
    assert fmt.unit_scale(388_800) == (388.8, "k")
    assert fmt.fixed(388_800, "FLOPs") == "388.80 kFLOPs"
    assert fmt.fixed(16, "FLOPs") == "16.00 FLOPs"
    assert fmt.fixed(999_999, "FLOPs") == "1000.00 kFLOPs"  # 999_999 // 1e6 == 0: stays in k


@pytest.mark.parametrize(
    ("count", "expected"),
    [(896, "896 B"), (1536, "1.50 KiB"), (3 * 1024**2, "3.00 MiB"), (12.5 * 1024**3, "12.5 GiB"),
     (1023, "1023 B"), (1_048_575, "1.00 MiB")],  # 1_048_575 B = 1023.999 KiB rounds over to 1.00 MiB
)
def test_byte_size(count, expected):
    assert fmt.byte_size(count) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0.000412, "412 µs"), (0.0123, "12.3 ms"), (2.5, "2.50 s"), (0.0009996, "1.00 ms"),
     (4e-7, "400 ns"), (0, "0 s")],
)
def test_duration(seconds, expected):
    assert fmt.duration(seconds) == expected


def test_shapes():
    tensor = {"kind": "tensor", "shape": [1, 64, 56, 56], "dtype": "torch.float32"}
    assert fmt.shape_text(tensor) == "(1, 64, 56, 56)"
    assert fmt.shape_text({"kind": "tensor", "shape": [1]}) == "(1,)"  # a Python tuple of one
    assert fmt.shape_text({"kind": "tensor", "shape": []}) == "()"
    pair = {"kind": "tuple", "items": [tensor, {"kind": "none"}]}
    assert fmt.shape_text(pair) == "((1, 64, 56, 56), none)"
    single = {"kind": "tuple", "items": [tensor]}
    assert fmt.shape_text(single) == "((1, 64, 56, 56),)"  # `return (y,)`: a tuple of one, as Python writes it
    # the reference's example (README.md's summary table): {"features": (t, [None])} with t of shape (1,)
    nested = {"kind": "mapping", "type": "dict", "items": [{"key": "features", "key_type": "str", "value": {
        "kind": "tuple", "items": [{"kind": "tensor", "shape": [1]}, {"kind": "list", "items": [{"kind": "none"}]}]}}]}
    assert fmt.shape_text(nested) == "{((1,), [none])}"
    assert fmt.shape_text(nested, detail=True) == "{features: ((1,), [none])}"
    assert fmt.shape_text(tensor, detail=True) == "(1, 64, 56, 56) torch.float32"
    assert fmt.shape_text({"kind": "scalar", "type": "int"}, detail=True) == "int"
    assert fmt.shape_text({"kind": "tensor", "shape": [1, 2, 3]}, limit=6) == "(1, 2…"


def test_editor_labels_compose_the_formatter():
    def done(value):
        return {"status": "complete", "value": value, "known_value": value}

    totals = {"parameters": done(11_689_512), "operator_macs": done(1_820_000_000), "operator_flops": done(3_640_000_000),
              "macs": {"status": "partial", "value": None, "known_value": 1_700_000_000},
              "module_flops": {"status": "partial", "value": None, "known_value": 3_400_000_000}}
    # the headline is the dispatched operators' count unless the module formulas are asked for
    assert labels.totals_label(totals) == "11.7M params · 1.82 GMACs · 3.64 GFLOPs"
    assert labels.totals_label(totals, "modules") == "11.7M params · ≥ 1.70 GMACs · ≥ 3.40 GFLOPs"
    assert labels.shape_label({"kind": "tensor", "shape": [1, 64, 56, 56]}) == "→ (1, 64, 56, 56)"


@pytest.mark.parametrize("value, unit, full, expected", [
    (112, "elements", True, "+112 elements"),
    (-388_800, "FLOPs", True, "−388,800 FLOPs"),
    (-388_800, "FLOPs", False, "−389 kFLOPs"),  # 388.8 k to three significant digits
    (0.0021, "seconds", True, "+2.10 ms"),  # 2.1e-3 s = 2.10 ms
    (4 * 1024 * 1024, "bytes", True, "+4,194,304 B (4.00 MiB)"),  # 4 MiB = 4·1024² B
    (0, "MACs", True, "0 MACs"),  # nothing changed: no sign
])
def test_a_change_has_its_sign_and_its_unit(value, unit, full, expected):
    assert fmt.change(value, unit, full=full) == expected


def test_editor_shapes_name_a_mapping_s_keys():
    # a dict (a ModelOutput) of values alone reads like a set: the editor's labels give each key
    output = {"kind": "mapping", "type": "CausalLMOutput", "items": [
        {"key": "logits", "key_type": "str", "value": {"kind": "tensor", "shape": [1, 8, 100], "dtype": "torch.float32"}},
        {"key": "past", "key_type": "str", "value": {"kind": "tuple", "items": [{"kind": "none"}]}}]}
    assert fmt.shape_text(output) == "{(1, 8, 100), (none,)}"  # the reference's table keeps values only
    assert fmt.shape_text(output, keys=True) == "{logits: (1, 8, 100), past: (none,)}"
    assert fmt.shape_text(output, keys=True, limit=12) == "{logits: (1…"
