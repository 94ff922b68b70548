"""Fixtures for the module-formula tests.

``measure(module, *args, **kwargs)`` runs one evaluation-mode, no-grad call and returns the four
formula results the way the crawler asks for them: FLOPs from the ordered inputs and the whole
output, MACs and DMAs from the first input and output tensors (with ``inputs=``), and the RF triple.
Every formula warning is captured and returned, so a test can assert that a value is complete.

``meta_operator_flops(module, *args)`` counts the same forward with PyTorch's ``FlopCounterMode`` on
the meta device, where fused CPU kernels (``mkldnn_rnn_layer``, the MHA and encoder fast paths)
decompose into counted matmuls and convolutions.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from torchscan_lsp.engine.formulas import first_tensor, module_dmas, module_flops, module_macs, module_rf


@dataclass
class Measured:
    flops: int
    macs: int
    dmas: int
    rf: tuple
    warnings: list[str] = field(default_factory=list)


def ordered_inputs(module, args, kwargs) -> tuple:
    """Bind a call to ``forward``'s signature with defaults applied, as the crawler does."""
    bound = inspect.signature(module.forward).bind_partial(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.arguments.values())


def _measure(module, *args, train: bool = False, **kwargs) -> Measured:
    module.train(train)
    with torch.no_grad():
        out = module(*args, **kwargs)
    inputs = ordered_inputs(module, args, kwargs)
    x, y = first_tensor(inputs), first_tensor(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = Measured(
            flops=module_flops(module, inputs, out),
            macs=module_macs(module, x, y, inputs=inputs),
            dmas=module_dmas(module, x, y, inputs=inputs),
            rf=module_rf(module, x, y),
        )
    result.warnings = [str(w.message) for w in caught]
    return result


@pytest.fixture
def measure():
    return _measure


def _meta_operator_flops(module, *args, **kwargs) -> int:
    module = module.to("meta")
    args = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
    with FlopCounterMode(display=False) as counter:
        module(*args, **kwargs)
    return counter.get_total_flops()


@pytest.fixture
def meta_operator_flops():
    return _meta_operator_flops
