"""What each line computed, run by run (the source map's ``outputs`` and ``under``): the names a line
assigned, the operators under the plain functions it called, the first run of a line in a loop and
how the shapes of its runs varied. Shapes and FLOPs derived by hand in each test: an addition or
multiplication is one FLOP per output element; a Linear(i, o) without bias on n rows, 2·n·i·o."""

from __future__ import annotations


from analysed import analysed as run, outputs
from workspace_files import line_of, write


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


ONE_OPERATOR_LOOPS = """
    import torch
    import torch.nn as nn


    class V(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            x = self.lin(x)
            for k in (1, 2, 4):
                a = x.repeat(1, k)
            g = x
            for k in range(3):
                g = torch.cat([g, g], dim=1)
            for k in (1, 2, 4):
                z = x.new_zeros(1, k)
            for k in (1, 2, 4):
                e = x.expand(k, 4)
            return a, g, z, e
"""


def test_a_loop_whose_body_is_one_operator_shows_its_first_run_and_how_many(tmp_path):
    from torchscan_lsp.server import labels

    text = write(tmp_path, {"net.py": ONE_OPERATOR_LOOPS})["net.py"]
    result = run(tmp_path, "net.py", "V", {"input_shape": [4]})
    found = outputs(result, "net.py")
    # x is (1, 4); x.repeat(1, k) for k = 1, 2, 4 gives (1, 4), (1, 8), (1, 16): each line below is
    # one operator dispatched from one instruction, with no Python call, three times
    repeat = found[line_of(text, "a = x.repeat(1, k)")]
    assert repeat["operator"] == "aten.repeat" and targets(repeat) == [("a", [1, 4])]
    assert repeat["runs"] == 3 and repeat["range"] == {"distinct": 3, "min": [1, 4], "max": [1, 16]}
    assert labels.line_label(repeat) == "→ (1, 4) · ×3 runs, shapes vary (1, 4..16)"
    # cat doubles the width each time: (1, 4) -> (1, 8) -> (1, 16) -> (1, 32)
    cat = found[line_of(text, "g = torch.cat([g, g], dim=1)")]
    assert cat["output"]["shape"] == [1, 8] and targets(cat) == [("g", [1, 8])]
    assert cat["runs"] == 3 and cat["range"] == {"distinct": 3, "min": [1, 8], "max": [1, 32]}
    assert labels.line_label(cat) == "→ (1, 8) · ×3 runs, shapes vary (1, 8..32)"
    # a new (1, k) tensor of zeros, and x seen as (k, 4): (1, 1)..(1, 4) and (1, 4)..(4, 4)
    zeros = found[line_of(text, "z = x.new_zeros(1, k)")]
    assert (zeros["output"]["shape"], zeros["runs"]) == ([1, 1], 3)
    assert zeros["range"] == {"distinct": 3, "min": [1, 1], "max": [1, 4]}
    expand = found[line_of(text, "e = x.expand(k, 4)")]
    assert (expand["output"]["shape"], expand["runs"]) == ([1, 4], 3)
    assert expand["range"] == {"distinct": 3, "min": [1, 4], "max": [4, 4]}


LOOP_SHAPES = """
    import torch
    import torch.nn as nn


    class Shapes(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4, 4))

        def forward(self, x):
            y = x * 0 + 1
            for _ in range(3): y = y * 2
            while y.sum() > 1:
                y = y / 8
            h = x
            for k in range(2):
                h = torch.cat([h,
                               h * 2],
                              dim=1)
            for i in range(3):
                if i == 1:
                    continue
                c = x.repeat(1, i + 1)
            t = x.view(1, 1, 4)
            for _ in range(2):
                m = t.matmul(self.w)
            return y, h, c, m
"""


