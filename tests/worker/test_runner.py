"""``run_job`` on small models in temporary workspaces.

Numbers are derived by hand: ``Conv2d(3, 8, 3)`` on ``(3, 32, 32)`` has 3*8*3*3 + 8 = 224 parameters
and produces (1, 8, 30, 30), i.e. 7,200 elements each costing 3*3*3 multiply-adds: 2*27*7200 =
388,800 FLOPs. An element-wise ``relu`` or ``add`` on that output is one FLOP per element: 7,200.
Source lines are computed from the text each test writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from torchscan_lsp.worker.runner import run_job
from workspace_files import line_of, loc, write

CONV_PARAMS = 224
CONV_FLOPS = 388_800
CONV_OUT_ELEMENTS = 8 * 30 * 30


def job(root: Path, rel: str, target: str, options=None, **extra) -> dict:
    return {
        "workspace_root": str(root),
        "file": str(root / rel),
        "target": target,
        "options": options if options is not None else {},
        "source_text": None,
        "measure": [],
        **extra,
    }


def run(root: Path, rel: str, target: str, options=None, **extra) -> dict:
    result = run_job(job(root, rel, target, options, **extra))
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    return result


def modules_of(result: dict) -> list[dict]:
    """The source map's module entries, each with the path, call index and type of the report
    layer its ``layer`` index names, and without its (here empty) library sites."""
    layers = result["report"]["layers"]
    out = []
    for entry in result["source_map"]["modules"]:
        layer = layers[entry["layer"]]
        assert entry["library_defined_at"] == entry["library_called_at"] == []
        out.append({"path": layer["path"], "call_index": layer["call_index"], "type": layer["type"],
                    "defined_at": entry["defined_at"], "called_at": entry["called_at"]})
    return out


def total(report: dict, name: str):
    return report["totals"][name]["value"]


# ------------------------------------------------------------------------------------------------
# successful analyses


def test_conv_factory(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                # torchscan: input_shape=(3, 32, 32)
                def build():
                    return nn.Conv2d(3, 8, 3)
            """
        },
    )
    result = run(tmp_path, "net.py", "build", {"input_shape": [3, 32, 32]})
    assert result["ok"] is True, result
    assert result["target"] == "build"
    report = result["report"]
    assert total(report, "parameters") == CONV_PARAMS
    assert total(report, "module_flops") == CONV_FLOPS
    assert total(report, "operator_flops") == CONV_FLOPS
    assert report["inputs"]["source"] == "generated"
    assert report["inputs"]["args"][0]["shape"] == [1, 3, 32, 32]
    assert modules_of(result) == [
        {
            "path": "",
            "call_index": 0,
            "type": "Conv2d",
            "defined_at": loc("net.py", line_of(files["net.py"], "return nn.Conv2d")),
            "called_at": None,
        }
    ]
    # the root is called by the engine and runs only PyTorch's code: no line of model code, and
    # Conv2d is no class of the model's own
    assert {k: v for k, v in result["source_map"].items() if k != "modules"} == {
        "operators": [], "under": [], "outputs": [], "classes": [], "uncalled": [], "parameters": [], "unregistered": []}
    assert result["imported_files"] == ["net.py"]
    assert isinstance(result["elapsed_s"], float)
    assert "measurements" not in result


