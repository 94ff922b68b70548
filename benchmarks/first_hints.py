"""Time from the language server's start to the first inlay hints, as a person opening the editor waits.

For each example a fresh workspace (a temporary folder holding a copy of the file) is opened by a
fresh ``torchscan-lsp serve`` process over stdio, driven by pygls's own language client as an
editor would drive it: start the process, ``initialize`` (trusted), ``initialized``, open the file
at once, and wait for its ``torchscan/status`` to say ``done``; then ask for the file's inlay hints.
The clock starts before the server process is spawned and stops when non-empty hints arrive.
Each fresh workspace is opened twice, by two servers one after the other, with a cache folder of
its own (``XDG_CACHE_HOME``): the first open, with nothing kept yet, and the reopen, which finds
what the first server kept on disk (``torchscan.cacheResults``; a baseline without it runs the
model again). Printed per example and visit: the median, minimum and maximum over ``--runs``
workspaces, and the median of each phase (initialize answered, analysis running, analysis done; a
reopen served from disk is never running).

Examples:

* ``cnn``: the README's CNN example, ``examples/cnn.py`` (two targets);
* ``gpt2``: the GPT-2 example, ``examples/transformer_models.py`` with only ``gpt2_small``
  annotated (its other two factories lose their pragma lines; nothing else changes).

``--baseline DIR`` also runs the server of another checkout (started in ``DIR``, so that
``python -m torchscan_lsp`` imports that copy; make one with
``mkdir /tmp/before && git archive main | tar -x -C /tmp/before``), interleaved with this one, run
for run, and prints the ratio of the medians: before and after from one run of a noisy machine.

Run: ``python benchmarks/first_hints.py`` (``--quick``: one run per example; ``--runs N``;
``--examples cnn``). Every run starts a new server, so ``TORCHSCAN_LSP_*`` environment variables
apply (``TORCHSCAN_LSP_WARM=0``: no warm worker, every job a cold process).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_latency import Session, example_text  # noqa: E402 - a sibling script, not a package

EXAMPLES = {"cnn": "cnn.py", "gpt2": "transformer_models.py"}


async def first_hints(name: str, checkout: str | None = None) -> dict[str, dict[str, float]]:
    """Two servers (of ``checkout``, else this one), one after the other, on one fresh workspace
    with a cache folder of its own: the first open (nothing kept yet) and the reopen (what the first
    kept on disk, ``torchscan.cacheResults``). For each, seconds from spawn to each phase and to the
    hints."""
    with tempfile.TemporaryDirectory(prefix="torchscan-first-") as scratch:
        root = Path(scratch) / "ws"
        root.mkdir()
        os.environ["XDG_CACHE_HOME"] = str(Path(scratch) / "cache")  # inherited by the servers
        path = root / EXAMPLES[name]
        path.write_text(example_text(name), encoding="utf-8")
        return {"open": await _one_server(name, root, path, checkout),
                "reopen": await _one_server(name, root, path, checkout)}


async def _one_server(name: str, root: Path, path: Path, checkout: str | None) -> dict[str, float]:
    session = Session()
    started = time.perf_counter()
    await session.start(root, *([Path(checkout)] if checkout else []))
    initialized = time.perf_counter()
    uri = session.open(path)
    done, state = await session.wait(uri, 0)
    assert state == "done", f"{name}: the analysis ended {state}"
    lines = path.read_text(encoding="utf-8").count("\n") + 1
    full = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0))
    hints = await session.client.text_document_inlay_hint_async(
        types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=full))
    finished = time.perf_counter()
    running = next((at for at, event_uri, word in session.statuses if event_uri == uri and word == "running"), done)
    await session.stop()
    assert hints, f"{name}: no inlay hints after the analysis"
    return {"initialize": initialized - started, "running": running - started, "done": done - started,
            "hints": finished - started}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh servers per example (default 5)")
    parser.add_argument("--quick", action="store_true", help="one run per example")
    parser.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated: " + ", ".join(EXAMPLES))
    parser.add_argument("--baseline", metavar="DIR", help="another checkout to run side by side (before)")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    names = [n for n in args.examples.split(",") if n]
    servers = {"this checkout": None} | ({f"baseline {args.baseline}": str(Path(args.baseline).resolve())}
                                         if args.baseline else {})
    results = {(server, name): [] for server in servers for name in names}
    for _ in range(runs):  # interleaved: a slow phase of a shared machine hits every server and example
        for name in names:
            for server, checkout in servers.items():
                results[server, name].append(await first_hints(name, checkout))
    print(f"server start to first inlay hints, {runs} fresh workspace(s) per example, each opened by a "
          "fresh server and then reopened by another (seconds):")
    for server in servers:
        print(f" {server}:")
        for name in names:
            for visit in ("open", "reopen"):
                found = [r[visit] for r in results[server, name]]
                times = [r["hints"] for r in found]
                phases = ", ".join(f"{phase} {statistics.median(r[phase] for r in found):.2f}"
                                   for phase in ("initialize", "running", "done"))
                print(f"  {name:5s} {visit:6s} ({EXAMPLES[name]}): median {statistics.median(times):6.2f} s, "
                      f"min {min(times):6.2f}, max {max(times):6.2f}  [medians: {phases}]")
    if args.baseline:
        for name in names:
            for visit in ("open", "reopen"):
                now, before = ([r[visit]["hints"] for r in results[server, name]] for server in servers)
                print(f"  {name} {visit}: this checkout / baseline = "
                      f"{statistics.median(now) / statistics.median(before):.2f} (goal <= 0.50)")


if __name__ == "__main__":
    asyncio.run(main())
