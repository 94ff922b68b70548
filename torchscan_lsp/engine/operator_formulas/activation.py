"""Activation functions and the softmax family.

Per output element, count the operations of the activation's formula in the PyTorch documentation
(each +, -, x, /, comparison/max/min and each exp/log/erf/... evaluation is 1 FLOP). Activations
defined through another activation count that activation's full cost (GELU's tanh approximation
contains Tanh = 6). For ReLU (1), ReLU6 (2), LeakyReLU (4), ELU (6), Sigmoid (4) and Tanh (6) these
are exactly TorchScan's module formulas, so the operator and module counts agree.
"""

from __future__ import annotations

from typing import Any

from ._base import arg, first_shape, numel, out_numel, per_element, register

#: Per-element costs, shared with the fused kernels and the documentation.
SIGMOID = 4  # 1 / (1 + exp(-x)): negate, exp, add, divide
TANH = 6  # (exp(x) - exp(-x)) / (exp(x) + exp(-x)): exp, negate, exp, subtract, add, divide
RELU = 1  # max(0, x)
GELU_ERF = 5  # x * 0.5 * (1 + erf(x / sqrt(2))): divide, erf, add, multiply, multiply
GELU_TANH = 13  # 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))): pow, mul, add, mul, Tanh(6), add, mul, mul
SILU = SIGMOID + 1  # x * sigmoid(x)


def _inplace(*names: str) -> tuple[str, ...]:
    return tuple(n for name in names for n in (name, name + "_"))


def _per_element(count: int, names: tuple[str, ...], definition: str) -> None:
    per_element(count, names, definition, family="activation",
                source="the activation's formula in the PyTorch documentation (torch.nn)")


_per_element(RELU, _inplace("relu"), "ReLU(x) = max(0, x): one comparison")
_per_element(2, _inplace("hardtanh", "relu6"), "Hardtanh(x) = min(max(x, min_val), max_val): two comparisons (ReLU6 is Hardtanh(0, 6))")
_per_element(4, _inplace("leaky_relu", "_prelu_kernel", "prelu", "rrelu_with_noise", "rrelu"),
             "LeakyReLU(x) = max(0, x) + slope * min(0, x) (PReLU and RReLU likewise): max, min, multiply, add")
_per_element(SIGMOID, _inplace("sigmoid"), "Sigmoid(x) = 1 / (1 + exp(-x)): negate, exp, add, divide")
_per_element(TANH, _inplace("tanh"), "Tanh(x) = (exp(x) - exp(-x)) / (exp(x) + exp(-x)): exp, negate, exp, subtract, add, divide")
_per_element(SILU, _inplace("silu"), "SiLU(x) = x * sigmoid(x): Sigmoid (4) and a multiply")
_per_element(TANH + 3 + 1, _inplace("mish"), "Mish(x) = x * Tanh(Softplus(x)): Softplus with beta=1 (exp, add, log = 3), Tanh (6), multiply")
_per_element(5, _inplace("hardswish"), "Hardswish(x) = x * ReLU6(x + 3) / 6: add, ReLU6 (2), multiply, divide")
_per_element(4, _inplace("hardsigmoid"), "Hardsigmoid(x) = ReLU6(x + 3) / 6: add, ReLU6 (2), divide")
_per_element(7, _inplace("celu"), "CELU(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): max, divide, exp, subtract, multiply, min, add")
_per_element(2, _inplace("hardshrink"), "Hardshrink(x) = x if |x| > lambda else 0: two comparisons (x > lambda, x < -lambda)")
_per_element(3, _inplace("softshrink"), "Softshrink(x) = x -+ lambda if |x| > lambda else 0: two comparisons and one add/subtract")
_per_element(1, _inplace("threshold"), "Threshold(x) = x if x > threshold else value: one comparison")
_per_element(5, ("log_sigmoid_forward", "log_sigmoid"), "LogSigmoid(x) = log(1 / (1 + exp(-x))): negate, exp, add, divide, log")
_per_element(SIGMOID + 1, ("glu",), "GLU(a, b) = a * sigmoid(b), per output element: Sigmoid (4) and a multiply")


