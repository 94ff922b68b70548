"""Our engine beside the tools people use instead, measured side by side in one run.

For each model (``engine_overhead.py``'s: a ResNet-50 at 224x224, GPT-2 small on 128 tokens and a
MobileNetV3-small, the depthwise net of many small operators) every workload runs once per round,
interleaved, on one thread (``torch.set_num_threads(1)``); a workload's figure is the median of its
per-round ratios to the plain ``no_grad`` forward of the same round (= 1.00x), with the spread of
those ratios (half their interquartile range over the median) as the noise; a second table gives
the same ratios for the CPU time of the measuring thread, which other processes disturb less.
Workloads:

* **ours full** / **ours structure**: ``torchscan_lsp.crawl_module`` (mode ``full``, ``structure``);
* **TorchScan 0.2.0** ``torchscan.crawl_module``, ``mode="full"`` and ``mode="structure"``;
* **torchinfo** ``summary(model, input_data=..., verbose=0)``;
* **thop** ``profile(model, inputs=...)`` (positional inputs: GPT-2 runs through a small wrapper
  that passes its ids and mask by keyword);
* **fvcore** ``FlopCountAnalysis(model, inputs).total()`` (a JIT trace per call; same wrapper);
* **FlopCounterMode alone**: ``torch.utils.flop_counter.FlopCounterMode`` around the plain
  forward, the floor for counting operators.

Printed: one table row per model, then, per model, ours full over the fastest peer that counts
FLOPs or MACs (TorchScan full, torchinfo, thop, fvcore), ours structure over the fastest peer of
all, and ours full over FlopCounterMode alone (the engine's goal: at most 1.1).

The peers are never dependencies of this package. Make their environment with ``make peers``
(a ``.peers`` venv: torch pinned first, then the peers constrained to that torch, transformers,
and this package) and run ``.peers/bin/python benchmarks/peers.py`` (``--quick``: fewer rounds;
``--models resnet50,gpt2,mobilenet``). A peer that is not installed is named as missing and its
column reads ``missing``; one that fails on a model reads ``error`` and its message is printed.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from pathlib import Path
from typing import Callable, Mapping

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_overhead import build, run_rounds, workloads  # noqa: E402 - a sibling module, not a package

#: Rounds per model (``--quick``: a third, at least 3).
ROUNDS = {"resnet50": 7, "gpt2": 7, "mobilenet": 21}
TITLES = {"resnet50": "ResNet-50-sized 224²", "gpt2": "GPT-2-small-sized, 128 tokens",
          "mobilenet": "depthwise net of many small ops"}
PEERS = {"torchscan": "torchscan==0.2.0", "torchinfo": "torchinfo", "thop": "thop", "fvcore": "fvcore"}
COLUMNS = ("ours full", "ours structure", "TorchScan full", "TorchScan structure", "torchinfo", "thop",
           "fvcore", "FlopCounterMode")
PEER_COLUMNS = ("TorchScan full", "TorchScan structure", "torchinfo", "thop", "fvcore")
COUNTING = ("TorchScan full", "torchinfo", "thop", "fvcore")
"""The peers whose call counts FLOPs or MACs, what ``ours full`` is weighed against (structure mode
is weighed against every peer)."""


class Keywords(nn.Module):
    """Calls ``model`` with positional values passed on as the keywords ``names``, and returns the
    tensors among its output's values as a tuple (for the peers that take positional inputs only,
    and fvcore's JIT trace, which refuses a dict output such as transformers' ``ModelOutput`` and
    the cache object in it)."""

    def __init__(self, model: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *values):
        out = self.model(**dict(zip(self.names, values)))
        return tuple(v for v in out.values() if isinstance(v, torch.Tensor)) if isinstance(out, Mapping) else out


def installed() -> dict[str, object]:
    """The peer modules that import here, by name; prints one line per missing peer."""
    found = {}
    for name, requirement in PEERS.items():
        try:
            found[name] = importlib.import_module(name)
        except ImportError as error:
            print(f"missing peer: {requirement} ({error}); create the environment with `make peers` "
                  f"and run this script with .peers/bin/python")
    if "torchscan" in found and getattr(found["torchscan"], "__version__", "") != "0.2.0":
        print(f"note: torchscan {found['torchscan'].__version__} is installed, not 0.2.0")
    return found


def peer_workloads(peers: dict[str, object], model: nn.Module, args: tuple, kwargs: dict) -> dict[str, Callable[[], object]]:
    """One call of each installed peer on ``model`` with the given inputs."""
    positional = args + tuple(kwargs.values())
    target = Keywords(model, list(kwargs)) if kwargs else model
    runs: dict[str, Callable[[], object]] = {}
    if "torchscan" in peers:
        torchscan = peers["torchscan"]
        runs["TorchScan full"] = lambda: torchscan.crawl_module(model, args=args, kwargs=kwargs, mode="full")
        runs["TorchScan structure"] = lambda: torchscan.crawl_module(model, args=args, kwargs=kwargs, mode="structure")
    if "torchinfo" in peers:
        data = dict(kwargs) if kwargs else list(args)
        runs["torchinfo"] = lambda: peers["torchinfo"].summary(model, input_data=data, verbose=0)
    if "thop" in peers:
        runs["thop"] = lambda: peers["thop"].profile(target, inputs=positional, verbose=False)
    if "fvcore" in peers:
        from fvcore.nn import FlopCountAnalysis

        def fvcore() -> object:
            analysis = FlopCountAnalysis(target, positional)
            analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings("none")
            return analysis.total()

        runs["fvcore"] = fvcore
    return runs


def usable(runs: dict[str, Callable[[], object]]) -> tuple[dict[str, Callable[[], object]], dict[str, str]]:
    """The workloads that run once without raising, and the errors of the others."""
    ok, errors = {}, {}
    for key, fn in runs.items():
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - a peer failing on a model is a result
            errors[key] = f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
        else:
            ok[key] = fn
    return ok, errors


def interleaved(runs: dict[str, Callable[[], object]], rounds: int) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Plain-forward median times, and per other workload the median of its per-round ratios to
    the plain forward of the same round (``wall``, ``cpu``) and the ``spread`` of the wall ones
    (half their interquartile range over their median)."""
    wall, cpu = run_rounds(runs, rounds)
    plain = {"wall": statistics.median(wall["plain"]), "cpu": statistics.median(cpu["plain"])}
    ratios = {}
    for key in runs:
        if key == "plain":
            continue
        walls = [w / p for w, p in zip(wall[key], wall["plain"])]
        q1, median, q3 = statistics.quantiles(walls, n=4) if len(walls) > 1 else (walls[0],) * 3
        ratios[key] = {"wall": median, "cpu": statistics.median(c / p for c, p in zip(cpu[key], cpu["plain"])),
                       "spread": (q3 - q1) / 2 / median}
    return plain, ratios


