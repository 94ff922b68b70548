"""The options of a training plan (``plan={...}``, ``[tool.torchscan-lsp.plan]``) and memory budgets.

A plan asks, for each *policy* (a precision, an optimizer, activation checkpointing and sharding),
the largest batch -- and, when a sequence axis is named, the largest sequence length -- whose
estimated training step fits a memory budget per device. :func:`parse_plan_options` checks every
key and value of ``plan`` and returns a :class:`PlanOptions`; :func:`parse_budget` reads a budget,
a size (``"24 GiB"``) or an accelerator's name (``"H100-80GB"``, from :mod:`.devices`). The source
reader validates a pragma with them (no torch); the engine runs the plan from them.

Errors are ``ValueError`` (``TypeError`` for a value of the wrong type) naming the option and what to
write instead, as for ``train`` (:mod:`.training`). What only the step's inputs can tell (a
``sequence`` naming no input of the factory, or a dimension its input lacks) is a
:class:`PlanOptionError`, raised by the engine once the factory returned.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchscan_lsp.contract.devices import DEVICES, device_names, find_device
from torchscan_lsp.contract.training import OPTIMIZERS, parse_bytes

__all__ = ["Budget", "CHECKPOINTING", "DEFAULT_BUDGET", "MAX_POLICIES", "PLAN_OPTIONS", "PRECISIONS", "PlanOptionError",
           "PlanOptions", "Policy", "SHARDING", "SequenceAxis", "parse_budget", "parse_plan_options", "plan_problems"]

#: The precisions a plan compares: float32 throughout; bfloat16 compute with float32 weights
#: (``torch.autocast`` on one device and under DDP, FSDP2's ``MixedPrecisionPolicy`` under FSDP2);
#: bfloat16 parameters, gradients and optimizer state.
PRECISIONS = ("float32", "bfloat16-mixed", "bfloat16")
_PRECISION_ALIASES = {"fp32": "float32", "32-true": "float32", "autocast-bfloat16": "bfloat16-mixed",
                      "bf16-mixed": "bfloat16-mixed", "bf16-true": "bfloat16", "bf16": "bfloat16"}
#: Activation checkpointing: none, or every repeated block through ``torch.utils.checkpoint``.
CHECKPOINTING = ("none", "blocks")
#: Where the step runs: one device, DDP over ``ranks`` devices, or FSDP2 full-shard over them.
SHARDING = ("single", "ddp", "fsdp")
#: Every key of ``plan={...}``.
PLAN_OPTIONS = ("memory", "sequence", "precision", "optimizer", "checkpointing", "sharding", "ranks",
                "max_batch", "max_sequence")
#: The budget of a plan that names none (neither ``plan["memory"]`` nor ``train_memory``).
DEFAULT_BUDGET = "H100-SXM"
#: More policies than this is an error at the option: each is several estimates.
MAX_POLICIES = 36

_HELP = {
    "memory": 'the memory per device: a size such as "24 GiB", or an accelerator such as "H100-80GB", "A100-40GB", '
              '"L4" or "RTX-4090"',
    "sequence": 'None, or the sequence axis to scale: "input_ids:1" (keyword input input_ids, dimension 1), '
                '"0:1" (the first positional input), or 1 (dimension 1 of the first input)',
    "precision": 'a list of "float32", "bfloat16-mixed" and "bfloat16"',
    "optimizer": 'a list of "adamw", "adam", "sgd" and "adafactor"',
    "checkpointing": 'a list of "none" and "blocks"',
    "sharding": 'a list of "single", "ddp" and "fsdp"',
    "ranks": "an int >= 2: the devices DDP and FSDP2 run on",
    "max_batch": "a positive int: the largest batch the plan tries",
    "max_sequence": "a positive int: the largest sequence length the plan tries",
}


class PlanOptionError(ValueError):
    """A plan option the step's inputs contradict (``sequence="idx:1"`` for a factory with no input
    ``idx``): the message names the option and the inputs there are. It is the option's error, the
    same for every policy, not the model's."""


@dataclass(frozen=True)
class Budget:
    """A memory budget per device.

    Attributes:
        bytes: the budget in bytes.
        device: the accelerator's canonical name when the budget named one (``"H100-SXM"``), else
            ``None``; a named GPU makes the plan compare the CUDA allocator's derived peak.
        text: what the option said (``"24 GiB"``, ``"L4"``).
    """

    bytes: int
    device: str | None
    text: str