def test_package_with_relative_imports_over_two_files(tmp_path):
    files = write(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/blocks.py": """
                import torch.nn as nn


                class Block(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.conv = nn.Conv2d(3, 8, 3)
                        self.act = nn.ReLU()

                    def forward(self, x):
                        y = self.conv(x)
                        y = self.act(y) + 1
                        return self.act(y)
            """,
            "models/net.py": """
                from torch import nn

                from .blocks import Block


                # torchscan: input_shape=(3, 32, 32)
                def build():
                    block = Block()
                    model = nn.Sequential(block, nn.Flatten())
                    return model
            """,
        },
    )
    blocks, net = files["models/blocks.py"], files["models/net.py"]
    result = run(tmp_path, "models/net.py", "build", {"input_shape": (3, 32, 32)})
    assert result["ok"] is True, result
    report, source_map = result["report"], result["source_map"]

    sequential_line = line_of(net, "nn.Sequential(")
    assert modules_of(result) == [
        # the root: the factory's line that built it, not the one that returned it
        {"path": "", "call_index": 0, "type": "Sequential",
         "defined_at": loc("models/net.py", sequential_line), "called_at": None},
        # built on the `block = Block()` line, registered into the Sequential on the next one
        {"path": "0", "call_index": 0, "type": "Block",
         "defined_at": loc("models/net.py", line_of(net, "block = Block()")), "called_at": None},
        {"path": "0.conv", "call_index": 0, "type": "Conv2d",
         "defined_at": loc("models/blocks.py", line_of(blocks, "self.conv =")),
         "called_at": loc("models/blocks.py", line_of(blocks, "y = self.conv(x)"))},
        {"path": "0.act", "call_index": 0, "type": "ReLU",
         "defined_at": loc("models/blocks.py", line_of(blocks, "self.act =")),
         "called_at": loc("models/blocks.py", line_of(blocks, "y = self.act(y) + 1"))},
        {"path": "0.act", "call_index": 1, "type": "ReLU",
         "defined_at": loc("models/blocks.py", line_of(blocks, "self.act =")),
         "called_at": loc("models/blocks.py", line_of(blocks, "return self.act(y)"))},
        {"path": "1", "call_index": 0, "type": "Flatten",
         "defined_at": loc("models/net.py", sequential_line), "called_at": None},
    ]
    # the source map's modules are the report's layers, in the same order
    assert [m["layer"] for m in source_map["modules"]] == list(range(len(report["layers"])))

    conv_line = line_of(blocks, "y = self.conv(x)")
    add_line = line_of(blocks, "y = self.act(y) + 1")
    last_line = line_of(blocks, "return self.act(y)")
    ops = {(o["file"], o["line"], o["operator"]): (o["calls"], o["flops"]) for o in source_map["operators"]}
    assert ops == {
        ("models/blocks.py", conv_line, "aten.convolution"): (1, CONV_FLOPS),
        ("models/blocks.py", add_line, "aten.relu"): (1, CONV_OUT_ELEMENTS),
        ("models/blocks.py", add_line, "aten.add"): (1, CONV_OUT_ELEMENTS),
        ("models/blocks.py", last_line, "aten.relu"): (1, CONV_OUT_ELEMENTS),
    }
    # every operator ran on a workspace line, so the lines add up to the operator total
    assert sum(flops for _, flops in ops.values()) == total(report, "operator_flops") == CONV_FLOPS + 3 * 7200
    assert result["imported_files"] == ["models/__init__.py", "models/blocks.py", "models/net.py"]


def test_script_style_sibling_imports(tmp_path):
    # models/ is no package; net.py imports its neighbour as `python models/net.py` would allow
    write(
        tmp_path,
        {
            "models/blocks.py": "import torch.nn as nn\n\n\ndef conv():\n    return nn.Conv2d(3, 8, 3)\n",
            "models/net.py": "from blocks import conv\n\n\ndef build():\n    return conv()\n",
        },
    )
    path_before = list(sys.path)
    result = run(tmp_path, "models/net.py", "build", {"input_shape": [3, 32, 32]})
    assert result["ok"] is True, result
    assert total(result["report"], "parameters") == CONV_PARAMS
    assert result["imported_files"] == ["models/blocks.py", "models/net.py"]
    assert result["report"]["context"]["model_type"] == "torch.nn.modules.conv.Conv2d"
    assert sys.path == path_before and "blocks" not in sys.modules


def test_module_class_target(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                # torchscan: input_shape=(4,)
                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 2)

                    def forward(self, x):
                        return self.fc(x)
            """
        },
    )
    text = files["net.py"]
    result = run(tmp_path, "net.py", "Net", {"input_shape": [4]})
    assert result["ok"] is True, result
    assert total(result["report"], "parameters") == 4 * 2 + 2
    modules = modules_of(result)
    assert modules[0]["defined_at"] == loc("net.py", line_of(text, "class Net"))
    assert modules[1] == {
        "path": "fc", "call_index": 0, "type": "Linear",
        "defined_at": loc("net.py", line_of(text, "self.fc =")),
        "called_at": loc("net.py", line_of(text, "return self.fc(x)")),
    }
    (addmm,) = [o for o in result["source_map"]["operators"] if o["operator"] == "aten.addmm"]
    assert (addmm["line"], addmm["calls"], addmm["flops"]) == (line_of(text, "return self.fc(x)"), 1, 2 * 4 * 2)


