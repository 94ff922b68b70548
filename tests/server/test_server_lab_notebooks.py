"""A notebook as JupyterLab's jupyterlab-lsp sends it, end to end over stdio (pytest-lsp).

jupyterlab-lsp opens one Python text document per notebook, its virtual document: the code cells
joined with two blank lines, ``%matplotlib inline`` rewritten into a ``get_ipython()`` call, at
``.virtual_documents/sub/nb.ipynb`` under the Jupyter server's root for ``sub/nb.ipynb`` (or at the
notebook's own URI, when the server's spec says ``requires_documents_on_disk: false``). The client
here opens the four-cell notebook of ``notebook_files`` so, and gets the hints and the hover on the
document's lines, the parameters and MACs derived by hand there, and one information for the magic;
an edit whose factory raises is an error on the document's lines; nothing writes the virtual document to disk, which the server never reads. A second notebook
imports its block from ``blocks.py`` beside it: the import works (the job's folder is the
notebook's), an edit of the document analyses it, and ``blocks.py`` rewritten on disk re-analyses it.
"""

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from notebook_files import BROKEN_FACTORY, CELLS, EXPECTED, lab_document, lab_line, write_notebook

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])

MAGIC = 'get_ipython().run_line_magic("matplotlib", " inline")'
"""jupyterlab-lsp's rewrite of cell 4's ``%matplotlib inline`` (its line-magic override)."""


async def _start(client: LanguageClient, root) -> None:
    client.root = root
    client.status = lsp.attach(client)
    client.set_configuration({"debounceMs": 50}, section="torchscan")
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
        initialization_options={"trusted": True}))


async def _open(client: LanguageClient, uri: str, notebook, text: str) -> tuple[str, str]:
    """Open ``text`` at ``uri`` as jupyterlab-lsp does (language ``python``) and wait for the
    analysis of ``notebook``, the file it stands for."""
    since = client.status.mark()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=text)))
    return await client.status.wait(notebook.as_uri(), {"done", "failed"}, since)


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    await _start(lsp_client, root)
    (root / "sub").mkdir()
    lsp_client.notebook = write_notebook(root / "sub" / "nb.ipynb")
    lsp_client.uri = from_fs_path(str(root / ".virtual_documents" / "sub" / "nb.ipynb"))
    lsp_client.opened = await _open(lsp_client, lsp_client.uri, lsp_client.notebook, lab_document())
    yield
    await lsp_client.shutdown_session()


async def test_the_virtual_document_is_the_notebook_joined_as_jupyterlab_lsp_joins_it(client):
    text = lab_document()
    lines = text.splitlines()
    # cell 1 (2 lines), 2 blank lines, cell 2 from line 5; the rewritten magic is cell 4's first line
    assert lines[2:4] == ["", ""] and lines[4] == "class Block(nn.Module):"
    assert lines[lab_line(4, "%matplotlib") - 1] == MAGIC
    assert not (client.root / ".virtual_documents").exists()  # the server needs no copy on disk


async def test_hints_land_on_the_lines_of_the_virtual_document(client):
    assert client.opened[0] == "done", client.opened
    found = lsp.labels_by_line(await lsp.hints(client, client.uri))
    assert found == {
        lab_line(2, "class Block"): [EXPECTED["block"]],       # 16·32 + 32 = 544 params, 1,024 + 32 FLOPs
        lab_line(2, "self.fc ="): [EXPECTED["fc"]],
        lab_line(2, "self.act ="): [EXPECTED["act"]],
        lab_line(2, "return self.act"): [EXPECTED["forward"]],
        lab_line(3, "def build_net"): [EXPECTED["target"]],    # 544 + 132 params, 512 + 128 MACs
        lab_line(3, "nn.Sequential"): [EXPECTED["sequential"]],
    }
    assert "676 params" in client.opened[1] and "640 MACs" in client.opened[1]