def test_each_run_of_a_loop_line_is_one_execution_of_it(tmp_path):
    text = write(tmp_path, {"net.py": LOOP_SHAPES})["net.py"]
    result = run(tmp_path, "net.py", "Shapes", {"input_shape": [4]})
    found = outputs(result, "net.py")
    # a loop on one line runs its body three times
    assert found[line_of(text, "for _ in range(3): y = y * 2")]["runs"] == 3
    # y is four ones, eights after that loop: its sum goes 32 -> 4 -> 0.5, so y / 8 runs twice and
    # the condition, compiled twice (before the loop and after its body), three times
    assert found[line_of(text, "while y.sum() > 1:")]["runs"] == 3
    assert found[line_of(text, "y = y / 8")]["runs"] == 2
    # a statement over three lines is one run per iteration: cat is called from its first line
    # after h * 2 was computed on the second; (1, 4) -> (1, 8) -> (1, 16)
    cat = found[line_of(text, "h = torch.cat([h,")]
    assert (cat["operator"], cat["output"]["shape"], cat["runs"]) == ("aten.cat", [1, 8], 2)
    assert cat["range"] == {"distinct": 2, "min": [1, 8], "max": [1, 16]}
    doubled = found[line_of(text, "h * 2],")]
    assert (doubled["output"]["shape"], doubled["runs"]) == ([1, 4], 2)
    # i = 0 and 2 (1 is skipped): (1, 4) then (1, 12)
    repeat = found[line_of(text, "c = x.repeat(1, i + 1)")]
    assert (repeat["output"]["shape"], repeat["runs"]) == ([1, 4], 2)
    assert repeat["range"] == {"distinct": 2, "min": [1, 4], "max": [1, 12]}
    # a (1, 1, 4) @ (4, 4) matmul dispatches several operators from one instruction in each run
    # (a view, a product, a view back): two runs, not one per operator, each giving (1, 1, 4)
    matmul = found[line_of(text, "m = t.matmul(self.w)")]
    assert (matmul["output"]["shape"], matmul["runs"], matmul["range"]) == ([1, 1, 4], 2, None)
    dispatched = [o for o in result["source_map"]["operators"] if o["line"] == line_of(text, "m = t.matmul")]
    assert sum(o["calls"] for o in dispatched) > 2


DIRECT_LOOP = """
    import torch.nn as nn


    class Scale(nn.Module):
        def forward(self, x):
            for _ in range(3):
                x = x * 2
            return x


    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = Scale()

        def forward(self, x):
            return self.scale.forward(x) + 1
"""


def test_a_loop_in_a_forward_called_directly_keeps_its_runs_and_the_call_its_output(tmp_path):
    text = write(tmp_path, {"net.py": DIRECT_LOOP})["net.py"]
    result = run(tmp_path, "net.py", "Outer", {"input_shape": [4]})
    found = outputs(result, "net.py")
    doubled = found[line_of(text, "x = x * 2")]
    assert (doubled["output"]["shape"], doubled["runs"]) == ([1, 4], 3)
    # the direct call's output is still seen by its own trace function: (1, 4)
    layers = result["report"]["layers"]
    scale = next(layer for layer in layers if layer["path"] == "scale")
    assert scale["output"]["shape"] == [1, 4]


def test_line_events_end_with_the_job_and_leave_a_debugger_s_trace_function_alone(tmp_path):
    import sys

    write(tmp_path, {"net.py": ONE_OPERATOR_LOOPS})
    assert sys.gettrace() is None
    run(tmp_path, "net.py", "V", {"input_shape": [4]})
    assert sys.gettrace() is None
    seen = []

    def debugger(frame, event, arg):
        seen.append(frame.f_code.co_filename)
        return None

    previous = sys.gettrace()
    sys.settrace(debugger)
    try:
        result = run(tmp_path, "net.py", "V", {"input_shape": [4]})
        assert sys.gettrace() is debugger
    finally:
        sys.settrace(previous)
    # the debugger saw the model's frames; the lines' runs are told from the events alone then
    assert str(tmp_path / "net.py") in seen
    assert outputs(result, "net.py")


NESTED_LOOPS = """
    import torch.nn as nn


    class Inner(nn.Module):
        def forward(self, x):
            for _ in range(2):
                x = x + 1
            return x


    class Nest(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            for _ in range(3):
                x = x * 2
                x = self.inner(x)
            for k in (1, 2):
                y = x.repeat(k, 1)
            return y
"""


def test_loops_on_both_sides_of_a_module_call_count_their_own_runs(tmp_path):
    text = write(tmp_path, {"net.py": NESTED_LOOPS})["net.py"]
    result = run(tmp_path, "net.py", "Nest", {"input_shape": [4]})
    found = outputs(result, "net.py")
    # three iterations outside, each calling the inner module, whose loop runs twice: 3 and 3 runs
    # outside, 3 · 2 = 6 runs of the inner line over its three calls
    assert found[line_of(text, "x = x * 2")]["runs"] == 3
    assert found[line_of(text, "x = self.inner(x)")]["runs"] == 3
    assert found[line_of(text, "x = x + 1")]["runs"] == 6
    # after those calls the outer frame's lines are still told apart: (1, 4) then (2, 4)
    repeat = found[line_of(text, "y = x.repeat(k, 1)")]
    assert (repeat["output"]["shape"], repeat["runs"]) == ([1, 4], 2)
    assert repeat["range"] == {"distinct": 2, "min": [1, 4], "max": [2, 4]}