def test_factory_with_several_returns_names_the_one_taken(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn

                WIDE = False


                # torchscan: input_shape=(4,)
                def build():
                    if WIDE:
                        return nn.Linear(4, 64)
                    return nn.Linear(4, 2)
            """
        },
    )
    result = run(tmp_path, "net.py", "build", {"input_shape": [4]})
    assert result["source_map"]["modules"][0]["defined_at"] == loc(
        "net.py", line_of(files["net.py"], "return nn.Linear(4, 2)")
    )


@pytest.mark.parametrize(
    ("returned", "args_shapes", "kwargs_keys"),
    [
        ("model, (x,)", [[2, 4]], []),
        ("model, x", [[2, 4]], []),
        ("model, [x]", [[2, 4]], []),
        ("model, (), {'input': x}", [], ["input"]),
        ("model, (x,), {}", [[2, 4]], []),
    ],
)
def test_factory_returning_its_own_inputs(tmp_path, returned, args_shapes, kwargs_keys):
    write(
        tmp_path,
        {
            "net.py": f"""
                import torch
                import torch.nn as nn


                # torchscan: device="cpu"
                def build():
                    model = nn.Linear(4, 3)
                    x = torch.ones(2, 4)
                    return {returned}
            """
        },
    )
    result = run(tmp_path, "net.py", "build", {"device": "cpu"})
    assert result["ok"] is True, result
    inputs = result["report"]["inputs"]
    assert inputs["source"] == "provided"
    assert [a["shape"] for a in inputs["args"]] == args_shapes
    assert list(inputs["kwargs"]) == kwargs_keys
    # batch of two: 2 * (2 * 4 * 3) FLOPs in the matrix product
    assert total(result["report"], "operator_flops") == 48


def test_dtype_names_become_torch_dtypes(tmp_path):
    write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                # torchscan: input_shape=[(3,), (2, 2)], dtype=["float64", "torch.int32"]
                class Pair(nn.Module):
                    def forward(self, a, b):
                        return a.sum() + b.sum()
            """
        },
    )
    result = run(tmp_path, "net.py", "Pair", {"input_shape": [[3], [2, 2]], "dtype": ["float64", "torch.int32"]})
    assert result["ok"] is True, result
    assert [(a["shape"], a["dtype"]) for a in result["report"]["inputs"]["args"]] == [
        ([1, 3], "torch.float64"),
        ([1, 2, 2], "torch.int32"),
    ]


def test_structure_mode_records_modules_but_no_operators(tmp_path):
    write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.conv = nn.Conv2d(3, 8, 3)

                    def forward(self, x):
                        return self.conv(x) * 2
            """
        },
    )
    result = run(tmp_path, "net.py", "Net", {"input_shape": [3, 32, 32], "mode": "structure"})
    assert result["ok"] is True, result
    assert result["report"]["context"]["analysis_mode"] == "structure"
    assert [m["path"] for m in modules_of(result)] == ["", "conv"]
    assert result["source_map"]["operators"] == []


def test_source_text_replaces_the_file_on_disk(tmp_path):
    write(tmp_path, {"net.py": "import torch.nn as nn\n\n\ndef build():\n    return nn.Conv2d(3, 8, 3)\n"})
    unsaved = "import torch.nn as nn\n\n\ndef build():\n    return nn.Conv2d(3, 16, 3)\n"
    result = run(tmp_path, "net.py", "build", {"input_shape": [3, 32, 32]}, source_text=unsaved)
    assert result["ok"] is True, result
    assert total(result["report"], "parameters") == 3 * 16 * 9 + 16


def test_each_job_sees_the_files_as_they_are_and_leaves_no_trace(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/layers.py": "WIDTH = 8\n"})
    net = "import torch.nn as nn\nfrom .layers import WIDTH\n\n\ndef build():\n    return nn.Conv2d(3, WIDTH, 3)\n"
    write(tmp_path, {"pkg/net.py": net})
    path_before = list(sys.path)
    first = run(tmp_path, "pkg/net.py", "build", {"input_shape": [3, 32, 32]})
    assert total(first["report"], "parameters") == CONV_PARAMS
    assert "pkg" not in sys.modules and "pkg.layers" not in sys.modules and "pkg.net" not in sys.modules
    assert sys.path == path_before

    write(tmp_path, {"pkg/layers.py": "WIDTH = 16\n"})
    second = run(tmp_path, "pkg/net.py", "build", {"input_shape": [3, 32, 32]})
    assert total(second["report"], "parameters") == 3 * 16 * 9 + 16


def test_workspace_package_shadowing_an_installed_name(tmp_path):
    # A folder named like an installed module still wins inside its workspace, and the installed
    # module is back afterwards.
    import json as installed_json

    write(tmp_path, {"json/__init__.py": "", "json/net.py": "import torch.nn as nn\n\n\ndef build():\n    return nn.Conv2d(3, 8, 3)\n"})
    result = run(tmp_path, "json/net.py", "build", {"input_shape": [3, 32, 32]})
    assert result["ok"] is True, result
    assert result["imported_files"] == ["json/__init__.py", "json/net.py"]
    assert sys.modules["json"] is installed_json


def test_nothing_reaches_stdout(tmp_path, capsys):
    write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn

                print("importing")


                class Loud(nn.Module):
                    def forward(self, x):
                        print("forward", x.shape)
                        return x


                def build():
                    print("building")
                    return Loud()
            """
        },
    )
    result = run(tmp_path, "net.py", "build", {"input_shape": [2]})
    assert result["ok"] is True, result
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "building" in captured.err


