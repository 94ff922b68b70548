"""Reading the two annotation forms of a target, with ``ast`` and ``tokenize`` only: the
``# torchscan: ...`` pragma comment and the ``@torchscan_lsp.target(...)`` decorator (under any
name it was imported as). Option values are parsed with ``ast.literal_eval``, never evaluated, and
validated by :mod:`.options`; each mistake is a :class:`~.types.TargetProblem` at its place."""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from typing import Any

from torchscan_lsp.targets.options import KNOWN_OPTIONS, OptionError, unknown_option_message, validate_option
from torchscan_lsp.targets.types import SourceLines, TargetProblem

__all__ = ["PRAGMA_RE", "COLONLESS_RE", "MISSPELT_RE", "misspelt_tag", "pragma_comments", "comment_only_lines", "decorator_aliases", "is_target_decorator",
           "parse_pragma", "parse_decorator"]

PRAGMA_RE = re.compile(r"#\s*torchscan\s*:")
DECORATOR_MODULE = "torchscan_lsp"
DECORATOR_NAME = "target"


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []


COLONLESS_RE = re.compile(r"#\s*torchscan\b\s*[^:\w\s]?\s*(?=[A-Za-z_]\w*\s*=)")
"""A full-line comment that reads as a pragma but for its colon: ``# torchscan input_shape=(3, 32, 32)``
(``torchscan``, maybe one stray mark such as ``;`` or ``=``, then ``option=``)."""


MISSPELT_RE = re.compile(r"#\s*([A-Za-z_][\w-]*)\s*:\s*(?=[A-Za-z_]\w*\s*=)")
"""A full-line comment shaped like a pragma, ``# WORD: option=...``, whatever ``WORD`` is."""

_TAG = "torchscan"
_TAG_SIMILARITY = 0.85
"""How close (:class:`difflib.SequenceMatcher`'s ratio, case ignored) a comment's tag must be to
``torchscan`` to read as a misspelling of it: ``torchscna`` 0.89, ``torch-scan`` 0.95, but
``torchvision`` 0.70, ``torchscan_lsp`` 0.82, ``torch`` 0.71."""


def misspelt_tag(comment: str) -> str | None:
    """The tag of ``comment`` when it reads as a misspelt pragma tag (``# torchscna: x=1``,
    ``# TorchScan: x=1``): a ``# WORD: option=`` comment whose ``WORD`` is not ``torchscan`` but
    close to it (:data:`_TAG_SIMILARITY`); ``None`` otherwise."""
    match = MISSPELT_RE.match(comment)
    if match is None or match[1] == _TAG:
        return None
    ratio = difflib.SequenceMatcher(None, match[1].lower(), _TAG).ratio()
    return match[1] if ratio >= _TAG_SIMILARITY else None


def pragma_comments(source: str) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]], list[tuple[int, int, str]],
                                          list[tuple[int, int, str]]]:
    """(line, column, text) of each full-line pragma, (line, column) of trailing ones, (line,
    column, text) of full-line comments that would be a pragma but for the colon
    (:data:`COLONLESS_RE`), and (line, column, text) of full-line comments whose tag is a
    misspelling of ``torchscan`` (:func:`misspelt_tag`): both would otherwise be ignored without
    a word."""
    pragmas: list[tuple[int, int, str]] = []
    trailing: list[tuple[int, int]] = []
    colonless: list[tuple[int, int, str]] = []
    misspelt: list[tuple[int, int, str]] = []
    for tok in _tokens(source):
        if tok.type != tokenize.COMMENT:
            continue
        line, col = tok.start
        if not PRAGMA_RE.match(tok.string):
            if not tok.line[:col].strip():
                if COLONLESS_RE.match(tok.string):
                    colonless.append((line, col, tok.string))
                elif misspelt_tag(tok.string) is not None:
                    misspelt.append((line, col, tok.string))
            continue
        if tok.line[:col].strip():
            trailing.append((line, col))
        else:
            pragmas.append((line, col, tok.string))
    return pragmas, trailing, colonless, misspelt


def comment_only_lines(source: str) -> set[int]:
    lines = set()
    for tok in _tokens(source):
        if tok.type == tokenize.COMMENT and not tok.line[: tok.start[1]].strip():
            lines.add(tok.start[0])
    return lines


def decorator_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
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


def is_target_decorator(node: ast.AST, aliases: tuple[set[str], set[str]]) -> bool:
    if isinstance(node, ast.Call):
        return _is_target_ref(node.func, aliases)
    return _is_target_ref(node, aliases)


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


def _without_comment(body: str) -> str:
    """A pragma's options without a comment after them (``input_shape=(16,)  # the mlp``), found
    by Python's tokenizer, so that a ``#`` inside a string stays; unchanged when the options do not
    tokenize (their own error is reported)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(body).readline):
            if token.type == tokenize.COMMENT:
                return body[: token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return body


def parse_pragma(
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
    body = _without_comment(comment[match.end() :])
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
    body_lines = SourceLines(wrapped)

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


def parse_decorator(
    dec: ast.expr,
    target: str,
    lines: SourceLines,
    options: dict[str, Any],
    positions: dict[str, tuple[int, int, int]],
    problems: list[TargetProblem],
) -> None:
    if not isinstance(dec, ast.Call):
        problems.append(
            TargetProblem(
                *lines.span(dec),
                f"call the decorator with parentheses: @{ast.unparse(dec)}() or "
                f"@{ast.unparse(dec)}(input_shape=...)",
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
