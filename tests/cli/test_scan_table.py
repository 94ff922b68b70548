"""``scan``'s table: parameters and buffers in columns of their own, so that the rows add up to the
totals, and no cell cut short (a long class name, a long output)."""

from __future__ import annotations

import pytest

from workspace_files import run_scan as scan, write

MODEL = """
    import torch
    import torch.nn as nn


    class ConditionalGenerationHeadWithALongName(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(32, 4)

        def forward(self, x):
            y = self.proj(x.mean(dim=(2, 3)))
            return y, x, y.unsqueeze(0)


    # torchscan: input_shape=(3, 8, 8)
    def build():
        return nn.Sequential(nn.Conv2d(3, 32, 3, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                             ConditionalGenerationHeadWithALongName())
"""


@pytest.fixture
def table(tmp_path, monkeypatch, capsys) -> list[str]:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"net.py": MODEL})
    code, out, err = scan(capsys, "net.py")
    assert code == 0 and err == "", err
    return out.splitlines()


def _rows(lines: list[str]) -> dict[str, list[str]]:
    """The table's rows by layer name (its tree marks stripped), each cut into its cells at the
    columns where the header's titles start."""
    header = lines[2]
    starts = [header.index(title) for title in ("Layer", "Type", "Output Shape", "Param #", "Buffers", "Trainable")]
    first, last = [index for index, line in enumerate(lines) if line.startswith("=")]
    rows = {}
    for line in lines[first + 1:last]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        rows[cells[0].lstrip("├─|└ ")] = cells
    return rows


def test_parameters_and_buffers_have_columns_of_their_own(table):
    header = [cell.strip() for cell in table[2].split("    ") if cell.strip()]
    assert header == ["Layer", "Type", "Output Shape", "Param #", "Buffers", "Trainable"]
    rows = _rows(table)
    # BatchNorm2d(32): weight and bias, 32 + 32 = 64 parameters; running mean and variance
    # (32 + 32) and num_batches_tracked (1): 65 buffer elements, no longer folded into "Param #"
    assert rows["1"][1:] == ["BatchNorm2d", "(1, 32, 6, 6)", "64", "65", "True"]
    # Conv2d(3, 32, 3, bias=False): 32·3·3·3 = 864; Linear(32, 4): 32·4 + 4 = 132
    assert rows["0"][3:5] == ["864", "0"] and rows["proj"][3:5] == ["132", "0"]
    total = 864 + 64 + 132
    assert sum(int(cells[3].replace(",", "")) for cells in rows.values()) == total
    assert f"Total params: {total:,}" in table
    assert "Total buffers: 65" in table


def test_no_cell_is_cut_short(table):
    rows = _rows(table)
    head = rows["3"]
    # the whole class name (38 characters, over the reference's 20-character Type column) and the
    # whole output: (y, x, y.unsqueeze(0)) with y (1, 4) and x (1, 32, 6, 6)
    assert head[1] == "ConditionalGenerationHeadWithALongName"
    assert head[2] == "((1, 4), (1, 32, 6, 6), (1, 1, 4))"
    assert not any("…" in line or "[...]" in line for line in table)


def test_modules_the_forward_never_called_are_listed_under_the_table(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"skip.py": """
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.head = nn.Linear(8, 100)
                self.emb = nn.Embedding(8, 8)
                self.emb.weight = self.body.weight

            def forward(self, x):
                return self.body(x)


        # torchscan: input_shape=(8,)
        def build():
            return Net()
    """})
    code, out, err = scan(capsys, "skip.py")
    assert code == 0 and err == "", err
    lines = out.splitlines()
    # body 8·8 + 8 = 72 in its row; head 8·100 + 100 = 900 in none: Total params is 972
    assert "Total params: 972" in lines
    start = lines.index("Never called in the forward pass (2), so in no row; Total params counts their parameters:")
    assert lines[start + 1] == "  head (Linear): 900 params"
    # emb's only parameter is body's weight (8 · 8), counted in body's row
    assert lines[start + 2] == "  emb (Embedding): 64 params shared with body (counted there)"
