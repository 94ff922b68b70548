"""The roofline of a whole forward and of a training step, and the step's model FLOPs utilisation.

**Forward** (``forward``): the sum over leaf calls of their roofline times (:mod:`.layers`): the
time the forward cannot beat when it runs layer by layer, each layer reading its inputs and writing
its outputs through memory, as eager PyTorch runs it; plus, for work a container does in its own
``forward`` (a residual addition), its FLOPs over the peak, whose bytes no formula gives (the sum is
then ``partial``: a lower bound of the layer-by-layer roofline). ``single_pass_time`` is the bound of
an execution that keeps every intermediate in cache: ``max(FLOPs / peak, (inputs + parameters +
outputs) / bandwidth)``.

**Training step** (``training_step``): the step's counted FLOPs (forward and backward) over the
peak of the step's dtype, against the bytes they must move at least -- the parameters read in the
forward and their gradients written (``2·P``), each saved activation written in the forward and read
in the backward (``2·A``), the inputs read (``I``) -- then the optimizer's update, which only
streams: the parameters read and written, the gradients read, its state read and written
(``2·P + G + 2·S``; AdamW's ``7·P``). ``P``, ``G``, ``S``, ``A`` and ``I`` are the step's memory
categories at its peak (the estimate's, else the measurement's). So
``max(FLOPs / peak, (2P + 2A + I) / bandwidth) + (2P + G + 2S) / bandwidth``, a lower bound.

**MFU** (``training_step.mfu``): model FLOPs utilisation = the counted training FLOPs, recomputation
left out, over the measured step time times the peak FLOP/s of the step's dtype (Chowdhery et al.
2022, appendix B); HFU keeps the recomputed FLOPs. Only for a step measured on the device the peak
belongs to: this machine's measured ceilings for a step measured here, a table device's datasheet
peak for a step measured on a GPU.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract.metrics import aggregate, metric_result, metric_value
from torchscan_lsp.contract.report import make_diagnostic
from torchscan_lsp.engine.reporting.roofline.estimate import training_estimate
from torchscan_lsp.engine.reporting.roofline.layers import METHOD_ROOFLINE, tensor_bytes

__all__ = ["container_work", "forward_totals", "step_roofline"]

#: How many layers the ``top`` lists hold.
TOP = 5


def container_work(layers: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """``(record, FLOPs)`` of the operator FLOPs each call did outside its children's calls."""
    children: dict[int, int] = {}
    for layer in layers:
        parent = layer.get("parent")
        if parent is not None:
            flops = ((layer.get("metrics") or {}).get("operator_flops") or {}).get("known_value") or 0
            children[parent] = children.get(parent, 0) + int(flops)
    found = []
    for index, total in children.items():
        own = int((((layers[index].get("metrics") or {}).get("operator_flops") or {}).get("known_value") or 0)) - total
        if own > 0:
            found.append((layers[index], own))
    return found


def _seconds(known: float | None, status: str, scope: str) -> dict[str, Any]:
    if known is None:
        return metric_result(status="unavailable", unit="seconds", scope=scope, method=METHOD_ROOFLINE)
    return metric_result(status=status, value=known, known_value=known, unit="seconds", scope=scope, method=METHOD_ROOFLINE)


