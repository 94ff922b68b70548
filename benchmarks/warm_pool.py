"""Save-to-hints with the warm worker pool against cold starts, and the idle server's memory.

A ResNet-18-sized model (written out below: torchvision is not required) is opened in the real
language server over stdio; then it is edited and saved ``--saves`` times (20 by default), each
time timing from the save to the answer of the inlay-hint request made once the analysis is done.
The same runs twice, in one run of this script:

* **warm**: the server as shipped: each job is a child forked from a warm parent that has torch
  and the engine imported;
* **cold**: the same server with ``TORCHSCAN_LSP_WARM=0``: each job is a new Python process that
  imports torch and runs the same analysis.

Printed: both medians and 90th percentiles, the ratio of the medians (goal: at most 0.2x), and
the resident memory of the idle server plus its warm parent (goal: under 1.5 GB).

Run: ``python benchmarks/warm_pool.py [--saves N]``.
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
from server_latency import Session, percentile  # noqa: E402 - a sibling script, not a package

# The model file of the benchmark's workspace: the shared ResNet definitions and a target.
RESNET18 = (Path(__file__).resolve().parent / "resnets.py").read_text(encoding="utf-8") + """

# torchscan: input_shape=(3, 224, 224)
def build_resnet18():
    return resnet18()
"""


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, bytes (shared pages counted in each)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(text[text.rindex(")") + 2:].split()[1])
    tree, todo = [pid], [pid]
    while todo:
        current = todo.pop()
        children = [p for p, parent in parents.items() if parent == current]
        tree += children
        todo += children
    total = 0
    for member in tree:
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        total += int(status.split("VmRSS:")[1].split()[0]) * 1024 if "VmRSS:" in status else 0
    return total


async def save_times(root: Path, saves: int, warm: bool) -> tuple[list[float], int | None]:
    """Seconds from each save to its hints; and the idle tree's RSS (warm only)."""
    os.environ["TORCHSCAN_LSP_WARM"] = "1" if warm else "0"
    path = root / "resnet18.py"
    path.write_text(RESNET18, encoding="utf-8")
    session = Session()
    await session.start(root)
    uri = session.open(path)
    state = (await session.wait(uri, 0))[1]
    assert state == "done", state
    document = types.TextDocumentIdentifier(uri=uri)
    full = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=200, character=0))
    times = []
    for version in range(2, saves + 2):
        since = len(session.statuses)
        started = time.perf_counter()
        session.edit_and_save(path, version)
        _, state = await session.wait(uri, since)
        hints = await session.client.text_document_inlay_hint_async(types.InlayHintParams(text_document=document, range=full))
        times.append(time.perf_counter() - started)
        assert state == "done" and hints, state
    rss = None
    if warm:
        await asyncio.sleep(2.0)  # idle: no job runs
        rss = tree_rss_bytes(session.client._server.pid)
    await session.stop()
    return times, rss


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchscan-bench-") as scratch:
        warm, rss = await save_times(Path(scratch), args.saves, warm=True)
        cold, _ = await save_times(Path(scratch), args.saves, warm=False)
    print(f"save-to-hints, ResNet-18 (3x224x224, CPU), {args.saves} saves each:")
    for name, values in (("warm pool", warm), ("cold start", cold)):
        print(f"  {name:10s}: median {statistics.median(values) * 1000:7.0f} ms, "
              f"p90 {percentile(values, 90) * 1000:7.0f} ms")
    ratio = statistics.median(warm) / statistics.median(cold)
    print(f"  ratio of medians (warm / cold): {ratio:.2f}x (goal <= 0.2x)")
    print(f"idle server + warm parent RSS: {rss / 1e9:.2f} GB (goal < 1.5 GB)")


if __name__ == "__main__":
    asyncio.run(main())
