"""Fixtures of the editor client tests: the workspace (see editor_workspace) and its expectations."""

import os
from pathlib import Path

import pytest

from editor_workspace import BROKEN, MODEL, Expected
from vscode_real_session import SUMMARY, CodeServer


def pytest_terminal_summary(terminalreporter, config):
    """Names the real VS Code session's screenshot folder and its time, when it ran."""
    if SUMMARY in config.stash:
        terminalreporter.write_line(config.stash[SUMMARY])


@pytest.fixture(scope="session")
def code_server(tmp_path_factory):
    """One code-server for every real VS Code test module, each driving a window of its own in it:
    its start, the extension's install and its stop happen once per run, not once per module."""
    server = CodeServer(tmp_path_factory.mktemp("code-server"))
    yield server
    outlived = server.stop()
    assert outlived == [], f"processes outlived code-server's group: {outlived}"


@pytest.fixture(scope="module")
def expected() -> Expected:
    return Expected()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A workspace root (marked by pyproject.toml) with the models one directory below it."""
    root = tmp_path_factory.mktemp("editor-workspace")
    (root / "pyproject.toml").write_text('[project]\nname = "models"\n')
    models = root / "models"
    models.mkdir()
    (models / "model.py").write_text(MODEL)
    (models / "broken.py").write_text(BROKEN)
    return root


@pytest.fixture(scope="module")
def client_env(tmp_path_factory) -> dict[str, str]:
    """Environment for an editor under test: reports go to a cache folder of the test's own."""
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}
