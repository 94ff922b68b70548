"""A server killed with SIGKILL while a job runs leaves no process behind: its warm parent and the
job die with it (parent-death signal), though nobody could clean up."""

import asyncio
import contextlib
import os
import signal
import sys

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

import fault_support as faults
import lsp_support as lsp


async def test_sigkill_leaves_no_orphans(tmp_path):
    root = faults.copy_models(tmp_path)
    client = LanguageClient()
    status = lsp.attach(client)
    client.set_configuration({**faults.LIMITS, "timeoutSeconds": 600}, section="torchscan")
    await client.start_io(sys.executable, "-m", "torchscan_lsp", "serve")
    try:
        await client.initialize_session(types.InitializeParams(
            capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
            initialization_options={"trusted": True}))
        server = client._server.pid
        lsp.open_document(client, root / "hang_for_kill.py")
        marker = root / "hang.pid"
        assert await faults.until(lambda: marker.exists() and marker.read_text().strip() != "")
        job = int(marker.read_text())
        parents = faults.warm_parents(server)
        left = [job, *parents, *faults.descendants(server)]
        assert faults.alive(job) and job in faults.descendants(server)
        os.kill(server, signal.SIGKILL)
        assert await faults.until(lambda: not any(faults.alive(p) for p in left), 30), \
            [p for p in left if faults.alive(p)]
        assert status.events  # the session had really started analysing
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.stop(), 10)
