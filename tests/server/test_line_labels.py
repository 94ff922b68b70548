"""The hints and hovers of a line's result (the source map's ``outputs`` entry): the names a line
assigned, its runs and how their shapes varied; and a library model built over several lines, named
by its class. Entries are written by hand; the library model is analysed by a worker."""

import importlib.util

import pytest

from torchscan_lsp.server import labels
from torchscan_lsp.server.hover import build_hover
from torchscan_lsp.server.inlay_hints import build_inlay_hints
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.settings import InlayHintSettings
from analysed import analysed, state_of
from workspace_files import line_of, write


def tensor(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": "torch.float32", "device": "cpu", "requires_grad": False}


def scalar():
    return {"kind": "scalar", "type": "int"}


def test_a_line_that_assigned_several_names_shows_each():
    entry = {"operator": None, "call": "wv", "output": tensor(1, 32, 32),
             "targets": [{"name": "xq", "output": tensor(1, 32, 64), "range": None},
                         {"name": "xk", "output": tensor(1, 32, 32), "range": None},
                         {"name": "xv", "output": tensor(1, 32, 32), "range": None}]}
    assert labels.line_label(entry) == "xq (1, 32, 64) · xk (1, 32, 32) · xv (1, 32, 32)"
    assert "Assigned in its first run: `xq` (1, 32, 64), `xk` (1, 32, 32), `xv` (1, 32, 32)" in labels.result_text(entry)


def test_names_without_tensors_are_left_to_the_hover():
    entry = {"operator": "aten.view", "call": None, "output": tensor(9, 3, 3, 32),
             "targets": [{"name": "x", "output": tensor(9, 3, 3, 32), "range": None},
                         {"name": "pad_hw", "output": {"kind": "tuple", "items": [scalar(), scalar()]}, "range": None}]}
    assert labels.line_label(entry) == "x (9, 3, 3, 32)"
    assert "`pad_hw` (scalar, scalar)" in labels.result_text(entry)


def test_one_name_shows_its_value_not_the_last_operator():
    # x = x.float(): a no-op dispatches nothing; the line's last operator is an earlier one's
    entry = {"operator": "aten.permute", "call": None, "output": tensor(1, 16, 32),
             "targets": [{"name": "x", "output": tensor(1, 32, 16), "range": None}]}
    assert labels.line_label(entry) == "→ (1, 32, 16)"
    assert labels.output_source(entry) == "the value assigned to `x` in its first run"


def test_a_name_holding_a_mapping_of_tensors_shows_the_mapping():
    # outs = {k: head(x) for k, head in self.heads.items()}: the last operator is the last head's
    mapping = {"kind": "mapping", "type": "dict", "items": [
        {"key": "a", "key_type": "str", "value": tensor(1, 3)}, {"key": "b", "key_type": "str", "value": tensor(1, 4)}]}
    entry = {"operator": "aten.addmm", "call": None, "output": tensor(1, 4),
             "targets": [{"name": "outs", "output": mapping, "range": None}]}
    assert labels.line_label(entry) == "→ {a: (1, 3), b: (1, 4)}"


def test_runs_whose_shapes_vary_give_their_range():
    # (1, 8), (1, 16), (1, 32): the first shown, the range per dimension
    entry = {"operator": None, "call": "grow.0", "output": tensor(1, 8), "runs": 3,
             "range": {"distinct": 3, "min": [1, 8], "max": [1, 32]},
             "targets": [{"name": "x", "output": tensor(1, 8), "range": {"distinct": 3, "min": [1, 8], "max": [1, 32]}}]}
    assert labels.line_label(entry) == "→ (1, 8) · ×3 runs, shapes vary (1, 8..32)"
    assert "Ran 3 times; the first run is shown; shapes vary: (1, 8..32)" in labels.result_text(entry)


def test_runs_of_one_shape_say_nothing_in_the_hint():
    entry = {"operator": "aten.mul", "call": None, "output": tensor(1, 32), "runs": 2, "range": None}
    assert labels.line_label(entry) == "→ (1, 32)"
    assert labels.result_text(entry).endswith("Ran 2 times; the first run is shown")


def test_ranks_that_differ_have_no_range_per_dimension():
    entry = {"operator": "aten.view", "call": None, "output": tensor(4, 4), "runs": 2,
             "range": {"distinct": 2, "min": None, "max": None}}
    assert labels.line_label(entry) == "→ (4, 4) · ×2 runs, shapes vary"
    assert "shapes vary: 2 shapes" in labels.result_text(entry)
    # several names: the hint says that they vary, the hover gives each name's range
    entry = {**entry, "targets": [{"name": "a", "output": tensor(4, 4), "range": {"distinct": 2, "min": [4, 4], "max": [8, 4]}},
                                  {"name": "b", "output": tensor(4), "range": None}]}
    assert labels.line_label(entry) == "a (4, 4) · b (4,) · ×2 runs, shapes vary"
    assert "shapes vary: `a` (4..8, 4)" in labels.result_text(entry)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed "
                    "(the examples extra)")
def test_a_library_model_built_over_several_lines_is_named_by_its_class(tmp_path):
    text = write(tmp_path, {"lib_model.py": """
        import torch
        from transformers import LlamaConfig, LlamaModel


        def build():
            torch.manual_seed(0)
            model = LlamaModel(
                LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                            num_key_value_heads=1, vocab_size=32, max_position_embeddings=16)
            )
            return model, (torch.zeros(1, 4, dtype=torch.long),)
    """})["lib_model.py"]
    state = state_of(tmp_path, "lib_model.py", "build", line_of(text, "def build"), analysed(tmp_path, "lib_model.py", "build"))
    line = line_of(text, "model = LlamaModel(")
    hover = build_hover("lib_model.py", line, [state], text.splitlines())
    # the root holds a ModuleList (layers) whose block the library built: still the model, by its class
    assert hover.startswith("### LlamaModel\n")
    hints = {h.position.line + 1: h.label for h in build_inlay_hints(
        "lib_model.py", Lines(text, len), [state], InlayHintSettings())}
    # embeddings 32·16 = 512; one layer: q 16·16, k and v 16·8, o 16·16 (768), gate, up 16·32 and
    # down 32·16 (1,536), two norms of 16; the final norm 16: 512 + 768 + 1,536 + 32 + 16 = 2,864
    assert hints[line].startswith("2.86k params · ") and "modules" not in hints[line]


def test_a_line_of_many_module_calls_lists_the_first(tmp_path):
    # blocks i = 0..5 are Linear(4, 4 + i), each called on x[..., :4] of the (1, 4 + 5) input:
    # the line's outputs are (1, 4), (1, 5), ..., (1, 9); the hover, which speaks of first runs,
    # lists the first four of the six calls
    text = write(tmp_path, {"calls.py": """
        import torch
        import torch.nn as nn


        class Fan(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(4, 4 + i) for i in range(6)])

            def forward(self, x):
                outs = []
                for block in self.blocks:
                    outs.append(block(x[..., :4]))
                return outs


        def build():
            return Fan(), (torch.zeros(1, 9),)
    """})["calls.py"]
    state = state_of(tmp_path, "calls.py", "build", line_of(text, "def build"), analysed(tmp_path, "calls.py", "build"))
    hover = build_hover("calls.py", line_of(text, "outs.append(block("), [state], text.splitlines())
    assert ("Module calls on this line: 6 (first 4): `blocks.0` → (1, 4), `blocks.1` → (1, 5), "
            "`blocks.2` → (1, 6), `blocks.3` → (1, 7)") in hover, hover
