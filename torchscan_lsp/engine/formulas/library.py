"""Module classes of third-party model libraries (``transformers`` and code copied from it,
``torchvision``, ``timm``).

The engine imports no model library, so these families match modules by *structure*: the
attributes, parameters and children of the instance, and the names its class's ``forward`` refers
to (``forward.__code__.co_names``, decorators unwrapped). Where two classes share a structure but
compute different things, the class name decides as well. Each family's ``match_*`` docstring states
its rule and why it is enough. The families come after every torch family in the registry, so a
subclass of a torch module keeps its torch formula.

==========================  ===================================================================
family                      formulas
==========================  ===================================================================
``gpt2_conv1d``             ``nn.Linear``'s (``linear.py``) with ``in = weight.shape[0]``,
                            ``out = nf``: the same ``addmm``, with the weight stored transposed
``library_activation``      ``cost·Nx`` FLOPs, 0 MACs, ``Nx + scalars + Ny`` DMAs; ``cost`` from the
                            torch activation table (``activation.py``) for the same function
``library_rms_norm``        ``nn.RMSNorm``'s (``norm.py``): ``3N + 2R + N`` FLOPs, 0 MACs,
                            ``N + P + Ny + 2R`` DMAs, ``R = N / x.shape[-1]``
``rotary_embedding``        ``A + 4·Ny`` FLOPs, ``A`` MACs, ``A/F + F + A + 4·Ny + 2`` DMAs (below)
``stochastic_depth``        torchvision's ``StochasticDepth``, timm's ``DropPath``: 0, 0, 0 in
                            evaluation (dropout's elided identity); in training ``Nx + [s]·M``
                            FLOPs, 0 MACs, ``Nx + Ny + 2M + [s]·(2M + 1)`` DMAs (``M`` mask values)
``vision_permute``          torchvision's ``Permute``: 0, 0, ``2·Nx`` (``nn.Flatten``'s view)
``timm_activation``         timm's ``GELU``, ``Sigmoid``, ``Swish``, ...: the torch activation's
``layer_scale``             timm's ``LayerScale``/``LayerScale2d``/``Scale``: ``Nx``, 0,
                            ``Nx + P + Ny``; ``Affine``: ``2·Nx``, 0, ``Nx + P + Ny``
``global_response_norm``    timm's ``GlobalResponseNorm``: ``6·Nx + 2G + B``, 0,
                            ``Nx + P + Ny + 2G + 2B`` (``G`` = batch·channels, ``B`` = batch)
``fast_adaptive_avg_pool``  timm's ``FastAdaptiveAvgPool``: ``nn.AdaptiveAvgPool2d(1)``'s
==========================  ===================================================================

The vision-library families (``torchvision``, ``timm``) match on the class's module path
(``type(module).__module__`` under ``torchvision.ops`` or ``timm``), the class name and the
attributes the formula reads: their classes have too little structure to be told apart otherwise.

Casts (``.to(torch.float32)``, ``.float()``, the cast back to the input dtype) are data movement:
they add no FLOPs, and, as everywhere in this package, DMAs count the logical algorithm's reads and
writes, not an implementation's extra copies.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from functools import lru_cache
from types import SimpleNamespace

from torch import nn

from ._common import ShapeOnly, input_tensor, lower_bound, num_params, numel, output_tensor, rf_pointwise, shape
from ._registry import Family
from .activation import dmas_activation, elementwise_cost, flops_activation
from .linear import dmas_linear, flops_linear, macs_linear
from .pooling import dmas_adaptive_poolnd, flops_adaptive_avgpoolnd, macs_adaptive_avgpoolnd, rf_adaptive_poolnd
from .structural import dmas_flatten, dmas_identity, macs_zero

__all__ = [
    "LIBRARY_ACTIVATIONS",
    "T5_STYLE_RMS_NORMS",
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
    "dmas_conv1d",
    "dmas_library_activation",
    "dmas_library_rmsnorm",
    "dmas_rotary",
    "flops_conv1d",
    "flops_library_activation",
    "flops_library_rmsnorm",
    "flops_rotary",
    "macs_conv1d",
    "macs_library_activation",
    "macs_library_rmsnorm",
    "macs_rotary",
    "match_conv1d",
    "match_library_activation",
    "match_rms_norm",
    "match_rotary",
    "rf_library",
]


# ---------------------------------------------------------------------------------------- helpers


@lru_cache(maxsize=None)
def _forward_facts(cls: type) -> tuple[frozenset[str], tuple[str, ...]]:
    """(names ``forward`` refers to, its positional parameter names), decorators unwrapped."""
    forward = inspect.unwrap(cls.forward)
    code = getattr(forward, "__code__", None)
    if code is None:
        return frozenset(), ()
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return frozenset(code.co_names), ()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(code.co_names), tuple(p.name for p in params if p.kind in positional)


def _is_leaf(module: nn.Module) -> bool:
    return next(module.children(), None) is None


def _own_parameters(module: nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: shape(p) for name, p in module.named_parameters(recurse=False)}


# ---------------------------------------------------------------------------- GPT-2's Conv1D

#: what ``transformers.pytorch_utils.Conv1D.forward`` refers to: one ``addmm`` and views
_CONV1D_NAMES = frozenset(("size", "nf", "torch", "addmm", "bias", "view", "weight"))


def match_conv1d(module: nn.Module) -> bool:
    """GPT-2's ``Conv1D``: an integer ``nf``, a 2-D ``weight`` of shape ``(nx, nf)``, an optional
    ``(nf,)`` bias, no children, and a ``forward`` that refers to nothing beyond ``addmm``, the
    weight, the bias and views. The ``addmm``-only forward is what makes it a Linear (a real 1-D
    convolution would call ``conv1d``); the name is not needed."""
    nf = getattr(module, "nf", None)
    if not isinstance(nf, int) or isinstance(nf, bool) or not _is_leaf(module):
        return False
    names, positional = _forward_facts(type(module))
    if not names or not names <= _CONV1D_NAMES or "addmm" not in names or len(positional) != 2:
        return False
    params = _own_parameters(module)
    weight, bias = params.get("weight"), params.get("bias", ())
    return (
        weight is not None
        and len(weight) == 2
        and weight[1] == nf
        and bias in ((), (nf,))
        and set(params) <= {"weight", "bias"}
    )


def _as_linear(module: nn.Module) -> SimpleNamespace:
    """The ``nn.Linear`` attributes that describe the same ``addmm``."""
    return SimpleNamespace(in_features=int(module.weight.shape[0]), out_features=module.nf, bias=module.bias)


def flops_conv1d(module: nn.Module, inputs, out=None) -> int:
    """``nf·T·(2·nx − 1) + [bias]·nf·T``: ``flops_linear`` with ``in = nx``, ``out = nf``."""
    return flops_linear(_as_linear(module), inputs, out)


def macs_conv1d(module: nn.Module, x, y, *, inputs=None) -> int:
    """``nx·T·nf``: ``macs_linear`` (``FlopCounterMode`` counts twice this for the ``addmm``)."""
    return macs_linear(_as_linear(module), x, y)


def dmas_conv1d(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + P + Ny``: ``dmas_linear``."""
    return dmas_linear(module, x, y)


