"""How fast could it go: the roofline of each layer call, of the forward and of a training step, and
the step's model FLOPs utilisation, from finished reports and a device's ceilings.

:func:`roofline_report` joins an analysis report (``crawl_module``: each call's operator FLOPs,
DMAs and tensor shapes), the ceilings of a device (:mod:`.ceilings`: a table device's datasheet
figures or this machine's measured ones), and optionally a per-layer latency report, a model latency
report and a training-step report. It runs nothing: every number is arithmetic on those reports.
:mod:`.layers` says what each layer's numbers mean, :mod:`.totals` the forward's and the step's,
:mod:`.estimate` the ``6·N·tokens`` comparison.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.contract.report import SCHEMA_VERSION, make_diagnostic
from torchscan_lsp.engine.reporting.roofline.ceilings import measured_ceilings, table_ceilings
from torchscan_lsp.engine.reporting.roofline.layers import (METHOD_DMAS, METHOD_IO, METHOD_ROOFLINE, join_latency,
                                                           layer_roofline, leaf_indices)
from torchscan_lsp.engine.reporting.roofline.totals import forward_totals, step_roofline

__all__ = ["roofline_report", "table_ceilings", "measured_ceilings"]


def _model_latency(latency: dict[str, Any] | None, layer_latency: dict[str, Any] | None) -> dict[str, Any] | None:
    for report, name in ((latency, "latency"), (layer_latency, "model_latency")):
        metric = ((report or {}).get("totals") or {}).get(name)
        if metric_value(metric) is not None:
            return metric
    return None


def _mfu_comparable(training: dict[str, Any], ceilings: dict[str, Any]) -> str | None:
    """``None`` when the step was measured where ``ceilings`` hold, else why its MFU would say nothing."""
    device = str((training.get("step_time") or {}).get("device") or "")
    if not device:
        return None  # no measured step: step_roofline says so
    if ceilings["source"] == "measured":
        return None if device == ceilings["device"] else \
            f"the step ran on {device}, the ceilings were measured on {ceilings['device']}"
    if device.startswith("cuda"):
        return None
    return f"the step ran on {device}; {ceilings['name']}'s datasheet peak says nothing of it"


def roofline_report(
    report: dict[str, Any],
    ceilings: dict[str, Any],
    *,
    layer_latency: dict[str, Any] | None = None,
    latency: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    step_ceilings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The roofline of ``report`` under ``ceilings`` (a record of :func:`table_ceilings` or
    :func:`measured_ceilings`).

    Args:
        report: an analysis report (``crawl_module``).
        ceilings: the device's ceilings for the forward's dtype.
        layer_latency: a ``measure_layer_latency`` report of the same model: each timed call gets
            its achieved FLOP/s and fraction of the roofline, when the ceilings were measured on
            the device it ran on.
        latency: a ``measure_latency`` report of the model (its median is the forward's measured time).
        training: an ``analyse_training_step`` report: the step's roofline, and its MFU when the step
            was measured.
        step_ceilings: the ceilings for the step's dtype, when it is not the forward's.

    Returns:
        ``{"schema_version", "kind": "roofline", "ceilings", "method": {"flops", "bytes", "time"},
        "layers"`` (one record per leaf call: :mod:`.layers`), ``"forward"`` (:func:`.totals.forward_totals`),
        ``"training_step"`` (:func:`.totals.step_roofline`, ``None`` without a training report),
        ``"measured"`` (whether the per-layer latency was compared, or why not), ``"diagnostics"}``.
        docs/report-schema.md ("Roofline") lists every field.
    """
    layers = report.get("layers") or []
    records = [layer_roofline(layers[index], ceilings) for index in leaf_indices(layers)]
    compared: str | None = None
    if layer_latency is not None:
        if ceilings["source"] != "measured":
            compared = (f"the layers were timed on {layer_latency.get('device')}; {ceilings['name']}'s roofline "
                        f"says how fast they could run on a {ceilings['name']}, not how close they came on this machine")
        elif layer_latency.get("device") != ceilings["device"]:
            compared = f"the layers were timed on {layer_latency.get('device')}, the ceilings measured on {ceilings['device']}"
        else:
            join_latency(records, layer_latency)
    forward, diagnostics = forward_totals(report, records, ceilings, _model_latency(latency, layer_latency))
    above = [r for r in records if (r["measured"] or {}).get("above_compute_peak")]
    if above:
        diagnostics.append(make_diagnostic(
            "roofline_above_compute_peak", "roofline_time",
            f"{len(above)} call(s) ran faster than the measured compute peak allows ({', '.join(r['path'] for r in above[:4])}): "
            "the counted FLOPs exceed what the kernel did (a convolution algorithm such as Winograd's multiplies "
            "less), or the peak was measured while the machine was busier (measure the ceilings again on a quiet "
            "machine)", severity="warning"))
    if metric_value(ceilings["peak_flops"]) is None:
        diagnostics.append(make_diagnostic(
            "roofline_no_peak", "roofline_time",
            f"{ceilings['name']} has no {ceilings['dtype']} rate ({(ceilings.get('reference') or {}).get('missing')}): "
            "the roofline holds the bytes against the bandwidth alone, a lower bound", severity="info"))
    step = None
    if training is not None and training.get("flops") is not None:
        chosen = step_ceilings or ceilings
        step = step_roofline(report, training, chosen, comparable=_mfu_comparable(training, chosen))
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofline",
        "ceilings": ceilings,
        "step_ceilings": step_ceilings,
        "method": {"flops": "operator FLOPs (torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas)",
                   "bytes": f"the smaller of {METHOD_IO} and {METHOD_DMAS}", "time": METHOD_ROOFLINE},
        "layers": records,
        "forward": forward,
        "training_step": step,
        "measured": {"layers": layer_latency is not None and compared is None, "reason": compared},
        "diagnostics": diagnostics,
    }
