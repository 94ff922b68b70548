"""Fault injection: one model file per fault (tests/faults/models), one server for all of them.

Each test asserts that the server survives (it still answers), publishes the expected diagnostic on
the expected line, keeps the last good result of another target (``good.py``), and leaves no job
process behind. The server runs with short limits (3 s, 1 GiB: :data:`fault_support.LIMITS`).
"""

import asyncio
import os
import signal
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import fault_support as faults
import lsp_support as lsp

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])

GOOD_LABEL = "10 params"  # nn.Linear(4, 2): 4·2 weights + 2 biases


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, request):
    root = faults.copy_models(request.getfixturevalue("tmp_path_factory").mktemp("faults"))
    lsp_client.root = root
    lsp_client.status = lsp.attach(lsp_client)
    lsp_client.set_configuration(dict(faults.LIMITS), section="torchscan")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"),
        root_uri=root.as_uri(), workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="faults")],
        initialization_options={"trusted": True}))
    lsp_client.server_pid = lsp_client._server.pid
    uri = await lsp.analysed(lsp_client, lsp_client.status, root / "good.py")
    assert lsp_client.status.events[-1][1] == "done", lsp_client.status.events[-1]
    lsp_client.good_uri = uri
    yield
    await lsp_client.shutdown_session()


async def _analyse(client, name: str) -> tuple[str, str, str]:
    """Open ``name`` and wait for its analysis; returns its URI, final state and status message."""
    path = client.root / name
    uri = await lsp.analysed(client, client.status, path)
    state, message = next((s, m) for u, s, m in reversed(client.status.events) if u == uri and s in ("done", "failed"))
    return uri, state, message


async def _survived(client) -> None:
    """The server answers, the good target keeps its hints, and no job process is left."""
    found = lsp.labels_by_line(await lsp.hints(client, client.good_uri))
    line = lsp.line_of(client.root / "good.py", "def build_good")
    assert any(label.startswith(GOOD_LABEL) for label in found.get(line, [])), found
    assert await faults.until(lambda: not faults.job_processes(client.server_pid)), \
        faults.describe(faults.job_processes(client.server_pid))


@pytest.mark.parametrize("name, marker, expected", [
    ("loop_factory.py", "the hang", "analysis stopped after 3 s"),
    ("loop_forward.py", "the hang", "analysis stopped after 3 s"),
    # one allocation of more than the limit: refused at once, and named with its size
    ("memory_huge.py", "64 GiB", "an allocation of 64.0 GiB was refused, more than the 1 GiB memory limit"),
    ("memory_grow.py", "32 MiB each", "analysis used more than 1 GiB"),
    ("segfault.py", "the crash", "SIGSEGV"),
    ("abort.py", "the abort", "SIGABRT"),
    ("sys_exit.py", "the exit", "SystemExit"),
    ("interrupt.py", "the interrupt", "KeyboardInterrupt"),
    ("missing_package.py", "the import", "No module named 'torchscan_no_such_package'"),
])
async def test_fault_is_a_diagnostic_on_its_line(client, name, marker, expected):
    uri, state, message = await _analyse(client, name)
    assert state == "failed", message
    line = lsp.line_of(client.root / name, marker)
    assert any(expected in m for m in faults.diagnostics_at(client, uri, line)), client.diagnostics.get(uri)
    await _survived(client)


async def test_os_exit_is_a_crash_on_the_target(client):
    uri, state, message = await _analyse(client, "os_exit.py")
    assert state == "failed"
    line = lsp.line_of(client.root / "os_exit.py", "def build")
    assert any("exit status 3" in m for m in faults.diagnostics_at(client, uri, line)), client.diagnostics.get(uri)
    await _survived(client)


@pytest.mark.parametrize("name, label", [
    ("prints.py", "15 params"),    # nn.Linear(4, 3): 12 + 3
    ("fd_write.py", "25 params"),  # nn.Linear(4, 5): 20 + 5
])
async def test_output_never_reaches_the_protocol(client, name, label):
    # Megabytes on stdout, and protocol-looking bytes on fd 1: the session goes on unharmed.
    uri, state, message = await _analyse(client, name)
    assert state == "done", message
    line = lsp.line_of(client.root / name, "def build")
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith(label)
    await _survived(client)


async def test_circular_import(client):
    uri, state, message = await _analyse(client, "circular_a.py")
    assert state == "failed"
    cycle = lsp.line_of(client.root / "circular_b.py", "the cycle")
    line = lsp.line_of(client.root / "circular_a.py", "def build")
    found = faults.diagnostics_at(client, uri, line)
    assert any("circular import" in m and f"circular_b.py:{cycle}" in m for m in found), client.diagnostics.get(uri)
    await _survived(client)