# ---------------------------------------------------------------------------- activations


def _cost(reference: nn.Module, extra: int = 0) -> int:
    return elementwise_cost(reference) + extra


#: ``class name -> (FLOPs per element, scalar hyper-parameter reads)``, each cost taken from the
#: torch module that computes the same function (``transformers.activations``):
LIBRARY_ACTIVATIONS: dict[str, tuple[int, int]] = {
    # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as nn.GELU(approximate="tanh"): 14
    "NewGELUActivation": (_cost(nn.GELU(approximate="tanh")), 0),
    "GELUTanh": (_cost(nn.GELU(approximate="tanh")), 0),
    "PytorchGELUTanh": (_cost(nn.GELU(approximate="tanh")), 0),
    "AccurateGELUActivation": (_cost(nn.GELU(approximate="tanh")), 0),
    # 0.5·x·(1 + tanh(x·0.7978845608·(1 + 0.044715·x·x))): the same 14 operations, reordered
    "FastGELUActivation": (_cost(nn.GELU(approximate="tanh")), 0),
    # F.gelu or x·0.5·(1 + erf(x/√2)), as nn.GELU(): 5
    "GELUActivation": (_cost(nn.GELU()), 0),
    # clip(gelu(x), min, max): GELU, then Hardtanh's two clamps and two bound reads
    "ClippedGELUActivation": (_cost(nn.GELU()) + _cost(nn.Hardtanh()), 2),
    # F.silu, as nn.SiLU: 5
    "SiLUActivation": (_cost(nn.SiLU()), 0),
    # x·sigmoid(1.702·x): SiLU and the scale
    "QuickGELUActivation": (_cost(nn.SiLU(), 1), 0),
    # F.mish, as nn.Mish: 10
    "MishActivation": (_cost(nn.Mish()), 0),
    # relu(x)², a ReLU and a square
    "ReLUSquaredActivation": (_cost(nn.ReLU(), 1), 0),
    # sqrt(softplus(x)), nn.Softplus and a square root
    "SqrtSoftplusActivation": (_cost(nn.Softplus(), 1), 0),
    # 0.5·(1 + erf((x − μ)/(σ·√2))): subtract, divide, erf, add, multiply (σ·√2 is a Python float)
    "LaplaceActivation": (5, 0),
    # the identity
    "LinearActivation": (0, 0),
}


