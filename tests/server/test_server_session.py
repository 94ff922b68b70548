"""The language server end to end, driven by pytest-lsp as a Neovim 0.11 client (trusted
workspace, pushed diagnostics: Neovim 0.11 pulls but cannot be asked to pull again).

Every file of :data:`lsp_support.MODELS` runs through a real worker; the expected labels are
derived by hand below.
"""

import asyncio
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from lsp_support import analysed, hints, labels_by_line, line_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


# Reports written by "Show report" land in a cache folder of the tests' own, not the user's.
CACHE = Path(tempfile.gettempdir()) / "torchscan-lsp-test-cache"
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"],
                            server_env={**os.environ, "XDG_CACHE_HOME": str(CACHE)})


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, request):
    root = lsp.make_workspace(request.getfixturevalue("tmp_path_factory").mktemp("ws"))
    lsp_client.root = root
    lsp_client.status = lsp.attach(lsp_client)
    lsp_client.set_configuration({"maxWorkers": 2}, section="torchscan")
    lsp_client.initialized = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"),
        root_uri=root.as_uri(), workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


def _diagnostics(client, uri):
    return [(d.range.start.line + 1, d.severity, d.message) for d in client.diagnostics.get(uri, [])]


async def test_capabilities_push_diagnostics_for_neovim(client):
    capabilities = client.initialized.capabilities
    # Neovim 0.11 advertises no workspace/diagnostic/refresh: the server must not offer pulls
    # (Neovim would then show every pushed diagnostic twice), and pushes instead.
    assert capabilities.diagnostic_provider is None
    assert capabilities.inlay_hint_provider and capabilities.hover_provider and capabilities.code_lens_provider
    assert set(capabilities.execute_command_provider.commands) == {
        "torchscan.reanalyze", "torchscan.showReport", "torchscan.measureLatency", "torchscan.measureMemory",
        "torchscan.measureTraining", "torchscan.planTraining", "torchscan.compareReport"}


async def test_conv_hints_hover_lenses(client):
    path = client.root / "conv.py"
    uri = await analysed(client, client.status, path)
    # Conv2d(3, 8, 3) on (1, 3, 32, 32): output (1, 8, 30, 30) = 7200 elements;
    # parameters 8·3·3·3 + 8 = 224; FLOPs 7200·(2·27 − 1 + 1) = 388,800 → "389 kFLOPs";
    # MACs 7200·27 = 194,400 → "194 kMACs".
    by_line = labels_by_line(await hints(client, uri))
    target = line_of(path, "def build_conv")
    assert by_line[target] == ["224 params · 194 kMACs · 389 kFLOPs"]
    # the line that built the model has its parameters and FLOPs too (the totals, with the MACs, are
    # on the target line)
    assert by_line[line_of(path, "return nn.Conv2d")] == ["224 params · 389 kFLOPs"]

    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=target - 1, character=4)))
    assert "Parameters: 224 (224 trainable, 0 frozen, 896 B)" in hover.contents.value   # 224 · 4 bytes
    # both methods agree here: the dispatcher's convolution is 2·194,400 = 388,800 FLOPs too
    assert "| **dispatched operators** (shown) | 389 kFLOPs | 194 kMACs | — |" in hover.contents.value
    assert "| module formulas | 389 kFLOPs | 194 kMACs |" in hover.contents.value

    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert [lens.command.title for lens in lenses] == [
        "224 params · 194 kMACs · 389 kFLOPs", "Re-analyse", "Show report", "Measure latency", "Measure memory",
        "Measure training step", "Plan training"]
    assert all(lens.range.start.line == target - 1 for lens in lenses)
    assert not [d for d in _diagnostics(client, uri) if d[1] == types.DiagnosticSeverity.Error]


