"""Jupyter notebooks as one program: the code cells joined in order, with a map back to (cell, line).

A notebook is analysed as what "Run All" would execute: its Python code cells, top to bottom, as one
module. Everything downstream (targets, jobs, the worker, results, hints, diagnostics) works on that
program unchanged; only positions are mapped back to the cell and the line where the code is.

* Lines Python cannot parse are IPython syntax: line magics (``%matplotlib inline``), shell
  escapes (``!pip install einops``), their assignments (``files = !ls``) and help (``model?``).
  They are left out of the program (a comment, or ``pass`` inside a block, so that every other line
  keeps its number), with one information per cell naming them. A cell is searched for them only
  when it does not parse as it is, so a ``%`` inside a string is never touched.
* A cell magic (``%%time`` on the first line) runs its body as Python for ``%%time``,
  ``%%timeit`` and ``%%capture`` (:data:`PYTHON_CELL_MAGICS`): only that line is left out; any
  other (``%%bash``, ``%%writefile``...) leaves the whole cell out, said the same way.
* A cell tagged :data:`SKIP_TAG` (``"torchscan-skip"`` in its metadata's ``tags``), a markdown or
  raw cell, and a code cell of another language are left out of the program.

Cells are numbered from 1 among all the notebook's cells, markdown included, as VS Code's status
bar ("Cell 3 of 7") and ruff count them: ``nb.ipynb:cell 3:12`` is line 12 of the third cell.
Standard library only (``json`` reads the file).
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from torchscan_lsp.targets import TargetProblem

__all__ = ["NOTEBOOK_SUFFIX", "PYTHON_CELL_MAGICS", "SKIP_TAG", "Cell", "NotebookError", "Program", "Span",
           "cell_tags", "is_notebook", "join_cells", "left_out_line", "left_out_notice", "parse_notebook", "read_notebook",
           "read_program"]

NOTEBOOK_SUFFIX = ".ipynb"
"""The file suffix of a Jupyter notebook."""

SKIP_TAG = "torchscan-skip"
"""The cell tag that keeps a cell out of the analysed program (a cell that downloads data, trains or
plots, which "Run All" would run before a target)."""

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
"""Cell magics whose body IPython runs as Python: the body stays in the program."""

MAX_NAMED = 4
"""A cell's information names this many left-out lines, then says how many more."""

_ASSIGNED_MAGIC = re.compile(r"[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[%!]")
_HELP = re.compile(r"\?{0,2}[A-Za-z_][\w.]*(\(\))?\?{1,2}")


class NotebookError(ValueError):
    """A file that is not a Jupyter notebook of Python cells: not JSON, not nbformat 4, another
    language. The message says what is wrong (and where in the JSON); the caller names the file."""


@dataclass(frozen=True)
class Cell:
    """One cell of a notebook.

    Attributes:
        number: 1-based position among all the notebook's cells.
        kind: ``"code"``, ``"markdown"`` or ``"raw"``.
        source: the cell's text.
        tags: the tags of its metadata (:data:`SKIP_TAG` keeps it out).
        language: its language (``"python"`` unless the editor says otherwise).
        key: the editor's name for the cell's text document (its URI); ``None`` for a file.
    """

    number: int
    kind: str
    source: str
    tags: tuple[str, ...] = ()
    language: str = "python"
    key: str | None = None

    @property
    def analysed(self) -> bool:
        """Whether the cell is part of the program: Python code, not tagged :data:`SKIP_TAG`."""
        return self.kind == "code" and self.language == "python" and SKIP_TAG not in self.tags


@dataclass(frozen=True)
class Span:
    """Where one cell's lines lie in the program: ``lines`` lines from 1-based line ``start``."""

    cell: Cell
    start: int
    lines: int