def parse_budget(value: Any, *, name: str = "train_memory") -> Budget:
    """A :class:`Budget` from a byte count, a size (``"24 GiB"``, ``"80 GB"``) or a device name of
    :data:`~.devices.DEVICES` (its ``memory_bytes``).

    Raises:
        TypeError: not an int or a string.
        ValueError: a string that is neither a size nor a known device; the message names ``name``,
            the closest device names and how to write a size.
    """
    if isinstance(value, str):
        device = find_device(value)
        if device is not None:  # a name first: "4090" is the GPU, not 4,090 bytes
            return Budget(device.memory_bytes, device.name, value)
        if not value.strip()[:1].isdigit():
            # the suggestion is the name closest to what was written, an alias ("H100-80GB") as well
            names = {alias.lower(): alias for device in DEVICES for alias in (device.name, *device.aliases)}
            close = difflib.get_close_matches(value.strip().lower().replace(" ", "-").replace("_", "-"), names, n=1)
            hint = f" (did you mean {names[close[0]]!r}?)" if close else ""
            raise ValueError(f"{name}: {value!r} is not a size nor a known device{hint}; write a size such as "
                             f"\"24 GiB\" or \"80 GB\", or a device: {', '.join(device_names())} "
                             "(each also by the names docs/devices.md lists, e.g. \"H100-80GB\").")
    return Budget(parse_bytes(value, name=name), None, str(value))


@dataclass(frozen=True)
class SequenceAxis:
    """The sequence axis a plan scales: ``dim`` of the input ``input`` (a keyword input's name, or a
    positional input's index), the batch being dimension 0."""

    input: str | int
    dim: int

    def __str__(self) -> str:
        return f"{self.input}:{self.dim}"


@dataclass(frozen=True)
class Policy:
    """One configuration of a training step to plan.

    Attributes:
        precision: one of :data:`PRECISIONS`.
        optimizer: one of the optimizers of :data:`~.training.OPTIMIZERS`.
        checkpointing: one of :data:`CHECKPOINTING`.
        sharding: one of :data:`SHARDING`.
        ranks: the devices it runs on (1 for ``single``).
    """

    precision: str
    optimizer: str
    checkpointing: str
    sharding: str
    ranks: int = 1

    @property
    def name(self) -> str:
        """``"bfloat16-mixed · adamw · checkpointed · fsdp×8"``."""
        where = "one device" if self.sharding == "single" else f"{self.sharding}×{self.ranks}"
        ckpt = "checkpointed" if self.checkpointing == "blocks" else "no checkpointing"
        return f"{self.precision} · {self.optimizer} · {ckpt} · {where}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe fields."""
        return {"precision": self.precision, "optimizer": self.optimizer, "checkpointing": self.checkpointing,
                "sharding": self.sharding, "ranks": self.ranks, "name": self.name}


