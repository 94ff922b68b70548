"""A pragma written without its colon is not silently ignored: a warning at its line says so and
gives the comment as it should read, in ``find_targets`` (the editor's diagnostics) and ``check``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from torchscan_lsp.targets import find_targets


@pytest.mark.parametrize(
    ("comment", "fixed"),
    [
        ("# torchscan input_shape=(3, 32, 32)", "# torchscan: input_shape=(3, 32, 32)"),
        ("#torchscan input_shape=(3,), dtype='float16'", "# torchscan: input_shape=(3,), dtype='float16'"),
        ("# torchscan; device='cpu'", "# torchscan: device='cpu'"),
        ("    # torchscan mode='structure'", "# torchscan: mode='structure'"),   # indented, in a class
    ],
)
def test_a_pragma_without_its_colon_is_a_warning_at_its_line(comment, fixed):
    source = f"import torch.nn as nn\n\n\n{comment}\ndef build():\n    return nn.ReLU()\n"
    scan = find_targets(source)
    assert scan.targets == []
    (problem,) = scan.problems
    column = len(comment) - len(comment.lstrip())
    # line 4, from the '#' to the end of the line
    assert (problem.line, problem.column, problem.end_column, problem.severity) == (4, column, len(comment), "warning")
    assert problem.message == f"this comment is not a pragma: '# torchscan' needs a colon; write '{fixed}'"


@pytest.mark.parametrize(
    "comment",
    [
        "# torchscan is what we use here",          # prose: no option assignment follows
        "# torchscanner x=1",                        # another word
        "x = 1  # torchscan input_shape=(3,)",       # not a full-line comment
        "# see torchscan input_shape=(3,)",          # 'torchscan' is not the comment's first word
    ],
)
def test_comments_that_are_no_pragma_are_left_alone(comment):
    assert find_targets(f"{comment}\ndef build():\n    pass\n").problems == []


def test_check_prints_the_warning(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "net.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        # torchscan input_shape=(3, 32, 32)
        def build():
            return nn.Conv2d(3, 8, 3)


        # torchscan: input_shape=(4,)
        def head():
            return nn.Linear(4, 2)
    """), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", "net.py", "--no-hints"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    # a warning does not fail the check; head (line 10) is analysed, build is not a target
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "net.py:4:1: warning: this comment is not a pragma: '# torchscan' needs a colon; "
        "write '# torchscan: input_shape=(3, 32, 32)'"
    ]
