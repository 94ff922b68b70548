"""What an edit cost, as headless Neovim 0.11 sees it with the editors/nvim plugin, on a git workspace
whose model is committed: a widened layer saved, then reverted, a comment-only edit, a new target,
and a lower-bound target widened. nvim_deltas.lua saves each edit and writes what Neovim received.

The deltas are derived by hand from the two layer sizes. Conv2d(3, c, 3) on (1, 3, 32, 32): 28c
parameters (27c weights, c biases) and c·30·30 outputs of 54 FLOPs each (27 products, 26 sums, the
bias); so 8 → 12 channels is 224 → 336 parameters (+112) and 388,800 → 583,200 FLOPs (+50 %), and
the MACs, c·900·27, 194,400 → 291,600 (+50 %).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from editor_workspace import MODEL, REPO, find_nvim, line_of, si

PLUGIN = REPO / "editors" / "nvim"
CLIENT = Path(__file__).with_name("nvim_deltas.lua")

WIDE = MODEL.replace("nn.Conv2d(3, 8, 3)", "nn.Conv2d(3, 12, 3)")
COMMENTED = MODEL.replace("    def forward(self, x):", "    # the forward pass: one convolution\n    def forward(self, x):")
SECOND = MODEL + "\n\n# torchscan: input_shape=(3, 16, 16)\ndef build_small():\n    return Net()\n"

LOWER = """\
import torch
import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.linalg.qr(self.lin(x))[0]


# torchscan: input_shape=(4, 4)
def mixer():
    return Mixer()
"""
LOWER_WIDE = LOWER.replace("nn.Linear(4, 4)", "nn.Linear(4, 8)")

TARGET = line_of(MODEL, "def build")
CONV = line_of(MODEL, "self.conv = nn.Conv2d")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   check=True, capture_output=True)


@pytest.fixture(scope="module")
def steps(tmp_path_factory, client_env) -> dict:
    root = tmp_path_factory.mktemp("git-workspace")
    (root / "pyproject.toml").write_text('[project]\nname = "models"\n')
    (root / "model.py").write_text(MODEL)
    (root / "lower.py").write_text(LOWER)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "models")
    plan = [
        {"name": "committed", "file": "model.py", "text": None, "target": TARGET, "until": "No change since HEAD"},
        {"name": "widened", "file": "model.py", "text": WIDE, "target": TARGET, "until": "Changes since HEAD"},
        {"name": "reverted", "file": "model.py", "text": MODEL, "target": TARGET, "until": "No change since HEAD"},
        {"name": "comment", "file": "model.py", "text": COMMENTED, "target": TARGET + 1, "until": "No change since HEAD"},
        {"name": "new-target", "file": "model.py", "text": SECOND, "target": line_of(SECOND, "def build_small"),
         "until": "No delta against HEAD"},
        {"name": "lower-bound", "file": "lower.py", "text": LOWER_WIDE, "target": line_of(LOWER, "def mixer"),
         "until": "Changes since HEAD"},
    ]
    folder = tmp_path_factory.mktemp("nvim-deltas")
    (folder / "steps.json").write_text(json.dumps(plan))
    out = folder / "out.json"
    command = [find_nvim(), "--headless", "--clean", "-l", str(CLIENT), str(PLUGIN), sys.executable, str(root),
               str(out), str(folder / "steps.json")]
    ran = subprocess.run(command, cwd=folder, env=client_env, capture_output=True, text=True, timeout=900)
    assert out.exists(), f"nvim wrote no result (exit {ran.returncode}):\n{ran.stdout}\n{ran.stderr}"
    seen = json.loads(out.read_text())
    assert "error" not in seen, seen["error"]
    return {step["name"]: step for step in seen["steps"]}


def hint(step: dict, line: int) -> str:
    return step["hints"].get(str(line), "")


def no_delta(step: dict) -> bool:
    """Whether no hint of the step carries a change (``(+112)``, ``(−3 %)``, ``(+5 known)``, ``(new)``)."""
    labels = " ".join(step["hints"].values())
    return step["hints"] and not any(mark in labels for mark in ("(+", "(−", "known)", "(new)"))


def test_a_committed_model_shows_no_delta(steps):
    committed = steps["committed"]
    assert hint(committed, TARGET) == f"224 params · {si(194_400, 'MACs')} · {si(388_800, 'FLOPs')}"
    assert no_delta(committed)
    assert "**No change since HEAD (" in committed["hover"]


def test_a_widened_layer_shows_its_deltas_derived_from_the_two_sizes(steps):
    widened = steps["widened"]
    assert (28 * 12 - 28 * 8, 12 * 900 * 54 / (8 * 900 * 54)) == (112, 1.5)
    assert hint(widened, CONV) == "336 params (+112) · 583 kFLOPs (+50 %)"
    assert hint(widened, TARGET) == "336 params (+112) · 583 kFLOPs (+50 %)"
    hover = widened["hover"]
    assert "Changes since HEAD (" in hover and ": +112 params · +50 % MACs · +50 % FLOPs" in hover
    assert ("| `conv` | Conv2d | changed | 224 → 336 (+112) | 389 kFLOPs → 583 kFLOPs (+50 %) "
            "| (1, 8, 30, 30) → (1, 12, 30, 30) |") in hover
    assert "Compare with HEAD: +112 params · +50 % FLOPs" in widened["lenses"]


def test_reverting_the_edit_removes_the_deltas(steps):
    reverted = steps["reverted"]
    assert hint(reverted, CONV) == "224 params · 389 kFLOPs"
    assert no_delta(reverted)


def test_a_comment_only_edit_shows_no_delta(steps):
    commented = steps["comment"]
    # the file differs from HEAD, so its baseline was analysed: the same numbers, no delta
    assert "**No change since HEAD (" in commented["hover"]
    assert no_delta(commented)


def test_a_new_target_has_no_delta_and_one_line_says_why(steps):
    new = steps["new-target"]
    line = line_of(SECOND, "def build_small")
    # Conv2d(3, 8, 3) on 16×16: 8·14·14 = 1,568 outputs of 54 FLOPs
    assert hint(new, line) == f"224 params · {si(1568 * 27, 'MACs')} · {si(1568 * 54, 'FLOPs')}"
    assert new["hover"].count("No delta against HEAD") == 1
    assert "No delta against HEAD: `build_small` is new since HEAD." in new["hover"]


def test_a_lower_bound_delta_is_said_as_one(steps):
    lower = steps["lower-bound"]
    # torch.linalg.qr has no FLOP formula: both totals are lower bounds, and so is their difference.
    # Linear(4, w) on (1, 4, 4): 2·4·4·w FLOPs, 128 → 256; 4w + w parameters, 20 → 40 (exact)
    assert hint(lower, line_of(LOWER, "def mixer")) == (
        "40 params (+20) · ≥ 256 FLOPs (+128 known)")
