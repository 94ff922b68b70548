"""Hints and hovers of the source map's newer records, from a hand-written worker result:
layers named by index, library files by absolute path, computing lines, class lines and shared
parameters.

The model the result describes (workspace file ``net.py``, and a library file
``/site/lib/modeling.py`` that defines ``Block``)::

    net.py                                           /site/lib/modeling.py
    1  import torch.nn as nn                         1  import torch.nn as nn
    2  from lib.modeling import Block                2
    3                                                3  class Block(nn.Module):
    4  # torchscan: input_shape=(4,)                 4      def __init__(self):
    5  class Net(nn.Module):                         5          super().__init__()
    6      def __init__(self):                       6          self.fc = nn.Linear(4, 4)
    7          super().__init__()                    7      def forward(self, x):
    8          self.emb = nn.Linear(4, 4)            8          return self.fc(x) * 2
    9          self.blocks = nn.ModuleList([Block() for _ in range(2)])
    10         self.head = nn.Linear(4, 4)
    11         self.head.weight = self.emb.weight
    12     def forward(self, x):
    13         x = self.emb(x)
    14         for block in self.blocks:
    15             x = block(x)
    16         y = x @ x.transpose(-2, -1)
    17         return self.head(x)

Numbers, derived by hand: Linear(4, 4) has 16 + 4 = 20 parameters and, on (1, 4), 4·(2·4 − 1) + 4
= 32 FLOPs by its module formula; the dispatcher counts its ``addmm`` as 2·1·4·4 = 32 FLOPs too.
A Block's dispatched count adds its own ``* 2`` (4 multiplies): 32 + 4 = 36, which no module
formula sees. ``head`` shares its 16-element weight with ``emb`` (the report counts it under
``emb``), so its own count is its bias, 4. Line 16 on (1, 4): (1, 4) @ (4, 1) = (1, 1), 2·4 = 8 FLOPs.
The root's dispatched count: 32 (emb) + 2·36 (blocks) + 8 (line 16) + 32 (head) = 144 FLOPs.
"""

import copy

from torchscan_lsp.server.hover import build_hover
from torchscan_lsp.server.inlay_hints import build_inlay_hints
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.settings import InlayHintSettings
from torchscan_lsp.session.state import Store, TargetKey, TargetState

LIBRARY = "/site/lib/modeling.py"
NET = "\n".join([
    "import torch.nn as nn", "from lib.modeling import Block", "", "# torchscan: input_shape=(4,)", "class Net(nn.Module):",
    "    def __init__(self):", "        super().__init__()", "        self.emb = nn.Linear(4, 4)",
    "        self.blocks = nn.ModuleList([Block() for _ in range(2)])", "        self.head = nn.Linear(4, 4)",
    "        self.head.weight = self.emb.weight", "    def forward(self, x):", "        x = self.emb(x)",
    "        for block in self.blocks:", "            x = block(x)", "        y = x @ x.transpose(-2, -1)",
    "        return self.head(x)", ""])
MODELING = "\n".join([
    "import torch.nn as nn", "", "class Block(nn.Module):", "    def __init__(self):", "        super().__init__()",
    "        self.fc = nn.Linear(4, 4)", "    def forward(self, x):", "        return self.fc(x) * 2", ""])


def _flops(value):
    return {"status": "complete", "value": value, "known_value": value, "unit": "FLOPs", "scope": "module_call",
            "method": "torchscan_module_formula"}


