"""Target options: their names, their literal parsing and their validation.

Options are written as Python literals in a ``# torchscan: ...`` pragma, in a
``@torchscan_lsp.target(...)`` decorator or (as TOML values) in ``pyproject.toml``. They are read with
``ast`` and ``ast.literal_eval`` and never evaluated. This module never imports torch: dtypes are
checked by name, and the worker turns the names into ``torch.dtype`` objects.

The options mean what ``crawl_module``'s arguments mean (``input_shape`` excludes the batch
dimension), plus the training step's (``train``, ``train_memory``: ``analyse_training_step``'s
``train`` and ``memory_budget``), the device a roofline is drawn for (``roofline``), the training
plan's (``plan``: ``plan_training``'s), the language server's own (``measure``, ``timeout``) and
those of budgets and baselines (``budget``,
``max_increase``, ``compare_with``: :mod:`.budgets`).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from torchscan_lsp.contract.devices import lookup_device
from torchscan_lsp.contract.plan import parse_budget, parse_plan_options, plan_problems
from torchscan_lsp.contract.strict import strict_rule
from torchscan_lsp.contract.training import OPTIMIZERS, parse_train_options
from torchscan_lsp.targets.budgets import (COMPARISON_HELP, COMPARISON_OPTIONS, check_budget, check_compare_with,
                                           check_max_increase, merge_limits)

#: Options that map to ``crawl_module`` arguments.
ENGINE_OPTIONS = ("input_shape", "dtype", "device", "mode", "strict")
#: Options of the training step and its plan (docs/annotations.md, "Training step", "Training plan").
TRAINING_OPTIONS = ("train", "train_memory", "plan")
#: Options that only the server and the worker read.
SERVER_OPTIONS = ("measure", "timeout")
#: The device a roofline is drawn for (docs/annotations.md, "Roofline").
ROOFLINE_OPTIONS = ("roofline",)
KNOWN_OPTIONS = ENGINE_OPTIONS + TRAINING_OPTIONS + SERVER_OPTIONS + COMPARISON_OPTIONS + ROOFLINE_OPTIONS

MODES = ("full", "structure")
MEASUREMENTS = ("latency", "memory", "layer_latency", "train", "roofline")
#: The ``roofline`` value that names this machine (its ceilings measured), besides ``True``.
THIS_MACHINE = "local"

#: ``torch.<name>`` dtypes accepted by name (with or without the ``torch.`` prefix).
DTYPE_NAMES = frozenset(
    {
        "float32", "float", "float64", "double", "float16", "half", "bfloat16",
        "complex32", "chalf", "complex64", "cfloat", "complex128", "cdouble",
        "uint8", "uint16", "uint32", "uint64", "int8", "int16", "short", "int32", "int",
        "int64", "long", "bool",
        "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    }
)

_DEVICE_RE = re.compile(r"^[a-z][a-z0-9_]*(:\d+)?$")

OPTION_HELP = {
    "input_shape": "a tuple of ints without the batch dimension, e.g. (3, 224, 224), "
    "or a list of such tuples for several inputs",
    "dtype": 'a dtype name such as "float32" or "torch.bfloat16", or a list of names (one per input)',
    "device": 'a device string such as "cpu", "cuda" or "cuda:1"',
    "mode": '"full" or "structure"',
    "strict": 'True (every count complete by every method), "headline" (FLOPs, MACs and parameters, '
    'each complete by one method), False, or a list of "flops", "macs", "parameters", "dmas" and '
    '"receptive_field" (checked as "headline" checks)',
    "measure": 'a list of "latency", "memory", "layer_latency", "train" and "roofline"',
    "timeout": "a positive number of seconds",
    "train": 'a dict of training-step options, e.g. {"optimizer": "adamw", "batch": 32, "dtype": "bfloat16"}',
    "train_memory": 'a memory budget per device for the training step and its plan: a size such as "24 GiB" or '
    '"80 GB", or a GPU such as "H100-80GB", "A100-40GB", "L4" or "RTX-4090"',
    "plan": 'True, or a dict of plan options, e.g. {"precision": ["bfloat16-mixed"], "sharding": ["single", "fsdp"], '
    '"sequence": "input_ids:1"}',
    **COMPARISON_HELP,
    "roofline": 'True or "local" (this machine, its ceilings measured once), a device such as "H100-SXM" or '
    '"A100-80GB" (docs/devices.md), or False',
}


class OptionError(ValueError):
    """An option value that is not allowed; ``str(error)`` says what to write instead."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name
        self.message = message