async def test_net_definition_and_call_hints(client):
    path = client.root / "net.py"
    uri = await analysed(client, client.status, path)
    by_line = labels_by_line(await hints(client, uri))
    # conv: Conv2d(3, 4, 3, padding=1) on (1, 3, 8, 8) → (1, 4, 8, 8) = 256 elements;
    #   parameters 4·27 + 4 = 112; FLOPs 256·54 = 13,824; MACs 256·27 = 6,912.
    # flat: 0 FLOPs, 0 MACs.  head: Linear(256, 8): parameters 2,056; FLOPs 8·(2·256 − 1) + 8 = 4,096;
    #   MACs 2,048.  blocks: 3 × Linear(8, 8): parameters 3·72 = 216; FLOPs 3·128 = 384; MACs 3·64 = 192.
    # Totals: 112 + 2,056 + 216 = 2,384 parameters; MACs 6,912 + 2,048 + 192 = 9,152;
    #   FLOPs 13,824 + 4,096 + 384 = 18,304.
    assert by_line[line_of(path, "class Net")] == ["2.38k params · 9.15 kMACs · 18.3 kFLOPs"]
    assert by_line[line_of(path, "self.conv =")] == ["112 params · 13.8 kFLOPs"]
    assert by_line[line_of(path, "self.flat =")] == ["0 params · 0 FLOPs"]
    assert by_line[line_of(path, "self.head =")] == ["2.06k params · 4.10 kFLOPs"]
    assert by_line[line_of(path, "self.blocks =")] == ["×3 · 216 params · 384 FLOPs"]
    assert by_line[line_of(path, "self.fc =")] == ["×3 · 216 params · 384 FLOPs"]
    # calls: conv then flat on one line, the line's value is flat's output (1, 4·8·8 = 256)
    assert by_line[line_of(path, "x = self.flat(self.conv(x))")] == ["→ (1, 256)"]
    assert by_line[line_of(path, "x = self.head(x)")] == ["→ (1, 8)"]
    assert by_line[line_of(path, "x = block(x)")] == ["→ (1, 8)"]
    assert by_line[line_of(path, "return self.fc(x)")] == ["→ (1, 8)"]

    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line_of(path, "self.fc =") - 1, character=10)))
    text = hover.contents.value
    assert "### Linear ×3" in text and "`blocks.0.fc`, `blocks.1.fc`, `blocks.2.fc`" in text
    assert "Parameters: 216 (216 trainable, 0 frozen, 864 B)" in text   # 216 float32 = 864 bytes


async def test_factory_raising_points_at_the_raise(client):
    path = client.root / "factory_raises.py"
    uri = await analysed(client, client.status, path)
    errors = [d for d in _diagnostics(client, uri) if d[1] == types.DiagnosticSeverity.Error]
    assert {line for line, _, _ in errors} == {line_of(path, "raise ValueError"), line_of(path, "def build_broken")}
    assert all("ValueError: no model for you" in message for _, _, message in errors)


async def test_forward_failing_on_shape(client):
    path = client.root / "bad_shape.py"
    uri = await analysed(client, client.status, path)
    errors = [d for d in _diagnostics(client, uri) if d[1] == types.DiagnosticSeverity.Error]
    # the innermost workspace frame of the traceback: the forward line that called Linear(10, 4) on (1, 3)
    assert line_of(path, "return self.fc(x)") in {line for line, _, _ in errors}
    assert any("input_shape" in message and "RuntimeError" in message for _, _, message in errors)


async def test_import_failing(client):
    path = client.root / "bad_import.py"
    uri = await analysed(client, client.status, path)
    errors = [d for d in _diagnostics(client, uri) if d[1] == types.DiagnosticSeverity.Error]
    assert line_of(path, "import not_a_real_module") in {line for line, _, _ in errors}
    assert any("ModuleNotFoundError" in message for _, _, message in errors)


async def test_bad_pragma_and_syntax_error(client):
    for name, marker, words in (("bad_pragma.py", "# torchscan:", "colour"), ("syntax.py", "def build(:", "")):
        path = client.root / name
        uri = lsp.open_document(client, path)
        for _ in range(100):  # the scan is synchronous; the push follows the didOpen at once
            if client.diagnostics.get(uri):
                break
            await asyncio.sleep(0.05)
        found = _diagnostics(client, uri)
        assert line_of(path, marker) in {line for line, _, _ in found}, found
        assert any(words in message for _, _, message in found)


