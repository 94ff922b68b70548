"""Normalisation layers.

Notation: ``N = Nx`` (input elements), ``C`` channels, ``R`` = number of independently normalised
groups of elements ("rows": tokens for LayerNorm/RMSNorm, ``batch·groups`` for GroupNorm,
``batch·channels`` for InstanceNorm), ``P`` parameter elements, ``[cond]`` = 1 if true else 0.

MAC convention. Outside the reference's own BatchNorm value, a normalisation performs no
contraction between two operands of the model (no weight × activation dot product), so its MACs are
0 and all of its arithmetic is in FLOPs: MACs here are the multiply-accumulates of matmul,
convolution, attention and recurrent contractions (``tests/engine/test_public_cases.py``: "norms
excluded"; case P16 expects 0 for LayerNorm, and the native Transformer layer MACs of case P05
contain none). BatchNorm keeps the reference's MACs, which count its per-element scale (and affine)
as multiply-adds, because the contract fixes that value (docs/report-schema.md's partial example:
512 for ``BatchNorm2d(4)`` on ``(1, 4, 8, 8)``).

* ``_BatchNorm`` (BatchNorm1/2/3d, SyncBatchNorm, lazy variants) — the reference contract's:
  FLOPs ``2C + 2N + [affine]·2N`` (+ ``[momentum is None] + N + 3N + 6C`` when tracking running
  statistics in training); MACs ``N·(1 + [affine])`` (+ ``C·(B·S − 1) + C·(2·B·S − 1) + 4C``
  when tracking in training, ``B`` batch, ``S`` spatial size); DMAs ``N + ops + Ny`` where ``ops``
  counts ε, the running statistics, the affine parameters, momentum and, when updating, the
  statistics' read-modify-write.
* Statistics-based norms (LayerNorm, GroupNorm, InstanceNorm with instance statistics): the
  reference's LayerNorm count, ``6N + 2R`` (per element: mean, centring, square, variance sum,
  the normalising subtract and multiply; per row: add ε and the reciprocal square root), plus ``N``
  for a weight and ``N`` for a bias. DMAs ``N + P + Ny + 4R``: the input, the parameters and the
  output, plus the per-row mean and reciprocal standard deviation, each written once and read
  once (intermediates: docs/metrics.md).
* RMSNorm: ``3N + 3R + [weight]·N``, the operators PyTorch runs for it (``pow``, ``mean``, ``add``,
  ``rsqrt``, ``mul``): square, mean (``N − R`` adds and ``R`` divisions) and scale per element; per
  row the ε add and the reciprocal square root, a square root and a division (2, as the operator
  table counts ``rsqrt``); DMAs ``N + P + Ny + 2R`` (one statistic per row).
* InstanceNorm evaluated with running statistics (``track_running_stats`` in eval mode) is the
  BatchNorm evaluation: FLOPs ``2C + 2N + [affine]·2N``, DMAs ``N + P + 2C + Ny``. In training with
  ``track_running_stats`` add the running-statistics update: ``2R + 6C`` FLOPs (batch average of the
  instance statistics, momentum blend of two buffers) and ``4C`` DMAs.
* LocalResponseNorm, as ``F.local_response_norm`` computes it: square, a ``size``-wide average over
  channels (``size − 1`` adds, 1 divide), multiply by α, add k, power β, divide: ``N·(size + 5)``
  FLOPs; DMAs ``size·Ny + Ny`` (each output reads its channel window, as pooling does).
* Receptive field: ``(1.0, 1.0, 0.0)`` for every norm. The statistics summarise a whole row or
  group; like the reference for BatchNorm (whose training statistics span the batch), that summary is
  not counted as a sliding-window receptive field.
"""

from __future__ import annotations

import math

from torch import nn

from ._common import input_tensor, num_params, numel, rf_pointwise, shape
from ._registry import Family

__all__ = [
    "dmas_bn",
    "flops_bn",
    "macs_bn",
    "dmas_batchnorm",
    "dmas_groupnorm",
    "dmas_instancenorm",
    "dmas_layernorm",
    "dmas_localresponsenorm",
    "dmas_rmsnorm",
    "flops_batchnorm",
    "flops_groupnorm",
    "flops_instancenorm",
    "flops_layernorm",
    "flops_localresponsenorm",
    "flops_rmsnorm",
    "macs_batchnorm",
    "macs_norm",
    "rf_norm",
]

