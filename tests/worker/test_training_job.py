"""The ``train`` measurement of a worker job: asked for, unasked (a target with ``train`` or
``train_memory`` options), the factory's training mapping, and a failing step placed at its line.

The model of every test is ``nn.Linear(4, 2)`` trained with SGD on a batch of 2: its step peaks at
136 bytes in the backward, derived by hand in tests/server/test_server_training.py.
"""

from __future__ import annotations

import json

from torchscan_lsp.worker.runner import run_job
from workspace_files import line_of, write

LINEAR = "import torch\nimport torch.nn as nn\n\n\ndef build():\n    return nn.Linear(4, 2)\n"
OPTIONS = {"input_shape": [4], "train": {"optimizer": "sgd", "batch": 2}}


def run(root, rel, target, options, measure=()):
    result = run_job({"workspace_root": str(root), "file": str(root / rel), "target": target, "options": options,
                      "source_text": None, "measure": list(measure)})
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert result["ok"] is True, result
    return result


def test_asked_for_both_methods_run(tmp_path):
    write(tmp_path, {"net.py": LINEAR})
    train = run(tmp_path, "net.py", "build", OPTIONS, measure=["train"])["measurements"]["train"]
    assert train["kind"] == "training_step" and train["options"]["optimizer"] == "sgd"
    assert train["memory"]["estimated"]["peak"]["value"] == 136
    assert train["memory"]["measured"]["peak"]["status"] == "complete"
    assert train["flops"]["totals"]["training_flops"]["value"] == 35 + 34


def test_unasked_a_budget_gets_the_estimate_alone(tmp_path):
    write(tmp_path, {"net.py": LINEAR})
    result = run(tmp_path, "net.py", "build", {"input_shape": [4], "train_memory": "100 B"})
    train = result["measurements"]["train"]
    assert train["memory"]["measured"]["reason"] == "not requested"
    assert [d["code"] for d in train["diagnostics"]] == ["training_memory_over_budget"]
    # without train options or a budget, nothing is trained
    assert "measurements" not in run(tmp_path, "net.py", "build", {"input_shape": [4]})


def test_the_factory_may_return_its_loss(tmp_path):
    write(tmp_path, {"net.py": (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "def build():\n"
        "    x, y = torch.rand(3, 4), torch.tensor([0, 1, 1])\n"
        "    return {'model': nn.Linear(4, 2), 'args': (x,), 'loss': F.cross_entropy, 'targets': (y,)}\n")})
    result = run(tmp_path, "net.py", "build", {"train": {}}, measure=["train"])
    # the analysis runs the model on the mapping's args: a (3, 2) output
    assert result["report"]["layers"][0]["output"]["shape"] == [3, 2]
    train = result["measurements"]["train"]
    assert train["memory"]["comparison"]["agree"] is True
    # cross-entropy's log-softmax and loss are forward work outside the model
    assert train["flops"]["totals"]["forward_flops"]["value"] > train["flops"]["by_module"][""]["forward_flops"]["value"]


def test_a_failing_step_is_placed_and_the_analysis_stands(tmp_path):
    files = write(tmp_path, {"net.py": (
        "import torch\nimport torch.nn as nn\n\n\n"
        "def build():\n"
        "    x = torch.rand(2, 4)\n"
        "    return {'model': nn.Linear(4, 2), 'args': (x,), 'loss': lambda out: out}\n")})
    result = run(tmp_path, "net.py", "build", {}, measure=["train"])
    assert result["report"]["totals"]["parameters"]["value"] == 10
    error = result["measurements"]["train"]["error"]
    assert error["type"] == "ValueError" and "loss must return a scalar tensor, got (2, 2)" in error["message"]
    # raised by the step, not by a workspace line: placed at the target
    assert (error["file"], error["line"]) == ("net.py", line_of(files["net.py"], "def build"))
