"""A broken ``[tool.torchscan-lsp]`` table: every bad key and value at once, each with its line of
``pyproject.toml``, in ``load_workspace_defaults``, ``scan``, ``check`` and the editor's diagnostics."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from torchscan_lsp.targets import WorkspaceConfigError, load_workspace_defaults

# Line numbers, counted by hand: 1 [project], 2 name, 3 blank, 4 the table's header, 5 devise,
# 6 mode, 7 timeout (good), 8 blank, 9 the train table's header, 10 optimizer (good), 11 momentum,
# 12 batch, 13 lr_rate.
PYPROJECT = """
    [project]
    name = "demo"

    [tool.torchscan-lsp]
    devise = "cpu"
    mode = "quick"  # a comment after the value
    timeout = 30

    [tool.torchscan-lsp.train]
    optimizer = "sgd"
    momentum = -1
    batch = 0
    lr_rate = 3
"""

EXPECTED = [
    (5, "[tool.torchscan-lsp] unknown option 'devise'"),
    (6, "[tool.torchscan-lsp] mode must be \"full\" or \"structure\", got 'quick'"),
    (11, "[tool.torchscan-lsp.train] train option 'momentum': got -1"),
    (12, "[tool.torchscan-lsp.train] train option 'batch': got 0"),
    (13, "[tool.torchscan-lsp.train] unknown train option 'lr_rate'"),
]

CONV = """
    import torch.nn as nn


    # torchscan: input_shape=(3, 32, 32)
    def build():
        return nn.Conv2d(3, 8, 3)
"""


def _write(root, name: str, text: str) -> None:
    (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def test_every_problem_with_its_line(tmp_path):
    _write(tmp_path, "pyproject.toml", PYPROJECT)
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    problems = raised.value.problems
    assert [p.line for p in problems] == [line for line, _ in EXPECTED]
    for problem, (_, start) in zip(problems, EXPECTED):
        assert problem.message.startswith(start), problem
    assert (raised.value.message, raised.value.line) == tuple(problems[0])   # the first one's
    assert str(raised.value).splitlines()[1].startswith(f"{tmp_path / 'pyproject.toml'}:6: ")


@pytest.mark.parametrize(
    ("table", "line", "start"),
    [
        # an inline table is one line: its keys are on the 'train' line (2)
        ('[tool.torchscan-lsp]\ntrain = {optimizer = "lamb", batch = 0}\n', 2,
         "[tool.torchscan-lsp.train] train option 'optimizer': got 'lamb'"),
        # an optimizer's own key under a bad optimizer is told about its value, not that it does not apply
        ('[tool.torchscan-lsp.train]\noptimizer = "lamb"\nmomentum = -1\n', 3,
         "[tool.torchscan-lsp.train] train option 'momentum': got -1"),
        # a key of another optimizer: it does not apply to adamw (the default)
        ('[tool.torchscan-lsp.train]\nmomentum = 0.9\n', 2,
         "[tool.torchscan-lsp.train] train option 'momentum' does not apply to optimizer 'adamw'"),
        # a rule between two good keys, at the key it names
        ('[tool.torchscan-lsp.train]\noptimizer = "sgd"\nnesterov = true\n', 3,
         "[tool.torchscan-lsp.train] train option 'nesterov': Nesterov momentum needs momentum > 0"),
    ],
)
def test_train_table_problems(tmp_path, table, line, start):
    _write(tmp_path, "pyproject.toml", table)
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    assert any(p.line == line and p.message.startswith(start) for p in raised.value.problems), raised.value


def test_inline_train_table_reports_both_keys(tmp_path):
    _write(tmp_path, "pyproject.toml", '[tool.torchscan-lsp]\ntrain = {optimizer = "lamb", batch = 0}\n')
    with pytest.raises(WorkspaceConfigError) as raised:
        load_workspace_defaults(tmp_path)
    assert [(p.line, p.message.split(":")[0]) for p in raised.value.problems] == [
        (2, "[tool.torchscan-lsp.train] train option 'optimizer'"),
        (2, "[tool.torchscan-lsp.train] train option 'batch'"),
    ]


def _run(root, *argv):
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", *argv], cwd=root, capture_output=True,
                          text=True, timeout=300)
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


def test_scan_and_check_report_every_problem(tmp_path):
    _write(tmp_path, "pyproject.toml", PYPROJECT)
    _write(tmp_path, "net.py", CONV)
    code, out, err = _run(tmp_path, "scan", "net.py")
    assert code == 1 and out == []
    assert len(err) == len(EXPECTED)
    for shown, (line, start) in zip(err, EXPECTED):
        assert shown.startswith(f"pyproject.toml:{line}: error: {start}"), err
    code, out, err = _run(tmp_path, "scan", "net.py", "--format", "json")
    assert code == 1 and out == ["[]"] and len(err) == len(EXPECTED)    # nothing analysed
    # check: each problem once, at its line of pyproject.toml, in the table's order
    code, out, _ = _run(tmp_path, "check", "net.py", "--no-hints")
    assert code == 1 and len(out) == len(EXPECTED)
    for shown, (line, start) in zip(out, EXPECTED):
        assert shown.startswith(f"pyproject.toml:{line}:1: error: {start}"), out
        assert shown.endswith("; the workspace defaults are not applied")


def test_a_target_that_needed_the_dropped_defaults_is_told_so(tmp_path):
    # the table sets input_shape but has a typo: it is dropped whole, and the target, whose pragma
    # sets no input_shape, fails for want of it; the error names the table, not only the pragma
    _write(tmp_path, "pyproject.toml", """
        [project]
        name = "demo"

        [tool.torchscan-lsp]
        input_shape = [3, 16, 16]
        devcie = "cpu"
    """)
    _write(tmp_path, "net.py", """
        import torch.nn as nn


        # torchscan: device="cpu"
        def build():
            return nn.Conv2d(3, 8, 3)
    """)
    code, out, _ = _run(tmp_path, "check", "net.py", "--no-hints")
    assert code == 1
    target = [line for line in out if line.startswith("net.py:4:")]
    assert len(target) == 1 and "without the workspace defaults, which pyproject.toml's [tool.torchscan-lsp] table " \
        "could not give (fix its errors)" in target[0] and "no input_shape is set" in target[0], out
