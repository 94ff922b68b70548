"""The VS Code extension in a real VS Code: code-server in Debian's headless Chromium, one session.

vscode_real/drive.mjs opens a workspace holding a model and a broken model and acts as a user:
the interpreter advice at start (nothing set, ``python3`` without the package), the fix it names
(the interpreter in code-server's Remote settings), Restricted Mode, trust through the code lens,
then the inlay hints, code lens, hover, Problems panel, status bar, "Measure latency",
"Measure memory", "Plan training" and "Show report". Each test checks what the page showed at one step against
numbers derived by hand (editor_workspace). Screenshots of every step are written to
build/vscode-real/test_vscode_real/ (named in the output); the session's timing is printed with them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from editor_workspace import BROKEN, CLASS_MODEL, FLOPS, MACS, OUTPUT_SHAPE, PARAMETERS, Expected, line_of, si
from torchscan_lsp.engine.reporting.html import CONTENT_SECURITY_POLICY
from vscode_real_session import SCREENSHOTS, SUMMARY, seen

MODEL = CLASS_MODEL
CLASS_LINE = line_of(MODEL, "class Net")
CONV_LINE = line_of(MODEL, "self.conv = nn.Conv2d")
CALL_LINE = line_of(MODEL, "return self.conv(x)")
BROKEN_LINE = line_of(BROKEN, "def broken")
LABELS = Expected()   # the same Conv2d(3, 8, 3) on 3×32×32: the labels derived there


@pytest.fixture(scope="module")
def session(code_server, tmp_path_factory, request) -> dict:
    tmp = tmp_path_factory.mktemp("vscode-real")
    workspace = tmp / "workspace"
    (workspace / "models").mkdir(parents=True)
    (workspace / "pyproject.toml").write_text('[project]\nname = "models"\n')
    (workspace / "models" / "model.py").write_text(MODEL)
    (workspace / "models" / "broken.py").write_text(BROKEN)
    ran = code_server.drive(request.module.__name__, tmp, workspace, {
        "model": "models/model.py", "broken": "models/broken.py", "modelLines": MODEL.splitlines(),
        "python": sys.executable, "uiTimeoutMs": 20_000, "analysisTimeoutMs": 90_000, "planTimeoutMs": 300_000,
        "expected": {"totals": LABELS.totals,
                     "hints": {CLASS_LINE: LABELS.totals, CONV_LINE: LABELS.module, CALL_LINE: LABELS.shape}}})
    steps = ran["results"]["steps"]
    timings = ", ".join(f"{step['name']} {step['seconds']:.1f}" for step in steps)
    # printed at the end of the run (conftest.py), where pytest's capture does not swallow it
    request.config.stash[SUMMARY] = (f"real VS Code (code-server): {len(steps)} steps in {ran['seconds']:.0f} s "
                                     f"(seconds per step: {timings}); screenshots in {SCREENSHOTS / request.module.__name__}")
    ran["steps"] = {step["name"]: step for step in steps}
    return ran



def test_each_step_has_a_screenshot(session):
    for step in session["steps"].values():
        assert Path(step["screenshot"]).is_file(), step


def test_without_the_setting_the_advice_names_the_remote_settings(session):
    # code-server is a remote window: there VS Code reads torchscan.python from the Remote
    # settings (or the workspace's), not from the local User settings
    toasts = seen(session, "interpreter-advice")["toasts"]
    (advice,) = [toast for toast in toasts if toast["message"].startswith("torchscan-lsp: ")]
    assert advice["message"].startswith("torchscan-lsp: the package is not installed in python3 (found on the PATH: ")
    assert "is not set for this remote window" in advice["message"]
    assert "where VS Code ignores it in your local User settings" in advice["message"]
    assert re.search(r'in the Remote settings of 127\.0\.0\.1:\d+ \("Preferences: Open Remote Settings"\)',
                     advice["message"])
    assert advice["buttons"] == ["Open Remote Settings", "Show install command", "Show log"]


def test_restricted_mode_runs_nothing_and_says_to_trust_the_workspace(session):
    # after the interpreter was set in the Remote settings, as the advice said
    restricted = seen(session, "restricted-mode")
    assert restricted["status"] == "torchscan: untrusted" and restricted["restrictedMode"]
    # the summary alone: the lenses that would run the model's code are not offered
    assert restricted["lenses"] == ["torchscan: not analysed (untrusted workspace)"]
    (info,) = [row for row in restricted["problems"] if "untrusted workspace" in row]
    assert info.startswith("Info: Net: torchscan does not run code of an untrusted workspace")
    # VS Code ignores torchscan.allowExecution there: its users are told to trust the workspace
    assert "Trust the workspace: click Restricted Mode in the status bar" in info
    assert "set torchscan.allowExecution" not in info
    assert f"at line {CLASS_LINE + 1} " in info


def test_the_lens_opens_the_trust_editor_and_trust_starts_the_analysis(session):
    assert seen(session, "trust-editor")["heading"] == "You are in Restricted Mode"
    trusted = seen(session, "trusted")
    assert trusted == {"status": "torchscan: done", "restrictedMode": False}


def test_inlay_hints_on_the_class_conv_and_call_lines(session):
    # Conv2d(3, 8, 3) on (1, 3, 32, 32): 224 parameters, 194,400 MACs, 388,800 FLOPs, output (1, 8, 30, 30)
    assert (PARAMETERS, MACS, FLOPS, OUTPUT_SHAPE) == (224, 194_400, 388_800, (1, 8, 30, 30))
    assert seen(session, "inlay-hints")["hints"] == {
        str(CLASS_LINE): f"224 params · {si(MACS, 'MACs')} · {si(FLOPS, 'FLOPs')}",
        str(CONV_LINE): f"224 params · {si(FLOPS, 'FLOPs')}",
        str(CALL_LINE): "→ (1, 8, 30, 30)",
    }


def test_code_lens_above_the_class(session):
    assert seen(session, "code-lens")["lenses"] == [
        "224 params · 194 kMACs · 389 kFLOPs", "Re-analyse", "Show report", "Measure latency", "Measure memory",
        "Measure training step", "Plan training"]


def test_hover_on_the_conv_line(session):
    hover = seen(session, "hover")["hover"]
    assert hover.startswith("Conv2d")
    assert "Parameters: 224 (224 trainable, 0 frozen, 896 B)" in hover   # 224 float32 parameters · 4 B
    assert "Input: (1, 3, 32, 32) → output: (1, 8, 30, 30)" in hover


def test_problems_panel_and_status_bar_show_the_broken_model(session):
    problems = seen(session, "problems")
    assert problems["status"] == "torchscan: failed"
    (error,) = [row for row in problems["problems"] if row.startswith("Error: ")]
    assert error.startswith("Error: broken: the forward pass failed on the given inputs")
    # the pragma gives 4 channels to a convolution that takes 3
    assert "expected input[1, 4, 32, 32] to have 3 channels, but got 4 channels instead" in error
    assert f"at line {BROKEN_LINE + 1} and character 1" in error


def _bytes(size: str) -> float:
    number, unit = size.split()
    return float(number) * 1024 ** ["B", "KiB", "MiB", "GiB"].index(unit)


def test_measure_latency_and_memory_show_their_results_on_the_lens(session):
    latency = seen(session, "measure-latency")
    assert latency["status"] == "torchscan: done"
    summary = latency["lenses"][0]
    assert re.fullmatch(r"224 params · 194 kMACs · 389 kFLOPs · [\d.]+ (ns|µs|ms|s)", summary), summary
    memory = seen(session, "measure-memory")["lenses"][0]
    found = re.fullmatch(r"224 params · 194 kMACs · 389 kFLOPs · [\d.]+ (ns|µs|ms|s) · peak memory \+([\d.]+ \w+)", memory)
    assert found, memory
    # the forward pass holds at least its output: 1·8·30·30 float32 = 28,800 B above the baseline
    assert _bytes(found.group(2)) >= 8 * 30 * 30 * 4


def test_plan_training_from_the_lens_shows_the_plan_in_the_hover(session):
    planned = seen(session, "plan-training")
    assert planned["lenses"][-1] == "Plan training" and planned["status"] == "torchscan: done"
    hover = planned["hover"]
    # no plan option: the defaults, three precisions with and without checkpointing, against an
    # H100's 80 GiB (the budget when none is set)
    assert "Training plan: budget 80.0 GiB per device (H100-SXM, the default: set train_memory)" in hover
    # a step of 65,536 samples holds about 65,536 · (3·32·32 input + 2 · 8·30·30 output and its
    # gradient) · 4 B = 6.5 GB: the search's ceiling fits, a lower bound
    for precision in ("float32", "bfloat16-mixed", "bfloat16"):
        assert re.search(rf"{precision} · adamw · no checkpointing · one device\s+≥ 65,536", hover), hover
    # one convolution: no repeated block to checkpoint, said instead of a number
    assert "no repeated block to checkpoint" in hover


def test_show_report_opens_the_report_in_the_editor(session):
    shown = seen(session, "show-report")
    # a browser window cannot open the server's file://: the report is a webview tab instead
    assert "Analysis of models.model.Net" in shown["tabs"]
    report = shown["report"]
    assert report is not None, "no webview frame held the report"
    assert report["title"] == "Analysis of models.model.Net"
    assert report["contentSecurityPolicy"] == CONTENT_SECURITY_POLICY and report["scripts"] == 0
    assert "224 elements" in report["text"] and "388,800 FLOPs" in report["text"]
    # the plan, with a chart of memory against the batch per policy with estimates (three)
    assert report["plan"].startswith("Training plan") and report["charts"] == 3


def test_server_log_lines_appear_once(session):
    lines = session["log"].splitlines()
    server = [line for line in lines if "[server] " in line]
    assert server, "the server logged nothing"
    # vscode-languageclient copied the server's stderr into the channel as well: the same text
    # again without the [server] mark, then a blank line
    assert not [line for line in lines if re.search(r"\] (INFO|WARNING|ERROR) [\w.]+: ", line) and "[server] " not in line]
    assert "" not in [line.strip() for line in lines]
    assert not [line for line in lines if "Cancel notification for unknown message id" in line]


def test_every_process_stopped_with_its_group(session):
    # the language server's workers lead process groups of their own; they must end with it, and
    # it with the window's extension host once the window has closed
    assert session["outlived"] == []
