"""One story in every view, in headless Neovim 0.11 (the editors/nvim plugin against the real
server), ``check`` and ``scan --html`` on the same workspace:

- the HTML report's module table has the hover's numbers, the headline method's first, and its
  diagnostics are the ones the editor and ``check`` show (not the report's raw list);
- a misspelt pragma tag is an information at its line;
- an import that fails inside an installed library shows the innermost frames of its traceback
  in the diagnostics and in the target's hover;
- the Python warnings of a frozen model are in the target's hover, nowhere else.

Every number is derived by hand below.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from editor_workspace import REPO, find_nvim, line_of, si
from fake_library import FAKEDIFF_MESSAGE, fakediff_frames, install
from workspace_files import write

CLIENT = Path(__file__).with_name("nvim_gallery.lua")
SEVERITIES = {1: "error", 2: "warning", 3: "info", 4: "hint"}

NET = """
    import torch
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(channels)

        def forward(self, x):
            return torch.relu(x + self.bn(self.conv(x)))


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.block = Block(8)
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            x = self.block(self.stem(x))
            pooled = x.mean(dim=(2, 3))
            basis, _ = torch.linalg.qr(pooled.reshape(2, 4))
            return self.head(pooled) + basis.sum()


    # torchscan: input_shape=(3, 8, 8)
    def build():
        return Net()
"""

# By hand, on (1, 3, 8, 8): every convolution keeps the 8×8 grid (padding 1): 512 outputs.
#   stem  Conv2d(3, 8, 3): 8·27 + 8 = 224 parameters; 512·27 = 13,824 MACs; 2·13,824 = 27,648 FLOPs
#         (dispatched: 2 per multiply-accumulate; the formula's 512·(2·27 − 1 + 1) is the same)
#   conv  Conv2d(8, 8, 3, bias=False): 8·72 = 576; 512·72 = 36,864 MACs; 73,728 FLOPs
#   bn    BatchNorm2d(8) in evaluation: 2·8 = 16 parameters; 0 MACs dispatched;
#         2C + 2N + N + N = 16 + 4·512 = 2,064 FLOPs (docs/operator-formulas.md)
#   block its children and its own x + y and relu (512 each): 73,728 + 2,064 + 512 + 512 = 76,816
#         FLOPs, 36,864 MACs, 576 + 16 = 592 parameters
#   head  Linear(8, 4): 8·4 + 4 = 36; 32 MACs; 64 FLOPs
# torch.linalg.qr in Net's own forward has no FLOP formula: the root and the totals are lower
# bounds, and that line gets the one warning.
MODULES = {  # hover line (its text) -> path, parameters, operator FLOPs, operator MACs
    "self.stem = nn.Conv2d": ("stem", 224, 27_648, 13_824),
    "self.block = Block(8)": ("block", 592, 76_816, 36_864),
    "self.conv = nn.Conv2d": ("block.conv", 576, 73_728, 36_864),
    "self.bn = nn.BatchNorm2d": ("block.bn", 16, 2_064, 0),
    "self.head = nn.Linear": ("head", 36, 64, 32),
}

TYPO = """
    import torch.nn as nn


    # torchscna: input_shape=(3, 32, 32)
    def build():
        return nn.Conv2d(3, 8, 3)


    # torchscan: input_shape=(4,)
    def head():
        return nn.Linear(4, 2)
"""

LIBRARY_MODEL = """
    from fakediff import UNet


    # torchscan: input_shape=(4,)
    def build():
        return UNet()
