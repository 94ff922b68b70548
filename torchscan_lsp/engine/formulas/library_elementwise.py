"""Small element-wise classes of ``transformers`` (and code copied from it), matched by what their
``forward`` does: the library's ``DropPath`` copies (Swin, ConvNeXt, BEiT, SegFormer, ...),
MobileBERT's ``NoNorm`` (an element-wise affine) and Wav2Vec2's ``SamePadLayer`` (a trailing trim).
The rules and formulas are tabulated in ``formulas/library.py``."""

from __future__ import annotations

from torch import nn

from ._common import input_tensor, num_params, numel, shape
from ._library_structure import binary_operators, forward_facts, forward_names, is_leaf, is_real, own_parameters
from ._library_structure import parameterless_leaf
from .structural import dmas_identity

__all__ = [
    "dmas_affine",
    "dmas_drop_path",
    "dmas_trailing_trim",
    "flops_affine",
    "flops_drop_path",
    "match_affine",
    "match_drop_path",
    "match_trailing_trim",
]


# ---------------------------------------------------------------------------- DropPath copies

#: what ``transformers``' ``DropPath.forward`` refers to (one body, copied into 43 model files)
_DROP_PATH_NAMES = frozenset(
    ("drop_prob", "training", "shape", "ndim", "torch", "rand", "dtype", "device", "floor", "div")
)


def match_drop_path(module: nn.Module) -> bool:
    """``transformers``' stochastic depth (``SwinDropPath``, ``ConvNextDropPath``, ...): a
    parameterless leaf with a real ``drop_prob`` in ``[0, 1]`` and a ``forward(hidden_states)`` that
    refers to ``rand``, ``floor`` and ``div`` and nothing beyond them, the probability, the training
    flag and shapes: ``x.div(keep) * floor(rand(B, 1, ...) + keep)`` in training with ``p > 0``,
    else ``x`` itself. The name is not needed."""
    p = getattr(module, "drop_prob", None)
    if not is_real(p) or not 0.0 <= p <= 1.0 or not parameterless_leaf(module):
        return False
    names = forward_names(type(module))
    return {"rand", "floor", "div"} <= names <= _DROP_PATH_NAMES and len(forward_facts(type(module))[1]) == 2


def _drop_mask(module: nn.Module, x) -> int:
    """``M``, the mask's elements (one per sample), or 0 when the call returns its input."""
    if not module.training or module.drop_prob == 0.0:
        return 0
    dims = shape(x)
    return dims[0] if dims else 1


def flops_drop_path(module: nn.Module, inputs, out=None) -> int:
    """0 in evaluation or with ``p = 0`` (the input returned: an elided identity, as
    ``dropout.flops_dropout``); in training ``2·Nx + 2M``: ``rand + keep`` and ``floor`` on the
    ``M``-element mask, ``x.div(keep)`` and the broadcast mask multiply on the ``Nx`` elements. The
    draw is random number generation, not arithmetic (as for dropout)."""
    x = input_tensor(inputs, module)
    mask = _drop_mask(module, x)
    return 2 * numel(x) + 2 * mask if mask else 0


def dmas_drop_path(module: nn.Module, x, y, *, inputs=None) -> int:
    """0 when inactive; in training ``3·Nx + Ny + 6M + 2``, stage by stage: the draw writes ``M``;
    ``+ keep`` reads ``M`` and the keep rate and writes ``M``; ``floor`` reads and writes ``M``;
    ``div`` reads ``Nx`` and the keep rate and writes ``Nx``; the multiply reads ``Nx`` and ``M``
    and writes ``Ny``."""
    mask = _drop_mask(module, x)
    if not mask:
        return 0
    return mask + (2 * mask + 1) + 2 * mask + (2 * numel(x) + 1) + (numel(x) + mask + numel(y))


# ---------------------------------------------------------------------------- element-wise affine


def match_affine(module: nn.Module) -> bool:
    """MobileBERT's ``NoNorm`` (``x * weight + bias``): a leaf whose only parameters are a 1-D
    ``weight`` and a ``bias`` of the same shape, and a ``forward(x)`` that refers to nothing but
    them and applies exactly one multiplication and then one addition. The name is not needed."""
    if not is_leaf(module):
        return False
    params = own_parameters(module)
    if set(params) != {"weight", "bias"} or len(params["weight"]) != 1 or params["weight"] != params["bias"]:
        return False
    _, positional = forward_facts(type(module))
    return (forward_names(type(module)) == {"weight", "bias"} and len(positional) == 2
            and binary_operators(type(module)) == ("*", "+"))


def flops_affine(module: nn.Module, inputs, out=None) -> int:
    """``2·Nx``: a multiply and an add per element (timm's ``Affine``, ``library_vision``)."""
    return 2 * numel(input_tensor(inputs, module))


def dmas_affine(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + P + Ny``: the input, the weight and the bias, the output (as timm's ``Affine``)."""
    return numel(x) + num_params(module) + numel(y)


# ---------------------------------------------------------------------------- trailing trims


def match_trailing_trim(module: nn.Module) -> bool:
    """Wav2Vec2's ``SamePadLayer`` (and its copies: HuBERT, WavLM, SEW, UniSpeech, Data2VecAudio's
    ``PadLayer``, ...): a parameterless leaf with an integer ``num_pad_remove >= 0`` and a
    ``forward(hidden_states)`` that refers to nothing but ``num_pad_remove``, i.e.
    ``hidden_states[:, :, :-num_pad_remove]`` when it is positive (an even convolution kernel pads one
    step too many), else the input itself. The name is not needed."""
    trim = getattr(module, "num_pad_remove", None)
    if not isinstance(trim, int) or isinstance(trim, bool) or trim < 0 or not parameterless_leaf(module):
        return False
    names, positional = forward_facts(type(module))
    return names == {"num_pad_remove"} and len(positional) == 2


def dmas_trailing_trim(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx`` without a trim (the input returned, as ``nn.Identity``: ``structural.dmas_identity``);
    with one, ``2·Ny``: the slice reads and writes each kept element, as a view is counted by
    ``nn.Flatten`` (``structural.dmas_flatten``). No FLOPs and no MACs: nothing is computed."""
    if module.num_pad_remove == 0:
        return dmas_identity(module, x, y)
    return 2 * numel(y)