async def test_the_rewritten_magic_is_one_information_and_nothing_else_is_said(client):
    (notice,) = client.diagnostics[client.uri]
    assert notice.severity == types.DiagnosticSeverity.Information
    # on the first line: jupyterlab-lsp drops any diagnostic on a line it rewrote (cell 4's first)
    assert (notice.range.start.line, notice.range.start.character, notice.range.end.character) == (
        0, 0, len("import torch"))
    assert "`%matplotlib inline`" in notice.message and "left out" in notice.message
    assert list(client.diagnostics.get(client.notebook.as_uri(), [])) == []  # none to the notebook's URI


async def test_hover_on_a_layer_of_the_virtual_document(client):
    line = lab_line(2, "self.fc =")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=client.uri),
        position=types.Position(line=line - 1, character=12)))
    assert hover.range.start.line + 1 == line
    assert "Parameters: 544 (544 trainable, 0 frozen, 2.12 KiB)" in hover.contents.value  # 544 float32 · 4 B
    assert "Input: (1, 16) → output: (1, 32)" in hover.contents.value


async def test_a_factory_that_raises_is_an_error_on_its_lines_of_the_virtual_document(client):
    cells = [CELLS[0], CELLS[1], BROKEN_FACTORY, CELLS[3]]
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=client.uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=lab_document(cells))]))
    state, _ = await client.status.wait(client.notebook.as_uri(), {"done", "failed"}, since)
    assert state == "failed"   # the edit, unsaved, ran: the file on disk still builds the model
    errors = {(d.range.start.line + 1, d.message) for d in client.diagnostics[client.uri]
              if d.severity == types.DiagnosticSeverity.Error}
    raised, target = lab_line(3, "raise ValueError", cells), lab_line(3, "def build_net", cells)
    message = ("build_net: the factory raised while building the model: ValueError: no model for you "
               "(the hints shown are from the last successful analysis, marked stale)")
    # a message names the document's line: the server does not know the cells
    assert errors == {(raised, message), (target, f"{message} (raised at sub/nb.ipynb:{raised})")}


BESIDE = ["import torch.nn as nn\n\nfrom blocks import WIDTH, Block\n",
          "# torchscan: input_shape=(16,)\ndef build_net():\n    return nn.Sequential(Block(), nn.Linear(WIDTH, 4))\n"]
"""A notebook whose block is in ``blocks.py`` beside it, imported as its kernel (started in the
notebook's folder) imports it."""

BLOCKS = '''
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, WIDTH)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x))


    WIDTH = 32
'''


async def test_a_module_beside_the_notebook_is_imported_edits_and_its_changes_analyse(client):
    folder = client.root / "beside"
    folder.mkdir()
    lsp.write(folder, "blocks.py", BLOCKS)
    notebook = write_notebook(folder / "nb.ipynb", BESIDE)
    # the notebook's own URI: jupyterlab-lsp's with "requires_documents_on_disk": false
    uri = notebook.as_uri()
    state, message = await _open(client, uri, notebook, lab_document(BESIDE))
    # Linear(16, 32) + Linear(32, 4): 544 + 132 = 676 parameters
    assert state == "done" and "676 params" in message, message
    line = lab_line(2, "def build_net", BESIDE)
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line] == [EXPECTED["target"]]

    # an edit of the document, never saved: Linear(32, 8) has 32·8 + 8 = 264 parameters
    since = client.status.mark()
    edited = [BESIDE[0], BESIDE[1].replace("nn.Linear(WIDTH, 4)", "nn.Linear(WIDTH, 8)")]
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=lab_document(edited))]))
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done" and "808 params" in message, message   # 544 + 264

    # blocks.py rewritten on disk, the edit kept: Linear(16, 64) has 16·64 + 64 = 1,088 parameters,
    # Linear(64, 8) 64·8 + 8 = 520: 1,608 in all
    since = client.status.mark()
    lsp.write(folder, "blocks.py", BLOCKS.replace("WIDTH = 32", "WIDTH = 64"))
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done" and "1.61k params" in message, message
