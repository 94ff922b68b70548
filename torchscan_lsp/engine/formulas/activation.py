"""Element-wise activations, GLU and the softmax family.

FLOP convention: every elementary operation on one element — add, subtract, multiply, divide,
compare/select (max, min, clamp bound), and one transcendental evaluation (exp, log, erf, power,
square root) — costs 1 FLOP. Composite functions add up their parts, using the reference's own
values where they exist (``Sigmoid`` = 4: negate, exp, add, divide; ``Tanh`` = 6: two exps, negate,
subtract, add, divide). The reference contract fixes ReLU 1, ELU 6, LeakyReLU 4, ReLU6 2,
Tanh 6 and Sigmoid 4 per element; the rest are ours:

========================  ====  =====================================================================
module                    /elt  decomposition
========================  ====  =====================================================================
GELU (erf)                5     scale by 1/√2, erf, add 1, multiply by x, multiply by 0.5
GELU (approximate=tanh)   13    x³ (one power), ·0.044715, +x, ·√(2/π), tanh (6), +1, ·x, ·0.5
SiLU                      5     sigmoid (4), multiply by x
Mish                      10    softplus (3: exp, add 1, log), tanh (6), multiply by x
Hardswish                 5     add 3, clamp below, clamp above, multiply by x, divide by 6
Hardsigmoid               4     add 3, clamp below, clamp above, divide by 6
Hardtanh                  2     clamp below, clamp above
Softplus                  6     multiply by β, exp, add 1, log, divide by β, threshold compare
PReLU                     4     as LeakyReLU, with a learned slope
SELU                      7     ELU (6), multiply by scale
CELU                      7     divide by α, exp, subtract 1, multiply by α, min, max, add
LogSigmoid                5     sigmoid (4), log
Softsign                  3     absolute value, add 1, divide
Tanhshrink                7     tanh (6), subtract
Threshold                 1     compare-and-select
GLU                       5/out sigmoid of one half (4), multiply with the other half
========================  ====  =====================================================================

Softmax family, with ``S`` the length of the reduced axis and ``R = N / S`` rows: Softmax
``R·(3S − 1)`` (S exps, S − 1 adds, S divides — the reference's MultiheadAttention softmax term),
LogSoftmax ``R·3S`` (S exps, S − 1 adds, one log, S subtractions), Softmin ``R·(4S − 1)`` (a negation
first), Softmax2d = Softmax over the channel axis (−3).

MACs: 0 for all of them — element-wise work is not a multiply-accumulate.

DMAs: read the input, read each scalar hyper-parameter the module stores (ELU α, LeakyReLU slope,
Hardtanh bounds, Softplus β and threshold, CELU α, Threshold's threshold and value; PReLU reads its
``P`` slopes) and write the output: ``Nx + scalars + Ny``. Constants baked into a function (ReLU6's
bounds, SELU's α and scale, GELU's coefficients) are not reads. Following the reference's ReLU rule,
an in-place call (``inplace=True``) does not count a separate output write: ``Nx + scalars``. The
reference's Tanh value ``2·Nx + Ny`` is kept as is. The softmax family also writes and reads one
statistic per row (the sum of exponentials): ``Nx + Ny + 2R``.

Receptive field: ``(1.0, 1.0, 0.0)`` (the softmax family's row sum is a summary statistic, as for
normalisations).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from torch import nn

from ._common import input_tensor, num_params, numel, output_tensor, rf_pointwise, shape
from ._registry import Family

__all__ = [
    "ELEMENTWISE_COSTS",
    "dmas_activation",
    "dmas_glu",
    "dmas_softmax",
    "elementwise_cost",
    "flops_activation",
    "flops_elu",
    "flops_glu",
    "flops_leakyrelu",
    "flops_relu",
    "flops_relu6",
    "flops_sigmoid",
    "flops_softmax",
    "flops_tanh",
    "macs_activation",
    "rf_activation",
    "softmax_axis",
]


def _const(value: int) -> Callable[[nn.Module], int]:
    return lambda module: value


def _gelu_cost(module: nn.GELU) -> int:
    return 13 if getattr(module, "approximate", "none") == "tanh" else 5


#: Ordered table: (classes, FLOPs per element, scalar hyper-parameter reads). ``ReLU6`` derives
#: from ``Hardtanh`` and must stay before it.
ELEMENTWISE_COSTS: tuple[tuple[type, Callable[[nn.Module], int], Callable[[nn.Module], int]], ...] = (
    (nn.ReLU, _const(1), _const(0)),
    (nn.ELU, _const(6), _const(1)),
    (nn.LeakyReLU, _const(4), _const(1)),
    (nn.ReLU6, _const(2), _const(0)),
    (nn.Hardtanh, _const(2), _const(2)),
    (nn.Tanh, _const(6), _const(0)),
    (nn.Sigmoid, _const(4), _const(0)),
    (nn.GELU, _gelu_cost, _const(0)),
    (nn.SiLU, _const(5), _const(0)),
    (nn.Mish, _const(10), _const(0)),
    (nn.Hardswish, _const(5), _const(0)),
    (nn.Hardsigmoid, _const(4), _const(0)),
    (nn.Softplus, _const(6), _const(2)),
    (nn.PReLU, _const(4), num_params),
    (nn.SELU, _const(7), _const(0)),
    (nn.CELU, _const(7), _const(1)),
    (nn.LogSigmoid, _const(5), _const(0)),
    (nn.Softsign, _const(3), _const(0)),
    (nn.Tanhshrink, _const(7), _const(0)),
    (nn.Threshold, _const(1), _const(2)),
)


@lru_cache(maxsize=None)
def _row(cls: type):
    for row in ELEMENTWISE_COSTS:
        if issubclass(cls, row[0]):
            return row
    raise NotImplementedError(f"No element-wise cost is defined for {cls.__name__}.")


def elementwise_cost(module: nn.Module) -> int:
    """FLOPs per element of an element-wise activation module (the table above)."""
    return _row(type(module))[1](module)


def flops_activation(module: nn.Module, inputs, out=None) -> int:
    """``cost·Nx`` with the per-element cost of the table."""
    return elementwise_cost(module) * numel(input_tensor(inputs, module))


def macs_activation(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0."""
    return 0


