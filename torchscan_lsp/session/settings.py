"""Typed server settings: section ``torchscan`` of the editor's configuration.

Sources, later ones winning: the defaults below, the workspace's ``pyproject.toml``
``[tool.torchscan-lsp]`` table (its ``device``, ``timeout`` and ``compare_with`` options are the
defaults of ``device``, ``timeoutSeconds`` and ``compareWith``: :attr:`~torchscan_lsp.session.workspace.WorkspaceConfig.settings_defaults`),
and the editor's ``workspace/configuration`` answer for section ``torchscan`` (or a command's flags).
Names may be camelCase or snake_case (``timeoutSeconds``, ``timeout_seconds``). The table of
settings is in docs/server.md.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from torchscan_lsp.targets.budgets import COMPARISON_HELP, check_compare_with

SECTION = "torchscan"

SETTINGS_WAIT_S = 5.0
"""How long the first analysis waits for the client's ``workspace/configuration`` answer."""

HEADLINES = ("operators", "modules")
"""The counting methods hints can headline (:mod:`torchscan_lsp.session.headline`)."""

CHOICES = {"headline": HEADLINES}
"""String settings that take one of a few words."""


@dataclass(frozen=True)
class InlayHintSettings:
    """Which kinds of inlay hint are shown.

    Attributes:
        totals: totals on each target line.
        modules: parameters and FLOPs on module definition lines.
        shapes: output shapes on call lines.
        latency: per-layer latency on definition lines (after "Measure latency").
    """

    totals: bool = True
    modules: bool = True
    shapes: bool = True
    latency: bool = False


@dataclass(frozen=True)
class Settings:
    """All server settings, with their defaults.

    Attributes:
        python: interpreter that runs workers; ``None`` means the server's own (``sys.executable``).
        allowExecution: run workspace code even without ``initializationOptions.trusted``.
        device: default device for targets that name none.
        timeoutSeconds: wall-clock limit of one analysis, seconds.
        planTimeoutSeconds: wall-clock limit of one training plan (several estimates per policy),
            seconds.
        memoryLimitMb: memory limit of one analysis, MiB (enforced by the worker pool).
        analyzeOnType: analyse unsaved buffers after ``debounceMs`` of quiet.
        debounceMs: debounce for analyse-on-type, milliseconds.
        maxWorkers: analyses that run at once.
        headline: the counting method hints, lenses and the first row of hovers show:
            ``"operators"`` (the dispatched operators' FLOPs and MACs, which see every operator that
            ran) or ``"modules"`` (this project's module formulas, which also give DMAs).
        receptiveFieldNotes: information diagnostics where a convolutional model's receptive field
            could not be derived (off: the hover still shows the receptive field).
        roofline: the device every target's roofline is drawn for unless its own ``roofline`` option
            says otherwise: ``""`` (none: only targets that ask, and the measurements that draw one
            here), ``"local"`` (this machine, its ceilings measured once) or a device of the table
            (``"H100-SXM"``, docs/devices.md).
        compareWith: the baseline each target's deltas and ``max_increase`` compare with:
            ``"HEAD"`` (the files as committed), another git ref (``"main"``), ``"save"`` (the
            target's previous analysis in this session) or ``"off"`` (:mod:`~torchscan_lsp.session.baselines`).
        cacheResults: keep the editor's finished analyses on disk (under
            ``$XDG_CACHE_HOME/torchscan-lsp/results``), so that a reopened editor shows the results of
            unchanged targets at once (:mod:`~torchscan_lsp.session.cache` says what "unchanged" covers).
        keepWarmMinutes: how long the warm worker, which has torch and the model's libraries
            imported, stays after the last editor using it closed, minutes (``0``: it stops with
            the editor); another editor window or a restarted server of the same interpreter and
            environment starts from it instead of importing them again
            (:mod:`torchscan_lsp.worker.shared`).
        inlayHints: per-kind switches.
    """

    python: str | None = None
    allowExecution: bool = False
    device: str = "cpu"
    timeoutSeconds: float = 60.0
    planTimeoutSeconds: float = 600.0
    memoryLimitMb: float = 8192.0
    analyzeOnType: bool = False
    debounceMs: float = 500.0
    maxWorkers: int = 2
    headline: str = "operators"
    receptiveFieldNotes: bool = False
    roofline: str = ""
    cacheResults: bool = True
    compareWith: str = "HEAD"
    keepWarmMinutes: float = 10.0
    inlayHints: InlayHintSettings = field(default_factory=InlayHintSettings)

    @property
    def interpreter(self) -> str:
        """The interpreter path workers run with."""
        return self.python or sys.executable


