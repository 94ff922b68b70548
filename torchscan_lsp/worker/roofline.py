"""The roofline measurement of a job: the analysis and its measurements held against a device's ceilings.

It runs when the job asks for ``roofline`` (``scan --roofline``, the "Measure latency" and "Measure
training step" code lenses, ``measure=["roofline"]``) and, by itself, whenever the target's options
name a device (``roofline="H100-SXM"`` or ``roofline=True``, a pragma's or the workspace's), after
every other measurement, so that the per-layer latency and the training step of the same job join
it. The ceilings are a table device's datasheet figures, or, for this machine (``True``,
``"local"``, and the default of a job that asks without the option), the ceilings of the device the
target runs on, measured once per dtype and kept under ``cache_folder("ceilings")``; measured
again when a call of this job beat them (:func:`contradicted`), each then the higher of
the two, at most :data:`REMEASURES` times (a machine loaded for longer keeps the warning). A
failure is the measurement's record (:func:`~.measurements.failed`) and never fails the job.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract.folders import cache_folder
from torchscan_lsp.targets.options import THIS_MACHINE, roofline_device
from torchscan_lsp.worker.errors import Blame
from torchscan_lsp.worker.measurements import failed
from torchscan_lsp.worker.options import torch_dtype

__all__ = ["REMEASURES", "automatic", "contradicted", "forward_dtype", "measure_roofline"]


#: How many times ceilings that a call beat are measured again (each ~3 ``min_run_time`` seconds):
#: load on a shared machine comes in bursts of seconds, so a second try often finds a quiet moment.
REMEASURES = 2


def automatic(options: dict[str, Any]) -> bool:
    """Whether the options ask for a roofline without the job asking to measure one."""
    return roofline_device(options.get("roofline")) is not None


def forward_dtype(report: dict[str, Any]) -> str:
    """The floating dtype the forward computed in: the first floating tensor of the root call's
    output, else of its input (``float32`` when there is none)."""
    from torchscan_lsp.engine.reporting.roofline.layers import tensors_in

    root = (report.get("layers") or [{}])[0]
    for meta in (root.get("output"), root.get("input")):
        for tensor in tensors_in(meta):
            name = str(tensor.get("dtype", "")).removeprefix("torch.")
            if name.startswith(("float", "bfloat")):
                return name
    return "float32"


def _step_dtype(options: dict[str, Any], forward: str) -> str:
    train = options.get("train") or {}
    return str(train.get("autocast") or train.get("dtype") or forward).removeprefix("torch.")


def contradicted(roofline: dict[str, Any]) -> bool:
    """Whether a call measured in this job beat this machine's ceilings: faster than the compute
    peak, or faster than its memory roofline though its working set exceeds the last-level cache
    (so it could not have run from a cache): the ceilings were measured on a busier machine."""
    if roofline["ceilings"]["source"] != "measured":
        return False
    return any((r.get("measured") or {}).get("above_compute_peak")
               or ((r.get("measured") or {}).get("cache_resident") and r.get("exceeds_cache"))
               for r in roofline.get("layers") or [])


def _ceilings(device_option: str, dtype: str, device: str, *, refresh: bool = False) -> dict[str, Any]:
    from torchscan_lsp.engine.measuring.ceilings import measure_ceilings
    from torchscan_lsp.engine.reporting.roofline import measured_ceilings, table_ceilings

    if device_option != THIS_MACHINE:
        return table_ceilings(device_option, dtype)
    if device == "meta":
        raise ValueError("this machine's ceilings cannot be measured on the meta device, which runs nothing; "
                         "name a device instead, e.g. roofline=\"H100-SXM\"")
    return measured_ceilings(measure_ceilings(device, torch_dtype(dtype), cache_dir=cache_folder("ceilings"),
                                              refresh=refresh))


def measure_roofline(report: dict[str, Any], found: dict[str, Any], options: dict[str, Any], device: str,
                     blame: Blame, *, requested: bool = True) -> dict[str, Any]:
    """The roofline report of the job's analysis ``report`` with the measurements ``found`` so far
    (per-layer latency, latency, the training step; failed ones left out), for the ``roofline``
    option's device (this machine when it is unset), on the target's ``device``; a failure is the
    measurement's record, ``requested`` saying whether the job asked for it (else the option drew
    it unasked: a warning)."""
    from torchscan_lsp.engine.reporting.roofline import roofline_report

    def good(name: str) -> dict[str, Any] | None:
        record = found.get(name)
        return record if isinstance(record, dict) and "error" not in record else None

    try:
        chosen = roofline_device(options.get("roofline")) or THIS_MACHINE
        dtype = forward_dtype(report)
        training = good("train")
        step_dtype = _step_dtype(options, dtype)
        for refresh in (False,) + (True,) * REMEASURES:
            ceilings = _ceilings(chosen, dtype, device, refresh=refresh)
            step_ceilings = _ceilings(chosen, step_dtype, device, refresh=refresh) \
                if training is not None and step_dtype != dtype else None
            drawn = dict(roofline_report(report, ceilings, layer_latency=good("layer_latency"), latency=good("latency"),
                                         training=training, step_ceilings=step_ceilings))
            if not contradicted(drawn):  # ceilings that a call beat were measured on a busier machine
                break
        return drawn
    except Exception as error:  # noqa: BLE001 - one failed measurement fails alone
        return failed(error, blame, requested=requested)