@register(*_inplace("gelu"), family="activation")
def gelu_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """GELU: 5 FLOPs per element exactly, 13 with ``approximate='tanh'``.

    Exact: GELU(x) = x * Phi(x) = x * 0.5 * (1 + erf(x / sqrt(2))): divide, erf, add, multiply,
    multiply = 5. Tanh approximation: 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))): x^3 (pow),
    multiply, add, multiply, Tanh (6), add, multiply, multiply = 13. Source: ``torch.nn.GELU`` docs.
    """
    approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return (GELU_TANH if approximate == "tanh" else GELU_ERF) * out_numel(out_shape)


@register(*_inplace("elu"), family="activation")
def elu_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """ELU: 6 FLOPs per element, +1 for each non-unit ``scale`` / ``input_scale`` (SELU: 7, CELU: 7).

    ELU(x) = max(0, x) + min(0, alpha * (exp(x) - 1)): max, exp, subtract, multiply, min, add = 6
    (TorchScan's ELU module formula). SELU = scale * ELU (+1); CELU uses exp(x / alpha) (+1).
    Source: ``torch.nn.ELU``/``SELU``/``CELU`` documentation.
    """
    scale = arg(args, kwargs, 2, "scale", 1)
    input_scale = arg(args, kwargs, 3, "input_scale", 1)
    return (6 + (scale != 1) + (input_scale != 1)) * out_numel(out_shape)


@register(*_inplace("softplus"), family="activation")
def softplus_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Softplus: 3 FLOPs per element with beta = 1 (log(1 + exp(x))), 5 otherwise.

    Softplus(x) = 1/beta * log(1 + exp(beta * x)): exp, add, log, plus multiply and divide by beta
    when beta != 1. The linear fallback above ``threshold`` is a numerical-stability detail, not
    counted. Source: ``torch.nn.Softplus`` documentation.
    """
    beta = arg(args, kwargs, 1, "beta", 1)
    return (3 if beta == 1 else 5) * out_numel(out_shape)


# --- softmax -----------------------------------------------------------------------------------


def softmax_flops(n: int, rows: int) -> int:
    """Softmax over ``rows`` independent rows holding ``n`` elements in all: 3n - rows.

    Softmax(x_i) = exp(x_i) / sum_j exp(x_j): n exps, n - rows additions, n divisions. This is the
    convention of TorchScan's attention formula (B*H*T*(3S - 1)); the max-subtraction kernels do
    for numerical stability is not counted.
    """
    return 3 * n - rows


def _rows(shape: Any, dim: Any) -> tuple[int, int]:
    n = numel(shape)
    if not shape or dim is None:
        return n, 1 if n else 0
    size = shape[int(dim) % len(shape)]
    return n, (n // size if size else 0)


@register("_softmax", "softmax", "_safe_softmax", "special_softmax", family="activation")
def softmax_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Softmax along ``dim``: 3N - R FLOPs for N elements in R rows (N exps, N - R adds, N divides).

    Source: ``torch.nn.Softmax`` documentation, exp(x_i) / sum_j exp(x_j); matches TorchScan's
    B*H*T*(3S - 1) softmax term. ``_safe_softmax`` (fully masked rows give 0) counts the same.
    """
    shape = args[0] if args else first_shape(out_shape)
    n, rows = _rows(shape, arg(args, kwargs, 1, "dim", -1))
    return softmax_flops(n, rows)


@register("_log_softmax", "log_softmax", "special_log_softmax", family="activation")
def log_softmax_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """LogSoftmax along ``dim``: 4N - R FLOPs (Softmax's 3N - R plus N logs).

    Source: ``torch.nn.LogSoftmax`` documentation, log(exp(x_i) / sum_j exp(x_j)).
    """
    shape = args[0] if args else first_shape(out_shape)
    n, rows = _rows(shape, arg(args, kwargs, 1, "dim", -1))
    return softmax_flops(n, rows) + n


@register("_masked_softmax", family="activation")
def masked_softmax_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Masked softmax: 3N - R (softmax) + N (one selection per element applying the mask).

    Source: ``_masked_softmax`` = softmax(mask ? -inf : x) along ``dim``.
    """
    shape = args[0] if args else first_shape(out_shape)
    n, rows = _rows(shape, arg(args, kwargs, 2, "dim", -1))
    mask = arg(args, kwargs, 1, "mask")
    return softmax_flops(n, rows) + (n if mask is not None else 0)


__all__ = ["GELU_ERF", "GELU_TANH", "RELU", "SIGMOID", "SILU", "TANH", "softmax_flops"]
