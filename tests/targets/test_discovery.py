"""Finding annotated targets with ``ast``: both forms, their options, and every kind of problem.

Expected lines and columns are computed from the source text written in each test (``_pos``), never
from the code under test.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

from torchscan_lsp.targets import Target, TargetProblem, find_targets


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _pos(source: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """(1-based line, 0-based code-point column) of ``needle`` in ``source``."""
    start = -1
    for _ in range(occurrence + 1):
        start = source.index(needle, start + 1)
    line = source.count("\n", 0, start) + 1
    column = start - (source.rfind("\n", 0, start) + 1)
    return line, column


def _line_end(source: str, line: int) -> int:
    return len(source.splitlines()[line - 1])


def _only_problem(source: str) -> TargetProblem:
    scan = find_targets(source)
    assert len(scan.problems) == 1, scan.problems
    return scan.problems[0]


# ------------------------------------------------------------------------------------------------
# the pragma form


def test_pragma_above_a_zero_argument_factory():
    source = _src(
        """
        import torch.nn as nn

        # torchscan: input_shape=(3, 224, 224), device="cpu"
        def build_net():
            return nn.Conv2d(3, 8, 3)
        """
    )
    scan = find_targets(source, "net.py")
    assert scan.problems == []
    def_line, def_col = _pos(source, "def build_net")
    assert scan.targets == [
        Target(
            name="build_net",
            kind="factory",
            line=def_line,
            column=def_col,
            annotation_line=_pos(source, "# torchscan")[0],
            options={"input_shape": (3, 224, 224), "device": "cpu"},
            annotation="pragma",
        )
    ]


def test_pragma_above_a_module_class_with_a_no_argument_constructor():
    source = _src(
        """
        from torch import nn

        # torchscan: input_shape=[(3, 32, 32), (10,)], dtype=["float32", "torch.int64"], mode="structure", strict=True
        class TwoInputs(nn.Module):
            def __init__(self, width=4):
                super().__init__()
        """
    )
    scan = find_targets(source)
    assert scan.problems == []
    (target,) = scan.targets
    assert target.kind == "module_class"
    assert (target.line, target.column) == _pos(source, "class TwoInputs")
    assert target.options == {
        "input_shape": [(3, 32, 32), (10,)],
        "dtype": ["float32", "torch.int64"],
        "mode": "structure",
        "strict": True,
    }


def test_pragma_with_the_server_options_and_an_empty_pragma():
    source = _src(
        """
        # torchscan: measure=["latency", "memory", "layer_latency"], timeout=90.5
        def timed():
            pass

        # torchscan:
        def returns_its_own_inputs():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.problems == []
    assert [(t.name, t.options) for t in scan.targets] == [
        ("timed", {"measure": ["latency", "memory", "layer_latency"], "timeout": 90.5}),
        ("returns_its_own_inputs", {}),
    ]


def test_none_unsets_an_option():
    source = "# torchscan: input_shape=None, dtype=None\ndef f():\n    pass\n"
    scan = find_targets(source)
    assert scan.problems == []
    assert scan.targets[0].options == {"input_shape": None, "dtype": None}


def test_pragma_above_decorators_and_other_comment_lines():
    source = _src(
        """
        import functools

        # torchscan: input_shape=(8,)
        # (a note between the pragma and the definition)
        @functools.lru_cache(maxsize=None)
        def cached(scale=2, *rest, **named):
            pass
        """
    )
    scan = find_targets(source)
    assert scan.problems == []
    (target,) = scan.targets
    assert target.name == "cached"
    assert target.line == _pos(source, "def cached")[0]
    assert target.annotation_line == _pos(source, "# torchscan")[0]


def test_columns_are_code_points_not_utf8_bytes():
    source = _src(
        """
        # torchscan: device="cpu", dtype="flöat32"
        def f():
            pass
        """
    )
    problem = _only_problem(source)
    line, column = _pos(source, '"flöat32"')
    assert (problem.line, problem.column, problem.end_column) == (line, column, column + len('"flöat32"'))


# ------------------------------------------------------------------------------------------------
# the decorator form


