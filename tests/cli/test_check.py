"""``torchscan-lsp check``: output lines and exit codes, run as a user would run it."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workspace_files import line_of

FILES = {
    "conv.py": """
        import torch.nn as nn


        # torchscan: input_shape=(3, 32, 32)
        def build_conv():
            return nn.Conv2d(3, 8, 3)
    """,
    "broken.py": """
        import torch.nn as nn


        # torchscan: input_shape=(3,)
        def build_broken():
            layers = [nn.Linear(3, 3)]
            raise ValueError("no model for you")
    """,
    "syntax.py": """
        # torchscan: input_shape=(3,)
        def build(:
            pass
    """,
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("check")
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    for name, source in FILES.items():
        (root / name).write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return root


def _check(root, *paths):
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", *paths], cwd=root,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout.splitlines(), done.stderr


def test_clean_file_prints_hints_and_exits_zero(workspace):
    code, lines, stderr = _check(workspace, "conv.py")
    assert code == 0, stderr
    # Conv2d(3, 8, 3) on (1, 3, 32, 32): 224 parameters, MACs 7200·27 = 194,400, FLOPs 7200·54 = 388,800.
    # The hint stands after the 17 characters of "def build_conv():" on line 5: column 18.
    assert "conv.py:5:18: hint: 224 params · 194 kMACs · 389 kFLOPs" in lines
    assert not [line for line in lines if ": error: " in line]


def test_failing_factory_exits_one_with_the_raising_line(workspace):
    code, lines, _ = _check(workspace, "broken.py", "--no-hints")
    assert code == 1
    raised = [line for line in lines if line.startswith("broken.py:7:5: error: ")]
    assert len(raised) == 1 and "ValueError: no model for you" in raised[0]
    assert any(line.startswith("broken.py:5:1: error: ") for line in lines)   # and on the target line


def test_syntax_error_is_an_error(workspace):
    code, lines, _ = _check(workspace, "syntax.py")
    assert code == 1
    assert any(line.startswith("syntax.py:2:") and ": error: " in line for line in lines), lines


def test_broken_workspace_defaults_are_reported_once_at_their_lines(tmp_path):
    # two bad keys (lines 2 and 3 of the table) and two targets: each problem once, at pyproject.toml,
    # not once per target; the targets still run, without the defaults
    (tmp_path / "pyproject.toml").write_text("[tool.torchscan-lsp]\ncolour = 'red'\ntimeout = 'soon'\n",
                                             encoding="utf-8")
    conv = textwrap.dedent(FILES["conv.py"]).lstrip("\n")
    (tmp_path / "conv.py").write_text(conv + conv.replace("build_conv", "build_other"), encoding="utf-8")
    code, lines, _ = _check(tmp_path, "conv.py", "--no-hints")
    assert code == 1
    errors = [line for line in lines if ": error: " in line]
    assert [line.split(": error: ")[0] for line in errors] == ["pyproject.toml:2:1", "pyproject.toml:3:1"], lines
    assert "colour" in errors[0] and "timeout" in errors[1]


def _check_in(cwd, *args):
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout.splitlines(), done.stderr


def test_a_stopped_analysis_advises_the_timeout_flag(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (tmp_path / "spin.py").write_text(
        "import torch.nn as nn\n\n\n# torchscan: input_shape=(3,)\ndef build():\n    while True:\n        pass\n",
        encoding="utf-8")
    code, lines, _ = _check(tmp_path, "spin.py", "--no-hints", "--timeout", "2")
    assert code == 1
    errors = [line for line in lines if ": error: " in line]
    assert errors and all("analysis stopped after 2 s (raise --timeout, or the target's timeout option" in line
                          for line in errors), lines
    assert not [line for line in lines if "torchscan.timeoutSeconds" in line]


def test_raised_at_paths_are_relative_to_the_current_folder_like_the_line_prefixes(workspace):
    # run from a subfolder: both the prefix and the "raised at" path must read ../broken.py
    (workspace / "sub").mkdir(exist_ok=True)
    code, lines, _ = _check_in(workspace / "sub", "../broken.py", "--no-hints")
    assert code == 1
    target_line = [line for line in lines if line.startswith("../broken.py:5:1: error: ")]
    assert len(target_line) == 1 and "(raised at ../broken.py:7)" in target_line[0], lines


def test_help_describes_the_command():
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "inlay hints and diagnostics" in " ".join(done.stdout.split())
    assert "--timeout SECONDS" in done.stdout and "--memory-limit-mb MIB" in done.stdout


def test_library_files_the_model_ran_through_are_not_printed(tmp_path):
    # the model is built by an installed package: the worker names its file by absolute path in the
    # source map (for an editor that opens it); check prints the workspace's files only
    library = tmp_path / "installed" / "site-packages" / "fakelib"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text(textwrap.dedent("""
        import torch.nn as nn


        class Stack(nn.Sequential):
            pass


        def make():
            return Stack(nn.Linear(4, 4), nn.ReLU())
    """).lstrip("\n"), encoding="utf-8")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "net.py").write_text(textwrap.dedent("""
        import fakelib


        # torchscan: input_shape=(4,)
        def build():
            return fakelib.make()
    """).lstrip("\n"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", "net.py"], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(library.parent)})
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    # Linear(4, 4): 16 + 4 = 20 parameters; on (1, 4) its addmm is 2·4·4 = 32 FLOPs and 16 MACs;
    # ReLU on 4 elements: 4 FLOPs. 32 + 4 = 36 FLOPs
    assert "net.py:5:13: hint: 20 params · 16 MACs · 36 FLOPs" in lines
    assert lines and all(line.startswith("net.py:") for line in lines), lines


def test_the_gpt_example_hints_every_line_that_builds_or_computes():
    repo = Path(__file__).resolve().parents[2]
    text = (repo / "examples" / "gpt.py").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "check", "examples/gpt.py"], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    hints = {}
    for line in done.stdout.splitlines():
        where, _, label = line.partition(": hint: ")
        if label:
            hints[int(where.split(":")[1])] = label
    # GPTConfig: vocabulary 256, block 32, 2 layers, 4 heads, width 64; 16 tokens in.
    # nn.ModuleDict(dict(wte=..., wpe=..., ...)): each entry on its own line. wte = Embedding(256, 64):
    # 16,384 parameters; wpe = Embedding(32, 64): 2,048; lookups cost no FLOPs.
    assert hints[line_of(text, "wte=nn.Embedding")] == "16.4k params · 0 FLOPs"
    assert hints[line_of(text, "wpe=nn.Embedding")] == "2.05k params · 0 FLOPs"
    # the head's weight is wte's (one tensor, counted under wte, called first): 16,384 shared; its
    # matmul still runs: 2·16·64·256 = 524,288 FLOPs
    assert hints[line_of(text, "self.lm_head = nn.Linear")] == "16.4k params shared with transformer.wte · 524 kFLOPs"
    # SDPA's output: (B, H, T, C / H) = (1, 4, 16, 16)
    assert hints[line_of(text, "y = F.scaled_dot_product_attention")] == "→ (1, 4, 16, 16)"
    # class CausalSelfAttention, 2 instances: c_attn Linear(64, 192) = 12,480 and c_proj Linear(64, 64)
    # = 4,160 parameters, 33,280 in all. FLOPs as dispatched: c_attn 2·16·64·192 = 393,216, c_proj
    # 2·16·64·64 = 131,072, and the attention in its own forward, which no module formula sees: over
    # 4 heads × 16 × 16 = 1,024 scores of width 16, Q Kᵀ and P V 2·2·1,024·16 = 65,536, the scaling
    # 1,024, the softmax 3·1,024 − 4·16 = 3,008: 69,568. 593,856 each, 1,187,712 in all, complete
    assert hints[line_of(text, "class CausalSelfAttention")] == "×2 · 33.3k params · 1.19 MFLOPs"


def test_the_headline_flag_shows_the_module_formulas_and_their_gaps(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (tmp_path / "res.py").write_text(textwrap.dedent("""
        import torch.nn as nn


        class Res(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x) + x


        # torchscan: input_shape=(4,)
        def build():
            return Res()
    """).lstrip("\n"), encoding="utf-8")
    text = (tmp_path / "res.py").read_text(encoding="utf-8")
    # Linear(4, 4) on (1, 4): 20 parameters, 16 MACs; its addmm 2·4·4 = 32 FLOPs, the residual add 4:
    # 36 dispatched FLOPs, complete. Its module formula 4·(2·4 − 1) + 4 = 32 FLOPs misses the add.
    code, lines, stderr = _check(tmp_path, "res.py")
    assert code == 0, stderr
    assert f"res.py:{line_of(text, 'def build')}:13: hint: 20 params · 16 MACs · 36 FLOPs" in lines
    assert not [line for line in lines if ": warning: " in line or ": info: " in line]
    code, lines, stderr = _check(tmp_path, "res.py", "--headline", "modules")
    assert code == 0, stderr
    assert f"res.py:{line_of(text, 'def build')}:13: hint: 20 params · 16 MACs · ≥ 32 FLOPs" in lines
    (warning,) = [line for line in lines if ": warning: " in line]
    assert warning.startswith(f"res.py:{line_of(text, 'return self.fc(x) + x')}:9: warning: aten.add in the own forward "
                              "of the root module: no module formula counts it")


def test_a_bare_aliased_decorator_is_one_error_in_the_users_spelling(tmp_path):
    # `@ts` without parentheses calls target(build_b) while the module imports, which raises there:
    # that line gets the one error that says what to write (with the alias as written), and the
    # other target of the file, which cannot import either, says where it was raised
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from torchscan_lsp import target as ts


        @ts
        def build_b():
            return nn.Linear(8, 8), (torch.zeros(1, 8),)


        @ts(input_shape=(1, 4))
        def build_a():
            return nn.Linear(4, 4)
    """).lstrip("\n"), encoding="utf-8")
    code, lines, _ = _check(tmp_path, "m.py", "--no-hints")
    assert code == 1
    assert lines[0] == "m.py:6:2: error: call the decorator with parentheses: @ts() or @ts(input_shape=...)"
    assert len(lines) == 2 and lines[1].startswith("m.py:12:1: error: build_a: importing the module failed")
    assert lines[1].endswith("(raised at m.py:6)")


def test_a_module_that_fails_to_import_is_one_error_where_it_raised_and_one_per_target(tmp_path):
    # the NameError below both factories fails the module's import, hence both targets: the line
    # that raised gets one error, whatever the number of targets, and each target says where
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        from torch import nn


        # torchscan: input_shape=(4,)
        def first():
            return nn.Linear(4, 4)


        # torchscan: input_shape=(4,)
        def second():
            return nn.Linear(4, 2)


        undefined_name + 1
    """).lstrip("\n"), encoding="utf-8")
    code, lines, _ = _check(tmp_path, "m.py", "--no-hints")
    assert code == 1
    raised = [line for line in lines if line.startswith("m.py:14:1: error: ")]
    assert raised == ["m.py:14:1: error: importing the module failed; fix the import (the workspace root is on "
                      "sys.path): NameError: name 'undefined_name' is not defined"]
    assert [line.split(": error: ")[0] for line in lines if line not in raised] == ["m.py:5:1", "m.py:10:1"]
    assert all(line.endswith("(raised at m.py:14)") for line in lines if line not in raised)
