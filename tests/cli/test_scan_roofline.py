"""``torchscan-lsp scan --roofline``: the roofline table in a terminal, its JSON and its HTML, and a
device name that is not in the table.

The model is ``Conv2d(3, 8, 3)`` then ``ReLU`` on a 1 x 3 x 32 x 32 float32 input. By hand, on the
H100 SXM (datasheet: 67 TFLOP/s float32, 3.35 TB/s): the convolution does 2 · (8 · 30 · 30) · 27 =
388,800 FLOPs and moves at least its input, weights and output once, (3,072 + 224 + 7,200) · 4 =
41,984 B, 41.0 KiB: 9.26 FLOPs per byte, below the ridge (67e12 / 3.35e12 = 20), so it is
memory-bound at 41,984 / 3.35e12 = 12.5 ns; the ReLU reads and writes 7,200 floats, 57,600 B,
56.2 KiB, in 17.2 ns.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workspace_files import line_of, run_scan as scan, write

NET = """
    import torch.nn as nn


    # torchscan: input_shape=(3, 32, 32){option}
    def build():
        return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "nets"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def rows(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Layer  Type"))
    found = {}
    for line in lines[start + 1:]:
        if line.startswith("Forward:"):
            break
        cells = line.split()
        found[cells[0]] = cells
    return found


def test_the_table_from_a_terminal(workspace):
    write(workspace, {"net.py": NET.format(option="")})
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "scan", "net.py", "--roofline", "H100-SXM"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Roofline on H100-SXM (NVIDIA H100 datasheet, dense): 67.0 TFLOP/s float32, 3.35 TB/s; ridge 20 FLOPs/B" in out
    table = rows(out)
    assert table["0"] == ["0", "Conv2d", "389", "kFLOPs", "41.0", "KiB", "9.26", "12.5", "ns", "memory"]
    assert table["1"] == ["1", "ReLU", "7.20", "kFLOPs", "56.2", "KiB", "0.125", "17.2", "ns", "memory"]
    assert "Forward: 29.7 ns layer by layer (memory-bound: 2 memory-bound, 0 compute-bound of 2 calls)" in out


def test_the_target_s_option_wins_and_the_json_holds_it(workspace, capsys):
    write(workspace, {"net.py": NET.format(option=', roofline="A100-80GB"')})
    code, out, err = scan(capsys, "net.py", "--roofline", "H100-SXM", "--format", "json")
    assert code == 0, err
    (entry,) = json.loads(out)
    roofline = entry["measurements"]["roofline"]
    assert roofline["ceilings"]["name"] == "A100-80GB"
    conv = roofline["layers"][0]
    assert (conv["path"], conv["bytes"], conv["bound"]) == ("0", 41984, "memory")
    assert conv["roofline_time"]["value"] == pytest.approx(41984 / 2039e9)  # A100 80GB SXM: 2,039 GB/s


def test_an_unknown_device_is_a_usage_error(workspace, capsys):
    write(workspace, {"net.py": NET.format(option="")})
    with pytest.raises(SystemExit) as stopped:
        scan(capsys, "net.py", "--roofline", "H10-SXM")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "argument --roofline: unknown device 'H10-SXM' (did you mean 'H100-SXM'?)" in err


def test_an_unknown_device_in_the_pragma_is_an_error_at_its_line(workspace, capsys):
    files = write(workspace, {"net.py": NET.format(option=', roofline="H100-SMX"')})
    code, out, err = scan(capsys, "net.py")
    assert code == 1
    line = line_of(files["net.py"], "# torchscan:")
    assert err.startswith(f"net.py:{line}: error: roofline: unknown device 'H100-SMX' (did you mean 'H100-SXM'?)")


def test_this_machine_with_the_layers_timed(workspace, capsys):
    write(workspace, {"net.py": NET.format(option="")})
    code, out, err = scan(capsys, "net.py", "--roofline", "--layer-latency", "--html", "out.html")
    assert code == 0, err
    assert "Roofline on this machine (" in out and ", measured): " in out
    header = next(line for line in out.splitlines() if line.startswith("Layer  Type"))
    assert header.split() == ["Layer", "Type", "FLOPs", "Bytes", "FLOPs/B", "Roofline", "Bound", "Measured", "Achieved",
                              "Of", "roofline"]
    # each call fits the cache many times over: replayed alone, it ran from cache or below its roofline
    for cells in rows(out).values():
        assert cells[-1] == "cache" or cells[-1].endswith("%"), cells
    page = (workspace / "out.html").read_text(encoding="utf-8")
    assert page.count('class="roofline-point"') == 2 and 'id="roofline-roof"' in page
