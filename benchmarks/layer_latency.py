"""Per-layer latency of a ResNet-18 with default options must finish in under 30 s.

Run: ``python benchmarks/layer_latency.py`` (exit status 1 when over budget). The ResNet-18 is written
here (torchvision is not installable beside the pinned torch): BasicBlock, layers [2, 2, 2, 2], 1000
classes, input (1, 3, 224, 224) — 11.7 M parameters, the torchvision architecture.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resnets import resnet18  # noqa: E402 - a sibling module, not a package

BUDGET_S = 30.0


def main() -> int:
    from torchscan_lsp.engine.measuring.layer_latency import measure_layer_latency

    model = resnet18()
    x = torch.rand(1, 3, 224, 224)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    report = measure_layer_latency(model, (x,), device="cpu")
    elapsed = time.perf_counter() - start
    totals = report["totals"]
    layer_sum = totals["layer_latency_sum"]
    model_latency = totals["model_latency"]
    measured = sum(1 for layer in report["layers"] if layer["metrics"]["latency"]["status"] == "complete")
    print(f"machine load (1-min average) before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"threads: {report['threads']}  device: {report['device']} ({report['device_name']})")
    print(f"layer calls measured: {measured}/{len(report['layers'])}")
    print(f"sum of layer latencies: {layer_sum['status']} {1e3 * (layer_sum['known_value'] or 0):.2f} ms")
    print(f"whole-model latency:    {model_latency['status']} {1e3 * (model_latency['value'] or 0):.2f} ms"
          f" (IQR {1e3 * (totals['model_latency_iqr']['value'] or 0):.2f} ms)")
    unstable = sum(1 for layer in report["layers"] if layer.get("stable") is False)
    ratio = report["consistency"]["layer_sum_over_model"]
    print(f"calls flagged unstable (IQR > 25% of the median): {unstable}/{len(report['layers'])}; "
          f"layer sum / model latency: {'?' if ratio is None else f'{ratio:.2f}'}")
    print(f"per-layer latency of ResNet-18 took {elapsed:.1f} s (budget {BUDGET_S:.0f} s)")
    return 0 if elapsed < BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
