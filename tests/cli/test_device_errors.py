"""A device that cannot be used is said in its own words, once, at the target's pragma: a model
built on the meta device for another device, a CUDA device on a machine without one, a device type
PyTorch does not know. ``scan`` and ``check`` place it alike."""

from __future__ import annotations

import pytest
import torch

from torchscan_lsp.cli import main
from workspace_files import line_of, write

SOURCE = """
    import torch
    from torch import nn


    # torchscan: input_shape=(8,)
    def built_on_meta():
        with torch.device("meta"):
            return nn.Linear(8, 4)


    # torchscan: input_shape=(8,), device="cuda"
    def on_cuda():
        return nn.Linear(8, 4)


    # torchscan: input_shape=(8,), device="tpu"
    def on_tpu():
        return nn.Linear(8, 4)


    # torchscan: input_shape=(8,), device="meta"
    def meta_on_meta():
        with torch.device("meta"):
            return nn.Linear(8, 4)
"""

EXPECTED = {
    "built_on_meta": "builds its model (or its inputs) on the meta device, which holds no data to move to 'cpu'; "
                     "set device=\"meta\" to analyse it there",
    "on_cuda": "device 'cuda' is not available: this machine has no CUDA GPU",
    "on_tpu": "unknown device 'tpu'; write a device PyTorch knows",
}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path, write(tmp_path, {"comp.py": SOURCE})["comp.py"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on_cuda runs where CUDA is")
def test_scan_says_what_is_wrong_at_the_pragma(workspace, capsys):
    _, text = workspace
    assert main(["scan", "comp.py"]) == 1
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == len(EXPECTED)
    for name, words in EXPECTED.items():
        pragma = line_of(text, "# torchscan", list(EXPECTED).index(name))
        (line,) = [e for e in errors if e.startswith(f"comp.py:{pragma}: ")]
        assert words in line
    # a model on the meta device analysed on it: its parameters, 8·4 + 4 = 36
    assert "comp.py:" + str(line_of(text, "def meta_on_meta")) + ": meta_on_meta" in out
    assert "Total params: 36" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="on_cuda runs where CUDA is")
def test_check_reports_each_once_at_the_pragma(workspace, capsys):
    _, text = workspace
    assert main(["check", "comp.py", "--no-hints"]) == 1
    errors = [line for line in capsys.readouterr().out.splitlines() if ": error: " in line]
    # one diagnostic each, on its pragma, with no "(raised at ...)": nothing was raised there
    assert len(errors) == len(EXPECTED)
    for index, (name, words) in enumerate(EXPECTED.items()):
        (line,) = [e for e in errors if f": error: {name}: " in e]
        assert line.startswith(f"comp.py:{line_of(text, '# torchscan', index)}:1: ")
        assert words in line and "raised at" not in line