async def test_broken_edit_keeps_stale_hints(client):
    path = client.root / "stale.py"
    uri = await analysed(client, client.status, path)
    # Linear(4, 2): parameters 4·2 + 2 = 10; FLOPs 2·(2·4 − 1) + 2 = 16; MACs 4·2 = 8
    target = line_of(path, "def build_small")
    assert labels_by_line(await hints(client, uri))[target] == ["10 params · 8 MACs · 16 FLOPs"]

    broken = path.read_text().replace("return nn.Linear(4, 2)", "raise RuntimeError('half-way through an edit')")
    path.write_text(broken)
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=broken)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.status.wait(uri, {"failed"}, since)

    kept = [h for h in await hints(client, uri) if h.position.line + 1 == target]
    assert [h.label for h in kept] == ["10 params · 8 MACs · 16 FLOPs (stale)"]
    assert "Stale" in kept[0].tooltip.value
    errors = [d for d in _diagnostics(client, uri) if d[1] == types.DiagnosticSeverity.Error]
    assert any("half-way through an edit" in message for _, _, message in errors)


async def test_bad_pragma_edit_keeps_stale_hints(client):
    path = client.root / "pragma_edit.py"
    uri = await analysed(client, client.status, path)
    target = line_of(path, "def build_small")
    # Linear(4, 2): 10 parameters, 8 MACs, 16 FLOPs (as in the test above)
    assert labels_by_line(await hints(client, uri))[target] == ["10 params · 8 MACs · 16 FLOPs"]

    edited = path.read_text().replace("input_shape=(4,)", 'input_shape=(4,), colour="red"')
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    await client.status.wait(uri, {"stale"}, since)

    kept = [h for h in await hints(client, uri) if h.position.line + 1 == target]
    assert [h.label for h in kept] == ["10 params · 8 MACs · 16 FLOPs (stale)"] and "Stale" in kept[0].tooltip.value
    pragma = line_of(path, "# torchscan:")
    assert any(line == pragma and "colour" in message for line, _, message in _diagnostics(client, uri))


async def test_target_hidden_by_a_broken_edit_follows_the_lines_inserted_above_it(client):
    path = client.root / "moves.py"
    original = "import torch.nn as nn\n\n\n# torchscan: input_shape=(4,)\ndef build_small():\n    return nn.Linear(4, 2)\n"
    path.write_text(original)
    uri = await analysed(client, client.status, path)
    # one edit inserts two lines above everything, the first of them an unclosed bracket
    edited = "SIZES = [1, 2,\n\n" + original
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    await client.status.wait(uri, {"stale"}, since)
    moved = _line_in(edited, "def build_small")
    assert moved == _line_in(original, "def build_small") + 2
    # Linear(4, 2): 10 parameters, 8 MACs, 16 FLOPs (as above), now on the moved line, stale
    assert labels_by_line(await hints(client, uri)).get(moved) == ["10 params · 8 MACs · 16 FLOPs (stale)"]
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert {lens.range.start.line + 1 for lens in lenses} == {moved}


def _line_in(text: str, marker: str) -> int:
    """The 1-based line of ``text`` holding ``marker`` (exactly once)."""
    (found,) = [n for n, line in enumerate(text.splitlines(), start=1) if marker in line]
    return found


async def _hover(client, uri: str, line: int):
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line - 1, character=8)))


