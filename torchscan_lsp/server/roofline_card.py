"""The roofline in hover cards: on a module line, the roofline of the calls it built (each call's
bound, intensity and, when its latency was measured here, how close it came); on a target, the
forward's and the training step's roofline, the step's MFU beside the ``6·N·tokens`` estimate, and
the calls with the longest rooflines. The words are :mod:`torchscan_lsp.session.roofline`'s."""

from __future__ import annotations

from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.session.roofline import (ceilings_text, forward_text, intensity_text, layer_records, layer_text,
                                            layers_text, roofline_of, step_lines, top_text)

__all__ = ["module_roofline", "target_roofline"]


def _heading(roofline: Mapping[str, Any]) -> str:
    return f"**Roofline** on {ceilings_text(roofline['ceilings'])}"


def _one_call(record: Mapping[str, Any]) -> list[str]:
    lines = [layer_text(record)]
    compute, memory = record.get("compute_time"), record.get("memory_time")
    terms = []
    if compute is not None:
        terms.append(f"compute {fmt.duration(compute)} ({fmt.metric_text(record.get('flops'), 'FLOPs')})")
    if memory is not None:
        terms.append(f"memory {fmt.duration(memory)} ({fmt.byte_size(record.get('bytes') or 0)}: {record.get('bytes_method')})")
    if terms:
        lines.append("; ".join(terms))
    if record.get("dma_bytes") is not None:
        lines.append(f"over its DMAs ({fmt.byte_size(record['dma_bytes'])}, no reuse): {intensity_text(record.get('dma_intensity'))}")
    return lines


def module_roofline(measurements: Mapping[str, Any] | None, paths: list[str]) -> str:
    """Markdown of the roofline of the calls at ``paths`` and below; ``""`` without a roofline."""
    roofline = roofline_of(measurements)
    if roofline is None:
        return ""
    records = layer_records(roofline, paths)
    if not records:
        return ""
    if len(records) == 1:
        body = _one_call(records[0])
    else:
        body = [layers_text(records), *(f"- {line}" for line in top_text(records, 3))]
    if (roofline.get("measured") or {}).get("reason"):
        body.append(f"_Not compared with the measured latency: {roofline['measured']['reason']}._")
    return _heading(roofline) + "\n\n" + "\n\n".join(body[:1]) + "".join(f"\n\n{line}" for line in body[1:])


def target_roofline(measurements: Mapping[str, Any] | None) -> str:
    """Markdown of a target's roofline: the forward, the training step and MFU, the top calls."""
    roofline = roofline_of(measurements)
    if roofline is None:
        return ""
    parts = [_heading(roofline), forward_text(roofline), *step_lines(roofline)]
    top = top_text(roofline.get("layers") or [])
    if top:
        parts.append("Longest rooflines:\n" + "\n".join(f"- {line}" for line in top))
    return "\n\n".join(parts)
