"""Source attribution: which files are the workspace's, definition and call sites, operator lines."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


import torchscan_lsp.worker.runner as runner_module
from torchscan_lsp.worker.attribution import SourceRecorder, Workspace

from torchscan_lsp.worker.runner import run_job
from workspace_files import line_of, loc, write


def path_of(result: dict, layer: int | None) -> str | None:
    """The module path of the report layer a source-map entry names by index."""
    return None if layer is None else result["report"]["layers"][layer]["path"]


def modules_by_path(result: dict) -> dict[str, list[dict]]:
    """The source map's module entries by the path of the layer they name, in call order."""
    found: dict[str, list[dict]] = {}
    for entry in result["source_map"]["modules"]:
        found.setdefault(path_of(result, entry["layer"]), []).append(entry)
    return found


def run(root: Path, rel: str, target: str, options: dict) -> dict:
    result = run_job({"workspace_root": str(root), "file": str(root / rel), "target": target, "options": options})
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    return result


def test_workspace_names_its_own_files_only(tmp_path):
    workspace = Workspace(tmp_path)
    for rel in ("net.py", "pkg/a.py", ".venv/lib/python3.11/site-packages/torch/x.py",
                "lib/site-packages/y.py", ".hidden/z.py", "node_modules/q.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert workspace.relative(str(tmp_path / "net.py")) == "net.py"
    assert workspace.relative(str(tmp_path / "pkg" / "a.py")) == "pkg/a.py"
    assert workspace.relative(str(tmp_path / ".venv/lib/python3.11/site-packages/torch/x.py")) is None
    assert workspace.relative(str(tmp_path / "lib/site-packages/y.py")) is None
    assert workspace.relative(str(tmp_path / ".hidden/z.py")) is None
    assert workspace.relative(str(tmp_path / "node_modules/q.py")) is None
    assert workspace.relative(str(tmp_path.parent / "elsewhere.py")) is None
    assert workspace.relative("<string>") is None
    assert workspace.relative(str(tmp_path / "data.txt")) is None
    assert workspace.relative(None) is None


def test_this_projects_package_is_never_a_workspace_file():
    repo = Path(runner_module.__file__).resolve().parents[2]
    assert Workspace(repo).relative(runner_module.__file__) is None


def test_a_symlinked_root_names_files_by_their_real_place(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "net.py").write_text("")
    link = tmp_path / "link"
    os.symlink(real, link)
    assert Workspace(link).relative(str(real / "net.py")) == "net.py"
    assert Workspace(real).relative(str(link / "net.py")) == "net.py"


def test_stack_walks_stop_at_the_barrier(tmp_path):
    path = tmp_path / "caller.py"
    path.write_text("import sys\n\ndef where(files):\n    return files.sites(sys._getframe())[0]\n")
    code = compile(path.read_text(), str(path), "exec")
    namespace: dict = {}
    exec(code, namespace)
    files = SourceRecorder(Workspace(tmp_path)).files
    assert files.sites(sys._getframe())[0] is None  # this test file is outside the workspace
    assert namespace["where"](files) == ("caller.py", 4)
    files.barrier = sys._getframe()
    # the caller's frame is inside the barrier: found; frames beyond it are never looked at
    assert namespace["where"](files) == ("caller.py", 4)
    assert files.sites(sys._getframe())[1] == ()   # the barrier itself: nothing walked


def test_operators_of_a_helper_in_another_file_belong_to_the_helper_line(tmp_path):
    files = write(
        tmp_path,
        {
            "ops.py": """
                def double(x):
                    return x + x
            """,
            "net.py": """
                import torch.nn as nn

                from ops import double


                class Net(nn.Module):
                    def forward(self, x):
                        y = double(x)
                        return y.view(-1)
            """,
        },
    )
    result = run(tmp_path, "net.py", "Net", {"input_shape": [2, 3]})
    assert result["ok"] is True, result
    operators = result["source_map"]["operators"]
    assert operators == [
        {"file": "net.py", "line": line_of(files["net.py"], "y.view"), "operator": "aten.view",
         "calls": 1, "flops": None, "ignored": "Metadata-only tensor view.", "layer": 0},
        {"file": "ops.py", "line": line_of(files["ops.py"], "x + x"), "operator": "aten.add",
         "calls": 1, "flops": 6, "ignored": None, "layer": 0},   # Net (the root, layer 0) was the innermost call
    ]
    assert result["imported_files"] == ["net.py", "ops.py"]


def test_shared_module_keeps_its_first_definition(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.first = nn.Linear(3, 3)
                        self.second = self.first

                    def forward(self, x):
                        return self.second(self.first(x))
            """
        },
    )
    text = files["net.py"]
    result = run(tmp_path, "net.py", "Net", {"input_shape": [3]})
    modules = result["source_map"]["modules"]
    layers = result["report"]["layers"]
    assert [(layers[m["layer"]]["path"], layers[m["layer"]]["call_index"]) for m in modules] == [
        ("", 0), ("first", 0), ("first", 1)]
    assert {m["defined_at"]["line"] for m in modules[1:]} == {line_of(text, "self.first = nn.Linear")}
    assert [m["called_at"]["line"] for m in modules[1:]] == [line_of(text, "return self.second")] * 2


def test_modules_built_by_library_code_point_at_the_workspace_line(tmp_path):
    files = write(
        tmp_path,
        {
            "net.py": """
                import copy

                import torch.nn as nn


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        block = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
                        self.blocks = nn.ModuleList(copy.deepcopy(block) for _ in range(2))

                    def forward(self, x):
                        for blk in self.blocks:
                            x = blk(x)
                        return x
            """
        },
    )
    text = files["net.py"]
    result = run(tmp_path, "net.py", "Net", {"input_shape": [5, 16]})
    assert result["ok"] is True, result
    by_path = {path: entries[0] for path, entries in modules_by_path(result).items()}
    # The blocks are deep copies made by the standard library while that line ran, registered
    # there; their own submodules were copied, never registered: they take the line that built
    # the originals. Torch code (Sequential.forward) calls their children while `x = blk(x)` is
    # the innermost workspace line.
    copies = [p for p in by_path if p.startswith("blocks.")]
    assert {"blocks.0", "blocks.1", "blocks.0.0", "blocks.1.1"} <= set(copies)
    for path in copies:
        built = "self.blocks =" if path.count(".") == 1 else "block = nn.Sequential("
        assert by_path[path]["defined_at"] == loc("net.py", line_of(text, built))
        assert by_path[path]["called_at"] == loc("net.py", line_of(text, "x = blk(x)"))


def test_transformer_layers_keep_their_fast_path(tmp_path):
    # Global hooks only: a per-module hook would send the layer down its slow path, and the line
    # would show linear and softmax operators instead of the fused kernel.
    files = write(
        tmp_path,
        {
            "net.py": """
                import torch.nn as nn


                class Enc(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)

                    def forward(self, x):
                        return self.layer(x)
            """
        },
    )
    result = run(tmp_path, "net.py", "Enc", {"input_shape": [5, 16]})
    assert result["ok"] is True, result
    line = line_of(files["net.py"], "return self.layer(x)")
    assert [(o["line"], o["operator"]) for o in result["source_map"]["operators"]] == [
        (line, "aten._transformer_encoder_layer_fwd")
    ]


def test_definition_hooks_are_gone_after_an_exception(tmp_path):
    from torch.nn.modules import module as nn_module

    recorder = SourceRecorder(Workspace(tmp_path))
    before = len(nn_module._global_module_registration_hooks), len(nn_module._global_parameter_registration_hooks)
    try:
        with recorder.recording_definitions(lambda: None):
            raise KeyError("boom")
    except KeyError:
        pass
    after = len(nn_module._global_module_registration_hooks), len(nn_module._global_parameter_registration_hooks)
    assert after == before


def test_the_forward_is_hooked_and_dispatched_once(tmp_path):
    """Attribution observes the engine's pass: inside the model's forward, the global hooks and
    dispatch modes are the engine's own, as many as under a plain crawl_module."""
    files = write(tmp_path, {"net.py": """
        from pathlib import Path

        import torch
        import torch.nn as nn
        from torch.nn.modules import module as nn_module


        class Probe(nn.Module):
            def forward(self, x):
                seen = (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks),
                        torch._C._len_torch_dispatch_stack())
                with open(Path(__file__).with_name("seen.txt"), "a") as out:
                    out.write(f"{seen}\\n")
                return x * 2
    """})
    import importlib.util

    from torchscan_lsp import crawl_module

    spec = importlib.util.spec_from_file_location("probe_net", tmp_path / "net.py")
    plain = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plain)
    crawl_module(plain.Probe(), (3,))
    result = run(tmp_path, "net.py", "Probe", {"input_shape": [3]})
    assert result["ok"] is True, result
    # the plain crawl, then the job: one global pre-hook, one forward hook, one dispatch mode each
    assert (tmp_path / "seen.txt").read_text().splitlines() == ["(1, 1, 1)", "(1, 1, 1)"]
    # and the job's operator still reached the source map: the engine told the observer of it
    (mul,) = [o for o in result["source_map"]["operators"] if o["operator"] == "aten.mul"]
    assert mul["line"] == line_of(files["net.py"], "return x * 2") and mul["flops"] == 3


def test_operators_name_the_innermost_module_call(tmp_path):
    files = write(
        tmp_path,
        {
            "blocks.py": """
                import torch
                import torch.nn as nn


                class Res(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)

                    def forward(self, x):
                        out = self.fc(x)
                        return torch.relu(out + x)
            """,
            "net.py": """
                import torch.nn as nn
                from blocks import Res


                def build():
                    return nn.Sequential(Res(), Res())
            """,
        },
    )
    result = run(tmp_path, "net.py", "build", {"input_shape": [4]})
    assert result["ok"] is True, result
    by_line: dict[tuple[int, str], set] = {}
    for o in result["source_map"]["operators"]:
        assert o["file"] == "blocks.py"
        by_line.setdefault((o["line"], o["operator"]), set()).add((path_of(result, o["layer"]), o["calls"]))
    residual = line_of(files["blocks.py"], "out + x")
    linear = line_of(files["blocks.py"], "self.fc(x)")
    # the residual ran in each Res's own forward (Sequential's children "0" and "1"), once each;
    # the Linear's product ran inside each fc call
    assert by_line[(residual, "aten.add")] == {("0", 1), ("1", 1)}
    assert by_line[(residual, "aten.relu")] == {("0", 1), ("1", 1)}
    assert by_line[(linear, "aten.addmm")] == {("0.fc", 1), ("1.fc", 1)}