def match_library_activation(module: nn.Module) -> bool:
    """A parameterless leaf whose class name is a key of :data:`LIBRARY_ACTIVATIONS`. Structure
    cannot tell these apart (every one is a parameterless ``forward(input)``), so the name decides;
    the table maps each name to the function its ``transformers`` class computes."""
    return (
        type(module).__name__ in LIBRARY_ACTIVATIONS
        and _is_leaf(module)
        and next(module.parameters(recurse=False), None) is None
    )


def flops_library_activation(module: nn.Module, inputs, out=None) -> int:
    """``cost·Nx`` with the per-element cost of :data:`LIBRARY_ACTIVATIONS`."""
    return LIBRARY_ACTIVATIONS[type(module).__name__][0] * numel(input_tensor(inputs, module))


def macs_library_activation(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0: element-wise work is not a multiply-accumulate."""
    return 0


def dmas_library_activation(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + scalars + Ny`` (``activation.dmas_activation``); the identity reads ``Nx`` only, as
    ``nn.Identity`` (``structural.dmas_identity``)."""
    name = type(module).__name__
    if name == "LinearActivation":
        return dmas_identity(module, x, y)
    return numel(x) + LIBRARY_ACTIVATIONS[name][1] + numel(y)


# ---------------------------------------------------------------------------- RMS norms

#: T5-style layer norms: RMS norms (no mean subtraction, no bias) whose name says "LayerNorm"
T5_STYLE_RMS_NORMS = frozenset(
    (
        "T5LayerNorm", "MT5LayerNorm", "UMT5LayerNorm", "LongT5LayerNorm", "SwitchTransformersLayerNorm",
        "UdopLayerNorm", "Pix2StructLayerNorm", "Kosmos2_5LayerNorm", "Pop2PianoLayerNorm",
    )
)
#: what an RMS norm's ``forward`` refers to: casts, ``pow``, ``mean``, ``rsqrt``, ε and the weight
_RMS_NAMES = frozenset(
    ("dtype", "to", "torch", "float32", "float16", "bfloat16", "pow", "mean", "rsqrt", "variance_epsilon", "weight")
)


def match_rms_norm(module: nn.Module) -> bool:
    """``LlamaRMSNorm``-style norms (Mistral, Mamba, Qwen, ... and T5's layer norm): a class whose
    name ends in ``RMSNorm`` or is a T5-style layer norm (:data:`T5_STYLE_RMS_NORMS`), a numeric
    ``variance_epsilon``, a 1-D ``weight`` as the only parameter, no children, and a
    ``forward(hidden_states)`` that refers to nothing beyond casts, ``pow``, ``mean``, ``rsqrt``, ε
    and the weight. Structure alone is not enough: Cohere's ``LayerNorm`` has the same attributes and
    names but subtracts the mean (the subtraction is an operator, not a name), hence the name rule;
    gated variants (``...RMSNormGated``) take a second input and fail the signature rule."""
    name = type(module).__name__
    if not (name.endswith("RMSNorm") or name in T5_STYLE_RMS_NORMS):
        return False
    eps = getattr(module, "variance_epsilon", None)
    if not isinstance(eps, numbers.Real) or not _is_leaf(module):
        return False
    names, positional = _forward_facts(type(module))
    if len(positional) != 2 or not names or not names <= _RMS_NAMES:
        return False
    params = _own_parameters(module)
    return set(params) == {"weight"} and len(params["weight"]) == 1


def _rms_rows(x) -> int:
    dims = shape(x)
    return numel(x) // dims[-1] if dims and dims[-1] else 0


def flops_library_rmsnorm(module: nn.Module, inputs, out=None) -> int:
    """``3N + 2R + N`` (``norm.flops_rmsnorm`` with its weight): square, mean and scale per
    element, ε add and reciprocal square root per row, the weight multiply. ``R = N / x.shape[-1]``:
    these classes normalise the last axis (``mean(-1)``)."""
    x = input_tensor(inputs, module)
    n = numel(x)
    return 3 * n + 2 * _rms_rows(x) + n


def macs_library_rmsnorm(module: nn.Module, x, y, *, inputs=None) -> int:
    """0: no weight × activation contraction (``norm.macs_norm``)."""
    return 0


def dmas_library_rmsnorm(module: nn.Module, x, y, *, inputs=None) -> int:
    """``N + P + Ny + 2R`` (``norm.dmas_rmsnorm``): the input, the weight, the output and one
    statistic per row written and read once."""
    return numel(x) + num_params(module) + numel(y) + 2 * _rms_rows(x)


# ---------------------------------------------------------------------------- rotary embeddings

#: what the Llama-style rotary ``forward`` refers to (``inspect.unwrap`` skips ``dynamic_rope_update``)
_ROTARY_NAMES = frozenset(
    (
        "float", "inv_freq", "to", "device", "torch", "cat", "repeat_interleave", "cos", "sin",
        "attention_scaling", "dtype",
    )
)
_DYNAMIC_ROPE = ("dynamic", "longrope")


def match_rotary(module: nn.Module) -> bool:
    """``LlamaRotaryEmbedding``-style rotary tables (Mistral, Qwen2, Gemma, GPT-OSS, ...): a leaf
    with a 1-D ``inv_freq`` buffer, a numeric ``attention_scaling``, and a ``forward(x,
    position_ids)`` that refers to nothing beyond the frequencies, the scale, ``cos``, ``sin``, the
    concatenation (or ``repeat_interleave``) of the frequency table and casts. Variants that
    recombine the table per axis (multimodal ``recomposition_frequencies``), return complex numbers
    (``torch.polar``) or select frequencies per layer type refer to other names and are not matched.
    The name is not needed."""
    inv_freq = getattr(module, "inv_freq", None)
    scale = getattr(module, "attention_scaling", None)
    if inv_freq is None or len(getattr(inv_freq, "shape", ())) != 1 or not isinstance(scale, numbers.Real):
        return False
    if not _is_leaf(module):
        return False
    names, positional = _forward_facts(type(module))
    return positional == ("self", "x", "position_ids") and {"cos", "sin", "inv_freq"} <= names <= _ROTARY_NAMES


def _rotary_sizes(module: nn.Module, y) -> tuple[int, int, int, int]:
    """``(positions, F, A, Ny)``: position ids, frequencies, angles ``positions·F``, table elements.

    The table (``cos``) has shape ``(*position_ids.shape, D)`` with ``D = F`` or ``D = 2F`` (the
    angles concatenated with themselves).
    """
    dims, freqs = shape(y), numel(module.inv_freq)
    if not dims or dims[-1] not in (freqs, 2 * freqs):
        raise ValueError(
            f"{type(module).__name__} output's last axis ({dims[-1] if dims else None}) is neither the "
            f"{freqs} frequencies nor twice that."
        )
    positions = numel(y) // dims[-1]
    if any(rope in str(getattr(module, "rope_type", "")) for rope in _DYNAMIC_ROPE):
        lower_bound(
            f"{type(module).__name__} with rope_type={module.rope_type!r} may recompute its frequencies "
            "in the call; that update is not counted."
        )
    return positions, freqs, positions * freqs, numel(y)


def flops_rotary(module: nn.Module, inputs, out) -> int:
    """``A + 4·Ny``: the outer product ``position_ids ⊗ inv_freq`` (``A`` multiplies), then ``cos``
    and ``sin`` of the ``Ny``-element table (1 FLOP each per element, the operator library's
    convention) and the multiply by ``attention_scaling`` of each (done even when it is 1).
    Concatenating the angles and the casts are data movement. ``Ny`` is the ``cos`` output's size
    (``sin`` has the same shape)."""
    _, _, angles, table = _rotary_sizes(module, output_tensor(out, module))
    return angles + 4 * table


def macs_rotary(module: nn.Module, x, y, *, inputs=None) -> int:
    """``A``: the outer product is a contraction of inner length 1 (one multiply-accumulate per
    angle, ``in·Ny`` with ``in = 1`` as for a Linear; older ``transformers`` computed it with
    ``@``)."""
    return _rotary_sizes(module, y)[2]


def dmas_rotary(module: nn.Module, x, y, *, inputs=None) -> int:
    """``positions + F + A + 4·Ny + 2``, stage by stage: the outer product reads the position ids
    and the ``F`` frequencies and writes the ``A`` angles; ``cos`` and ``sin`` each read one angle
    per table element and the scale, and write ``Ny`` elements. ``x`` only supplies a device and a
    dtype: it is not read."""
    positions, freqs, angles, table = _rotary_sizes(module, y)
    return positions + freqs + angles + 2 * (table + 1 + table)


# ---------------------------------------------------------------------------- vision libraries
#
# ``torchvision`` and ``timm`` classes without a torch base class. Their structure is a handful of
# plain attributes, so each rule is: the class's module path starts with the library's package
# (``type(module).__module__``), the class name, no children, and the attributes the formula reads.
# Each formula is the torch formula of the module that does the same work, so the counts agree.


def _module_path(module: nn.Module) -> str:
    return getattr(type(module), "__module__", "") or ""


def _from_package(module: nn.Module, package: str) -> bool:
    path = _module_path(module)
    return path == package or path.startswith(package + ".")


def _parameterless_leaf(module: nn.Module) -> bool:
    return _is_leaf(module) and next(module.parameters(recurse=False), None) is None


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


# ------------------------------------------------ stochastic depth (StochasticDepth, DropPath)


def match_stochastic_depth(module: nn.Module) -> bool:
    """``torchvision.ops.StochasticDepth`` (module path under ``torchvision.ops``, a real ``p`` in
    ``[0, 1]``, ``mode`` ``"row"`` or ``"batch"``) or timm's ``DropPath`` (module path under
    ``timm``, a real ``drop_prob`` in ``[0, 1]``, ``scale_by_keep`` a bool when present); by class
    name, with no parameters or children. Both return the very input in evaluation and multiply it
    by a random 0/1 mask, one value per sample (``row``) or per batch, in training."""
    name = type(module).__name__
    if not _parameterless_leaf(module):
        return False
    if name == "StochasticDepth" and _from_package(module, "torchvision.ops"):
        p = getattr(module, "p", None)
        return _is_real(p) and 0 <= p <= 1 and getattr(module, "mode", None) in ("row", "batch")
    if name == "DropPath" and _from_package(module, "timm"):
        p = getattr(module, "drop_prob", None)
        return _is_real(p) and 0 <= p <= 1 and isinstance(getattr(module, "scale_by_keep", True), bool)
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
        and _from_package(module, "torchvision.ops")
        and _parameterless_leaf(module)
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
        and _from_package(module, "timm")
        and _parameterless_leaf(module)
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
    if entry is None or not _from_package(module, "timm") or not _is_leaf(module):
        return False
    params = _own_parameters(module)
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
    if type(module).__name__ != "GlobalResponseNorm" or not _from_package(module, "timm"):
        return False
    axes = (tuple(getattr(module, "spatial_dim", ()) or ()), getattr(module, "channel_dim", None))
    params = _own_parameters(module)
    return (
        _is_leaf(module)
        and _is_real(getattr(module, "eps", None))
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
        and _from_package(module, "timm")
        and _parameterless_leaf(module)
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


rf_library = rf_pointwise

FAMILIES = [
    Family(
        "stochastic_depth",
        (),
        flops_stochastic_depth,
        macs_stochastic_depth,
        dmas_stochastic_depth,
        rf_library,
        match=match_stochastic_depth,
    ),
    Family("vision_permute", (), flops_permute, macs_zero, dmas_permute, rf_library, match=match_permute),
    Family(
        "timm_activation",
        (),
        flops_timm_activation,
        macs_zero,
        dmas_timm_activation,
        rf_library,
        match=match_timm_activation,
    ),
    Family("layer_scale", (), flops_layer_scale, macs_zero, dmas_layer_scale, rf_library, match=match_layer_scale),
    Family(
        "global_response_norm",
        (),
        flops_global_response_norm,
        macs_global_response_norm,
        dmas_global_response_norm,
        rf_library,
        match=match_global_response_norm,
    ),
    Family(
        "fast_adaptive_avg_pool",
        (),
        flops_fast_adaptive_avg_pool,
        macs_fast_adaptive_avg_pool,
        dmas_fast_adaptive_avg_pool,
        rf_fast_adaptive_avg_pool,
        match=match_fast_adaptive_avg_pool,
    ),
    Family("gpt2_conv1d", (), flops_conv1d, macs_conv1d, dmas_conv1d, rf_library, match=match_conv1d),
    Family(
        "library_activation",
        (),
        flops_library_activation,
        macs_library_activation,
        dmas_library_activation,
        rf_library,
        match=match_library_activation,
    ),
    Family(
        "library_rms_norm",
        (),
        flops_library_rmsnorm,
        macs_library_rmsnorm,
        dmas_library_rmsnorm,
        rf_library,
        match=match_rms_norm,
    ),
    Family("rotary_embedding", (), flops_rotary, macs_rotary, dmas_rotary, rf_library, match=match_rotary),
]

