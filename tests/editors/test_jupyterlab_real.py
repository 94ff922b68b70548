"""A Jupyter notebook in a real JupyterLab 4 with jupyterlab-lsp 5, in headless Chromium.

JupyterLab is started on a folder holding ``sub/nb.ipynb``, the four-cell notebook of
``notebook_files``, with a ``jupyter_server_config.json`` that registers torchscan-lsp as
docs/notebooks.md says (jupyter-lsp's default ``requires_documents_on_disk``: the notebook's
document is ``.virtual_documents/sub/nb.ipynb``) and the setting ``allowExecution`` given as
jupyterlab-lsp passes it. vscode_real/drive_jupyterlab.mjs opens the notebook and reads the
information jupyterlab-lsp underlines for the magic, and the hover of the block's layer, which
carries the parameters derived by hand in ``notebook_files``. Optional: skipped without JupyterLab,
jupyterlab-lsp and jupyter-lsp in this interpreter (``pip install torch==2.13.0 'jupyterlab==4.*'
jupyterlab-lsp jupyter-lsp``) or without Chromium and the drivers' puppeteer-core
(scripts/install-test-tools.sh). Screenshots of every step go to build/jupyterlab-real/.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from editor_workspace import REPO, require_tool
from notebook_files import CELLS, cell_line, write_notebook
from vscode_real_session import DRIVER, NODE24, Processes
from vscode_real_session import run_driver
from vscode_real_session import seen as seen_step

DRIVE = DRIVER.with_name("drive_jupyterlab.mjs")
SHOTS = REPO / "build" / "jupyterlab-real"
TOKEN = "torchscan-jupyterlab-test"
START_TIMEOUT_S = 90
DRIVER_TIMEOUT_S = 300


def _requirements() -> str:
    """Chromium's path; skips naming what is missing and how to get it."""
    missing = [name for name in ("jupyterlab", "jupyter_lsp", "jupyterlab_lsp") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (optional): pip install torch==2.13.0 'jupyterlab==4.*' "
                    "jupyterlab-lsp jupyter-lsp")
    chromium = require_tool("chromium", "Debian's chromium runs JupyterLab's page")
    for path in (NODE24, DRIVE.with_name("node_modules")):
        if not path.exists():
            pytest.skip(f"{path.relative_to(REPO)} is missing: run `bash scripts/install-test-tools.sh`")
    return chromium


