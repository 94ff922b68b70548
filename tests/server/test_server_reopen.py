"""A reopened editor shows the results of unchanged targets at once (``torchscan.cacheResults``,
docs/server.md "Results kept between sessions"): two servers, one after the other, on one
workspace and one cache folder, the way a person closes and reopens the editor."""

import json
import os
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

import lsp_support as lsp


async def _session(root, settings: dict, path):
    """One server's life: initialize (``settings`` in the initialization options), open ``path``,
    wait for its analysis, shut down; returns the states the server reported for it and its hint
    labels by line."""
    client = LanguageClient()
    status = lsp.attach(client)
    await client.start_io(sys.executable, "-m", "torchscan_lsp", "serve")
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": True, "settings": settings}))
    uri = await lsp.analysed(client, status, path)
    labels = lsp.labels_by_line(await lsp.hints(client, uri))
    await client.shutdown_session()
    return [state for event_uri, state, _ in status.events if event_uri == uri], labels


async def test_a_reopened_editor_shows_unchanged_results_without_running_them(tmp_path):
    root = lsp.make_workspace(tmp_path)
    path = root / "conv.py"
    target = lsp.line_of(path, "def build_conv")
    # Conv2d(3, 8, 3) on (3, 32, 32): 8·27 + 8 = 224 parameters, 7,200 outputs · 27 = 194,400 MACs,
    # twice that in FLOPs
    expected = ["224 params · 194 kMACs · 389 kFLOPs"]

    states, labels = await _session(root, {}, path)
    assert "running" in states and labels[target] == expected        # the first time, a worker ran it

    states, labels = await _session(root, {}, path)
    assert "running" not in states and states[-1] == "done"           # the second, nothing ran
    assert labels[target] == expected

    path.write_text(path.read_text(encoding="utf-8").replace("nn.Conv2d(3, 8, 3)", "nn.Conv2d(3, 4, 3)"),
                    encoding="utf-8")
    states, labels = await _session(root, {}, path)                   # an edited file runs again:
    assert "running" in states                                        # 4·27 + 4 = 112 parameters
    assert labels[target][0].startswith("112 params")

    states, _ = await _session(root, {"cacheResults": False}, path)   # the setting off: always run
    assert "running" in states


async def test_a_kept_file_that_is_not_a_result_is_dropped_and_the_target_runs_again(tmp_path):
    root = lsp.make_workspace(tmp_path)
    path = root / "conv.py"
    target = lsp.line_of(path, "def build_conv")
    expected = ["224 params · 194 kMACs · 389 kFLOPs"]   # as in the test above
    results = Path(os.environ["XDG_CACHE_HOME"]) / "torchscan-lsp" / "results"
    before = set(results.glob("*.json")) if results.is_dir() else set()
    await _session(root, {}, path)
    (kept,) = set(results.glob("*.json")) - before
    # valid JSON that no analysis wrote (issue 20): its hints would read "? params · ? MACs · ? FLOPs"
    kept.write_text('{"variants": [{"result": {"ok": true}, "imported": {}}]}', encoding="utf-8")

    states, labels = await _session(root, {}, path)
    assert "running" in states and labels[target] == expected        # not taken: the target ran
    assert json.loads(kept.read_text(encoding="utf-8"))["variants"][0]["result"]["report"]["totals"]  # rewritten
    states, labels = await _session(root, {}, path)
    assert "running" not in states and labels[target] == expected    # and kept again
