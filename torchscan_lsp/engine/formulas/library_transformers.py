"""Formulas for classes of ``transformers`` (and code copied from it): GPT-2's ``Conv1D``, the
library's activation classes, its RMS norms and its rotary embeddings. The rules and formulas are
tabulated in ``formulas/library.py``."""

from __future__ import annotations

import numbers
from types import SimpleNamespace

from torch import nn

from ._common import arg, as_inputs, input_tensor, lower_bound, num_params, numel, output_tensor, shape
from ._library_structure import (
    adds_constant_to, binary_operators, forward_facts, forward_names, is_leaf, is_real, own_parameters, uses_matmul,
)
from .activation import elementwise_cost
from .linear import dmas_linear, flops_linear, macs_linear
from .structural import dmas_identity

__all__ = [
    "LIBRARY_ACTIVATIONS",
    "T5_STYLE_RMS_NORMS",
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
]


# ---------------------------------------------------------------------------- GPT-2's Conv1D

#: what ``transformers.pytorch_utils.Conv1D.forward`` refers to: one ``addmm`` and views
_CONV1D_NAMES = frozenset(("size", "nf", "torch", "addmm", "bias", "view", "weight"))


def match_conv1d(module: nn.Module) -> bool:
    """GPT-2's ``Conv1D``: an integer ``nf``, a 2-D ``weight`` of shape ``(nx, nf)``, an optional
    ``(nf,)`` bias, no children, and a ``forward`` that refers to nothing beyond ``addmm``, the
    weight, the bias and views. The ``addmm``-only forward is what makes it a Linear (a real 1-D
    convolution would call ``conv1d``); the name is not needed."""
    nf = getattr(module, "nf", None)
    if not isinstance(nf, int) or isinstance(nf, bool) or not is_leaf(module):
        return False
    names, positional = forward_facts(type(module))
    if not names or not names <= _CONV1D_NAMES or "addmm" not in names or len(positional) != 2:
        return False
    params = own_parameters(module)
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
    # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as nn.GELU(approximate="tanh"): 13
    "NewGELUActivation": (_cost(nn.GELU(approximate="tanh")), 0),
    "GELUTanh": (_cost(nn.GELU(approximate="tanh")), 0),
    "PytorchGELUTanh": (_cost(nn.GELU(approximate="tanh")), 0),
    "AccurateGELUActivation": (_cost(nn.GELU(approximate="tanh")), 0),
    # 0.5·x·(1 + tanh(x·0.7978845608·(1 + 0.044715·x·x))): the same function, its cost counted as GELU's
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
        and is_leaf(module)
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
#: what an RMS norm's ``forward`` (and the methods it calls) refers to: casts, ``pow``, ``mean``,
#: ``rsqrt``, ε and the weight
_RMS_NAMES = frozenset(
    (
        "dtype", "to", "torch", "float32", "float16", "bfloat16", "float", "type_as", "pow", "mean", "rsqrt",
        "variance_epsilon", "eps", "weight",
    )
)
_RMS_NEEDED = frozenset(("pow", "mean", "rsqrt"))


def _rms_eps(module: nn.Module):
    eps = getattr(module, "variance_epsilon", None)
    return getattr(module, "eps", None) if eps is None else eps


def match_rms_norm(module: nn.Module) -> bool:
    """``LlamaRMSNorm``-style norms (Mistral, Mamba, Qwen, ..., T5's layer norm) and Gemma's, whose
    scale is ``1 + weight``: a class whose name ends in ``RMSNorm`` or is a T5-style layer norm
    (:data:`T5_STYLE_RMS_NORMS`), a numeric ε (``variance_epsilon`` or ``eps``), a 1-D ``weight`` as
    the only parameter, no children, and a ``forward(hidden_states)`` that -- with the class's own
    methods it calls (Gemma's ``self._norm``) -- refers to ``pow``, ``mean`` and ``rsqrt`` and to
    nothing beyond them, casts, ε and the weight, and whose only binary operators are
    multiplications and the additions of ε and of Gemma's offset (read from the bytecode: a mean
    subtraction or a shifted input is an operator, not a name). The name rule stays because
    attributes and names are all these rules see of a class that computes something else with the
    same parts; gated variants (``...RMSNormGated``) take a second input and fail the signature
    rule."""
    name = type(module).__name__
    if not (name.endswith("RMSNorm") or name in T5_STYLE_RMS_NORMS):
        return False
    eps = _rms_eps(module)
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not is_leaf(module):
        return False
    _, positional = forward_facts(type(module))
    names = forward_names(type(module))
    if len(positional) != 2 or not _RMS_NEEDED <= names <= _RMS_NAMES:
        return False
    operators = binary_operators(type(module))
    if set(operators) - {"+", "*"} or operators.count("+") != 1 + _offset(module):
        return False
    params = own_parameters(module)
    return set(params) == {"weight"} and len(params["weight"]) == 1