def test_decorator_forms_under_every_import_name():
    source = _src(
        """
        import torchscan_lsp
        import torchscan_lsp as tsl
        from torchscan_lsp import target
        from torchscan_lsp import target as mark
        from torch import nn

        @torchscan_lsp.target(input_shape=(3, 32, 32))
        def a():
            pass

        @tsl.target(device="cpu")
        def b():
            pass

        @target()
        class C(nn.Module):
            pass

        @mark(mode="structure")
        def d():
            pass

        @other.target(input_shape=(1,))
        def not_ours():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.problems == []
    assert [(t.name, t.kind, t.annotation, t.options) for t in scan.targets] == [
        ("a", "factory", "decorator", {"input_shape": (3, 32, 32)}),
        ("b", "factory", "decorator", {"device": "cpu"}),
        ("C", "module_class", "decorator", {}),
        ("d", "factory", "decorator", {"mode": "structure"}),
    ]
    assert scan.targets[0].annotation_line == _pos(source, "@torchscan_lsp.target")[0]
    assert scan.targets[0].line == _pos(source, "def a")[0]


def test_bare_decorator_and_positional_arguments():
    source = _src(
        """
        import torchscan_lsp

        @torchscan_lsp.target
        def bare():
            pass

        @torchscan_lsp.target((3, 32, 32))
        def positional():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    first, second = scan.problems
    line, column = _pos(source, "torchscan_lsp.target\n")
    assert (first.line, first.column, first.end_column) == (line, column, column + len("torchscan_lsp.target"))
    assert "parentheses" in first.message and first.target == "bare"
    line, column = _pos(source, "(3, 32, 32)")
    assert (second.line, second.column, second.end_column) == (line, column, column + len("(3, 32, 32)"))
    assert "keyword" in second.message and second.target == "positional"


def test_decorator_option_problems_point_at_the_value():
    source = _src(
        """
        import torchscan_lsp

        @torchscan_lsp.target(input_shape=SHAPE, devise="cpu")
        def f():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    literal, unknown = scan.problems
    line, column = _pos(source, "SHAPE")
    assert (literal.line, literal.column, literal.end_column) == (line, column, column + 5)
    assert "literal" in literal.message and "SHAPE" in literal.message
    line, column = _pos(source, "devise")
    assert (unknown.line, unknown.column, unknown.end_column) == (line, column, column + 6)
    assert "unknown option 'devise'" in unknown.message and "did you mean 'device'" in unknown.message


def test_pragma_and_decorator_together_warn_and_merge():
    source = _src(
        """
        import torchscan_lsp

        # torchscan: input_shape=(3, 8, 8), device="cpu"
        @torchscan_lsp.target(device="meta")
        def both():
            pass
        """
    )
    scan = find_targets(source)
    (target,) = scan.targets
    assert target.options == {"input_shape": (3, 8, 8), "device": "meta"}
    (problem,) = scan.problems
    assert problem.severity == "warning"
    assert problem.line == _pos(source, "# torchscan")[0]


# ------------------------------------------------------------------------------------------------
# problems


def test_syntax_error_gives_its_line_and_no_targets():
    source = _src(
        """
        # torchscan: input_shape=(3,)
        def f():
            return (1,
        x = = 2
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    (problem,) = scan.problems
    assert problem.severity == "error"
    assert problem.message.startswith("syntax error:")
    # CPython reports the unclosed parenthesis, on the line where it opens.
    assert (problem.line, problem.column) == _pos(source, "(1,")


def test_syntax_error_column_in_code_points():
    source = "s = 'žžž'; y = )\n"
    problem = _only_problem(source)
    assert (problem.line, problem.column, problem.end_column) == (1, source.index(")"), source.index(")") + 1)
    assert "unmatched ')'" in problem.message


def test_syntax_error_column_comes_from_the_text_not_the_file_on_disk(tmp_path):
    # An editor's unsaved buffer: three lines were inserted above, so the buffer's line 12 is not
    # the file's line 12. The column must be that of "(" in the buffer's own line 12.
    on_disk = tmp_path / "net.py"
    on_disk.write_text("import torch\n" + "\n" * 10 + "x = 1\n", encoding="utf-8")
    lines = ["import torch", "# a", "# b", "# c"] + [""] * 7 + ["flat = nn.Flatten(", ""]
    buffer = "\n".join(lines)
    (problem,) = find_targets(buffer, str(on_disk)).problems
    assert "never closed" in problem.message
    assert (problem.line, problem.column) == (12, lines[11].index("("))


def test_non_literal_option():
    source = _src(
        """
        # torchscan: input_shape=make_shape(3), device="cpu"
        def f():
            pass
        """
    )
    problem = _only_problem(source)
    line, column = _pos(source, "make_shape(3)")
    assert (problem.line, problem.column, problem.end_column) == (line, column, column + len("make_shape(3)"))
    assert problem.severity == "error" and problem.target == "f"
    assert "must be a Python literal" in problem.message and "`make_shape(3)`" in problem.message


def test_unknown_option_points_at_its_name():
    source = _src(
        """
        # torchscan: input_shape=(3, 32, 32), inputshape=(1,)
        def f():
            pass
        """
    )
    problem = _only_problem(source)
    line, column = _pos(source, "inputshape")
    assert (problem.line, problem.column, problem.end_column) == (line, column, column + len("inputshape"))
    assert problem.message.startswith("unknown option 'inputshape'")
    assert "did you mean 'input_shape'" in problem.message


@pytest.mark.parametrize("value", ['True', '"headline"', '["dmas", "receptive_field"]', 'False'])
def test_each_strict_value_is_an_option(value):
    (target,) = find_targets(f"# torchscan: strict={value}\ndef f():\n    pass\n").targets
    assert target.options == {"strict": ast.literal_eval(value)}


@pytest.mark.parametrize(
    ("pragma", "bad", "fragment"),
    [
        ("input_shape=[3, 224, 224]", "[3, 224, 224]", "write the shape as a tuple, (3, 224, 224)"),
        ("input_shape=(3, 2.5)", "(3, 2.5)", "input_shape must be"),
        ("input_shape=(3, -1)", "(3, -1)", "must be positive"),
        ("input_shape=(0, 32, 32)", "(0, 32, 32)", "must be positive (a 0 makes an empty input"),
        ("input_shape=[(3, 8), (0,)]", "[(3, 8), (0,)]", "must be positive"),
        ("input_shape=[]", "[]", "input_shape must be"),
        ('dtype="float33"', '"float33"', "unknown dtype 'float33'; did you mean 'float32'?"),
        ('dtype="bfloat"', '"bfloat"', "unknown dtype 'bfloat'; did you mean 'bfloat16'?"),  # cut short, not 'float'
        ("dtype=32", "32", "dtype must be"),
        ('device="CUDA 0"', '"CUDA 0"', "device must be"),
        ('mode="fast"', '"fast"', "mode must be \"full\" or \"structure\""),
        ('strict="yes"', '"yes"', 'strict must be True (every count complete by every method), "headline" (FLOPs, '),
        ('strict=["flop"]', '["flop"]', '"receptive_field" (checked as "headline" checks), got [\'flop\']'),
        ('measure="latency"', '"latency"', "measure must be"),
        ('measure=["speed"]', '["speed"]', "unknown measurement 'speed'"),
        ("timeout=0", "0", "timeout must be a positive number"),
        ("timeout=True", "True", "timeout must be a positive number"),
    ],
)
def test_option_of_the_wrong_type(pragma, bad, fragment):
    source = f"# torchscan: {pragma}\ndef f():\n    pass\n"
    problem = _only_problem(source)
    column = source.index(bad, source.index("=") + 1)
    assert (problem.line, problem.column, problem.end_column) == (1, column, column + len(bad))
    assert fragment in problem.message
    assert problem.severity == "error" and problem.target == "f"
    assert find_targets(source).targets == []


def test_dtype_list_must_match_the_number_of_inputs():
    source = '# torchscan: input_shape=[(3,), (4,)], dtype=["float32"]\ndef f():\n    pass\n'
    problem = _only_problem(source)
    assert "dtype lists 1 dtype(s) but input_shape describes 2 input(s)" in problem.message
    assert problem.column == source.index('["float32"]')


def test_positional_repeated_and_unparsable_pragmas():
    source = _src(
        """
        # torchscan: (3, 32, 32)
        def positional():
            pass

        # torchscan: device="cpu", device="cuda"
        def repeated():
            pass

        # torchscan: input_shape=(3, 32
        def unclosed():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    positional, repeated, unclosed = scan.problems
    assert positional.line == 1 and positional.column == source.index("(3, 32, 32)")
    assert "name=value" in positional.message
    line, column = _pos(source, 'device="cuda"')
    assert (repeated.line, repeated.column) == (line, column)
    assert "given twice" in repeated.message
    line, _ = _pos(source, "input_shape=(3, 32")
    assert unclosed.line == line
    assert "cannot read the pragma's options" in unclosed.message


def test_pragma_not_directly_above_a_def_or_class():
    source = _src(
        """
        # torchscan: input_shape=(3,)

        def separated_by_a_blank_line():
            pass

        # torchscan: input_shape=(3,)
        model = None
        x = 1  # torchscan: input_shape=(3,)
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    blank, assignment, trailing = scan.problems
    assert (blank.line, blank.column, blank.end_column) == (1, 0, _line_end(source, 1))
    assert blank.severity == "warning" and "not directly above a def or class" in blank.message
    line, column = _pos(source, "# torchscan", occurrence=1)
    assert (assignment.line, assignment.column) == (line, column)
    line, column = _pos(source, "# torchscan", occurrence=2)
    assert (trailing.line, trailing.column, trailing.end_column) == (line, column, _line_end(source, line))
    assert trailing.severity == "warning" and "own line" in trailing.message


def test_factory_that_takes_required_arguments():
    source = _src(
        """
        # torchscan: input_shape=(3,)
        def build(depth, width=8, *, act, norm=None):
            pass
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    (problem,) = scan.problems
    line, column = _pos(source, "build(")
    assert (problem.line, problem.column, problem.end_column) == (line, column, column + len("build"))
    assert "takes required argument(s) depth, act" in problem.message


def test_class_whose_constructor_needs_arguments():
    source = _src(
        """
        import torchscan_lsp
        from torch import nn

        @torchscan_lsp.target(input_shape=(3,))
        class Net(nn.Module):
            def __init__(self, channels):
                super().__init__()
        """
    )
    problem = _only_problem(source)
    line, column = _pos(source, "Net(")
    assert (problem.line, problem.column, problem.end_column) == (line, column, column + 3)
    assert "needs constructor argument(s) channels" in problem.message


def test_nested_and_async_definitions_are_not_targets():
    source = _src(
        """
        from torch import nn

        class Outer(nn.Module):
            # torchscan: input_shape=(3,)
            def method(self):
                pass

        # torchscan: input_shape=(3,)
        async def build():
            pass
        """
    )
    scan = find_targets(source)
    assert scan.targets == []
    nested, asynchronous = scan.problems
    assert (nested.line, nested.column) == _pos(source, "method")
    assert "not defined at module level" in nested.message
    assert (asynchronous.line, asynchronous.column) == _pos(source, "build")
    assert "async" in asynchronous.message


def test_a_bad_target_does_not_hide_a_good_one():
    source = _src(
        """
        # torchscan: input_shape=oops
        def bad():
            pass

        # torchscan: input_shape=(3,)
        def good():
            pass
        """
    )
    scan = find_targets(source)
    assert [t.name for t in scan.targets] == ["good"]
    assert [p.target for p in scan.problems] == ["bad"]
    assert scan.get("good") is scan.targets[0] and scan.get("bad") is None


def test_pragma_inside_a_string_is_not_a_pragma():
    source = _src(
        '''
        DOC = """
        # torchscan: input_shape=(3,)
        """
        def f():
            pass
        '''
    )
    scan = find_targets(source)
    assert scan.targets == [] and scan.problems == []


def test_to_dict_is_json_ready():
    source = "# torchscan: input_shape=[(3, 4), (5,)]\ndef f():\n    pass\n"
    (target,) = find_targets(source).targets
    assert target.to_dict()["options"] == {"input_shape": [[3, 4], [5]]}


def test_targets_never_imports_torch():
    code = (
        "import sys\n"
        "import torchscan_lsp.targets as t\n"
        "import torchscan_lsp.cli.scan\n"
        "t.find_targets('# torchscan: input_shape=(3,)\\ndef f():\\n    pass\\n')\n"
        "t.load_workspace_defaults('.')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'torchscan_lsp.engine' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
