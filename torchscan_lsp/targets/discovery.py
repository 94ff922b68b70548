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
import re
from typing import Any

from torchscan_lsp.targets.annotations import (
    COLONLESS_RE,
    MISSPELT_RE,
    comment_only_lines,
    decorator_aliases,
    is_target_decorator,
    parse_decorator,
    parse_pragma,
    pragma_comments,
)
from torchscan_lsp.targets.options import OptionError, check_consistency
from torchscan_lsp.targets.types import SourceLines, Target, TargetProblem, TargetScan

__all__ = ["Target", "TargetProblem", "TargetScan", "find_targets"]


def find_targets(source: str, filename: str = "<unknown>") -> TargetScan:
    """Return the annotated targets of ``source`` and the problems of its annotations.

    ``filename`` names the file ``source`` came from; parsing never reads that file, since an
    editor's unsaved buffer differs from it.

    A syntax error gives a single problem at its line and no targets. A target whose annotation has
    an error (an unknown or non-literal option, a wrong type, a factory with required arguments) is
    left out of ``targets``; its problems name it.
    """
    scan = TargetScan()
    lines = SourceLines(source)
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

    pragmas, trailing, colonless, misspelt = pragma_comments(source)
    for line, col, text in colonless:
        options = COLONLESS_RE.sub("", text, count=1).strip()
        scan.problems.append(
            TargetProblem(
                line, col, lines.end_of(line),
                f"this comment is not a pragma: '# torchscan' needs a colon; write '# torchscan: {options}'",
                "warning",
            )
        )
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

    aliases = decorator_aliases(tree)
    pragma_by_node: dict[int, list[tuple[int, int, str]]] = {}
    comment_lines = comment_only_lines(source)

    def annotated(line: int) -> ast.AST | None:
        """The def or class a comment on ``line`` stands above (only comment lines between)."""
        nxt = line + 1
        while nxt in comment_lines:
            nxt += 1
        return starts.get(nxt)

    for line, col, text in misspelt:
        if annotated(line) is None:  # a comment elsewhere is someone else's: never a word about it
            continue
        options = MISSPELT_RE.sub("", text, count=1).strip()
        scan.problems.append(
            TargetProblem(
                line, col, lines.end_of(line),
                f"this comment is not a pragma: did you mean '# torchscan: {options}'? "
                f"(the tag '{MISSPELT_RE.match(text)[1]}' is not 'torchscan')",
                "information",
            )
        )
    for line, col, text in pragmas:
        node = annotated(line)
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
        decorators = [d for d in node.decorator_list if is_target_decorator(d, aliases)]
        node_pragmas = pragma_by_node.get(id(node), [])
        if not decorators and not node_pragmas:
            continue
        _add_target(scan, node, node_pragmas, decorators, lines, id(node) in top_level)
    scan.targets.sort(key=lambda t: t.line)
    scan.problems.sort(key=lambda p: (p.line, p.column))
    return scan


def _syntax_problem(exc: SyntaxError, lines: SourceLines) -> TargetProblem:
    line = exc.lineno or 1
    col = max((exc.offset or 1) - 1, 0)
    end_line = getattr(exc, "end_lineno", None)
    end_offset = getattr(exc, "end_offset", None)
    if end_line == line and end_offset and end_offset - 1 > col:
        end = end_offset - 1
    else:
        end = max(lines.end_of(line), col + 1)
    return TargetProblem(line, col, end, f"syntax error: {exc.msg}")


def _add_target(
    scan: TargetScan,
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    pragmas: list[tuple[int, int, str]],
    decorators: list[ast.expr],
    lines: SourceLines,
    top_level: bool,
) -> None:
    name = node.name
    problems: list[TargetProblem] = []
    options: dict[str, Any] = {}
    positions: dict[str, tuple[int, int, int]] = {}
    annotation_line = None

    for line, col, text in pragmas:
        annotation_line = annotation_line or line
        parse_pragma(line, col, text, name, options, positions, problems)
    for dec in decorators:
        annotation_line = annotation_line or dec.lineno
        parse_decorator(dec, name, lines, options, positions, problems)
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


def _name_span(lines: SourceLines, line: int, col: int, name: str) -> tuple[int, int]:
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
