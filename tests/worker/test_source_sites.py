"""The source map's lines: each child of a multi-line constructor, class lines, what computing
lines produced, and library files named by absolute path. Expected values are derived by hand in
each test from the model's code."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from torchscan_lsp.worker.runner import run_job
from workspace_files import line_of, write


def run(root: Path, rel: str, target: str, options: dict) -> dict:
    result = run_job({"workspace_root": str(root), "file": str(root / rel), "target": target, "options": options})
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert result["ok"] is True, result
    return result


def by_path(result: dict) -> dict[str, dict]:
    """Module entries by the path of the layer they name (first call)."""
    layers = result["report"]["layers"]
    found: dict[str, dict] = {}
    for entry in result["source_map"]["modules"]:
        found.setdefault(layers[entry["layer"]]["path"], entry)
    return found


def outputs(result: dict, file: str) -> dict[int, dict]:
    return {o["line"]: o for o in result["source_map"]["outputs"] if o["file"] == file}


def shape(entry: dict) -> list | None:
    return entry["output"].get("shape")


def test_every_child_of_a_multi_line_constructor_has_its_own_line(tmp_path):
    files = write(tmp_path, {"net.py": """
        from collections import OrderedDict

        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(
                    nn.Linear(8, 16),
                    nn.ReLU(),
                    nn.Linear(16, 16,
                              bias=False),
                    nn.Tanh(),
                )
                self.named = nn.Sequential(OrderedDict([
                    ("proj", nn.Linear(16, 8)),
                    ("act", nn.GELU()),
                ]))
                self.heads = nn.ModuleDict({
                    "a": nn.Identity(),
                    "b": nn.Sigmoid(),
                })

            def forward(self, x):
                x = self.named(self.features(x))
                return self.heads["b"](self.heads["a"](x))
    """})
    text = files["net.py"]
    result = run(tmp_path, "net.py", "Net", {"input_shape": [8]})
    modules = by_path(result)
    expected = {
        "features": "self.features =",
        "features.0": "nn.Linear(8, 16)",
        "features.1": "nn.ReLU()",
        "features.2": "nn.Linear(16, 16,",   # an argument over two lines: the line it starts on
        "features.3": "nn.Tanh()",
        "named": "self.named =",
        "named.proj": '("proj"',
        "named.act": '("act"',
        "heads.a": '"a": nn.Identity()',
        "heads.b": '"b": nn.Sigmoid()',
    }
    assert {path: modules[path]["defined_at"]["line"] for path in expected} == {
        path: line_of(text, needle) for path, needle in expected.items()}
    # the ModuleDict itself is never called, so it has no layer; its children were called, and its
    # own line is named by its path
    assert "heads" not in modules
    # (a ModuleDict holds no tensor of its own: its children's are counted by their calls)
    assert result["source_map"]["uncalled"] == [{"path": "heads", "type": "ModuleDict", "library_defined_at": [],
                                                 "defined_at": {"file": "net.py", "line": line_of(text, "self.heads =")},
                                                 "ran": True, "parameters": {"trainable": 0, "frozen": 0, "bytes": 0,
                                                                             "shared_elements": 0, "shared_with": []},
                                                 "buffers": {"elements": 0, "bytes": 0}}]


def test_a_call_into_other_code_is_not_read_as_the_container(tmp_path):
    # `make(\n 2,\n 3)` is running when the library builds its Sequential: its arguments are no
    # children, so both children stay on the line of the workspace call (its first line), while
    # the library's own line is named too
    library = tmp_path / "installed" / "site-packages" / "fakelib"
    write(library, {"__init__.py": """
        import torch.nn as nn


        class Stack(nn.Sequential):
            pass


        def make(a, b):
            return Stack(nn.Linear(a, b), nn.ReLU())
    """})
    files = write(tmp_path / "ws", {"net.py": """
        import fakelib


        def build():
            model = fakelib.make(
                2,
                3)
            return model
    """})
    sys.path.insert(0, str(library.parent))
    try:
        result = run(tmp_path / "ws", "net.py", "build", {"input_shape": [2]})
    finally:
        sys.path.remove(str(library.parent))
        sys.modules.pop("fakelib", None)
    text, lib_text = files["net.py"], (library / "__init__.py").read_text()
    modules = by_path(result)
    make_line = line_of(text, "model = fakelib.make(")
    assert modules["0"]["defined_at"] == modules["1"]["defined_at"] == {"file": "net.py", "line": make_line}
    library_file = (library / "__init__.py").resolve().as_posix()
    for path in ("0", "1"):
        assert modules[path]["library_defined_at"] == [{"file": library_file, "line": line_of(lib_text, "return Stack(")}]
    # the library's class is the model's root; Linear and ReLU are PyTorch's
    assert result["source_map"]["classes"] == [
        {"file": library_file, "line": line_of(lib_text, "class Stack"), "name": "Stack", "paths": [""]}]


def test_computing_lines_say_what_they_produced(tmp_path):
    # B = 2 sequences of T = 5 tokens, C = 32 channels in H = 4 heads of D = 8
    files = write(tmp_path, {"attn.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(32, 96)

            def forward(self, x):
                B, T, C = x.shape
                q, k, v = self.qkv(x).split(C, dim=2)
                q = q.view(B, T, 4, 8).transpose(1, 2)
                k = k.view(B, T, 4, 8).transpose(1, 2)
                v = v.view(B, T, 4, 8).transpose(1, 2)
                att = q @ k.transpose(-2, -1)
                att = att.softmax(dim=-1)
                y = att @ v
                fused = F.scaled_dot_product_attention(q, k, v)
                parts = y.split(4, dim=-1)
                both = torch.cat([y, fused], dim=-1)
                return both.transpose(1, 2).reshape(B, T, 2 * C) + 1


        def build():
            return Attention(), (torch.zeros(2, 5, 32),)
    """})
    text = files["attn.py"]
    result = run(tmp_path, "attn.py", "build", {})
    found = outputs(result, "attn.py")
    # q (B, H, T, D) @ kᵀ (B, H, D, T) = (B, H, T, T) = (2, 4, 5, 5)
    assert shape(found[line_of(text, "att = q @ k")]) == [2, 4, 5, 5]
    assert shape(found[line_of(text, "att = att.softmax")]) == [2, 4, 5, 5]
    # (B, H, T, T) @ v (B, H, T, D) = (B, H, T, D) = (2, 4, 5, 8)
    assert shape(found[line_of(text, "y = att @ v")]) == [2, 4, 5, 8]
    # SDPA's CPU kernel returns (output, log-sum-exp); the line's value is the output (B, H, T, D)
    assert shape(found[line_of(text, "fused = F.scaled")]) == [2, 4, 5, 8]
    # a view then a transpose: the last one, (B, H, T, D)
    assert shape(found[line_of(text, "q = q.view")]) == [2, 4, 5, 8]
    # split in two along D = 8: two (2, 4, 5, 4) tensors
    parts = found[line_of(text, "parts = y.split")]["output"]
    assert parts["kind"] == "list" and [item["shape"] for item in parts["items"]] == [[2, 4, 5, 4]] * 2
    # cat of two (B, H, T, D) along D: (2, 4, 5, 16)
    assert shape(found[line_of(text, "both = torch.cat")]) == [2, 4, 5, 16]
    # transpose, reshape to (B, T, 2C) = (2, 5, 64), then + 1: the add is the line's last operator
    last = found[line_of(text, "return both")]
    assert (last["operator"], shape(last)) == ("aten.add", [2, 5, 64])
    # the split line calls qkv: its ops run inside qkv's call, but the line belongs to the root's
    # forward (layer 0), and its value is split's three (B, T, C) = (2, 5, 32) tensors
    split = found[line_of(text, "q, k, v =")]
    assert split["layer"] == 0 and [item["shape"] for item in split["output"]["items"]] == [[2, 5, 32]] * 3


