"""A Llama-7B-sized model analysed on the meta device: time and peak resident memory.

Builds ``transformers``' ``LlamaForCausalLM`` from a ``LlamaConfig`` of the 7B size (32 layers,
hidden 4096, intermediate 11008, 32 heads, vocabulary 32000) under ``torch.device("meta")`` — no
parameter holds data — and runs one full ``crawl_module`` (structure, module formulas, operator
FLOPs) on 128 meta token ids.

Printed: the build and analysis times (the library import is timed separately: it is paid once per
process), the process's peak resident set size, the parameter count, the operator FLOPs with their
status, and the dense-transformer rule of thumb ``2 x parameters x tokens`` beside them (about
1.70 TFLOPs; the counted value adds attention scores and element-wise work and leaves out the
embedding lookup's non-arithmetic). The targets: under 3 s and under 1 GB.

Run: ``python benchmarks/meta_llama7b.py`` (``--check`` exits 1 when a target is missed).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOKENS = 128
LIMIT_S = 3.0
LIMIT_RSS_MIB = 1024


def peak_rss_mib(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident set size of this process in MiB (``ru_maxrss`` is KiB on Linux, bytes on macOS);
    ``who=resource.RUSAGE_CHILDREN``: of its largest child that ended."""
    peak = resource.getrusage(who).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    options = parser.parse_args(argv)

    start = time.perf_counter()
    import torch

    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("transformers is not installed: nothing to measure")
        return 0
    from torchscan_lsp.engine.crawler import crawl_module

    imported = time.perf_counter()
    config = LlamaConfig(
        num_hidden_layers=32, hidden_size=4096, intermediate_size=11008, num_attention_heads=32, vocab_size=32000
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    ids = torch.zeros(1, TOKENS, dtype=torch.long, device="meta")
    built = time.perf_counter()
    report = crawl_module(model, args=(ids,))
    analysed = time.perf_counter()

    params = report["totals"]["parameters"]["value"]
    flops = report["totals"]["operator_flops"]
    counted = flops["value"] if flops["status"] == "complete" else flops["known_value"]
    rule = 2 * params * TOKENS
    seconds = analysed - imported
    rss = peak_rss_mib()
    print(f"torch {torch.__version__}, Llama-7B-sized config on meta, {TOKENS} tokens")
    print(f"  import {imported - start:.2f} s (once per process), build {built - imported:.2f} s, "
          f"analysis {analysed - built:.2f} s")
    print(f"  build + analysis: {seconds:.2f} s   (target < {LIMIT_S:.0f} s)")
    print(f"  peak RSS: {rss:.0f} MiB   (target < {LIMIT_RSS_MIB} MiB)")
    print(f"  parameters: {params:,}")
    print(f"  operator FLOPs: {counted / 1e12:.3f} TFLOPs ({flops['status']}); "
          f"2 x params x tokens = {rule / 1e12:.3f} TFLOPs (ratio {counted / rule:.3f})")
    macs = report["totals"]["macs"]
    print(f"  module MACs: {macs['status']} {(macs['value'] or macs['known_value'] or 0) / 1e12:.3f} TMACs; "
          f"{len(report['diagnostics'])} diagnostics")
    ok = seconds < LIMIT_S and rss < LIMIT_RSS_MIB and flops["status"] == "complete"
    print("  verdict:", "ok" if ok else "MISSED")
    return 0 if ok or not options.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
