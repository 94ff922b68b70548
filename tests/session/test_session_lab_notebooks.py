"""jupyterlab-lsp's document of a notebook: which file it stands for, and its rewritten IPython lines.

Each rewrite below is written out by hand from jupyterlab-lsp 5.3.0's
``src/transclusions/ipython/overrides.ts`` (the replacement of each override applied to the cell
line on its left), so the program is checked against what JupyterLab sends, not against our regexes.
"""

import ast

import pytest

from torchscan_lsp.session.lab_notebooks import in_virtual_folder, is_lab_notebook, lab_program, notebook_path

# (what the cell holds, what jupyterlab-lsp sends for it)
REWRITES = [
    ("%matplotlib inline", 'get_ipython().run_line_magic("matplotlib", " inline")'),
    ("%load_ext autoreload", 'get_ipython().run_line_magic("load_ext", " autoreload")'),
    ('%env A="b"', 'get_ipython().run_line_magic("env", " A=\\"b\\"")'),       # args: " and \ escaped
    ("t = %timeit -o f()", 't = get_ipython().run_line_magic("timeit", " -o f()")'),
    ("!pip install einops", 'get_ipython().getoutput("pip install einops")'),
    ('!echo "hi"', 'get_ipython().getoutput("echo "hi"")'),                       # shell: not escaped
    ("files = !ls -l", 'files = get_ipython().getoutput("ls -l")'),
    ("?model", "get_ipython().run_line_magic('pinfo', 'model')"),
    ("??model", "get_ipython().run_line_magic('pinfo2', 'model')"),
    ("model?", "get_ipython().run_line_magic('pinfo',  'model')"),               # two spaces: suffix
]


@pytest.mark.parametrize(("written", "sent"), REWRITES)
def test_each_rewrite_is_left_out_and_named_as_the_cell_holds_it(written, sent):
    text = f"import torch\n\n\n{sent}\nx = 1\n"
    program = lab_program(text)
    lines = program.text.split("\n")
    assert len(lines) == len(text.split("\n"))        # every line keeps its number
    assert lines[3].startswith("#") and lines[4] == "x = 1"
    ast.parse(program.text)
    (notice,) = program.notices
    # on line 1: jupyterlab-lsp shows no diagnostic on a line it rewrote, nor on a blank one
    assert (notice.line, notice.column, notice.end_column, notice.severity) == (1, 0, len("import torch"),
                                                                                 "information")
    assert notice.message.endswith(f"`{written}`")
    assert program.spans == ()                       # its lines are the document's own


def test_an_indented_rewrite_becomes_pass_so_its_block_stays_a_block():
    text = 'for i in range(3):\n    get_ipython().run_line_magic("time", " f(i)")\ny = 2\n'
    program = lab_program(text)
    assert program.text == "for i in range(3):\n    pass\ny = 2\n"
    assert "`%time f(i)`" in program.notices[0].message


def test_a_cell_magic_call_is_left_out_whole_and_an_unwrapped_one_keeps_its_body():
    # %%bash\necho hi\nls: run_cell_magic with the body in a triple-quoted string, one line fewer
    bash = 'get_ipython().run_cell_magic("bash", " -e", """echo hi\nls""")'
    # %%time\nz = 3 (MAGICS_TO_UNWRAP): comments around the body
    timed = '# START_CELL_MAGIC("time", "")\nz = 3\n# END_CELL_MAGIC'
    text = f"a = 1\n\n\n{bash}\n\n\n{timed}\n"
    program = lab_program(text)
    assert program.text == f"a = 1\n\n\n#et_ipython().run_cell_magic(\"bash\", \" -e\", \"\"\"echo hi\n\n\n\n{timed}\n"
    (notice,) = program.notices                      # one for the whole document
    assert notice.line == 1
    assert notice.message.endswith("`%%bash -e` (cell magic: the whole cell is left out), `%%time` (cell magic)")


def test_the_information_is_on_the_first_line_jupyterlab_lsp_shows_diagnostics_on():
    # a first cell with a magic, then an unwrapped %%time cell (all its lines silenced), then Python
    text = ('get_ipython().run_line_magic("matplotlib", " inline")\n\n\n'
            '# START_CELL_MAGIC("time", "")\nz = 3\n# END_CELL_MAGIC\n\n\n    y = 1\n')
    (notice,) = lab_program(text).notices
    assert (notice.line, notice.column, notice.end_column) == (9, 4, len("    y = 1"))
    assert notice.message.endswith("`%matplotlib inline`, `%%time` (cell magic)")


def test_a_body_holding_triple_quotes_ends_at_the_call_s_own():
    # the override escapes the body's """ as \"\"\": the first line ending in """) closes the call
    call = 'get_ipython().run_cell_magic("writefile", " a.py", """s = \\"\\"\\"doc\\"\\"\\"\nx = "a"""")'
    program = lab_program(f"{call}\nkept = 1\n")
    assert program.text.split("\n")[1:] == ["", "kept = 1", ""]


def test_python_that_only_mentions_get_ipython_is_untouched():
    text = ('ip = get_ipython()\nif ip: ip.run_line_magic("matplotlib", "inline")\n'
            's = """\nnot get_ipython().run_line_magic(\'pinfo\', x)\n"""\n')
    program = lab_program(text)
    assert program.text == text and program.notices == ()


def test_which_documents_stand_for_a_notebook_and_where_it_is():
    assert is_lab_notebook("/srv/.virtual_documents/nb.ipynb", "python")
    assert is_lab_notebook("/srv/nb.ipynb", "python")               # requires_documents_on_disk: false
    assert not is_lab_notebook("/srv/nb.ipynb", "json")             # an editor showing the JSON
    assert not is_lab_notebook("/srv/.virtual_documents/nb.ipynb", "r")
    assert notebook_path("/srv/.virtual_documents/sub/nb.ipynb") == "/srv/sub/nb.ipynb"
    assert notebook_path("/srv/nb.ipynb") == "/srv/nb.ipynb"
    # the innermost folder: a Jupyter root that is itself under such a folder
    assert notebook_path("/a/.virtual_documents/b/.virtual_documents/nb.ipynb") == "/a/.virtual_documents/b/nb.ipynb"
    assert in_virtual_folder("/srv/.virtual_documents/nb.ipynb.python-1(python).py")
    assert not in_virtual_folder("/srv/.virtual_documents")
