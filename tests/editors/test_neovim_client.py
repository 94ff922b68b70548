"""The Neovim plugin (editors/nvim) against the real server, from headless Neovim 0.11.

nvim_client.lua runs the plugin in ``nvim --headless --clean`` and writes what Neovim itself
received (inlay hints, code lenses, hover, diagnostics, notifications) as JSON, checked here.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from editor_workspace import FLOPS, MACS, PARAMETERS, REPO, find_nvim, si

PLUGIN = REPO / "editors" / "nvim"
CLIENT = Path(__file__).with_name("nvim_client.lua")


def run_client(workspace: Path, env: dict, python: str, mode: str, tmp_path: Path) -> dict:
    out = tmp_path / f"nvim-{mode}.json"
    command = [find_nvim(), "--headless", "--clean", "-l", str(CLIENT), str(PLUGIN), python,
               str(workspace / "models"), str(out), mode]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.exists(), f"nvim wrote no result (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def session(workspace, client_env, tmp_path_factory) -> dict:
    return run_client(workspace, client_env, sys.executable, "session", tmp_path_factory.mktemp("nvim"))


def test_server_started_at_the_workspace_root(session, workspace):
    # pyproject.toml marks the root, one directory above the files.
    assert Path(session["root_dir"]) == workspace
    assert session["messages"] == []


def test_analysis_states_arrive(session):
    assert session["statuses"]["model.py"][-1] == "done"
    assert session["statuses"]["broken.py"][-1] == "failed"


def test_inlay_hints_as_neovim_received_them(session, expected):
    by_line = {hint["line"]: hint["label"] for hint in session["inlay_hints"]}
    assert by_line == {
        expected.target_line: expected.totals,
        expected.class_line: expected.instances,
        expected.module_line: expected.module,
        expected.call_line: expected.shape,
        expected.built_line: expected.instances,
    }


def test_code_lenses_on_the_target_line(session, expected):
    lenses = session["code_lenses"]
    assert {lens["line"] for lens in lenses} == {expected.target_line}
    assert [lens["title"] for lens in lenses] == [expected.totals, "Re-analyse", "Show report", "Measure latency", "Measure memory",
                                                  "Measure training step", "Plan training"]
    assert {lens["command"] for lens in lenses} <= {"torchscan.reanalyze", "torchscan.showReport",
                                                     "torchscan.measureLatency", "torchscan.measureMemory",
                                                     "torchscan.measureTraining", "torchscan.planTraining"}


def test_hover_on_the_module_line(session, expected):
    hover = session["hover"]
    assert "Conv2d" in hover
    assert f"Parameters: {PARAMETERS} " in hover
    assert si(FLOPS, "FLOPs") in hover and si(MACS, "MACs") in hover
    assert "(1, 3, 32, 32)" in hover and "(1, 8, 30, 30)" in hover


def test_diagnostics_as_neovim_received_them(session, expected):
    errors = [d for d in session["diagnostics"]["broken.py"] if d["severity"] == 1]
    assert len(errors) == 1
    assert errors[0]["line"] == expected.broken_line
    # torch names the channel mismatch: the weight wants 3 input channels, the input has 4.
    assert "3 channels" in errors[0]["message"] and "4 channels" in errors[0]["message"]
    assert not [d for d in session["diagnostics"]["model.py"] if d["severity"] == 1]


def test_reanalyse_key_runs_the_analysis_again(session):
    assert session["reanalyze_mapped"]
    assert session["statuses_after_reanalyze"] == ["running", "done"]


def test_missing_interpreter_is_named_with_the_fix(workspace, client_env, tmp_path):
    result = run_client(workspace, client_env, "/nonexistent/python3", "setup-only", tmp_path)
    assert result["clients"] == 0
    assert result["messages"] == [
        "torchscan: no Python interpreter at \"/nonexistent/python3\". Set `python` in require('torchscan').setup{...}."]


def test_interpreter_without_the_package_gets_the_install_command(workspace, client_env, tmp_path):
    # -S hides site-packages, so this interpreter cannot import torchscan_lsp.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    result = run_client(workspace, client_env, str(bare), "setup-only", tmp_path)
    assert result["clients"] == 0
    assert result["messages"] == [
        f"torchscan: the torchscan-lsp package is not installed in {bare}. "
        f"Install it with: {bare} -m pip install torchscan-lsp"]


def test_server_that_exits_at_start_is_reported(workspace, client_env, tmp_path):
    # Imports fine, but `-m torchscan_lsp serve` exits at once with status 3.
    failing = tmp_path / "failing-python"
    failing.write_text(f'#!/bin/sh\ncase "$*" in *serve*) echo boom >&2; exit 3;; esac\nexec "{sys.executable}" "$@"\n')
    failing.chmod(0o755)
    result = run_client(workspace, client_env, str(failing), "exit-at-start", tmp_path)
    assert any("the server exited with code 3" in message for message in result["messages"]), result["messages"]


def test_wrongly_typed_option_is_named(workspace, client_env, tmp_path):
    result = run_client(workspace, client_env, sys.executable, "bad-option", tmp_path)
    assert result["clients"] == 0
    assert result["messages"] == [
        "torchscan: bad option in require('torchscan').setup{...}: allow_execution: expected boolean, got string"]


def test_untrusted_workspace_names_the_plugin_option(workspace, client_env, tmp_path, expected):
    found = run_client(workspace, client_env, sys.executable, "untrusted", tmp_path)["diagnostics"]
    assert [(d["line"], d["severity"]) for d in found] == [(expected.target_line, 3)]   # 3: information
    # the option a Neovim user sets is the plugin's, not the server setting it is sent as
    assert "set allow_execution = true in require('torchscan').setup{...}" in found[0]["message"]


def test_start_configuration_passes_settings(workspace, client_env, tmp_path):
    config = run_client(workspace, client_env, sys.executable, "config", tmp_path)["config"]
    assert config["cmd"] == [sys.executable, "-m", "torchscan_lsp", "serve"]
    assert Path(config["root_dir"]) == workspace
    # Section `torchscan`, as Neovim answers the server's workspace/configuration pull.
    assert config["settings"] == {"torchscan": {"allowExecution": True, "device": "cuda:1",
                                                "inlayHints": {"shapes": False}}}


def test_an_installed_library_file_joins_the_running_server(workspace, client_env, tmp_path):
    # a file under site-packages (a transformers modeling file) starts no server of its own, and
    # joins the running one, whose results name its lines
    found = run_client(workspace, client_env, sys.executable, "config", tmp_path)
    assert found["library_alone"] is True
    assert found["library_root"] == "/running/ws"


def test_checkhealth_names_what_is_missing(tmp_path):
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    report = tmp_path / "health.txt"
    subprocess.run([find_nvim(), "--headless", "--clean", "-c", f"set rtp^={PLUGIN}",
                    "-c", f"lua require('torchscan').setup({{ python = '{bare}' }})",
                    "-c", "checkhealth torchscan", "-c", f"write! {report}", "-c", "qall!"],
                   cwd=tmp_path, capture_output=True, text=True, timeout=120)
    text = report.read_text()
    assert f"OK interpreter: {bare}" in text
    assert "ERROR torchscan_lsp does not import" in text
    assert f"{bare} -m pip install torchscan-lsp" in text
