"""Find the annotated model factories in a Python source text, with ``ast`` only.

Two annotation forms mark a *target*:

```python
# torchscan: input_shape=(3, 224, 224), device="cpu"
def build_resnet():
    return ResNet(BasicBlock, [2, 2, 2, 2])


@torchscan_lsp.target(input_shape=(3, 32, 32))
class TinyNet(nn.Module):
    ...
```

The pragma comment stands directly above (only comment lines may come between) a module-level
function that can be called with no arguments, or a module-level class whose constructor needs
none. The decorator is ``torchscan_lsp.target`` under any name it was imported as. Option values are
parsed with ``ast.literal_eval`` and never evaluated; nothing here imports torch or the user's code.

Lines are 1-based and columns 0-based code-point offsets (``ast`` gives UTF-8 byte offsets; they
are converted here). The language server converts them to its position encoding.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any

from torchscan_lsp.targets.options import OptionError, unknown_option_message, validate_option
from torchscan_lsp.targets.options import KNOWN_OPTIONS, check_consistency

PRAGMA_RE = re.compile(r"#\s*torchscan\s*:")
DECORATOR_MODULE = "torchscan_lsp"
DECORATOR_NAME = "target"


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
    severity: str = "error"  # "error" | "warning"
    target: str | None = None  # the target concerned, when there is one

    def to_dict(self) -> dict[str, Any]:
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


class _Lines:
    """Source lines, with byte-offset to code-point conversion for ``ast`` columns."""

    def __init__(self, source: str):
        self.lines = source.splitlines()

    def text(self, line: int) -> str:
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""

    def col(self, line: int, byte_col: int | None) -> int:
        if byte_col is None:
            return 0
        raw = self.text(line).encode("utf-8")
        return len(raw[:byte_col].decode("utf-8", errors="replace"))

    def end_of(self, line: int) -> int:
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


def find_targets(source: str, filename: str = "<unknown>") -> TargetScan:
    """Return the annotated targets of ``source`` and the problems of its annotations.

    ``filename`` names the file ``source`` came from; parsing never reads that file, since an
    editor's unsaved buffer differs from it.

    A syntax error gives a single problem at its line and no targets. A target whose annotation has
    an error (an unknown or non-literal option, a wrong type, a factory with required arguments) is
    left out of ``targets``; its problems name it.
    """
    scan = TargetScan()
    lines = _Lines(source)
    try:
        # Never the real path: for some errors CPython re-reads the offending line from that file to
        # place the column, and an unsaved buffer's line N is not the file's line N.
        tree = ast.parse(source, filename="<unknown>", type_comments=False)
    except SyntaxError as exc:
        scan.problems.append(_syntax_problem(exc, lines))
        return scan
    except ValueError as exc:  # e.g. null bytes
        scan.problems.append(TargetProblem(1, 0, lines.end_of(1), f"cannot parse: {exc}"))
        return scan

    pragmas, trailing = _pragma_comments(source)
    for line, col in trailing:
        scan.problems.append(
            TargetProblem(
                line, col, lines.end_of(line),
                "a '# torchscan:' pragma must stand on its own line directly above a def or class",
                "warning",
            )
        )

    # Where each top-level and nested def/class starts (first decorator line) and its node.
    top_level = {id(n) for n in tree.body}
    starts: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            starts.setdefault(first, node)

    aliases = _decorator_aliases(tree)
    pragma_by_node: dict[int, list[tuple[int, int, str]]] = {}
    comment_lines = _comment_only_lines(source)
    for line, col, text in pragmas:
        nxt = line + 1
        while nxt in comment_lines:
            nxt += 1
        node = starts.get(nxt)
        if node is None:
            scan.problems.append(
                TargetProblem(
                    line, col, lines.end_of(line),
                    "this '# torchscan:' pragma is not directly above a def or class; move it to "
                    "the line just above the model factory or nn.Module class",
                    "warning",
                )
            )
            continue
        pragma_by_node.setdefault(id(node), []).append((line, col, text))

    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        decorators = [d for d in node.decorator_list if _is_target_decorator(d, aliases)]
        node_pragmas = pragma_by_node.get(id(node), [])
        if not decorators and not node_pragmas:
            continue
        _add_target(scan, node, node_pragmas, decorators, lines, id(node) in top_level)
    scan.targets.sort(key=lambda t: t.line)
    scan.problems.sort(key=lambda p: (p.line, p.column))
    return scan


def _syntax_problem(exc: SyntaxError, lines: _Lines) -> TargetProblem:
    line = exc.lineno or 1
    col = max((exc.offset or 1) - 1, 0)
    end_line = getattr(exc, "end_lineno", None)
    end_offset = getattr(exc, "end_offset", None)
    if end_line == line and end_offset and end_offset - 1 > col:
        end = end_offset - 1
    else:
        end = max(lines.end_of(line), col + 1)
    return TargetProblem(line, col, end, f"syntax error: {exc.msg}")


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []


def _pragma_comments(source: str) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """(line, column, text) of each full-line pragma, and (line, column) of trailing ones."""
    pragmas: list[tuple[int, int, str]] = []
    trailing: list[tuple[int, int]] = []
    for tok in _tokens(source):
        if tok.type != tokenize.COMMENT or not PRAGMA_RE.match(tok.string):
            continue
        line, col = tok.start
        if tok.line[:col].strip():
            trailing.append((line, col))
        else:
            pragmas.append((line, col, tok.string))
    return pragmas, trailing


def _comment_only_lines(source: str) -> set[int]:
    lines = set()
    for tok in _tokens(source):
        if tok.type == tokenize.COMMENT and not tok.line[: tok.start[1]].strip():
            lines.add(tok.start[0])
    return lines


def _decorator_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to the ``torchscan_lsp`` module and to its ``target`` function."""
    modules = {DECORATOR_MODULE}
    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == DECORATOR_MODULE and alias.asname:
                    modules.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == DECORATOR_MODULE and not node.level:
            for alias in node.names:
                if alias.name == DECORATOR_NAME:
                    functions.add(alias.asname or alias.name)
    return modules, functions


