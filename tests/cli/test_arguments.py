"""The arguments ``scan`` and ``check`` share: usage errors exit with 2 naming the argument, and a
path without targets is an error (exit 1) in both commands, worded the same."""

from __future__ import annotations

import pytest

from torchscan_lsp.cli import main
from workspace_files import write

NO_TARGET = ("no annotated model found; put '# torchscan: input_shape=(...)' on the line above a "
             "zero-argument model factory or nn.Module class")

NO_MODEL = """
    import torch.nn as nn


    def build():
        return nn.ReLU()
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"net.py": NO_MODEL, "models/plain.py": NO_MODEL})
    (tmp_path / "nothing").mkdir()
    return tmp_path


@pytest.mark.parametrize("command", ["scan", "check"])
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # argparse's own wording: "<prog>: error: argument <dest>: <what the type function raised>"
        (["nowhere.py"], "argument PATH: no such file or folder: 'nowhere.py'"),
        (["net.py", "--timeout", "0"], "argument --timeout: must be a positive number of seconds, got '0'"),
        (["net.py", "--timeout", "nan"], "argument --timeout: must be a positive number of seconds, got 'nan'"),
        (["net.py", "--timeout", "soon"], "argument --timeout: must be a positive number of seconds, got 'soon'"),
        (["net.py", "--memory-limit-mb", "-3"],
         "argument --memory-limit-mb: must be a positive number of MiB, got '-3'"),
    ],
)
def test_usage_errors_exit_two_before_anything_runs(workspace, capsys, command, argv, expected):
    with pytest.raises(SystemExit) as stopped:
        main([command, *argv])
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and out == ""
    assert err.splitlines()[-1] == f"torchscan-lsp {command}: error: {expected}"
    assert err.startswith(f"usage: torchscan-lsp {command} ")


def test_one_root_help_for_both_commands(workspace, capsys):
    helps = []
    for command in ("scan", "check"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        start = text.index("--root DIR workspace root")  # the options list, not the usage line
        helps.append(text[start:text.index("--python PYTHON", start)])
    assert helps[0] == helps[1] and "pyproject.toml or .git" in helps[0]


@pytest.mark.parametrize(
    ("path", "scan_line", "check_line"),
    [
        # a file named without targets: the error is at its first line (scan FILE:LINE, check FILE:LINE:COL)
        ("net.py", f"net.py:1: error: {NO_TARGET}", f"net.py:1:1: error: {NO_TARGET}"),
        # a folder whose files hold no target, and an empty folder: the error names the folder
        ("models", f"models: error: {NO_TARGET}", f"models: error: {NO_TARGET}"),
        ("nothing", f"nothing: error: {NO_TARGET}", f"nothing: error: {NO_TARGET}"),
    ],
)
def test_a_path_without_targets_is_an_error_in_scan_and_check(workspace, capsys, path, scan_line, check_line):
    assert main(["scan", path]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", scan_line + "\n")
    assert main(["check", path]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == (check_line + "\n", "")


def test_check_tells_a_helper_module_named_beside_a_model_file_but_does_not_fail(workspace, capsys):
    write(workspace, {"conv.py": "import torch.nn as nn\n\n\n# torchscan: input_shape=(3, 8, 8)\n"
                                 "def build():\n    return nn.Conv2d(3, 8, 3)\n"})
    assert main(["check", "--no-hints", "net.py", "conv.py"]) == 0
    out, _ = capsys.readouterr()
    assert f"net.py:1:1: info: {NO_TARGET}" in out.splitlines()


def test_a_reader_that_stops_reading_is_no_error_of_ours(workspace):
    """``scan ... | head -1``: stdout closed before the scan writes gives no 'internal error'."""
    import subprocess
    import sys

    write(workspace, {"conv.py": "import torch.nn as nn\n\n\n# torchscan: input_shape=(3, 8, 8)\n"
                                 "def build():\n    return nn.Conv2d(3, 8, 3)\n"})
    scan = subprocess.Popen([sys.executable, "-m", "torchscan_lsp", "scan", "conv.py", "--format", "json"],
                            cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scan.stdout.close()   # the reader is gone before the first byte (the analysis takes seconds)
    err = scan.stderr.read()
    # 141 = 128 + SIGPIPE (13): what a shell reports for a writer whose reader went away
    assert scan.wait(timeout=300) == 141 and err == ""
