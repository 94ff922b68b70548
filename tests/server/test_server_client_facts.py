"""Client capabilities are resolved once, at ``initialize``, into the facts the features read."""

from lsprotocol import types

from torchscan_lsp.server.features import ClientFacts


def _params(capabilities: types.ClientCapabilities, name: str | None = "neovim") -> types.InitializeParams:
    info = types.ClientInfo(name=name) if name else None
    return types.InitializeParams(capabilities=capabilities, client_info=info)


def test_a_client_that_pulls_and_refreshes():
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(diagnostic=types.DiagnosticClientCapabilities()),
        workspace=types.WorkspaceClientCapabilities(
            configuration=True,
            diagnostics=types.DiagnosticWorkspaceClientCapabilities(refresh_support=True),
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
            code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=False),
        ),
        window=types.WindowClientCapabilities(work_done_progress=True,
                                              show_document=types.ShowDocumentClientCapabilities(support=True)),
    )
    facts = ClientFacts.resolve(_params(capabilities))
    assert facts == ClientFacts(name="neovim", pull_diagnostics=True, inlay_hint_refresh=True, code_lens_refresh=False,
                                work_done_progress=True, show_document=True, configuration=True)


def test_a_client_that_pulls_but_cannot_be_asked_again_gets_pushes():
    # analyses finish after the client's first pull: without refresh it would never see them
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(diagnostic=types.DiagnosticClientCapabilities()))
    facts = ClientFacts.resolve(_params(capabilities, name=None))
    assert facts.pull_diagnostics is False and facts.name is None
    assert ClientFacts.resolve(_params(types.ClientCapabilities())) == ClientFacts(name="neovim")


def test_the_vscode_extension_names_its_editor_whatever_the_application_calls_itself():
    # code-server, VSCodium and VS Code give their own clientInfo names; the advice is the same
    params = types.InitializeParams(capabilities=types.ClientCapabilities(),
                                    client_info=types.ClientInfo(name="code-server"),
                                    initialization_options={"trusted": False, "editor": "vscode"})
    assert ClientFacts.resolve(params).name == "vscode"
