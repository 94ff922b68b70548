"""SourceLines: the line that built each child of a container constructor, and class lines.

The spans below are read off the source by hand, as ``co_positions`` gives them for the call
instruction a frame is executing: the call's first line and the (0-based, byte) column where it
starts, and the line of its closing parenthesis with the column just past it.
"""

import subprocess
import sys
import textwrap

from torchscan_lsp.targets.source_lines import MODULE_DICT, MODULE_LIST, SEQUENTIAL, SourceLines


def source(text: str) -> SourceLines:
    return SourceLines(textwrap.dedent(text).lstrip("\n"))


def test_sequential_children_each_get_their_argument_line():
    lines = source("""
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3,
                      padding=1),
        )
    """)
    # the call starts at "nn" on line 1 (after "self.features = ": column 16); line 6 is ")"
    span = (1, 16), (6, 1)
    assert [lines.child_line(*span, SEQUENTIAL, name) for name in ("0", "1", "2")] == [2, 3, 4]
    assert lines.child_line(*span, SEQUENTIAL, "3") is None          # no fourth argument
    assert lines.child_line((1, 5), (6, 1), SEQUENTIAL, "0") is None  # "features = ...": no call


def test_a_starred_argument_ends_the_positional_mapping():
    lines = source("""
        seq = nn.Sequential(
            nn.Linear(4, 4),
            *more,
            nn.ReLU(),
        )
    """)
    span = (1, 6), (5, 1)   # "seq = " is 6 characters
    assert lines.child_line(*span, SEQUENTIAL, "0") == 2
    assert lines.child_line(*span, SEQUENTIAL, "1") is None   # *more: its length is unknown here
    assert lines.child_line(*span, SEQUENTIAL, "2") is None


def test_ordered_dict_keys_name_the_children():
    lines = source("""
        seq = nn.Sequential(OrderedDict([
            ("conv", nn.Conv2d(3, 8, 3)),
            ("act",
             nn.ReLU()),
        ]))
        kw = nn.Sequential(collections.OrderedDict(
            fc=nn.Linear(2, 2),
            out=nn.Sigmoid()))
    """)
    # "seq = " and "kw = " before the calls; line 5 is "]))": the Sequential's ")" is the third
    # character, so its end column is 3; line 8 is "    out=nn.Sigmoid()))": the 22nd
    assert lines.child_line((1, 6), (5, 3), SEQUENTIAL, "conv") == 2
    assert lines.child_line((1, 6), (5, 3), SEQUENTIAL, "act") == 4         # the value's line
    assert lines.child_line((6, 5), (8, 22), SEQUENTIAL, "fc") == 7
    assert lines.child_line((6, 5), (8, 22), SEQUENTIAL, "out") == 8


def test_module_list_elements_and_comprehensions():
    lines = source("""
        a = nn.ModuleList([
            nn.Linear(2, 2),
            nn.Linear(2, 2),
        ])
        b = nn.ModuleList(
            [Block(i)
             for i in range(3)])
        c = nn.ModuleList(modules=(nn.ReLU(),
                                   nn.GELU()))
    """)
    # each call starts after "a = ", "b = ", "c = " (column 4)
    assert [lines.child_line((1, 4), (4, 2), MODULE_LIST, n) for n in ("0", "1", "2")] == [2, 3, None]
    # every child of a comprehension is built by its one element expression (line 6)
    assert [lines.child_line((5, 4), (7, 24), MODULE_LIST, n) for n in ("0", "1", "2")] == [6, 6, 6]
    # line 9: 27 spaces, "nn.GELU()" (9), the tuple's ")" and the call's ")": the call ends at 38
    assert [lines.child_line((8, 4), (9, 38), MODULE_LIST, n) for n in ("0", "1")] == [8, 9]


def test_module_dict_literal_pairs_and_comprehension():
    lines = source("""
        d = nn.ModuleDict({
            "x": nn.Identity(),
            "y":
                nn.Tanh(),
        })
        p = nn.ModuleDict([
            ("a", nn.ReLU()),
            ("b", nn.GELU()),
        ])
        c = nn.ModuleDict({
            k: nn.Linear(2, 2)
            for k in "ab"})
    """)
    # each call starts after "d = ", "p = ", "c = " (column 4)
    assert lines.child_line((1, 4), (5, 2), MODULE_DICT, "x") == 2
    assert lines.child_line((1, 4), (5, 2), MODULE_DICT, "y") == 4
    assert lines.child_line((1, 4), (5, 2), MODULE_DICT, "z") is None
    assert lines.child_line((6, 4), (9, 2), MODULE_DICT, "a") == 7
    assert lines.child_line((6, 4), (9, 2), MODULE_DICT, "b") == 8
    assert lines.child_line((10, 4), (12, 19), MODULE_DICT, "a") == 11


def test_module_dict_of_a_dict_call():
    # nanoGPT's `nn.ModuleDict(dict(wte=..., h=nn.ModuleList(...)))`
    lines = source("""
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(10, 4),
                h=nn.ModuleList([Block() for _ in range(2)]),
            )
        )
    """)
    span = (1, 19), (6, 1)   # after "self.transformer = "; line 6 is ")"
    assert lines.child_line(*span, MODULE_DICT, "wte") == 3
    assert lines.child_line(*span, MODULE_DICT, "h") == 4
    assert lines.child_line(*span, SEQUENTIAL, "wte") is None   # Sequential takes no dict


def test_the_kind_decides_the_naming_rule_not_the_spelling():
    # the same call read as a ModuleList has no list argument to map
    lines = source("""
        seq = nn.Sequential(
            nn.ReLU(),
        )
    """)
    span = (1, 6), (3, 1)
    assert lines.child_line(*span, SEQUENTIAL, "0") == 2
    assert lines.child_line(*span, MODULE_LIST, "0") is None
    assert lines.child_line(*span, MODULE_DICT, "0") is None


def test_class_lines_by_qualified_name():
    lines = source("""
        import torch.nn as nn


        @register
        class Block(nn.Module):
            class Inner(nn.Module):
                pass


        def factory():
            class Local(nn.Module):
                pass
            return Local()


        if True:
            class Guarded(nn.Module):
                pass
    """)
    assert lines.class_line("Block") == 5            # the class line, not the decorator's
    assert lines.class_line("Block.Inner") == 6
    assert lines.class_line("factory.<locals>.Local") == 11
    assert lines.class_line("Guarded") == 17
    assert lines.class_line("Missing") is None
    # found above a line of its body (line 6) without parsing (the text does not even parse): the
    # nearest "class Local" line above it
    assert SourceLines("class Local:\n    pass\n\n(:\nclass Local(object):\n    x = 1\n").class_line("Local", 6) == 5


def test_a_text_that_does_not_parse_answers_nothing():
    lines = SourceLines("class Broken(:\n    pass\n")
    assert lines.class_line("Broken") is None
    assert lines.child_line((1, 0), (1, 14), SEQUENTIAL, "0") is None


def test_reading_lines_never_imports_torch():
    code = (
        "import sys\n"
        "from torchscan_lsp.targets.source_lines import SEQUENTIAL, SourceLines\n"
        "lines = SourceLines('s = nn.Sequential(\\n    nn.ReLU(),\\n)\\nclass A:\\n    pass\\n')\n"
        "assert lines.child_line((1, 4), (3, 1), SEQUENTIAL, '0') == 2 and lines.class_line('A') == 4\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
