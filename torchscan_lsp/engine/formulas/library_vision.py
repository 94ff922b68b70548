"""Formulas for classes of ``torchvision`` and ``timm`` without a torch base class. The rules and
formulas are tabulated in ``formulas/library.py``."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from torch import nn

from ._common import ShapeOnly, input_tensor, num_params, numel, shape
from ._library_structure import from_package, is_leaf, is_real, own_parameters, parameterless_leaf
from .activation import dmas_activation, flops_activation
from .pooling import dmas_adaptive_poolnd, flops_adaptive_avgpoolnd, macs_adaptive_avgpoolnd, rf_adaptive_poolnd
from .structural import dmas_flatten

__all__ = [
    "TIMM_ACTIVATIONS",
    "TIMM_SCALES",
    "dmas_fast_adaptive_avg_pool",
    "dmas_global_response_norm",
    "dmas_layer_scale",
    "dmas_permute",
    "dmas_stochastic_depth",
    "dmas_timm_activation",
    "flops_fast_adaptive_avg_pool",
    "flops_global_response_norm",
    "flops_layer_scale",
    "flops_permute",
    "flops_stochastic_depth",
    "flops_timm_activation",
    "macs_fast_adaptive_avg_pool",
    "macs_global_response_norm",
    "macs_stochastic_depth",
    "match_fast_adaptive_avg_pool",
    "match_global_response_norm",
    "match_layer_scale",
    "match_permute",
    "match_stochastic_depth",
    "match_timm_activation",
    "rf_fast_adaptive_avg_pool",
]


# ---------------------------------------------------------------------------- vision libraries
#
# ``torchvision`` and ``timm`` classes without a torch base class. Their structure is a handful of
# plain attributes, so each rule is: the class's module path starts with the library's package
# (``type(module).__module__``), the class name, no children, and the attributes the formula reads.
# Each formula is the torch formula of the module that does the same work, so the counts agree.


# ------------------------------------------------ stochastic depth (StochasticDepth, DropPath)


def match_stochastic_depth(module: nn.Module) -> bool:
    """``torchvision.ops.StochasticDepth`` (module path under ``torchvision.ops``, a real ``p`` in
    ``[0, 1]``, ``mode`` ``"row"`` or ``"batch"``) or timm's ``DropPath`` (module path under
    ``timm``, a real ``drop_prob`` in ``[0, 1]``, ``scale_by_keep`` a bool when present); by class
    name, with no parameters or children. Both return the very input in evaluation and multiply it
    by a random 0/1 mask, one value per sample (``row``) or per batch, in training."""
    name = type(module).__name__
    if not parameterless_leaf(module):
        return False
    if name == "StochasticDepth" and from_package(module, "torchvision.ops"):
        p = getattr(module, "p", None)
        return is_real(p) and 0 <= p <= 1 and getattr(module, "mode", None) in ("row", "batch")
    if name == "DropPath" and from_package(module, "timm"):
        p = getattr(module, "drop_prob", None)
        return is_real(p) and 0 <= p <= 1 and isinstance(getattr(module, "scale_by_keep", True), bool)
    return False


def _drop_state(module: nn.Module, x) -> tuple[bool, int, bool]:
    """(active, mask elements ``M``, the mask is scaled by ``1/keep``)."""
    if type(module).__name__ == "StochasticDepth":
        p, per_row, scale = module.p, module.mode == "row", True
    else:
        p, per_row, scale = module.drop_prob, True, getattr(module, "scale_by_keep", True)
    active = bool(module.training and p > 0)
    dims = shape(x)
    mask = (dims[0] if dims else 1) if per_row else 1
    return active, mask, bool(scale and p < 1)


def flops_stochastic_depth(module: nn.Module, inputs, out=None) -> int:
    """0 in evaluation or with ``p = 0``: the call returns its input, an elided identity as
    ``dropout.flops_dropout``. In training ``Nx + [scaled]·M``: the broadcast mask multiply (one per
    element, as dropout's ``Nx``) and the mask's division by the keep rate ``1 − p`` (``M`` = batch
    size for ``row``/``DropPath``, 1 for ``batch``; skipped when ``p = 1`` or ``scale_by_keep`` is
    False). The Bernoulli draw is random number generation, not arithmetic (as for dropout).
    Sources: ``torchvision.ops.stochastic_depth``, ``timm.layers.drop.drop_path``."""
    x = input_tensor(inputs, module)
    active, mask, scaled = _drop_state(module, x)
    return numel(x) + (mask if scaled else 0) if active else 0


def macs_stochastic_depth(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0."""
    return 0


def dmas_stochastic_depth(module: nn.Module, x, y, *, inputs=None) -> int:
    """0 when inactive (elided identity, ``dropout.dmas_dropout``). In training ``Nx + Ny + 2M +
    [scaled]·(2M + 1)``: the draw writes the ``M``-element mask; the scale reads it and the keep
    rate and writes it back; the multiply reads the input and the mask and writes the output."""
    active, mask, scaled = _drop_state(module, x)
    if not active:
        return 0
    return numel(x) + numel(y) + 2 * mask + (2 * mask + 1 if scaled else 0)


# ------------------------------------------------ torchvision's Permute


def match_permute(module: nn.Module) -> bool:
    """``torchvision.ops.misc.Permute``: module path under ``torchvision.ops``, class name
    ``Permute``, a list or tuple of int ``dims``, no parameters or children; its ``forward`` is
    ``torch.permute(x, self.dims)``."""
    dims = getattr(module, "dims", None)
    return (
        type(module).__name__ == "Permute"
        and from_package(module, "torchvision.ops")
        and parameterless_leaf(module)
        and isinstance(dims, (list, tuple))
        and all(isinstance(d, int) and not isinstance(d, bool) for d in dims)
    )


def flops_permute(module: nn.Module, inputs=None, out=None) -> int:
    """0: ``torch.permute`` returns a view with permuted strides."""
    return 0


def dmas_permute(module: nn.Module, x, y, *, inputs=None) -> int:
    """``2·Nx``, as ``nn.Flatten`` (``structural.dmas_flatten``, the reference's value for a
    reshaping view)."""
    return dmas_flatten(module, x, y)


# ------------------------------------------------ timm's activation classes

#: ``class name -> (torch module doing the same work, extra FLOPs per element)`` for the classes of
#: ``timm.layers.activations`` (older ``timm.models.layers.activations``). timm's ``inplace``
#: is set on the torch module (as an attribute where torch's class has no flag), so an in-place call
#: skips the output write as torch's activations do.
TIMM_ACTIVATIONS: dict[str, tuple[Callable[[bool], nn.Module], int]] = {
    # F.gelu(x) / F.gelu(x, approximate="tanh")
    "GELU": (lambda inplace: nn.GELU(), 0),
    "GELUTanh": (lambda inplace: nn.GELU(approximate="tanh"), 0),
    # x.sigmoid() / x.tanh() (in place with inplace=True)
    "Sigmoid": (lambda inplace: nn.Sigmoid(), 0),
    "Tanh": (lambda inplace: nn.Tanh(), 0),
    # x·sigmoid(x), as nn.SiLU
    "Swish": (lambda inplace: nn.SiLU(inplace), 0),
    # x·relu6(x + 3)/6, as nn.Hardswish
    "HardSwish": (lambda inplace: nn.Hardswish(inplace), 0),
    # relu6(x + 3)/6, as nn.Hardsigmoid
    "HardSigmoid": (lambda inplace: nn.Hardsigmoid(inplace), 0),
    # x·tanh(softplus(x)), as nn.Mish
    "Mish": (lambda inplace: nn.Mish(), 0),
    # x·sigmoid(1.702·x): nn.SiLU and the scale
    "QuickGELU": (lambda inplace: nn.SiLU(), 1),
    # 0.5·x·clamp(x + 2, 0, 2): add, two clamps, two multiplies, nn.Hardswish's 5 operations
    "HardMish": (lambda inplace: nn.Hardswish(inplace), 0),
}


@lru_cache(maxsize=None)
def _timm_reference(name: str, inplace: bool) -> nn.Module:
    reference = TIMM_ACTIVATIONS[name][0](inplace)
    if inplace and not hasattr(reference, "inplace"):  # nn.Sigmoid/nn.Tanh take no flag
        reference.inplace = True
    return reference


def _timm_activation(module: nn.Module) -> tuple[nn.Module, int]:
    name = type(module).__name__
    return _timm_reference(name, bool(getattr(module, "inplace", False))), TIMM_ACTIVATIONS[name][1]


def match_timm_activation(module: nn.Module) -> bool:
    """A class of :data:`TIMM_ACTIVATIONS` by name whose module path is under ``timm`` (the names
    ``GELU``, ``Sigmoid``, ``Tanh`` and ``Mish`` are torch's too, so the path decides), with no
    parameters or children. timm's ``PReLU`` subclasses ``nn.PReLU`` and keeps the torch family."""
    return (
        type(module).__name__ in TIMM_ACTIVATIONS
        and from_package(module, "timm")
        and parameterless_leaf(module)
    )


def flops_timm_activation(module: nn.Module, inputs, out=None) -> int:
    """``activation.flops_activation`` of the torch module that does the same work, plus the
    extra per-element cost (``QuickGELU``'s scale)."""
    reference, extra = _timm_activation(module)
    return flops_activation(reference, inputs, out) + extra * numel(input_tensor(inputs, module))


def dmas_timm_activation(module: nn.Module, x, y, *, inputs=None) -> int:
    """``activation.dmas_activation`` of the torch module that does the same work: ``Nx + Ny``,
    ``Nx`` in place (Tanh: the reference's ``2·Nx + Ny``)."""
    return dmas_activation(_timm_activation(module)[0], x, y)


# ------------------------------------------------ timm's per-channel scales (LayerScale, Scale, Affine)

#: ``class name -> (its parameters, FLOPs per element)``: ``LayerScale`` ``x * gamma`` (last axis)
#: and ``LayerScale2d`` ``x * gamma.view(1, -1, 1, 1)`` (``timm.layers.layer_scale``), metaformer's
#: ``Scale`` ``x * scale.view(shape)`` (``timm.models.metaformer``): one multiply; ResMLP's
#: ``Affine`` ``torch.addcmul(beta, alpha, x)`` (``timm.models.mlp_mixer``): a multiply and an add.
TIMM_SCALES: dict[str, tuple[frozenset[str], int]] = {
    "LayerScale": (frozenset(("gamma",)), 1),
    "LayerScale2d": (frozenset(("gamma",)), 1),
    "Scale": (frozenset(("scale",)), 1),
    "Affine": (frozenset(("alpha", "beta")), 2),
}


def match_layer_scale(module: nn.Module) -> bool:
    """A class of :data:`TIMM_SCALES` by name whose module path is under ``timm``, with exactly the
    table's parameters (``gamma``/``scale`` 1-D; ``alpha`` and ``beta`` of one shape with a single
    non-1 axis), a bool ``inplace`` where there is one (``x.mul_(gamma)``), and no children."""
    entry = TIMM_SCALES.get(type(module).__name__)
    if entry is None or not from_package(module, "timm") or not is_leaf(module):
        return False
    params = own_parameters(module)
    if set(params) != entry[0] or not isinstance(getattr(module, "inplace", False), bool):
        return False
    shapes = set(params.values())
    if len(shapes) != 1:
        return False
    dims = next(iter(shapes))
    return len(dims) == 1 if len(params) == 1 else sum(d != 1 for d in dims) <= 1


def flops_layer_scale(module: nn.Module, inputs, out=None) -> int:
    """``Nx`` (one multiply per element by the broadcast scale); ``Affine`` ``2·Nx`` (multiply and
    add)."""
    return TIMM_SCALES[type(module).__name__][1] * numel(input_tensor(inputs, module))


def dmas_layer_scale(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + P + Ny``: the input, the ``P`` parameters, the output (``Nx + P`` in place, the
    activations' in-place rule)."""
    return numel(x) + num_params(module) + (0 if getattr(module, "inplace", False) else numel(y))


# ------------------------------------------------ timm's GlobalResponseNorm


def match_global_response_norm(module: nn.Module) -> bool:
    """timm's ``GlobalResponseNorm`` (``timm.layers.grn``, ConvNeXt-V2): module path under ``timm``,
    the class name, a real ``eps``, ``spatial_dim`` ``(1, 2)`` with ``channel_dim`` ``-1``
    (channels last) or ``(2, 3)`` with ``1`` (NCHW), 1-D ``weight`` and ``bias`` of one length as the
    only parameters, no children."""
    if type(module).__name__ != "GlobalResponseNorm" or not from_package(module, "timm"):
        return False
    axes = (tuple(getattr(module, "spatial_dim", ()) or ()), getattr(module, "channel_dim", None))
    params = own_parameters(module)
    return (
        is_leaf(module)
        and is_real(getattr(module, "eps", None))
        and axes in (((1, 2), -1), ((2, 3), 1))
        and set(params) == {"weight", "bias"}
        and len(params["weight"]) == 1
        and params["weight"] == params["bias"]
    )


def _grn_sizes(module: nn.Module, x) -> tuple[int, int, int]:
    """``(Nx, G, B)``: input elements, per-channel norms ``G = batch·C``, per-sample means ``B``."""
    dims = shape(x)
    if len(dims) != 4:
        raise ValueError(f"GlobalResponseNorm formula expects a 4-D input, got shape {dims}.")
    n = numel(x)
    spatial = dims[module.spatial_dim[0]] * dims[module.spatial_dim[1]]
    return n, (n // spatial if spatial else 0), dims[0]


def flops_global_response_norm(module: nn.Module, inputs, out=None) -> int:
    """``6·Nx + 2G + B``, step by step (``x_g = x.norm(2, spatial)``, ``x_n = x_g / (x_g.mean(channel)
    + eps)``, ``x + addcmul(bias, weight, x * x_n)``): the L2 norms square and sum (``Nx`` squares,
    ``Nx − G`` adds, ``G`` square roots: ``2·Nx``), the channel mean (``G − B`` adds, ``B`` divides:
    ``G``), the ε add (``B``), the division (``G``), ``x * x_n`` (``Nx``), ``addcmul`` (``2·Nx``)
    and the residual add (``Nx``)."""
    n, norms, batch = _grn_sizes(module, input_tensor(inputs, module))
    return 6 * n + 2 * norms + batch


def macs_global_response_norm(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0: no weight × activation contraction (``norm.macs_norm``)."""
    return 0


def dmas_global_response_norm(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + P + Ny + 2G + 2B``, the norms' convention (``norm.dmas_rmsnorm``): the input, the
    parameters and the output once, each statistic (the ``G`` norms, the ``B`` means) written and
    read once."""
    n, norms, batch = _grn_sizes(module, x)
    return n + num_params(module) + numel(y) + 2 * norms + 2 * batch


# ------------------------------------------------ timm's FastAdaptiveAvgPool

_GLOBAL_POOL = nn.AdaptiveAvgPool2d(1)


def match_fast_adaptive_avg_pool(module: nn.Module) -> bool:
    """timm's ``FastAdaptiveAvgPool`` (``x.mean(self.dim, keepdim=not self.flatten)``): module path
    under ``timm``, the class name, a bool ``flatten``, ``dim`` the spatial axes ``(2, 3)`` (NCHW)
    or ``(1, 2)`` (NHWC), no parameters or children."""
    dim = getattr(module, "dim", None)
    return (
        type(module).__name__ == "FastAdaptiveAvgPool"
        and from_package(module, "timm")
        and parameterless_leaf(module)
        and isinstance(getattr(module, "flatten", None), bool)
        and isinstance(dim, (tuple, list))
        and tuple(dim) in ((2, 3), (1, 2))
    )


def _as_global_pool(module: nn.Module, x) -> tuple[ShapeOnly, ShapeOnly]:
    """The ``nn.AdaptiveAvgPool2d(1)`` call on NCHW shapes that computes the same means."""
    dims = shape(x)
    if len(dims) != 4:
        raise ValueError(f"FastAdaptiveAvgPool formula expects a 4-D input, got shape {dims}.")
    n, c, h, w = (dims[0], dims[3], dims[1], dims[2]) if tuple(module.dim) == (1, 2) else dims
    return ShapeOnly((n, c, h, w)), ShapeOnly((n, c, 1, 1))


def flops_fast_adaptive_avg_pool(module: nn.Module, inputs, out=None) -> int:
    """``nn.AdaptiveAvgPool2d(1)``'s ``W − Ny + 2·Ny`` (``pooling.flops_adaptive_avgpoolnd``) with
    ``W = N·C·H·W`` and ``Ny = N·C``: ``H·W − 1`` adds and 2 division operations per mean."""
    x, y = _as_global_pool(module, input_tensor(inputs, module))
    return flops_adaptive_avgpoolnd(_GLOBAL_POOL, (x,), y)


def macs_fast_adaptive_avg_pool(module: nn.Module, x, y, *, inputs=None) -> int:
    """As the FLOPs (``pooling.macs_adaptive_avgpoolnd``)."""
    return macs_adaptive_avgpoolnd(_GLOBAL_POOL, *_as_global_pool(module, x))


def dmas_fast_adaptive_avg_pool(module: nn.Module, x, y, *, inputs=None) -> int:
    """``W + Ny`` (``pooling.dmas_adaptive_poolnd``); flattening the means is a view."""
    return dmas_adaptive_poolnd(_GLOBAL_POOL, *_as_global_pool(module, x))


def rf_fast_adaptive_avg_pool(module: nn.Module, x, y) -> tuple:
    """``(H, H, 0)``: one window over the whole first spatial axis (``pooling.rf_adaptive_poolnd``)."""
    return rf_adaptive_poolnd(_GLOBAL_POOL, *_as_global_pool(module, x))