_RMSNorm = getattr(nn, "RMSNorm", None)  # torch >= 2.4


# ---------------------------------------------------------------- BatchNorm (reference contract)


def _bn_tracking(module) -> bool:
    return bool(module.track_running_stats and module.training)


def flops_batchnorm(module: nn.modules.batchnorm._BatchNorm, inputs, out=None) -> int:
    """``2C + 2N + [affine]·2N`` + tracking ``[momentum is None] + N + 3N + 6C``."""
    n, c = numel(input_tensor(inputs, module)), module.num_features
    flops = 2 * c + 2 * n + (2 * n if module.affine else 0)
    if _bn_tracking(module):
        flops += (module.momentum is None) + n + 3 * n + 6 * c
    return flops


def macs_batchnorm(module: nn.modules.batchnorm._BatchNorm, x, y, *, inputs=None) -> int:
    """``N·(1 + [affine])`` + tracking ``C·(B·S − 1) + C·(2·B·S − 1) + 4C``."""
    n, c = numel(x), module.num_features
    macs = n * (1 + bool(module.affine))
    if _bn_tracking(module):
        dims = shape(x)
        bs = dims[0] * math.prod(dims[2:])
        macs += c * (bs - 1) + c * (2 * bs - 1) + 4 * c
    return macs


def dmas_batchnorm(module: nn.modules.batchnorm._BatchNorm, x, y, *, inputs=None) -> int:
    """``N + ops + Ny`` (the reference contract's)."""
    rm, rv = module.running_mean, module.running_var
    stats = rm is not None and rv is not None
    ops = 1
    if stats:
        ops += numel(rm) + numel(rv)
    if module.affine and module.weight is not None and module.bias is not None:
        ops += numel(module.weight) + numel(module.bias)
    if module.momentum is not None:
        ops += 1
    if module.training and module.track_running_stats and stats:
        ops += 1 + numel(rm) + numel(rv)
    return numel(x) + ops + numel(y)


# ---------------------------------------------------------------- statistics-based norms


# reference helper names (torchscan.modules)
flops_bn, macs_bn, dmas_bn = flops_batchnorm, macs_batchnorm, dmas_batchnorm


def _stats_flops(n: int, rows: int) -> int:
    return 6 * n + 2 * rows


def _layernorm_rows(module: nn.LayerNorm, x) -> int:
    return numel(x) // math.prod(module.normalized_shape)


def flops_layernorm(module: nn.LayerNorm, inputs, out=None) -> int:
    """``6N + 2R + [weight]·N + [bias]·N`` (the reference contract's)."""
    x = input_tensor(inputs, module)
    n = numel(x)
    affine = (module.weight is not None) + (getattr(module, "bias", None) is not None)
    return _stats_flops(n, _layernorm_rows(module, x)) + affine * n


def dmas_layernorm(module: nn.LayerNorm, x, y, *, inputs=None) -> int:
    """``N + P + Ny + 4R``."""
    return numel(x) + num_params(module) + numel(y) + 4 * _layernorm_rows(module, x)


def _groupnorm_rows(module: nn.GroupNorm, x) -> int:
    return shape(x)[0] * module.num_groups


def flops_groupnorm(module: nn.GroupNorm, inputs, out=None) -> int:
    """``6N + 2R + [affine]·2N`` with ``R = batch·num_groups``."""
    x = input_tensor(inputs, module)
    n = numel(x)
    return _stats_flops(n, _groupnorm_rows(module, x)) + (2 * n if module.affine else 0)


def dmas_groupnorm(module: nn.GroupNorm, x, y, *, inputs=None) -> int:
    """``N + P + Ny + 4R``."""
    return numel(x) + num_params(module) + numel(y) + 4 * _groupnorm_rows(module, x)