def _server_config() -> dict:
    """docs/notebooks.md's jupyter_server_config.json, this interpreter running the server."""
    return {"LanguageServerManager": {"autodetect": False, "language_servers": {"torchscan-lsp": {
        "version": 2, "display_name": "torchscan-lsp", "argv": [sys.executable, "-m", "torchscan_lsp", "serve"],
        "languages": ["python"], "mime_types": ["text/x-python", "text/x-ipython"]}}}}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_listening(log: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if "is running at" in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"JupyterLab did not start:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    chromium = _requirements()
    tmp = tmp_path_factory.mktemp("jupyterlab-real")
    folders = {name: tmp / name for name in ("config", "data", "runtime", "home", "settings", "root", "profile")}
    for folder in folders.values():
        folder.mkdir()
    (folders["config"] / "jupyter_server_config.json").write_text(json.dumps(_server_config(), indent=1))
    plugin = folders["settings"] / "@jupyter-lsp" / "jupyterlab-lsp"
    plugin.mkdir(parents=True)
    (plugin / "plugin.jupyterlab-settings").write_text(json.dumps(
        {"language_servers": {"torchscan-lsp": {"serverSettings": {"torchscan": {"allowExecution": True}}}}}))
    (folders["root"] / "sub").mkdir()
    # as Jupyter saves cells: no line end after a cell's last line
    write_notebook(folders["root"] / "sub" / "nb.ipynb", [cell.rstrip("\n") for cell in CELLS])
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.iterdir():
        old.unlink()

    env = {key: value for key, value in os.environ.items() if not key.startswith("JUPYTER")}
    env.update(HOME=str(folders["home"]), JUPYTER_CONFIG_DIR=str(folders["config"]),
               JUPYTER_DATA_DIR=str(folders["data"]), JUPYTER_RUNTIME_DIR=str(folders["runtime"]))
    port = _free_port()
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={folders['root']}",
               f"--LabApp.user_settings_dir={folders['settings']}"] + (["--allow-root"] if os.geteuid() == 0 else [])
    processes = Processes(env, tmp)
    started = time.monotonic()
    try:
        lab = processes.start(command, tmp / "jupyterlab.log")
        _wait_listening(tmp / "jupyterlab.log", lab)
        config = {"url": f"http://127.0.0.1:{port}/lab/tree/sub/nb.ipynb?token={TOKEN}", "shots": str(SHOTS),
                  "results": str(tmp / "results.json"), "profile": str(folders["profile"]), "chromium": chromium,
                  "chromePidFile": str(tmp / "chromium.pid"), "uiTimeoutMs": 20_000, "analysisTimeoutMs": 120_000,
                  "cells": len(CELLS), "hover": {"needle": "self.fc = nn.Linear", "at": len("self.fc = nn.Li")}}
        for group in run_driver(processes, [str(NODE24), str(DRIVE)], tmp, config, DRIVER_TIMEOUT_S)[1:]:
            processes.adopt_group(group)   # Chromium's; stop() ends the driver's with the rest
    finally:
        outlived = processes.stop()
    for name in ("results.json", "driver.log", "jupyterlab.log"):
        if (tmp / name).exists():
            shutil.copy(tmp / name, SHOTS / name)
    assert (tmp / "results.json").exists(), (tmp / "driver.log").read_text(errors="replace")
    results = json.loads((tmp / "results.json").read_text())
    return {"results": results, "steps": {step["name"]: step for step in results["steps"]},
            "outlived": outlived, "root": folders["root"], "seconds": time.monotonic() - started,
            "log": (tmp / "jupyterlab.log").read_text(errors="replace")}


def seen(session: dict, name: str) -> dict:
    return seen_step(session, name, log="log")


def test_the_notebook_opens_with_its_four_cells(session):
    assert seen(session, "notebook")["cells"] == 4


def test_the_magic_is_one_information_on_the_first_line_of_the_first_cell(session):
    shown = seen(session, "information")
    # jupyterlab-lsp shows no diagnostic on the line it rewrote (cell 4's %matplotlib): the server
    # puts the information on the notebook's first line of Python
    assert shown["underlines"] == [{"cell": 0, "text": "import torch"}]
    assert "IPython syntax left out" in shown["message"] and "`%matplotlib inline`" in shown["message"]


def test_the_hover_of_the_layer_carries_its_numbers(session):
    shown = seen(session, "hover")
    assert shown["cell"] == 1
    hover = re.sub(r"\s+", " ", shown["hover"])
    # Linear(16, 32): 16·32 + 32 = 544 parameters, 544 float32 · 4 B = 2.12 KiB
    assert "Parameters: 544 (544 trainable, 0 frozen, 2.12 KiB)" in hover
    assert "Input: (1, 16) → output: (1, 32)" in hover
    # positions in messages are the virtual document's lines: the layer's call line, cell 2's
    # `return self.act(...)`, after cell 1's 2 lines and the 2 blank ones
    assert f"call lines (nb.ipynb:{2 + 2 + cell_line(2, 'return self.act')})" in hover


def test_jupyter_lsp_wrote_the_virtual_document_the_server_did_not_need(session):
    # jupyter-lsp's shadow copy (requires_documents_on_disk): the joined cells, the magic rewritten
    shadow = session["root"] / ".virtual_documents" / "sub" / "nb.ipynb"
    assert 'get_ipython().run_line_magic("matplotlib", " inline")' in shadow.read_text()
    assert session["outlived"] == []
