"""Python warnings raised while a job runs never reach stderr: they become ``python_warning``
diagnostics of the report (``scan --format json``), concern no count, so the editor warns about
nothing, and the target's hover quotes them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from workspace_files import line_of, write

FROZEN = """
    import warnings

    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            return checkpoint(self.fc, x, use_reentrant=True)


    # torchscan: input_shape=(16,)
    def frozen():
        warnings.warn("this factory builds a frozen model")
        model = nn.Sequential(Block(), nn.ReLU(), nn.Linear(16, 4))
        for p in model.parameters():
            p.requires_grad_(False)
        return model
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("warnings")
    (root / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    return root, write(root, {"net.py": FROZEN})


def _run(root, *argv):
    return subprocess.run([sys.executable, "-m", "torchscan_lsp", *argv], cwd=root, capture_output=True, text=True,
                          timeout=300)


def test_a_frozen_models_warnings_go_to_the_report_not_to_stderr(workspace):
    root, files = workspace
    done = _run(root, "scan", "net.py", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    (result,) = json.loads(done.stdout)
    caught = [d for d in result["report"]["diagnostics"] if d["code"] == "python_warning"]
    assert [(d["severity"], d["metric"]) for d in caught] == [("warning", "none")] * 2
    # the factory's own warning, at its line of the workspace file
    warn_line = line_of(files["net.py"], "warnings.warn(")
    assert caught[0]["message"] == f"UserWarning: this factory builds a frozen model (raised at net.py:{warn_line})"
    # checkpoint's, from the forward the analysis runs without gradients: torch's file, by its
    # path below site-packages
    assert re.fullmatch(r"UserWarning: None of the inputs have requires_grad=True\. Gradients will be None "
                        r"\(raised at torch/utils/checkpoint\.py:\d+\)", caught[1]["message"]), caught[1]["message"]
    # nothing is missing from a count: 16·16 + 16 + 16·4 + 4 = 340 parameters, complete
    assert result["report"]["totals"]["parameters"] == {**result["report"]["totals"]["parameters"],
                                                       "status": "complete", "value": 340}


def test_the_table_and_check_say_nothing_about_them(workspace):
    root, files = workspace
    table = _run(root, "scan", "net.py")
    assert table.returncode == 0 and table.stderr == "", table.stderr
    assert "Warning" not in table.stdout and "Diagnostics" not in table.stdout
    check = _run(root, "check", "net.py")
    assert check.returncode == 0 and check.stderr == "", check.stderr
    assert [line for line in check.stdout.splitlines() if ": hint: " not in line] == []


def test_a_failed_jobs_warnings_are_printed_beside_its_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    files = write(tmp_path, {"net.py": """
        import warnings


        # torchscan: input_shape=(4,)
        def build():
            warnings.warn("about to fail")
            raise ValueError("no model today")
    """})
    done = _run(tmp_path, "scan", "net.py")
    assert done.returncode == 1
    raise_line = line_of(files["net.py"], "raise ValueError")
    warn_line = line_of(files["net.py"], "warnings.warn(")
    # no report to hold it: the warning is the job's output, printed before the one-line error
    assert done.stderr.splitlines() == [
        f"{tmp_path / 'net.py'}:{warn_line}: UserWarning: about to fail",
        '  warnings.warn("about to fail")',
        f"net.py:{raise_line}: error: 'build' failed: ValueError: no model today",
    ]