async def test_hints_and_hovers_follow_unsaved_and_unparsable_edits(client):
    path = client.root / "moved.py"
    uri = await analysed(client, client.status, path)
    # Linear(10, 20) on (1, 10): 10·20 + 20 = 220 parameters; FLOPs 20·(2·10 − 1) + 20 = 400;
    # MACs 10·20 = 200; output (1, 20). The one Head instance (the root) holds all of it, so its
    # class line and the factory's line that built it say the same as the fc line.
    def expected(text: str, mark: str = "") -> dict[int, list[str]]:
        return {_line_in(text, "def build_head"): ["220 params · 200 MACs · 400 FLOPs" + mark],
                _line_in(text, "return Head()"): ["220 params · 400 FLOPs" + mark],
                _line_in(text, "class Head"): ["220 params · 400 FLOPs" + mark],
                _line_in(text, "self.fc ="): ["220 params · 400 FLOPs" + mark],
                _line_in(text, "return self.fc(x)"): ["→ (1, 20)" + mark]}

    original = path.read_text()
    assert labels_by_line(await hints(client, uri)) == expected(original)

    # two comment lines on top, unsaved: every hint moves down two lines, marked stale
    edited = "# one\n# two\n" + original
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    await client.status.wait(uri, {"stale"}, since)
    assert labels_by_line(await hints(client, uri)) == expected(edited, " (stale)")
    assert "Linear" in (await _hover(client, uri, _line_in(edited, "self.fc ="))).contents.value
    assert await _hover(client, uri, _line_in(original, "self.fc =")) is None   # now "def __init__"

    # saved with a syntax error below the model: nothing runs, the hints still follow their lines
    broken = edited + "\n\ndef unfinished(:\n    pass\n"
    path.write_text(broken)
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=broken)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.status.wait(uri, {"stale"}, since)
    await asyncio.sleep(0.2)   # a save that started a job would say "running" by now
    assert labels_by_line(await hints(client, uri)) == expected(broken, " (stale)")
    assert "Linear" in (await _hover(client, uri, _line_in(broken, "self.fc ="))).contents.value


async def test_show_report_writes_the_report_and_asks_to_show_it(client):
    path = client.root / "conv.py"
    uri = await analysed(client, client.status, path)
    written = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchscan.showReport", arguments=[uri, "build_conv", "json"]))
    report = json.loads(Path(written).read_text())
    assert report["totals"]["parameters"]["value"] == 224   # 8·3·3·3 weights + 8 biases
    # one folder per workspace: the root's name and a hash of its path, so that two projects
    # with the same file and target never overwrite each other's reports
    digest = hashlib.sha256(str(client.root.resolve()).encode("utf-8")).hexdigest()[:10]
    assert Path(written) == CACHE / "torchscan-lsp" / "reports" / f"{client.root.name}-{digest}" / "conv.py-build_conv.json"
    assert client.shown_documents[-1].uri == Path(written).as_uri()


async def test_reanalyse_runs_again(client):
    path = client.root / "conv.py"
    uri = await analysed(client, client.status, path)
    since = client.status.mark()
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchscan.reanalyze", arguments=[uri]))
    assert await client.status.wait(uri, {"running"}, since)
    state, _ = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done"


async def test_hints_in_an_imported_workspace_file(client):
    blocks = client.root / "blocks.py"
    blocks_uri = lsp.open_document(client, blocks)   # open first: hints arrive after its refresh
    path = client.root / "uses_blocks.py"
    uri = await analysed(client, client.status, path)
    # Linear(4, 4): 4·4 + 4 = 20 parameters, its addmm 2·4·4 = 32 FLOPs. Two Pair instances:
    # line "self.a =" built 0.a and 1.a → 40 parameters, 64 FLOPs; each Pair holds 40 and 64,
    # so the factory line built 80 parameters and 128 FLOPs: the Sequential, the model itself.
    in_blocks = labels_by_line(await hints(client, blocks_uri))
    assert in_blocks[line_of(blocks, "self.a =")] == ["×2 · 40 params · 64 FLOPs"]
    assert in_blocks[line_of(blocks, "self.b =")] == ["×2 · 40 params · 64 FLOPs"]
    assert in_blocks[line_of(blocks, "return self.b(self.a(x))")] == ["→ (1, 4)"]
    in_factory = labels_by_line(await hints(client, uri))
    assert in_factory[line_of(path, "return nn.Sequential")] == ["80 params · 128 FLOPs"]
    assert in_factory[line_of(path, "def build_pairs")] == ["80 params · 64 MACs · 128 FLOPs"]  # MACs 2·2·16