"""

FROZEN = """
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            return checkpoint(self.fc, x, use_reentrant=True)


    # torchscan: input_shape=(16,)
    def frozen():
        model = nn.Sequential(Block(), nn.Linear(16, 4))
        for p in model.parameters():
            p.requires_grad_(False)
        return model
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    base = tmp_path_factory.mktemp("views")
    library = install(base / "lib" / "site-packages")
    root = base / "ws"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "views"\n', encoding="utf-8")
    texts = write(root, {"net.py": NET, "typo.py": TYPO, "uses_library.py": LIBRARY_MODEL, "frozen.py": FROZEN})
    env = {**os.environ, "PYTHONPATH": str(base / "lib" / "site-packages"),
           "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}
    return root, texts, library, env


@pytest.fixture(scope="module")
def neovim(workspace):
    root, texts, _, env = workspace
    hovers = {"net.py": [line_of(texts["net.py"], needle) for needle in MODULES],
              "uses_library.py": [line_of(texts["uses_library.py"], "def build")],
              "frozen.py": [line_of(texts["frozen.py"], "def frozen")]}
    targets = {"net.py": [line_of(texts["net.py"], "def build")], "typo.py": [line_of(texts["typo.py"], "def head")],
               "frozen.py": [line_of(texts["frozen.py"], "def frozen")]}
    spec = [{"path": str(root / name), "name": name, "targets": targets.get(name, []), "hovers": hovers.get(name, [])}
            for name in texts]
    (root.parent / "spec.json").write_text(json.dumps(spec))
    out = root.parent / "nvim.json"
    done = subprocess.run([find_nvim(), "--headless", "--clean", "-l", str(CLIENT), str(REPO / "editors" / "nvim"),
                           sys.executable, str(root.parent / "spec.json"), str(out)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=540)
    assert out.exists(), f"nvim wrote no result (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    received = json.loads(out.read_text())
    assert received["settled"] and received["messages"] == [], received["messages"]
    return received["files"]


def _run(workspace, *argv):
    root, _, _, env = workspace
    return subprocess.run([sys.executable, "-m", "torchscan_lsp", *argv], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def check(workspace):
    done = _run(workspace, "check", ".", "--no-hints")
    assert done.returncode == 1, done.stdout + done.stderr  # the library import is an error
    found = {}
    for line in done.stdout.splitlines():
        file, number, _, severity, message = re.match(r"(.+?):(\d+):(\d+): (\w+): (.*)", line).groups()
        found.setdefault(file, []).append((int(number), severity, message))
    return found


class _Tables(HTMLParser):
    """The rows (cell texts) of every table of a page, by the table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("class") or "", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def page(workspace):
    root = workspace[0]
    done = _run(workspace, "scan", "net.py", "--html", "report.html")
    assert done.returncode == 0, done.stderr
    parser = _Tables()
    parser.feed((root / "report.html").read_text(encoding="utf-8"))
    return parser.tables


def _exact(cell: str) -> tuple[bool, int]:
    """A page cell's number in full: ``"≥ 105,047 FLOPs partial"`` → (lower bound, 105047)."""
    found = re.match(r"(≥ )?([\d,]+) ", cell)
    return bool(found[1]), int(found[2].replace(",", ""))


def test_the_pages_module_table_headlines_the_operators_and_names_both_methods(page):
    header, *_ = page["modules"]
    assert header == ["path", "call", "type", "output", "parameters", "FLOPs (dispatched operators)", "share of FLOPs",
                      "MACs (dispatched operators)", "FLOPs (module formulas)", "MACs (module formulas)"]


def test_the_pages_numbers_are_the_hovers(page, neovim, workspace):
    texts = workspace[1]
    rows = {row[0]: row for row in page["modules"][1:]}
    hovers = {int(line): text for line, text in neovim["net.py"]["hovers"].items()}
    for needle, (path, parameters, flops, macs) in MODULES.items():
        row, hover = rows[path], hovers[line_of(texts["net.py"], needle)]
        # the page, in full, against the hand-derived counts
        assert int(row[4]) == parameters and _exact(row[5]) == (False, flops) and _exact(row[7]) == (False, macs), row
        # the hover, shortened, against the same
        assert f"Parameters: {parameters:,} (" in hover, hover
        assert f"| **dispatched operators** (shown) | {si(flops, 'FLOPs')} | {si(macs, 'MACs')} | — |" in hover, hover
        # and the other method, named in both, the same in both
        bound, value = _exact(row[8])
        beside = f"{'≥ ' if bound else ''}{si(value, 'FLOPs')}"
        bound, value = _exact(row[9])
        beside += f" | {'≥ ' if bound else ''}{si(value, 'MACs')}"
        assert f"| module formulas | {beside} |" in hover, (beside, hover)


def test_the_pages_diagnostics_are_the_editors_and_checks(page, neovim, check, workspace):
    texts = workspace[1]
    shown = [(int(where.rsplit(":", 1)[1]), severity, message) for severity, where, _, message in page["findings"][1:]]
    qr_line = line_of(texts["net.py"], "torch.linalg.qr") + 1
    target_line = line_of(texts["net.py"], "def build") + 1
    # one warning where the operator without a formula ran, one note on the target; the module
    # formulas' own gaps (the residual add, the mean) are detail, as in the editor
    assert [(line, severity) for line, severity, _ in shown] == [(qr_line, "warning"), (target_line, "information")]
    assert shown[0][2].startswith("aten.linalg_qr has no FLOP formula (1 call, in the root module)")
    assert [(line, "information" if severity == "info" else severity, message)
            for line, severity, message in check["net.py"]] == shown
    editor = sorted((d["line"] + 1, SEVERITIES[d["severity"]], d["message"]) for d in neovim["net.py"]["diagnostics"])
    assert [(line, "information" if severity == "info" else severity, message)
            for line, severity, message in editor] == shown


def test_a_misspelt_pragma_is_an_information_at_its_line(neovim, check, workspace):
    texts = workspace[1]
    line = line_of(texts["typo.py"], "# torchscna:") + 1
    message = ("this comment is not a pragma: did you mean '# torchscan: input_shape=(3, 32, 32)'? "
               "(the tag 'torchscna' is not 'torchscan')")
    assert check["typo.py"] == [(line, "info", message)]
    assert [(d["line"] + 1, SEVERITIES[d["severity"]], d["message"]) for d in neovim["typo.py"]["diagnostics"]] == [
        (line, "info", message)]


def test_a_failed_library_import_shows_its_innermost_frames(neovim, check, workspace):
    _, texts, library, _ = workspace
    frames = fakediff_frames(library)
    chain = " → ".join(f"{f['file']}:{f['line']} in {f['function']} (`{f['source']}`)" for f in frames)
    errors = [d for d in neovim["uses_library.py"]["diagnostics"] if d["severity"] == 1]
    # at the import (line 1) and on the target, each naming where in the library it failed
    assert sorted(d["line"] + 1 for d in errors) == [1, line_of(texts["uses_library.py"], "def build") + 1]
    for diagnostic in errors:
        assert f"RuntimeError: Failed to import fakediff.unet" in diagnostic["message"]
        assert f"(innermost frames: {chain})" in " ".join(diagnostic["message"].split())
    assert [message for _, severity, message in check["uses_library.py"] if severity == "error"][0].endswith(
        f"RuntimeError: {FAKEDIFF_MESSAGE} (innermost frames: {chain})")
    # the target's hover lists them as Python prints a traceback, innermost last
    (hover,) = neovim["uses_library.py"]["hovers"].values()
    assert "Innermost frames of the traceback (PyTorch's own left out):" in hover
    listed = "\n".join(f'  File "{f["file"]}", line {f["line"]}, in {f["function"]}\n    {f["source"]}' for f in frames)
    assert listed in hover, hover


def test_a_frozen_models_python_warnings_are_in_its_hover_only(neovim, check):
    (hover,) = neovim["frozen.py"]["hovers"].values()
    assert re.search(r"Python warnings while it ran \(1\): UserWarning: None of the inputs have requires_grad=True\. "
                     r"Gradients will be None \(raised at torch/utils/checkpoint\.py:\d+\)", hover), hover
    assert neovim["frozen.py"]["diagnostics"] == [] and "frozen.py" not in check
