"""What each line computed, run by run (the source map's ``outputs`` and ``under``): the names a line
assigned, the operators under the plain functions it called, the first run of a line in a loop and
how the shapes of its runs varied. Shapes and FLOPs derived by hand in each test: an addition or
multiplication is one FLOP per output element; a Linear(i, o) without bias on n rows, 2·n·i·o."""

from __future__ import annotations

import json
from pathlib import Path

from torchscan_lsp.worker.runner import run_job
from workspace_files import line_of, write


def run(root: Path, rel: str, target: str, options: dict) -> dict:
    result = run_job({"workspace_root": str(root), "file": str(root / rel), "target": target, "options": options})
    assert result["ok"] is True, result
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    return result


def outputs(result: dict, file: str) -> dict[int, dict]:
    return {o["line"]: o for o in result["source_map"]["outputs"] if o["file"] == file}


def under(result: dict, file: str, line: int) -> dict[str, tuple[int, int | None]]:
    """The operators under a line's plain-function calls: name -> (calls, FLOPs), over its runs."""
    found: dict[str, tuple[int, int | None]] = {}
    for entry in result["source_map"]["under"]:
        if entry["file"] == file and entry["line"] == line:
            calls, flops = found.get(entry["operator"], (0, 0))
            found[entry["operator"]] = (calls + entry["calls"],
                                        None if flops is None or entry["flops"] is None else flops + entry["flops"])
    return found


def targets(entry: dict) -> list[tuple[str, list[int] | str]]:
    return [(t["name"], t["output"].get("shape") or t["output"]["kind"]) for t in entry["targets"]]


HELPERS = """
    import torch
    import torch.nn as nn


    def split_heads(x, heads):
        b, t, c = x.shape
        doubled = x * 2
        return doubled.view(b, t, heads, c // heads), (t, c // heads)


    def shift(x):
        return x + 1


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(8, 8, bias=False)
            self.wk = nn.Linear(8, 4, bias=False)

        def forward(self, x):
            q, k = self.wq(x), self.wk(x)
            heads, (length, width) = split_heads(q, 2)
            moved = shift(k)
            return heads, moved


    # torchscan: input_shape=(3, 8)
    def build():
        model = Attention()
        return model
"""


def test_each_name_a_line_assigned_gets_its_value(tmp_path):
    text = write(tmp_path, {"net.py": HELPERS})["net.py"]
    result = run(tmp_path, "net.py", "build", {"input_shape": [3, 8]})
    found = outputs(result, "net.py")
    # x is (1, 3, 8): wq gives (1, 3, 8), wk (1, 3, 4); the line's last value is wk's
    both = found[line_of(text, "q, k = self.wq(x)")]
    assert targets(both) == [("q", [1, 3, 8]), ("k", [1, 3, 4])]
    assert both["call"] == "wk" and both["output"]["shape"] == [1, 3, 4]
    # a plain function returning a tuple: its first value is (1, 3, 2, 4), its second two ints
    heads = found[line_of(text, "heads, (length, width) = split_heads")]
    assert targets(heads) == [("heads", [1, 3, 2, 4]), ("length", "scalar"), ("width", "scalar")]
    # the helper's operators ran under this line: q * 2 over 1·3·8 = 24 elements, then a view
    assert under(result, "net.py", line_of(text, "heads, (length, width)")) == {
        "aten.mul": (1, 24), "aten.view": (1, None)}
    # a one-name line that called a plain function: its value, and k + 1 over 1·3·4 = 12 elements under it
    moved = found[line_of(text, "moved = shift(k)")]
    assert targets(moved) == [("moved", [1, 3, 4])] and moved["output"]["shape"] == [1, 3, 4]
    assert under(result, "net.py", line_of(text, "moved = shift(k)")) == {"aten.add": (1, 12)}
    # the helper's own lines keep their operators, as before
    assert found[line_of(text, "doubled = x * 2")]["operator"] == "aten.mul"
    # each line ran once: no runs are said
    assert "runs" not in both and "runs" not in moved


def test_the_model_built_on_a_line_of_the_factory_is_defined_there(tmp_path):
    text = write(tmp_path, {"net.py": HELPERS})["net.py"]
    result = run(tmp_path, "net.py", "build", {"input_shape": [3, 8]})
    root = next(m for m in result["source_map"]["modules"] if m["layer"] == 0)
    assert root["defined_at"] == {"file": "net.py", "line": line_of(text, "model = Attention()")}