async def _pushed(client, uri, wanted, rounds=200):
    """The diagnostics pushed for ``uri`` once ``wanted(diagnostics)`` holds (the pushes of several
    files arrive one after the other)."""
    for _ in range(rounds):
        found = client.diagnostics.get(uri, [])
        if wanted(found):
            return found
        await asyncio.sleep(0.05)
    return client.diagnostics.get(uri, [])


async def test_container_work_is_hover_detail_unless_the_module_formulas_are_shown(client):
    blocks = client.root / "residual_blocks.py"
    blocks_uri = lsp.open_document(client, blocks)   # open: its diagnostics are pushed
    path = client.root / "uses_residual.py"
    uri = await analysed(client, client.status, path)
    # each Res adds and applies relu in its own forward, outside its Linear's call: the dispatcher
    # counts that work (the labels show its counts), so nothing is warned about
    residual = line_of(blocks, "torch.relu(out + x)")
    await _pushed(client, uri, lambda found: True, rounds=20)
    warned = [d for d in client.diagnostics.get(blocks_uri, []) + client.diagnostics.get(uri, [])
              if d.severity in (types.DiagnosticSeverity.Warning, types.DiagnosticSeverity.Error)]
    assert warned == []
    # the module formulas shown instead: their gap is now a warning on the line where the work ran,
    # one for both calls ("0" and "1"), naming that line's operators
    modules = {"torchscan": {"maxWorkers": 2, "headline": "modules"}}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=modules))
    try:
        found = await _pushed(client, blocks_uri, lambda found: any(d.code == "container_work" for d in found))
        in_blocks = [(d.range.start.line + 1, d.message) for d in found if d.code == "container_work"]
        assert [line for line, _ in in_blocks] == [residual]
        assert in_blocks[0][1].startswith("aten.add ×2, aten.relu ×2 in the own forward of `0`, `1` (×2 layers): "
                                          "no module formula counts it")
        # not where the containers were built (the factory line), nor anywhere else in the factory's file
        assert not [d for d in client.diagnostics.get(uri, []) if d.code == "container_work"]
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"torchscan": {"maxWorkers": 2}}))
    assert not [d for d in await _pushed(client, blocks_uri, lambda found: not found) if d.code == "container_work"]


async def test_cancelling_the_progress_stops_the_job(client):
    path = client.root / "slow.py"
    since = client.status.mark()
    uri = lsp.open_document(client, path)
    await client.status.wait(uri, {"running"}, since)
    token = None
    for _ in range(200):
        token = next((t for t, reports in client.progress_reports.items()
                      if any("build_slow" in (getattr(r, "message", None) or "") for r in reports)), None)
        if token is not None:
            break
        await asyncio.sleep(0.05)
    assert token is not None
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    state, _ = await client.status.wait(uri, {"idle", "done", "failed"}, since)
    assert state == "idle"   # stopped long before the factory's 90 s sleep, with no result


async def test_show_report_renders_html_in_a_worker(client):
    path = client.root / "conv.py"
    uri = await analysed(client, client.status, path)
    written = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchscan.showReport", arguments=[uri, "build_conv"]))
    assert written.endswith(".html")
    html = Path(written).read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "Conv2d" in html
    # the page tells the editor's story: its headline method first, both named, and the editor's
    # diagnostics (none: Conv2d(3, 8, 3) is counted in full by both methods)
    assert "<th>FLOPs (dispatched operators)</th>" in html and "<th>FLOPs (module formulas)</th>" in html
    assert "Diagnostics, as the editor shows them</h2><p>None: every number shown is complete.</p>" in html
    shown = client.shown_documents[-1]
    assert shown.uri == Path(written).as_uri() and shown.external


