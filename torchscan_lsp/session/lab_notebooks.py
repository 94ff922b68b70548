"""A notebook as JupyterLab's ``jupyterlab-lsp`` sends it: one Python text document, its cells joined.

``jupyterlab-lsp`` (5.x, with ``jupyter-lsp`` on the server side) does not use LSP notebook
synchronisation. For each notebook it opens one text document of language ``python``, its "virtual
document": the notebook's code cells in order, each followed by two blank lines
(``VirtualDocument.blankLinesBetweenCells`` of ``@jupyterlab/lsp``), IPython syntax rewritten into
calls. Its URI is the notebook's path under the virtual documents folder at the Jupyter server's
root (``.virtual_documents/sub/nb.ipynb`` for ``sub/nb.ipynb``), which ``jupyter-lsp`` also writes
to disk, unless the server's spec says ``"requires_documents_on_disk": false``: then it is the
notebook's own URI (``solveUris`` of ``@jupyterlab/lsp``). Either way the document stands for the
notebook: the session tracks it at the notebook's path (:func:`notebook_path`), so the job's file,
its folder (``from mymodule import Block`` beside the notebook) and its workspace are the
notebook's, and the job carries the document's text (the file on disk is the notebook's JSON).

The rewrites raise ``NameError`` outside IPython (no ``get_ipython``). The lines that are exactly
one of them are left out of the program (:func:`lab_program`), as IPython syntax is for a notebook
read from its file (:mod:`.notebooks`), with one information naming them as they were written in
the cells (on the first line that ``jupyterlab-lsp`` shows it on: :func:`lab_program`). The forms, from ``jupyterlab-lsp`` 5.3.0, ``src/transclusions/ipython/overrides.ts``
(``LINE_MAGIC_PREFIX`` is ``^(\\s*|\\s*\\S+\\s*=\\s*)``, an indent or an assignment):

* ``!ls -l`` and ``files = !ls``: ``$1get_ipython().getoutput("$2$3")`` (the command unescaped);
* ``?model`` and ``??model``: ``get_ipython().run_line_magic('pinfo', 'model')`` (``'pinfo2'``);
  ``model?``: the same with two spaces after the comma;
* ``%matplotlib inline``: ``get_ipython().run_line_magic("matplotlib", " inline")`` (the arguments'
  ``"`` and ``\\`` escaped with a backslash);
* a cell magic on a cell's first line: ``%%time`` and ``%%capture`` (``MAGICS_TO_UNWRAP``) become the
  comment ``# START_CELL_MAGIC("time", "")``, the body and ``# END_CELL_MAGIC``: the body is Python and
  stays, the magic is named; any other, ``%%timeit`` and ``%%bash`` among them, becomes
  ``get_ipython().run_cell_magic("bash", "", BODY)``, ``BODY`` the cell's body as a triple-quoted
  string (its own triple quotes escaped with backslashes), which is left out whole, to the line
  ending in three quotes and a parenthesis.

A line is matched whole, so Python that merely mentions ``get_ipython`` is never touched (and a call
the user wrote in one of these forms, which would raise as well, is left out too). The cells are not
known: positions are the document's own lines, which ``jupyterlab-lsp`` maps back to the cells, and
cell tags (``torchscan-skip``) do not reach the server. Standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import PurePath

from torchscan_lsp.session.notebooks import NOTEBOOK_SUFFIX, Program, left_out_line, left_out_notice

__all__ = ["VIRTUAL_FOLDER", "in_virtual_folder", "is_lab_notebook", "lab_program", "notebook_path"]

VIRTUAL_FOLDER = ".virtual_documents"
"""``jupyter-lsp``'s default folder of virtual documents, at the Jupyter server's root (its
``LanguageServerManager.virtual_documents_dir``, or ``JP_LSP_VIRTUAL_DIR``: another name is not
recognised)."""

_PREFIX = r"(?P<prefix>\s*|\s*\S+\s*=\s*)"
_ESCAPED = r'(?:[^"\\]|\\.)*'
_SHELL = re.compile(_PREFIX + r'get_ipython\(\)\.getoutput\("(?P<command>.*)"\)')
_HELP = re.compile(r"(?P<prefix>\s*)get_ipython\(\)\.run_line_magic\('(?P<help>pinfo2?)',(?P<after> {1,2})"
                   r"'(?P<name>[^']*)'\)")
_LINE_MAGIC = re.compile(_PREFIX + rf'get_ipython\(\)\.run_line_magic\("(?P<name>[^"]*)", "(?P<args>{_ESCAPED})"\)')
_CELL_MAGIC = re.compile(rf'get_ipython\(\)\.run_cell_magic\("(?P<name>[^"]*)", "(?P<first>{_ESCAPED})", """')
_CELL_MAGIC_END = re.compile(r'.*"""\)')  # the body holds no triple quote unescaped: the first such line ends it
_UNWRAPPED = re.compile(rf'# START_CELL_MAGIC\("(?P<name>[^"]*)", "(?P<first>{_ESCAPED})"\)')
_UNWRAPPED_END = "# END_CELL_MAGIC"


