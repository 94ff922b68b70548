"""``torchscan-lsp scan --plan``: the training plan in a terminal, in the JSON and in the HTML report.

The target is an MLP 64-256-10 trained with AdamW on generated inputs of 64 features; its step
holds 4·N bytes of parameters, 4·N of gradients and 8·N of AdamW's moments (N = 64·256 + 256 +
256·10 + 10 = 19,466: 311,456 bytes) and about a kilobyte a sample, so a budget of 1 MiB leaves room
for a few hundred samples. The plan's numbers are held against real steps in tests/plan/; here the
terminal, the JSON and the page must carry the same plan.
"""

from __future__ import annotations

import json
import re

import pytest

from workspace_files import line_of, run_scan as scan, write

MLP = """
    import torch.nn as nn


    # torchscan: input_shape=(64,), train_memory="1 MiB", plan={"precision": ["float32", "bfloat16"], "checkpointing": ["none", "blocks"]}
    def build_mlp():
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


    # torchscan: input_shape=(64,)
    def plain():
        return nn.Linear(64, 4)
"""
N = 64 * 256 + 256 + 256 * 10 + 10


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "plans"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_scan_prints_the_plan_of_a_target_whose_options_ask_for_one(workspace, capsys):
    write(workspace, {"mlp.py": MLP})
    code, out, err = scan(capsys, "mlp.py", "--target", "build_mlp")
    assert code == 0, err
    block = out[out.index("Training plan"):].splitlines()
    assert block[0] == "Training plan: budget 1.00 MiB per device (from train_memory), held against the tensor bytes at the peak"
    # the FLOPs of a sharded policy are one rank's at its own batch: the header says per device
    assert re.split(r"\s{2,}", block[1].strip()) == ["policy", "max batch", "peak", "largest", "FLOPs/step per device"]
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in block[2:6])}
    assert set(rows) == {"float32 · adamw · no checkpointing · one device", "float32 · adamw · checkpointed · one device",
                         "bfloat16 · adamw · no checkpointing · one device", "bfloat16 · adamw · checkpointed · one device"}
    # no repeated block in an MLP: the checkpointed policies say why instead of a number
    assert rows["float32 · adamw · checkpointed · one device"] == ["—", "—", "—", "—"]
    assert any(line.startswith("    why: the model has no repeated block to checkpoint") for line in block)
    # bfloat16 halves the 16 bytes a parameter: more of the budget is left for samples
    batches = {name: int(cells[0].replace(",", "")) for name, cells in rows.items() if "checkpointed" not in name}
    assert batches["bfloat16 · adamw · no checkpointing · one device"] > batches["float32 · adamw · no checkpointing · one device"]
    assert any(re.fullmatch(r"    batch: the memory fit at \d+ \(not fitted on\): [+-]\d+\.\d\d %", line) for line in block)
    # both answers rest on the estimates at them and one above them (the budget bounds them)
    assert any(re.fullmatch(r"  \d+ estimates on fake tensors in \d+\.\d s; each answer confirmed by the estimates at "
                            r"it and one above it\.", line) for line in block)


def test_scan_plan_plans_every_target_and_carries_the_plans_in_json_and_html(workspace, capsys):
    files = write(workspace, {"mlp.py": MLP})
    code, out, err = scan(capsys, "mlp.py", "--plan", "--format", "json", "--html", "report.html")
    assert code == 0, err
    mlp, plain = json.loads(out)
    plan = mlp["measurements"]["plan"]
    assert plan["kind"] == "training_plan" and plan["budget"] == {
        "bytes": 1 << 20, "device": None, "text": "1 MiB", "source": "train_memory"}
    float32 = plan["policies"][0]
    assert float32["policy"]["name"] == "float32 · adamw · no checkpointing · one device"
    # the persistent state at every estimate: parameters, gradients and AdamW's moments
    point = float32["batch"]["at_largest"]
    assert point["largest"]["parameters"] == 4 * N and point["largest"]["optimizer_state"] == 8 * N + 4 * 4
    # plain() asks for no plan, but --plan plans it with the defaults: three precisions, with and
    # without checkpointing, against the default budget (an H100's 80 GiB)
    other = plain["measurements"]["plan"]
    assert len(other["policies"]) == 6 and other["budget"]["device"] == "H100-SXM" and other["budget"]["source"] == "default"
    assert other["compared"] == "CUDA allocated peak (derived)"
    pages = {path.name: path.read_text(encoding="utf-8") for path in workspace.glob("report.*.html")}
    page = pages["report.build_mlp.html"]
    section = page[page.index('<section id="plan">'):]
    assert section.count('<svg class="plan-chart"') == 2  # a chart per policy with estimates
    assert 'class="budget"' in section and 'class="fit"' in section and 'class="category activations"' in section
    assert "the model has no repeated block to checkpoint" in section
    assert "<th>max length at batch 1</th>" in section and "<th>FLOPs/step per device</th>" in section
    assert line_of(files["mlp.py"], "def build_mlp") > 0
