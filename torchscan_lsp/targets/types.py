"""What reading a source text for targets finds: targets, problems, and the scan of one text;
plus the source lines with ``ast``'s byte columns turned into code points."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Target", "TargetProblem", "TargetScan", "SourceLines"]


@dataclass
class Target:
    """One annotated model factory or ``nn.Module`` class."""

    name: str
    kind: str  # "factory" | "module_class"
    line: int  # the ``def``/``class`` line (1-based)
    column: int  # the column of the ``def``/``class`` keyword (0-based code points)
    annotation_line: int  # the pragma's or the decorator's line
    options: dict[str, Any] = field(default_factory=dict)
    annotation: str = "pragma"  # "pragma" | "decorator"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (option tuples become lists)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "line": self.line,
            "column": self.column,
            "annotation_line": self.annotation_line,
            "annotation": self.annotation,
            "options": _jsonable(self.options),
        }


@dataclass
class TargetProblem:
    """A mistake in an annotation (or a syntax error) at ``line``, ``column``..``end_column``."""

    line: int
    column: int
    end_column: int
    message: str
    severity: str = "error"  # "error" | "warning" | "information"
    target: str | None = None  # the target concerned, when there is one

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "line": self.line,
            "column": self.column,
            "end_column": self.end_column,
            "message": self.message,
            "severity": self.severity,
            "target": self.target,
        }


@dataclass
class TargetScan:
    """What :func:`find_targets` found: the runnable targets and every problem."""

    targets: list[Target] = field(default_factory=list)
    problems: list[TargetProblem] = field(default_factory=list)

    @property
    def errors(self) -> list[TargetProblem]:
        """The problems of severity ``error`` (a target they concern is left out)."""
        return [p for p in self.problems if p.severity == "error"]

    def get(self, name: str) -> Target | None:
        """The target called ``name``, or None."""
        for target in self.targets:
            if target.name == name:
                return target
        return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


class SourceLines:
    """Source lines, with byte-offset to code-point conversion for ``ast`` columns."""

    def __init__(self, source: str):
        self.lines = source.splitlines()

    def text(self, line: int) -> str:
        """Text of 1-based ``line`` ('' past the end)."""
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""

    def col(self, line: int, byte_col: int | None) -> int:
        """The code-point column of UTF-8 byte column ``byte_col`` on ``line``."""
        if byte_col is None:
            return 0
        raw = self.text(line).encode("utf-8")
        return len(raw[:byte_col].decode("utf-8", errors="replace"))

    def end_of(self, line: int) -> int:
        """The code-point column just after ``line``'s last character."""
        return len(self.text(line))

    def span(self, node: ast.AST) -> tuple[int, int, int]:
        """(line, column, end_column) of ``node`` on its first line, in code points."""
        line = node.lineno
        col = self.col(line, node.col_offset)
        if getattr(node, "end_lineno", None) == line and node.end_col_offset is not None:
            end = self.col(line, node.end_col_offset)
        else:
            end = self.end_of(line)
        return line, col, max(end, col)
