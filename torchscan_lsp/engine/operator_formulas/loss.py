"""Loss functions that PyTorch dispatches as single operators (a model that returns its loss, e.g. a
``transformers`` model given ``labels``, runs them in its forward).

Per element of the input, the operations of the loss's formula in the PyTorch documentation, then
the reduction: ``mean`` N (N - 1 additions, one division), ``sum`` N - 1, ``none`` 0.
"""

from __future__ import annotations

from typing import Any

from ._base import arg, is_shape, numel, register
from .activation import SIGMOID

_NONE, _MEAN, _SUM = 0, 1, 2


def _reduction_flops(n: int, reduction: Any) -> int:
    if reduction == _MEAN:
        return n
    if reduction == _SUM:
        return max(n - 1, 0)
    return 0


def _elementwise_loss(per_element: int, name: str, definition: str, reduction_index: int = 2):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        n = numel(args[0]) if args else 0
        reduction = arg(args, kwargs, reduction_index, "reduction", _MEAN)
        return per_element * n + _reduction_flops(n, reduction)

    formula.__doc__ = (
        f"{per_element} FLOPs per element ({definition}), then the reduction (mean N, sum N - 1). "
        "Source: the loss's formula in the torch.nn documentation."
    )
    formula.__name__ = f"{name}_flop"
    formula.__qualname__ = formula.__name__
    register(name, family="loss")(formula)


_elementwise_loss(2, "mse_loss", "(x - y)^2: subtract, square")
_elementwise_loss(6, "smooth_l1_loss", "d = x - y; |d| < beta ? 0.5 d^2 / beta : |d| - 0.5 beta: subtract, abs, "
                  "compare and the costlier branch (multiply, multiply, divide)")
_elementwise_loss(5, "huber_loss", "d = x - y; |d| < delta ? 0.5 d^2 : delta (|d| - 0.5 delta): subtract, abs, "
                  "compare and two multiplies")
_elementwise_loss(5, "soft_margin_loss", "log(1 + exp(-y x)): multiply, negate, exp, add, log")


@register("binary_cross_entropy", family="loss")
def binary_cross_entropy_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """8 FLOPs per element, + 1 with ``weight``, then the reduction.

    -w [y log x + (1 - y) log(1 - x)]: log x, multiply, 1 - y, 1 - x, log, multiply, add, negate.
    Source: ``torch.nn.BCELoss`` documentation.
    """
    n = numel(args[0]) if args else 0
    weight = arg(args, kwargs, 2, "weight")
    reduction = arg(args, kwargs, 3, "reduction", _MEAN)
    return (8 + (weight is not None)) * n + _reduction_flops(n, reduction)


@register("binary_cross_entropy_with_logits", family="loss")
def bce_with_logits_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """12 FLOPs per element (Sigmoid 4 and the 8 of BCE), + 1 per given ``weight`` / ``pos_weight``,
    then the reduction. Source: ``torch.nn.BCEWithLogitsLoss`` documentation."""
    n = numel(args[0]) if args else 0
    weight = arg(args, kwargs, 2, "weight")
    pos_weight = arg(args, kwargs, 3, "pos_weight")
    reduction = arg(args, kwargs, 4, "reduction", _MEAN)
    per = SIGMOID + 8 + (weight is not None) + (pos_weight is not None)
    return per * n + _reduction_flops(n, reduction)


@register("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd", "nll_loss2d", family="loss")
def nll_loss_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Negative log-likelihood over the T target positions: one negation per target (+ one weight
    multiply with ``weight``), then the reduction over T (mean: T; sum: T - 1). A weighted mean also
    sums the T weights (T - 1). Picking x[target] is a lookup (0).

    Source: ``torch.nn.NLLLoss`` documentation, l_n = -w_{y_n} x_{n, y_n}; ``cross_entropy`` is
    ``_log_softmax`` followed by this.
    """
    target = arg(args, kwargs, 1, "target")
    weight = arg(args, kwargs, 2, "weight")
    reduction = arg(args, kwargs, 3, "reduction", _MEAN)
    t = numel(target) if is_shape(target) else 0
    flops = t * (1 + (weight is not None)) + _reduction_flops(t, reduction)
    if weight is not None and reduction == _MEAN:
        flops += max(t - 1, 0)
    return flops
