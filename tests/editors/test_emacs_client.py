"""The eglot configuration (editors/emacs/torchscan-eglot.el) against the real server, in
``emacs --batch``: the hover eglot shows and the diagnostics flymake received.

eglot 1.9 cannot show inlay hints, so only hover and pushed diagnostics are checked.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from editor_workspace import FLOPS, MACS, PARAMETERS, REPO, require_tool, si

CLIENT = Path(__file__).with_name("emacs_client.el")


def run_client(workspace: Path, env: dict, python: str, mode: str, tmp_path: Path) -> dict:
    emacs = require_tool("emacs", "install emacs-nox and elpa-eglot (scripts/install-test-tools.sh does as root)")
    has_eglot = subprocess.run([emacs, "--batch", "--eval", "(require 'eglot)"], capture_output=True)
    if has_eglot.returncode != 0:
        pytest.skip("eglot is not installed for this Emacs (Debian: elpa-eglot)")
    out = tmp_path / f"emacs-{mode}.json"
    client_env = {**env, "TORCHSCAN_PLUGIN_DIR": str(REPO / "editors" / "emacs"), "TORCHSCAN_PYTHON": python,
                  "TORCHSCAN_WORKSPACE": str(workspace / "models"), "TORCHSCAN_OUT": str(out),
                  "TORCHSCAN_MODE": mode}
    result = subprocess.run([emacs, "--batch", "-l", str(CLIENT)], cwd=tmp_path, env=client_env,
                            capture_output=True, text=True, timeout=300)
    assert out.exists(), f"emacs wrote no result (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def session(workspace, client_env, tmp_path_factory) -> dict:
    return run_client(workspace, client_env, sys.executable, "session", tmp_path_factory.mktemp("emacs"))


def test_analysis_states_arrive(session):
    assert session["states"] == {"model": "done", "broken": "failed"}
    assert session["messages"] is None


def test_the_root_is_the_folder_of_pyproject_toml(session, workspace):
    # the models lie one folder below pyproject.toml, with no version control around them: the
    # server must still get the folder that holds the workspace defaults as its root
    assert not any((folder / ".git").exists() for folder in (workspace, *workspace.parents))
    assert session["project_root"] == f"{workspace}/"


def test_hover_as_eglot_shows_it(session, expected):
    assert session["hover_line"] == expected.module_line
    hover = session["hover"]
    assert "Conv2d" in hover
    assert f"Parameters: {PARAMETERS} " in hover
    assert si(FLOPS, "FLOPs") in hover and si(MACS, "MACs") in hover


def test_pushed_diagnostics_reach_flymake(session, expected):
    errors = [d for d in session["diagnostics"]["broken"] if d["type"] == "eglot-error"]
    assert len(errors) == 1
    assert errors[0]["line"] == expected.broken_line
    assert "3 channels" in errors[0]["message"] and "4 channels" in errors[0]["message"]
    assert not [d for d in session["diagnostics"]["model"] or [] if d["type"] == "eglot-error"]


def test_missing_interpreter_is_named_with_the_fix(workspace, client_env, tmp_path):
    result = run_client(workspace, client_env, "/nonexistent/python3", "setup-only", tmp_path)
    assert result["messages"] == ["torchscan: no Python interpreter at /nonexistent/python3; set the variable torchscan-python"]


def test_interpreter_without_the_package_gets_the_install_command(workspace, client_env, tmp_path):
    # -S hides site-packages, so this interpreter cannot import torchscan_lsp.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    result = run_client(workspace, client_env, str(bare), "setup-only", tmp_path)
    assert result["messages"] == [
        f"torchscan: the package is not installed in {bare}; run: {bare} -m pip install torchscan-lsp"]