def _instance_layout(module, x) -> tuple[int, int]:
    """(rows = batch·channels, channels) for batched or unbatched inputs."""
    dims = shape(x)
    # every InstanceNorm class (lazy ones too) states its unbatched rank: channels + spatial dims
    no_batch = getattr(module, "_get_no_batch_dim", None)
    nd = no_batch() - 1 if callable(no_batch) else len(dims) - 2
    spatial = math.prod(dims[len(dims) - nd :])
    return numel(x) // spatial, dims[len(dims) - nd - 1]


def _instance_uses_running_stats(module) -> bool:
    return (
        not module.training
        and module.track_running_stats
        and module.running_mean is not None
        and module.running_var is not None
    )


def flops_instancenorm(module: nn.modules.instancenorm._InstanceNorm, inputs, out=None) -> int:
    """Instance statistics ``6N + 2R`` (or the BatchNorm evaluation ``2C + 2N`` with running
    statistics), ``+ [affine]·2N``, ``+ 2R + 6C`` for a running-statistics update in training."""
    x = input_tensor(inputs, module)
    n = numel(x)
    rows, c = _instance_layout(module, x)
    if _instance_uses_running_stats(module):
        flops = 2 * c + 2 * n
    else:
        flops = _stats_flops(n, rows)
        if module.training and module.track_running_stats:
            flops += 2 * rows + 6 * c
    return flops + (2 * n if module.affine else 0)


def dmas_instancenorm(module: nn.modules.instancenorm._InstanceNorm, x, y, *, inputs=None) -> int:
    """``N + P + Ny`` plus ``2C`` (running statistics read) or ``4R`` (instance statistics),
    plus ``4C`` for a running-statistics update in training."""
    rows, c = _instance_layout(module, x)
    dmas = numel(x) + num_params(module) + numel(y)
    if _instance_uses_running_stats(module):
        return dmas + 2 * c
    dmas += 4 * rows
    if module.training and module.track_running_stats:
        dmas += 4 * c
    return dmas


def _rms_rows(module, x) -> int:
    return numel(x) // math.prod(module.normalized_shape)


def flops_rmsnorm(module, inputs, out=None) -> int:
    """``3N + 3R + [weight]·N``: ``x·rsqrt(mean(x²) + ε)·w`` operator by operator (``rsqrt`` 2 per row)."""
    x = input_tensor(inputs, module)
    n = numel(x)
    return 3 * n + 3 * _rms_rows(module, x) + (n if module.weight is not None else 0)


def dmas_rmsnorm(module, x, y, *, inputs=None) -> int:
    """``N + P + Ny + 2R``."""
    return numel(x) + num_params(module) + numel(y) + 2 * _rms_rows(module, x)


def flops_localresponsenorm(module: nn.LocalResponseNorm, inputs, out=None) -> int:
    """``N·(size + 5)``."""
    return numel(input_tensor(inputs, module)) * (module.size + 5)


def dmas_localresponsenorm(module: nn.LocalResponseNorm, x, y, *, inputs=None) -> int:
    """``size·Ny + Ny``."""
    return (module.size + 1) * numel(y)


def macs_norm(module: nn.Module, x, y, *, inputs=None) -> int:
    """0: a normalisation contracts no weight with an activation (see the module docstring)."""
    return 0


rf_norm = rf_pointwise

FAMILIES = [
    Family("batch_norm", (nn.modules.batchnorm._BatchNorm,), flops_batchnorm, macs_batchnorm, dmas_batchnorm, rf_norm),
    Family("layer_norm", (nn.LayerNorm,), flops_layernorm, macs_norm, dmas_layernorm, rf_norm),
    Family("group_norm", (nn.GroupNorm,), flops_groupnorm, macs_norm, dmas_groupnorm, rf_norm),
    Family(
        "instance_norm",
        (nn.modules.instancenorm._InstanceNorm,),
        flops_instancenorm,
        macs_norm,
        dmas_instancenorm,
        rf_norm,
    ),
    Family(
        "local_response_norm",
        (nn.LocalResponseNorm,),
        flops_localresponsenorm,
        macs_norm,
        dmas_localresponsenorm,
        rf_norm,
    ),
]
if _RMSNorm is not None:
    FAMILIES.append(Family("rms_norm", (_RMSNorm,), flops_rmsnorm, macs_norm, dmas_rmsnorm, rf_norm))
