"""The roofline of each layer call (Williams, Waterman and Patterson, "Roofline: an insightful
visual performance model", CACM 2009): its FLOPs against the device's peak, its bytes against the
device's bandwidth, and, where the call was timed, how close it came.

For each leaf call of an analysis report (a call that called no other module, or a fused container
that ran none of its children):

* ``flops``: the call's operator FLOPs (the dispatched operators, ``FlopCounterMode`` and this
  project's operator formulas), the headline count;
* ``bytes``: the fewest bytes the call must move through memory. Its **I/O bytes** are its inputs
  (a tensor passed twice, as self-attention passes ``x`` as query, key and value, is read once:
  inputs of the same shape and dtype count once), its parameters (those it shares with another
  module too) and buffers, and its outputs, each read or written once; its **DMA bytes** are the
  module formula's logical reads and writes (DMAs) times the element size of the call's output.
  DMAs count each access of an unfused algorithm (a 3x3 convolution reads every input element
  ``9·Cin`` times), so they bound the traffic from above, except where the formula knows the call
  touches less than its I/O (a view, an identity that is elided, an embedding that reads only the
  rows it looks up): ``bytes`` is the smaller of the two, and ``bytes_method`` names which; a
  ``Flatten``, ``Unflatten`` or ``Identity`` returns a view and moves nothing (0, a lower bound
  even where a non-contiguous input made it copy);
* ``intensity`` = ``flops / bytes`` (FLOPs per byte) and ``dma_intensity`` = ``flops / dma_bytes``;
* ``compute_time`` = ``flops / peak``, ``memory_time`` = ``bytes / bandwidth`` and
  ``roofline_time`` = their maximum: no execution of the call on that device can be faster (a
  lower bound, whatever the kernel); ``bound`` is the larger term (``"compute"`` or ``"memory"``).

Measured (a per-layer latency report on the device the ceilings were measured on): ``achieved_flops``
= ``flops / latency``; ``fraction_of_roofline`` = ``roofline_time / latency``, at most 1 (none for a
call whose roofline is 0: it computes and moves nothing, its time is overhead). A call
timed faster than its roofline gets no fraction: faster than its memory term, it is
``cache_resident`` (replayed on the same inputs, its data stayed in a cache, which streams faster
than memory); faster than its compute term, it is ``above_compute_peak`` (the counted FLOPs
exceed what ran, or the peak was measured under load). The two flags are independent: a call that
beat both terms is both, so the calls that beat their roofline are exactly those with either flag.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchscan_lsp.contract.metrics import metric_result, metric_value
from torchscan_lsp.contract.report import layer_key
from torchscan_lsp.engine.reporting.roofline.ceilings import element_bytes

__all__ = ["METHOD_IO", "METHOD_DMAS", "METHOD_VIEW", "VIEW_TYPES", "METHOD_ROOFLINE", "leaf_indices", "tensors_in", "tensor_bytes", "layer_roofline",
           "compare_measured", "join_latency"]

METHOD_IO = "layer I/O: inputs, parameters, buffers and outputs once each"
METHOD_VIEW = "a view of its input: nothing moves"
#: Module types whose output is a view of their input (``Flatten`` of a contiguous tensor, ``Identity``):
#: they move no byte, whatever the reference's DMAs (``2·Nx`` for ``Flatten``) count.
VIEW_TYPES = frozenset({"Flatten", "Unflatten", "Identity"})
METHOD_DMAS = "torchscan_module_formula DMAs x output element size"
METHOD_ROOFLINE = "roofline: max(FLOPs / peak FLOP/s, bytes / bandwidth)"


def leaf_indices(layers: list[dict[str, Any]]) -> list[int]:
    """Indices of the calls that are the parent of no other record."""
    parents = {layer.get("parent") for layer in layers}
    return [index for index in range(len(layers)) if index not in parents]


def tensors_in(meta: Any) -> Iterable[dict[str, Any]]:
    """Every tensor description in a value description (``value_meta``: any nesting), depth first."""
    if isinstance(meta, dict):
        if meta.get("kind") == "tensor":
            yield meta
            return
        for value in meta.values():
            yield from tensors_in(value)
    elif isinstance(meta, list):
        for item in meta:
            yield from tensors_in(item)


def tensor_bytes(meta: Any, *, once_per_shape: bool = False) -> int:
    """Bytes of every tensor in a value description (``value_meta``: any nesting), by shape and dtype;
    with ``once_per_shape``, tensors of the same shape and dtype count once."""
    seen: set[tuple] = set()
    total = 0
    for tensor in tensors_in(meta):
        key = (tuple(tensor.get("shape") or ()), tensor.get("dtype"))
        if once_per_shape and key in seen:
            continue
        seen.add(key)
        numel = 1
        for size in key[0]:
            numel *= int(size)
        total += numel * (element_bytes(tensor.get("dtype")) or 0)
    return total


def _first_dtype(meta: Any) -> str | None:
    return next((t.get("dtype") for t in tensors_in(meta) if str(t.get("dtype", "")).startswith("torch.")), None)


def _io_bytes(layer: dict[str, Any]) -> int:
    params = layer.get("parameters") or {}
    dtype = _first_dtype(layer.get("output")) or _first_dtype(layer.get("input"))
    shared = int(params.get("shared_elements") or 0) * (element_bytes(dtype) or 4)
    return (tensor_bytes(layer.get("input"), once_per_shape=True) + int(params.get("bytes") or 0) + shared
            + int((layer.get("buffers") or {}).get("bytes") or 0) + tensor_bytes(layer.get("output")))


def _footprint_bytes(layer: dict[str, Any]) -> int:
    """The fewest distinct bytes a call touches: its I/O bytes with the output possibly stored in its
    input (an in-place call, ``ReLU(inplace=True)``), so only the larger of the two counts."""
    params = layer.get("parameters") or {}
    dtype = _first_dtype(layer.get("output")) or _first_dtype(layer.get("input"))
    shared = int(params.get("shared_elements") or 0) * (element_bytes(dtype) or 4)
    return (max(tensor_bytes(layer.get("input"), once_per_shape=True), tensor_bytes(layer.get("output")))
            + int(params.get("bytes") or 0) + shared + int((layer.get("buffers") or {}).get("bytes") or 0))


def _seconds(known: float | None, complete: bool, method: str) -> dict[str, Any]:
    if known is None:
        return metric_result(status="unavailable", unit="seconds", scope="module_call", method=method)
    return metric_result(status="complete" if complete else "partial", value=known, known_value=known,
                         unit="seconds", scope="module_call", method=method)


def layer_roofline(layer: dict[str, Any], ceilings: dict[str, Any]) -> dict[str, Any]:
    """The roofline record of one layer call under ``ceilings`` (see the module docstring)."""
    metrics = layer.get("metrics") or {}
    flops_metric = metrics.get("operator_flops") or metric_result(status="unavailable", unit="FLOPs",
                                                                  scope="module_call", method="none")
    flops = flops_metric.get("known_value")
    io = _io_bytes(layer)
    dtype = _first_dtype(layer.get("output")) or _first_dtype(layer.get("input"))
    # a partial DMA count is a lower bound of the accesses, which says nothing of touching less than the I/O
    dmas = (metrics.get("dmas") or {}).get("value") if (metrics.get("dmas") or {}).get("status") == "complete" else None
    dma_bytes = dmas * element_bytes(dtype) if dmas is not None and element_bytes(dtype) else None
    moved, method = (dma_bytes, METHOD_DMAS) if dma_bytes is not None and dma_bytes < io else (io, METHOD_IO)
    if layer.get("type") in VIEW_TYPES and not flops:
        moved, method = 0, METHOD_VIEW
    peak, bandwidth = metric_value(ceilings["peak_flops"]), metric_value(ceilings["bandwidth"])
    compute = flops / peak if flops is not None and peak else None
    memory = moved / bandwidth if bandwidth else None
    terms = [t for t in (compute, memory) if t is not None]
    complete = flops_metric.get("status") == "complete" and compute is not None and memory is not None
    roofline = max(terms) if terms else None
    bound = None
    if compute is not None and memory is not None and (compute or memory):
        bound = "compute" if compute >= memory else "memory"
    llc = ceilings.get("last_level_cache_bytes")
    return {
        "path": layer.get("path"), "call_index": layer.get("call_index"), "type": layer.get("type"),
        "flops": flops_metric, "io_bytes": io, "dma_bytes": dma_bytes, "bytes": moved, "bytes_method": method,
        "intensity": flops / moved if flops is not None and moved else None,
        "dma_intensity": flops / dma_bytes if flops is not None and dma_bytes else None,
        "compute_time": compute, "memory_time": memory,
        "roofline_time": _seconds(roofline, complete, METHOD_ROOFLINE), "bound": bound,
        # a call exceeds the cache only when even its smallest footprint does: an in-place call on
        # a tensor the size of the cache fits it, though its I/O is twice that
        "working_set_bytes": io, "exceeds_cache": _footprint_bytes(layer) > llc if llc else None,
        "measured": None,
    }


def compare_measured(record: dict[str, Any], timed: dict[str, Any] | None) -> None:
    """Add ``measured`` to a roofline record from its per-layer latency record ``timed``: the
    ``latency`` metric, ``achieved_flops``, ``fraction_of_roofline`` (``None`` when the call beat
    its roofline) and which term it beat (``cache_resident``, ``above_compute_peak``)."""
    latency = ((timed or {}).get("metrics") or {}).get("latency")
    seconds = metric_value(latency)
    if not seconds:
        return
    flops = metric_value(record["flops"])
    roofline = record["roofline_time"].get("known_value")
    compute, memory = record["compute_time"], record["memory_time"]
    above_peak = compute is not None and seconds < compute
    # beating the memory term needs a cache whatever the compute term says: a peak measured
    # under load must not hide that the data stayed in a cache
    cached = memory is not None and seconds < memory
    record["measured"] = {
        "latency": latency,
        "achieved_flops": flops / seconds if flops is not None else None,
        "achieved_bandwidth": record["bytes"] / seconds,
        "fraction_of_roofline": roofline / seconds if roofline and seconds >= roofline else None,
        "cache_resident": cached,
        "above_compute_peak": above_peak,
        "stable": timed.get("stable") if timed else None,
    }


def join_latency(records: list[dict[str, Any]], layer_latency: dict[str, Any] | None) -> None:
    """:func:`compare_measured` for every record that the per-layer latency report timed (joined by
    ``(path, call_index)``)."""
    timed = {layer_key(r): r for r in (layer_latency or {}).get("layers") or [] if isinstance(r, dict)}
    for record in records:
        compare_measured(record, timed.get(layer_key(record)))
