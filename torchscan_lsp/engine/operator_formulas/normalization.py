"""Normalisation operators: batch, layer, group, RMS (instance norm runs as batch norm).

Notation: N = input elements, C = channels (batch norm), R = independent normalisation groups (rows).

* Statistics of a group of n values: mean = n FLOPs (n - 1 adds, 1 divide); variance about that mean
  = 3n (subtract, square, n - 1 adds, 1 divide). Over N elements in R groups: mean N, variance 3N.
* Normalising: (x - mean) / sqrt(var + eps) = 2 per element (subtract, divide) + 2 per group
  (add eps, sqrt).
* Affine: + N for a weight (multiply), + N for a bias (add).

These give TorchScan's module formulas exactly: LayerNorm ``6N + 2R + [w]N + [b]N`` and BatchNorm
``2C + 2N + [affine]2N`` in evaluation, plus ``4N + 6C`` batch statistics and running-stat updates
when training.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, is_shape, numel, register


def layer_norm_flops(n: int, rows: int, weight: bool, bias: bool) -> int:
    """6N + 2R + [weight]N + [bias]N: mean (N), variance (3N), normalise (2N + 2R), affine."""
    return 6 * n + 2 * rows + (n if weight else 0) + (n if bias else 0)


def batch_norm_flops(n: int, channels: int, weight: bool, bias: bool, training: bool, running: bool) -> int:
    """Batch norm over N elements in C channels.

    Evaluation (running statistics): 2C (eps add, sqrt per channel) + 2N (subtract, divide) +
    [weight]N + [bias]N. Training adds the batch statistics, mean N + variance 3N = 4N, and, when
    running statistics are updated, 6C (r = (1 - m) r + m s: two multiplies and an add, for mean and
    variance).
    """
    flops = 2 * channels + 2 * n + (n if weight else 0) + (n if bias else 0)
    if training:
        flops += 4 * n
        if running:
            flops += 6 * channels
    return flops


def rms_norm_flops(n: int, rows: int, weight: bool) -> int:
    """3N + 3R + [weight]N: square (N), mean of squares (N: N - R adds, R divides), eps add (R) and
    reciprocal square root (2R: a sqrt and a division, as ``rsqrt``) per row, multiply by it (N),
    weight multiply (N) -- PyTorch's own algorithm (``rms_norm`` in ``aten/src/ATen/native/layer_norm.cpp``:
    ``input * rsqrt(pow(input, 2).mean(-1) + eps) * weight``), so the fused operator and its CPU
    decomposition count the same."""
    return 3 * n + 3 * rows + (n if weight else 0)


def _channels(shape: Any) -> int:
    return shape[1] if is_shape(shape) and len(shape) > 1 else 1


@register("native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm", family="normalization")
def native_batch_norm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)``.

    Evaluation: 2C + 2N + [w]N + [b]N; training: + 4N batch statistics + 6C running-stat update
    when running buffers are given. Instance norm dispatches here with (1, B*C, ...) and training.
    Source: ``torch.nn.BatchNorm2d`` documentation, y = (x - E[x]) / sqrt(Var[x] + eps) * gamma + beta.
    """
    x = args[0]
    weight = arg(args, kwargs, 1, "weight")
    bias = arg(args, kwargs, 2, "bias")
    running_mean = arg(args, kwargs, 3, "running_mean")
    training = bool(arg(args, kwargs, 5, "training", False))
    return batch_norm_flops(numel(x), _channels(x), weight is not None, bias is not None,
                            training, running_mean is not None)