def forward_totals(report: dict[str, Any], records: list[dict[str, Any]], ceilings: dict[str, Any],
                   model_latency: dict[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The forward's roofline (module docstring) and its diagnostics."""
    peak, bandwidth = metric_value(ceilings["peak_flops"]), metric_value(ceilings["bandwidth"])
    own = container_work(report.get("layers") or [])
    parts = [r["roofline_time"] for r in records]
    diagnostics = []
    if own and peak:
        parts += [_seconds(flops / peak, "partial", "module_call") for _, flops in own]
        named = ", ".join(f"{layer.get('path') or '(root)'}" for layer, _ in own[:4]) + (" …" if len(own) > 4 else "")
        diagnostics.append(make_diagnostic(
            "roofline_container_work", "roofline_time",
            f"work in the containers' own forward ({named}: {sum(f for _, f in own):,} FLOPs) has no bytes to hold "
            "against the bandwidth; only its FLOPs are in the forward's roofline, which is then a lower bound",
            severity="info"))
    total = aggregate(parts, unit="seconds", scope="forward", method=METHOD_ROOFLINE) if parts else \
        _seconds(None, "unavailable", "forward")
    totals = report.get("totals") or {}
    flops = metric_value(totals.get("operator_flops"))
    root = (report.get("layers") or [{}])[0]
    io = tensor_bytes(root.get("input")) + int(metric_value(totals.get("parameter_bytes")) or 0) + \
        int(metric_value(totals.get("buffer_bytes")) or 0) + tensor_bytes(root.get("output"))
    single = max(flops / peak if flops is not None and peak else 0.0, io / bandwidth if bandwidth else 0.0)
    by_bound = {"compute": 0.0, "memory": 0.0}
    for record in records:
        if record["bound"] in by_bound:
            by_bound[record["bound"]] += record["roofline_time"].get("known_value") or 0.0
    forward = {
        "roofline_time": total,
        "compute_time": sum(r["compute_time"] or 0.0 for r in records) + (sum(f for _, f in own) / peak if peak else 0.0),
        "memory_time": sum(r["memory_time"] or 0.0 for r in records),
        "bytes": sum(r["bytes"] for r in records),
        "flops": totals.get("operator_flops"),
        "layers": len(records),
        "compute_bound_layers": sum(r["bound"] == "compute" for r in records),
        "memory_bound_layers": sum(r["bound"] == "memory" for r in records),
        "bound": max(by_bound, key=by_bound.get) if any(by_bound.values()) else None,
        "single_pass_time": single or None,
        "top": [{"path": r["path"], "call_index": r["call_index"], "type": r["type"], "roofline_time": r["roofline_time"],
                 "bound": r["bound"]}
                for r in sorted(records, key=lambda r: -(r["roofline_time"].get("known_value") or 0.0))[:TOP]],
        "measured": None,
    }
    latency = metric_value(model_latency)
    known = total.get("known_value")
    if latency and ceilings["source"] == "measured":
        forward["measured"] = {"latency": model_latency, "fraction_of_roofline": min(1.0, known / latency) if known else None,
                               "faster_than_roofline": bool(known and latency < known)}
    return forward, diagnostics


def _categories(training: dict[str, Any]) -> tuple[dict[str, int] | None, str | None]:
    memory = training.get("memory") or {}
    for name in ("estimated", "measured"):
        method = memory.get(name) or {}
        if (method.get("peak") or {}).get("status") == "complete" and method.get("by_category"):
            return method["by_category"], name
    return None, None


def _trainable_share(training: dict[str, Any]) -> float:
    """The share of the parameters' elements that the step trains (1 when the report does not say):
    ``trainable_parameters / parameters`` of the training report's ``parameters``."""
    counts = training.get("parameters") or {}
    total, trainable = metric_value(counts.get("parameters")), metric_value(counts.get("trainable_parameters"))
    return trainable / total if total and trainable is not None else 1.0


def step_roofline(report: dict[str, Any], training: dict[str, Any], ceilings: dict[str, Any], *,
                  comparable: str | None) -> dict[str, Any]:
    """The training step's roofline and, when ``comparable`` is ``None`` (the step was measured where
    the ceilings hold), its MFU; otherwise ``comparable`` says why there is none."""
    peak, bandwidth = metric_value(ceilings["peak_flops"]), metric_value(ceilings["bandwidth"])
    flops = (training.get("flops") or {}).get("totals", {}).get("training_flops")
    counted = (flops or {}).get("known_value")
    recomputed = int(((training.get("flops") or {}).get("recomputed") or {}).get("flops") or 0)
    categories, source = _categories(training)
    compute = counted / peak if counted is not None and peak else None
    moved = optimizer = None
    if categories is not None:
        p, g = categories.get("parameters", 0), categories.get("gradients", 0)
        s, a, i = categories.get("optimizer_state", 0), categories.get("activations", 0), categories.get("inputs", 0)
        # only trainable parameters are read and written by the update (frozen ones have no gradient)
        moved, optimizer = 2 * p + 2 * a + i, round(2 * p * _trainable_share(training)) + g + 2 * s
    memory = moved / bandwidth if moved is not None and bandwidth else None
    update = optimizer / bandwidth if optimizer is not None and bandwidth else None
    known = None
    if compute is not None or memory is not None:
        known = max(compute or 0.0, memory or 0.0) + (update or 0.0)
    complete = (flops or {}).get("status") == "complete" and None not in (compute, memory, update)
    step = {
        "dtype": ceilings["dtype"],
        "flops": flops,
        "recomputed_flops": recomputed,
        "compute_time": compute,
        "memory_time": memory,
        "optimizer_time": update,
        "bytes": {"forward_backward": moved, "optimizer": optimizer, "categories_from": source},
        "roofline_time": _seconds(known, "complete" if complete else "partial", "workload"),
        "bound": None if compute is None or memory is None else ("compute" if compute >= memory else "memory"),
        "measured": None,
        "mfu": None,
        "mfu_unavailable": comparable,
    }
    timed = training.get("step_time") or {}
    seconds = metric_value(timed.get("time"))
    if seconds and comparable is None and peak and counted is not None:
        model_flops = counted - recomputed
        estimate = training_estimate(report, training)
        step["measured"] = {"step_time": timed["time"], "iqr": timed.get("iqr"),
                            "fraction_of_roofline": min(1.0, known / seconds) if known else None}
        step["mfu"] = {
            "value": model_flops / (seconds * peak),
            "hfu": counted / (seconds * peak) if recomputed else None,
            "model_flops": model_flops,
            "step_time": seconds,
            "peak_flops": peak,
            "dtype": ceilings["dtype"],
            "formula": "(training FLOPs - recomputed) / (step time x peak FLOP/s)",
            "partial": (flops or {}).get("status") != "complete",
            "estimate": estimate,
            "estimate_mfu": estimate["value"] / (seconds * peak) if estimate.get("available") else None,
        }
    elif not seconds and step["mfu_unavailable"] is None:
        step["mfu_unavailable"] = "no training step was measured (Measure training step, scan --train)"
    return step
