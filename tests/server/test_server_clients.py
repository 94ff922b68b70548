"""Client variations: an untrusted workspace, a VS Code 1.65 client (no inlay hints, no pulls),
and a client that pulls diagnostics and accepts refresh requests. One short session each."""

import sys

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])


async def _start(client, tmp_path, capabilities, trusted, client_info=None, editor=None):
    root = lsp.make_workspace(tmp_path)
    client.root = root
    client.status = lsp.attach(client)
    client.set_configuration({}, section="torchscan")
    return await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=root.as_uri(), client_info=client_info,
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": trusted, **({"editor": editor} if editor else {})}))


@pytest_lsp.fixture(config=SERVER)
async def untrusted(lsp_client: LanguageClient, tmp_path):
    await _start(lsp_client, tmp_path, client_capabilities("neovim@v0.11"), trusted=False,
                 client_info=types.ClientInfo(name="Neovim", version="0.11.4"))
    yield
    await lsp_client.shutdown_session()


async def test_untrusted_workspace_runs_nothing_until_allowed(untrusted):
    client = untrusted
    path = client.root / "conv.py"
    uri = await lsp.analysed(client, client.status, path, states={"untrusted"})
    target = lsp.line_of(path, "def build_conv")
    found = client.diagnostics[uri]
    assert [(d.range.start.line + 1, d.severity) for d in found] == [(target, types.DiagnosticSeverity.Information)]
    # the client said it is Neovim: the advice names the Neovim plugin's option, and the setting
    assert "allow_execution = true in require('torchscan').setup" in found[0].message
    assert "torchscan.allowExecution" in found[0].message
    assert (await client.status.wait(uri, {"untrusted"}))[1] == "not analysed: the workspace is not trusted (allow_execution)"
    assert await lsp.hints(client, uri) == []
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lenses[0].command.title == "torchscan: not analysed (untrusted workspace)"

    # allowing execution in the settings analyses the open files
    since = client.status.mark()
    client.set_configuration({"allowExecution": True}, section="torchscan")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    state, _ = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done"
    # Conv2d(3, 8, 3) on (3, 32, 32): 224 parameters, 194,400 MACs, 388,800 FLOPs (see the session tests)
    assert lsp.labels_by_line(await lsp.hints(client, uri))[target] == ["224 params · 194 kMACs · 389 kFLOPs"]


@pytest_lsp.fixture(config=SERVER)
async def untrusted_vscode(lsp_client: LanguageClient, tmp_path):
    # as the VS Code extension starts it in code-server, whose application name is its own
    await _start(lsp_client, tmp_path, client_capabilities("neovim@v0.11"), trusted=False,
                 client_info=types.ClientInfo(name="code-server", version="1.139.1"), editor="vscode")
    yield
    await lsp_client.shutdown_session()


async def test_untrusted_vscode_is_told_to_trust_the_workspace(untrusted_vscode):
    client = untrusted_vscode
    path = client.root / "conv.py"
    uri = await lsp.analysed(client, client.status, path, states={"untrusted"})
    (found,) = client.diagnostics[uri]
    # VS Code ignores torchscan.allowExecution in an untrusted workspace: the advice is trust
    assert "Trust the workspace: click Restricted Mode in the status bar" in found.message
    assert "set torchscan.allowExecution" not in found.message and "allow_execution" not in found.message
    assert (await client.status.wait(uri, {"untrusted"}))[1] == (
        "not analysed: the workspace is not trusted (Manage Workspace Trust)")
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert [lens.command.title for lens in lenses] == ["torchscan: not analysed (untrusted workspace)"]


@pytest_lsp.fixture(config=SERVER)
async def vscode(lsp_client: LanguageClient, tmp_path):
    lsp_client.initialized = await _start(lsp_client, tmp_path, client_capabilities("visual-studio-code"), trusted=True)
    yield
    await lsp_client.shutdown_session()


async def test_vscode_client_gets_pushed_diagnostics_and_hovers(vscode):
    client = vscode
    assert client.initialized.capabilities.diagnostic_provider is None
    path = client.root / "factory_raises.py"
    uri = await lsp.analysed(client, client.status, path)
    errors = {d.range.start.line + 1 for d in client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error}
    assert errors == {lsp.line_of(path, "raise ValueError"), lsp.line_of(path, "def build_broken")}
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=lsp.line_of(path, "def build_broken") - 1, character=4)))
    assert "ValueError: no model for you" in hover.contents.value


def _pulling_capabilities() -> types.ClientCapabilities:
    capabilities = client_capabilities("neovim@v0.11")
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


@pytest_lsp.fixture(config=SERVER)
async def pulling(lsp_client: LanguageClient, tmp_path):
    lsp_client.initialized = await _start(lsp_client, tmp_path, _pulling_capabilities(), trusted=True)
    yield
    await lsp_client.shutdown_session()


async def test_pull_client_is_never_pushed(pulling):
    client = pulling
    assert client.initialized.capabilities.diagnostic_provider is not None
    path = client.root / "factory_raises.py"
    uri = await lsp.analysed(client, client.status, path)
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    errors = {d.range.start.line + 1 for d in report.items if d.severity == types.DiagnosticSeverity.Error}
    assert errors == {lsp.line_of(path, "raise ValueError"), lsp.line_of(path, "def build_broken")}
    assert client.diagnostics == {}   # nothing was pushed


@pytest_lsp.fixture(config=SERVER)
async def typing(lsp_client: LanguageClient, tmp_path):
    root = lsp.make_workspace(tmp_path)
    lsp_client.root = root
    lsp_client.status = lsp.attach(lsp_client)
    lsp_client.set_configuration({"analyzeOnType": True, "debounceMs": 50}, section="torchscan")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


async def test_analyse_on_type_analyses_the_unsaved_buffer(typing):
    client = typing
    path = client.root / "stale.py"
    uri = await lsp.analysed(client, client.status, path)
    target = lsp.line_of(path, "def build_small")
    edited = path.read_text().replace("nn.Linear(4, 2)", "nn.Linear(4, 3)")
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    state, _ = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done"
    # the buffer, not the file on disk: Linear(4, 3) has 4·3 + 3 = 15 parameters,
    # MACs 4·3 = 12, FLOPs 3·(2·4 − 1) + 3 = 24
    assert lsp.labels_by_line(await lsp.hints(client, uri))[target] == ["15 params · 12 MACs · 24 FLOPs"]