def in_virtual_folder(path: str) -> bool:
    """Whether ``path`` lies under a :data:`VIRTUAL_FOLDER` (no file of the user's does)."""
    return VIRTUAL_FOLDER in PurePath(path).parts[:-1]


def is_lab_notebook(path: str, language_id: str | None) -> bool:
    """Whether a text document at ``path`` of language ``language_id`` is ``jupyterlab-lsp``'s
    document of a notebook: a ``.ipynb`` path and the language ``python`` (an editor showing a
    notebook's JSON says ``json``; a fragment of another language is a file of another suffix)."""
    return path.endswith(NOTEBOOK_SUFFIX) and (language_id or "").lower() == "python"


def notebook_path(path: str) -> str:
    """The notebook that a ``jupyterlab-lsp`` document at ``path`` stands for: ``path`` without its
    innermost :data:`VIRTUAL_FOLDER` (``/srv/.virtual_documents/sub/nb.ipynb`` is
    ``/srv/sub/nb.ipynb``); ``path`` itself when it lies in none (the notebook's own URI)."""
    parts = PurePath(path).parts
    if VIRTUAL_FOLDER not in parts[:-1]:
        return path
    index = len(parts) - 2 - parts[-2::-1].index(VIRTUAL_FOLDER)
    return str(PurePath(*parts[:index], *parts[index + 1:]))


def _unescape(text: str) -> str:
    return re.sub(r'\\([\\"])', r"\1", text)


def _written(line: str) -> tuple[str, str] | None:
    """The cell line that ``jupyterlab-lsp`` rewrote into document ``line``, and why it is left out
    (``""``: it is a line magic, a shell command or help); ``None`` for a line that is no rewrite."""
    if found := _SHELL.fullmatch(line):
        return f"{found['prefix']}!{found['command']}", ""
    if found := _HELP.fullmatch(line):
        marks = "?" if found["help"] == "pinfo" else "??"
        prefixed = len(found["after"]) == 1  # ?model, not model?
        return found["prefix"] + (marks + found["name"] if prefixed else found["name"] + marks), ""
    if found := _LINE_MAGIC.fullmatch(line):
        return f"{found['prefix']}%{found['name']}{_unescape(found['args'])}", ""
    if found := _UNWRAPPED.fullmatch(line):
        return f"%%{found['name']}{_unescape(found['first'])}", "cell magic"
    return None


def lab_program(text: str) -> Program:
    """The program of a ``jupyterlab-lsp`` document ``text``: every line, those that are rewrites of
    IPython syntax left out (as comments, or ``pass`` inside a block, so that each line keeps its
    number), with one information naming them as the cells hold them. It has no cell spans.

    The information is on the first line of Python that ``jupyterlab-lsp`` shows diagnostics on:
    it drops those on the lines it rewrote (the lines of a cell magic's cell all are), and on the
    blank lines between cells (their ``skipInspect``, ``src/virtual/document.ts`` and
    ``features/diagnostics/feature.ts``)."""
    lines = text.split("\n")
    left_out: list[tuple[int, str, str]] = []
    silenced: set[int] = set()
    index = 0
    while index < len(lines):
        line = lines[index]
        end = index
        if found := _CELL_MAGIC.match(line):
            end = next((i for i in range(index, len(lines)) if _CELL_MAGIC_END.fullmatch(lines[i])), index)
            left_out.append((index, f"%%{found['name']}{_unescape(found['first'])}",
                             "cell magic: the whole cell is left out"))
            lines[index:end + 1] = [left_out_line(line)] + [""] * (end - index)
        elif (written := _written(line)) is not None:
            left_out.append((index, *written))
            lines[index] = left_out_line(line)
            if _UNWRAPPED.fullmatch(line):  # its body stays, silenced too
                end = next((i for i in range(index, len(lines)) if lines[i] == _UNWRAPPED_END), index)
        else:
            index += 1
            continue
        silenced.update(range(index, end + 1))
        index = end + 1
    if not left_out:
        return Program("\n".join(lines), ())
    shown = next((i for i, line in enumerate(lines) if line.strip() and i not in silenced), 0)
    notice = left_out_notice(1, left_out, numbered=False)
    column = len(lines[shown]) - len(lines[shown].lstrip())
    notice = dataclasses.replace(notice, line=shown + 1, column=column, end_column=len(lines[shown]))
    return Program("\n".join(lines), (), (notice,))
