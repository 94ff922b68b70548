"""A Jupyter notebook through LSP 3.17 notebook synchronisation, end to end over stdio (pytest-lsp).

The client opens the four-cell notebook of ``notebook_files`` (imports; a block class; a factory
with a pragma; a cell with a magic) as VS Code does, one text document per cell, and gets the
hints on the lines of the cells where the code is, with the parameters and MACs derived by hand
there; one information for the magic; the hover of the block's layer; and, after cell 3 is edited
so that the factory raises (unsaved), the error on cell 3's line. A second client, one that pulls
diagnostics, gets the cells' diagnostics pushed all the same.
"""

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from notebook_files import BROKEN_FACTORY, CELLS, EXPECTED, cell_line, write_notebook

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])


def _capabilities(*, pull: bool = False) -> types.ClientCapabilities:
    capabilities = client_capabilities("neovim@v0.11")
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities())
    if pull:
        capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


def _cell_uri(path, index: int) -> str:
    """A cell's URI as VS Code names it: the notebook's path with the cell in the fragment."""
    return f"vscode-notebook-cell:{path}#W{index}sZmlsZQ%3D%3D"


async def _start(client: LanguageClient, root, *, pull: bool = False):
    client.root = root
    client.status = lsp.attach(client)
    client.set_configuration({"debounceMs": 50}, section="torchscan")
    client.initialized = await client.initialize_session(types.InitializeParams(
        capabilities=_capabilities(pull=pull), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    path = write_notebook(root / "nb.ipynb")
    client.notebook_uri = path.as_uri()
    client.cells = [_cell_uri(path, index) for index in range(len(CELLS))]
    since = client.status.mark()
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=client.notebook_uri, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=uri) for uri in client.cells]),
        cell_text_documents=[types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
                             for uri, text in zip(client.cells, CELLS)]))
    client.opened = await client.status.wait(client.notebook_uri, {"done", "failed"}, since)


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path_factory):
    await _start(lsp_client, tmp_path_factory.mktemp("notebook"))
    yield
    await lsp_client.shutdown_session()


async def _hints(client, cell: int) -> dict[int, list[str]]:
    """The hint labels of 1-based ``cell`` by 1-based line in it."""
    return lsp.labels_by_line(await lsp.hints(client, client.cells[cell - 1]))


async def test_the_server_offers_notebook_sync_for_jupyter_notebooks(client):
    sync = client.initialized.capabilities.notebook_document_sync
    (selector,) = sync.notebook_selector
    assert selector.notebook == "jupyter-notebook"
    assert "python" in {cell.language for cell in selector.cells}
    assert sync.save is True


async def test_hints_land_on_the_lines_of_their_cells(client):
    assert client.opened[0] == "done"
    # cell 2, the block: the class line, the layers it builds, the line of its forward
    assert await _hints(client, 2) == {
        cell_line(2, "class Block"): [EXPECTED["block"]],    # 16·32 + 32 = 544 params, 1,024 + 32 FLOPs
        cell_line(2, "self.fc ="): [EXPECTED["fc"]],
        cell_line(2, "self.act ="): [EXPECTED["act"]],
        cell_line(2, "return self.act"): [EXPECTED["forward"]],
    }
    # cell 3, the factory: 544 + 132 = 676 parameters, 512 + 128 = 640 MACs, 1,312 FLOPs
    assert await _hints(client, 3) == {
        cell_line(3, "def build_net"): [EXPECTED["target"]],
        cell_line(3, "nn.Sequential"): [EXPECTED["sequential"]],
    }
    assert await _hints(client, 1) == {} and await _hints(client, 4) == {}


async def test_the_magic_is_one_information_on_its_cell(client):
    (notice,) = client.diagnostics[client.cells[3]]
    assert notice.severity == types.DiagnosticSeverity.Information
    assert notice.range.start.line + 1 == cell_line(4, "%matplotlib")
    assert "`%matplotlib inline`" in notice.message and "left out" in notice.message
    # and nothing anywhere else: the numbers shown are complete
    assert all(list(client.diagnostics.get(uri, [])) == [] for uri in client.cells[:3])


