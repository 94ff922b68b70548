"""What a line that returns several values computed (the source map's ``outputs``): the value it
returned, not the last operator it dispatched, whether the frame is a module's ``forward`` (read from
the call's output), a workspace helper (read from its return event) or library code. Shapes derived
by hand in each test: ``Linear(i, o)`` maps (..., i) to (..., o); ``view``, ``transpose``, ``@`` and
reductions by their definitions."""

from __future__ import annotations

import sys

import pytest

from torchscan_lsp.server import labels
from analysed import analysed, outputs
from workspace_files import line_of, write

ATTENTION = """
    import torch
    import torch.nn as nn


    def split_heads(x, heads):
        b, t, c = x.shape
        q = x.view(b, t, heads, c // heads)
        return q.transpose(1, 2), q.sum()


    def widen(x, times):
        for _ in range(times):
            x = torch.cat([x, x], -1)
        return x, x.mean()


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.proj = nn.Linear(8, 8)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            heads, total = split_heads(q, 2)
            w = torch.softmax(q @ k.transpose(-1, -2), -1)
            y = w @ v
            return self.proj(y), w


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()

        def forward(self, x):
            y, w = self.attention(x)
            a, m = widen(y, 1)
            b, n = widen(y, 2)
            return {"y": y, "a": a}


    # torchscan: input_shape=(5, 8)
    def build():
        return Net()
"""


def shapes(meta: dict):
    """A value's shapes: a tensor's as a tuple, a tuple's or list's items, a mapping's values."""
    if meta["kind"] == "tensor":
        return tuple(meta["shape"])
    if meta["kind"] in ("tuple", "list"):
        return [shapes(item) for item in meta["items"]]
    if meta["kind"] == "mapping":
        return {item["key"]: shapes(item["value"]) for item in meta["items"]}
    return meta["kind"]


def test_a_forward_that_returns_several_values_shows_them_all(tmp_path):
    text = write(tmp_path, {"net.py": ATTENTION})["net.py"]
    found = outputs(analysed(tmp_path, "net.py", "build", {"input_shape": [5, 8]}), "net.py")
    # (1, 5, 8) in: proj keeps (1, 5, 8); w = softmax((1, 5, 8) @ (1, 8, 5)) is (1, 5, 5). The line
    # dispatched proj last; what it returned is the pair
    pair = found[line_of(text, "return self.proj(y), w")]
    assert pair["returned"] is True and pair["call"] is None
    assert shapes(pair["output"]) == [(1, 5, 8), (1, 5, 5)]
    assert labels.line_label(pair) == "→ ((1, 5, 8), (1, 5, 5))"
    assert "from the value this line returned in its first run" in labels.result_text(pair)
    # a line that dispatched nothing (a dict of names) still shows what forward returned: y (1, 5, 8)
    # and a, y widened once along the last dimension, (1, 5, 16)
    mapping = found[line_of(text, 'return {"y": y, "a": a}')]
    assert mapping["returned"] is True and shapes(mapping["output"]) == {"y": (1, 5, 8), "a": (1, 5, 16)}


def test_a_helper_that_returns_several_values_shows_them_all(tmp_path):
    text = write(tmp_path, {"net.py": ATTENTION})["net.py"]
    found = outputs(analysed(tmp_path, "net.py", "build", {"input_shape": [5, 8]}), "net.py")
    # q (1, 5, 8) viewed as (1, 5, 2, 4), transposed to (1, 2, 5, 4); its sum is a scalar, (), the
    # last operator the line dispatched
    split = found[line_of(text, "return q.transpose(1, 2), q.sum()")]
    assert split["returned"] is True and shapes(split["output"]) == [(1, 2, 5, 4), ()]
    # widen(y, 1) returns ((1, 5, 16), ()), widen(y, 2) ((1, 5, 32), ()): two runs of the line,
    # two shapes; the first is shown
    widened = found[line_of(text, "return x, x.mean()")]
    assert shapes(widened["output"]) == [(1, 5, 16), ()]
    assert widened["runs"] == 2 and widened["range"] == {"distinct": 2, "min": None, "max": None}


