"""Input preparation and value metadata.

:func:`prepare_inputs` validates a ``crawl_module`` call's inputs (in the contract's order, with its
exception types and messages) and returns the positional and keyword values of the one forward call:
either generated from ``input_shape`` (batch dimension of 1 added) or the caller's own values,
forwarded by identity.

:func:`value_meta` describes any value by its structure and tensor metadata (shape, dtype, device,
``requires_grad``): tensor values, strings, scalars and mapping keys that could be paths are never
stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from torchscan_lsp.engine.recording.tensor_shapes import regular_shape, tensor_extras

__all__ = [
    "MODES",
    "PreparedInputs",
    "check_mode",
    "prepare_inputs",
    "value_meta",
    "call_meta",
    "first_tensor",
    "tensor_meta",
    "PENDING",
]

#: Analysis modes of ``crawl_module``.
MODES = ("full", "structure")

#: Metadata of a value not known yet (a layer whose call has not returned).
PENDING: dict[str, Any] = {"kind": "pending"}

_SCALARS = (bool, int, float, complex, str, bytes)
_MAX_DEPTH = 100


@dataclass(frozen=True)
class PreparedInputs:
    """The values of the forward call and their metadata (``report["inputs"]``)."""

    args: tuple
    kwargs: dict[str, Any]
    meta: dict[str, Any]


def check_mode(mode: Any) -> str:
    """Validate ``mode`` (checked before anything else)."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be 'full' or 'structure'. Got {mode!r}.")
    return mode


def prepare_inputs(
    module: torch.nn.Module,
    input_shape: Any = None,
    dtype: Any = None,
    *,
    args: Any = None,
    kwargs: Any = None,
    device: Any = None,
) -> PreparedInputs:
    """Validate and build the inputs of one forward call of ``module``.

    Exactly one of ``input_shape`` (generated tensors) and ``args``/``kwargs`` (the caller's values,
    forwarded unchanged) must be given; ``dtype`` and ``device`` apply to generated tensors only.
    """
    provided = args is not None or kwargs is not None
    generated = input_shape is not None
    if provided == generated:
        raise ValueError(
            "Exactly one of input_shape or args/kwargs must be provided. "
            + (
                "Pass input_shape to generate tensors, or args/kwargs to forward your own values, not both."
                if provided
                else "Pass input_shape=(C, H, W) (batch dimension excluded) or args=(tensor, ...)/kwargs={...}."
            )
        )
    if provided:
        return _provided(args, kwargs, dtype, device)
    return _generated(module, input_shape, dtype, device)


def _provided(args: Any, kwargs: Any, dtype: Any, device: Any) -> PreparedInputs:
    if dtype is not None or device is not None:
        given = " and ".join(name for name, value in (("dtype", dtype), ("device", device)) if value is not None)
        raise ValueError(
            f"dtype and device apply only to tensors generated from input_shape; with args/kwargs "
            f"the values are forwarded unchanged. Remove {given}, or cast/move your tensors yourself."
        )
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        raise TypeError(
            f"args must be a tuple, got {type(args).__name__}. Pass args=(value,) for a single positional value."
        )
    if kwargs is None:
        kwargs = {}
    elif not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a mapping, got {type(kwargs).__name__}. Pass kwargs={{'name': value}}.")
    kwargs = dict(kwargs)
    for key in kwargs:
        if not isinstance(key, str):
            raise TypeError("kwargs keys must be strings. Keyword arguments are named by their parameter names.")
    meta = {
        "source": "provided",
        "args": [value_meta(value) for value in args],
        "kwargs": {key: value_meta(value) for key, value in kwargs.items()},
    }
    return PreparedInputs(args, kwargs, meta)


def _default_device_dtype(module: torch.nn.Module) -> tuple[torch.device, torch.dtype]:
    for tensor in module.parameters():
        return tensor.device, tensor.dtype
    for tensor in module.buffers():
        return tensor.device, tensor.dtype
    return torch.device("cpu"), torch.float32


def _shapes(input_shape: Any) -> list[tuple]:
    if isinstance(input_shape, tuple):
        shapes = [input_shape]
    elif isinstance(input_shape, list) and input_shape and all(isinstance(s, tuple) for s in input_shape):
        shapes = list(input_shape)
    else:
        raise TypeError(
            "input_shape must be a tuple or a non-empty list of tuples. "
            "Use input_shape=(3, 224, 224) for one input or [(3, 224, 224), (10,)] for several."
        )
    for shape in shapes:
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise TypeError(
                    "Every input_shape dimension must be an integer. "
                    f"Got {type(dim).__name__} in {tuple(type(d).__name__ for d in shape)}."
                )
            if dim < 0:
                raise ValueError(f"Every input_shape dimension must be non-negative, got {dim}.")
    return shapes


def _dtypes(dtype: Any, count: int, default: torch.dtype) -> list[torch.dtype]:
    if dtype is None:
        return [default] * count
    if isinstance(dtype, torch.dtype):
        return [dtype] * count
    if isinstance(dtype, (str, bytes)) or not isinstance(dtype, Iterable):
        raise TypeError(
            f"dtype must be a torch.dtype or an iterable of torch.dtype (one per input shape), "
            f"got {type(dtype).__name__}. Use e.g. dtype=torch.float32."
        )
    dtypes = list(dtype)
    if len(dtypes) != count:
        raise ValueError(
            f"dtype length must match the number of input shapes. Got {len(dtypes)} dtypes for {count} shapes."
        )
    if not all(isinstance(d, torch.dtype) for d in dtypes):
        raise TypeError("Every dtype value must be a torch.dtype. Use e.g. torch.float32 or torch.int64.")
    return dtypes