def _is_target_ref(node: ast.AST, aliases: tuple[set[str], set[str]]) -> bool:
    modules, functions = aliases
    if isinstance(node, ast.Name):
        return node.id in functions
    return (
        isinstance(node, ast.Attribute)
        and node.attr == DECORATOR_NAME
        and isinstance(node.value, ast.Name)
        and node.value.id in modules
    )


def _is_target_decorator(node: ast.AST, aliases: tuple[set[str], set[str]]) -> bool:
    if isinstance(node, ast.Call):
        return _is_target_ref(node.func, aliases)
    return _is_target_ref(node, aliases)


def _add_target(
    scan: TargetScan,
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    pragmas: list[tuple[int, int, str]],
    decorators: list[ast.expr],
    lines: _Lines,
    top_level: bool,
) -> None:
    name = node.name
    problems: list[TargetProblem] = []
    options: dict[str, Any] = {}
    positions: dict[str, tuple[int, int, int]] = {}
    annotation_line = None

    for line, col, text in pragmas:
        annotation_line = annotation_line or line
        _parse_pragma(line, col, text, name, options, positions, problems)
    for dec in decorators:
        annotation_line = annotation_line or dec.lineno
        _parse_decorator(dec, name, lines, options, positions, problems)
    if pragmas and decorators:
        line, col, _ = pragmas[0]
        problems.append(
            TargetProblem(
                line, col, lines.end_of(line),
                f"'{name}' has both a pragma and a @target decorator; keep one "
                "(the decorator's options win)",
                "warning", name,
            )
        )

    if not any(p.severity == "error" for p in problems):
        try:
            check_consistency(options)
        except OptionError as exc:
            problems.append(TargetProblem(*positions[exc.name], exc.message, "error", name))

    def_line = node.lineno
    def_col = lines.col(def_line, node.col_offset)
    name_span = _name_span(lines, def_line, def_col, name)
    if not top_level:
        problems.append(
            TargetProblem(
                def_line, *name_span,
                f"'{name}' is not defined at module level; only module-level functions and "
                "classes can be targets",
                "error", name,
            )
        )
    elif isinstance(node, ast.AsyncFunctionDef):
        problems.append(
            TargetProblem(
                def_line, *name_span,
                f"'{name}' is an async function; a model factory must be a plain function",
                "error", name,
            )
        )
    elif isinstance(node, ast.FunctionDef):
        required = _required_parameters(node.args, skip_first=False)
        if required:
            problems.append(
                TargetProblem(
                    def_line, *name_span,
                    f"factory '{name}' takes required argument(s) {', '.join(required)}; a target "
                    "is called with no arguments: give them defaults or wrap the call in a "
                    "zero-argument function",
                    "error", name,
                )
            )
    else:
        init = next(
            (
                s for s in node.body
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"
            ),
            None,
        )
        if init is not None:
            required = _required_parameters(init.args, skip_first=True)
            if required:
                problems.append(
                    TargetProblem(
                        def_line, *name_span,
                        f"class '{name}' needs constructor argument(s) {', '.join(required)}; an "
                        "annotated class is built with no arguments: give them defaults or annotate "
                        "a zero-argument factory function instead",
                        "error", name,
                    )
                )

    scan.problems.extend(problems)
    if any(p.severity == "error" for p in problems):
        return
    scan.targets.append(
        Target(
            name=name,
            kind="module_class" if isinstance(node, ast.ClassDef) else "factory",
            line=def_line,
            column=def_col,
            annotation_line=annotation_line or def_line,
            options=options,
            annotation="pragma" if pragmas else "decorator",
        )
    )


