"""Element-wise arithmetic, comparison, logic and math-function operators.

Convention (docs/operator-formulas.md): FLOPs = (output elements) x (operations per element), where
the operations per element are those of the operator's defining formula in PyTorch's documentation:
each +, -, x, / , comparison, max/min/select, and each evaluation of an elementary or special
function (exp, log, sqrt, sin, erf, pow, ...) counts 1. A scale factor whose default is 1 (``alpha``,
``value``) costs a multiplication only when the caller passes another value. Broadcasting is free:
the count follows the output. In-place (``add_``) and ``out=`` variants count like the plain operator.
"""

from __future__ import annotations

from typing import Any

from ._base import arg, out_numel, per_element, register


def _inplace(*names: str) -> tuple[str, ...]:
    """Each name and its in-place variant (``add`` -> ``add``, ``add_``)."""
    result: list[str] = []
    for name in names:
        result.append(name)
        result.append(name + "_")
    return tuple(result)


def _pointwise(count: int, names: tuple[str, ...], definition: str) -> None:
    per_element(count, names, definition, family="elementwise",
                source="the operator's definition in the PyTorch documentation")


# --- one operation per element -----------------------------------------------------------------
_pointwise(1, _inplace("mul", "multiply", "true_divide", "neg", "negative", "reciprocal", "abs",
                       "absolute", "sign", "sgn", "sqrt", "exp", "exp2", "expm1", "log", "log2",
                       "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "arcsin",
                       "arccos", "arctan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsinh",
                       "arccosh", "arctanh", "erf", "erfc", "erfinv", "lgamma", "digamma", "i0",
                       "floor", "ceil", "round", "trunc", "fix", "frac", "pow", "float_power",
                       "fmod", "remainder", "copysign", "nextafter", "atan2", "arctan2", "heaviside",
                       "nan_to_num", "conj_physical", "clamp_min", "clamp_max", "fmax",
                       "fmin", "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
                       "less_equal", "not_equal", "logical_and", "logical_or", "logical_xor",
                       "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                       "bitwise_left_shift", "bitwise_right_shift", "__and__", "__or__", "__xor__",
                       "__lshift__", "__rshift__", "masked_fill", "maximum", "minimum", "signbit",
                       "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal", "polygamma",
                       "mvlgamma", "special_i0e", "special_i1", "special_i1e", "special_ndtri",
                       "special_erfcx", "special_log_ndtr", "angle"),
           "one arithmetic operation, comparison, selection, logical/bitwise operation or one "
           "elementary/special function evaluation (e.g. mul: a*b; exp: e^x; eq: a == b; "
           "masked_fill: mask ? value : x)")

# --- two operations per element ----------------------------------------------------------------
_pointwise(2, _inplace("rsqrt"), "rsqrt(x) = 1 / sqrt(x): one sqrt and one division")
_pointwise(2, _inplace("xlogy", "special_xlog1py"), "xlogy(x, y) = x * log(y): one log, one multiply")
_pointwise(2, _inplace("floor_divide"), "floor_divide(a, b) = floor(a / b): one division, one floor")
_pointwise(3, _inplace("logit"), "logit(p) = log(p / (1 - p)): subtract, divide, log")
_pointwise(3, _inplace("sinc"), "sinc(x) = sin(pi x) / (pi x): multiply, sin, divide")
_pointwise(4, _inplace("hypot"), "hypot(a, b) = sqrt(a^2 + b^2): two squares, an add, a sqrt")
_pointwise(4, _inplace("logaddexp", "logaddexp2"), "logaddexp(a, b) = log(exp(a) + exp(b)): two exps, an add, a log")


def _scale_is_one(value: Any) -> bool:
    return value is None or (not isinstance(value, (list, tuple)) and value == 1)


@register(*_inplace("add", "sub", "subtract", "rsub"), family="elementwise")
def add_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP per output element (a + b), 2 when ``alpha`` != 1 (a + alpha * b).

    Source: ``torch.add`` documentation, out = input + alpha x other.
    """
    alpha = arg(args, kwargs, 2, "alpha", 1)
    return (1 if _scale_is_one(alpha) else 2) * out_numel(out_shape)


@register(*_inplace("div", "divide"), family="elementwise")
def div_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP per output element (a / b), 2 with a ``rounding_mode`` (a division, then trunc/floor).

    Source: ``torch.div`` documentation.
    """
    rounding = kwargs.get("rounding_mode", args[2] if len(args) > 2 and isinstance(args[2], str) else None)
    return (1 if rounding is None else 2) * out_numel(out_shape)


@register(*_inplace("clamp", "clip"), family="elementwise")
def clamp_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """One comparison per given bound per output element: min(max(x, lo), hi) = 2, one bound = 1.

    Source: ``torch.clamp`` documentation, y = min(max(x, min_value), max_value).
    """
    lo = arg(args, kwargs, 1, "min")
    hi = arg(args, kwargs, 2, "max")
    return ((lo is not None) + (hi is not None)) * out_numel(out_shape)


@register(*_inplace("where"), family="elementwise")
def where_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP (one selection) per output element: out = condition ? x : y.

    ``where(condition)`` with a single argument is ``nonzero`` (index generation, data movement): 0.
    Source: ``torch.where`` documentation.
    """
    if len(args) + len(kwargs) <= 1:
        return 0
    return out_numel(out_shape)


@register(*_inplace("addcmul", "addcdiv"), family="elementwise")
def addcmul_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2 FLOPs per output element (input + t1 * t2, or input + t1 / t2), 3 when ``value`` != 1.

    Source: ``torch.addcmul``/``torch.addcdiv`` documentation, out = input + value x t1 (x or /) t2.
    """
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    return (2 if _scale_is_one(value) else 3) * out_numel(out_shape)


@register(*_inplace("lerp"), family="elementwise")
def lerp_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3 FLOPs per output element: start + weight * (end - start) (subtract, multiply, add).

    Source: ``torch.lerp`` documentation.
    """
    return 3 * out_numel(out_shape)


@register("native_dropout", family="elementwise")
def native_dropout_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP per element when training (x times the pre-scaled keep mask), 0 otherwise.

    Drawing the random mask is random-number generation, not arithmetic. This matches TorchScan's
    ``nn.Dropout`` module formula (Nx). Source: ``torch.nn.functional.dropout``: y = x * m / (1 - p).
    """
    train = arg(args, kwargs, 2, "train", True)
    if train is False:
        return 0
    return out_numel(out_shape)
