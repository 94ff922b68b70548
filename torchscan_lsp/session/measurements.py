"""What a target's latest measurements say, read the same way by every front end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from torchscan_lsp.contract.metrics import MetricResult, aggregate, metric_value
from torchscan_lsp.contract.report import in_subtree
from torchscan_lsp.session.state import TargetState

__all__ = ["MEASUREMENT_NAMES", "MeasurementFailure", "measurement_failures", "model_latency", "model_memory",
           "layer_latency"]

MEASUREMENT_NAMES = {"latency": "latency measurement", "memory": "memory measurement",
                     "layer_latency": "per-layer latency measurement", "train": "training step",
                     "roofline": "roofline",
                     "plan": "training plan"}
"""What each measurement is called in a message."""


@dataclass(frozen=True)
class MeasurementFailure:
    """A measurement that failed on its own (the analysis stood).

    Attributes:
        kind: ``latency``, ``memory``, ``layer_latency``, ``train``, ``roofline`` or ``plan``.
        requested: the job asked for it (an error), rather than running it unasked (the training
            estimate of a target with ``train`` options: a warning).
        error: its ``type``, ``message``, ``file`` and ``line`` (the innermost workspace frame, or
            none).
    """

    kind: str
    requested: bool
    error: Mapping[str, Any]

    @property
    def severity(self) -> str:
        """``error`` for a measurement asked for, else ``warning``."""
        return "error" if self.requested else "warning"

    def message(self, target: str) -> str:
        """``"net: the training step failed: ValueError: ..."``, the same words in every front end;
        an option's error (kind ``options``) without its type: its message names the option."""
        kind = self.error.get("type") if self.error.get("kind") != "options" else None
        text = f"{kind}: {self.error.get('message')}" if kind else str(self.error.get("message"))
        return f"{target}: the {MEASUREMENT_NAMES.get(self.kind, self.kind)} failed: {text}"


def measurement_failures(measurements: Mapping[str, Any] | None) -> list[MeasurementFailure]:
    """The failed ones among ``measurements`` (a result's, or a target state's), in their order."""
    return [MeasurementFailure(kind, bool(record.get("requested", True)), record["error"])
            for kind, record in (measurements or {}).items()
            if isinstance(record, dict) and isinstance(record.get("error"), dict)]


def model_latency(state: TargetState) -> dict | None:
    """The whole model's measured latency (a metric in seconds) from the last "Measure latency":
    the latency report's ``latency``, else the per-layer report's ``model_latency``; ``None``
    without a number."""
    for kind, name in (("latency", "latency"), ("layer_latency", "model_latency")):
        report = state.measurements.get(kind)
        metric = report.get("totals", {}).get(name) if isinstance(report, dict) else None
        if metric_value(metric) is not None:
            return metric
    return None


def model_memory(state: TargetState) -> dict | None:
    """The last "Measure memory" result (docs/measurement.md: ``delta_bytes`` is the peak above
    the baseline, in bytes), or ``None`` without one."""
    memory = state.measurements.get("memory")
    return memory if isinstance(memory, dict) and isinstance(memory.get("delta_bytes"), int) else None


def layer_latency(state: TargetState, paths: Iterable[str]) -> MetricResult | None:
    """Summed per-layer latency (a metric in seconds) of the module calls at ``paths`` and below,
    from the target's last "Measure latency" (``measurements.layer_latency``), by the contract's
    one rule (a call not timed makes the sum a lower bound); ``None`` without such a record."""
    report = state.measurements.get("layer_latency")
    if not isinstance(report, dict) or not report.get("layers"):
        return None
    roots = tuple(paths)
    parts = [r["metrics"]["latency"] for r in report["layers"]
             if in_subtree(str(r.get("path", "")), roots) and (r.get("metrics") or {}).get("latency")]
    return aggregate(parts, unit="seconds", scope="forward") if parts else None