def _rms_rows(x) -> int:
    dims = shape(x)
    return numel(x) // dims[-1] if dims and dims[-1] else 0


def _offset(module: nn.Module) -> bool:
    """Whether the scale is ``1 + weight`` (Gemma's RMS norms, whose weight starts at 0)."""
    return adds_constant_to(type(module), "weight", 1.0)


def flops_library_rmsnorm(module: nn.Module, inputs, out=None) -> int:
    """``4N + 3R + [offset]·P``: ``norm.flops_rmsnorm`` with its weight, operator by operator of
    ``x·rsqrt(mean(x²) + ε)·w`` (``pow`` N, ``mean`` N, the ε add R, ``rsqrt`` 2R, the two multiplies
    2N), and for a ``1 + weight`` scale (Gemma) the P additions. ``R = N / x.shape[-1]``: these
    classes normalise the last axis (``mean(-1)``)."""
    x = input_tensor(inputs, module)
    n = numel(x)
    return 4 * n + 3 * _rms_rows(x) + (num_params(module) if _offset(module) else 0)


def macs_library_rmsnorm(module: nn.Module, x, y, *, inputs=None) -> int:
    """0: no weight × activation contraction (``norm.macs_norm``)."""
    return 0


def dmas_library_rmsnorm(module: nn.Module, x, y, *, inputs=None) -> int:
    """``N + P + Ny + 2R + [offset]·2P`` (``norm.dmas_rmsnorm``): the input, the weight, the output
    and one statistic per row written and read once; a ``1 + weight`` scale writes its P values and
    reads them back."""
    p = num_params(module)
    return numel(x) + p + numel(y) + 2 * _rms_rows(x) + (2 * p if _offset(module) else 0)


# ---------------------------------------------------------------------------- rotary embeddings

#: what the Llama-style rotary ``forward`` refers to (``inspect.unwrap`` skips ``dynamic_rope_update``)
_ROTARY_NAMES = frozenset(
    (
        "float", "inv_freq", "to", "device", "torch", "cat", "repeat_interleave", "cos", "sin",
        "attention_scaling", "dtype",
        # the matrix-product form of older transformers: views of the frequencies and positions
        "expand", "shape", "transpose",
    )
)
_DYNAMIC_ROPE = ("dynamic", "longrope")


def match_rotary(module: nn.Module) -> bool:
    """``LlamaRotaryEmbedding``-style rotary tables (Mistral, Qwen2, Gemma, GPT-OSS, ...): a leaf
    with a 1-D ``inv_freq`` buffer, a numeric ``attention_scaling``, and a ``forward(x,
    position_ids)`` that refers to nothing beyond the frequencies, the scale, ``cos``, ``sin``, the
    concatenation (or ``repeat_interleave``) of the frequency table, casts, and the views of the
    matrix-product form (``expand``, ``transpose``). A table per layer type (Gemma 3, Cohere 2, ...:
    ``forward(x, position_ids, layer_type)``, a ``layer_types`` list and a ``<type>_inv_freq``
    buffer and ``<type>_attention_scaling`` per type, picked with ``getattr``) is the same
    computation with the call's frequencies. Variants that recombine the table per axis (multimodal
    ``recomposition_frequencies``) or return complex numbers (``torch.polar``) refer to other names
    and are not matched. The name is not needed."""
    if not is_leaf(module):
        return False
    names, positional = forward_facts(type(module))
    if positional == ("self", "x", "position_ids", "layer_type"):
        return _layer_tables(module) is not None and {"cos", "sin", "getattr"} <= names <= _ROTARY_NAMES | {"getattr"}
    inv_freq = getattr(module, "inv_freq", None)
    scale = getattr(module, "attention_scaling", None)
    if inv_freq is None or len(getattr(inv_freq, "shape", ())) != 1 or not isinstance(scale, numbers.Real):
        return False
    return positional == ("self", "x", "position_ids") and {"cos", "sin", "inv_freq"} <= names <= _ROTARY_NAMES