def test_a_line_in_a_loop_of_blocks_shows_its_first_execution(tmp_path):
    files = write(tmp_path, {"net.py": """
        import torch
        import torch.nn as nn


        class Grow(nn.Module):
            def forward(self, x):
                return torch.cat([x, x], dim=-1)


        def build():
            return nn.Sequential(Grow(), Grow(), Grow())
    """})
    result = run(tmp_path, "net.py", "build", {"input_shape": [3]})
    line = line_of(files["net.py"], "torch.cat")
    entry = outputs(result, "net.py")[line]
    # the three calls give (1, 6), (1, 12), (1, 24): the line's first run, in block 0, is (1, 6)
    assert shape(entry) == [1, 6]
    assert result["report"]["layers"][entry["layer"]]["path"] == "0"
    cats = [o for o in result["source_map"]["operators"] if o["line"] == line]
    assert sorted(result["report"]["layers"][o["layer"]]["path"] for o in cats) == ["0", "1", "2"]


def test_two_files_class_lines_and_call_sites(tmp_path):
    files = write(tmp_path, {
        "blocks.py": """
            import torch.nn as nn


            class Block(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.fc = nn.Linear(width, width)

                def forward(self, x):
                    return self.fc(x).relu() + x
        """,
        "net.py": """
            import torch.nn as nn

            from blocks import Block


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([
                        Block(4),
                        Block(4),
                    ])

                def forward(self, x):
                    for block in self.blocks:
                        x = block(x)
                    return x


            def build():
                return Net()
        """,
    })
    blocks, net = files["blocks.py"], files["net.py"]
    result = run(tmp_path, "net.py", "build", {"input_shape": [4]})
    classes = {entry["name"]: entry for entry in result["source_map"]["classes"]}
    assert classes == {
        "Net": {"file": "net.py", "line": line_of(net, "class Net"), "name": "Net", "paths": [""]},
        "Block": {"file": "blocks.py", "line": line_of(blocks, "class Block"), "name": "Block",
                  "paths": ["blocks.0", "blocks.1"]},
    }
    modules = by_path(result)
    assert modules["blocks.0"]["defined_at"] == {"file": "net.py", "line": line_of(net, "Block(4),")}
    assert modules["blocks.1"]["defined_at"] == {"file": "net.py", "line": line_of(net, "Block(4),") + 1}
    assert modules["blocks.1.fc"]["defined_at"] == {"file": "blocks.py", "line": line_of(blocks, "self.fc =")}
    assert modules["blocks.1.fc"]["called_at"] == {"file": "blocks.py", "line": line_of(blocks, "return self.fc")}
    assert modules["blocks.1"]["called_at"] == {"file": "net.py", "line": line_of(net, "x = block(x)")}
    # Linear(4, 4) on (1, 4), then relu and the residual add: (1, 4) on the block's return line
    entry = outputs(result, "blocks.py")[line_of(blocks, "return self.fc")]
    assert (entry["operator"], shape(entry)) == ("aten.add", [1, 4])