@dataclass(frozen=True)
class Program:
    """The code cells of a notebook joined into one program.

    Attributes:
        text: the program, one line per line of its cells (left-out lines as comments or ``pass``).
        spans: where each analysed cell's lines are, in order; none for a program whose cells
            are not known (``jupyterlab-lsp``'s document of a notebook, :mod:`.lab_notebooks`:
            its lines are the editor's own).
        notices: one information per cell with left-out lines (``TargetProblem``, severity
            ``"information"``, at the first such line of the program), added to the document's
            problems.
    """

    text: str
    spans: tuple[Span, ...]
    notices: tuple[TargetProblem, ...] = ()
    _starts: list[int] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._starts.extend(span.start for span in self.spans)

    def locate(self, line: int) -> tuple[Cell, int] | None:
        """The cell and 1-based line in it of 1-based program ``line``; ``None`` outside every cell."""
        index = bisect.bisect_right(self._starts, line) - 1
        if index < 0:
            return None
        span = self.spans[index]
        return (span.cell, line - span.start + 1) if line < span.start + span.lines else None

    def span_of(self, key: str) -> Span | None:
        """The span of the cell whose :attr:`Cell.key` is ``key`` (``None``: not in the program)."""
        return next((span for span in self.spans if span.cell.key == key), None)

    def where(self, line: int) -> str:
        """``"cell 3:12"`` for program ``line``; the line alone when it lies in no cell."""
        found = self.locate(line)
        return f"cell {found[0].number}:{found[1]}" if found else str(line)

    def relabel(self, message: str, name: str) -> str:
        """``message`` with each ``NAME:LINE`` that names a program line (``raised at nb.ipynb:14``)
        written as the cell and line (``raised at nb.ipynb:cell 3:2``)."""
        pattern = re.compile(rf"(?<![\w/.]){re.escape(name)}:(\d+)\b")
        return pattern.sub(lambda m: f"{name}:{self.where(int(m[1]))}", message)


def is_notebook(path: str | Path) -> bool:
    """Whether ``path`` names a Jupyter notebook (by its suffix)."""
    return str(path).endswith(NOTEBOOK_SUFFIX)


def join_cells(cells: Iterable[Cell]) -> Program:
    """The program of ``cells`` (in notebook order): each analysed cell's lines, IPython syntax
    left out (see the module's docstring)."""
    lines: list[str] = []
    spans: list[Span] = []
    notices: list[TargetProblem] = []
    for cell in cells:
        if not cell.analysed:
            continue
        own, left_out = _python_lines(cell.source)
        start = len(lines) + 1
        spans.append(Span(cell, start, len(own)))
        lines.extend(own)
        if left_out:
            notices.append(left_out_notice(start, left_out))
    text = "\n".join(lines) + "\n" if lines else ""
    return Program(text, tuple(spans), tuple(notices))