@dataclass(frozen=True)
class PlanOptions:
    """A plan's settings, validated (:func:`parse_plan_options`).

    Attributes:
        memory: the budget option, or ``None`` (then ``train_memory``, else :data:`DEFAULT_BUDGET`).
        sequence: the sequence axis, or ``None`` (the batch alone).
        precision, optimizer, checkpointing, sharding: the lists compared; every combination is a
            policy (:meth:`policies`).
        ranks: devices of the ``ddp`` and ``fsdp`` policies.
        max_batch, max_sequence: the search's ceilings.
    """

    memory: Any = None
    sequence: SequenceAxis | None = None
    precision: tuple[str, ...] = PRECISIONS
    optimizer: tuple[str, ...] | None = None
    checkpointing: tuple[str, ...] = CHECKPOINTING
    sharding: tuple[str, ...] = ("single",)
    ranks: int = 8
    max_batch: int = 65536
    max_sequence: int = 1 << 20

    def policies(self, default_optimizer: str = "adamw") -> list[Policy]:
        """Every combination of the lists, in their order (``optimizer`` unset: ``default_optimizer``)."""
        optimizers = self.optimizer or (default_optimizer,)
        return [Policy(p, o, c, s, 1 if s == "single" else self.ranks)
                for s, o, p, c in itertools.product(self.sharding, optimizers, self.precision, self.checkpointing)]

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe fields."""
        return {"memory": self.memory, "sequence": str(self.sequence) if self.sequence else None,
                "precision": list(self.precision), "optimizer": list(self.optimizer) if self.optimizer else None,
                "checkpointing": list(self.checkpointing), "sharding": list(self.sharding), "ranks": self.ranks,
                "max_batch": self.max_batch, "max_sequence": self.max_sequence}


def _error(name: str, value: Any, kind: type[Exception] = ValueError) -> Exception:
    return kind(f"plan option {name!r}: got {value!r}; expected {_HELP[name]}.")


def _choices(name: str, value: Any, allowed: tuple[str, ...], aliases: Mapping[str, str] | None = None) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(item, str) for item in items):
        raise _error(name, value, TypeError)
    chosen: list[str] = []
    for item in items:
        key = item.strip().lower()
        key = (aliases or {}).get(key, key)
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"plan option {name!r}: unknown {item!r}{hint}; expected {_HELP[name]}.")
        if key not in chosen:
            chosen.append(key)
    return tuple(chosen)


#: ``NAME:DIM`` or ``INDEX:DIM``: a keyword input's name (an identifier) or a positional input's
#: index, and a dimension, in ASCII digits (``int()`` would also read other scripts' digits).
_SEQUENCE = re.compile(r"\s*(?P<input>[^:]*?)\s*:\s*(?P<dim>[0-9]+)\s*")
_INDEX = re.compile(r"[0-9]+")


def _sequence(value: Any) -> SequenceAxis | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise _error("sequence", value)
        axis: tuple[Any, Any] = (0, value)
    elif isinstance(value, str):
        match = _SEQUENCE.fullmatch(value)
        if match is None or not (_INDEX.fullmatch(match["input"]) or match["input"].isidentifier()):
            raise _error("sequence", value)
        name = match["input"]
        axis = (int(name) if _INDEX.fullmatch(name) else name, int(match["dim"]))
    else:
        raise _error("sequence", value, TypeError)
    if axis[1] < 1:
        raise ValueError(f"plan option 'sequence': got {value!r}; dimension 0 is the batch, which every plan scales; "
                         "name the sequence dimension (1 for (batch, tokens) inputs).")
    return SequenceAxis(*axis)


def _positive(name: str, value: Any, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(name, value, TypeError)
    if value < least:
        raise _error(name, value)
    return value


def _unknown(key: Any) -> ValueError:
    close = difflib.get_close_matches(str(key), PLAN_OPTIONS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"unknown plan option {key!r}{hint}; known options: {', '.join(PLAN_OPTIONS)}.")


def _parse_key(key: str, value: Any) -> Any:
    if key == "memory":
        return value if value is None else parse_budget(value, name="plan option 'memory'").text
    if key == "sequence":
        return _sequence(value)
    if key == "precision":
        return _choices(key, value, PRECISIONS, _PRECISION_ALIASES)
    if key == "optimizer":
        return _choices(key, value, tuple(OPTIMIZERS))
    if key == "checkpointing":
        return _choices(key, value, CHECKPOINTING)
    if key == "sharding":
        return _choices(key, value, SHARDING)
    return _positive(key, value, 2 if key == "ranks" else 1)


def parse_plan_options(value: Mapping[str, Any] | bool | PlanOptions | None) -> PlanOptions:
    """Validate ``plan=...`` (``True``, ``{}`` and ``None``: the defaults) and return its options.

    Raises:
        TypeError: ``value`` is neither a mapping nor ``True``, or an option has the wrong type.
        ValueError: an unknown option or value (the message names it), or more than
            :data:`MAX_POLICIES` policies.
    """
    if isinstance(value, PlanOptions):
        return value
    if value is None or value is True:
        value = {}
    if not isinstance(value, Mapping):
        raise TypeError(f"plan must be True or a mapping such as {{'precision': ['bfloat16-mixed'], 'sharding': "
                        f"['single', 'fsdp']}}, got {value!r}.")
    for key in value:
        if key not in PLAN_OPTIONS:
            raise _unknown(key)
    parsed = {key: _parse_key(key, item) for key, item in value.items() if item is not None}
    options = PlanOptions(**parsed)
    count = len(options.policies())
    if count > MAX_POLICIES:
        raise ValueError(f"plan options describe {count} policies (the product of precision, optimizer, checkpointing "
                         f"and sharding); at most {MAX_POLICIES}: shorten a list.")
    return options


def plan_problems(value: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every bad key of a ``plan`` mapping, as ``(key, message)`` pairs, where
    :func:`parse_plan_options` stops at the first (a ``[tool.torchscan-lsp.plan]`` table is told about
    each of its lines)."""
    problems = []
    for key, item in value.items():
        try:
            if key not in PLAN_OPTIONS:
                raise _unknown(key)
            if item is not None:
                _parse_key(key, item)
        except (TypeError, ValueError) as error:
            problems.append((str(key), str(error)))
    if not problems:
        try:
            parse_plan_options(value)
        except (TypeError, ValueError) as error:
            problems.append(("precision", str(error)))
    return problems
