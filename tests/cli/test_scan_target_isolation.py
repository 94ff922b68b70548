"""``scan --target NAME`` counts the problems of that target only: another target's bad pragma, in
the same file or in another file of a folder, neither prints nor fails the scan, while a syntax
error of a file that is read still does (it hides every target of the file, the one asked for
included)."""

from __future__ import annotations

import pytest

from workspace_files import line_of, run_scan as scan, write

GOOD_AND_BAD = """
    import torch.nn as nn


    # torchscan: input_shape=(4,)
    def good():
        return nn.Linear(4, 2)


    # torchscan: input_shape=(4,), colour=1
    def bad():
        return nn.Linear(4, 2)
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_another_target_of_the_file(workspace, capsys):
    files = write(workspace, {"tg.py": GOOD_AND_BAD})
    code, out, err = scan(capsys, "tg.py", "--target", "good")
    assert (code, err) == (0, "")
    assert "Total params: 10" in out  # Linear(4, 2): 4·2 + 2
    # the bad target itself, asked for, is reported at its option
    code, out, err = scan(capsys, "tg.py", "--target", "bad")
    assert code == 1 and out == ""
    assert err.startswith(f"tg.py:{line_of(files['tg.py'], 'colour')}: error: unknown option 'colour'")
    assert err.count("\n") == 1


def test_other_files_of_a_folder(workspace, capsys):
    write(workspace, {"models/a.py": GOOD_AND_BAD.replace("def good", "def mlp"), "models/b.py": GOOD_AND_BAD})
    code, out, err = scan(capsys, "models", "--target", "mlp")
    assert (code, err) == (0, "")
    assert out.startswith("models/a.py:")
    broken = write(workspace, {"models/c.py": "# torchscan: input_shape=(4,)\ndef mlp(:\n    pass\n"})["models/c.py"]
    code, out, err = scan(capsys, "models", "--target", "mlp")
    assert code == 1
    assert err.splitlines() == [f"models/c.py:{line_of(broken, 'def mlp(')}: error: syntax error: invalid syntax"]
