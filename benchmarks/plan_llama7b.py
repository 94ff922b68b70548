"""A training plan of a Llama-7B-sized model: four policies on an 80 GB GPU, one device and 8 × FSDP2.

Plans ``examples/llama_blocks.py``'s ``LlamaBlocks`` in the 7B configuration (N = 6,738,415,616
parameters; built on the meta device, estimated on fake tensors) on 1 × 512 tokens with AdamW and
float32 master weights under bfloat16 mixed precision, for four policies: with and without
activation checkpointing, on one 80 GB device and on 8 ranks with FSDP2 (PyTorch's ``fully_shard``
under a fake process group, ``FSDPMemTracker``), against the budget of an ``H100-80GB``.

Printed, measured side by side in this one run: the plan's wall-clock and CPU time (of this
process and of the processes the plan runs its policies in, one per CPU), the peak resident set
size (this process's, plus the largest policy process's once per process running side by side),
the number of estimates, one plain estimate of the same step on
one device (``estimate_training_memory``) and the plan's time as a ratio of it; each policy's
answer; the per-rank state of the FSDP2 policies beside its value by hand (16 bytes a parameter
over 8 ranks, plus one block gathered in bfloat16). The issue's targets: under 60 s and under
4 GB resident. The machine's load average is printed too: on a shared machine the wall-clock time
grows with it, the CPU time much less.

Run: ``python benchmarks/plan_llama7b.py`` (``--check`` exits 1 when a target is missed).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from meta_llama7b import peak_rss_mib  # noqa: E402 - a sibling module, not a package

TOKENS = 512
LIMIT_S = 60.0
LIMIT_RSS_MIB = 4096
PLAN = {"precision": ["bfloat16-mixed"], "optimizer": ["adamw"], "checkpointing": ["none", "blocks"],
        "sharding": ["single", "fsdp"], "ranks": 8}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--progress", action="store_true", help="print the plan's progress lines to stderr")
    options = parser.parse_args(argv)

    import torch
    from llama_blocks import LLAMA_7B, LlamaBlocks, parameter_count

    from torchscan_lsp.engine.training import estimate_training_memory, plan_training
    from torchscan_lsp.engine.training.parallel import processes_for

    def build():
        with torch.device("meta"):
            model = LlamaBlocks(**LLAMA_7B)
        return model, (torch.zeros(1, TOKENS, dtype=torch.long),)

    estimate_training_memory(build, target_device="cuda", count_flops=False)  # the imports it needs, paid once
    begin = time.perf_counter()
    estimate_training_memory(build, train={"autocast": "bfloat16"}, target_device="cuda", count_flops=False)
    one = time.perf_counter() - begin

    def cpu_s() -> float:  # this process and the plan's policy processes, once they have ended
        used = os.times()
        return used.user + used.system + used.children_user + used.children_system

    wall, cpu = time.perf_counter(), cpu_s()
    def progress(message: str, done: float) -> None:
        print(f"  [{time.perf_counter() - wall:6.1f} s, {done:4.0%}] {message}", file=sys.stderr, flush=True)

    report = plan_training(build, plan=PLAN, memory_budget="H100-80GB", on_progress=progress if options.progress else None)
    wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    rss, child_rss = peak_rss_mib(), peak_rss_mib(resource.RUSAGE_CHILDREN)
    processes = processes_for(len(report["policies"]))

    n = parameter_count(**LLAMA_7B)
    d, f = LLAMA_7B["width"], LLAMA_7B["hidden"]
    by_hand = 16 * n / 8 + 2 * (4 * d * d + 3 * d * f + 2 * d)
    print(f"torch {torch.__version__}, Llama-7B-sized LlamaBlocks ({n:,} parameters), 1 x {TOKENS} tokens, "
          f"{len(report['policies'])} policies against {report['budget']['text']}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  plan: {wall:.1f} s wall, {cpu:.1f} s CPU, {report['estimates']} estimates   (target < {LIMIT_S:.0f} s)")
    print(f"  one estimate of the step on one device: {one:.1f} s; the plan took {wall / one:.1f} x that")
    # the policy processes run side by side: their peaks may add up
    rss = rss + child_rss * (processes if processes > 1 else 0)
    print(f"  {processes} process(es) for the policies; peak RSS: {rss:.0f} MiB, this process's and "
          f"{processes if processes > 1 else 'no'} × the largest policy process's ({child_rss:.0f} MiB)   "
          f"(target < {LIMIT_RSS_MIB} MiB)")
    right = True
    for policy in report["policies"]:
        batch = policy["batch"] or {}
        largest = (batch.get("largest") or {}).get("known_value")
        point = batch.get("at_largest") or batch.get("smallest") or {}
        line = f"    {policy['policy']['name']:52s} largest batch {largest}  ({policy['elapsed_s']:.1f} s)"
        if point:
            line += f"  peak {point['peak_bytes'] / 2**30:.1f} GiB in the {point['peak_phase']}"
        print(line)
        if policy["policy"]["sharding"] == "fsdp" and point:
            largest_by = point["largest"]
            state = sum(largest_by[k] for k in ("parameters", "gathered_parameters", "gradients", "optimizer_state"))
            close = abs(state - by_hand) <= 0.02 * by_hand
            right = right and close
            print(f"      per-rank state {state / 2**30:.3f} GiB; by hand 16·N/8 + one bf16 block = {by_hand / 2**30:.3f} GiB"
                  f"  ({'within' if close else 'NOT within'} 2 %)")
    met = wall < LIMIT_S and rss < LIMIT_RSS_MIB and right
    print(f"  verdict: {'met' if met else 'MISSED'}")
    return 0 if met or not options.check else 1


if __name__ == "__main__":
    sys.exit(main())
