"""The options of a training step, and byte sizes such as ``"24 GiB"`` (standard library only).

``train={"optimizer": "adamw", "batch": 32, "dtype": "bfloat16"}`` in a target's options reaches
:func:`parse_train_options`, which checks every key and value and returns a :class:`TrainOptions`:
the source reader validates a pragma with it (no torch), the engine builds the step from it.
Errors are ``ValueError`` (``TypeError`` for a value of the wrong type) naming the bad option and
what to write instead. The names follow PyTorch: the optimizer's own keyword arguments (``lr``,
``betas``, ``eps``, ``weight_decay``, ``momentum``, ``dampening``, ``nesterov``, ``amsgrad``,
``maximize``, ``foreach``) keep their ``torch.optim`` names and meanings, dtypes are ``torch``
dtype names, and ``autocast`` is the dtype given to ``torch.autocast``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OPTIMIZERS", "TRAIN_OPTIONS", "TrainOptions", "estimate_unasked", "parse_train_options", "parse_bytes"]

#: Optimizer name -> the ``torch.optim`` keyword arguments a training step may set for it.
OPTIMIZERS: dict[str, tuple[str, ...]] = {
    "adamw": ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach"),
    "adam": ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach"),
    "sgd": ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach"),
    # torch.optim.Adafactor (PyTorch 2.5 and later): factored second moments, no first moment
    "adafactor": ("lr", "beta2_decay", "d", "weight_decay", "maximize", "foreach"),
}
_OPTIMIZER_KEYS = tuple(dict.fromkeys(key for keys in OPTIMIZERS.values() for key in keys))
#: Every key of ``train={...}``: the step's own, then the optimizers' keyword arguments.
TRAIN_OPTIONS = ("optimizer", "batch", "dtype", "autocast", "device", *_OPTIMIZER_KEYS)

#: Floating-point dtypes a step can train in (parameters and generated floating inputs).
TRAIN_DTYPES = ("float32", "float64", "float16", "bfloat16")
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16"}
#: Dtypes ``torch.autocast`` accepts for the step's lower precision.
AUTOCAST_DTYPES = ("bfloat16", "float16")

_HELP = {
    "optimizer": '"adamw" (default), "adam", "sgd" or "adafactor"',
    "batch": "a positive int: the batch dimension of the inputs generated from input_shape",
    "dtype": 'None (default: the factory\'s) or the dtype of parameters and floating inputs: "float32", '
    '"bfloat16", "float16" or "float64"',
    "autocast": 'None (default) or the dtype of torch.autocast\'s lower precision: "bfloat16" or "float16"',
    "device": 'the device the step is for, e.g. "cuda" (default: the target\'s device); the step is measured '
    "there when this process has it, and estimated for it in any case",
    "lr": "a positive number", "eps": "a positive number", "weight_decay": "a number >= 0",
    "betas": "two numbers in [0, 1), e.g. (0.9, 0.999)", "momentum": "a number >= 0",
    "dampening": "a number >= 0", "nesterov": "True or False", "amsgrad": "True or False",
    "maximize": "True or False", "beta2_decay": "a number <= 0, e.g. -0.8", "d": "a positive number",
    "foreach": "None (PyTorch's default for the device), True or False",
}


@dataclass(frozen=True)
class TrainOptions:
    """One training step's settings, validated.

    Attributes:
        optimizer: ``"adamw"``, ``"adam"``, ``"sgd"`` or ``"adafactor"``.
        optimizer_options: keyword arguments for the ``torch.optim`` constructor (``foreach`` left
            out when it is ``None``, so that PyTorch picks its default for the device).
        batch: the batch dimension of generated inputs, or ``None`` (1, or the factory's inputs).
        dtype: the dtype name the model and every floating input are cast to, or ``None`` to keep
            the factory's.
        autocast: the ``torch.autocast`` dtype name, or ``None`` for no autocast.
        device: the device the step is for (``"cuda"``, ``"cuda:1"``, ``"cpu"``), or ``None`` for the
            analysis's own.
    """

    optimizer: str = "adamw"
    optimizer_options: dict[str, Any] = field(default_factory=dict)
    batch: int | None = None
    dtype: str | None = None
    autocast: str | None = None
    device: str | None = None

    @property
    def foreach(self) -> bool | None:
        """The ``foreach`` asked for (``None``: PyTorch's default for the device)."""
        return self.optimizer_options.get("foreach")

    def as_dict(self) -> dict[str, Any]:
        """The options as JSON-safe values (``betas`` as a list)."""
        options = {key: list(value) if isinstance(value, tuple) else value for key, value in self.optimizer_options.items()}
        return {"optimizer": self.optimizer, "optimizer_options": options, "batch": self.batch, "dtype": self.dtype,
                "autocast": self.autocast, "device": self.device}


def estimate_unasked(options: Mapping[str, Any]) -> bool:
    """Whether a target's merged options ask for its training step without asking to measure it:
    ``train`` or ``train_memory`` is set (``None`` unsets a workspace default). Such a target gets
    the step's estimate on fake tensors after every analysis, the one rule of the worker and the
    session (docs/server.md, "Training step")."""
    return options.get("train") is not None or options.get("train_memory") is not None


def _error(name: str, value: Any, kind: type[Exception] = ValueError) -> Exception:
    return kind(f"train option {name!r}: got {value!r}; expected {_HELP[name]}.")


def _number(name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _error(name, value, TypeError)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise _error(name, value)
    return float(value)


def _dtype_name(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise _error(name, value, TypeError)
    bare = value.removeprefix("torch.")
    bare = _DTYPE_ALIASES.get(bare, bare)
    if bare not in allowed:
        raise _error(name, value)
    return bare


def _optimizer_value(name: str, value: Any) -> Any:
    if name in ("nesterov", "amsgrad", "maximize"):
        if not isinstance(value, bool):
            raise _error(name, value, TypeError)
        return value
    if name == "foreach":
        if value is not None and not isinstance(value, bool):
            raise _error(name, value, TypeError)
        return value
    if name == "betas":
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise _error(name, value, TypeError)
        betas = tuple(_number(name, beta) for beta in value)
        if not all(beta < 1 for beta in betas):
            raise _error(name, value)
        return betas
    if name == "beta2_decay":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _error(name, value, TypeError)
        if not math.isfinite(value) or value > 0:
            raise _error(name, value)
        return float(value)
    return _number(name, value, positive=name in ("lr", "eps", "d"))


def _unknown(key: Any) -> ValueError:
    close = difflib.get_close_matches(str(key), TRAIN_OPTIONS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"unknown train option {key!r}{hint}; known options: {', '.join(TRAIN_OPTIONS)}.")


def parse_train_options(value: Mapping[str, Any] | TrainOptions | None) -> TrainOptions:
    """Validate ``train={...}`` and return its :class:`TrainOptions` (``None`` and ``{}``: defaults).

    Raises:
        TypeError: ``value`` is not a mapping, or an option has the wrong type.
        ValueError: an unknown option, an option of another optimizer (``momentum`` with
            ``"adamw"``), or a value out of range; the message names the option.
    """
    if isinstance(value, TrainOptions):
        return value
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise TypeError(f"train must be a mapping such as {{'optimizer': 'adamw', 'batch': 32}}, got {type(value).__name__}.")
    for key in value:
        if key not in TRAIN_OPTIONS:
            raise _unknown(key)
    optimizer = value.get("optimizer", "adamw")
    if not isinstance(optimizer, str) or optimizer.lower() not in OPTIMIZERS:
        raise _error("optimizer", optimizer, TypeError if not isinstance(optimizer, str) else ValueError)
    optimizer = optimizer.lower()
    accepted = OPTIMIZERS[optimizer]
    options: dict[str, Any] = {}
    for key in _OPTIMIZER_KEYS:
        if key not in value:
            continue
        if key not in accepted:
            raise ValueError(
                f"train option {key!r} does not apply to optimizer {optimizer!r}; its options are: {', '.join(accepted)}."
            )
        parsed = _optimizer_value(key, value[key])
        if parsed is not None:
            options[key] = parsed
    if optimizer == "sgd" and options.get("nesterov") and (options.get("momentum", 0) <= 0 or options.get("dampening", 0) != 0):
        raise ValueError("train option 'nesterov': Nesterov momentum needs momentum > 0 and dampening = 0.")
    batch = value.get("batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)):
        raise _error("batch", batch, TypeError)
    if batch is not None and batch < 1:
        raise _error("batch", batch)
    dtype = value.get("dtype")
    if dtype is not None:
        dtype = _dtype_name("dtype", dtype, TRAIN_DTYPES)
    autocast = value.get("autocast")
    if autocast is not None:
        autocast = _dtype_name("autocast", autocast, AUTOCAST_DTYPES)
    device = value.get("device")
    if device is not None and (not isinstance(device, str) or not _DEVICE_RE.match(device)):
        raise _error("device", device, TypeError if not isinstance(device, str) else ValueError)
    return TrainOptions(optimizer, options, batch, dtype, autocast, device)


_DEVICE_RE = re.compile(r"^[a-z][a-z0-9_]*(:\d+)?$")
_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNIT_BYTES = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(value: Any, *, name: str = "memory") -> int:
    """A byte count from an int or a string such as ``"24 GiB"``, ``"80GB"`` or ``"512 MiB"``.

    ``KiB``/``MiB``/``GiB``/``TiB`` are powers of 1024, ``kB``/``MB``/``GB``/``TB`` powers of 1000
    (as GPU vendors count). A count without a unit is bytes, and must be at least
    :data:`MIN_UNITLESS_BYTES`: ``train_memory=80`` means 80 GB, never 80 bytes, so it is refused
    with the size to write. Raises ``TypeError``/``ValueError`` naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{name}: expected a byte count or a size such as \"24 GiB\", got {type(value).__name__}.")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{name}: expected a positive byte count, got {value}.")
        return _unitless(value, name)
    match = _BYTES_RE.match(value)
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{name}: {value!r} is not a size; write e.g. \"24 GiB\", \"80 GB\" or \"512 MiB\".")
    if not match.group(2):
        return _unitless(int(float(match.group(1))), name)
    return int(float(match.group(1)) * _UNIT_BYTES[match.group(2).lower()])


#: The smallest byte count accepted without a unit (1 MiB).
MIN_UNITLESS_BYTES = 2**20


def _unitless(count: int, name: str) -> int:
    if count < MIN_UNITLESS_BYTES:
        raise ValueError(f"{name}: {count} has no unit, so it would be {count} bytes; write a size such as "
                         f"\"{count} GB\" or \"{count} GiB\" (a byte count without a unit is at least 1 MiB).")
    return count
