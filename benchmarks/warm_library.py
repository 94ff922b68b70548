"""Saves right after the first hints, for a model built by an installed library: warm from the first save?

The GPT-2 example (``examples/transformer_models.py`` with only ``gpt2_small`` annotated, its model
built by ``transformers``) is opened in a fresh workspace (a cache folder of the run's own, so nothing
is kept from an earlier run) by a fresh ``torchscan-lsp serve`` over stdio; the clock starts before
the server is spawned and the first hints are the answer of the inlay-hint request made once its
``torchscan/status`` says ``done``. Then, at once, the file is edited (one comment line more) and
saved ``--saves`` times (8 by default), each time timing from the save to the hints of that save,
as a person does who opens a file and starts working. Nothing waits for the warm parent to learn
anything: that is what is measured.

Each run opens two workspaces, one after the other: **cold**, with no warm worker of this user
alive (a socket folder of its own, ``XDG_RUNTIME_DIR``), and **reopened**, a second fresh workspace
opened by a second server after the first one stopped, as when an editor is reopened, another
window opened or the server restarted: a shared warm worker kept by the first server
(``torchscan.keepWarmMinutes``) serves it, where the checkout has them. No run finds one of another
run's.

Printed per server, run and open: the first hints on opening and every save's time, from the first;
then over all runs the median and maximum of the saves and the median first hints (goals: median
save at most 0.5 s, no save over 1.2 s). Each run also times the floor of a cold open: a fresh
interpreter that only runs the file's import statements (torch and the library's model code), the
work no analysis of that file can skip; the median first hints of a cold open are printed over it. ``--baseline DIR`` runs the server of another checkout too
(started in ``DIR``, so that ``python -m torchscan_lsp`` imports that copy; make one with
``mkdir /tmp/before && git archive main | tar -x -C /tmp/before``), interleaved run for run, and
prints the ratio of the medians of the first hints, this checkout over the baseline, cold and
reopened (goal: at most 0.6).

Run: ``python benchmarks/warm_library.py [--runs N] [--saves N] [--baseline DIR]`` (``--quick``: one
run of 4 saves).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_latency import REPO, Session, example_text  # noqa: E402 - a sibling script, not a package

FILE = "transformer_models.py"
GOALS = {"median save": 0.5, "max save": 1.2, "first hints ratio": 0.6}
OPENS = ("cold", "reopened")
KEEP_S = 60.0
"""How long the first server of a run keeps its shared warm worker (long enough for the second)."""


async def one_run(checkout: Path, saves: int, runtime: Path, keep_s: float) -> dict[str, object]:
    """One fresh workspace opened by one fresh server of ``checkout`` whose shared warm workers live
    in ``runtime`` and stay ``keep_s`` after it: seconds from spawn to the first hints, then from
    each save to its hints. The run's cache folder (``runtime/cache``) holds no result of this
    workspace: results are kept by workspace folder."""
    with tempfile.TemporaryDirectory(prefix="torchscan-warm-library-") as scratch:
        root = Path(scratch) / "ws"
        root.mkdir()
        os.environ["XDG_CACHE_HOME"] = str(runtime / "cache")  # inherited by the server
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        os.environ["TORCHSCAN_LSP_KEEP_WARM_S"] = str(keep_s)
        path = root / FILE
        path.write_text(example_text("gpt2"), encoding="utf-8")
        session = Session()
        started = time.perf_counter()
        await session.start(root, checkout)
        uri = session.open(path)
        _, state = await session.wait(uri, 0)
        assert state == "done", f"the first analysis ended {state}"
        await _hints(session, uri, path)
        first = time.perf_counter() - started
        times = []
        for version in range(2, saves + 2):
            since = len(session.statuses)
            saved = time.perf_counter()
            session.edit_and_save(path, version)
            _, state = await session.wait(uri, since)
            assert state == "done", f"save {version - 1} ended {state}"
            await _hints(session, uri, path)
            times.append(time.perf_counter() - saved)
        await session.stop()
    return {"first": first, "saves": times}


def bare_imports_s(text: str) -> float:
    """Seconds a fresh interpreter (this one's) takes to run only the top-level import statements
    of the module ``text`` (after ``import torch``), in an empty folder: the floor of a cold open."""
    tree = ast.parse(text)
    source = "\n".join(["import torch", *(ast.get_source_segment(text, node) or "" for node in tree.body
                                           if isinstance(node, (ast.Import, ast.ImportFrom)))])
    with tempfile.TemporaryDirectory(prefix="torchscan-bare-imports-") as folder:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", source], cwd=folder, check=True)
        return time.perf_counter() - started


async def _hints(session: Session, uri: str, path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n") + 1
    found = await session.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0))))
    assert found, "no inlay hints"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh servers per checkout (default 3)")
    parser.add_argument("--saves", type=int, default=8, help="saves right after the first hints (default 8)")
    parser.add_argument("--quick", action="store_true", help="one run of 4 saves")
    parser.add_argument("--baseline", metavar="DIR", help="another checkout to run side by side (before)")
    args = parser.parse_args()
    runs, saves = (1, 4) if args.quick else (args.runs, args.saves)
    servers = {"this checkout": REPO} | ({f"baseline {args.baseline}": Path(args.baseline).resolve()}
                                        if args.baseline else {})
    found: dict[tuple[str, str], list[dict]] = {(name, open_): [] for name in servers for open_ in OPENS}
    floors = []
    for _ in range(runs):  # interleaved: a slow phase of a shared machine hits both checkouts
        floors.append(bare_imports_s(example_text("gpt2")))
        for name, checkout in servers.items():
            with tempfile.TemporaryDirectory(prefix="torchscan-warm-library-run-") as runtime:
                os.chmod(runtime, 0o700)
                found[name, "cold"].append(await one_run(checkout, saves, Path(runtime), KEEP_S))
                # the second server says: leave with me, so that no warm worker outlives the run
                found[name, "reopened"].append(await one_run(checkout, saves, Path(runtime), 0))
    print(f"GPT-2 built by transformers ({FILE}), {runs} run(s) of two fresh servers per checkout, {saves} "
          "saves each right after the first hints (seconds):")
    for (name, open_), results in found.items():
        print(f" {name}, {open_}:")
        for number, result in enumerate(results, start=1):
            shown = " ".join(f"{t:.2f}" for t in result["saves"])
            print(f"  run {number}: first hints {result['first']:.2f}; saves {shown}")
        every = [t for result in results for t in result["saves"]]
        firsts = [result["first"] for result in results]
        median, worst = statistics.median(every), max(every)
        print(f"  saves: median {median:.2f} (goal <= {GOALS['median save']}), max {worst:.2f} "
              f"(goal <= {GOALS['max save']}); first hints: median {statistics.median(firsts):.2f}, "
              f"min {min(firsts):.2f}, max {max(firsts):.2f}")
        if open_ == "cold":
            print(f"  cold first hints over the bare imports: {statistics.median(firsts) - statistics.median(floors):+.2f}")
    shown = " ".join(f"{t:.2f}" for t in floors)
    print(f" bare imports of the file (torch and its import statements) in a fresh interpreter: {shown}; "
          f"median {statistics.median(floors):.2f}")
    if args.baseline:
        for open_ in OPENS:
            now, before = (statistics.median(r["first"] for r in found[name, open_]) for name in servers)
            print(f" first hints {open_}, this checkout / baseline: {now / before:.2f} "
                  f"(goal <= {GOALS['first hints ratio']})")


if __name__ == "__main__":
    asyncio.run(main())
