"""A generator expression, comprehension or lambda on a line is part of that line (the source map's
``outputs``): the line ran once per run of its frame, not once per iteration of the expression, and
its value is what the whole expression made. Shapes derived by hand: ``Linear(8, 8)`` keeps
(1, 8); ``mean(-1)`` and ``sum(-1)`` of (1, 8) are (1,); three (1, 8) concatenated on the last
dimension are (1, 24)."""

from __future__ import annotations

from analysed import analysed, outputs
from workspace_files import line_of, write

BRANCHES = """
    import torch
    import torch.nn as nn


    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.branches = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

        def forward(self, x):
            total = sum(b(x).mean(-1) for b in self.branches)
            best = max((b(x).sum(-1) for b in self.branches), key=lambda t: float(t.sum()))
            cat = torch.cat([b(x) for b in self.branches], -1)
            outs = [
                b(x)
                for b in self.branches
            ]
            return total + best, cat, outs


    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Branches() for _ in range(2)])

        def forward(self, x):
            for blk in self.blocks:
                t, c, o = blk(x)
            return t


    # torchscan: input_shape=(8,)
    def build():
        return Twice()
"""


def test_an_expression_with_a_frame_of_its_own_is_its_line_s(tmp_path):
    text = write(tmp_path, {"net.py": BRANCHES})["net.py"]
    result = analysed(tmp_path, "net.py", "build", {"input_shape": [8]})
    found = outputs(result, "net.py")

    def shown(needle):
        entry = found[line_of(text, needle)]
        return [(t["name"], t["output"]["shape"]) for t in entry["targets"]], entry.get("runs", 1)

    # each line ran once in each of the two blocks: 2 runs, whatever its expression iterated over
    assert shown("total = sum(") == ([("total", [1])], 2)
    assert shown("best = max(") == ([("best", [1])], 2)
    assert shown("cat = torch.cat(") == ([("cat", [1, 24])], 2)
    # a comprehension over several lines: its element's line ran once per element, 3 in each block
    element = found[line_of(text, "            b(x)\n")]
    assert element["output"]["shape"] == [1, 8] and element["runs"] == 6
    # no operator is counted twice on a line, as its own and as under a function it called
    under = {(e["line"], e["operator"]) for e in result["source_map"]["under"] if e["file"] == "net.py"}
    assert (line_of(text, "total = sum("), "aten.mean") not in under


RESIDUAL = """
    import torch
    import torch.nn as nn


    def residual(fn, x):
        return x + fn(x)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fcs = nn.ModuleList([nn.Linear(4, 4), nn.Linear(8, 8)])

        def forward(self, x):
            for fc in self.fcs:
                x = residual(lambda t: fc(t), x)
                x = torch.cat([x, x], dim=-1)
            return x


    # torchscan: input_shape=(4,)
    def build():
        return Net()
"""


def test_a_lambda_a_helper_calls_is_the_line_that_made_it(tmp_path):
    # two passes of the loop: x (1, 4) + Linear(4, 4)(x) is (1, 4), concatenated to (1, 8); then
    # (1, 8) + Linear(8, 8) is (1, 8). The lambda runs inside residual, called from its own line:
    # each pass is one run of that line, not one per frame that touched it
    text = write(tmp_path, {"net.py": RESIDUAL})["net.py"]
    found = outputs(analysed(tmp_path, "net.py", "build", {"input_shape": [4]}), "net.py")
    line = found[line_of(text, "x = residual(lambda t: fc(t), x)")]
    assert (line["runs"], line["output"]["shape"]) == (2, [1, 4])
    assert line["range"] == {"distinct": 2, "min": [1, 4], "max": [1, 8]}
    helper = found[line_of(text, "return x + fn(x)")]
    assert (helper["runs"], helper["output"]["shape"]) == (2, [1, 4])
