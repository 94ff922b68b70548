"""Save-to-hints with the warm worker pool against cold starts, and the idle server's memory.

Two models, each opened in the real language server over stdio, then edited and saved ``--saves``
times (20 by default; ``--quick``: 5), each time timing from the save to the answer of the
inlay-hint request made once the analysis is done:

* ``resnet18``: a ResNet-18 (``resnets.py``, written out: torchvision is not required) at 224x224;
* ``gpt2``: the GPT-2 example, ``examples/transformer_models.py`` with only ``gpt2_small``
  annotated, whose model is built by ``transformers``.

Each model runs twice, in one run of this script:

* **warm**: the server as shipped: each job is a child forked from a warm parent that has torch
  and the engine imported, and, once it has learned them from the first job, the libraries the
  model imports (the saves start after the server's log says so; the time that took is printed);
* **cold**: the same server with ``TORCHSCAN_LSP_WARM=0``: each job is a new Python process that
  imports torch (and transformers) and runs the same analysis.

Printed per model: both medians and 90th percentiles, the ratio of the medians (goal: at most
0.2x; for GPT-2 also a warm median of at most 0.5 s), and the resident memory of the idle server
plus its warm parent (goal: under 1.5 GB).

Run: ``python benchmarks/warm_pool.py [--saves N] [--quick] [--models resnet18,gpt2]``.
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
from server_latency import Session, example_text, percentile  # noqa: E402 - a sibling script, not a package

# The model files of the benchmark's workspace, and for each the median it must reach warm.
MODELS = {
    "resnet18": ("resnet18.py", (Path(__file__).resolve().parent / "resnets.py").read_text(encoding="utf-8") + """

# torchscan: input_shape=(3, 224, 224)
def build_resnet18():
    return resnet18()
""", None, None),
    "gpt2": ("transformer_models.py", example_text("gpt2"), 0.5, "transformers"),
}
"""model -> (file name, text, the warm median it must reach in seconds, the package the warm parent
must have preloaded before the saves start)."""
LEARN_TIMEOUT_S = 120.0


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


async def save_times(root: Path, model: str, saves: int, warm: bool) -> dict:
    """Seconds from each save to its hints; the idle tree's RSS and the learning time (warm only)."""
    os.environ["TORCHSCAN_LSP_WARM"] = "1" if warm else "0"
    name, text, _, package = MODELS[model]
    path = root / name
    path.write_text(text, encoding="utf-8")
    session = Session()
    await session.start(root)
    uri = session.open(path)
    first_done, state = await session.wait(uri, 0)
    assert state == "done", state
    learned = None
    if warm:  # the saves measure the warm parent once it has learned the model's libraries
        def wanted(line: str) -> bool:  # "...: N modules preloaded (a, b, transformers, ...)"
            names = line.partition("modules preloaded (")[2].rstrip(")").split(", ")
            return "modules preloaded" in line and (package is None or package in names)

        found = await session.wait_log(wanted, LEARN_TIMEOUT_S)
        learned = (found[0] - first_done, found[1].split("preloaded", 1)[1].strip()) if found else None
    lines = text.count("\n") + 1
    document = types.TextDocumentIdentifier(uri=uri)
    full = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0))
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
    return {"times": times, "rss": rss, "learned": learned}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="5 saves per run")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    args = parser.parse_args()
    saves = 5 if args.quick else args.saves
    for model in [m for m in args.models.split(",") if m]:
        with tempfile.TemporaryDirectory(prefix="torchscan-bench-") as scratch:
            warm = await save_times(Path(scratch), model, saves, warm=True)
        with tempfile.TemporaryDirectory(prefix="torchscan-bench-") as scratch:
            cold = await save_times(Path(scratch), model, saves, warm=False)
        goal = MODELS[model][2]
        print(f"save-to-hints, {model} ({MODELS[model][0]}, CPU), {saves} saves each:")
        for name, values in (("warm pool", warm["times"]), ("cold start", cold["times"])):
            print(f"  {name:10s}: median {statistics.median(values) * 1000:7.0f} ms, "
                  f"p90 {percentile(values, 90) * 1000:7.0f} ms, min {min(values) * 1000:7.0f}, max {max(values) * 1000:7.0f}")
        ratio = statistics.median(warm["times"]) / statistics.median(cold["times"])
        median = statistics.median(warm["times"])
        print(f"  ratio of medians (warm / cold): {ratio:.2f}x (goal <= 0.2x)"
              + (f"; warm median {median:.2f} s (goal <= {goal} s)" if goal else ""))
        if warm["learned"] is not None:
            print(f"  the warm parent preloaded the model's libraries {warm['learned'][0]:.1f} s after the first hints: "
                  f"{warm['learned'][1]}")
        else:
            print(f"  the warm parent preloaded nothing within {LEARN_TIMEOUT_S:.0f} s of the first hints")
        print(f"  idle server + warm parent RSS: {warm['rss'] / 1e9:.2f} GB (goal < 1.5 GB)")


if __name__ == "__main__":
    asyncio.run(main())
