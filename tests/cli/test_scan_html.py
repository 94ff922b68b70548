"""``scan --html``: one offline page per target, never one overwriting another."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchscan_lsp.cli import main
from torchscan_lsp.cli.scan_output import html_paths
from workspace_files import write


def _conv(out_channels: int) -> str:
    return f"""
        import torch.nn as nn


        # torchscan: input_shape=(3, 32, 32)
        def build():
            return nn.Conv2d(3, {out_channels}, 3)
    """


def test_same_target_name_in_two_files_gets_two_pages(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"a.py": _conv(8), "b.py": _conv(16)})
    assert main(["scan", "a.py", "b.py", "--html", "out.html"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == ["wrote out.a.build.html (a.py: build)", "wrote out.b.build.html (b.py: build)"]
    # Conv2d(3, c, 3) has c·3·3·3 + c parameters: 224 for c = 8, 448 for c = 16
    a_page = (tmp_path / "out.a.build.html").read_text(encoding="utf-8")
    b_page = (tmp_path / "out.b.build.html").read_text(encoding="utf-8")
    assert "224" in a_page and "448" not in a_page
    assert "448" in b_page and "224" not in b_page
    assert not (tmp_path / "out.build.html").exists() and not (tmp_path / "out.html").exists()


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ([("net.py", "build")], ["report.html"]),                              # one result: the path itself
        ([("net.py", "a"), ("net.py", "b")], ["report.a.html", "report.b.html"]),
        ([("a.py", "build"), ("b.py", "build"), ("b.py", "head")],            # one depth for every name
         ["report.a.build.html", "report.b.build.html", "report.b.head.html"]),
        ([("x/m.py", "build"), ("y/m.py", "build")], ["report.x.m.build.html", "report.y.m.build.html"]),
        ([("../m.py", "build"), ("m.py", "build")],                           # '..' names nothing: numbered
         ["report.m.build.1.html", "report.m.build.2.html"]),
    ],
)
def test_page_names_are_distinct(shown, expected):
    results = [{"file": file, "target": target} for file, target in shown]
    assert html_paths(Path("report.html"), results) == [Path(name) for name in expected]


@pytest.mark.parametrize(
    ("source", "error"),
    [
        pytest.param("""
            import torch.nn as nn


            # torchscan: input_shape=(4,)
            def build():
                raise ValueError("no model for you")
        """, "net.py:6: error: 'build' failed: ValueError: no model for you", id="factory-raises"),
        pytest.param("""
            import os

            import torch.nn as nn


            # torchscan: input_shape=(4,)
            class Quits(nn.Module):
                def forward(self, x):
                    os._exit(3)
        """, "net.py:7: error: 'Quits' crashed: the worker process ended without a result (exit status 3)",
            id="forward-exits"),
        pytest.param("""
            # torchscan: input_shape=(4,)
            def build(:
                pass
        """, "net.py:2: error: syntax error", id="no-target-found"),
    ],
)
def test_no_page_when_no_target_was_analysed(tmp_path, monkeypatch, capsys, source, error):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "models"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"net.py": source})
    assert main(["scan", "net.py"]) == 1
    alone = capsys.readouterr().err.splitlines()
    assert main(["scan", "net.py", "--html", "out.html"]) == 1  # as without --html
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(error), err
    assert err == alone + ["out.html: error: no HTML report written: no target was analysed successfully"]
    assert "Traceback" not in "\n".join(err)
    assert not list(tmp_path.glob("out*.html"))
