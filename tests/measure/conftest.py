"""Fixtures for the measurement tests: hand-written reports derived from docs/, not from our code."""

from __future__ import annotations

import copy

import pytest


def _metric(value, unit, scope, method, status="complete"):
    known = value if status != "unavailable" else None
    return {"status": status, "value": value if status == "complete" else None, "known_value": known, "unit": unit, "scope": scope, "method": method}


#: docs/report-schema.md's first example: crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32)), written out by hand.
CONV_REPORT = {
    "schema_version": 1,
    "context": {
        "torchscan_version": "0.1.0", "package": "torchscan-lsp", "torch_version": "2.13.0+cpu", "python_version": "3.11.7",
        "model_type": "torch.nn.modules.conv.Conv2d", "execution_mode": "evaluation_no_grad",
        "training_before": True, "devices": ["cpu"], "dtypes": ["torch.float32"],
    },
    "inputs": {
        "source": "generated",
        "args": [{"kind": "tensor", "shape": [1, 3, 32, 32], "dtype": "torch.float32", "device": "cpu", "requires_grad": False}],
        "kwargs": {},
    },
    "layers": [
        {
            "path": "", "call_index": 0, "name": "conv2d", "depth": 0, "type": "Conv2d",
            "input": {"args": [{"kind": "tensor", "shape": [1, 3, 32, 32], "dtype": "torch.float32", "device": "cpu", "requires_grad": False}], "kwargs": {}},
            "output": {"kind": "tensor", "shape": [1, 8, 30, 30], "dtype": "torch.float32", "device": "cpu", "requires_grad": False},
            "parameters": {"trainable": 224, "frozen": 0, "bytes": 896, "shared": False},
            "buffers": {"elements": 0, "bytes": 0, "shared": False},
            "metrics": {
                "calls": _metric(1, "calls", "module_call", "pytorch_hook"),
                "module_flops": _metric(388800, "FLOPs", "module_call", "torchscan_module_formula"),
                "macs": _metric(194400, "MACs", "module_call", "torchscan_module_formula"),
                "dmas": _metric(201824, "DMAs", "module_call", "torchscan_module_formula"),
            },
        }
    ],
    "operator_flops": {
        "schema_version": 1,
        "context": {"torch_version": "2.13.0+cpu", "method": "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas"},
        "total": _metric(388800, "FLOPs", "workload", "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas"),
        "by_module": {"Conv2d": 388800}, "by_operator": {"aten.convolution": 388800}, "ignored_operators": {}, "diagnostics": [],
    },
    "totals": {
        "parameters": _metric(224, "elements", "model", "pytorch"),
        "trainable_parameters": _metric(224, "elements", "model", "pytorch"),
        "frozen_parameters": _metric(0, "elements", "model", "pytorch"),
        "parameter_bytes": _metric(896, "bytes", "model", "pytorch"),
        "buffer_elements": _metric(0, "elements", "model", "pytorch"),
        "buffer_bytes": _metric(0, "bytes", "model", "pytorch"),
        "module_flops": _metric(388800, "FLOPs", "forward", "torchscan_module_formula"),
        "operator_flops": _metric(388800, "FLOPs", "workload", "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas"),
        "macs": _metric(194400, "MACs", "forward", "torchscan_module_formula"),
        "dmas": _metric(201824, "DMAs", "forward", "torchscan_module_formula"),
    },
    "diagnostics": [],
}  # fmt: skip

EVIL = '<script>alert("x")</script><img src="http://evil.example/x.png" onerror="alert(1)">'


@pytest.fixture
def conv_report():
    return copy.deepcopy(CONV_REPORT)


@pytest.fixture
def evil_report():
    """The docs/report-schema.md report whose model type, layer path/type and diagnostic carry HTML."""
    report = copy.deepcopy(CONV_REPORT)
    report["context"]["model_type"] = f"models.{EVIL}"
    layer = report["layers"][0]
    layer["path"], layer["type"], layer["name"] = f"block{EVIL}", f"Evil{EVIL}", EVIL
    report["totals"]["module_flops"] = _metric(None, "FLOPs", "forward", "torchscan_module_formula", status="partial") | {"known_value": 10}
    report["diagnostics"] = [
        {"code": "unsupported_module_metric", "severity": "warning", "metric": "module_flops", "path": layer["path"], "message": f"Module type not supported: {EVIL}"}
    ]
    return report


@pytest.fixture
def evil_text():
    return EVIL
