"""Lines that assign without an event of their own (no operator dispatched, no module called:
``first = outputs[0]``, ``skip = skips.pop()``, the first line of an assignment whose expression
spans the next ones) still show what they assigned (the source map's ``outputs``), read when the
frame is next seen after going past them in straight-line code. Shapes by hand: ``Linear(i, o)``
maps (1, i) to (1, o); ``sum(-1)`` of (1, 8) is (1,), with ``keepdim=True`` (1, 1); (1, 16) + (1, 1)
broadcasts to (1, 16)."""

from __future__ import annotations

from analysed import analysed, outputs
from workspace_files import line_of, write

HEAD = """
    import torch
    import torch.nn as nn


    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(8, 8)
            self.a = nn.Linear(8, 16)
            self.b = nn.Linear(8, 16)
            self.cls = nn.Linear(16, 3)

        def forward(self, x):
            outputs = (self.enc(x), x.sum(-1))
            first = outputs[0]
            pooled = outputs[1]
            batch, width = first.shape
            q = (
                self.a(first)
                + self.b(first).sum(-1, keepdim=True)
            )
            skips = [q, first]
            skip = skips.pop()
            if pooled is not None:
                maybe = first
            logits = self.cls(q)
            tail = logits
            return logits + 0 * tail.sum() + 0 * skip.sum() + 0 * maybe.sum()


    # torchscan: input_shape=(8,)
    def build():
        return Head()
"""


def test_a_line_without_an_event_shows_the_tensor_it_assigned(tmp_path):
    text = write(tmp_path, {"net.py": HEAD})["net.py"]
    found = outputs(analysed(tmp_path, "net.py", "build", {"input_shape": [8]}), "net.py")

    def assigned(needle):
        entry = found.get(line_of(text, needle))
        return None if entry is None else [(t["name"], t["output"].get("shape")) for t in entry["targets"]]

    assert assigned("first = outputs[0]") == [("first", [1, 8])]
    assert assigned("pooled = outputs[1]") == [("pooled", [1])]
    # the first line of an assignment spread over several: the value assigned, not the next line's
    assert assigned("q = (") == [("q", [1, 16])]
    assert assigned("skip = skips.pop()") == [("skip", [1, 8])]
    assert assigned("tail = logits") == [("tail", [1, 3])]
    assert found[line_of(text, "first = outputs[0]")]["output"]["shape"] == [1, 8]
    # not shown: a list (changed by the next line, read after it), numbers, and a line behind a branch
    assert assigned("skips = [q, first]") is None
    assert assigned("batch, width = first.shape") is None
    assert assigned("maybe = first") is None


GATHER = """
    import torch
    import torch.nn as nn


    class Gather(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

        def forward(self, x):
            out = None
            for i, layer in enumerate(self.layers):
                h = layer(x)
                out = h if out is None else torch.cat([out, h], dim=1)
                if i == 5: x = h
                last = h
                pair = torch.cat([h,
                                  h], dim=1)
            return out + 0 * last.sum() + 0 * pair.sum()


    # torchscan: input_shape=(8,)
    def build():
        return Gather()
"""


def test_a_loop_line_whose_first_run_dispatches_nothing_shows_every_run(tmp_path):
    # Linear(8, 8) maps (1, 8) to (1, 8); three passes: the first assigns h itself, the next two
    # concatenate along dim 1, (1, 8 + 8) and (1, 16 + 8).
    text = write(tmp_path, {"net.py": GATHER})["net.py"]
    found = outputs(analysed(tmp_path, "net.py", "build", {"input_shape": [8]}), "net.py")
    gathered = found[line_of(text, "out = h if out is None")]
    assert gathered["runs"] == 3
    assert gathered["range"] == {"distinct": 3, "min": [1, 8], "max": [1, 24]}
    assert [(t["name"], t["output"]["shape"]) for t in gathered["targets"]] == [("out", [1, 8])]
    last = found[line_of(text, "last = h")]
    assert (last["runs"], [t["output"]["shape"] for t in last["targets"]]) == (3, [[1, 8]])
    # a store a one-line branch skips never ran: no run, no stale value
    assert line_of(text, "if i == 5: x = h") not in found
    # a statement over two lines: its runs are its cat's, three of (1, 16)
    pair = found[line_of(text, "pair = torch.cat([h,")]
    assert (pair["runs"], pair["output"]["shape"]) == (3, [1, 16])
