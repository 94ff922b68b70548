"""The roofline in hovers as headless Neovim 0.11 receives them, through the editors/nvim plugin and
the real server: a target with ``roofline="H100-SXM"`` (its module line and its target line).

By hand, on the H100 SXM (datasheet: 67 TFLOP/s float32, 3.35 TB/s): ``Conv2d(3, 8, 3)`` on a 1 x 3 x
32 x 32 input does 2 · (8 · 30 · 30) · 27 = 388,800 FLOPs and moves at least (3,072 + 224 + 7,200) ·
4 = 41,984 B (41.0 KiB): 9.26 FLOPs per byte, below the ridge at 20, memory-bound in
41,984 / 3.35e12 = 12.5 ns; its compute term is 388,800 / 67e12 = 5.80 ns. Its DMAs, each output
reading its 27-element window, are 807,296 B (788 KiB): 0.482 FLOPs per byte.
"""

import json
import subprocess
import sys
from pathlib import Path

from editor_workspace import NET, REPO, find_nvim, line_of

CLIENT = Path(__file__).with_name("nvim_hover.lua")
MODEL = f"""\
import torch.nn as nn


{NET}

# torchscan: input_shape=(3, 32, 32), roofline="H100-SXM"
def build():
    return Net()
"""


def test_the_roofline_in_the_hovers(tmp_path, client_env):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n')
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    module_line, target_line = line_of(MODEL, "self.conv = nn.Conv2d"), line_of(MODEL, "def build")
    out = tmp_path / "hovers.json"
    done = subprocess.run([find_nvim(), "--headless", "--clean", "-l", str(CLIENT), str(REPO / "editors" / "nvim"),
                           sys.executable, str(model), str(out), str(module_line), str(target_line)],
                          cwd=tmp_path, env=client_env, capture_output=True, text=True, timeout=300)
    assert out.exists(), f"nvim wrote no result (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    received = json.loads(out.read_text())
    assert received["settled"] and received["status"] == "done" and received["messages"] == [], received
    heading = "**Roofline** on H100-SXM (NVIDIA H100 datasheet, dense): 67.0 TFLOP/s float32, 3.35 TB/s; ridge 20 FLOPs/B"

    module = received["hovers"][str(module_line)]
    assert heading in module
    assert "roofline 12.5 ns, memory-bound (9.26 FLOPs/B over 41.0 KiB)" in module
    assert "compute 5.80 ns (389 kFLOPs); memory 12.5 ns (41.0 KiB:" in module
    assert "over its DMAs (788 KiB, no reuse): 0.482 FLOPs/B" in module

    target = received["hovers"][str(target_line)]
    assert heading in target
    assert "Forward: 12.5 ns layer by layer (memory-bound: 1 memory-bound, 0 compute-bound of 1 call)" in target
    assert "- `conv` (Conv2d): roofline 12.5 ns, memory-bound" in target