def test_hooks_and_modes_are_removed(tmp_path):
    from torch.nn.modules import module as nn_module

    write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                def good():
                    return nn.Linear(4, 2)


                def bad():
                    return nn.Linear(5, 2)
            """
        },
    )
    before = (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_module_registration_hooks),
        len(nn_module._global_parameter_registration_hooks),
    )
    assert run(tmp_path, "net.py", "good", {"input_shape": [4]})["ok"] is True
    assert run(tmp_path, "net.py", "bad", {"input_shape": [4]})["error"]["kind"] == "forward"
    after = (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_module_registration_hooks),
        len(nn_module._global_parameter_registration_hooks),
    )
    assert after == before
    assert torch._C._len_torch_dispatch_stack() == 0


# ------------------------------------------------------------------------------------------------
# measurements


def test_measurements_are_reported_next_to_the_analysis(tmp_path):
    write(tmp_path, {"net.py": "import torch.nn as nn\n\n\ndef build():\n    return nn.Sequential(nn.Linear(4, 8), nn.ReLU())\n"})
    result = run(
        tmp_path, "net.py", "build", {"input_shape": [4], "measure": ["memory"]}, measure=["latency", "layer_latency"]
    )
    assert result["ok"] is True, result
    measurements = result["measurements"]
    assert list(measurements) == ["latency", "memory", "layer_latency"]
    assert measurements["memory"]["device"] == "cpu"
    assert measurements["memory"]["peak_bytes"] >= measurements["memory"]["baseline_bytes"]
    assert measurements["latency"]["totals"]["latency"]["status"] == "complete"
    assert measurements["latency"]["totals"]["latency"]["value"] > 0
    assert "layer_latency_sum" in measurements["layer_latency"]["totals"]


# ------------------------------------------------------------------------------------------------
# failures


def _error(result: dict) -> dict:
    assert result["ok"] is False, result
    assert "report" not in result or result["error"]["type"] == "IncompleteAnalysisError"
    return result["error"]


def test_import_error_names_the_import_line(tmp_path):
    files = write(
        tmp_path,
        {"net.py": "import torch.nn as nn\nimport not_a_module_anywhere_xyz\n\n\ndef build():\n    return nn.ReLU()\n"},
    )
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2]}))
    assert error == {
        "kind": "import",
        "type": "ModuleNotFoundError",
        "message": "No module named 'not_a_module_anywhere_xyz'",
        "file": "net.py",
        "line": line_of(files["net.py"], "import not_a_module"),
    }


def test_syntax_error_in_an_imported_sibling(tmp_path):
    files = write(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/blocks.py": "import torch.nn as nn\n\n\ndef width():\n    return (8\n\n\nx = = 1\n",
            "models/net.py": "from .blocks import width\n\n\ndef build():\n    return None\n",
        },
    )
    error = _error(run(tmp_path, "models/net.py", "build", {"input_shape": [2]}))
    assert (error["kind"], error["type"], error["file"]) == ("import", "SyntaxError", "models/blocks.py")
    assert error["line"] == line_of(files["models/blocks.py"], "(8")
    assert "never closed" in error["message"]


def test_syntax_error_in_the_target_file(tmp_path):
    write(tmp_path, {"net.py": "def build():\n    return 1 +\n"})
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2]}))
    assert error == {"kind": "import", "type": "SyntaxError", "message": "invalid syntax", "file": "net.py", "line": 2}


def test_factory_that_raises_in_another_file(tmp_path):
    files = write(
        tmp_path,
        {
            "helpers.py": """
                def check_width(width):
                    if width <= 0:
                        raise ValueError(f"width must be positive, got {width}")
                    return width
            """,
            "net.py": """
                import torch.nn as nn

                from helpers import check_width


                # torchscan: input_shape=(3, 8, 8)
                def build():
                    return nn.Conv2d(3, check_width(-1), 3)
            """,
        },
    )
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [3, 8, 8]}))
    assert error == {
        "kind": "factory",
        "type": "ValueError",
        "message": "width must be positive, got -1",
        "file": "helpers.py",
        "line": line_of(files["helpers.py"], "raise ValueError"),
    }


def test_class_whose_constructor_raises(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 2)
                        self.missing.append(1)
            """
        },
    )
    error = _error(run(tmp_path, "net.py", "Net", {"input_shape": [4]}))
    assert (error["kind"], error["type"], error["line"]) == (
        "factory", "AttributeError", line_of(files["net.py"], "self.missing")
    )