def _layer_tables(module: nn.Module) -> dict[str, int] | None:
    """``layer type -> F`` for a rotary table per layer type, or None when ``module`` has none."""
    types = getattr(module, "layer_types", None)
    if not isinstance(types, (list, tuple)) or not types or not all(isinstance(t, str) for t in types):
        return None
    tables = {}
    for layer_type in types:
        freqs = getattr(module, f"{layer_type}_inv_freq", None)
        if len(getattr(freqs, "shape", ())) != 1 or not is_real(getattr(module, f"{layer_type}_attention_scaling", None)):
            return None
        tables[layer_type] = numel(freqs)
    return tables


def _frequencies(module: nn.Module, inputs) -> tuple[int, object]:
    """``(F, rope type)`` of this call: the module's ``inv_freq``, or the call's layer type's."""
    tables = _layer_tables(module) if not hasattr(module, "inv_freq") else None
    rope = getattr(module, "rope_type", "")
    if tables is None:
        return numel(module.inv_freq), rope
    layer_type = arg(as_inputs(inputs), 2)
    if layer_type in tables:
        return tables[layer_type], rope.get(layer_type, "") if isinstance(rope, dict) else rope
    if len(set(tables.values())) == 1:  # every layer type has as many frequencies
        return next(iter(tables.values())), rope
    raise ValueError(f"{type(module).__name__} needs the call's layer_type (one of {sorted(tables)}), got {layer_type!r}.")


def _rotary_sizes(module: nn.Module, y, inputs=None) -> tuple[int, int, int, int]:
    """``(positions, F, A, Ny)``: position ids, frequencies, angles ``positions·F``, table elements.

    The table (``cos``) has shape ``(*position_ids.shape, D)`` with ``D = F`` or ``D = 2F`` (the
    angles concatenated with themselves).
    """
    freqs, rope = _frequencies(module, inputs)
    dims = shape(y)
    if not dims or dims[-1] not in (freqs, 2 * freqs):
        raise ValueError(
            f"{type(module).__name__} output's last axis ({dims[-1] if dims else None}) is neither the "
            f"{freqs} frequencies nor twice that."
        )
    positions = numel(y) // dims[-1]
    if any(dynamic in str(rope) for dynamic in _DYNAMIC_ROPE):
        lower_bound(
            f"{type(module).__name__} with rope_type={rope!r} may recompute its frequencies "
            "in the call; that update is not counted."
        )
    return positions, freqs, positions * freqs, numel(y)


def flops_rotary(module: nn.Module, inputs, out) -> int:
    """``A + 4·Ny``: the outer product ``position_ids ⊗ inv_freq`` (``A`` multiplies), then ``cos``
    and ``sin`` of the ``Ny``-element table (1 FLOP each per element, the operator library's
    convention) and the multiply by ``attention_scaling`` of each (done even when it is 1).
    Concatenating the angles and the casts are data movement. ``Ny`` is the ``cos`` output's size
    (``sin`` has the same shape)."""
    _, _, angles, table = _rotary_sizes(module, output_tensor(out, module), inputs)
    return angles + 4 * table


def macs_rotary(module: nn.Module, x, y, *, inputs=None) -> int:
    """``A`` when the outer product is a matrix product (older ``transformers``:
    ``inv_freq_expanded @ position_ids_expanded``, a contraction of inner length 1: one
    multiply-accumulate per angle, ``in·Ny`` with ``in = 1`` as for a Linear), else 0: a broadcast
    multiply (``position_ids[..., None] * inv_freq``) is element-wise work, not a multiply-accumulate."""
    angles = _rotary_sizes(module, y, inputs)[2]
    return angles if uses_matmul(type(module)) else 0


def dmas_rotary(module: nn.Module, x, y, *, inputs=None) -> int:
    """``positions + F + A + 4·Ny + 2``, stage by stage: the outer product reads the position ids
    and the ``F`` frequencies and writes the ``A`` angles; ``cos`` and ``sin`` each read one angle
    per table element and the scale, and write ``Ny`` elements. ``x`` only supplies a device and a
    dtype: it is not read."""
    positions, freqs, angles, table = _rotary_sizes(module, y, inputs)
    return positions + freqs + angles + 2 * (table + 1 + table)