def _name_span(lines: _Lines, line: int, col: int, name: str) -> tuple[int, int]:
    text = lines.text(line)
    match = re.compile(r"(?:async\s+)?(?:def|class)\s+(" + re.escape(name) + r")\b").search(text, col)
    if match:
        return match.start(1), match.end(1)
    return col, lines.end_of(line)


def _required_parameters(args: ast.arguments, skip_first: bool) -> list[str]:
    positional = list(args.posonlyargs) + list(args.args)
    if skip_first and positional:
        positional = positional[1:]
    n_defaults = len(args.defaults)
    required = [a.arg for a in positional[: len(positional) - n_defaults]]
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is None:
            required.append(arg.arg)
    return required


def _literal(node: ast.expr) -> Any:
    return ast.literal_eval(node)


def _record_option(
    key: str,
    value_node: ast.expr,
    span: tuple[int, int, int],
    key_span: tuple[int, int, int],
    target: str,
    options: dict[str, Any],
    positions: dict[str, tuple[int, int, int]],
    problems: list[TargetProblem],
    source_text: str,
) -> None:
    if key not in KNOWN_OPTIONS:
        problems.append(TargetProblem(*key_span, unknown_option_message(key), "error", target))
        return
    try:
        value = _literal(value_node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        problems.append(
            TargetProblem(
                *span,
                f"option '{key}' must be a Python literal (numbers, strings, tuples, lists, "
                f"True/False), not the expression `{source_text}`; options are read, never run",
                "error", target,
            )
        )
        return
    try:
        validate_option(key, value)
    except OptionError as exc:
        problems.append(TargetProblem(*span, exc.message, "error", target))
        return
    options[key] = value
    positions[key] = span


def _parse_pragma(
    line: int,
    col: int,
    comment: str,
    target: str,
    options: dict[str, Any],
    positions: dict[str, tuple[int, int, int]],
    problems: list[TargetProblem],
) -> None:
    match = PRAGMA_RE.match(comment)
    assert match is not None
    body = comment[match.end() :]
    base = col + match.end()  # the column of body[0]
    if not body.strip():
        return
    wrapped = "f(" + body + ")"
    try:
        call = ast.parse(wrapped, mode="eval").body
    except SyntaxError as exc:
        offset = max((exc.offset or 1) - 1 - 2, 0)
        problems.append(
            TargetProblem(
                line, base + min(offset, len(body)), base + len(body),
                f"cannot read the pragma's options ({exc.msg}); write them as "
                "name=literal pairs separated by commas, e.g. input_shape=(3, 224, 224), "
                'device="cpu"',
                "error", target,
            )
        )
        return
    body_lines = _Lines(wrapped)

    def span_of(node: ast.AST) -> tuple[int, int, int]:
        _, start, end = body_lines.span(node)
        return line, base + start - 2, base + end - 2

    assert isinstance(call, ast.Call)
    for arg in call.args:
        problems.append(
            TargetProblem(
                *span_of(arg),
                "pragma options must be written as name=value "
                f"(known options: {', '.join(KNOWN_OPTIONS)})",
                "error", target,
            )
        )
    for kw in call.keywords:
        if kw.arg is None:
            problems.append(
                TargetProblem(
                    *span_of(kw), "'**' is not allowed in a pragma; write each option as "
                    "name=literal", "error", target,
                )
            )
            continue
        kline, kcol, _ = span_of(kw)
        key_span = (kline, kcol, kcol + len(kw.arg))
        if kw.arg in options:
            problems.append(
                TargetProblem(*key_span, f"option '{kw.arg}' is given twice", "error", target)
            )
            continue
        _record_option(
            kw.arg, kw.value, span_of(kw.value), key_span, target, options, positions, problems,
            ast.get_source_segment(wrapped, kw.value) or "...",
        )


def _parse_decorator(
    dec: ast.expr,
    target: str,
    lines: _Lines,
    options: dict[str, Any],
    positions: dict[str, tuple[int, int, int]],
    problems: list[TargetProblem],
) -> None:
    if not isinstance(dec, ast.Call):
        problems.append(
            TargetProblem(
                *lines.span(dec),
                "call the decorator with parentheses: @torchscan_lsp.target() or "
                "@torchscan_lsp.target(input_shape=...)",
                "error", target,
            )
        )
        return
    source = "\n".join(lines.lines)
    for arg in dec.args:
        problems.append(
            TargetProblem(
                *lines.span(arg),
                "target options are keyword arguments, e.g. input_shape=(3, 224, 224)",
                "error", target,
            )
        )
    for kw in dec.keywords:
        if kw.arg is None:
            problems.append(
                TargetProblem(
                    *lines.span(kw), "'**' is not allowed in @target(...); write each option as "
                    "name=literal", "error", target,
                )
            )
            continue
        kline, kcol, _ = lines.span(kw)
        key_span = (kline, kcol, kcol + len(kw.arg))
        _record_option(
            kw.arg, kw.value, lines.span(kw.value), key_span, target, options, positions, problems,
            ast.get_source_segment(source, kw.value) or "...",
        )
