"""Modules the forward pass never called: their parameters are the model's (every line that sums
modules counts them, each tensor once), their own line says they never ran, and a module below a
call that ran as one whole (``MultiheadAttention``'s ``out_proj``) is not one of them. Counts by
hand: ``Linear(i, o)`` holds i·o + o parameters, ``Embedding(n, d)`` n·d, ``MultiheadAttention(e,
h)`` 3·e·e + 3·e (the packed input projection) + e·e + e (``out_proj``)."""


from torchscan_lsp.server.hover import build_hover
from torchscan_lsp.server.inlay_hints import build_inlay_hints
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.settings import InlayHintSettings
from analysed import analysed, state_of
from workspace_files import line_of, write

NET = """
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.head = nn.Linear(8, 100)
            self.tied = nn.Linear(8, 10, bias=False)
            self.tied.weight = self.emb.weight

        def forward(self, ids):
            x = self.emb(ids)
            y, _ = self.attn(x, x, x)
            return y


    # torchscan: device="cpu"
    def build():
        return Net(), (torch.zeros(1, 4, dtype=torch.long),)
"""


def shown(tmp_path):
    text = write(tmp_path, {"net.py": NET})["net.py"]
    result = analysed(tmp_path, "net.py", "build")
    state = state_of(tmp_path, "net.py", "build", line_of(text, "def build"), result)
    hints = {h.position.line + 1: h.label for h in build_inlay_hints("net.py", Lines(text, len), [state], InlayHintSettings())}
    return text, result, state, hints


def test_a_module_never_called_counts_in_every_sum_and_says_so_on_its_line(tmp_path):
    text, result, state, hints = shown(tmp_path)
    # emb 80, attn 3·64 + 24 + 64 + 8 = 288, head 900, tied 0 of its own (emb's weight): 1,268
    assert result["report"]["totals"]["parameters"]["value"] == 1268
    assert hints[line_of(text, "class Net")].startswith("1.27k params · ")
    assert hints[line_of(text, "return Net()")].startswith("1.27k params · ")
    assert hints[line_of(text, "self.head =")] == "900 params · never called"
    # tied holds no parameter of its own: emb's weight (10 · 8), counted under emb, is shared
    assert hints[line_of(text, "self.tied =")] == "80 params shared with emb · never called"
    hover = build_hover("net.py", line_of(text, "self.head ="), [state], text.splitlines())
    assert "Parameters: 900 (900 trainable" in hover and "Never called in the forward pass" in hover
    assert "FLOPs |" not in hover  # no work table for a module that did none
    card = build_hover("net.py", line_of(text, "class Net"), [state], text.splitlines())
    assert "| `head` | Linear | 900 params | — | never called |" in card


def test_a_module_below_a_call_that_ran_as_one_is_not_uncalled(tmp_path):
    text, result, state, hints = shown(tmp_path)
    uncalled = {entry["path"]: entry for entry in result["source_map"]["uncalled"]}
    # MultiheadAttention's forward reads out_proj's weight without calling it: its record holds it
    assert set(uncalled) == {"head", "tied"}
    assert hints[line_of(text, "self.attn =")].startswith("288 params · ")
    assert uncalled["head"]["ran"] is False and uncalled["head"]["parameters"] == {
        "trainable": 900, "frozen": 0, "bytes": 900 * 4, "shared_elements": 0, "shared_with": []}
    assert (uncalled["tied"]["parameters"]["shared_elements"], uncalled["tied"]["parameters"]["shared_with"]) == (80, ["emb"])