def _make(shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    full = (1, *shape)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.rand(full, dtype=dtype, device=device)
    if dtype is torch.bool:
        return torch.ones(full, dtype=dtype, device=device)
    return torch.zeros(full, dtype=dtype, device=device)


def _generated(module: torch.nn.Module, input_shape: Any, dtype: Any, device: Any) -> PreparedInputs:
    shapes = _shapes(input_shape)
    default_device, default_dtype = _default_device_dtype(module)
    dtypes = _dtypes(dtype, len(shapes), default_dtype)
    if device is not None:
        if not isinstance(device, (str, torch.device)):
            raise TypeError(f"device must be a str or a torch.device, got {type(device).__name__}.")
        try:
            default_device = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"device {device!r} is not a valid torch device: {exc}") from None
    args = tuple(_make(shape, dt, default_device) for shape, dt in zip(shapes, dtypes))
    meta = {"source": "generated", "args": [value_meta(value) for value in args], "kwargs": {}}
    return PreparedInputs(args, {}, meta)


# --------------------------------------------------------------------------------------------------
# value metadata


# str(dtype) and str(device), computed once per distinct value
_DTYPE_NAMES: dict[torch.dtype, str] = {}
_DEVICE_NAMES: dict[torch.device, str] = {}
_STRIDED = torch.strided
_PLAIN_TENSORS = frozenset((torch.Tensor, torch.nn.Parameter))
_QUANTIZED = frozenset((torch.quint8, torch.qint8, torch.qint32, torch.quint4x2, torch.quint2x4))


def tensor_meta(value: torch.Tensor) -> dict[str, Any]:
    """Metadata of one tensor: shape, dtype, device, ``requires_grad`` (the hot path of the hooks).

    A tensor without a regular shape (nested, jagged) has ``shape: None``; a tensor that is not a
    plain dense one also carries the keys of :func:`~torchscan_lsp.engine.recording.tensor_shapes.tensor_extras`
    (``layout``, ``components``, ``component_shapes``, ``qscheme``, ``subclass``). Never raises.
    """
    plain = type(value) in _PLAIN_TENSORS and value.layout is _STRIDED
    shape: list[int] | None = None
    if plain:
        try:
            shape = list(value.shape)
        except RuntimeError:  # a strided nested tensor has no single shape
            plain = False
    if not plain:
        regular = regular_shape(value)
        shape = None if regular is None else list(regular)
    dtype, device = value.dtype, value.device
    dtype_name = _DTYPE_NAMES.get(dtype)
    if dtype_name is None:
        dtype_name = _DTYPE_NAMES[dtype] = str(dtype)
    device_name = _DEVICE_NAMES.get(device)
    if device_name is None:
        device_name = _DEVICE_NAMES[device] = str(device)
    meta = {
        "kind": "tensor",
        "shape": shape,
        "dtype": dtype_name,
        "device": device_name,
        "requires_grad": value.requires_grad,
    }
    if not plain or dtype in _QUANTIZED:
        meta.update(tensor_extras(value))
    return meta


def _key_entry(key: Any, value: Any, active: set[int], depth: int) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if isinstance(key, int) or (isinstance(key, str) and key.isidentifier()):
        entry["key"] = key
    entry["key_type"] = type(key).__name__
    entry["value"] = _meta(value, active, depth)
    return entry


def _meta(value: Any, active: set[int], depth: int) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return tensor_meta(value)
    if value is None:
        return {"kind": "none"}
    is_tuple = isinstance(value, tuple)
    if is_tuple or isinstance(value, list) or isinstance(value, Mapping):
        marker = id(value)
        if marker in active or depth >= _MAX_DEPTH:  # a cycle, or absurdly deep nesting
            return {"kind": "object", "type": type(value).__qualname__}
        active.add(marker)
        try:
            if is_tuple:
                return {"kind": "tuple", "items": [_meta(item, active, depth + 1) for item in value]}
            if isinstance(value, list):
                return {"kind": "list", "items": [_meta(item, active, depth + 1) for item in value]}
            return {
                "kind": "mapping",
                "type": type(value).__name__,
                "items": [_key_entry(k, v, active, depth + 1) for k, v in value.items()],
            }
        finally:
            active.discard(marker)
    if isinstance(value, _SCALARS):
        return {"kind": "scalar", "type": type(value).__name__}
    return {"kind": "object", "type": type(value).__qualname__}


def value_meta(value: Any) -> dict[str, Any]:
    """Describe ``value`` without storing it: kinds, shapes, dtypes and devices only."""
    if type(value) is torch.Tensor:  # the common case, without the generic walk
        return tensor_meta(value)
    return _meta(value, set(), 0)


def call_meta(args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``{"args": [...], "kwargs": {...}}`` metadata of one call's inputs."""
    return {
        "args": list(map(value_meta, args)),
        "kwargs": {key: value_meta(value) for key, value in kwargs.items()} if kwargs else {},
    }


def first_tensor(value: Any, _depth: int = 0) -> torch.Tensor | None:
    """The depth-first first tensor in ``value`` (tuples, lists and mapping values are walked)."""
    if isinstance(value, torch.Tensor):
        return value
    if _depth >= _MAX_DEPTH:
        return None
    if isinstance(value, (tuple, list)):
        items: Iterable[Any] = value
    elif isinstance(value, Mapping):
        items = value.values()
    else:
        return None
    for item in items:
        found = first_tensor(item, _depth + 1)
        if found is not None:
            return found
    return None