def test_forward_that_fails_on_the_shape(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                # torchscan: input_shape=(3,)
                class Head(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(10, 5)

                    def forward(self, x):
                        return self.fc(x)
            """
        },
    )
    error = _error(run(tmp_path, "net.py", "Head", {"input_shape": [3]}))
    assert (error["kind"], error["type"], error["file"]) == ("forward", "RuntimeError", "net.py")
    assert error["line"] == line_of(files["net.py"], "return self.fc(x)")
    assert "cannot be multiplied" in error["message"]


def test_factory_that_returns_something_else(tmp_path):
    files = write(tmp_path, {"net.py": "def build():\n    x = 1\n    return x, 2, 3, 4\n"})
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2]}))
    # the factory did not raise: what it returned is wrong, a "result" error
    assert (error["kind"], error["type"], error["line"]) == ("result", "TypeError", line_of(files["net.py"], "return x"))
    assert "returned a tuple of 4 items" in error["message"]

    write(tmp_path, {"net.py": "def build():\n    return 'model'\n"})
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2]}))
    assert error["kind"] == "result" and "returned a str ('model'), not an nn.Module" in error["message"]

    write(tmp_path, {"net.py": "def build():\n    return 3\n"})
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2]}))
    assert error["message"] == (
        "'build' returned an int (3), not an nn.Module; return the model, (model, args) or (model, args, kwargs)"
    )


def test_two_input_shapes_from_a_pragma_or_from_json(tmp_path):
    # Linear(8, 2) on x and Linear(3, 2) on y: 8·2 + 3·2 = 22 multiply-accumulates.
    write(tmp_path, {"net.py": """
        import torch.nn as nn


        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(8, 2)
                self.b = nn.Linear(3, 2)

            def forward(self, x, y):
                return self.a(x).sum() + self.b(y).sum()
    """})
    # the pragma's literal (as an in-memory job holds it), and its JSON form
    for shape in ([(8,), (3,)], [[8], [3]], ((8,), (3,))):
        result = run(tmp_path, "net.py", "Two", {"input_shape": shape})
        assert result["ok"], result.get("error")
        assert result["report"]["totals"]["macs"]["value"] == 22


def test_strict_incomplete_analysis_is_its_own_kind(tmp_path):
    files = write(tmp_path, {"net.py": """
        import torch
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()

            def forward(self, x):
                return self.block(x)
    """})
    result = run(tmp_path, "net.py", "Net", {"input_shape": [4], "strict": ["dmas"]})
    error = _error(result)
    assert (error["kind"], error["type"]) == ("strict", "IncompleteAnalysisError")
    # one relu in Block's own forward, outside its child: the DMAs (module formulas only) miss it;
    # named once (not once per metric it touches)
    assert error["message"].startswith(
        "analysis is incomplete for dmas (dmas partial): container_work in 'block' (aten.relu ×1) (")
    assert "input_shape" not in error["message"]
    assert error["line"] == line_of(files["net.py"], "class Net")
    assert result["report"]["diagnostics"][0]["code"] == "container_work"


@pytest.mark.parametrize("mismatch", ["dtype", "device"])
def test_a_dtype_or_device_mismatch_advises_dtype_and_device(tmp_path, mismatch):
    moved = "x.double()" if mismatch == "dtype" else "x.to('meta')"
    write(tmp_path, {"net.py": f"""
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc({moved})
    """})
    error = _error(run(tmp_path, "net.py", "Net", {"input_shape": [4]}))
    assert error["kind"] == "forward", error
    assert "check dtype and device: the inputs' dtype and device must match the model's (the target's dtype and device options)" in error["message"]


def test_inputs_from_the_factory_and_an_input_shape(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch
                import torch.nn as nn


                # torchscan: input_shape=(4,)
                def build():
                    return nn.Linear(4, 2), (torch.ones(1, 4),)
            """
        },
    )
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [4]}))
    assert (error["kind"], error["file"], error["line"]) == ("options", "net.py", line_of(files["net.py"], "# torchscan"))
    assert "returns its own inputs, and input_shape=(4,) is set too" in error["message"]


