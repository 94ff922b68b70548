"""Language server responsiveness and save-to-hints time.

Two measurements, side by side in one run:

1. **Requests while a job runs.** With ``examples/cnn.py`` analysed, the examples' transformer
   models are analysed again (a worker is busy for seconds), and meanwhile inlay-hint and hover
   requests for ``cnn.py`` are sent back to back. Their latencies (request to answer, through the
   real stdio JSON-RPC channel) are printed as percentiles beside the analysis time; the goal is a
   99th percentile under 20 ms.
2. **Save to hints.** For each example file, a one-line edit is saved and the time until its
   ``torchscan/status`` says ``done`` is measured (a fresh worker process per job, forked from
   a warm parent that has torch imported where the platform allows, else started cold). Beside
   it: the same jobs run directly by ``run_job`` in this Python process once torch and the model's
   libraries are imported (warm), and in a fresh ``python -c`` process (cold).

Run: ``python benchmarks/server_latency.py`` (``--requests N`` for the request count).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parent.parent

# The servers of every benchmark built on this module start the way a server with no other alive
# does: a shared warm worker (torchscan.keepWarmMinutes) leaves with the server that used it, unless
# a benchmark says otherwise (warm_library.py measures a reopened workspace too).
os.environ.setdefault("TORCHSCAN_LSP_KEEP_WARM_S", "0")
EXAMPLES = ("cnn.py", "transformer_models.py")


def example_text(name: str) -> str:
    """The text of an example the speed benchmarks open: ``"cnn"`` is ``examples/cnn.py``;
    ``"gpt2"`` is ``examples/transformer_models.py`` with only ``gpt2_small`` annotated (the other
    factories' pragma lines become plain comments, so every line keeps its number)."""
    if name == "cnn":
        return (REPO / "examples" / "cnn.py").read_text(encoding="utf-8")
    if name != "gpt2":
        raise ValueError(f"unknown example {name!r}")
    lines = (REPO / "examples" / "transformer_models.py").read_text(encoding="utf-8").splitlines(keepends=True)
    for index, line in enumerate(lines[:-1]):
        following = lines[index + 1]
        if line.startswith("# torchscan:") and following.startswith("def ") and not following.startswith("def gpt2_small("):
            lines[index] = "# (not annotated in the GPT-2 benchmark)\n"
    return "".join(lines)


class Session:
    """A language client talking to ``torchscan-lsp serve`` over stdio, recording statuses."""

    def __init__(self) -> None:
        self.client = LanguageClient("torchscan-bench", "0")
        self.statuses: list[tuple[float, str, str]] = []
        self.status_messages: list[str] = []  # the message of each status, by the same index
        self.progress_begins: list[str] = []  # the message of each work-done progress begun
        self.changed = asyncio.Event()
        self.log: list[tuple[float, str]] = []  # the server's stderr, (time, line)
        self._log_changed = asyncio.Event()
        self._log_reader: asyncio.Task | None = None
        client = self.client

        @client.feature("torchscan/status")
        def status(params) -> None:
            self.status_messages.append(params.message)
            self.statuses.append((time.perf_counter(), params.uri, params.state))
            self.changed.set()

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params):
            return [{"maxWorkers": 2}] * len(params.items)

        for method in (types.WORKSPACE_INLAY_HINT_REFRESH, types.WORKSPACE_CODE_LENS_REFRESH,
                       types.WINDOW_WORK_DONE_PROGRESS_CREATE):
            client.feature(method)(lambda params: None)
        client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(lambda params: None)
        @client.feature(types.PROGRESS)
        def progress(params) -> None:
            value = params.value if isinstance(params.value, dict) else vars(params.value)
            if value.get("kind") == "begin":
                self.progress_begins.append(str(value.get("message")))

    async def start(self, root: Path, checkout: Path = REPO) -> None:
        """Start the server of ``checkout`` (its working directory, so ``-m`` imports that copy)."""
        await self.client.start_io(sys.executable, "-m", "torchscan_lsp", "serve", cwd=str(checkout))
        # pygls's client pipes the server's stderr and never reads it: read it, or a talkative
        # server blocks once the pipe is full
        self._log_reader = asyncio.ensure_future(self._read_log(self.client._server.stderr))
        capabilities = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(
                configuration=True, inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True)),
            window=types.WindowClientCapabilities(work_done_progress=True))
        await self.client.initialize_async(types.InitializeParams(
            capabilities=capabilities, root_uri=root.as_uri(), initialization_options={"trusted": True}))
        self.client.initialized(types.InitializedParams())

    async def _read_log(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.log.append((time.perf_counter(), line.decode(errors="replace").rstrip()))
            self._log_changed.set()

    async def wait_log(self, wanted: Callable[[str], bool], timeout_s: float) -> tuple[float, str] | None:
        """The first line of the server's log that is ``wanted`` (waiting up to ``timeout_s``)."""
        deadline = time.perf_counter() + timeout_s
        while True:
            found = next(((at, line) for at, line in self.log if wanted(line)), None)
            if found is not None or time.perf_counter() > deadline:
                return found
            self._log_changed.clear()
            try:
                await asyncio.wait_for(self._log_changed.wait(), max(0.01, deadline - time.perf_counter()))
            except asyncio.TimeoutError:
                pass

    async def wait(self, uri: str, since: int, states=("done", "failed")) -> tuple[float, str]:
        """Time and state of the first final status of ``uri`` after index ``since``."""
        while True:
            for at, event_uri, state in self.statuses[since:]:
                if event_uri == uri and state in states:
                    return at, state
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 600)

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=path.read_text())))
        return uri

    def edit_and_save(self, path: Path, version: int) -> None:
        text = path.read_text() + f"# edit {version}\n"
        path.write_text(text)
        uri = path.as_uri()
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()
        if self._log_reader is not None:
            self._log_reader.cancel()


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