def _python_lines(source: str) -> tuple[list[str], list[tuple[int, str, str]]]:
    """A cell's lines as the program holds them, and its left-out lines ``(index, text, why)``."""
    lines = source.splitlines()
    left_out: list[tuple[int, str, str]] = []
    if lines and lines[0].startswith("%%"):
        magic = lines[0][2:].split(maxsplit=1)[0] if lines[0][2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:
            left_out.append((0, lines[0], "cell magic: the whole cell is left out"))
            return ["#" + lines[0][1:]] + [""] * (len(lines) - 1), left_out
        left_out.append((0, lines[0], "cell magic"))
        lines[0] = "#" + lines[0][1:]
    if _parses(lines):
        return lines, left_out
    for index, text in enumerate(lines):
        if _is_ipython(text):
            left_out.append((index, text, ""))
            lines[index] = left_out_line(text)
    return lines, sorted(left_out)


def left_out_line(text: str) -> str:
    """What the program holds for a left-out line ``text``: ``pass`` at its indent inside a block,
    else a comment of the same length (its columns stay those of the editor's line)."""
    stripped = text.lstrip()
    indent = text[: len(text) - len(stripped)]
    # inside a block a comment would leave it empty
    return indent + "pass" if indent else "#" + stripped[1:]


def _parses(lines: list[str]) -> bool:
    try:
        ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return False
    return True


def _is_ipython(text: str) -> bool:
    """Whether a line is IPython syntax: a line magic, a shell escape, one assigned, or help."""
    stripped = text.strip()
    return bool(stripped) and (stripped[0] in "%!" or bool(_ASSIGNED_MAGIC.match(stripped))
                               or bool(_HELP.fullmatch(stripped)))


def left_out_notice(start: int, left_out: list[tuple[int, str, str]], *, numbered: bool = True) -> TargetProblem:
    """One information for the left-out lines ``(index, text, why)`` of a cell whose first line is
    program line ``start`` (``index`` 0-based from there), at the first of them; each named by its
    text (and, ``numbered``, its line in the cell), :data:`MAX_NAMED` at most."""
    first, text, _ = left_out[0]
    named = []
    for index, line, why in left_out[:MAX_NAMED]:
        number = f"line {index + 1}" if numbered and len(left_out) > 1 else ""
        detail = ", ".join(part for part in (number, why) if part)
        named.append(f"`{line.strip()}`" + (f" ({detail})" if detail else ""))
    if len(left_out) > MAX_NAMED:
        named.append(f"and {len(left_out) - MAX_NAMED} more")
    column = len(text) - len(text.lstrip())
    return TargetProblem(start + first, column, len(text),
                         f"IPython syntax left out of the analysis, which runs the cells as plain Python: "
                         f"{', '.join(named)}", "information")


# reading a notebook file --------------------------------------------------------------------------


def read_notebook(path: str | Path) -> list[Cell]:
    """The cells of the notebook file at ``path`` (:func:`parse_notebook`).

    Raises:
        OSError: the file cannot be read.
        NotebookError: it is not a notebook of Python cells.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"not a Jupyter notebook: not UTF-8 ({error.reason} at byte {error.start})") from None
    return parse_notebook(text)


def read_program(path: str | Path) -> Program:
    """The program of the notebook file at ``path`` (raises as :func:`read_notebook`)."""
    return join_cells(read_notebook(path))


def parse_notebook(text: str) -> list[Cell]:
    """The cells of a notebook's JSON ``text`` (nbformat 4).

    Raises:
        NotebookError: ``text`` is not JSON, not a notebook of nbformat 4 (a ``cells`` list of
            objects with a ``cell_type`` and a ``source``), or its kernel's language is not Python.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"not a Jupyter notebook: invalid JSON at line {error.lineno}, column {error.colno}: "
                            f"{error.msg}") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        version = data.get("nbformat") if isinstance(data, dict) else None
        raise NotebookError("not a Jupyter notebook of nbformat 4: it has no 'cells' list"
                            + (f" (nbformat {version}; save it again with Jupyter 4 or later)" if version else ""))
    language = _language(data.get("metadata"))
    if language is not None and language.lower() != "python":
        raise NotebookError(f"a notebook of {language} cells, not Python: torchscan analyses Python only")
    return [_cell(number, raw) for number, raw in enumerate(cells, start=1)]


def _language(metadata: Any) -> str | None:
    """The notebook's language as its metadata says it (``language_info.name``, else the kernel
    spec's ``language``); ``None`` when it says nothing."""
    if not isinstance(metadata, dict):
        return None
    for section, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section, {}).get(key) if isinstance(metadata.get(section), dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def _cell(number: int, raw: Any) -> Cell:
    if not isinstance(raw, dict) or not isinstance(raw.get("cell_type"), str):
        raise NotebookError(f"not a Jupyter notebook: cell {number} is not an object with a 'cell_type'")
    source = raw.get("source", "")
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f"not a Jupyter notebook: the 'source' of cell {number} is neither a string nor a "
                            "list of strings")
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    language = (metadata.get("vscode") or {}).get("languageId") if isinstance(metadata.get("vscode"), dict) else None
    return Cell(number, raw["cell_type"], source, cell_tags(metadata), language or "python")


def cell_tags(metadata: Any) -> tuple[str, ...]:
    """The tags of a cell's ``metadata``: its ``tags`` (nbformat), or those VS Code nests under
    ``metadata`` or ``custom.metadata`` when it sends a cell's metadata."""
    if not isinstance(metadata, dict):
        return ()
    for holder in (metadata, metadata.get("metadata"), (metadata.get("custom") or {}).get("metadata")
                   if isinstance(metadata.get("custom"), dict) else None):
        tags = holder.get("tags") if isinstance(holder, dict) else None
        if isinstance(tags, list):
            return tuple(tag for tag in tags if isinstance(tag, str))
    return ()
