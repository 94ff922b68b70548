"""Inlay-hint latency while a ``git checkout`` rewrites the files a target imports.

For each size N a fresh workspace (a git repository with a cache folder of its own) holds
``model.py``, whose one target builds ``nn.Sequential`` of N blocks, each from its own workspace
file (``blocks/gK/bI.py``, ten files per folder, so the model imports from N/10 folders). Branch
``a`` has blocks of ``nn.Linear(8, 8)``, branch ``b`` the same without bias. A fresh
``torchscan-lsp serve`` opens ``model.py`` on ``a`` and analyses it; then, while a language client
sends an inlay-hint request for ``model.py`` every ``--interval-ms`` (5) milliseconds without
waiting for the answers (so a blocked server shows in every request made meanwhile, not in one):

* **quiet**: ``git checkout a``, which changes nothing: the floor that the machine and the
  protocol set (on a shared, busy machine it is far from zero);
* **switch**: ``git checkout b`` rewrites the N files; the target runs again (a worker job);
* **switch back**: ``git checkout a`` restores them; a kept result exists for that state, so the
  server only has to hash the files and take the result.

Requests go on until the factory line's hint shows the state's parameters (``N × 72`` on ``a``,
``N × 64`` on ``b``) and half a second more; printed per N and phase: the requests' p50, p99 and
max latency (goal: p99 under 20 ms) and the seconds from the checkout to the new hint. The
server's thread count after the first analysis is printed too (one watch of N/10 folders).

A request every 5 ms is more than any editor sends (they ask for hints as the view moves); on a
busy machine with few cores, while a worker job takes the CPU, it is also more than the server's
JSON-RPC reading keeps up with, and the requests queue: ``--interval-ms 50`` shows the latency at
an editor's pace.

``--baseline DIR`` also runs the server of another checkout (started in ``DIR``, so that
``python -m torchscan_lsp`` imports that copy; make one with
``mkdir /tmp/before && git archive main | tar -x -C /tmp/before``), size for size, and prints the
ratio of the p99s: before and after from one run of a noisy machine.

Run: ``python benchmarks/watch_burst.py`` (``--sizes 20,100``; ``--baseline DIR``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

from torchscan_lsp.contract import format as fmt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_latency import Session, percentile  # noqa: E402 - a sibling script, not a package

SETTLE_S = 0.5
"""Requests go on this long after the new hint was seen."""

PHASES = ("quiet", "switch", "switch back")

GIVE_UP_S = 300.0
"""A phase whose hint never shows ends after this long (reported as such)."""

BLOCK = '''import torch.nn as nn

# revision {revision}


class Block{index}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8{bias})

    def forward(self, x):
        return self.fc(x)
'''


def block_path(index: int) -> str:
    """The workspace-relative file of block ``index`` (ten blocks per folder)."""
    return f"blocks/g{index // 10:02d}/b{index:03d}.py"


def write_revision(root: Path, size: int, revision: str) -> None:
    """Write the N block files of ``revision`` (``a``: with bias, ``b``: without)."""
    for index in range(size):
        path = root / block_path(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(BLOCK.format(revision=revision, index=index, bias="" if revision == "a" else ", bias=False"))


def make_workspace(root: Path, size: int) -> None:
    """A git repository with branches ``a`` and ``b`` (checked out: ``a``)."""
    root.mkdir(parents=True)
    (root / "blocks").mkdir()
    (root / "blocks" / "__init__.py").touch()
    imports = "\n".join(f"from {block_path(i)[:-3].replace('/', '.')} import Block{i}" for i in range(size))
    blocks = ", ".join(f"Block{i}()" for i in range(size))
    (root / "model.py").write_text(f"import torch.nn as nn\n\n{imports}\n\n\n"
                                   f"# torchscan: input_shape=(8,)\ndef build():\n    return nn.Sequential({blocks})\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.org"]
    run = lambda *args: subprocess.run([*git, *args], cwd=root, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "a")
    write_revision(root, size, "a")
    run("add", "-A")
    run("commit", "-q", "-m", "a")
    run("checkout", "-q", "-b", "b")
    write_revision(root, size, "b")
    run("commit", "-q", "-am", "b")
    run("checkout", "-q", "a")


def threads_of(pid: int) -> int:
    """The number of threads of process ``pid`` (Linux ``/proc``; 0 elsewhere)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