ZERO_ALLOWED = frozenset({"keepWarmMinutes"})
"""Number settings for which 0 is a value (it turns something off), not a mistake."""


def _camel(name: str) -> str:
    """``timeout_seconds`` → ``timeoutSeconds``; camelCase names pass unchanged."""
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


def roofline_setting(value: Any) -> str:
    """The ``roofline`` setting: ``""`` or a ``roofline`` option's string (checked as the option is).

    Raises:
        ValueError: an unknown device, named with the closest one (``setting torchscan.roofline: ...``).
    """
    from torchscan_lsp.targets.options import OptionError, validate_option

    if value in ("", None, False):
        return ""
    if value is True:
        return "local"
    try:
        validate_option("roofline", value)
    except OptionError as error:
        raise ValueError(f"setting {SECTION}.roofline: {error.message.removeprefix('roofline: ')}") from None
    return str(value)


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Check one setting's type; raise ``ValueError`` naming the setting when it is wrong."""
    if value is None and name == "python":
        return None
    if name == "roofline":
        return roofline_setting(value)
    if name in ZERO_ALLOWED and isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
        return 0.0
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return type(default)(value)
    elif name == "compareWith":
        try:
            check_compare_with(value)
        except ValueError:
            raise ValueError(f"setting {SECTION}.{name} must be {COMPARISON_HELP['compare_with']}, got {value!r}") from None
        return value
    elif name in CHOICES:
        if value in CHOICES[name]:
            return value
        words = " or ".join(f'"{word}"' for word in CHOICES[name])
        raise ValueError(f"setting {SECTION}.{name} must be {words}, got {value!r}")
    elif isinstance(value, str) and value:
        return value
    elif name == "python" and isinstance(value, str):
        return None
    expected = {bool: "true or false", int: "a positive integer", float: "a positive number"}.get(type(default), "a string")
    if name in ZERO_ALLOWED:
        expected = "a number, 0 or more"
    raise ValueError(f"setting {SECTION}.{name} must be {expected}, got {value!r}")


def merge(base: Settings, overrides: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
    """Apply a (possibly nested) settings mapping over ``base``.

    Unknown keys are ignored (other tools share the section); a value of the wrong type is
    skipped. Returns the new settings and one message per skipped value, naming the setting.
    """
    if not overrides:
        return base, []
    problems: list[str] = []
    changes: dict[str, Any] = {}
    known = {f.name: f for f in fields(Settings)}
    for raw_key, value in overrides.items():
        key = _camel(str(raw_key))
        if key == "inlayHints" and isinstance(value, Mapping):
            hints = {}
            for hint_key, hint_value in value.items():
                hint_key = _camel(str(hint_key))
                if hint_key in {f.name for f in fields(InlayHintSettings)}:
                    if isinstance(hint_value, bool):
                        hints[hint_key] = hint_value
                    else:
                        problems.append(f"setting {SECTION}.inlayHints.{hint_key} must be true or false, got {hint_value!r}")
            changes["inlayHints"] = replace(changes.get("inlayHints", base.inlayHints), **hints)
        elif key in known and key != "inlayHints":
            try:
                changes[key] = _coerce(key, value, getattr(Settings(), key) if key != "python" else "")
            except ValueError as error:
                problems.append(str(error))
    return replace(base, **changes), problems


def resolve(pyproject_defaults: Mapping[str, Any] | None, client: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
    """Settings from the pyproject table, then the client's section; returns them and any problems."""
    settings, problems = merge(Settings(), pyproject_defaults)
    settings, more = merge(settings, client)
    return settings, problems + more