LOOPS = """
    import torch.nn as nn


    class Pyramid(nn.Module):
        def __init__(self):
            super().__init__()
            self.grow = nn.ModuleList(
                [
                    nn.Linear(4 * 2 ** i, 4 * 2 ** (i + 1), bias=False)
                    for i in range(3)
                ]
            )
            self.same = nn.ModuleList([nn.Linear(32, 32, bias=False) for _ in range(2)])

        def forward(self, x):
            for layer in self.grow:
                x = layer(x)
            for layer in self.same:
                x = layer(x) * 2
            return x
"""


def test_a_line_in_a_loop_shows_its_first_run_and_how_its_shapes_varied(tmp_path):
    text = write(tmp_path, {"net.py": LOOPS})["net.py"]
    result = run(tmp_path, "net.py", "Pyramid", {"input_shape": [4]})
    found = outputs(result, "net.py")
    # Linear(4, 8), Linear(8, 16), Linear(16, 32) on (1, 4): the first run gives (1, 8), then (1, 16)
    # and (1, 32): three runs, three shapes, from (1, 8) to (1, 32)
    grow = found[line_of(text, "x = layer(x)\n")]
    assert grow["output"]["shape"] == [1, 8] and targets(grow) == [("x", [1, 8])]
    assert grow["runs"] == 3 and grow["range"] == {"distinct": 3, "min": [1, 8], "max": [1, 32]}
    assert grow["targets"][0]["range"] == {"distinct": 3, "min": [1, 8], "max": [1, 32]}
    # two Linear(32, 32) and a doubling: two runs of one shape, (1, 32)
    same = found[line_of(text, "x = layer(x) * 2")]
    assert (same["output"]["shape"], same["runs"], same["range"]) == ([1, 32], 2, None)
    assert same["operator"] == "aten.mul"


def test_blocks_of_a_comprehension_over_several_lines_are_on_their_element_s_line(tmp_path):
    text = write(tmp_path, {"net.py": LOOPS})["net.py"]
    result = run(tmp_path, "net.py", "Pyramid", {"input_shape": [4]})
    layers = result["report"]["layers"]
    defined = {layers[m["layer"]]["path"]: m["defined_at"]["line"] for m in result["source_map"]["modules"]}
    element = line_of(text, "nn.Linear(4 * 2 ** i")
    assert [defined[f"grow.{i}"] for i in range(3)] == [element] * 3
    # the ModuleList itself, never called, stays on the line that built it
    uncalled = {entry["path"]: entry["defined_at"]["line"] for entry in result["source_map"]["uncalled"]}
    assert uncalled["grow"] == line_of(text, "self.grow = nn.ModuleList(")


DIRECT = """
    import torch.nn as nn


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(8, 8, bias=False)

        def forward(self, x):
            q = self.wq(x)
            return q * q


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()

        def forward(self, x):
            h = x + self.attention.forward(x)
            return h
"""


def test_a_call_through_forward_is_called_from_its_caller_s_line(tmp_path):
    text = write(tmp_path, {"net.py": DIRECT})["net.py"]
    result = run(tmp_path, "net.py", "Block", {"input_shape": [8]})
    layers = result["report"]["layers"]
    modules = {layers[m["layer"]]["path"]: m for m in result["source_map"]["modules"]}
    call_line = line_of(text, "h = x + self.attention.forward(x)")
    assert modules["attention"]["called_at"] == {"file": "net.py", "line": call_line}
    assert modules["attention.wq"]["called_at"] == {"file": "net.py", "line": line_of(text, "q = self.wq(x)")}
    # q * q is the attention's own work, on its own line, in its own call: 1·8 = 8 FLOPs
    squared = [o for o in result["source_map"]["operators"] if o["line"] == line_of(text, "return q * q")]
    assert [(layers[o["layer"]]["path"], o["operator"], o["flops"]) for o in squared] == [("attention", "aten.mul", 8)]
    # the caller's line runs the attention as a module call, not as a function: nothing is under it
    assert under(result, "net.py", call_line) == {}
    assert outputs(result, "net.py")[call_line]["output"]["shape"] == [1, 8]
