"""A measurement that fails is an error when it was asked for (``scan --train``, ``--latency``,
``--memory``, a target's ``measure`` option), in ``scan`` (a ``FILE:LINE: error:`` line, exit
status 1) and in ``check`` (an error diagnostic) alike, for every kind of measurement; the training
estimate that runs unasked for a target with ``train`` options is a warning. A training option that
does not fit the target is an options error at its pragma, which stops the target before it runs."""

from __future__ import annotations

import pytest

from torchscan_lsp.cli import main
from workspace_files import line_of, write

SOURCE = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            return self.fc(x)


    class OnlyOnce(Net):
        calls = 0

        def forward(self, x):
            OnlyOnce.calls += 1
            if OnlyOnce.calls > 1:  # the analysis runs the forward once: every measurement after it fails
                raise RuntimeError("only once")
            return self.fc(x)


    # torchscan: train={"optimizer": "adamw", "batch": 8}
    def batch_for_own_inputs():
        return Net(), (torch.rand(2, 32),)


    # torchscan: train={"optimizer": "sgd"}
    def loss_not_scalar():
        return {"model": Net(), "args": (torch.rand(2, 32),), "loss": lambda out: out}


    # torchscan: input_shape=(32,)
    def measured():
        return OnlyOnce()
"""

LOSS = "ValueError: the factory's loss must return a scalar tensor, got (2, 10)."


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return write(tmp_path, {"net.py": SOURCE})["net.py"]


def scan(capsys, *argv):
    code = main(["scan", "net.py", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, [line for line in err.splitlines() if ": error: " in line or ": warning: " in line]


def test_batch_for_the_factory_s_own_inputs_is_an_options_error(workspace, capsys):
    code, out, problems = scan(capsys, "--target", "batch_for_own_inputs")
    assert code == 1 and out == ""  # the target did not run
    assert problems == [f"net.py:{line_of(workspace, '# torchscan', 0)}: error: train option 'batch' applies to inputs "
                        "generated from input_shape, but 'batch_for_own_inputs' returns its own inputs; remove batch "
                        "and make the batch in the factory (train={\"batch\": None} in the pragma overrides a workspace "
                        "default)"]


def test_a_failed_training_step_asked_for_is_an_error(workspace, capsys):
    target = line_of(workspace, "def loss_not_scalar")
    code, _, problems = scan(capsys, "--target", "loss_not_scalar", "--train")
    assert code == 1
    assert problems == [f"net.py:{target}: error: 'loss_not_scalar': the training step failed: {LOSS}"]
    # unasked, the estimate that runs for a target with train options is a warning
    code, _, problems = scan(capsys, "--target", "loss_not_scalar")
    assert code == 0
    assert problems == [f"net.py:{target}: warning: 'loss_not_scalar': the training step failed: {LOSS}"]


@pytest.mark.parametrize(("flag", "name"), [("--latency", "latency measurement"), ("--memory", "memory measurement"),
                                            ("--layer-latency", "per-layer latency measurement")])
def test_every_failed_measurement_asked_for_is_an_error(workspace, capsys, flag, name):
    code, out, problems = scan(capsys, "--target", "measured", flag)
    assert code == 1
    assert "Total params: 330" in out  # the analysis stands: 32·10 + 10 parameters
    raised = line_of(workspace, "raise RuntimeError")
    assert f"net.py:{raised}: error: 'measured': the {name} failed: RuntimeError: only once" in problems


def test_check_says_the_same(workspace, capsys):
    path = "net.py"
    text = workspace.replace('# torchscan: input_shape=(32,)', '# torchscan: input_shape=(32,), measure=["memory"]')
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    assert main(["check", path, "--no-hints"]) == 1
    lines = capsys.readouterr().out.splitlines()
    options = [line for line in lines if "batch_for_own_inputs" in line]
    assert len(options) == 1 and options[0].startswith(f"net.py:{line_of(text, '# torchscan', 0)}:1: error: ")
    assert f"net.py:{line_of(text, 'def loss_not_scalar')}:1: warning: loss_not_scalar: the training step failed: {LOSS}" in lines
    # measure=["memory"] asked for it: an error on the target, naming the line that raised
    assert (f"net.py:{line_of(text, 'def measured')}:1: error: measured: the memory measurement failed: RuntimeError: "
            f"only once (raised at net.py:{line_of(text, 'raise RuntimeError')})") in lines
