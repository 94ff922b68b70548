"""A Jupyter notebook in a real VS Code (code-server in headless Chromium): vscode_real/drive_notebooks.mjs
opens the four-cell notebook of ``notebook_files`` in VS Code's own notebook editor (its built-in
Jupyter serializer renders the cells; no kernel and no Jupyter extension are needed), reads the inlay
hints on the lines of its cells, hovers the block's layer, reads the Problems entry of the cell with
the magic, then opens the notebook whose factory raises and reads its error. The numbers are those
derived by hand in ``notebook_files``; screenshots of every step are written to
build/vscode-real/test_vscode_real_notebooks/.
"""

from __future__ import annotations

import sys

import pytest

from notebook_files import BROKEN_FACTORY, CELLS, EXPECTED, cell_line, write_notebook
from vscode_real_session import DRIVER, seen

BROKEN_CELLS = [CELLS[0], CELLS[1], BROKEN_FACTORY]
HINTS = {
    # 0-based cell: {0-based line: label}, as VS Code renders them
    1: {cell_line(2, "class Block") - 1: EXPECTED["block"], cell_line(2, "self.fc =") - 1: EXPECTED["fc"],
        cell_line(2, "self.act =") - 1: EXPECTED["act"], cell_line(2, "return self.act") - 1: EXPECTED["forward"]},
    2: {cell_line(3, "def build_net") - 1: EXPECTED["target"], cell_line(3, "nn.Sequential") - 1: EXPECTED["sequential"]},
}


@pytest.fixture(scope="module")
def session(code_server, tmp_path_factory, request) -> dict:
    tmp = tmp_path_factory.mktemp("vscode-real-notebooks")
    workspace = tmp / "workspace"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text('[project]\nname = "models"\n')
    write_notebook(workspace / "nb.ipynb")
    write_notebook(workspace / "broken.ipynb", BROKEN_CELLS)
    ran = code_server.drive(request.module.__name__, tmp, workspace, {
        "notebook": "nb.ipynb", "broken": "broken.ipynb", "cells": [cell.splitlines() for cell in CELLS],
        "python": sys.executable, "uiTimeoutMs": 20_000, "analysisTimeoutMs": 120_000,
        "expected": {str(cell): {str(line): label for line, label in lines.items()} for cell, lines in HINTS.items()},
        "hover": {"cell": 1, "needle": "Linear"}},
        driver=DRIVER.with_name("drive_notebooks.mjs"),
        settings={"security.workspace.trust.enabled": False})   # trust is test_vscode_real's
    ran["steps"] = {step["name"]: step for step in ran["results"]["steps"]}
    return ran



def test_the_cells_show_their_hints_on_their_lines(session):
    shown = seen(session, "notebook-hints")
    assert shown["cells"] == 4
    # the block: 16·32 + 32 = 544 params; the factory: 544 + 32·4 + 4 = 676 params, 512 + 128 = 640 MACs;
    # the imports and the magic's cell show nothing
    assert shown["hints"] == {str(cell): {str(line): label for line, label in lines.items()}
                              for cell, lines in HINTS.items()}
    # the code lens above the factory, in its cell, names the same totals
    assert [titles[:1] for titles in shown["lenses"]] == [[], [], [EXPECTED["target"]], []]


def test_hover_on_the_layer_in_a_cell(session):
    hover = seen(session, "hover")["hover"]
    assert hover.startswith("Linear")
    assert "Parameters: 544 (544 trainable, 0 frozen, 2.12 KiB)" in hover   # 544 float32 · 4 B = 2,176 B
    assert "Input: (1, 16) → output: (1, 32)" in hover


def test_problems_has_one_information_for_the_magic(session):
    rows = seen(session, "problems")["problems"]
    (info,) = [row for row in rows if row.startswith("Info: ")]
    assert "IPython syntax left out" in info and "`%matplotlib inline`" in info
    # the magic is line 1 of its cell
    assert f"at line {cell_line(4, '%matplotlib')} and character 1" in info
    assert not [row for row in rows if row.startswith(("Error: ", "Warning: "))]


def test_problems_has_the_error_of_the_broken_factory_on_its_cell_line(session):
    rows = seen(session, "broken-problems")["problems"]
    errors = [row for row in rows if row.startswith("Error: ")]
    raised = cell_line(3, "raise ValueError", BROKEN_CELLS)
    assert errors, rows
    assert all("build_net: the factory raised while building the model: ValueError: no model for you" in row
               for row in errors)
    assert any(f"at line {raised} and character 5" in row for row in errors), errors


def test_every_process_stopped_with_its_group(session):
    assert session["outlived"] == []
