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


VALUES = """
    import torch
    import torch.nn as nn


    class Rates(nn.Module):
        def __init__(self):
            super().__init__()
            rates = torch.linspace(0, 0.1, 2).tolist()
            self.blocks = nn.Sequential(*(nn.Dropout(rate) for rate in rates), nn.Linear(8, 4))

        def forward(self, x):
            return self.blocks(x)


    class Reads(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x) / float(x.abs().max())


    # torchscan: input_shape=(8,), train={"optimizer": "adamw"}
    def rates():
        return Rates()


    # torchscan: input_shape=(8,), train={"optimizer": "adamw"}
    def reads():
        return Reads()
"""


def test_a_value_read_is_one_message_in_scan_scan_train_and_the_hover(workspace, capsys):
    from torchscan_lsp.server.hover import training_card
    from torchscan_lsp.session.training import training_summary

    (workspace / "pyproject.toml").write_text("", encoding="utf-8")  # no budget here
    files = write(workspace, {"values.py": VALUES})
    source = files["values.py"]
    # Reads' forward reads a value: the estimate cannot run, and says where, workspace-relative
    reason = (f"fake tensors hold no values, and the training step's forward reads one at values.py:"
              f"{line_of(source, 'float(x')}: no estimate (the measured step runs the model for real)")
    warning = f"values.py:{line_of(source, 'def reads')}: warning: reads: estimated training memory is unavailable: {reason}"
    for extra in ((), ("--train",)):
        code, out, err = scan(capsys, "values.py", *extra)
        assert code == 0, err
        assert [line for line in err.splitlines() if not line.startswith("USDT:")] == [warning], extra
        assert f"  Peak: estimated unavailable: {reason}; measured " in out
        # Rates' construction reads its rates with .tolist(): built for real and converted, it is
        # estimated with no warning; Linear(8, 4): 36 parameters of 4 B, their gradients, AdamW's two
        # moments and a 4-byte step for the weight and for the bias
        block = out.split("Training step (")[1].splitlines()  # the first target's: rates
        rows = {line.split()[0]: line.split()[1:3] for line in block if line.startswith("    ")}
        assert rows["parameters"] == rows["gradients"] == [str(36 * 4), "B"]
        assert rows["optimizer"] == ["state", str(2 * 36 * 4 + 2 * 4)]
    code, out, _ = scan(capsys, "values.py", "--format", "json")
    hover = training_card(training_summary(json.loads(out)[1]["measurements"]["train"]))
    assert f"Peak: estimated unavailable: {reason}; measured unavailable: not requested." in hover
