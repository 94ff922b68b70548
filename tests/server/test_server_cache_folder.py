"""A cache folder the server cannot use (docs/server.md, "Results kept between sessions"): the user
is told once that results are not kept, and why; everything else works as ever: hints, and a file
changed on disk analysed again.

The server runs as the user would, in the folder layouts that fail: a read-only parent of the
cache folder, a home folder that cannot be written to (no ``XDG_CACHE_HOME``), ``XDG_CACHE_HOME``
naming a file, and a cache folder that exists but is read-only. Run as root, the server is started
without the capability to override file permissions (``setpriv``), so that read-only means
read-only for it too.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

import lsp_support as lsp

NOT_KEPT = "results are not kept between sessions"


def _without_permission_override() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: read-only folders would not be read-only")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def _read_only_parent(tmp_path, env):
    parent = tmp_path / "read-only"
    parent.mkdir()
    parent.chmod(0o555)
    env["XDG_CACHE_HOME"] = str(parent)
    return "cannot be created (Permission denied"


def _home_not_writable(tmp_path, env):
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    env.pop("XDG_CACHE_HOME", None)
    env["HOME"] = str(home)
    return "cannot be created (Permission denied"


def _cache_home_is_a_file(tmp_path, env):
    blocker = tmp_path / "cache-file"
    blocker.write_text("not a folder\n")
    env["XDG_CACHE_HOME"] = str(blocker)
    return "cannot be created (Not a directory"


def _read_only_cache_folder(tmp_path, env):
    results = tmp_path / "cache" / "torchscan-lsp" / "results"
    results.mkdir(parents=True)
    results.chmod(0o555)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return f"cannot write in {results} (Permission denied"


@pytest.mark.parametrize("layout", [_read_only_parent, _home_not_writable, _cache_home_is_a_file,
                                    _read_only_cache_folder], ids=lambda f: f.__name__.strip("_"))
async def test_results_not_kept_are_said_once_and_nothing_else_stops(tmp_path, layout, capfd):
    (tmp_path / "ws").mkdir()
    root = lsp.make_workspace(tmp_path / "ws")
    env = dict(os.environ)
    why = layout(tmp_path, env)
    client = LanguageClient()
    status = lsp.attach(client)
    shown: list[types.ShowMessageParams] = []
    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda params: shown.append(params))
    await client.start_io(*_without_permission_override(), sys.executable, "-m", "torchscan_lsp", "serve", env=env)
    try:
        await client.initialize_session(types.InitializeParams(
            capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
            initialization_options={"trusted": True}))
        path = root / "conv.py"
        uri = await lsp.analysed(client, status, path)
        line = lsp.line_of(path, "def build_conv")
        # Conv2d(3, 8, 3) on (3, 32, 32): 8·27 + 8 = 224 parameters, 7,200 outputs · 27 = 194,400 MACs
        assert lsp.labels_by_line(await lsp.hints(client, uri))[line] == ["224 params · 194 kMACs · 389 kFLOPs"]

        since = status.mark()                                   # the file changes on disk: watched still
        path.write_text(path.read_text(encoding="utf-8").replace("nn.Conv2d(3, 8, 3)", "nn.Conv2d(3, 4, 3)"),
                        encoding="utf-8")
        state, message = await status.wait(uri, {"done", "failed"}, since)
        assert state == "done", message                         # 4·27 + 4 = 112 parameters
        assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith("112 params")

        told = [m for m in shown if NOT_KEPT in m.message]
        assert len(told) == 1 and why in told[0].message, shown  # said once, with the reason
        assert told[0].type == types.MessageType.Warning
    finally:
        await client.shutdown_session()
    assert "torchscan server error" not in capfd.readouterr().err