def dmas_activation(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + scalars + (0 if inplace else Ny)``; Tanh: ``2·Nx + Ny`` (reference)."""
    if isinstance(module, nn.Tanh):
        return 2 * numel(x) + numel(y)
    scalars = _row(type(module))[2](module)
    write = 0 if getattr(module, "inplace", False) else numel(y)
    return numel(x) + scalars + write


rf_activation = rf_pointwise

# Reference helper names (torchscan.modules.flops): one formula covers them all.
flops_relu = flops_elu = flops_leakyrelu = flops_relu6 = flops_tanh = flops_sigmoid = flops_activation


def flops_glu(module: nn.GLU, inputs, out) -> int:
    """``5·Ny``: sigmoid of the gate half and one multiply per output element."""
    return 5 * numel(output_tensor(out, module))


def dmas_glu(module: nn.GLU, x, y, *, inputs=None) -> int:
    """``Nx + Ny``."""
    return numel(x) + numel(y)


def softmax_axis(module: nn.Module, ndim: int) -> int:
    """The reduced axis (non-negative) of a softmax-family module on an input of rank ``ndim``."""
    if isinstance(module, nn.Softmax2d):
        dim = -3
    else:
        dim = module.dim
        if dim is None:  # PyTorch's legacy implicit choice
            dim = 0 if ndim in (0, 1, 3) else 1
    return dim % ndim if ndim else 0


def _softmax_rows(module, x) -> tuple[int, int]:
    dims = shape(x)
    length = dims[softmax_axis(module, len(dims))] if dims else 1
    return (numel(x) // length if length else 0), length


def flops_softmax(module: nn.Module, inputs, out=None) -> int:
    """Softmax/Softmax2d ``R·(3S − 1)``, LogSoftmax ``R·3S``, Softmin ``R·(4S − 1)``."""
    rows, length = _softmax_rows(module, input_tensor(inputs, module))
    if isinstance(module, nn.LogSoftmax):
        per_row = 3 * length
    elif isinstance(module, nn.Softmin):
        per_row = 4 * length - 1
    else:
        per_row = 3 * length - 1
    return rows * per_row


def dmas_softmax(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + Ny + 2R``."""
    rows, _ = _softmax_rows(module, x)
    return numel(x) + numel(y) + 2 * rows


FAMILIES = [
    Family(
        "elementwise_activation",
        tuple(row[0] for row in ELEMENTWISE_COSTS),
        flops_activation,
        macs_activation,
        dmas_activation,
        rf_activation,
    ),
    Family("glu", (nn.GLU,), flops_glu, macs_activation, dmas_glu, rf_activation),
    Family(
        "softmax",
        (nn.Softmax, nn.LogSoftmax, nn.Softmin, nn.Softmax2d),
        flops_softmax,
        macs_activation,
        dmas_softmax,
        rf_activation,
    ),
]
