"""What the editor's analysis costs against ``crawl_module`` alone, side by side in one run (issue 13).

The editor path is the worker's forward step: ``crawl_module`` with the source attribution
observing its one recording pass (call sites, operator sites, what each line computed), then the
source map built from what it saw. Attribution adds no hook or dispatch mode of its own, so the gap
is the observer's own work (one stack walk per module call and per operator, inside the pass) plus
the engine's cost of telling an observer anything, shown apart as ``+ no-op observer`` (a
``PassObserver`` whose methods do nothing).

Models (one thread), as ``engine_overhead.py`` builds them: a ResNet-50 at 224x224, a MobileNetV3-
small at 224x224 (many small operators: per-call overhead shows), and GPT-2 small from
``transformers`` on 128 tokens (library model code: its modeling file is named by absolute path).
For each, both workloads run interleaved round after round in one process; printed are the median
times and the median of the per-round ratios (so a slow phase of a shared machine affects both
sides of a ratio alike).

Run: ``python benchmarks/editor_pass.py`` (``--quick`` for fewer rounds, ``--models mobilenet``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_overhead import ROUNDS, build  # noqa: E402 - a sibling module, not a package

from torchscan_lsp import crawl_module  # noqa: E402
from torchscan_lsp.engine.recording.observers import PassObserver  # noqa: E402
from torchscan_lsp.worker.attribution import SourceRecorder, Workspace  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]


def workloads(model: torch.nn.Module, args: tuple, kwargs: dict) -> dict[str, object]:
    """``crawl_module`` alone, and the worker's forward step with attribution observing it."""
    workspace = Workspace(REPOSITORY)  # the benchmark's own models are workspace files

    class NoOp(PassObserver):
        def call_started(self, *args: object) -> None:
            pass

        def operator_ran(self, *args: object) -> None:
            pass

    def alone() -> None:
        crawl_module(model, args=args, kwargs=kwargs)

    def no_op() -> None:
        crawl_module(model, args=args, kwargs=kwargs, observers=[NoOp()])

    def editor() -> None:
        recorder = SourceRecorder(workspace, barrier=sys._getframe())
        report = crawl_module(model, args=args, kwargs=kwargs, observers=[recorder.observer(model)])
        recorder.source_map(report["layers"])

    return {"crawl_module": alone, "+ no-op observer": no_op, "editor path": editor}


def time_interleaved(runs: dict[str, object], rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds of each workload, and the median of its per-round ratios to ``crawl_module``."""
    for fn in runs.values():  # warm-up: first calls pay one-time costs
        fn()
    times: dict[str, list[float]] = {key: [] for key in runs}
    keys = list(runs)
    for index in range(rounds):
        for key in keys if index % 2 == 0 else keys[::-1]:  # alternate the order to cancel drift
            start = time.perf_counter()
            runs[key]()
            times[key].append(time.perf_counter() - start)
    ratios = {key: statistics.median(t / a for t, a in zip(values, times["crawl_module"])) for key, values in times.items()}
    return {key: statistics.median(values) for key, values in times.items()}, ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,mobilenet,gpt2")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, interleaved rounds, medians")
    print(f"{'model':<10} {'rounds':>6} {'crawl_module':>13} {'+ no-op observer':>18} {'editor path':>16}")
    for name in options.models.split(","):
        try:
            model, args, kwargs = build(name)
        except ImportError as exc:
            print(f"{name:<10} skipped ({exc})")
            continue
        rounds = max(3, ROUNDS[name] // 3) if options.quick else ROUNDS[name]
        medians, ratios = time_interleaved(workloads(model, args, kwargs), rounds)
        cells = [f"{1e3 * medians[key]:.1f} ms {ratios[key]:.2f}x" for key in ("+ no-op observer", "editor path")]
        print(f"{name:<10} {rounds:>6} {1e3 * medians['crawl_module']:>10.1f} ms {cells[0]:>18} {cells[1]:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
