"""``check`` and ``scan`` on Jupyter notebooks, run as a user runs them: every position printed as the
cell and the line in it (``nb.ipynb:cell 3:2``), and a file that is not a notebook of Python cells
one clear error. The numbers are those derived by hand in ``notebook_files``."""

import json
import subprocess
import sys

import pytest

from notebook_files import BROKEN_FACTORY, CELLS, EXPECTED, cell_line, write_notebook


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebooks")
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    # a markdown cell first: the code cells are cells 2 to 5
    write_notebook(root / "nb.ipynb", markdown={0: "# A small model\n"})
    write_notebook(root / "broken.ipynb", [CELLS[0], CELLS[1], BROKEN_FACTORY])
    (root / "not_json.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n', encoding="utf-8")
    write_notebook(root / "julia.ipynb", ["println(1)\n"], language="julia")
    return root


def _run(root, *argv):
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", *argv], cwd=root, capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


@pytest.fixture(scope="module")
def checked(workspace):
    """``check nb.ipynb broken.ipynb``: its exit status and lines, by notebook."""
    code, lines, stderr = _run(workspace, "check", "nb.ipynb", "broken.ipynb")
    return code, {name: [line for line in lines if line.startswith(f"{name}:")] for name in ("nb.ipynb", "broken.ipynb")}


@pytest.fixture(scope="module")
def scanned(workspace):
    """``scan nb.ipynb broken.ipynb``: its exit status, stdout and stderr lines."""
    return _run(workspace, "scan", "nb.ipynb", "broken.ipynb")


def test_check_prints_cells_and_their_lines(checked):
    lines = checked[1]["nb.ipynb"]
    # the block is cell 3, the factory cell 4, the magic cell 5; each hint stands at its line's end
    fc = CELLS[1].splitlines()[cell_line(2, "self.fc =") - 1]
    target = CELLS[2].splitlines()[cell_line(3, "def build_net") - 1]
    assert f"nb.ipynb:cell 3:{cell_line(2, 'self.fc =')}:{len(fc) + 1}: hint: {EXPECTED['fc']}" in lines
    assert f"nb.ipynb:cell 4:{cell_line(3, 'def build_net')}:{len(target) + 1}: hint: {EXPECTED['target']}" in lines
    (notice,) = [line for line in lines if ": info: " in line]
    assert notice.startswith(f"nb.ipynb:cell 5:{cell_line(4, '%matplotlib')}:1: info: IPython syntax left out")
    assert not [line for line in lines if ": error: " in line or ": warning: " in line]


def test_scan_names_the_target_by_its_cell(scanned):
    _, out, err = scanned
    assert out[0] == f"nb.ipynb:cell 4:{cell_line(3, 'def build_net')}: build_net"
    assert "Total params: 676" in out          # 544 + 132
    assert "Operator forward MACs: 640.00 MACs" in out   # 512 + 128
    assert [line for line in err if "information" in line] == [
        f"nb.ipynb:cell 5:{cell_line(4, '%matplotlib')}: information: IPython syntax left out of the analysis, "
        "which runs the cells as plain Python: `%matplotlib inline`"]


def test_an_error_is_on_the_cell_that_raised(checked, scanned):
    code, found = checked
    assert code == 1   # broken.ipynb's error
    lines = [line for line in found["broken.ipynb"] if ": hint: " not in line]
    raised = cell_line(3, "raise ValueError", [BROKEN_FACTORY] * 3)
    target = cell_line(3, "def build_net", [BROKEN_FACTORY] * 3)
    message = "build_net: the factory raised while building the model: ValueError: no model for you"
    assert lines == [f"broken.ipynb:cell 3:{target}:1: error: {message} (raised at broken.ipynb:cell 3:{raised})",
                     f"broken.ipynb:cell 3:{raised}:5: error: {message}"]
    code, _, err = scanned
    assert code == 1
    assert [line for line in err if line.startswith("broken.ipynb")] == [
        f"broken.ipynb:cell 3:{raised}: error: 'build_net' failed: ValueError: no model for you"]


def test_the_file_formats_say_the_cell_in_the_message(workspace):
    code, lines, _ = _run(workspace, "check", "--format", "sarif", "broken.ipynb")
    assert code == 1
    results = json.loads("\n".join(lines))["runs"][0]["results"]
    raised = cell_line(3, "raise ValueError", [BROKEN_FACTORY] * 3)
    # a notebook's lines are JSON: each result stands at its first line and says the cell
    assert {(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["message"]["text"].split(": ")[0])
            for r in results} == {(1, f"cell 3:{raised}"), (1, f"cell 3:{raised - 1}")}


@pytest.mark.parametrize(("name", "message"), [
    ("not_json.ipynb", "not a Jupyter notebook: invalid JSON at line 3, column 1: Expecting property name enclosed in "
                       "double quotes"),
    ("julia.ipynb", "a notebook of julia cells, not Python: torchscan analyses Python only"),
])
def test_a_file_that_is_not_a_python_notebook_is_one_clear_error(workspace, name, message):
    code, lines, _ = _run(workspace, "check", name)
    assert (code, lines) == (1, [f"{name}:1:1: error: {message}"])
    code, out, err = _run(workspace, "scan", name)
    assert (code, out, err) == (1, [], [f"{name}: error: {message}"])


def test_a_folder_is_searched_for_notebooks_that_mention_torchscan(workspace, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    write_notebook(tmp_path / "models.ipynb")
    write_notebook(tmp_path / "plots.ipynb", ["import math\n"])   # no target, no mention: not analysed
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write_notebook(tmp_path / ".ipynb_checkpoints" / "models-checkpoint.ipynb")   # Jupyter's copy: skipped
    code, out, err = _run(tmp_path, "scan", ".")
    assert code == 0, err
    assert [line for line in out if line.endswith(": build_net")] == [
        f"models.ipynb:cell 3:{cell_line(3, 'def build_net')}: build_net"]