def test_an_unsaved_buffer_is_read_as_it_ran(tmp_path):
    # on disk the Sequential is on one line; the buffer spreads it over three: the buffer's lines count
    (tmp_path / "net.py").write_text("import torch.nn as nn\n\n\ndef build():\n    return nn.Sequential(nn.ReLU(), nn.Tanh())\n")
    buffer = "import torch.nn as nn\n\n\ndef build():\n    return nn.Sequential(\n        nn.ReLU(),\n        nn.Tanh())\n"
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "net.py"), "target": "build",
                      "options": {"input_shape": [3]}, "source_text": buffer})
    modules = by_path(result)
    assert (modules["0"]["defined_at"]["line"], modules["1"]["defined_at"]["line"]) == (6, 7)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed "
                    "(the examples extra)")
def test_a_library_model_names_its_modeling_file(tmp_path):
    write(tmp_path, {"lib_model.py": """
        import torch
        from transformers import MistralConfig, MistralForCausalLM


        def build():
            config = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
            torch.manual_seed(0)
            model = MistralForCausalLM(config)
            return model, (), {"input_ids": torch.zeros(1, 8, dtype=torch.long)}
    """})
    result = run(tmp_path, "lib_model.py", "build", {})
    import transformers.models.mistral.modeling_mistral as modeling

    modeling_file = Path(modeling.__file__).resolve().as_posix()
    modeling_text = Path(modeling_file).read_text(encoding="utf-8")
    modules = by_path(result)
    q_proj = modules["model.layers.1.self_attn.q_proj"]
    # built by the library's `self.q_proj = nn.Linear(...)` and called by its `self.q_proj(...)`,
    # while the workspace line that built it all is the factory's `MistralForCausalLM(config)`
    assert q_proj["library_defined_at"] == [{"file": modeling_file, "line": line_of(modeling_text, "self.q_proj = nn.Linear")}]
    assert q_proj["library_called_at"] == [{"file": modeling_file, "line": line_of(modeling_text, "self.q_proj(hidden_states)")}]
    assert q_proj["defined_at"]["file"] == "lib_model.py"
    # the library's attention classes are known by their class lines, with their two instances
    classes = {entry["name"]: entry for entry in result["source_map"]["classes"]}
    assert classes["MistralAttention"] == {"file": modeling_file, "line": line_of(modeling_text, "class MistralAttention"),
                                           "name": "MistralAttention",
                                           "paths": ["model.layers.0.self_attn", "model.layers.1.self_attn"]}
    # every library site is in a file that defines a class of the model (no wrapper files)
    class_files = {entry["file"] for entry in result["source_map"]["classes"]}
    library_files = {site["file"] for m in result["source_map"]["modules"]
                     for site in m["library_defined_at"] + m["library_called_at"]}
    library_files |= {o["file"] for o in result["source_map"]["operators"] if o["file"].startswith("/")}
    assert library_files and library_files <= class_files


