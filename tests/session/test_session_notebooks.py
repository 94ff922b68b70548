"""A notebook's cells as one program (session/notebooks.py): which lines go in, where each lands,
what is left out and said, and what is not a notebook. Every expected line number is counted by
hand from the cells written here."""

import ast

import pytest

from notebook_files import CELLS, notebook_json
from torchscan_lsp.session.notebooks import (SKIP_TAG, Cell, NotebookError, join_cells, parse_notebook,
                                             read_program)


def _code(number: int, source: str, **options) -> Cell:
    return Cell(number, "code", source, **options)


def test_code_cells_join_in_order_and_map_back_to_cell_and_line():
    cells = parse_notebook(notebook_json(CELLS, markdown={1: "# The block\n"}))
    # a markdown cell before the block counts: the code cells are cells 1, 3, 4 and 5
    assert [(c.number, c.kind) for c in cells] == [(1, "code"), (2, "markdown"), (3, "code"), (4, "code"), (5, "code")]
    program = join_cells(cells)
    # cell 1 has 2 lines, the block 8, the factory 3: the factory's def is program line 2 + 8 + 2 = 12
    assert program.text.splitlines()[11] == "def build_net():"
    assert [(s.cell.number, s.start, s.lines) for s in program.spans] == [(1, 1, 2), (3, 3, 8), (4, 11, 3), (5, 14, 2)]
    assert program.locate(12)[0].number == 4 and program.locate(12)[1] == 2
    assert program.where(12) == "cell 4:2"
    assert program.locate(16) is None   # past the last line
    ast.parse(program.text)             # the magic is out: plain Python


def test_line_magics_and_shell_escapes_are_left_out_with_one_information_per_cell():
    source = "%matplotlib inline\nimport os\nfiles = !ls\n!pip install einops\nmodel?\n"
    program = join_cells([_code(1, "x = 1\n"), _code(2, source)])
    lines = program.text.splitlines()
    # every line keeps its number (the cell starts on program line 2); the IPython lines are comments
    assert lines == ["x = 1", "#matplotlib inline", "import os", "#iles = !ls", "#pip install einops", "#odel?"]
    (notice,) = program.notices
    assert (notice.line, notice.severity) == (2, "information")
    assert notice.message.endswith("`%matplotlib inline` (line 1), `files = !ls` (line 3), `!pip install einops` "
                                   "(line 4), `model?` (line 5)")


def test_inside_a_block_a_left_out_line_becomes_pass():
    program = join_cells([_code(1, "for step in range(3):\n    %time f(step)\n")])
    assert program.text.splitlines() == ["for step in range(3):", "    pass"]
    ast.parse(program.text)


def test_a_cell_that_parses_is_never_searched_for_magics():
    # a "%" that starts a line inside a string is Python, as the parser says
    source = 'doc = """\n%not a magic\n"""\n'
    program = join_cells([_code(1, source)])
    assert program.text == source and program.notices == ()


def test_cell_magics_keep_a_python_body_and_leave_other_cells_out():
    timed = join_cells([_code(1, "%%time\nmodel = build()\n")])
    assert timed.text.splitlines() == ["#%time", "model = build()"]
    shell = join_cells([_code(1, "%%bash\necho hi\nls\n"), _code(2, "y = 2\n")])
    # the shell cell's three lines stay as lines, empty: the next cell still starts on line 4
    assert shell.text.splitlines() == ["#%bash", "", "", "y = 2"]
    assert shell.spans[1].start == 4
    (notice,) = shell.notices
    assert "`%%bash` (cell magic: the whole cell is left out)" in notice.message


def test_tagged_markdown_and_other_language_cells_are_not_in_the_program():
    cells = [_code(1, "a = 1\n"), _code(2, "download()\n", tags=(SKIP_TAG,)), Cell(3, "markdown", "# Title\n"),
             _code(4, "SELECT 1\n", language="sql"), _code(5, "b = 2\n")]
    program = join_cells(cells)
    assert program.text == "a = 1\nb = 2\n"
    assert [(s.cell.number, s.start) for s in program.spans] == [(1, 1), (5, 2)]


def test_the_skip_tag_is_read_from_the_notebook_file():
    cells = parse_notebook(notebook_json(["a = 1\n", "train()\n"], tags={1: [SKIP_TAG, "slow"]}))
    assert cells[1].tags == (SKIP_TAG, "slow") and not cells[1].analysed
    assert join_cells(cells).text == "a = 1\n"


def test_messages_name_cells_for_program_lines():
    program = join_cells([_code(1, "import torch\n"), _code(2, "def f():\n    raise ValueError\n")])
    # program line 3 is line 2 of cell 2; another file's line is left alone
    assert program.relabel("failed (raised at nb.ipynb:3)", "nb.ipynb") == "failed (raised at nb.ipynb:cell 2:2)"
    assert program.relabel("see blocks.py:3 and sub/nb.ipynb:3", "nb.ipynb") == "see blocks.py:3 and sub/nb.ipynb:3"


@pytest.mark.parametrize(("text", "message"), [
    ('{"cells": [', "not a Jupyter notebook: invalid JSON at line 1, column 12"),
    ('{"worksheets": [], "nbformat": 3}', "not a Jupyter notebook of nbformat 4: it has no 'cells' list (nbformat 3"),
    ('{"cells": [{"source": "x"}]}', "not a Jupyter notebook: cell 1 is not an object with a 'cell_type'"),
    ('{"cells": [], "metadata": {"language_info": {"name": "R"}}}',
     "a notebook of R cells, not Python: torchscan analyses Python only"),
])
def test_what_is_not_a_notebook_of_python_cells_is_one_clear_error(text, message):
    with pytest.raises(NotebookError) as raised:
        parse_notebook(text)
    assert str(raised.value).startswith(message)


def test_a_file_that_is_not_utf8_is_said_so(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(b'{"cells": ["\xff"]}')
    with pytest.raises(NotebookError, match="not UTF-8"):
        read_program(path)
