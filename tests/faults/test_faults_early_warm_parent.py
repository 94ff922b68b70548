"""The warm parent of the server's own interpreter starts with the server, before ``initialize``,
and is stopped unused when the workspace is not trusted; a trusted workspace's first analysis runs
in a child of that same process (read from ``/proc``: parent pids and command lines)."""

import sys

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

import fault_support as faults
import lsp_support as lsp
from torchscan_lsp.worker import pool

pytestmark = pytest.mark.skipif(not pool.warm_starts_possible(), reason="warm workers need Linux with fork")


async def _start(root, trusted: bool):
    client = LanguageClient("torchscan-test", "0")
    log = lsp.attach(client)
    client.feature(types.WORKSPACE_CONFIGURATION)(lambda params: [{}] * len(params.items))
    client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(lambda params: None)
    await client.start_io(sys.executable, "-m", "torchscan_lsp", "serve")
    server = client._server.pid
    # before initialize: the server spawned it first thing
    assert await faults.until(lambda: len(faults.warm_parents(server)) == 1)
    early = faults.warm_parents(server)
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(configuration=True)),
        root_uri=root.as_uri(), initialization_options={"trusted": trusted}))
    client.initialized(types.InitializedParams())
    return client, log, server, early


async def _stop(client):
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def test_an_untrusted_workspace_stops_the_early_warm_parent(tmp_path):
    client, _, server, early = await _start(tmp_path, trusted=False)
    try:
        assert await faults.until(lambda: faults.warm_parents(server) == [])
    finally:
        await _stop(client)


async def test_a_trusted_workspace_analyses_in_a_child_of_the_early_warm_parent(tmp_path):
    path = lsp.write(tmp_path, "net.py", """
        import os
        import torch.nn as nn

        # torchscan: input_shape=(4,)
        def build():
            with open(os.path.join(os.path.dirname(__file__), "parent.txt"), "w") as out:
                out.write(str(os.getppid()))
            return nn.Linear(4, 2)
    """)
    client, log, server, early = await _start(tmp_path, trusted=True)
    try:
        state, _ = await log.wait(lsp.open_document(client, path), {"done", "failed"})
        assert state == "done"
        assert int((tmp_path / "parent.txt").read_text()) == early[0]
        assert faults.warm_parents(server) == early
    finally:
        await _stop(client)
