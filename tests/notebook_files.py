"""The notebook the notebook tests share (the pygls client, check and scan, the real VS Code): four
code cells as a user writes them, imports, a block class, a factory with a pragma and a cell with
a magic, with the numbers a reader derives by hand.

By hand, on input (1, 16):

* ``Block``: ``Linear(16, 32)`` has 16·32 + 32 = 544 parameters and 16·32 = 512 MACs; as
  dispatched operators (``torch.utils.flop_counter``: ``addmm`` is 2·M·N·K, the bias not counted)
  2·1·32·16 = 1,024 FLOPs; the ``ReLU`` 32 more (one per element), 1,056 for the block.
* the head ``Linear(32, 4)``: 32·4 + 4 = 132 parameters, 128 MACs, 2·1·4·32 = 256 FLOPs.
* the model: 544 + 132 = 676 parameters, 512 + 128 = 640 MACs, 1,056 + 256 = 1,312 FLOPs.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["BROKEN_FACTORY", "CELLS", "EXPECTED", "LAB_REWRITES", "cell_line", "lab_document", "lab_line",
           "notebook_json", "write_notebook"]

CELLS = [
    "import torch\nimport torch.nn as nn\n",
    "class Block(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(16, 32)\n"
    "        self.act = nn.ReLU()\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.act(self.fc(x))\n",
    "# torchscan: input_shape=(16,)\n"
    "def build_net():\n"
    "    return nn.Sequential(Block(), nn.Linear(32, 4))\n",
    "%matplotlib inline\n"
    "x = torch.randn(1, 16)\n",
]
"""The code cells, in order (cell 1 to 4)."""

BROKEN_FACTORY = ("# torchscan: input_shape=(16,)\n"
                  "def build_net():\n"
                  "    raise ValueError(\"no model for you\")\n")
"""Cell 3 edited so that the factory raises on its line 3."""

EXPECTED = {
    "block": "544 params · 1.06 kFLOPs",       # the class line: 544 parameters, 1,056 FLOPs
    "fc": "544 params · 1.02 kFLOPs",          # Linear(16, 32): 1,024 FLOPs
    "act": "0 params · 32 FLOPs",              # ReLU on 32 elements
    "forward": "→ (1, 32)",                    # the block's output
    "target": "676 params · 640 MACs · 1.31 kFLOPs",
    "sequential": "676 params · 1.31 kFLOPs",
}
"""The hint labels derived in the module's docstring, by what they stand on."""


def cell_line(cell: int, needle: str, cells: list[str] = CELLS) -> int:
    """The 1-based line in 1-based ``cell`` of the first line holding ``needle``."""
    for number, text in enumerate(cells[cell - 1].splitlines(), start=1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in cell {cell}")


def notebook_json(cells: list[str] = CELLS, *, markdown: dict[int, str] | None = None,
                  tags: dict[int, list[str]] | None = None, language: str = "python") -> str:
    """An nbformat 4 notebook of code ``cells`` as Jupyter writes one (indent 1, each source line
    a string); ``markdown`` inserts markdown cells before the given 0-based positions, ``tags``
    tags code cells by their 0-based index."""
    out, markdown, tags = [], markdown or {}, tags or {}
    for index, source in enumerate(cells):
        if index in markdown:
            out.append({"cell_type": "markdown", "metadata": {}, "source": markdown[index].splitlines(True)})
        out.append({"cell_type": "code", "execution_count": None, "metadata": {"tags": tags[index]} if index in tags else {},
                    "outputs": [], "source": source.splitlines(True)})
    notebook = {"cells": out, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"},
        "language_info": {"name": language}}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(notebook, indent=1) + "\n"


def write_notebook(path: Path, cells: list[str] = CELLS, **options) -> Path:
    """Write :func:`notebook_json` of ``cells`` to ``path``; returns it."""
    path.write_text(notebook_json(cells, **options), encoding="utf-8")
    return path


LAB_REWRITES = {"%matplotlib inline": 'get_ipython().run_line_magic("matplotlib", " inline")'}
"""The lines of :data:`CELLS` that jupyterlab-lsp rewrites, and what it writes (its line-magic
override: ``get_ipython().run_line_magic("NAME", "ARGS")``, the arguments with their space)."""


def _lab_cell(source: str) -> list[str]:
    """A cell's lines as JupyterLab's editor holds them (no final line end, as Jupyter saves a cell)
    and jupyterlab-lsp rewrites them."""
    return [LAB_REWRITES.get(line, line) for line in source.rstrip("\n").split("\n")]


def lab_document(cells: list[str] = CELLS) -> str:
    """jupyterlab-lsp's virtual document of a notebook of code ``cells``: each cell's lines and a
    line end, the cells joined by two more (``@jupyterlab/lsp``'s ``VirtualDocument.value``:
    ``lineBlocks.join("\\n".repeat(blankLinesBetweenCells))``, two)."""
    return "\n\n".join("\n".join(_lab_cell(source)) + "\n" for source in cells)


def lab_line(cell: int, needle: str, cells: list[str] = CELLS) -> int:
    """The 1-based line of :func:`lab_document` where line ``needle`` of 1-based ``cell`` is: each
    earlier cell takes its lines and two blank ones."""
    before = sum(len(_lab_cell(source)) + 2 for source in cells[:cell - 1])
    return before + cell_line(cell, needle, cells)
