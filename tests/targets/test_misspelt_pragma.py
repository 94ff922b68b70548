"""A pragma whose tag is misspelt (``# torchscna: ...``) above a factory or class is not silence: an
information at its line asks whether ``# torchscan:`` was meant, in ``find_targets`` (the editor's
diagnostics), ``check`` and ``scan``. Comments that merely look alike, or stand anywhere else, stay
silent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from torchscan_lsp.targets import find_targets


@pytest.mark.parametrize(
    ("comment", "tag"),
    [
        ("# torchscna: input_shape=(3, 32, 32)", "torchscna"),   # two letters swapped
        ("# torchsan: input_shape=(3, 32, 32)", "torchsan"),     # one left out
        ("#TorchScan: input_shape=(3, 32, 32)", "TorchScan"),    # capitals: the tag is lower case
        ("# torch-scan: input_shape=(3, 32, 32)", "torch-scan"),
        ("    # trochscan: input_shape=(3, 32, 32)", "trochscan"),  # indented
    ],
)
def test_a_misspelt_tag_above_a_factory_is_an_information_at_its_line(comment, tag):
    source = f"import torch.nn as nn\n\n\n{comment}\ndef build():\n    return nn.Conv2d(3, 8, 3)\n"
    scan = find_targets(source)
    assert scan.targets == []
    (problem,) = scan.problems
    column = len(comment) - len(comment.lstrip())
    # line 4, from the '#' to the end of the comment
    assert (problem.line, problem.column, problem.end_column, problem.severity) == (4, column, len(comment), "information")
    assert problem.message == ("this comment is not a pragma: did you mean '# torchscan: input_shape=(3, 32, 32)'? "
                               f"(the tag '{tag}' is not 'torchscan')")


def test_comment_lines_between_the_misspelt_tag_and_the_class_still_count():
    source = "import torch.nn as nn\n\n# torchscna: input_shape=(4,)\n# a small head\nclass Head(nn.Linear):\n    pass\n"
    (problem,) = find_targets(source).problems
    assert problem.line == 3 and problem.severity == "information"


@pytest.mark.parametrize(
    "source",
    [
        "# torchvision: weights=None\ndef build():\n    pass\n",           # another library's name (0.70 alike)
        "# torchscan_lsp: x=1\ndef build():\n    pass\n",                 # 0.82 alike: a name of its own
        "# TODO: depth=12 is too deep\ndef build():\n    pass\n",          # a note
        "# type: ignore\ndef build():\n    pass\n",                        # no option follows
        "# torchscans: the models below\ndef build():\n    pass\n",        # prose, no option=
        "# torchscna: input_shape=(3,)\n\nx = 1\n",                        # above no def or class
        "def build():\n    # torchscna: input_shape=(3,)\n    return 1\n",  # inside a body, above a statement
        "x = 1  # torchscna: input_shape=(3,)\ndef build():\n    pass\n",   # not a full-line comment
    ],
)
def test_comments_that_only_look_alike_stay_silent(source):
    assert find_targets(source).problems == []


def test_check_and_scan_say_it_at_its_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "net.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        # torchscna: input_shape=(3, 32, 32)
        def build():
            return nn.Conv2d(3, 8, 3)


        # torchscan: input_shape=(4,)
        def head():
            return nn.Linear(4, 2)
    """), encoding="utf-8")
    message = ("this comment is not a pragma: did you mean '# torchscan: input_shape=(3, 32, 32)'? "
               "(the tag 'torchscna' is not 'torchscan')")
    check = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", "net.py", "--no-hints"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    # an information does not fail the check; head (line 10) is analysed and complete: nothing else
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines() == [f"net.py:4:1: info: {message}"]
    scan = subprocess.run([sys.executable, "-m", "torchscan_lsp", "scan", "net.py", "--format", "json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert scan.returncode == 0, scan.stderr
    assert scan.stderr.splitlines() == [f"net.py:4: information: {message}"]
