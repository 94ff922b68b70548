"""``torchscan-lsp scan --train``: the training step in a terminal, and in the HTML report.

The target is ``nn.Linear(4, 2)`` trained with SGD on a batch of 2; its step peaks at 136 bytes in
the backward (parameters 40, temporaries 40, input 32, activations 24) with 35 forward and 34
backward FLOPs, all derived by hand in tests/server/test_server_training.py.
"""

from __future__ import annotations

import json

import pytest

from workspace_files import line_of, run_scan as scan, write

LINEAR = """
    import torch.nn as nn


    # torchscan: input_shape=(4,), train={"optimizer": "sgd", "batch": 2}
    def build_linear():
        return nn.Linear(4, 2)
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.torchscan-lsp]\ntrain_memory = "100 B"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_scan_train_prints_flops_and_memory_by_category(workspace, capsys):
    files = write(workspace, {"linear.py": LINEAR})
    code, out, err = scan(capsys, "linear.py", "--train")
    # over the budget is a warning: the exit status stays 0
    target = line_of(files["linear.py"], "def build_linear")
    assert code == 0, err
    # (the CPU profiler of the measured step writes its own USDT trace lines to stderr)
    assert [line for line in err.splitlines() if not line.startswith("USDT:")] == [
        f"linear.py:{target}: warning: build_linear: the training step's estimated peak, 136 B (in the backward), "
        "exceeds the memory budget of 100 B; largest: parameters 40 B, temporaries 40 B, inputs 32 B."]
    block = out[out.index("Training step"):].splitlines()
    # Linear(4, 2): 4 * 2 + 2 = 10 parameters, all trained
    assert block[0] == "Training step (sgd, batch 2, for-loop on cpu): trainable 10 of 10 parameters"
    assert block[1] == "  FLOPs: forward 35 FLOPs, backward 34 FLOPs, training 69 FLOPs"
    assert block[2].split() == ["memory", "at", "the", "peak", "estimated", "measured"]
    rows = {line.split()[0]: line.split()[1:] for line in block[3:] if line.startswith("    ")}
    assert rows["parameters"] == ["40", "B", "40", "B"] and rows["inputs"][:2] == ["32", "B"]
    assert rows["temporaries"][:2] == ["40", "B"]
    assert any(line.startswith("  Peak: estimated 136 B in the backward; measured ") for line in block)
    assert "  Budget 100 B (estimated peak): over by 36 B." in block
    assert any(line.startswith("  The two methods agree") for line in block)


def test_scan_train_json_and_html(workspace, capsys):
    write(workspace, {"linear.py": LINEAR})
    code, out, _ = scan(capsys, "linear.py", "--train", "--format", "json", "--html", "report.html")
    assert code == 0
    (result,) = json.loads(out)
    train = result["measurements"]["train"]
    assert train["memory"]["estimated"]["peak"]["value"] == 136
    page = (workspace / "report.html").read_text(encoding="utf-8")
    # the analysis page carries the training section: its categories with their bars
    section = page[page.index('<section id="training">'):]
    assert "Peak memory by category" in section and "<code>parameters</code>" in section
    assert "40 B" in section and 'class="bar"' in section
