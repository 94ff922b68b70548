"""``scan`` and ``check`` of files outside the workspace root: each is analysed under the root its
path has alone, and reported exactly as when it is the command's only path."""

from __future__ import annotations

import json

import pytest

from torchscan_lsp.cli import main
from workspace_files import line_of, run_scan as scan, write

# Linear(4, 8) + ReLU + Linear(8, 2) on (1, 4): 4·8+8 + 8·2+2 = 58 parameters, 4·8 + 8·2 = 48 MACs,
# 2·48 = 96 FLOPs of the matrix products plus the ReLU's 8 = 104 FLOPs
MLP = """
    import torch.nn as nn


    # torchscan: input_shape=(4,)
    def build():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
"""

# Linear(4, 3) on (1, 4): 4·3+3 = 15 parameters, 12 MACs, 24 FLOPs
NARROW = """
    import torch.nn as nn


    # torchscan: input_shape=(4,)
    def build():
        return nn.Linear(4, 3)
"""

RAISES = """
    import torch.nn as nn


    # torchscan: input_shape=(4,)
    def build():
        layers = [nn.Linear(4, 8)]
        raise ValueError("no model for you")
"""


@pytest.fixture
def two_roots(tmp_path, monkeypatch):
    """A git repository ``a`` (the current folder, so the command's root) and a folder ``b``
    beside it, outside that root."""
    (tmp_path / "a" / ".git").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    return tmp_path / "a", tmp_path / "b"


def test_scan_reports_a_file_outside_the_root_as_alone(two_roots, capsys):
    a, b = two_roots
    write(a, {"lines.py": MLP})
    files = write(b, {"m1.py": MLP})
    outside = str((b / "m1.py").resolve())  # below no current folder: named by its absolute path
    code, alone, err = scan(capsys, outside)
    assert code == 0, err
    code, out, err = scan(capsys, "lines.py", outside)
    assert code == 0 and err == "", err
    both = out.split("\n\n")
    assert both[0].splitlines()[0] == f"lines.py:{line_of(MLP.lstrip(), 'def build')}: build"
    assert both[1].splitlines()[0] == f"{outside}:{line_of(files['m1.py'], 'def build')}: build"
    assert both[1] + "\n\n" == alone
    assert out.count("Total params: 58\n") == 2 and out.count("Operator forward FLOPs: 104.00 FLOPs\n") == 2

    code, out, _ = scan(capsys, "lines.py", outside, "--format", "json")
    assert code == 0
    ours, theirs = json.loads(out)
    assert [ours["file"], theirs["file"]] == ["lines.py", outside]
    assert theirs["report"]["totals"]["parameters"]["value"] == 58
    # the file is named relative to its own root, b, as when it is scanned alone
    assert theirs["imported_files"] == ["m1.py"]
    assert theirs["source_map"]["modules"][0]["defined_at"] == {"file": "m1.py", "line": 6}


def test_scan_html_writes_a_page_for_a_file_outside_the_root(two_roots, capsys):
    a, b = two_roots
    write(a, {"lines.py": MLP})
    write(b, {"m1.py": NARROW})
    code, _, err = scan(capsys, "lines.py", "../b/m1.py", "--html", "out.html")
    assert code == 0, err
    assert err.splitlines() == ["wrote out.lines.build.html (lines.py: build)",
                                f"wrote out.m1.build.html ({(b / 'm1.py').resolve()}: build)"]
    assert "Linear" in (a / "out.m1.build.html").read_text(encoding="utf-8")


def _check(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out.splitlines()


def test_check_reports_files_outside_the_root_as_alone(two_roots, capsys):
    a, b = two_roots
    write(a, {"lines.py": MLP})
    # lines.py also in b: the same workspace-relative name as a's, under another root
    write(b, {"lines.py": NARROW, "bad.py": RAISES})
    code, alone = _check(capsys, "../b/lines.py", "../b/bad.py")
    assert code == 1
    code, lines = _check(capsys, "lines.py", "../b/lines.py", "../b/bad.py")
    assert code == 1
    # "def build():" is 12 characters: each target's hint stands at column 13 of its def line (5)
    assert [line for line in lines if line.startswith("lines.py:")] == [
        "lines.py:5:13: hint: 58 params · 48 MACs · 104 FLOPs",
        "lines.py:6:70: hint: 58 params · 104 FLOPs",
    ]
    assert [line for line in lines if line.startswith("../b/lines.py:")] == [
        "../b/lines.py:5:13: hint: 15 params · 12 MACs · 24 FLOPs",
        "../b/lines.py:6:27: hint: 15 params · 24 FLOPs",
    ]
    bad = [line for line in lines if line.startswith("../b/bad.py:")]
    assert [line.split(": error: ")[0] for line in bad] == ["../b/bad.py:5:1", "../b/bad.py:7:5"]
    assert bad[0].endswith("ValueError: no model for you (raised at ../b/bad.py:7)")
    assert [line for line in lines if line.startswith("../b/")] == alone


def test_check_sarif_locates_a_file_outside_the_root_by_its_own_uri(two_roots, capsys):
    a, b = two_roots
    write(b, {"bad.py": RAISES})
    write(a, {"lines.py": MLP})
    code, lines = _check(capsys, "lines.py", "../b/bad.py", "--format", "sarif")
    assert code == 1
    (run,) = json.loads("\n".join(lines))["runs"]
    located = {(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                result["locations"][0]["physicalLocation"]["region"]["startLine"]) for result in run["results"]}
    assert located == {((b / "bad.py").resolve().as_uri(), 5), ((b / "bad.py").resolve().as_uri(), 7)}
