"""What an edit cost, in a real VS Code (code-server in headless Chromium), on a git workspace whose
model is committed: vscode_real/drive_deltas.mjs widens the convolution as a user types it, saves,
reads the hints and the **Compare with HEAD** lens, clicks it (the HTML diff in an editor tab), then
reverts the edit and saves again.

By hand: Conv2d(3, c, 3) on (1, 3, 32, 32) has 28c parameters, c·900·27 MACs and c·900·54 FLOPs;
8 → 12 channels adds 112 parameters and 50 % of the MACs and FLOPs (194,400 → 291,600 MACs;
388,800 → 583,200 FLOPs).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from editor_workspace import CLASS_MODEL, line_of, si
from vscode_real_session import DRIVER, seen

CLASS = line_of(CLASS_MODEL, "class Net")
CONV = line_of(CLASS_MODEL, "self.conv = nn.Conv2d")
CALL = line_of(CLASS_MODEL, "return self.conv(x)")
LINES = CLASS_MODEL.splitlines()


def labels(channels: int, params_change: str = "", work_change: str = "") -> tuple[str, str]:
    """The totals label (parameters, MACs, FLOPs) and the module label (parameters, FLOPs) for
    ``channels`` output channels. The class line shows the totals label, or the module label once
    it carries changes (with the MACs' change too it would pass the 43 characters VS Code shows)."""
    params, macs, flops = 28 * channels, channels * 900 * 27, channels * 900 * 54
    p = f"{params} params" + (f" ({params_change})" if params_change else "")
    m = si(macs, "MACs") + (f" ({work_change})" if work_change else "")
    f = si(flops, "FLOPs") + (f" ({work_change})" if work_change else "")
    return f"{p} · {m} · {f}", f"{p} · {f}"


@pytest.fixture(scope="module")
def session(code_server, tmp_path_factory, request) -> dict:
    tmp = tmp_path_factory.mktemp("vscode-real-deltas")
    workspace = tmp / "workspace"
    (workspace / "models").mkdir(parents=True)
    (workspace / "pyproject.toml").write_text('[project]\nname = "models"\n')
    (workspace / "models" / "model.py").write_text(CLASS_MODEL)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "model"]):
        subprocess.run(["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                       check=True, capture_output=True)
    committed, widened = labels(8), labels(12, "+112", "+50 %")
    ran = code_server.drive(request.module.__name__, tmp, workspace, {
        "model": "models/model.py", "modelLines": LINES, "python": sys.executable,
        "uiTimeoutMs": 20_000, "analysisTimeoutMs": 120_000,
        "edit": {"line": CONV, "widened": LINES[CONV].replace("Conv2d(3, 8, 3)", "Conv2d(3, 12, 3)"),
                 "reverted": LINES[CONV]},
        "lens": "Compare with HEAD: +112 params · +50 % FLOPs",
        "expected": {
            "committed": {str(CLASS): committed[0], str(CONV): committed[1], str(CALL): "→ (1, 8, 30, 30)"},
            # the driver waits until the page shows these: a label the server no longer writes would
            # hold each step for the whole analysis timeout before the assertions below said so
            "widened": {str(CLASS): widened[1], str(CONV): widened[1], str(CALL): "→ (1, 12, 30, 30)"},
            "reverted": {str(CLASS): committed[0], str(CONV): committed[1], str(CALL): "→ (1, 8, 30, 30)"}}},
        driver=DRIVER.with_name("drive_deltas.mjs"),
        # a trusted folder from the start (trust is test_vscode_real's), and typing that is not completed
        settings={"security.workspace.trust.enabled": False, "editor.autoClosingBrackets": "never",
                  "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
                  "editor.suggestOnTriggerCharacters": False})
    ran["steps"] = {step["name"]: step for step in ran["results"]["steps"]}
    return ran



def test_the_committed_model_has_no_delta(session):
    committed = seen(session, "committed")
    assert committed["hints"] == {str(CLASS): "224 params · 194 kMACs · 389 kFLOPs",
                                  str(CONV): "224 params · 389 kFLOPs", str(CALL): "→ (1, 8, 30, 30)"}


def test_a_widened_layer_saved_shows_its_deltas(session):
    widened = seen(session, "widened")
    assert widened["hints"] == {str(CLASS): "336 params (+112) · 583 kFLOPs (+50 %)",
                                str(CONV): "336 params (+112) · 583 kFLOPs (+50 %)", str(CALL): "→ (1, 12, 30, 30)"}
    assert "Compare with HEAD: +112 params · +50 % FLOPs" in widened["lenses"]


def test_the_lens_opens_the_diff_in_an_editor_tab(session):
    shown = seen(session, "compare-with-head")
    report = shown["report"]
    assert report is not None, "no webview frame held the diff"
    assert report["title"].startswith("Net: now against HEAD (") and report["scripts"] == 0
    text = report["text"]
    assert "Analysis comparison" in text or "now against HEAD" in text
    assert "+112 elements" in text          # the parameters' row: 224 → 336
    assert "+194,400 FLOPs" in text         # the operators' FLOPs: 388,800 → 583,200


def test_reverting_removes_the_deltas(session):
    reverted = seen(session, "reverted")
    assert reverted["hints"] == {str(CLASS): "224 params · 194 kMACs · 389 kFLOPs",
                                 str(CONV): "224 params · 389 kFLOPs", str(CALL): "→ (1, 8, 30, 30)"}
    assert not any(title.startswith("Compare with HEAD: +") for title in reverted["lenses"])


def test_every_process_stopped_with_its_group(session):
    assert session["outlived"] == []