def test_model_without_inputs(tmp_path):
    files = write(tmp_path, {"net.py": "import torch.nn as nn\n\n\n# torchscan: device=\"cpu\"\ndef build():\n    return nn.ReLU()\n"})
    error = _error(run(tmp_path, "net.py", "build", {"device": "cpu"}))
    assert (error["kind"], error["line"]) == ("options", line_of(files["net.py"], "# torchscan"))
    assert "no input_shape is set" in error["message"]


def test_dtype_with_provided_inputs(tmp_path):
    write(tmp_path, {"net.py": "import torch\nimport torch.nn as nn\n\n\ndef build():\n    return nn.ReLU(), (torch.ones(2),)\n"})
    error = _error(run(tmp_path, "net.py", "build", {"dtype": "float16"}))
    assert error["kind"] == "options" and "applies only to inputs generated from input_shape" in error["message"]


def test_invalid_job_options(tmp_path):
    write(tmp_path, {"net.py": "import torch.nn as nn\n\n\ndef build():\n    return nn.ReLU()\n"})
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2], "colour": "red"}))
    assert error["kind"] == "options" and "unknown option 'colour'" in error["message"]
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2], "mode": "fast"}))
    assert error["kind"] == "options" and "mode must be" in error["message"]


def test_pragma_errors_of_the_target_are_options_errors(tmp_path):
    files = write(tmp_path, {"net.py": "# torchscan: input_shape=SHAPE\ndef build():\n    return None\n"})
    error = _error(run(tmp_path, "net.py", "build", {}))
    assert (error["kind"], error["line"]) == ("options", line_of(files["net.py"], "# torchscan"))
    assert "must be a Python literal" in error["message"]


def test_unknown_target_and_missing_file(tmp_path):
    write(tmp_path, {"net.py": "X = 1\n"})
    error = _error(run(tmp_path, "net.py", "build", {"input_shape": [2]}))
    assert error["kind"] == "factory" and "defines no 'build'" in error["message"]
    error = _error(run(tmp_path, "gone.py", "build", {"input_shape": [2]}))
    assert (error["kind"], error["file"]) == ("import", "gone.py")


def test_strict_mode_failure_keeps_the_report(tmp_path):
    write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                class Scale(nn.Module):
                    def forward(self, x):
                        return x * 2


                def build():
                    return nn.Sequential(nn.Linear(4, 4), Scale())
            """
        },
    )
    result = run(tmp_path, "net.py", "build", {"input_shape": [4], "strict": ["dmas"]})
    error = _error(result)
    assert (error["kind"], error["type"]) == ("strict", "IncompleteAnalysisError")
    assert result["report"]["totals"]["module_flops"]["status"] == "partial"
    assert [m["path"] for m in modules_of(result)] == ["", "0", "1"]


def test_job_without_a_target(tmp_path):
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "x.py"), "options": {}})
    assert result["ok"] is False and result["error"]["kind"] == "options"
