"""Workspace defaults for target options: ``[tool.torchscan-lsp]`` in ``pyproject.toml``.

```toml
[tool.torchscan-lsp]
device = "cpu"
input_shape = [3, 224, 224]   # TOML has no tuples: one array is one shape
timeout = 120
```

The values are validated exactly as pragma options are; a target's own options win over them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from torchscan_lsp.targets.options import (
    OptionError,
    check_consistency,
    from_toml_value,
    validate_option,
)

SECTION = "torchscan-lsp"


class WorkspaceConfigError(ValueError):
    """``pyproject.toml`` cannot be read, or its ``[tool.torchscan-lsp]`` table is invalid."""

    def __init__(self, path: Path, message: str, line: int | None = None):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.message = message
        self.line = line


def _key_line(text: str, key: str | None) -> int | None:
    """Best-effort line of ``key = ...`` inside the ``[tool.torchscan-lsp]`` table."""
    in_section = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            in_section = re.fullmatch(r"\[\s*tool\s*\.\s*[\"']?torchscan-lsp[\"']?\s*\]", line) is not None
            if in_section and key is None:
                return number
            continue
        if in_section and key and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
    return None


def load_workspace_defaults(root: str | Path) -> dict[str, Any]:
    """Return the validated ``[tool.torchscan-lsp]`` options of ``root/pyproject.toml``.

    No file or no table gives ``{}``. A TOML syntax error, an unknown option or a wrong value raises
    :class:`WorkspaceConfigError` naming the file, the line (when it can be found) and the fix.
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
    table = data.get("tool", {}).get(SECTION)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise WorkspaceConfigError(path, f"[tool.{SECTION}] must be a table", _key_line(text, None))
    options: dict[str, Any] = {}
    for key, raw in table.items():
        value = from_toml_value(key, raw)
        try:
            validate_option(key, value)
        except OptionError as exc:
            raise WorkspaceConfigError(
                path, f"[tool.{SECTION}] {exc.message}", _key_line(text, key)
            ) from None
        options[key] = value
    try:
        check_consistency(options)
    except OptionError as exc:
        raise WorkspaceConfigError(
            path, f"[tool.{SECTION}] {exc.message}", _key_line(text, exc.name)
        ) from None
    return options

