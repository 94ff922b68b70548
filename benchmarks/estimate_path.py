"""Save to hints for a target with ``train`` options: does the training estimate hold the hints back?

A 95k-parameter CNN (three convolutions with batch norms, a linear head; CIFAR-sized inputs)
annotated with ``train={"optimizer": "adamw", "batch": 8}`` is opened in a fresh workspace by a
fresh ``torchscan-lsp serve`` over stdio; once its first analysis and estimate are done, the file
gets ``--saves`` comment-only edits, saved one after the other. For each save two times are taken
from the save: until its ``torchscan/status`` says ``done`` and the inlay hints are answered (the
hints), and until a ``done`` status no longer says that a training estimate runs (the estimate; a
server that runs it in the analysis's own job has it with the hints). The number of estimates
started is counted from the work-done progress messages (``estimating the training step of``);
a server that reuses the estimate of an unchanged model starts none after the first.

Printed per server: the medians and maxima of both times and the estimates started.
``--baseline DIR`` runs the server of another checkout too (started in ``DIR``; make one with
``mkdir /tmp/before && git archive main | tar -x -C /tmp/before``), interleaved run for run, and
prints the ratio of the hint medians, this checkout over the baseline.

Run: ``python benchmarks/estimate_path.py [--runs N] [--saves N] [--baseline DIR]``.
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
from server_latency import REPO, Session  # noqa: E402 - a sibling script, not a package

ESTIMATING = "estimating the training step of"
MODEL = '''import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


# torchscan: input_shape=(3, 32, 32), train={"optimizer": "adamw", "batch": 8}
def build():
    return Net()
'''


def estimates_started(session: Session) -> int:
    """How many training estimates the server has begun (their work-done progress messages)."""
    return sum(ESTIMATING in message for message in session.progress_begins)


async def settled(session: Session, uri: str, since: int) -> float:
    """The time of the first ``done`` status of ``uri`` after index ``since`` that says no estimate runs."""
    while True:
        for index in range(since, len(session.statuses)):
            at, event_uri, state = session.statuses[index]
            if event_uri == uri and state == "done" and ESTIMATING not in session.status_messages[index]:
                return at
        session.changed.clear()
        await asyncio.wait_for(session.changed.wait(), 600)


async def one_run(checkout: Path, saves: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="torchscan-estimate-") as scratch:
        root = Path(scratch) / "ws"
        root.mkdir()
        os.environ["XDG_CACHE_HOME"] = str(Path(scratch) / "cache")
        path = root / "net.py"
        path.write_text(MODEL, encoding="utf-8")
        session = Session()
        await session.start(root, checkout)
        uri = session.open(path)
        await settled(session, uri, 0)
        first_estimates = estimates_started(session)
        hints, estimates = [], []
        for version in range(2, saves + 2):
            since = len(session.statuses)
            saved = time.perf_counter()
            session.edit_and_save(path, version)
            at, state = await session.wait(uri, since)
            assert state == "done", state
            found = await session.client.text_document_inlay_hint_async(types.InlayHintParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=60, character=0))))
            assert found, "no hints"
            hints.append(time.perf_counter() - saved)
            estimates.append(await settled(session, uri, since) - saved)
        started = estimates_started(session) - first_estimates
        await session.stop()
    return {"hints": hints, "estimates": estimates, "started": started}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--baseline", metavar="DIR", help="another checkout to run side by side (before)")
    args = parser.parse_args()
    servers = {"this checkout": REPO} | ({f"baseline {args.baseline}": Path(args.baseline).resolve()}
                                        if args.baseline else {})
    found: dict[str, list[dict]] = {name: [] for name in servers}
    for _ in range(args.runs):
        for name, checkout in servers.items():
            found[name].append(await one_run(checkout, args.saves))
    print(f"95k-parameter CNN with train= options, {args.runs} fresh server(s) per checkout, {args.saves} "
          "comment-only saves each after the first estimate (seconds from the save):")
    medians = {}
    for name, results in found.items():
        hints = [t for r in results for t in r["hints"]]
        estimates = [t for r in results for t in r["estimates"]]
        medians[name] = statistics.median(hints)
        print(f" {name}: hints median {medians[name]:.2f}, max {max(hints):.2f}; estimate in place median "
              f"{statistics.median(estimates):.2f}, max {max(estimates):.2f}; estimates started after the first: "
              f"{sum(r['started'] for r in results)} in {len(hints)} saves")
    if args.baseline:
        now, before = medians.values()
        print(f" hints after a save, this checkout / baseline: {now / before:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
