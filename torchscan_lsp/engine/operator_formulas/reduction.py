"""Reductions, scans, sorting and scatter-accumulate operators.

Notation: N = input elements, M = output elements (the number of independent reductions).
Reducing n values to one takes n - 1 operations, so a reduction of N elements into M results takes
N - M. Mean adds one division per result (N in total). Statistics follow the normalisation family:
variance = mean (N) + subtract, square (2N) + sum and divide (N) = 4N.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, is_shape, numel, out_numel, register


def _n_m(args: tuple[Any, ...], out_shape: Any) -> tuple[int, int]:
    return numel(args[0]) if args else 0, out_numel(out_shape)


@register("sum", "prod", "all", "any", "amax", "amin", "argmax", "argmin", family="reduction")
def reduce_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N - M FLOPs: n - 1 additions / multiplications / comparisons / logical ops per reduction of n
    values (sum, prod, amax, amin, argmax, argmin, all, any).
    """
    n, m = _n_m(args, out_shape)
    return max(n - m, 0)


@register("max", "min", family="reduction")
def max_min_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``max``/``min``: a reduction (N - M comparisons), or with a tensor second argument
    (``max.other``) the element-wise maximum: 1 comparison per output element.
    """
    if len(args) > 1 and is_shape(args[1]):
        return out_numel(out_shape)
    n, m = _n_m(args, out_shape)
    return max(n - m, 0)


@register("aminmax", family="reduction")
def aminmax_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2(N - M): a min and a max reduction."""
    n, m = _n_m(args, out_shape)
    return 2 * max(n - m, 0)


@register("mean", family="reduction")
def mean_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N FLOPs: N - M additions and M divisions. Source: mean = sum / count."""
    n, m = _n_m(args, out_shape)
    return max(n - m, 0) + m


@register("nansum", family="reduction")
def nansum_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2N - M: one NaN test/selection per element, then N - M additions."""
    n, m = _n_m(args, out_shape)
    return n + max(n - m, 0)


@register("nanmean", family="reduction")
def nanmean_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2N: one NaN test/selection per element, N - M additions, M divisions."""
    n, m = _n_m(args, out_shape)
    return n + max(n - m, 0) + m


@register("var", "var_mean", family="reduction")
def var_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """4N: mean (N), subtract the mean and square (2N), sum (N - M) and divide (M).

    ``var_mean`` returns the mean it computed on the way: the same 4N. Source: Var = sum (x - mean)^2 / (n - c).
    """
    n, _ = _n_m(args, out_shape)
    return 4 * n


@register("std", "std_mean", family="reduction")
def std_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """4N + M: the variance (4N) and one square root per result."""
    n, m = _n_m(args, out_shape)
    return 4 * n + m


@register("logsumexp", family="reduction")
def logsumexp_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2N: N exps, N - M additions, M logs. Source: logsumexp(x) = log(sum exp(x)) (the
    max-subtraction done for numerical stability is not counted, as for softmax)."""
    n, _ = _n_m(args, out_shape)
    return 2 * n


def _norm_flops(n: int, m: int, p: Any) -> int:
    if p is None or p == 2:
        return n + max(n - m, 0) + m  # square, sum, sqrt
    if p in (1, math.inf, -math.inf, 0):
        return n + max(n - m, 0)  # abs (or != 0), then sum / max
    return 2 * n + max(n - m, 0) + m  # abs, pow, sum, pow(1/p)


@register("norm", "linalg_vector_norm", family="reduction")
def norm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Vector p-norm of N elements into M results.

    p = 2 (default): square N, sum N - M, sqrt M = 2N. p = 1, inf, -inf, 0: |x| (or x != 0) N, then
    sum / max N - M = 2N - M. Other p: |x| N, pow N, sum N - M, pow(1/p) M = 3N.
    Source: ||x||_p = (sum |x_i|^p)^(1/p).
    """
    n, m = _n_m(args, out_shape)
    p = kwargs.get("ord", kwargs.get("p", args[1] if len(args) > 1 else 2))
    return _norm_flops(n, m, p)


@register("dist", family="reduction")
def dist_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """p-norm of a - b: N subtractions + the norm (2N for p = 2, 3N for a general p)."""
    n = out_numel((args[0],)) if args else 0
    if len(args) > 1 and is_shape(args[1]):
        n = max(n, numel(args[1]))
    p = arg(args, kwargs, 2, "p", 2)
    return n + _norm_flops(n, 1, p)


@register("renorm", family="reduction")
def renorm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3N: the p-norm of each slice (about 2N) and one multiply per element to rescale."""
    n, _ = _n_m(args, out_shape)
    return 3 * n


def _scan_len(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int]:
    x = args[0] if args else None
    if not is_shape(x) or len(x) == 0:
        return numel(x) if x is not None else 0, 1
    dim = int(arg(args, kwargs, 1, "dim", 0)) % len(x)
    return math.prod(x), x[dim]


@register("cumsum", "cumsum_", "cumprod", "cumprod_", "cummax", "cummin", "_cummax_helper",
          "_cummin_helper", family="reduction")