async def test_syntax_error(client):
    path = client.root / "syntax_error.py"
    uri = lsp.open_document(client, path)
    line = lsp.line_of(path, "def build(")
    assert await faults.until(lambda: any("syntax" in m.lower() for m in faults.diagnostics_at(client, uri, line)))
    await _survived(client)


async def test_file_deleted_while_its_job_runs(client):
    path = client.root / "deleted.py"
    line = lsp.line_of(path, "import deleted_helper")
    since = client.status.mark()
    uri = lsp.open_document(client, path)
    assert await faults.until(lambda: (client.root / "deleted.started").exists())
    (client.root / "deleted_helper.py").unlink()
    path.unlink()
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "failed"
    assert any("No module named 'deleted_helper'" in m for m in faults.diagnostics_at(client, uri, line)), \
        client.diagnostics.get(uri)
    await _survived(client)


def _write_latin1(path, source: str) -> None:
    path.write_bytes(source.encode("latin-1"))


async def test_non_utf8_file_open_in_the_editor(client):
    # The editor decodes the file itself; the server analyses its buffer.
    path = client.root / "latin1.py"
    _write_latin1(path, "# caf\xe9 au lait\nimport torch.nn as nn\n\n\n# torchscan: input_shape=(4,)\n"
                        "def build():\n    return nn.Linear(4, 2)\n")
    uri = from_fs_path(str(path))
    since = client.status.mark()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=path.read_bytes().decode("latin-1"))))
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done" and "10 params" in message, message
    await _survived(client)


async def test_non_utf8_file_imported(client):
    # Python cannot import a file that is not UTF-8 and declares no encoding: the error names it.
    _write_latin1(client.root / "latin1_helper.py", 'GREETING = "caf\xe9"\nWIDTH = 2\n')
    uri, state, message = await _analyse(client, "latin1_user.py")
    assert state == "failed"
    line = lsp.line_of(client.root / "latin1_user.py", "def build")
    found = faults.diagnostics_at(client, uri, line)
    assert any("can't decode byte 0xe9" in m and "latin1_helper.py:1" in m for m in found), client.diagnostics.get(uri)
    await _survived(client)


async def test_fifty_megabyte_file(client):
    # Scanning runs on the server's event loop: a file this long is skipped, with a warning.
    path = client.root / "huge.py"
    head = "import torch.nn as nn\n\n\n# torchscan: input_shape=(4,)\ndef build():\n    return nn.Linear(4, 6)\n"
    padding = ("# " + "padding " * 12 + "\n") * (50 * 1024 * 1024 // 99)
    path.write_text(head + padding, encoding="utf-8")
    assert path.stat().st_size >= 50 * 1000 * 1000
    uri = lsp.open_document(client, path)
    assert await faults.until(lambda: any("skips files over 5 million characters" in m
                                          for m in faults.diagnostics_at(client, uri, 1)))
    await _survived(client)


async def test_hundred_saves_in_a_second(client):
    path = client.root / "burst.py"
    template = path.read_text(encoding="utf-8")
    uri, state, message = await _analyse(client, "burst.py")
    assert state == "done", message
    peak, peak_seen = 0, []
    sampling = True

    async def sample():
        nonlocal peak, peak_seen
        while sampling:
            running = faults.jobs(client.server_pid)
            if len(running) > peak:
                peak, peak_seen = len(running), faults.describe(running)
            await asyncio.sleep(0.005)

    sampler = asyncio.ensure_future(sample())
    since = client.status.mark()
    for version in range(2, 102):
        text = template.replace("nn.Linear(4, 1000)", f"nn.Linear(4, {version - 1})")
        # saved as editors save: a reader never sees a half-written file
        path.with_suffix(".tmp").write_text(text, encoding="utf-8")
        os.replace(path.with_suffix(".tmp"), path)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        await asyncio.sleep(0.01)
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    sampling = False
    await sampler
    assert state == "done" and "500 params" in message, message  # nn.Linear(4, 100): 400 + 100
    done = [m for u, s, m in client.status.events[since:] if u == uri and s == "done"]
    assert done == [message]  # only the last save's result was published
    assert peak == 1, peak_seen  # jobs were seen, never two of one target at once
    await _survived(client)



async def test_dead_warm_parent_is_restarted(client):
    before = faults.warm_parents(client.server_pid)
    assert before
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    uri, state, message = await _analyse(client, "after_restart.py")
    assert state == "done" and "35 params" in message, message  # nn.Linear(4, 7): 28 + 7
    after = faults.warm_parents(client.server_pid)
    assert after and not set(after) & set(before)
    await _survived(client)
