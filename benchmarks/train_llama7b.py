"""A Llama-7B-sized training step estimated on fake tensors: time, resident memory, categories.

Builds ``examples/llama_blocks.py``'s ``LlamaBlocks`` in the 7B configuration (32 layers, width
4096, feed-forward 11008, 32 heads, vocabulary 32000; N = 6,738,415,616 parameters) under
``FakeTensorMode`` -- nothing holds data -- and estimates one steady-state AdamW step (foreach, as
PyTorch does on CUDA) on a batch of 1 x 512 tokens with ``estimate_training_memory``, once with the
FLOPs counted in the same pass and once without.

Printed: each run's time (the import of torch and of ``MemTracker``, which brings in
``torch.distributed``, is timed apart: it is paid once per process), the peak
resident set size of the process, the machine's load average, and the categories at the peak beside
their values by hand: parameters 4N bytes (fp32), gradients 4N, AdamW state 8N (+ a 4-byte step per
parameter tensor), the foreach update's temporaries 4N. The issue's targets: under 10 s and under
2 GB resident.

Run: ``python benchmarks/train_llama7b.py`` (``--check`` exits 1 when a target or a category is missed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from meta_llama7b import peak_rss_mib  # noqa: E402 - a sibling module, not a package

TOKENS = 512
LIMIT_S = 10.0
LIMIT_RSS_MIB = 2000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    options = parser.parse_args(argv)

    start = time.perf_counter()
    import torch
    from llama_blocks import LLAMA_7B, LlamaBlocks, parameter_count

    from torchscan_lsp.engine.training import estimate_training_memory
    from torchscan_lsp.engine.training.tracker import MemTracker  # noqa: F401 - its import is paid once per process

    imported = time.perf_counter()

    def build():
        return LlamaBlocks(**LLAMA_7B), (torch.zeros(1, TOKENS, dtype=torch.long),)

    timings = {}
    for flops in (True, False):
        begin = time.perf_counter()
        estimate = estimate_training_memory(build, target_device="cuda", count_flops=flops)
        timings[flops] = time.perf_counter() - begin
        if flops:
            counted = estimate["flops"]["totals"]["training_flops"]
    rss = peak_rss_mib()
    n = parameter_count(**LLAMA_7B)
    tensors = 1 + 9 * LLAMA_7B["layers"] + 2
    expected = {"parameters": 4 * n, "gradients": 4 * n, "optimizer_state": 8 * n + 4 * tensors, "temporaries": 4 * n}
    at_peak = estimate["by_category"]
    print(f"torch {torch.__version__}, Llama-7B-sized LlamaBlocks ({n:,} parameters), 1 x {TOKENS} tokens, "
          f"AdamW foreach; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  import of torch and MemTracker {imported - start:.2f} s (once per process)")
    print(f"  estimate with FLOPs: {timings[True]:.2f} s; memory only: {timings[False]:.2f} s   (target < {LIMIT_S:.0f} s)")
    print(f"  peak RSS: {rss:.0f} MiB   (target < {LIMIT_RSS_MIB} MiB)")
    print(f"  peak {estimate['peak']['value'] / 2**30:.2f} GiB in the {estimate['peak_phase']}; "
          f"CUDA allocated (derived) {estimate['cuda']['allocated_peak_bytes'] / 2**30:.2f} GiB")
    right = True
    for name, value in at_peak.items():
        hand = expected.get(name)
        mark = "" if hand is None else ("  = by hand" if value == hand else f"  != {hand:,} by hand")
        right = right and (hand is None or value == hand)
        print(f"    {name:16s} {value / 2**30:10.3f} GiB{mark}")
    value = counted["value"] if counted["status"] == "complete" else counted["known_value"]
    print(f"  training FLOPs: {value / 1e12:.2f} TFLOPs ({counted['status']}); "
          f"6 x N x tokens = {6 * n * TOKENS / 1e12:.2f} TFLOPs")
    ok = max(timings.values()) < LIMIT_S and rss < LIMIT_RSS_MIB and right
    print("  verdict:", "ok" if ok else "MISSED")
    return 0 if ok or not options.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
