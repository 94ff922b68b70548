"""What a target's roofline says, in the same words for every front end (hover, ``scan``, ``check``).

The record is the worker's ``measurements["roofline"]`` (docs/report-schema.md, "Roofline"); this
module only reads it: the ceilings it was drawn under, each layer's roofline and how close a
measured call came, the forward's and the training step's, and the step's MFU beside the
``6·N·tokens`` estimate.
"""

from __future__ import annotations

from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.contract.report import in_subtree

__all__ = ["roofline_of", "ceilings_text", "layer_records", "layer_text", "layers_text", "forward_text", "step_lines",
           "top_text", "intensity_text", "percent"]


def roofline_of(measurements: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The roofline record of a target's measurements, or ``None`` (none, or it failed)."""
    record = (measurements or {}).get("roofline")
    return record if isinstance(record, dict) and record.get("kind") == "roofline" else None


def _calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


def percent(value: float) -> str:
    """``0.123`` -> ``"12.3 %"`` (three significant digits, at least one decimal below 10 %)."""
    share = 100 * value
    return f"{share:.3g} %" if share >= 10 else f"{share:.2g} %"


def intensity_text(value: float | None) -> str:
    """FLOPs per byte, ``?`` without one."""
    return "?" if value is None else f"{value:.3g} FLOPs/B"


def ceilings_text(ceilings: Mapping[str, Any]) -> str:
    """``"H100-SXM (NVIDIA H100 datasheet, dense): 67.0 TFLOP/s float32, 3.35 TB/s"`` or, measured,
    ``"this machine (AMD EPYC, 2 threads, measured): 79.0 GFLOP/s float32, 5.86 GB/s (copy)"``, with the
    ridge point."""
    peak, bandwidth = metric_value(ceilings.get("peak_flops")), metric_value(ceilings.get("bandwidth"))
    reference = ceilings.get("reference") or {}
    if ceilings.get("source") == "measured":
        where = f"{ceilings.get('hardware')}, {reference.get('threads')} thread(s), measured"
        rate = f"{fmt.number(bandwidth, 'B/s')} ({reference.get('bandwidth_pattern')})" if bandwidth else "?"
    else:
        where = f"{reference.get('document')}, dense"
        rate = fmt.number(bandwidth, "B/s") if bandwidth else "?"
    compute = f"{fmt.number(peak, 'FLOP/s')} {ceilings.get('dtype')}" if peak else f"no {ceilings.get('dtype')} rate"
    ridge = ceilings.get("ridge_point")
    return f"{ceilings.get('name')} ({where}): {compute}, {rate}" + (f"; ridge {intensity_text(ridge)}" if ridge else "")


def layer_records(roofline: Mapping[str, Any], paths: list[str]) -> list[dict[str, Any]]:
    """The roofline records of the calls at ``paths`` and below."""
    return [r for r in roofline.get("layers") or [] if in_subtree(str(r.get("path", "")), paths)]


def _measured_text(measured: Mapping[str, Any] | None) -> str:
    if not measured:
        return ""
    latency = fmt.metric_text(measured.get("latency"), "seconds")
    if measured.get("above_compute_peak"):
        return f"measured {latency}: faster than the compute peak allows (the peak was measured under load, or fewer FLOPs ran)"
    if measured.get("cache_resident"):
        return f"measured {latency}: faster than its memory roofline, its data was in cache"
    achieved = measured.get("achieved_flops")
    fraction = measured.get("fraction_of_roofline")
    return (f"measured {latency}: {percent(fraction) if fraction is not None else '?'} of the roofline"
            + (f", {fmt.number(achieved, 'FLOP/s')}" if achieved else ""))


def layer_text(record: Mapping[str, Any]) -> str:
    """One call's roofline: ``"roofline ≥ 19.8 ns, memory-bound (5.93 FLOPs/B over 66.3 kB); measured ..."``."""
    time = fmt.metric_text(record.get("roofline_time"), "seconds")
    bound = f"{record['bound']}-bound" if record.get("bound") else "moves nothing"
    detail = f"{intensity_text(record.get('intensity'))} over {fmt.byte_size(record.get('bytes') or 0)}"
    measured = _measured_text(record.get("measured"))
    return f"roofline {time}, {bound} ({detail})" + (f"; {measured}" if measured else "")


def layers_text(records: list[Mapping[str, Any]]) -> str:
    """Several calls' rooflines summed: ``"roofline 2.1 µs over 12 calls (9 memory-bound, 3 compute-bound)"``."""
    total = sum(r["roofline_time"].get("known_value") or 0.0 for r in records)
    partial = any(r["roofline_time"].get("status") != "complete" for r in records)
    memory = sum(r.get("bound") == "memory" for r in records)
    compute = sum(r.get("bound") == "compute" for r in records)
    cached = sum(bool((r.get("measured") or {}).get("cache_resident")) for r in records)
    text = (f"roofline {'≥ ' if partial else ''}{fmt.duration(total)} over {_calls(len(records))} "
            f"({memory} memory-bound, {compute} compute-bound)")
    return text + (f"; {cached} measured faster than their memory roofline (data in cache)" if cached else "")


def top_text(records: list[Mapping[str, Any]], count: int = 5) -> list[str]:
    """The ``count`` calls with the longest rooflines, one line each."""
    ranked = sorted(records, key=lambda r: -(r["roofline_time"].get("known_value") or 0.0))[:count]
    return [f"{fmt.layer_name(r.get('path'), '`')} ({r.get('type')}): {layer_text(r)}" for r in ranked]


def forward_text(roofline: Mapping[str, Any]) -> str:
    """The forward's roofline: ``"Forward: ≥ 211 ns layer by layer (memory-bound: 18 of 23 calls); 146 ns in one pass"``."""
    forward = roofline.get("forward") or {}
    text = (f"Forward: {fmt.metric_text(forward.get('roofline_time'), 'seconds')} layer by layer "
            f"({forward.get('bound') or '?'}-bound: {forward.get('memory_bound_layers')} memory-bound, "
            f"{forward.get('compute_bound_layers')} compute-bound of {_calls(forward.get('layers') or 0)})")
    if forward.get("single_pass_time"):
        text += f"; {fmt.duration(forward['single_pass_time'])} if every intermediate stayed in cache"
    measured = forward.get("measured")
    if measured and metric_value(measured.get("latency")):
        fraction = measured.get("fraction_of_roofline")
        text += (f"; measured {fmt.metric_text(measured['latency'], 'seconds')}"
                 + (f", {percent(fraction)} of the roofline" if fraction is not None else ""))
    return text


def step_lines(roofline: Mapping[str, Any]) -> list[str]:
    """The training step's roofline, its MFU (and HFU) and the ``6·N·tokens`` estimate, one line each."""
    step = roofline.get("training_step")
    if not step:
        return []
    lines = [f"Training step: {fmt.metric_text(step.get('roofline_time'), 'seconds')} at least "
             f"({step.get('bound') or '?'}-bound, {step.get('dtype')}; optimizer update "
             f"{fmt.duration(step['optimizer_time']) if step.get('optimizer_time') is not None else '?'})"]
    mfu = step.get("mfu")
    if mfu is None:
        if step.get("mfu_unavailable"):
            lines.append(f"MFU: not computed, {step['mfu_unavailable']}")
        return lines
    measured = step.get("measured") or {}
    text = (f"MFU {percent(mfu['value'])}{' (at least: some FLOPs were not counted)' if mfu.get('partial') else ''}: "
            f"{fmt.number(mfu['model_flops'], 'FLOPs')} / ({fmt.duration(mfu['step_time'])} x "
            f"{fmt.number(mfu['peak_flops'], 'FLOP/s')} {mfu['dtype']})")
    if measured.get("fraction_of_roofline") is not None:
        text += f"; the step ran at {percent(measured['fraction_of_roofline'])} of its roofline"
    lines.append(text)
    if mfu.get("hfu") is not None:
        lines.append(f"HFU {percent(mfu['hfu'])}: with the {fmt.number(step['recomputed_flops'], 'FLOPs')} "
                     "recomputed under activation checkpointing")
    lines += estimate_lines(mfu.get("estimate") or {}, mfu.get("estimate_mfu"))
    return lines


def estimate_lines(estimate: Mapping[str, Any], estimate_mfu: float | None) -> list[str]:
    """The ``6·N·tokens`` estimate beside the count, and where they differ."""
    if not estimate.get("available"):
        return [f"6·N·tokens: not applicable, {estimate.get('reason')}"] if estimate.get("reason") else []
    attention = estimate.get("attention_term")
    formula = (f"6·N·tokens = 6 x {estimate['parameters']:,} x {estimate['tokens']:,} = {fmt.number(estimate['six_n_tokens'], 'FLOPs')}"
               + (f" + 12·L·H·Q·T·tokens (L={estimate['attention_layers']}, H={estimate['heads']}, Q={estimate['head_dim']}, "
                  f"T={estimate['sequence_length']}) = {fmt.number(attention, 'FLOPs')}" if attention else ""))
    lines = [f"Estimate {formula}: {fmt.number(estimate['value'], 'FLOPs')}"
             + (f", MFU {percent(estimate_mfu)}" if estimate_mfu is not None else "")]
    parts = estimate.get("parts")
    if parts is not None and estimate.get("difference") is not None:
        named = {"attention": "attention as counted, softmax and backward included",
                 "embeddings": "embedding lookups, which multiply nothing",
                 "frozen": f"the forward of the {estimate.get('frozen_parameters', 0):,} frozen weights, 2·N_frozen·tokens",
                 "other": "normalisation, activations, loss, biases, residuals, frozen weights' input gradients, "
                 "the first layer's backward"}
        items = "; ".join(f"{named[key]} {fmt.change(value, 'FLOPs')}" for key, value in parts.items() if value)
        lines.append(f"Counted {fmt.number(estimate['counted_model_flops'], 'FLOPs')} is "
                     f"{fmt.change(estimate['difference'], 'FLOPs')} from the estimate" + (f": {items}" if items else ""))
    if estimate.get("causal_skippable_flops"):
        lines.append(f"Causal masking: both count attention dense; a causal kernel can skip "
                     f"{fmt.number(estimate['causal_skippable_flops'], 'FLOPs')} of it")
    if estimate.get("note"):
        lines.append(estimate["note"])
    return lines