@register("_native_batch_norm_legit", "_native_batch_norm_legit_functional", family="normalization")
def native_batch_norm_legit_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, ...)``
    or its ``no_stats`` overload ``(input, weight, bias, training, momentum, eps)``.

    Same count as ``native_batch_norm``: 2C + 2N + [w]N + [b]N, + 4N (+ 6C with running stats) when
    training. Source: ``torch.nn.BatchNorm2d`` documentation.
    """
    x = args[0]
    weight = arg(args, kwargs, 1, "weight")
    bias = arg(args, kwargs, 2, "bias")
    if len(args) > 3 and not is_shape(args[3]) and args[3] is not None:  # no_stats overload
        training, running = bool(args[3]), False
    else:
        running = arg(args, kwargs, 3, "running_mean") is not None
        training = bool(arg(args, kwargs, 5, "training", False))
    return batch_norm_flops(numel(x), _channels(x), weight is not None, bias is not None, training, running)


@register("_native_batch_norm_legit_no_training", "_batch_norm_no_update", family="normalization")
def native_batch_norm_no_training_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Batch norm in evaluation with running statistics: 2C + 2N + [w]N + [b]N.

    Source: ``torch.nn.BatchNorm2d`` documentation (eval mode uses the running mean and variance).
    """
    x = args[0]
    weight = arg(args, kwargs, 1, "weight")
    bias = arg(args, kwargs, 2, "bias")
    return batch_norm_flops(numel(x), _channels(x), weight is not None, bias is not None, False, False)


@register("_batch_norm_with_update", "_batch_norm_with_update_functional", family="normalization")
def batch_norm_with_update_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Batch norm in training that updates the running statistics: 2C + 2N + [w]N + [b]N + 4N + 6C.

    Source: ``torch.nn.BatchNorm2d`` documentation.
    """
    x = args[0]
    weight = arg(args, kwargs, 1, "weight")
    bias = arg(args, kwargs, 2, "bias")
    return batch_norm_flops(numel(x), _channels(x), weight is not None, bias is not None, True, True)


@register("native_layer_norm", family="normalization")
def native_layer_norm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``native_layer_norm(input, normalized_shape, weight, bias, eps)``: 6N + 2R + [w]N + [b]N.

    R = N / prod(normalized_shape) rows. Mean N, variance 3N, normalise 2N + 2R, affine N each.
    Equals TorchScan's LayerNorm module formula. Source: ``torch.nn.LayerNorm`` documentation.
    """
    x = args[0]
    n = numel(x)
    size = math.prod(arg(args, kwargs, 1, "normalized_shape", ()) or ())
    rows = n // size if size else 0
    weight = arg(args, kwargs, 2, "weight")
    bias = arg(args, kwargs, 3, "bias")
    return layer_norm_flops(n, rows, weight is not None, bias is not None)


@register("native_group_norm", family="normalization")
def native_group_norm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``native_group_norm(input, weight, bias, N, C, HxW, group, eps)``: 6N + 2R + [w]N + [b]N with
    R = batch x groups (the layer-norm count over each group).

    Source: ``torch.nn.GroupNorm`` documentation.
    """
    x = args[0]
    n = numel(x)
    batch = arg(args, kwargs, 3, "N", x[0] if is_shape(x) and len(x) else 1)
    groups = arg(args, kwargs, 6, "group", 1)
    weight = arg(args, kwargs, 1, "weight")
    bias = arg(args, kwargs, 2, "bias")
    return layer_norm_flops(n, int(batch) * int(groups), weight is not None, bias is not None)


@register("_fused_rms_norm", "rms_norm", family="normalization")
def rms_norm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``rms_norm(input, normalized_shape, weight, eps)``: 3N + 3R + [w]N.

    y = x * rsqrt(mean(x^2) + eps) * w: square N, mean N, eps add R, rsqrt 2R, multiply N, weight N.
    Source: ``rms_norm`` in ``aten/src/ATen/native/layer_norm.cpp`` (what the CPU decomposes into).
    """
    x = args[0]
    n = numel(x)
    size = math.prod(arg(args, kwargs, 1, "normalized_shape", ()) or ())
    rows = n // size if size else 0
    weight = arg(args, kwargs, 2, "weight")
    return rms_norm_flops(n, rows, weight is not None)


@register("_weight_norm_interface", family="normalization")
def weight_norm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_weight_norm_interface(v, g, dim)``: w = g * v / ||v||, 4N for N elements of v.

    Norm per slice: square N, sum N - R, sqrt R (= 2N); divide N; multiply by g N.
    Source: ``torch.nn.utils.weight_norm`` documentation.
    """
    return 4 * numel(args[0])