def measure(name: str, rounds: int, peers: dict[str, object]) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, str]]:
    model, args, kwargs = build(name)
    ours = workloads(model, args, kwargs)
    runs = {"plain": ours["plain"], "ours full": ours["full"], "ours structure": ours["structure"],
            **peer_workloads(peers, model, args, kwargs), "FlopCounterMode": ours["FlopCounterMode"]}
    runs, errors = usable(runs)
    plain, ratios = interleaved(runs, rounds)
    return plain, ratios, errors


def cell(column: str, ratios: dict[str, dict[str, float]], errors: dict[str, str], clock: str) -> str:
    if column in ratios:
        spread = f" ±{ratios[column]['spread']:.0%}" if clock == "wall" else ""
        return f"{ratios[column][clock]:.2f}x{spread}"
    if column in errors:
        return "error"
    return "missing" if column in PEER_COLUMNS else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,gpt2,mobilenet")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    peers = installed()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, interleaved rounds; median per-round "
          f"ratio to a plain no_grad forward (= 1.00x) ± half the interquartile range of those ratios")
    rows, notes = [], []
    for name in options.models.split(","):
        try:
            build(name)
        except ImportError as error:
            print(f"{name}: skipped ({error})")
            continue
        rounds = max(3, ROUNDS[name] // 3) if options.quick else ROUNDS[name]
        plain, ratios, errors = measure(name, rounds, peers)
        rows.append((name, plain, ratios, errors, rounds))
        notes += [f"  {name}: {key} failed: {message}" for key, message in errors.items()]
    for clock, title in (("wall", "wall-clock time (the verdict)"),
                         ("cpu", "CPU time of the measuring thread (steadier on a loaded machine)")):
        print(f"\n{title}:\n| model | " + " | ".join(COLUMNS) + " |")
        print("| --- " * (len(COLUMNS) + 1) + "|")
        for name, plain, ratios, errors, rounds in rows:
            cells = [cell(column, ratios, errors, clock) for column in COLUMNS]
            print(f"| {TITLES[name]} ({rounds} rounds, plain {1e3 * plain[clock]:.0f} ms) | " + " | ".join(cells) + " |")
    print("\nours against the best peer (our ratio over the fastest peer's; below 1.00 = we are faster):")
    for name, _, ratios, _, _ in rows:
        counting = {key: ratios[key]["wall"] for key in COUNTING if key in ratios}
        anything = {key: ratios[key]["wall"] for key in PEER_COLUMNS if key in ratios}
        if not anything:
            print(f"  {name}: no peer measured")
            continue
        full, structure = ratios["ours full"]["wall"], ratios["ours structure"]["wall"]
        line = f"  {name}:"
        if counting:
            best = min(counting, key=counting.get)
            line += f" ours full / {best} (fastest that counts FLOPs or MACs) {full / counting[best]:.2f};"
        best = min(anything, key=anything.get)
        line += f" ours structure / {best} (fastest of all) {structure / anything[best]:.2f};"
        line += f" ours full / FlopCounterMode alone {full / ratios['FlopCounterMode']['wall']:.2f} (goal <= 1.10)"
        print(line)
    if notes:
        print("\nerrors:\n" + "\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