async def requests_while_busy(session: Session, root: Path, count: int) -> None:
    cnn = root / "cnn.py"
    uri = session.open(cnn)
    await session.wait(uri, 0)
    lines = cnn.read_text().splitlines()
    hover_line = next(i for i, text in enumerate(lines) if "self.conv1 =" in text or "nn.Conv2d(" in text)
    document = types.TextDocumentIdentifier(uri=uri)
    full = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=len(lines), character=0))

    busy = root / "transformer_models.py"
    since = len(session.statuses)
    started = time.perf_counter()
    busy_uri = session.open(busy)
    hint_times, hover_times, labels = [], [], 0
    while len(hint_times) < count:
        t0 = time.perf_counter()
        found = await session.client.text_document_inlay_hint_async(types.InlayHintParams(text_document=document, range=full))
        t1 = time.perf_counter()
        await session.client.text_document_hover_async(types.HoverParams(
            text_document=document, position=types.Position(line=hover_line, character=12)))
        t2 = time.perf_counter()
        hint_times.append(t1 - t0)
        hover_times.append(t2 - t1)
        labels = len(found or [])
    requests_done = time.perf_counter()
    finished, state = await session.wait(busy_uri, since)
    analysis_s = finished - started
    in_flight = requests_done < finished
    print(f"requests while a job runs: {count} inlay-hint and {count} hover requests on cnn.py ({labels} hints),")
    print(f"  sent during the analysis of transformer_models.py ({state}, {analysis_s:.2f} s"
          f"{'' if in_flight else '; the last requests came after it ended'})")
    for name, values in (("inlay hint", hint_times), ("hover", hover_times)):
        p50, p99 = percentile(values, 50) * 1000, percentile(values, 99) * 1000
        print(f"  {name:10s}: p50 {p50:6.2f} ms, p99 {p99:6.2f} ms, max {max(values) * 1000:6.2f} ms "
              f"(goal p99 < 20 ms; p99 is {p99 / 1000 / analysis_s:.2%} of the analysis time)")


def direct_times(root: Path, jobs: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds per file for the jobs run by ``run_job`` warm in this process, and cold in a child."""
    from torchscan_lsp.worker.runner import run_job

    warm: dict[str, float] = {}
    for job in jobs:
        run_job(dict(job))  # first run imports the model's libraries
        t0 = time.perf_counter()
        run_job(dict(job))
        warm[Path(job["file"]).name] = warm.get(Path(job["file"]).name, 0.0) + time.perf_counter() - t0
    cold: dict[str, float] = {}
    for name in EXAMPLES:
        file_jobs = [job for job in jobs if Path(job["file"]).name == name]
        code = ("import json, sys, time; t = time.perf_counter(); "
                "from torchscan_lsp.worker.runner import run_job; "
                "[run_job(job) for job in json.loads(sys.argv[1])]; print(time.perf_counter() - t)")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, json.dumps(file_jobs)], cwd=root, check=True,
                       capture_output=True, text=True)
        cold[name] = time.perf_counter() - t0
    return warm, cold


async def save_to_hints(session: Session, root: Path) -> dict[str, float]:
    times = {}
    for version, name in enumerate(EXAMPLES, start=2):
        path = root / name
        uri = path.as_uri()
        since = len(session.statuses)
        started = time.perf_counter()
        session.edit_and_save(path, version)
        finished, state = await session.wait(uri, since)
        times[name] = finished - started
    return times


def example_jobs(root: Path) -> list[dict]:
    from torchscan_lsp.targets import find_targets

    jobs = []
    for name in EXAMPLES:
        path = root / name
        for target in find_targets(path.read_text(), str(path)).targets:
            jobs.append({"workspace_root": str(root), "file": str(path), "target": target.name,
                         "options": dict(target.options), "source_text": None, "measure": []})
    return jobs


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchscan-bench-") as scratch:
        root = Path(scratch)
        for name in EXAMPLES:
            shutil.copy(REPO / "examples" / name, root / name)
        session = Session()
        await session.start(root)
        try:
            await requests_while_busy(session, root, args.requests)
            saved = await save_to_hints(session, root)
        finally:
            await session.stop()
        warm, cold = direct_times(root, example_jobs(root))
    print("save to hints (server) vs the same jobs run directly:")
    for name in EXAMPLES:
        print(f"  {name:24s}: save→hints {saved[name]:6.2f} s | cold process {cold[name]:6.2f} s "
              f"(ratio {saved[name] / cold[name]:.2f}) | warm in-process {warm[name]:6.2f} s "
              f"(ratio {saved[name] / warm[name]:.1f})")


if __name__ == "__main__":
    asyncio.run(main())