def unknown_option_message(name: str) -> str:
    """Say that ``name`` is no option, suggesting the nearest known one."""
    close = difflib.get_close_matches(name, KNOWN_OPTIONS, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown option '{name}' (known options: {', '.join(KNOWN_OPTIONS)}){hint}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shape_ok(value: Any) -> bool:
    return isinstance(value, tuple) and all(_is_int(d) and d > 0 for d in value)


def _check_input_shape(value: Any) -> None:
    if _shape_ok(value):
        return
    if isinstance(value, list) and value and all(_shape_ok(s) for s in value):
        return
    if isinstance(value, list) and value and all(_is_int(d) for d in value):
        shape = "(" + ", ".join(str(d) for d in value) + ("," if len(value) == 1 else "") + ")"
        raise OptionError(
            "input_shape",
            f"input_shape {value!r} is a list of ints; write the shape as a tuple, {shape} "
            "(a list means several inputs, one tuple each)",
        )
    if isinstance(value, (tuple, list)) and any(
        (_is_int(d) and d <= 0) or (isinstance(d, tuple) and any(_is_int(x) and x <= 0 for x in d))
        for d in value
    ):
        raise OptionError("input_shape", "input_shape dimensions must be positive (a 0 makes an empty input, "
                                         "a negative one no tensor at all)")
    raise OptionError(
        "input_shape", f"input_shape must be {OPTION_HELP['input_shape']}, got {value!r}"
    )


def _check_dtype_name(value: Any) -> None:
    if not isinstance(value, str):
        raise OptionError("dtype", f"dtype must be {OPTION_HELP['dtype']}, got {value!r}")
    name = value[len("torch.") :] if value.startswith("torch.") else value
    if name not in DTYPE_NAMES:
        # a name cut short ("bfloat") means the names it begins, before the nearest spelling ("float")
        close = sorted(n for n in DTYPE_NAMES if n.startswith(name))[:3] if name else []
        close = close or difflib.get_close_matches(name, sorted(DTYPE_NAMES), n=1)
        hint = "; did you mean " + " or ".join(f"'{n}'" for n in close) + "?" if close else ""
        raise OptionError("dtype", f"unknown dtype {value!r}{hint}")


def _check_dtype(value: Any) -> None:
    if isinstance(value, (list, tuple)):
        if not value:
            raise OptionError("dtype", "dtype must not be an empty list")
        for item in value:
            _check_dtype_name(item)
    else:
        _check_dtype_name(value)


def _check_device(value: Any) -> None:
    if not isinstance(value, str) or not _DEVICE_RE.match(value):
        raise OptionError("device", f"device must be {OPTION_HELP['device']}, got {value!r}")


def _check_mode(value: Any) -> None:
    if value not in MODES or not isinstance(value, str):
        raise OptionError("mode", f"mode must be {OPTION_HELP['mode']}, got {value!r}")


def _check_strict(value: Any) -> None:
    try:
        strict_rule(value)
    except (TypeError, ValueError):
        raise OptionError("strict", f"strict must be {OPTION_HELP['strict']}, got {value!r}") from None


def _check_measure(value: Any) -> None:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise OptionError("measure", f"measure must be {OPTION_HELP['measure']}, got {value!r}")
    for item in value:
        if item not in MEASUREMENTS:
            raise OptionError(
                "measure",
                f"unknown measurement {item!r}; measure may list "
                + ", ".join(repr(m) for m in MEASUREMENTS),
            )


def _check_timeout(value: Any) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        raise OptionError("timeout", f"timeout must be {OPTION_HELP['timeout']}, got {value!r}")


def _check_train(value: Any) -> None:
    if not isinstance(value, dict):
        raise OptionError("train", f"train must be {OPTION_HELP['train']}, got {value!r}")
    try:
        parse_train_options(value)
    except (TypeError, ValueError) as error:
        raise OptionError("train", str(error)) from None


def train_problems(value: dict[str, Any]) -> list[OptionError]:
    """Every bad key of a ``train`` dict, one :class:`OptionError` each (``.name``: the key), where
    :func:`validate_option` stops at the first. A key is checked alone with the dict's optimizer (an
    optimizer's own key, such as ``momentum``, under a bad or missing optimizer: with the first one it
    belongs to, so it is told about its value, not that it does not apply); rules between keys (SGD's
    Nesterov momentum) are checked once every key is good."""
    def problem(options: dict[str, Any]) -> str | None:
        try:
            parse_train_options(options)
        except (TypeError, ValueError) as error:
            return str(error)
        return None

    optimizer = value.get("optimizer", "adamw")
    found = {"optimizer": problem({"optimizer": optimizer})} if "optimizer" in value else {}
    for key, item in value.items():
        if key == "optimizer":
            continue
        owners = [name for name, keys in OPTIMIZERS.items() if key in keys]
        tried = [optimizer] if not found.get("optimizer") else owners or ["adamw"]
        messages = [problem({"optimizer": name, key: item}) for name in tried]
        found[key] = messages[0] if all(messages) else None
    if not any(found.values()) and (message := problem(value)):
        named = re.match(r"train option '(\w+)'", message)
        found[named[1] if named else "optimizer"] = message
    return [OptionError(key, message) for key, message in found.items() if message]


def _check_train_memory(value: Any) -> None:
    try:
        parse_budget(value, name="train_memory")
    except (TypeError, ValueError) as error:
        raise OptionError("train_memory", str(error)) from None


def _check_roofline(value: Any) -> None:
    if isinstance(value, bool) or value == THIS_MACHINE:
        return
    if not isinstance(value, str):
        raise OptionError("roofline", f"roofline must be {OPTION_HELP['roofline']}, got {value!r}")
    try:
        lookup_device(value, option="roofline")
    except ValueError as error:
        raise OptionError("roofline", f"{error} (or True for this machine)") from None


def roofline_device(value: Any) -> str | None:
    """What a valid ``roofline`` option asks for: ``None`` (no roofline), :data:`THIS_MACHINE`, or
    the name of a device of the table as written."""
    if value is None or value is False:
        return None
    return THIS_MACHINE if value is True or value == THIS_MACHINE else str(value)


def _check_plan(value: Any) -> None:
    if value is False:
        return
    if value is not True and not isinstance(value, dict):
        raise OptionError("plan", f"plan must be {OPTION_HELP['plan']}, got {value!r}")
    try:
        parse_plan_options(value)
    except (TypeError, ValueError) as error:
        raise OptionError("plan", str(error)) from None


def plan_table_problems(value: dict[str, Any]) -> list[OptionError]:
    """Every bad key of a ``plan`` dict (a ``[tool.torchscan-lsp.plan]`` table), one
    :class:`OptionError` each (``.name``: the key)."""
    return [OptionError(key, message) for key, message in plan_problems(value)]


_CHECKS = {
    "input_shape": _check_input_shape,
    "dtype": _check_dtype,
    "device": _check_device,
    "mode": _check_mode,
    "strict": _check_strict,
    "measure": _check_measure,
    "timeout": _check_timeout,
    "train": _check_train,
    "train_memory": _check_train_memory,
    "roofline": _check_roofline,
    "plan": _check_plan,
}


def _comparison_check(name: str, check: Any) -> Any:
    """A check of :mod:`.budgets` (which raises ``TypeError``/``ValueError``) as an option check."""
    def run(value: Any) -> None:
        try:
            check(value)
        except (TypeError, ValueError) as error:
            raise OptionError(name, str(error)) from None

    return run


_CHECKS.update({name: _comparison_check(name, check) for name, check in (
    ("budget", check_budget), ("max_increase", check_max_increase), ("compare_with", check_compare_with))})


def validate_option(name: str, value: Any) -> None:
    """Raise :class:`OptionError` when ``name`` is unknown or ``value`` is not allowed for it.

    ``None`` is allowed for every option: it unsets a workspace default (``input_shape=None`` for a
    factory that returns its own inputs in a project whose defaults set an input shape).
    """
    check = _CHECKS.get(name)
    if check is None:
        raise OptionError(name, unknown_option_message(name))
    if value is not None:
        check(value)


def validate_options(options: dict[str, Any]) -> None:
    """Validate every option and the rules between options (a dtype list per input shape)."""
    for name, value in options.items():
        validate_option(name, value)
    check_consistency(options)


def check_consistency(options: dict[str, Any]) -> None:
    """Raise :class:`OptionError` when two valid options contradict each other."""
    dtype = options.get("dtype")
    shape = options.get("input_shape")
    if isinstance(dtype, (list, tuple)) and isinstance(shape, (list, tuple)):
        n_inputs = len(shape) if isinstance(shape, list) else 1
        if len(dtype) != n_inputs:
            raise OptionError(
                "dtype",
                f"dtype lists {len(dtype)} dtype(s) but input_shape describes {n_inputs} "
                "input(s); give one dtype per input, or a single dtype for all",
            )


def from_toml_value(name: str, value: Any) -> Any:
    """Convert a TOML value to the literal a pragma would hold (TOML has arrays, not tuples).

    ``input_shape = [3, 224, 224]`` is one shape and ``[[3, 32, 32], [10]]`` two; ``dtype`` and
    ``measure`` arrays stay lists; a ``[tool.torchscan-lsp.train]`` table is the ``train`` dict.
    """
    if name == "input_shape" and isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            return [tuple(v) for v in value]
        return tuple(value)
    return value


def merge_options(*layers: dict[str, Any] | None) -> dict[str, Any]:
    """Merge option dicts, later layers winning (workspace defaults first, the target's last).

    ``train`` dicts merge per key (:func:`merge_train`): a target's ``train={"batch": 64}`` keeps
    the workspace's optimizer; so do ``budget`` and ``max_increase`` dicts
    (:func:`~torchscan_lsp.targets.budgets.merge_limits`). ``plan`` dicts merge per key too, and a
    target's ``plan=True`` takes the workspace's ``[tool.torchscan-lsp.plan]`` table as it is. Any
    other option, and ``None``, replaces the earlier value.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            earlier = merged.get(key)
            both = isinstance(value, dict) and isinstance(earlier, dict)
            if both and key == "train":
                merged[key] = merge_train(earlier, value)
            elif both and key in ("budget", "max_increase"):
                merged[key] = merge_limits(earlier, value)
            elif both and key == "plan":
                merged[key] = {**earlier, **value}
            elif key == "plan" and value is True and isinstance(earlier, dict):
                merged[key] = earlier
            else:
                merged[key] = value
    return merged


def merge_train(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``own``'s ``train`` keys over ``base``'s. When ``own`` names an optimizer, ``base``'s keyword
    arguments that this optimizer does not take are dropped: they were the other optimizer's
    (``betas`` of a workspace ``"adamw"`` under a target's ``"sgd"``)."""
    merged = {**base, **own}
    accepted = OPTIMIZERS.get(str(own.get("optimizer", "")).lower())
    if accepted is None:
        return merged
    foreign = {key for keys in OPTIMIZERS.values() for key in keys} - set(accepted)
    return {key: value for key, value in merged.items() if key in own or key not in foreign}