def test_a_line_s_output_is_its_result_after_the_calls_it_made(tmp_path):
    files = write(tmp_path, {"gpt.py": """
        import torch
        import torch.nn as nn


        class Mlp(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 32)

            def forward(self, x):
                return self.fc(x).relu()


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(50, 8)
                self.pos = nn.Embedding(16, 8)
                self.mlp = Mlp()
                self.proj = nn.Linear(32, 4)

            def forward(self, idx):
                pos = torch.arange(idx.shape[1])
                x = self.tok(idx) + self.pos(pos)
                return self.proj(self.mlp(x))
    """})
    text = files["gpt.py"]
    result = run(tmp_path, "gpt.py", "Net", {"input_shape": [6], "dtype": "int64"})
    found = outputs(result, "gpt.py")
    # tok(idx) is (1, 6, 8), pos(pos) is (6, 8); the line's result is their sum, broadcast to (1, 6, 8)
    added = found[line_of(text, "x = self.tok(idx)")]
    assert (shape(added), added["operator"], added["call"]) == ([1, 6, 8], "aten.add", None)
    # mlp (a workspace module, whose operators belong to its own lines) then proj: the line's result
    # is proj's output, (1, 6, 4), from the call, not from an operator of the line
    projected = found[line_of(text, "return self.proj(self.mlp(x))")]
    assert (shape(projected), projected["operator"], projected["call"]) == ([1, 6, 4], None, "proj")
    # Mlp's line: fc's (1, 6, 32) output, then relu of it: the last operator, same shape
    assert found[line_of(text, "return self.fc(x).relu()")]["operator"] == "aten.relu"


def test_blocks_built_in_a_list_keep_the_line_that_built_them(tmp_path):
    # the ResNet idiom: blocks appended to a list on one line, wrapped in a Sequential on another,
    # and convolutions built by a helper function that each block calls
    files = write(tmp_path, {"resnet.py": """
        import torch.nn as nn


        def conv3x3(cin, cout):
            return nn.Conv2d(cin, cout, 3, padding=1, bias=False)


        class Block(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.conv1 = conv3x3(width, width)
                self.act = nn.ReLU()

            def forward(self, x):
                return self.act(self.conv1(x)) + x


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = conv3x3(3, 4)
                self.layer = self._make_layer(4, 2)

            def _make_layer(self, width, blocks):
                layers = []
                for _ in range(blocks):
                    layers.append(Block(width))
                return nn.Sequential(*layers)

            def forward(self, x):
                return self.layer(self.stem(x))
    """})
    text = files["resnet.py"]
    modules = by_path(run(tmp_path, "resnet.py", "Net", {"input_shape": [3, 8, 8]}))
    line = {path: entry["defined_at"]["line"] for path, entry in modules.items()}
    assert line["layer.0"] == line["layer.1"] == line_of(text, "layers.append(Block(width))")
    assert line["layer"] == line_of(text, "self.layer = self._make_layer(4, 2)")
    # a helper's module belongs to the line that called the helper, not to the helper's return line
    assert line["stem"] == line_of(text, "self.stem = conv3x3(3, 4)")
    assert line["layer.0.conv1"] == line_of(text, "self.conv1 = conv3x3(width, width)")
    # a module without parameters or children is seen only when registered: its registering line
    assert line["layer.0.act"] == line_of(text, "self.act = nn.ReLU()")