LIBRARY = """
    import functools

    import torch
    import torch.nn as nn


    def passing(forward):
        @functools.wraps(forward)
        def wrapper(*args, **kwargs):
            return forward(*args, **kwargs)
        return wrapper


    def listing(forward):
        @functools.wraps(forward)
        def wrapper(*args, **kwargs):
            return list(forward(*args, **kwargs))
        return wrapper


    def halves(x):
        return x[..., :2].exp(), x[..., 2:].sum()


    class Kept(nn.Module):
        @passing
        def forward(self, x):
            return x.t(), x.sum(-1)


    class Changed(nn.Module):
        @listing
        def forward(self, x):
            return x.t(), x.sum(-1)


    class Split(nn.Module):
        def forward(self, x):
            return halves(x)
"""


@pytest.fixture
def library(tmp_path, monkeypatch):
    folder = tmp_path / "lib" / "site-packages"
    text = write(folder, {"returning_lib.py": LIBRARY})["returning_lib.py"]
    monkeypatch.syspath_prepend(str(folder))
    yield text, (folder / "returning_lib.py").resolve().as_posix()
    sys.modules.pop("returning_lib", None)


def test_library_lines_show_what_they_returned_or_nothing(tmp_path, library):
    text, path = library
    ws = tmp_path / "ws"
    write(ws, {"net.py": """
        import torch
        import torch.nn as nn
        from returning_lib import Changed, Kept, Split


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.kept, self.changed, self.split = Kept(), Changed(), Split()

            def forward(self, x):
                a, b = self.kept(x)
                c, d = self.changed(x)
                return self.split(x)


        # torchscan: input_shape=(4,)
        def build():
            return Net()
    """})
    found = outputs(analysed(ws, "net.py", "build", {"input_shape": [4]}), path)
    # x is (1, 4): x.t() is (4, 1), x.sum(-1) is (1,). A decorator that passes forward's value on
    # leaves the call's output the pair forward's line built
    kept = found[line_of(text, "return x.t(), x.sum(-1)")]
    assert kept["returned"] is True and shapes(kept["output"]) == [(4, 1), (1,)]
    # one that makes a list of it leaves no value known to be that line's, and the line's last
    # operator (the sum, (1,)) is not what it returned: the line shows nothing
    assert line_of(text, "return x.t(), x.sum(-1)", 1) not in found
    # a library helper's frames are not traced: its pair is not known, and not shown as its last
    # operator's output
    assert line_of(text, "return x[..., :2].exp(), x[..., 2:].sum()") not in found


HEADS = """
    import torch.nn as nn


    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleList([nn.Linear(8, 2), nn.Linear(8, 3)])

        def forward(self, x):
            return [h(x) for h in self.heads]


    class Named(Heads):
        def forward(self, x):
            return {i: h(x) for i, h in enumerate(self.heads)}


    def each(heads, x):
        return [h(x) for h in heads]


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Heads()
            self.b = Named()

        def forward(self, x):
            return self.a(x), self.b(x), each(self.a.heads, x)


    # torchscan: input_shape=(8,)
    def build():
        return Net()
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 inlines list and dict comprehensions")
def test_a_line_that_returns_a_comprehension_shows_all_it_made(tmp_path):
    # Linear(8, 2) and Linear(8, 3) on (1, 8): (1, 2) and (1, 3); the line's last operator is the
    # second head's, but it returned both
    text = write(tmp_path, {"net.py": HEADS})["net.py"]
    found = outputs(analysed(tmp_path, "net.py", "build", {"input_shape": [8]}), "net.py")
    assert labels.line_label(found[line_of(text, "return [h(x) for h in self.heads]")]) == "→ [(1, 2), (1, 3)]"
    assert labels.line_label(found[line_of(text, "return {i: h(x)")]) == "→ {0: (1, 2), 1: (1, 3)}"
    assert labels.line_label(found[line_of(text, "return [h(x) for h in heads]")]) == "→ [(1, 2), (1, 3)]"