async def burst(session: Session, root: Path, uri: str, branch: str, params: int,
                interval_s: float) -> tuple[list[float], float | None]:
    """Check out ``branch`` while requesting hints every ``interval_s``; the requests' latencies and
    the seconds until the factory line's hint starts with ``params`` (``None``: never)."""
    document = types.TextDocumentIdentifier(uri=uri)
    lines = (root / "model.py").read_text().count("\n") + 1
    whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0))
    wanted = fmt.params(params)
    latencies: list[float] = []
    seen: list[float] = []

    async def one(sent: float) -> None:
        found = await session.client.text_document_inlay_hint_async(
            types.InlayHintParams(text_document=document, range=whole))
        answered = time.perf_counter()
        latencies.append(answered - sent)
        if any(str(hint.label).startswith(wanted) for hint in found or []):
            seen.append(answered)

    started = time.perf_counter()
    checkout = asyncio.ensure_future(asyncio.to_thread(
        subprocess.run, ["git", "checkout", "-q", branch], cwd=root, check=True, capture_output=True))
    requests = []
    while True:
        now = time.perf_counter()
        if (seen and now > min(seen) + SETTLE_S) or now - started > GIVE_UP_S:
            break
        requests.append(asyncio.ensure_future(one(now)))
        await asyncio.sleep(interval_s)
    await checkout
    await asyncio.gather(*requests)
    return latencies, (min(seen) - started) if seen else None


async def one_size(size: int, checkout: str | None, interval_s: float) -> dict:
    """Both phases for one workspace of ``size`` imported files, on the server of ``checkout``."""
    with tempfile.TemporaryDirectory(prefix="torchscan-watch-") as scratch:
        root = Path(scratch) / "ws"
        make_workspace(root, size)
        os.environ["XDG_CACHE_HOME"] = str(Path(scratch) / "cache")  # inherited by the server
        session = Session()
        await session.start(root, *([Path(checkout)] if checkout else []))
        try:
            uri = session.open(root / "model.py")
            _, state = await session.wait(uri, 0)
            assert state == "done", f"N={size}: the first analysis ended {state}"
            threads = threads_of(session.client._server.pid)
            # nn.Linear(8, 8): 64 weights + 8 biases per block on a; 64 weights on b
            quiet = await burst(session, root, uri, "a", size * 72, interval_s)
            switch = await burst(session, root, uri, "b", size * 64, interval_s)
            back = await burst(session, root, uri, "a", size * 72, interval_s)
        finally:
            await session.stop()
    return {"threads": threads, "quiet": quiet, "switch": switch, "switch back": back}


def line(phase: str, measured: tuple[list[float], float | None]) -> str:
    latencies, shown = measured
    p50, p99, worst = (percentile(latencies, q) * 1000 for q in (50, 99, 100))
    hint = f"{shown:6.2f} s" if shown is not None else "never"
    return (f"    {phase:11s}: {len(latencies):5d} requests, p50 {p50:8.1f} ms, p99 {p99:8.1f} ms, "
            f"max {worst:8.1f} ms; new hint after {hint}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,100,200,400", help="imported files per workspace (default 20,100,200,400)")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="time between hint requests (default 5)")
    parser.add_argument("--baseline", metavar="DIR", help="another checkout to run side by side (before)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    servers = {"this checkout": None} | ({f"baseline {args.baseline}": str(Path(args.baseline).resolve())}
                                         if args.baseline else {})
    results = {}
    for size in sizes:
        for server, checkout in servers.items():
            results[server, size] = await one_size(size, checkout, args.interval_ms / 1000)
            found = results[server, size]
            print(f"{server}, N={size} imported files in {(size + 9) // 10} folders "
                  f"(server threads after the first analysis: {found['threads']}):", flush=True)
            for phase in PHASES:
                print(line(phase, found[phase]), flush=True)
    if args.baseline:
        print("p99 of this checkout / baseline (goal: p99 under 20 ms):")
        for size in sizes:
            now, before = (results[server, size] for server in servers)
            ratios = ", ".join(f"{phase} {percentile(now[phase][0], 99) / percentile(before[phase][0], 99):.3f}"
                               for phase in PHASES)
            print(f"  N={size}: {ratios}; threads {now['threads']} / {before['threads']}")


if __name__ == "__main__":
    asyncio.run(main())
