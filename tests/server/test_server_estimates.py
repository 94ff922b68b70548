"""The training estimate off the hint path (pytest-lsp as a Neovim 0.11 client): the forward's hints
are published while the estimate still runs, the estimate joins the hover and the diagnostics when
it is done, and it is reused while the model is unchanged.

The target is ``nn.Linear(4, 2)`` trained with SGD on a batch of 2 under a 100 B budget, as in
``test_server_training.py``, whose docstring derives its estimated peak by hand: 136 B, over the
budget by 36 B. Its factory writes one line to a log per call and, from its second call on, waits
while a hold file exists: the forward job calls the factory once (to build the model it analyses),
the estimate job twice (the model it checks the options on, then the model it estimates), so the
hold stops the estimate and nothing else, for as long as the test wants and no longer.
"""

import asyncio
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from lsp_support import analysed, hints, line_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])

MODEL = '''
    import os
    import time

    import torch.nn as nn

    CALLS = {calls!r}
    HOLD = {hold!r}


    # torchscan: input_shape=(4,), train={{"optimizer": "sgd", "batch": 2}}, train_memory="100 B"
    def build_linear():
        with open(CALLS, "a+", encoding="utf-8") as log:
            log.seek(0)
            earlier = len(log.read().splitlines())
            log.write("call\\n")
        deadline = time.monotonic() + 60
        while earlier and os.path.exists(HOLD) and time.monotonic() < deadline:
            time.sleep(0.05)
        return nn.Linear(4, {outputs})
'''
BUDGET_WARNING = ("build_linear: the training step's estimated peak, 136 B (in the backward), exceeds the memory "
                  "budget of 100 B; largest: parameters 40 B, temporaries 40 B, inputs 32 B.")
ESTIMATING = "estimating the training step of build_linear"


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, request):
    factory = request.getfixturevalue("tmp_path_factory")
    root, outside = factory.mktemp("estimate_ws"), factory.mktemp("estimate_gate")
    lsp_client.root, lsp_client.calls, lsp_client.hold = root, outside / "calls.txt", outside / "hold"
    lsp_client.status = lsp.attach(lsp_client)
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


def _write(client, outputs: int, comment: str = "") -> Path:
    return lsp.write(client.root, "linear.py", MODEL.format(calls=str(client.calls), hold=str(client.hold),
                                                            outputs=outputs) + comment)


def _calls(client) -> int:
    return len(client.calls.read_text(encoding="utf-8").splitlines())


async def _until(condition, timeout_s: float = lsp.ANALYSIS_TIMEOUT_S) -> None:
    """Wait until ``condition()`` holds (a job reached a point), checking every 50 ms."""
    async def poll():
        while not condition():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout_s)


def _estimates_started(client) -> int:
    return sum(1 for reports in client.progress_reports.values()
               if any(isinstance(r, types.WorkDoneProgressBegin) and r.message == ESTIMATING for r in reports))


async def _hover(client, uri, line):
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line - 1, character=5)))
    return hover.contents.value


def _warnings(client, uri):
    return [d.message for d in client.diagnostics.get(uri, []) if d.severity == types.DiagnosticSeverity.Warning]


async def _save(client, path: Path, uri: str, version: int) -> None:
    since = client.status.mark()
    text = path.read_text(encoding="utf-8")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.status.wait(uri, {"done", "failed"}, since, estimated=True)


async def test_hints_come_before_the_estimate_which_joins_them_when_done(client):
    client.hold.write_text("", encoding="utf-8")
    path = _write(client, 2)
    uri = await analysed(client, client.status, path)  # the forward's result: the estimate is held
    target = line_of(path, "def build_linear")
    state, message = client.status.events[-1][1:]
    assert state == "done" and ESTIMATING in message
    # the hints are there: Linear(4, 2) has 4 * 2 + 2 = 10 parameters
    assert any("10 params" in str(h.label) for h in await hints(client, uri))
    card = await _hover(client, uri, target)
    assert "the estimate is running" in card and "| forward |" not in card
    assert BUDGET_WARNING not in _warnings(client, uri)  # no warning from an estimate not finished
    await _until(lambda: _calls(client) == 2)  # the forward job's build, and the estimate job's first, held
    assert "the estimate is running" in await _hover(client, uri, target)
    assert client.status.events[-1][1:] == (state, message)
    since = client.status.mark()
    client.hold.unlink()
    await client.status.wait(uri, {"done"}, since, estimated=True)
    assert _calls(client) == 3  # and the estimate job's second build: the estimated model
    assert _estimates_started(client) == 1
    card = await _hover(client, uri, target)
    assert "the estimate is running" not in card
    assert "Budget 100 B (estimated peak): over by 36 B." in card
    assert _warnings(client, uri) == [BUDGET_WARNING]


async def test_a_comment_edit_reuses_the_estimate(client):
    path = client.root / "linear.py"
    uri = await analysed(client, client.status, path, estimated=True)
    target = line_of(path, "def build_linear")
    before = _calls(client)
    _write(client, 2, "    # only a comment changed\n")
    await _save(client, path, uri, 2)
    assert _calls(client) == before + 1  # the forward job alone built the model
    assert _estimates_started(client) == 1
    assert "Budget 100 B (estimated peak): over by 36 B." in await _hover(client, uri, target)
    assert _warnings(client, uri) == [BUDGET_WARNING]


async def test_a_changed_model_is_estimated_again(client):
    path = client.root / "linear.py"
    uri = await analysed(client, client.status, path, estimated=True)
    target = line_of(path, "def build_linear")
    before, started = _calls(client), _estimates_started(client)
    _write(client, 1)  # Linear(4, 1): P = (4 + 1) * 4 = 20 B, under the 100 B budget now
    await _save(client, path, uri, 3)
    assert _calls(client) == before + 3  # the forward job's build and the estimate job's two
    assert _estimates_started(client) == started + 1
    card = await _hover(client, uri, target)
    assert "| parameters | 20 B | — |" in card
    assert not [w for w in _warnings(client, uri) if "memory budget" in w]