def scan_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N - N/L: a running sum/product/max along a dimension of length L takes L - 1 operations per line."""
    n, length = _scan_len(args, kwargs)
    return n - (n // length if length else 0)


@register("logcumsumexp", family="reduction")
def logcumsumexp_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3N - N/L: N exps, the running sum (N - N/L) and N logs."""
    n, length = _scan_len(args, kwargs)
    return 3 * n - (n // length if length else 0)


def _log2ceil(value: int) -> int:
    return max(1, math.ceil(math.log2(value))) if value > 1 else 1


@register("sort", "argsort", "msort", family="reduction")
def sort_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N * ceil(log2 L) comparisons: a comparison sort of each line of length L (the lower bound)."""
    x = args[0] if args else None
    if not is_shape(x) or len(x) == 0:
        return 0
    dim = kwargs.get("dim", args[1] if len(args) > 1 and isinstance(args[1], int) and not isinstance(args[1], bool) else -1)
    length = x[int(dim) % len(x)]
    return math.prod(x) * _log2ceil(length)


@register("topk", family="reduction")
def topk_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N * max(1, ceil(log2 k)) comparisons: each element enters a size-k heap."""
    n = numel(args[0]) if args else 0
    k = int(arg(args, kwargs, 1, "k", 1))
    return n * _log2ceil(k)


@register("median", "nanmedian", "kthvalue", family="reduction")
def select_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N comparisons: linear-time selection (quickselect) of one order statistic per line."""
    return numel(args[0]) if args else 0


@register("mode", family="reduction")
def mode_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N * ceil(log2 L) + N: sort each line, then one pass counting runs."""
    x = args[0] if args else None
    if not is_shape(x) or len(x) == 0:
        return 0
    dim = int(arg(args, kwargs, 1, "dim", -1)) % len(x)
    n = math.prod(x)
    return n * _log2ceil(x[dim]) + n


@register("_unique2", "unique_dim", "unique_consecutive", "_unique", family="reduction")
def unique_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N * ceil(log2 N) + N: sort, then one comparison per element with its neighbour."""
    n = numel(args[0]) if args else 0
    return n * _log2ceil(n) + n


@register("count_nonzero", family="reduction")
def count_nonzero_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2N - M: one comparison per element, then N - M additions."""
    n, m = _n_m(args, out_shape)
    return n + max(n - m, 0)


def _binary_search_flops(boundaries: Any, out_shape: Any) -> int:
    b = boundaries[-1] if is_shape(boundaries) and len(boundaries) else 1
    return out_numel(out_shape) * _log2ceil(int(b) + 1)


@register("bucketize", family="reduction")
def bucketize_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """ceil(log2(B + 1)) comparisons per output element: a binary search among B boundaries."""
    return _binary_search_flops(arg(args, kwargs, 1, "boundaries"), out_shape)


@register("searchsorted", family="reduction")
def searchsorted_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """ceil(log2(B + 1)) comparisons per output element: a binary search in a sorted row of B values."""
    return _binary_search_flops(arg(args, kwargs, 0, "sorted_sequence"), out_shape)


@register("histc", "bincount", "histogram", family="reduction")
def histogram_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2N: one bin-index computation and one increment per input element."""
    return 2 * (numel(args[0]) if args else 0)


@register(*("scatter_add", "scatter_add_", "index_add", "index_add_", "scatter_reduce",
            "scatter_reduce_", "index_reduce", "index_reduce_", "_scatter_reduce"), family="reduction")
def scatter_accumulate_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP per source element (added, multiplied or compared into the destination).

    Source: scatter_add / index_add / scatter_reduce write self[index[i]] op= src[i].
    """
    src = args[3] if len(args) > 3 and is_shape(args[3]) else kwargs.get("src", kwargs.get("source"))
    return numel(src) if is_shape(src) else out_numel(out_shape)


@register("scatter", "scatter_", family="reduction")
def scatter_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``scatter`` with ``reduce='add'``/``'multiply'``: 1 FLOP per scattered element (one per index);
    a plain scatter (no ``reduce``) is data movement: 0.

    Source: ``Tensor.scatter_`` documentation, self[index[i]] (op)= src[i].
    """
    reduce = kwargs.get("reduce", args[4] if len(args) > 4 and isinstance(args[4], str) else None)
    if reduce is None:
        return 0
    index = arg(args, kwargs, 2, "index")
    return numel(index) if is_shape(index) else out_numel(out_shape)


@register("index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put", family="reduction")
def index_put_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``accumulate=True``: 1 addition per value written; otherwise pure data movement (0).

    Source: ``Tensor.index_put_`` documentation, self[indices] (+)= values.
    """
    accumulate = arg(args, kwargs, 3, "accumulate", False)
    values = arg(args, kwargs, 2, "values")
    if not accumulate:
        return 0
    return numel(values) if is_shape(values) else out_numel(out_shape)


@register("_pdist_forward", family="reduction")
def pdist_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3M per pair for M features (subtract, square/|.|^p, add) over the N(N-1)/2 pairs, plus one
    root per pair. Source: ``torch.nn.functional.pdist`` = p-norm distance between rows."""
    x = args[0] if args else None
    if not is_shape(x) or len(x) != 2:
        return 0
    pairs = out_numel(out_shape)
    return pairs * (3 * x[1] + 1)


@register("_cdist_forward", family="reduction")
def cdist_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3M + 1 per output distance for M features: subtract, square (|.|^p), add, and one root.

    Source: ``torch.cdist`` = p-norm distance between each pair of rows of x1 and x2.
    """
    x1 = args[0] if args else None
    if not is_shape(x1) or len(x1) < 2:
        return 0
    return out_numel(out_shape) * (3 * x1[-1] + 1)