def test_parameters_assigned_in_model_code_have_their_lines(tmp_path):
    files = write(tmp_path, {"vit.py": """
        import torch
        import torch.nn as nn


        class Norm(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gain = nn.Parameter(torch.ones(d))

            def forward(self, x):
                return x * self.gain


        class ViT(nn.Module):
            def __init__(self, d=8):
                super().__init__()
                self.patch = nn.Conv2d(3, d, 4, stride=4)
                self.patch_proj = nn.Linear(d, d, bias=False)
                self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
                self.pos_embed = nn.Parameter(torch.zeros(1, 5, d), requires_grad=False)
                self.norms = nn.ModuleList([Norm(d) for _ in range(2)])
                self.head = nn.Linear(d, d, bias=False)
                self.head.weight = self.patch_proj.weight   # tied: no parameter of this line

            def forward(self, x):
                x = self.patch(x).flatten(2).transpose(1, 2)
                x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
                for norm in self.norms:
                    x = norm(x)
                return self.head(self.patch_proj(x))
    """})
    text = files["vit.py"]
    result = run(tmp_path, "vit.py", "ViT", {"input_shape": [3, 8, 8]})
    found = sorted((p["line"], p["path"], p["name"], p["shape"], p["numel"], p["trainable"])
                   for p in result["source_map"]["parameters"])
    gain = line_of(text, "self.gain = nn.Parameter")
    # the root's two parameters on their lines (1·1·8 = 8 and 1·5·8 = 40 elements), each Norm's gain
    # on Norm's line; the convolution's weight and bias belong to its module, not listed here
    assert found == sorted([
        (line_of(text, "self.cls_token ="), "", "cls_token", [1, 1, 8], 8, True),
        (line_of(text, "self.pos_embed ="), "", "pos_embed", [1, 5, 8], 40, False),
        (gain, "norms.0", "gain", [8], 8, True),
        (gain, "norms.1", "gain", [8], 8, True),
    ])


def test_deep_copied_layers_keep_the_lines_that_built_the_original(tmp_path):
    # DETR's and PyTorch's own _get_clones: the copies' children are never built or registered;
    # the lines that built the original's children built theirs
    files = write(tmp_path, {"net.py": """
        import copy
        import torch.nn as nn


        class Layer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.act = nn.ReLU()

            def forward(self, x):
                return self.act(self.lin(x))


        def clones(layer, n):
            return nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])


        class Encoder(nn.Module):
            def __init__(self, layer, n):
                super().__init__()
                self.layers = clones(layer, n)
                self.twice = copy.deepcopy(copy.deepcopy(layer))

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return self.twice(x)


        # torchscan: input_shape=(4,)
        def build():
            return Encoder(Layer(4), 2)
    """})
    text = files["net.py"]
    modules = by_path(run(tmp_path, "net.py", "build", {"input_shape": [4]}))
    line = {path: entry["defined_at"]["line"] for path, entry in modules.items()}
    assert line["layers.0.lin"] == line["layers.1.lin"] == line["twice.lin"] == line_of(text, "self.lin = nn.Linear(d, d)")
    assert line["layers.0.act"] == line["layers.1.act"] == line_of(text, "self.act = nn.ReLU()")
    # the copies themselves were registered where the model put them
    assert line["layers.0"] == line_of(text, "return nn.ModuleList([copy.deepcopy")
    assert line["twice"] == line_of(text, "self.twice = copy.deepcopy(")


def test_layers_without_parameters_after_a_starred_list_and_layers_handed_in(tmp_path):
    # a starred list makes the Sequential's argument count unknowable from the source: the ReLU and
    # the Identity copies are known by the line that built them; a layer built into a local and
    # handed to another module's constructor belongs to the line that built it, not to that
    # constructor's `self.proj = proj`
    files = write(tmp_path, {"net.py": """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, proj):
                super().__init__()
                self.proj = proj

            def forward(self, x):
                return self.proj(x)


        class Net(nn.Module):
            def __init__(self, n=2):
                super().__init__()
                self.seq = nn.Sequential(
                    nn.Conv2d(3, 8, 3, padding=1),
                    *[nn.Conv2d(8, 8, 3, padding=1) for _ in range(n)],
                    nn.Conv2d(8, 4, 1),
                    nn.ReLU(),
                    *[nn.Identity() for _ in range(2)],
                )
                proj = nn.Linear(4, 8)
                self.blk = Block(proj)

            def forward(self, x):
                return self.blk(self.seq(x).mean((2, 3)))
    """})
    text = files["net.py"]
    modules = by_path(run(tmp_path, "net.py", "Net", {"input_shape": [3, 8, 8]}))
    line = {path: entry["defined_at"]["line"] for path, entry in modules.items()}
    starred = line_of(text, "*[nn.Conv2d(8, 8, 3")
    assert (line["seq.0"], line["seq.1"], line["seq.2"]) == (starred - 1, starred, starred)
    assert line["seq.3"] == line_of(text, "nn.Conv2d(8, 4, 1),")
    assert line["seq.4"] == line_of(text, "nn.ReLU(),")
    assert line["seq.5"] == line["seq.6"] == line_of(text, "*[nn.Identity()")
    assert line["blk.proj"] == line_of(text, "proj = nn.Linear(4, 8)")
    assert line["blk"] == line_of(text, "self.blk = Block(proj)")
