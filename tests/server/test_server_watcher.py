"""Files changed on disk outside the editor re-analyse the targets that imported them."""

import sys

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])

USER = '''
    import torch.nn as nn

    from widths import WIDTH


    # torchscan: input_shape=(4,)
    def build_wide():
        return nn.Linear(4, WIDTH)
'''


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path):
    lsp_client.root = tmp_path
    lsp_client.status = lsp.attach(lsp_client)
    lsp_client.set_configuration({}, section="torchscan")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=tmp_path.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


async def test_dependency_changed_on_disk_is_reanalysed(client):
    lsp.write(client.root, "widths.py", "WIDTH = 2\n")
    path = lsp.write(client.root, "wide.py", USER)
    uri = await lsp.analysed(client, client.status, path)
    line = lsp.line_of(path, "def build_wide")
    # nn.Linear(4, 2): 8 weights + 2 biases
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith("10 params")

    # a generator (or a git checkout) rewrites the imported file; the editor never sees it
    since = client.status.mark()
    lsp.write(client.root, "widths.py", "WIDTH = 3\n")
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    # nn.Linear(4, 3): 12 weights + 3 biases
    assert state == "done" and "15 params" in message, message
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith("15 params")
