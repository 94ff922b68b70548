"""Data flow of one forward, followed by tensor identity: which field each tensor carries.

:class:`TensorStates` maps live tensors (by ``id``, guarded by a weak reference and the tensor's
version counter) to their cumulative :class:`~torchscan_lsp.engine.dataflow.receptive.Field`. Model inputs
start the chains; every metric-leaf call stores the field of its outputs; every operator that runs
*outside* leaf calls (in a container's own ``forward``) is followed by :func:`propagate`:

* views and copies (``view``, ``flatten``, ``permute``, ``slice``, ``clone``, ...) carry their input's
  field when the first spatial axis stays in place (a ``slice`` of it shifts the padding and scales
  the jump); when the spatial axis is folded into the feature axis (``flatten(1)``) the field
  remembers it; any other move of the axis breaks the chain;
* element-wise arithmetic and activations (``add``, ``mul``, ``sigmoid``, in-place variants) and a
  ``cat`` along a non-spatial axis merge their inputs' fields (:func:`receptive.union`);
* an operator without tensor inputs (``zeros``, ``arange``) creates a constant: a fresh source;
* anything else (``bmm``, ``softmax``, reductions, functional convolutions, attention kernels) mixes
  positions in a way not modelled here: its outputs' field is unavailable, with the operator and the
  container named.

Parameters, buffers and one-element tensors are constants: they add no dependency on the input.
A tensor modified in place by something the crawler did not follow reads as unavailable.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from torchscan_lsp.engine.dataflow.receptive import CONSTANT, Field, fold_into_features, union

__all__ = ["TensorStates", "propagate", "tensors_in"]


def _version(tensor: torch.Tensor) -> int:
    try:
        return tensor._version
    except RuntimeError:  # inference tensors have no version counter
        return -1


class TensorStates:
    """Fields of the tensors seen so far in one forward (see the module docstring).

    Args:
        constants: ``id`` of the model's parameters and buffers (no dependency on the input).
    """

    __slots__ = ("_states", "_constants")

    def __init__(self, constants: set[int]) -> None:
        self._states: dict[int, tuple[Any, int, Field]] = {}
        self._constants = constants

    def set(self, tensor: torch.Tensor, field: Field, alias_of: torch.Tensor | None = None) -> None:
        """Record ``field`` for ``tensor`` at its current version.

        ``alias_of``: the tensor that ``tensor``, a view made by an operator just now, aliases. Inside
        the dispatcher a fresh view still has a version counter of its own (0); the caller's view
        shares its base's counter, so the base's version is the one a later check must compare with.
        """
        try:
            ref = weakref.ref(tensor)
        except TypeError:  # pragma: no cover - tensor subclasses without weak references
            return
        version = _version(alias_of) if alias_of is not None and _aliases(tensor, alias_of) else _version(tensor)
        self._states[id(tensor)] = (ref, version, field)

    def get(self, tensor: torch.Tensor, describe: str, *, modified_by_caller: bool = False) -> Field:
        """The field of ``tensor``; ``describe`` names it in the cause when it is unknown.

        ``modified_by_caller``: the caller itself modified ``tensor`` in place since its field was
        recorded (an in-place leaf such as ``ReLU(inplace=True)`` returns its input): the version
        check is skipped.
        """
        entry = self._states.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            if modified_by_caller or entry[1] == _version(tensor):
                return entry[2]
            return Field.unavailable(f"{describe} was modified in place by work the crawler could not follow")
        if id(tensor) in self._constants or tensor.dim() == 0 or tensor.numel() == 1:
            return CONSTANT
        return Field.unavailable(f"{describe} was not produced by a module call or operator the crawler followed")


def _aliases(tensor: torch.Tensor, base: torch.Tensor) -> bool:
    try:
        return tensor.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # storage-less tensors (functional, nested)
        return False


def tensors_in(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """Tensors in ``value``, depth-first through tuples, lists and mapping values (4 levels)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if type(value) is tuple and len(value) == 1 and isinstance(value[0], torch.Tensor):
        return [value[0]]  # the common ``args`` of a module call
    if depth >= 4:
        return []
    if isinstance(value, (tuple, list)):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        return []
    found: list[torch.Tensor] = []
    for item in items:
        found.extend(tensors_in(item, depth + 1))
    return found


# operator kinds by packet name, without the in-place suffix
_VIEWS = frozenset(
    (
        "view", "_unsafe_view", "reshape", "_reshape_alias", "flatten", "unflatten", "view_as", "alias",
        "detach", "clone", "contiguous", "_to_copy", "to", "lift_fresh", "lift_fresh_copy", "expand",
        "expand_as", "squeeze", "unsqueeze", "permute", "transpose", "t", "movedim", "as_strided",
        "slice", "narrow", "select", "split", "split_with_sizes", "unbind", "chunk", "dropout",
        "native_dropout", "copy",
    )
)


