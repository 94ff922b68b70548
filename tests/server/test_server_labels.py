"""Number, metric and shape labels, against values written out by hand."""

import pytest

from torchscan_lsp.server import labels


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (224, "", "224"),                    # below 1000: exact
        (11_689_512, "", "11.7M"),           # 11.689512 M, three significant digits
        (1_820_000_000, "MACs", "1.82 GMACs"),
        (388_800, "FLOPs", "389 kFLOPs"),    # 388.8 k rounds to 389
        (999_999, "FLOPs", "1.00 MFLOPs"),   # rounds up across the prefix boundary
        (16, "FLOPs", "16 FLOPs"),
        (0, "FLOPs", "0 FLOPs"),
    ],
)
def test_number(value, unit, expected):
    assert labels.number(value, unit) == expected


def test_metric_statuses():
    complete = {"status": "complete", "value": 3_640_000_000, "known_value": 3_640_000_000, "unit": "FLOPs"}
    partial = {"status": "partial", "value": None, "known_value": 1_200_000_000, "unit": "FLOPs"}
    unavailable = {"status": "unavailable", "value": None, "known_value": None, "unit": "FLOPs"}
    assert labels.metric(complete) == "3.64 GFLOPs"
    assert labels.metric(partial) == "≥ 1.20 GFLOPs"   # a lower bound, never shown as exact
    assert labels.metric(unavailable) == "? FLOPs"      # never a fabricated zero


def test_totals_label_resnet18_like():
    def done(value):
        return {"status": "complete", "value": value, "known_value": value}

    totals = {"parameters": done(11_689_512), "macs": done(1_820_000_000), "module_flops": done(3_640_000_000)}
    assert labels.totals_label(totals) == "11.7M params · 1.82 GMACs · 3.64 GFLOPs"


def test_shapes():
    tensor = {"kind": "tensor", "shape": [1, 64, 56, 56]}
    assert labels.shape_label(tensor) == "→ (1, 64, 56, 56)"
    assert labels.shape({"kind": "tensor", "shape": [1]}) == "(1,)"
    pair = {"kind": "tuple", "items": [tensor, {"kind": "none"}]}
    assert labels.shape(pair) == "((1, 64, 56, 56), none)"


def test_byte_size():
    assert labels.byte_size(896) == "896 B"
    assert labels.byte_size(3 * 1024 * 1024) == "3.0 MiB"


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0.000412, "412 µs"), (0.0123, "12.3 ms"), (2.5, "2.50 s"), (0.0009996, "1.00 ms")],
)
def test_duration(seconds, expected):
    assert labels.duration(seconds) == expected