def _tensor(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": "torch.float32", "device": "cpu", "requires_grad": False}


def _layer(path, type_, trainable, flops=None, shared=0, shared_with=(), dispatched=None):
    metrics = {} if flops is None else {"module_flops": _flops(flops)}
    dispatched = flops if dispatched is None else dispatched  # a leaf's operators are its formula's here
    if dispatched is not None:
        metrics["operator_flops"] = {**_flops(dispatched), "method": "torch.utils.flop_counter.FlopCounterMode"}
    return {"path": path, "call_index": 0, "type": type_, "input": {"args": [_tensor(1, 4)], "kwargs": {}},
            "output": _tensor(1, 4), "metrics": metrics,
            "parameters": {"trainable": trainable, "frozen": 0, "bytes": 4 * trainable, "shared": bool(shared),
                           "shared_elements": shared, "shared_with": list(shared_with)},
            "buffers": {"elements": 0, "bytes": 0, "shared": False}}


def _site(file, line):
    return {"file": file, "line": line}


LAYERS = [
    _layer("", "Net", 0, dispatched=144),
    _layer("emb", "Linear", 20, 32),
    _layer("blocks.0", "Block", 0, dispatched=36),
    _layer("blocks.0.fc", "Linear", 20, 32),
    _layer("blocks.1", "Block", 0, dispatched=36),
    _layer("blocks.1.fc", "Linear", 20, 32),
    _layer("head", "Linear", 4, 32, shared=16, shared_with=["emb"]),
]
RESULT = {
    "ok": True, "target": "Net", "imported_files": ["net.py"],
    "report": {"layers": LAYERS, "totals": {}, "diagnostics": []},
    "source_map": {
        "modules": [
            {"layer": 0, "defined_at": _site("net.py", 5), "called_at": None, "library_defined_at": [], "library_called_at": []},
            {"layer": 1, "defined_at": _site("net.py", 8), "called_at": _site("net.py", 13),
             "library_defined_at": [], "library_called_at": []},
            *({"layer": index, "defined_at": _site("net.py", 9), "called_at": _site("net.py", 15),
               "library_defined_at": [], "library_called_at": []} for index in (2, 4)),
            *({"layer": index, "defined_at": _site("net.py", 9), "called_at": _site("net.py", 15),
               "library_defined_at": [_site(LIBRARY, 6)], "library_called_at": [_site(LIBRARY, 8)]} for index in (3, 5)),
            {"layer": 6, "defined_at": _site("net.py", 10), "called_at": _site("net.py", 17),
             "library_defined_at": [], "library_called_at": []},
        ],
        "operators": [
            {"file": "net.py", "line": 16, "operator": "aten.mm", "calls": 1, "flops": 8, "ignored": None, "layer": 0},
            {"file": LIBRARY, "line": 8, "operator": "aten.mul", "calls": 1, "flops": 4, "ignored": None, "layer": 2},
            {"file": LIBRARY, "line": 8, "operator": "aten.mul", "calls": 1, "flops": 4, "ignored": None, "layer": 4},
        ],
        "outputs": [
            {"file": "net.py", "line": 16, "layer": 0, "operator": "aten.mm", "output": _tensor(1, 1)},
            # a line that calls a module shows the module's output, not this one
            {"file": "net.py", "line": 13, "layer": 0, "operator": "aten.addmm", "output": _tensor(1, 4)},
            {"file": LIBRARY, "line": 8, "layer": 2, "operator": "aten.mul", "output": _tensor(1, 4)},
        ],
        "classes": [
            {"file": "net.py", "line": 5, "name": "Net", "paths": [""]},
            {"file": LIBRARY, "line": 3, "name": "Block", "paths": ["blocks.0", "blocks.1"]},
        ],
    },
}


class _Target:
    name, line, column, annotation_line, options = "Net", 5, 0, 4, {}


def _state():
    return TargetState(key=TargetKey("/ws", "net.py", "Net"), target=_Target(), view=ResultView(copy.deepcopy(RESULT)))


def _labels(hints):
    return {h.position.line + 1: h.label for h in hints}


def test_workspace_lines():
    labels = _labels(build_inlay_hints("net.py", Lines(NET), [_state()], InlayHintSettings()))
    assert labels[8] == "20 params · 32 FLOPs"
    # two Blocks built on line 9 (their Linears inside them): 2·20 = 40 parameters, 2·36 = 72 FLOPs
    assert labels[9] == "×2 · 40 params · 72 FLOPs"
    # the tied head: its 16 weights are counted under emb, its 4 biases are its own
    assert labels[10] == "4 params + 16 shared with emb · 32 FLOPs"
    # a computing line without a module call: (1, 4) @ (4, 1) = (1, 1)
    assert labels[16] == "→ (1, 1)"
    assert labels[13] == "→ (1, 4)"   # emb's output
    # the target's own class line carries the totals hint (no totals here: unknown), not its instance's
    assert labels[5] == "? params · ? MACs · ? FLOPs"


def test_a_head_that_owns_nothing_says_what_it_shares():
    result = copy.deepcopy(RESULT)
    result["report"]["layers"][6]["parameters"].update(trainable=0, bytes=0, shared_elements=20)
    state = TargetState(key=TargetKey("/ws", "net.py", "Net"), target=_Target(), view=ResultView(result))
    labels = _labels(build_inlay_hints("net.py", Lines(NET), [state], InlayHintSettings()))
    assert labels[10] == "20 params shared with emb · 32 FLOPs"
    hover = build_hover("net.py", 10, [state], NET.splitlines())
    assert "20 parameters shared with `emb` (counted there)" in hover


def test_sharing_inside_the_summed_modules_is_no_sharing():
    # a module called twice shares its tensors with its own first call: nothing to say
    result = copy.deepcopy(RESULT)
    result["report"]["layers"][6]["parameters"].update(shared_with=["head"])
    state = TargetState(key=TargetKey("/ws", "net.py", "Net"), target=_Target(), view=ResultView(result))
    assert _labels(build_inlay_hints("net.py", Lines(NET), [state], InlayHintSettings()))[10] == "4 params · 32 FLOPs"


def test_the_library_file_gets_its_own_hints_by_absolute_path():
    state = _state()
    assert state.name_for("modeling.py", LIBRARY) == LIBRARY
    assert state.name_for("net.py", "/ws/net.py") == "net.py"
    labels = _labels(build_inlay_hints("modeling.py", Lines(MODELING), [state], InlayHintSettings(), path=LIBRARY))
    assert labels == {
        3: "×2 · 40 params · 72 FLOPs",    # class Block: its two instances, with their own `* 2`
        6: "×2 · 40 params · 64 FLOPs",    # self.fc = nn.Linear(4, 4) in each
        8: "→ (1, 4)",                     # the fc call's output
    }
    # the same file named by its workspace-relative name only finds nothing
    assert build_inlay_hints("modeling.py", Lines(MODELING), [state], InlayHintSettings()) == []
    hover = build_hover("modeling.py", 6, [state], MODELING.splitlines(), path=LIBRARY)
    assert "### Linear ×2" in hover and "`blocks.0.fc`, `blocks.1.fc`" in hover


def test_the_store_finds_states_of_other_workspaces_by_a_library_path():
    store = Store()
    state = _state()
    store.targets[state.key] = state
    # the library file lies outside the workspace: its own folder is its root
    assert store.states_for_file("/site/lib", "modeling.py", LIBRARY) == [state]
    assert store.states_for_file("/site/lib", "modeling.py") == []
    assert store.states_for_file("/ws", "net.py", "/ws/net.py") == [state]


def test_a_worker_result_without_layer_indexes_is_still_read():
    # an older worker named layers by path and call index
    result = copy.deepcopy(RESULT)
    for entry in result["source_map"]["modules"]:
        layer = LAYERS[entry.pop("layer")]
        entry.update(path=layer["path"], call_index=0)
    for entry in result["source_map"]["operators"]:
        entry["module"] = LAYERS[entry.pop("layer")]["path"]
    view = ResultView(result)
    assert view.line("net.py", 10).defined == ["head"]
    assert view.line(LIBRARY, 6).defined == ["blocks.0.fc", "blocks.1.fc"]


def test_a_container_never_called_itself_is_hinted_on_its_own_line():
    # 1  class Heads(nn.Module):
    # 2      ... self.heads = nn.ModuleDict({
    # 3          "a": nn.Linear(4, 4),
    # 4          "b": nn.Linear(4, 4),
    # 5      })
    # forward calls heads["a"] and heads["b"], never the ModuleDict: its line sums its two children,
    # 2·20 = 40 parameters and 2·32 = 64 FLOPs
    result = {
        "ok": True, "target": "Heads", "imported_files": ["heads.py"],
        "report": {"layers": [_layer("", "Heads", 0), _layer("heads.a", "Linear", 20, 32), _layer("heads.b", "Linear", 20, 32)],
                   "totals": {}, "diagnostics": []},
        "source_map": {
            "modules": [{"layer": index, "defined_at": _site("heads.py", line), "called_at": None,
                         "library_defined_at": [], "library_called_at": []} for index, line in ((1, 3), (2, 4))],
            "operators": [], "outputs": [], "classes": [],
            "uncalled": [{"path": "heads", "type": "ModuleDict", "defined_at": _site("heads.py", 2), "library_defined_at": []}],
        },
    }
    state = TargetState(key=TargetKey("/ws", "heads.py", "Heads"), target=_Target(), view=ResultView(result))
    text = "\n".join(["class Heads(nn.Module):", "    self.heads = nn.ModuleDict({", '        "a": nn.Linear(4, 4),',
                      '        "b": nn.Linear(4, 4),', "    })", ""])
    labels = _labels(build_inlay_hints("heads.py", Lines(text), [state], InlayHintSettings(totals=False)))
    assert labels == {2: "40 params · 64 FLOPs", 3: "20 params · 32 FLOPs", 4: "20 params · 32 FLOPs"}
    hover = build_hover("heads.py", 2, [state], text.splitlines())
    assert "### ModuleDict" in hover and "Never called itself" in hover
