"""Modules held in plain Python containers (worker/unregistered.py): PyTorch registers none of
them, so the report counts none of their parameters while their calls' operators are counted; the
line that built them gets a warning saying so. Counts by hand: ``Linear(i, o)`` holds i·o + o
parameters; its call on (1, i) is 2·i·o FLOPs with the bias (i·o multiplies, i·o adds)."""

from __future__ import annotations

from analysed import analysed, state_of
from workspace_files import line_of, write

from torchscan_lsp.session.findings import result_findings

NET = """
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, d=4):
            super().__init__()
            self.fc = nn.Linear(d, d)
            self.plain = [nn.Linear(d, d), nn.Linear(d, d)]
            self.named = {"a": nn.Linear(d, 2)}
            self.alias = [self.fc]

        def forward(self, x):
            x = self.fc(x)
            for layer in self.plain:
                x = layer(x)
            return self.named["a"](x)


    # torchscan: input_shape=(4,)
    def build():
        return Net()
"""


def test_modules_in_plain_containers_are_named_on_the_line_that_built_them(tmp_path):
    text = write(tmp_path, {"net.py": NET})["net.py"]
    result = analysed(tmp_path, "net.py", "build", {"input_shape": [4]})
    # fc 20 registered; the plain list's two Linear(4, 4) hold 2·20, the dict's Linear(4, 2) 10
    assert result["report"]["totals"]["parameters"]["value"] == 20
    assert result["source_map"]["unregistered"] == [
        {"path": "", "attribute": "plain", "container": "list", "modules": 2, "parameters": 40,
         "defined_at": {"file": "net.py", "line": line_of(text, "self.plain = [")}},
        {"path": "", "attribute": "named", "container": "dict", "modules": 1, "parameters": 10,
         "defined_at": {"file": "net.py", "line": line_of(text, "self.named = {")}},
    ]  # the alias list holds fc, which the model registers: no entry
    # their calls ran: 3·2·4·4 + 2·4·2 = 112 FLOPs by the dispatched operators
    assert result["report"]["totals"]["operator_flops"]["value"] == 112
    state = state_of(tmp_path, "net.py", "build", line_of(text, "def build"), result)
    found = {f.line: f for f in result_findings(state, "net.py", None, headline="operators")
             if f.code == "unregistered-modules"}
    assert set(found) == {line_of(text, "self.plain = ["), line_of(text, "self.named = {")}
    plain = found[line_of(text, "self.plain = [")]
    assert plain.severity == "warning"
    assert plain.message.startswith("`plain` holds 2 modules in a plain list, which PyTorch does not register")
    assert "their 40 params are in no parameter count here" in plain.message and plain.message.endswith("nn.ModuleList")
    assert found[line_of(text, "self.named = {")].message.endswith("hold them in an nn.ModuleDict")
