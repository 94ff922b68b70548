"""Planning a training run in headless Neovim 0.11 with the editors/nvim plugin and the real server.

The model is a stack of two residual MLP blocks (width 32) over 8 tokens, its pragma asking for a
plan of float32 with and without checkpointing under 4 MiB: Neovim must show the plan in the
target's hover as soon as it is done (off the hint path: the analysis's hints first), offer the
**Plan training** lens, and, when that lens's command runs, receive the plan job's $/progress
reports (a begin, reports with a percentage, an end) and the plan as the command's answer. The
numbers are the engine's own, planned here in the test process for the same model (the engine is
held against real steps in tests/plan/).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from editor_workspace import REPO, find_nvim

PLUGIN = REPO / "editors" / "nvim"
CLIENT = Path(__file__).with_name("nvim_plan.lua")

MODEL = """\
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.blocks(x))


# torchscan: input_shape=(8, 32), train_memory="4 MiB", plan={"precision": ["float32"], "checkpointing": ["none", "blocks"]}
def build():
    return Net()
"""


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("plan-workspace")
    (root / "pyproject.toml").write_text('[project]\nname = "plans"\n')
    (root / "model.py").write_text(MODEL)
    out = root.parent / f"{root.name}-nvim.json"
    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}
    result = subprocess.run([find_nvim(), "--headless", "--clean", "-l", str(CLIENT), str(PLUGIN), sys.executable,
                             str(root / "model.py"), str(out)], cwd=root, env=env, capture_output=True, text=True,
                            timeout=900)
    assert out.exists(), f"nvim wrote no result (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
    return {"nvim": json.loads(out.read_text()), "root": root}


@pytest.fixture(scope="module")
def engine_plan(planned) -> dict:
    sys.path.insert(0, str(planned["root"]))
    try:
        from model import build  # the test workspace's model
    finally:
        sys.path.pop(0)
    from torchscan_lsp.engine.training import plan_training

    return plan_training(build, plan={"precision": ["float32"], "checkpointing": ["none", "blocks"]},
                         memory_budget="4 MiB", input_shape=(8, 32))


def test_the_hover_shows_the_plan_its_options_ask_for_once_it_is_done(planned, engine_plan):
    hover = planned["nvim"]["hover_automatic"]
    assert "**Training plan**: budget 4.00 MiB per device (from train_memory)" in hover
    for policy in engine_plan["policies"]:
        batch = policy["batch"]
        row = f"| {policy['policy']['name']} | {batch['largest']['value']:,} |"
        assert row in hover, (row, hover)
    assert "`torch.distributed._tools.mem_tracker.MemTracker+FakeTensorMode`" in hover


def test_the_plan_training_lens_runs_the_plan_with_progress_and_answers_with_it(planned):
    nvim = planned["nvim"]
    titles = [lens["title"] for lens in nvim["code_lenses"]]
    assert titles[-1] == "Plan training" and nvim["code_lenses"][-1]["command"] == "torchscan.planTraining"
    assert nvim["answer"] == {"policies": 2}  # no "err": the command answered with the plan
    kinds = [p["kind"] for p in nvim["progress"]]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
    assert nvim["progress"][0]["message"] == "planning the training of build"
    reports = [p for p in nvim["progress"] if p["kind"] == "report"]
    assert any("estimating batch" in (p["message"] or "") for p in reports)
    assert all(isinstance(p["percentage"], int) and 0 <= p["percentage"] <= 100 for p in reports)
    assert "**Training plan**" in nvim["hover_after_lens"]
    assert [d for d in nvim["diagnostics"] if d["severity"] == 1] == []
    assert nvim["messages"] == []