def _kind_of(name: str) -> str:
    """``view``, ``cat``, ``elementwise`` or ``mixing`` for an operator name such as ``aten.add_``."""
    base = name.split(".", 1)[-1].rstrip("_")
    if base in _VIEWS:
        return "view"
    if base == "cat":
        return "cat"
    from torchscan_lsp.engine.operator_formulas import FORMULA_FAMILIES

    family = FORMULA_FAMILIES.get(name) or FORMULA_FAMILIES.get(name.rstrip("_"))
    if family == "elementwise" or (family == "activation" and "softmax" not in base and base != "glu"):
        return "elementwise"
    return "mixing"


_KINDS: dict[str, str] = {}


def _spatial_length(tensor: torch.Tensor, ndim: int) -> int:
    """Length of ``tensor`` along the output's first spatial axis (dim 2 of ``ndim``), right-aligned."""
    axis = 2 - (ndim - tensor.dim())
    return int(tensor.shape[axis]) if 0 <= axis < tensor.dim() else 1


def _view_field(name: str, field: Field, source: torch.Tensor, out: torch.Tensor, args: tuple, where: str) -> Field:
    """The field of ``out``, a view or copy of ``source`` made by operator ``name``."""
    if field.status == "unavailable" or source.dim() < 3:
        return field
    base = name.split(".", 1)[-1].rstrip("_")
    if out.dim() <= 2:  # the spatial axis was folded into the features (flatten(1), squeeze)
        return fold_into_features(field, int(source.shape[2]))
    moved = out.shape[:3] != source.shape[:3]
    if base in ("permute", "movedim", "transpose", "t"):
        if base == "permute":
            dims = [d % source.dim() for d in args[1]]
            moved = moved or dims[2] != 2
        else:
            moved = True if base in ("movedim", "t") else 2 in {d % source.dim() for d in args[1:3]}
    elif base in ("slice", "narrow", "select") and len(args) > 1 and args[1] % source.dim() == 2:
        if base == "select":
            moved = True
        elif field.status == "complete":
            start = args[2] if len(args) > 2 and args[2] is not None else 0
            start = start + source.shape[2] if start < 0 else start
            step = args[4] if base == "slice" and len(args) > 4 else 1
            return Field(
                rf=field.rf,
                jump=field.jump * step,
                padding=field.padding - min(start, int(source.shape[2])) * field.jump,
                folded=field.folded,
            )
        else:
            return field
    if moved and out.dim() < source.dim() and out.shape[:2] == source.shape[:2]:
        # flatten(2) of a patch grid: the positions of several spatial axes become one sequence
        return Field.unavailable(f"{where} flattened the spatial axes into one ({tuple(source.shape)} -> "
                                 f"{tuple(out.shape)})")
    if moved:
        return Field.unavailable(f"{where} moved the spatial axis ({tuple(source.shape)} -> {tuple(out.shape)})")
    return field


def propagate(states: TensorStates, name: str, args: tuple, kwargs: dict, out: Any, where: str) -> None:
    """Follow one operator that ran outside every leaf call: set the fields of its outputs.

    ``name``: the packet name (``aten.add_``); ``where``: ``"aten.add_ in 'layer1.0'"``, for causes.
    """
    outputs = tensors_in(out)
    if not outputs:
        return
    inputs = tensors_in(args) + tensors_in(kwargs)
    kind = _KINDS.get(name)
    if kind is None:
        kind = _KINDS[name] = _kind_of(name)
    if any(t.is_nested for t in outputs) or any(t.is_nested for t in inputs):
        # no single shape, so no spatial axis to follow (tensor_shapes explains nested tensors)
        for tensor in outputs:
            states.set(tensor, Field.unavailable(f"{where} works on a nested tensor, which has no single shape"))
        return
    if not inputs:  # created in the forward (zeros, arange): depends on no input
        for tensor in outputs:
            states.set(tensor, CONSTANT)
        return
    if kind == "view":
        source = inputs[-1] if name.endswith("copy_") else inputs[0]
        field = states.get(source, f"the input of {where}")
        for tensor in outputs:
            states.set(tensor, _view_field(name, field, source, tensor, args, where), alias_of=source)
        return
    first = outputs[0]
    ndim = first.dim()
    if kind == "cat":
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        if ndim >= 3 and dim % ndim == 2:
            states.set(first, Field.unavailable(f"{where} concatenates along the spatial axis"))
            return
        kind = "elementwise"
    if kind == "elementwise" and all(t.dim() <= ndim for t in inputs):
        length = int(first.shape[2]) if ndim >= 3 else 1
        branches = [
            (states.get(t, f"an input of {where}"), _spatial_length(t, ndim) if ndim >= 3 else 1) for t in inputs
        ]
        branches = [(f, n) for f, n in branches if f is not CONSTANT]
        field = union(branches, length, where) if branches else CONSTANT
        for tensor in outputs:
            states.set(tensor, field)
        return
    for tensor in outputs:
        states.set(tensor, Field.unavailable(f"{where} mixes positions in a way receptive fields do not model"))
