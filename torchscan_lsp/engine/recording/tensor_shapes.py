"""Shapes of any tensor: dense, nested, jagged, sparse, quantized and other subclasses.

Every part of the engine that reads a value's shape (value metadata, token dependencies, the
receptive-field data flow) goes through these helpers, which never raise. A tensor either has a
*regular* shape — a tuple of plain ``int`` sizes, as dense, sparse and quantized tensors do — or it
has none: a nested tensor (``torch.nested``, strided or jagged layout) is a batch of components of
different shapes, and ``tensor.shape`` raises (``NestedTensorImpl doesn't support sizes``) or holds
a symbolic ragged size (``torch.Size([2, j1, 4])``). Callers record what is known and mark the rest
``unavailable``, with :func:`irregular_reason` as the diagnostic's cause.

Reading a nested tensor's component sizes dispatches an operator (``aten._nested_tensor_size``):
:func:`component_shapes` runs it with every dispatch mode switched off, so the analysis' operator
counter never sees it as the model's work.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

__all__ = [
    "MAX_COMPONENTS",
    "regular_shape",
    "regular_dim",
    "layout_name",
    "irregular_reason",
    "component_shapes",
    "unreadable_values",
    "tensor_extras",
]

#: Component shapes recorded for one nested tensor; beyond this only the count is kept.
MAX_COMPONENTS = 64

_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)


def regular_shape(tensor: torch.Tensor) -> tuple[int, ...] | None:
    """``tensor``'s sizes as plain ints, or ``None`` when it has no single regular shape (a nested
    tensor, a symbolic size, or a subclass whose ``shape`` raises)."""
    if tensor.is_nested:
        return None
    try:
        shape = tensor.shape
    except Exception:  # noqa: BLE001 - a subclass may refuse; that is "no shape", never a crash
        return None
    if all(type(size) is int for size in shape):
        return tuple(shape)
    return None


def regular_dim(tensor: torch.Tensor) -> int | None:
    """Number of dimensions when the shape is regular (see :func:`regular_shape`), else ``None``."""
    shape = regular_shape(tensor)
    return None if shape is None else len(shape)


def layout_name(tensor: torch.Tensor) -> str:
    """``"strided"``, ``"sparse_coo"``, ``"sparse_csr"``, ... from ``tensor.layout``; ``"nested"``
    for a strided nested tensor and ``"jagged"`` for a ``torch.jagged`` one."""
    try:
        layout = str(tensor.layout).removeprefix("torch.")
    except Exception:  # noqa: BLE001
        layout = "unknown"
    if tensor.is_nested and layout == "strided":
        return "nested"
    return layout


def irregular_reason(tensor: torch.Tensor) -> str:
    """Why ``tensor`` has no regular shape, as a noun phrase for a diagnostic: ``a nested tensor of
    2 components with shapes (3, 4), (5, 4), which has no single shape``."""
    if tensor.is_nested:
        kind = "a jagged nested tensor" if layout_name(tensor) == "jagged" else "a nested tensor"
        count = _components(tensor)
        if count is not None:
            kind += f" of {count} components"
        shapes = component_shapes(tensor, limit=5)
        if shapes:
            kind += " with shapes " + ", ".join(str(tuple(shape)) for shape in shapes[:4])
            kind += ", ..." if len(shapes) > 4 else ""
        return kind + ", which has no single shape"
    return f"a {type(tensor).__qualname__} ({layout_name(tensor)} layout), which has no regular shape"


def _components(tensor: torch.Tensor) -> int | None:
    try:
        return int(tensor.size(0))
    except Exception:  # noqa: BLE001
        return None


def component_shapes(tensor: torch.Tensor, limit: int = MAX_COMPONENTS) -> list[list[int]] | None:
    """Shapes of a nested tensor's first ``limit`` components (``None`` for any other tensor, or
    when they cannot be read, as on the meta device)."""
    if not tensor.is_nested or tensor.device.type == "meta":
        return None
    try:
        with _disable_current_modes():
            if tensor.layout == torch.jagged:
                return _jagged_shapes(tensor, limit)
            sizes = tensor._nested_tensor_size()[:limit].tolist()
    except Exception:  # noqa: BLE001 - an internal API that may change: then only the count is kept
        return None
    return [[int(size) for size in row] for row in sizes]


def _jagged_shapes(tensor: torch.Tensor, limit: int) -> list[list[int]]:
    offsets = tensor.offsets()[: limit + 1].tolist()
    ragged = tensor._ragged_idx
    shape = list(tensor.shape)
    rows = []
    for start, end in zip(offsets, offsets[1:]):
        sizes = [int(end - start) if dim == ragged else int(size) for dim, size in enumerate(shape) if dim > 0]
        rows.append(sizes)
    return rows


def unreadable_values(tensor: torch.Tensor) -> str | None:
    """Why ``tensor``'s values cannot be read with ordinary dense operators (to inspect a mask), or
    ``None`` when they can."""
    if tensor.device.type == "meta":
        return "mask values cannot be read on the meta device"
    if tensor.is_nested:
        return "the mask is a nested tensor"
    if layout_name(tensor) != "strided":
        return f"the mask is a {layout_name(tensor)} tensor"
    if tensor.is_quantized:
        return "the mask is a quantized tensor"
    if type(tensor) not in _PLAIN_TYPES:
        return f"the mask is a {type(tensor).__qualname__}"
    return None


def tensor_extras(tensor: torch.Tensor) -> dict[str, Any]:
    """Metadata keys beyond shape/dtype/device of a tensor that is not a plain dense one.

    ``layout`` (anything but strided), ``components`` (a nested tensor's component count) and
    ``component_shapes`` (their shapes, at most :data:`MAX_COMPONENTS`), ``qscheme`` (a quantized
    tensor's quantisation scheme) and ``subclass`` (a ``torch.Tensor`` subclass's qualified name).
    Empty for a plain dense tensor.
    """
    extras: dict[str, Any] = {}
    layout = layout_name(tensor)
    if layout != "strided":
        extras["layout"] = layout
    if tensor.is_nested:
        extras["components"] = _components(tensor)
        shapes = component_shapes(tensor)
        if shapes is not None:
            extras["component_shapes"] = shapes
    elif tensor.is_quantized:
        try:
            extras["qscheme"] = str(tensor.qscheme()).removeprefix("torch.")
        except Exception:  # noqa: BLE001
            pass
    cls = type(tensor)
    if cls not in _PLAIN_TYPES and not (tensor.is_nested and cls.__name__ == "NestedTensor"):
        extras["subclass"] = f"{cls.__module__}.{cls.__qualname__}"
    return extras
