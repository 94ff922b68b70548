"""Workspace defaults for target options: ``[tool.torchscan-lsp]`` in ``pyproject.toml``.

```toml
[tool.torchscan-lsp]
device = "cpu"
input_shape = [3, 224, 224]   # TOML has no tuples: one array is one shape
timeout = 120
compare_with = "origin/main"  # the baseline of deltas and max_increase (default "HEAD")

[tool.torchscan-lsp.budget]   # merged key by key with a target's own budget, like train
params = "25M"
flops = "4.1 GFLOPs"

[tool.torchscan-lsp.plan]     # the training plan's options (a target's plan=True takes them)
sharding = ["single", "fsdp"]
```

The values are validated exactly as pragma options are; a target's own options win over them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from torchscan_lsp.contract.budget import budget_problems
from torchscan_lsp.targets.options import (
    OptionError,
    check_consistency,
    from_toml_value,
    plan_table_problems,
    train_problems,
    validate_option,
)

SECTION = "torchscan-lsp"


class ConfigProblem(NamedTuple):
    """One bad key or value of the table: what is wrong (``message``, starting with the table's
    name) and the 1-based ``line`` of ``pyproject.toml`` it is on (``None`` when not found)."""

    message: str
    line: int | None


class WorkspaceConfigError(ValueError):
    """``pyproject.toml`` cannot be read, or its ``[tool.torchscan-lsp]`` table is invalid.

    ``problems`` lists every bad key and value at once, in the file's order; ``message`` and
    ``line`` are the first one's. ``str(error)`` is one ``PATH:LINE: MESSAGE`` line per problem.
    """

    def __init__(self, path: Path, message: str, line: int | None = None,
                 problems: list[ConfigProblem] | None = None):
        self.problems = problems or [ConfigProblem(message, line)]
        self.path = path
        self.message, self.line = self.problems[0]
        super().__init__("\n".join(f"{path}:{p.line}: {p.message}" if p.line else f"{path}: {p.message}"
                                   for p in self.problems))


_HEADER = re.compile(r"\[\s*tool\s*\.\s*[\"']?torchscan-lsp[\"']?\s*(\.\s*[\"']?(\w+)[\"']?\s*)?\]\s*(#.*)?")


def _key_line(text: str, key: str | None, table: str | None = None) -> int | None:
    """Best-effort line of ``key = ...`` (``None``: of the header) in ``[tool.torchscan-lsp]``, or in
    its sub-table ``table`` (``[tool.torchscan-lsp.train]``). tomllib gives no positions: this
    scans the lines for the headers and the keys."""
    section: str | None = None  # "" for the main table, the sub-table's name, None elsewhere
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            header = _HEADER.fullmatch(line)
            section = None if header is None else header[2] or ""
            if section == (table or "") and key is None:
                return number
            continue
        if section == (table or "") and key and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*[=.]", line):
            return number
    return None


def _sub_line(text: str, table: str, key: str) -> int | None:
    """The line of a key of a sub-table option (``train``, ``plan``, ``budget``): in
    ``[tool.torchscan-lsp.<table>]``, else the main table's ``<table> = {...}`` (an inline table is
    one line), else the sub-table's header."""
    return _key_line(text, key, table) or _key_line(text, table) or _key_line(text, None, table)


def _sub_problems(text: str, key: str, raw: dict[str, Any]) -> list[ConfigProblem]:
    """Every bad key of the sub-table option ``key`` (``train``, ``plan``, ``budget``,
    ``max_increase``), each at its line."""
    if key in _CHECKED_BY_NAME:
        found = [(e.name, e.message) for e in _CHECKED_BY_NAME[key](raw)]
    else:
        found = budget_problems(key, raw)
    return [ConfigProblem(f"[tool.{SECTION}.{key}] {message}", _sub_line(text, key, name)) for name, message in found]


#: The sub-tables whose problems name their key (budgets' are pairs already).
_CHECKED_BY_NAME = {"train": train_problems, "plan": plan_table_problems}


def load_workspace_defaults(root: str | Path) -> dict[str, Any]:
    """Return the validated ``[tool.torchscan-lsp]`` options of ``root/pyproject.toml``.

    No file or no table gives ``{}``. A TOML syntax error, or any unknown option or wrong value
    (every one of them, with its line when it can be found: :attr:`WorkspaceConfigError.problems`)
    raises :class:`WorkspaceConfigError` naming the file and the fix.
    """
    path = Path(root) / "pyproject.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise WorkspaceConfigError(path, f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkspaceConfigError(path, f"invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get(SECTION) if isinstance(tool, dict) else None
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise WorkspaceConfigError(path, f"[tool.{SECTION}] must be a table", _key_line(text, None))
    options: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    for key, raw in table.items():
        if key in ("train", "plan", "budget", "max_increase") and isinstance(raw, dict):
            bad = _sub_problems(text, key, raw)
            problems += bad
            if bad:
                continue
        value = from_toml_value(key, raw)
        try:
            validate_option(key, value)
        except OptionError as exc:
            problems.append(ConfigProblem(f"[tool.{SECTION}] {exc.message}", _key_line(text, key)))
            continue
        options[key] = value
    try:
        check_consistency(options)
    except OptionError as exc:
        problems.append(ConfigProblem(f"[tool.{SECTION}] {exc.message}", _key_line(text, exc.name)))
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise WorkspaceConfigError(path, problems[0].message, problems[0].line, problems)
    return options
