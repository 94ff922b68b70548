"""LineMap: lines of the analysed text onto the current one, checked against the texts themselves."""

import random

from torchscan_lsp.session.line_map import LineMap


def test_inserted_lines_on_top_shift_everything_below():
    old = ["import torch.nn as nn", "", "class Net(nn.Module):", "    def __init__(self):"]
    moved = LineMap(old, ["# one", "# two", *old])
    assert [moved.to_current(n) for n in range(1, 5)] == [3, 4, 5, 6]
    assert moved.to_analysed(1) is None and moved.to_analysed(5) == 3


def test_a_changed_line_maps_to_nothing_and_its_neighbours_stay():
    old = ["a", "b = 1", "c"]
    changed = LineMap(old, ["a", "b = 2", "c"])
    assert (changed.to_current(1), changed.to_current(2), changed.to_current(3)) == (1, None, 3)
    assert changed.to_analysed(2) is None


def test_random_edits_map_only_equal_lines_in_order():
    rng = random.Random(1)
    for _ in range(300):
        old = [rng.choice(["", "x", "return x", f"l{rng.randint(0, 30)}"]) for _ in range(rng.randint(0, 40))]
        new = list(old)
        for _ in range(rng.randint(0, 4)):
            where = rng.randint(0, len(new))
            kind = rng.choice("idr")
            if kind == "i":
                new.insert(where, f"new {rng.randint(0, 5)}")
            elif where < len(new):
                if kind == "d":
                    del new[where]
                else:
                    new[where] = "changed"
        lines = LineMap(old, new)
        pairs = [(n, lines.to_current(n)) for n in range(1, len(old) + 1) if lines.to_current(n) is not None]
        assert all(old[a - 1] == new[b - 1] and lines.to_analysed(b) == a for a, b in pairs)
        assert all(b1 < b2 for (_, b1), (_, b2) in zip(pairs, pairs[1:]))   # moves keep the order
        if old == new:
            assert len(pairs) == len(old)