async def test_report_the_client_could_not_open_is_named_in_a_message(client):
    # a browser window refuses to open a file:// page of the server's machine, and says nothing
    uri = await analysed(client, client.status, client.root / "conv.py")
    features = client.protocol.fm.features
    accepting = features[types.WINDOW_SHOW_DOCUMENT]
    features[types.WINDOW_SHOW_DOCUMENT] = lambda params: types.ShowDocumentResult(success=False)
    try:
        written = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="torchscan.showReport", arguments=[uri, "build_conv", "json"]))
    finally:
        features[types.WINDOW_SHOW_DOCUMENT] = accepting
    told = [m.message for m in client.messages if "could not open the report" in m.message]
    assert told == [f"torchscan: the editor could not open the report; it is at {written}"]
    client.messages.clear()


async def test_command_on_unknown_file_or_target_is_a_clear_error(client):
    missing = (client.root / "never_opened.py").as_uri()
    with pytest.raises(Exception, match="never_opened.py is not open"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="torchscan.reanalyze", arguments=[missing]))
    uri = await analysed(client, client.status, client.root / "conv.py")
    for command in ("torchscan.showReport", "torchscan.reanalyze", "torchscan.measureLatency", "torchscan.measureMemory",
                    "torchscan.measureTraining", "torchscan.planTraining", "torchscan.compareReport"):
        with pytest.raises(JsonRpcException) as raised:
            await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=[uri, "nope"]))
        # the message alone, as invalid parameters: no server traceback in the answer
        error = raised.value
        assert (error.code, error.message, error.data) == (-32602, "no torchscan target named 'nope' in conv.py", None)
    assert client.messages == []   # no message box for a failed request


async def test_measure_latency_adds_the_latency_to_the_lens(client):
    path = client.root / "conv.py"
    uri = await analysed(client, client.status, path)
    measured = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchscan.measureLatency", arguments=[uri, "build_conv"]))
    assert measured["latency"]["totals"]["latency"]["unit"] == "seconds"
    assert measured["latency"]["totals"]["latency"]["status"] == "complete"
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    summary = lenses[0].command.title
    # the totals stay (Conv2d(3, 8, 3) on (3, 32, 32), derived above) and a time is appended
    assert summary.startswith("224 params · 194 kMACs · 389 kFLOPs · ")
    assert summary.endswith((" µs", " ms", " s"))


async def test_saving_an_imported_file_reanalyses_the_target_that_imports_it(client):
    blocks = client.root / "blocks.py"
    path = client.root / "uses_blocks.py"
    uri = await analysed(client, client.status, path)
    blocks_uri = blocks.as_uri()
    if blocks_uri not in {event[0] for event in client.status.events}:
        lsp.open_document(client, blocks)
    edited = blocks.read_text().replace("self.b = nn.Linear(4, 4)", "self.b = nn.Linear(4, 4, bias=False)")
    blocks.write_text(edited)
    since = client.status.mark()
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=blocks_uri, version=5),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=blocks_uri)))
    state, _ = await client.status.wait(uri, {"done", "failed"}, since)
    assert state == "done"
    # without b's biases: Linear(4, 4, bias=False) has 16 parameters; its mm is 2·4·4 = 32 FLOPs, as
    # the addmm with a bias was (the dispatcher counts the products, the bias rides along);
    # two Pairs: 2·(20 + 16) = 72 parameters, MACs still 4·16 = 64, FLOPs 4·32 = 128
    target = line_of(path, "def build_pairs")
    assert labels_by_line(await hints(client, uri))[target] == ["72 params · 64 MACs · 128 FLOPs"]
    assert labels_by_line(await hints(client, blocks_uri))[line_of(blocks, "self.b =")] == ["×2 · 32 params · 64 FLOPs"]


async def test_measure_memory_returns_the_peak_memory_report(client):
    uri = await analysed(client, client.status, client.root / "conv.py")
    measured = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchscan.measureMemory", arguments=[uri, "build_conv"]))
    memory = measured["memory"]
    assert set(measured) == {"memory"} and memory["device"] == "cpu"
    # the peak is measured above the baseline, so the growth is their difference
    assert memory["delta_bytes"] == memory["peak_bytes"] - memory["baseline_bytes"]