async def test_hover_and_code_lens_on_cell_lines(client):
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=client.cells[1]),
        position=types.Position(line=cell_line(2, "self.fc =") - 1, character=12)))
    assert hover.range.start.line + 1 == cell_line(2, "self.fc =")
    assert "Parameters: 544 (544 trainable, 0 frozen, 2.12 KiB)" in hover.contents.value  # 544 float32 · 4 B
    assert "Input: (1, 16) → output: (1, 32)" in hover.contents.value
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=client.cells[2])))
    assert {lens.range.start.line + 1 for lens in lenses} == {cell_line(3, "def build_net")}
    assert lenses[0].command.title == EXPECTED["target"]
    # the lenses' commands name the notebook, whose target they run
    assert list(lenses[0].command.arguments[:2]) == [client.notebook_uri, "build_net"]
    other = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=client.cells[1])))
    assert list(other) == []


async def test_a_command_run_from_a_cell_analyses_its_notebook(client):
    # the Command Palette names the focused cell's document
    since = client.status.mark()
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchscan.reanalyze", arguments=[client.cells[2]]))
    assert (await client.status.wait(client.notebook_uri, {"done", "failed"}, since))[0] == "done"
    assert (await _hints(client, 3))[cell_line(3, "def build_net")] == [EXPECTED["target"]]


async def test_an_edited_cell_is_analysed_and_its_error_lands_on_the_cell(client):
    since = client.status.mark()
    old = CELLS[2]
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=client.notebook_uri, version=2),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=client.cells[2], version=2),
                changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line=0, character=0),
                                      end=types.Position(line=len(old.splitlines()), character=0)),
                    text=BROKEN_FACTORY)])]))))
    state, _ = await client.status.wait(client.notebook_uri, {"done", "failed"}, since)
    assert state == "failed"   # the unsaved cell ran: the file on disk still builds the model
    errors = {(d.range.start.line + 1, d.message) for d in client.diagnostics[client.cells[2]]
              if d.severity == types.DiagnosticSeverity.Error}
    raised = cell_line(3, "raise ValueError", [CELLS[0], CELLS[1], BROKEN_FACTORY])
    target = cell_line(3, "def build_net", [CELLS[0], CELLS[1], BROKEN_FACTORY])
    message = ("build_net: the factory raised while building the model: ValueError: no model for you "
               "(the hints shown are from the last successful analysis, marked stale)")
    assert errors == {(raised, message), (target, f"{message} (raised at nb.ipynb:cell 3:{raised})")}
    # the last good hints stay on the block's cell, marked stale
    assert (await _hints(client, 2))[cell_line(2, "self.fc =")] == [EXPECTED["fc"] + " (stale)"]
    assert list(client.diagnostics.get(client.cells[1], [])) == []
    (notice,) = client.diagnostics[client.cells[3]]   # the magic's information stays where it was
    assert notice.severity == types.DiagnosticSeverity.Information


@pytest_lsp.fixture(scope="module", config=SERVER)
async def pulling(lsp_client: LanguageClient, tmp_path_factory):
    await _start(lsp_client, tmp_path_factory.mktemp("notebook-pull"), pull=True)
    yield
    await lsp_client.shutdown_session()


async def test_a_pulling_client_gets_the_cells_diagnostics_pushed(pulling):
    # VS Code's language client 9 pulls no cell (vscode-languageserver-node issue 1464): the
    # cells' diagnostics are pushed, and a cell's pull is empty so that none shows twice
    client = pulling
    assert client.initialized.capabilities.diagnostic_provider is not None
    (notice,) = client.diagnostics[client.cells[3]]
    assert (notice.range.start.line + 1, notice.severity) == (cell_line(4, "%matplotlib"),
                                                              types.DiagnosticSeverity.Information)
    assert all(list(client.diagnostics.get(uri, [])) == [] for uri in client.cells[:3])
    reports = [await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri))) for uri in client.cells]
    assert [list(report.items) for report in reports] == [[], [], [], []]
