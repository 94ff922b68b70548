"""A ``torch.compile``'d model under ``scan``: Dynamo traces the user's forward, never this package's
hooks and attribution, so nothing the user sees names our files."""

from __future__ import annotations

import pytest

from torchscan_lsp.cli import main
from workspace_files import line_of, write

COMPILED = """
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            return self.fc(x.mean((2, 3)))


    # torchscan: input_shape=(3, 16, 16)
    def build():
        return torch.compile(Net(), backend="eager")
"""


@pytest.mark.parametrize("measure", [[], ["--layer-latency"]])
def test_a_compiled_model_gives_no_warning_about_our_files(tmp_path, monkeypatch, capsys, measure):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    files = write(tmp_path, {"net.py": COMPILED})
    code = main(["scan", "net.py", *measure])
    out, err = capsys.readouterr()
    assert code == 0, err
    # Before: Dynamo warned that it cannot trace sys._getframe and an lru_cache at 'sites.py:93'
    # (torchscan_lsp/worker/sites.py), and PyTorch that global hooks fire again for the wrapper.
    assert err == ""
    assert out.splitlines()[0] == f"net.py:{line_of(files['net.py'], 'def build')}: build"
    # the user's modules are still analysed: Conv2d(3, 8, 3) has 8·3·3·3 + 8 = 224 parameters,
    # Linear(8, 4) 8·4 + 4 = 36, 260 in all
    assert "Total params: 260" in out
    assert any(line.split()[:2] == ["|", "└─conv"] and "(1, 8, 14, 14)" in line for line in out.splitlines()), out
