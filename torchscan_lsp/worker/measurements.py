"""The measurements a job may ask for besides the analysis: latency, peak memory and per-layer
latency, each run on its own after the analysis so that one failing fails alone."""

from __future__ import annotations

from typing import Any

import torch

from torchscan_lsp.targets.options import MEASUREMENTS
from torchscan_lsp.worker.errors import Blame
from torchscan_lsp.worker.options import torch_dtype

__all__ = ["requested", "measure", "failed", "run_measurement", "model_device"]


def requested(job: dict[str, Any], options: dict[str, Any]) -> list[str]:
    """The measurements the job and the target's own ``measure`` option ask for, each once, in
    the order of :data:`~torchscan_lsp.targets.options.MEASUREMENTS`."""
    requested = list(job.get("measure") or []) + list(options.get("measure") or [])
    ordered = []
    for name in MEASUREMENTS:
        if name in requested and name not in ordered:
            ordered.append(name)
    return ordered


def measure(
    names: list[str],
    model: torch.nn.Module,
    args: tuple | None,
    kwargs: dict | None,
    options: dict[str, Any],
    blame: Blame,
) -> dict[str, Any]:
    """Run each of the measurements ``names`` on ``model`` after the analysis, on its own: a
    failure is reported in its place (:func:`failed`), never failing the job. Generated inputs are made as the engine makes
    them; the model runs in evaluation mode under ``torch.inference_mode`` and its training
    flags are restored afterwards."""
    device = options.get("device") or model_device(model)
    if args is None:  # generated inputs, made as the engine makes them
        from torchscan_lsp.engine.recording.inputs import prepare_inputs

        dtype = options.get("dtype")
        prepared = prepare_inputs(
            model,
            options["input_shape"],
            torch_dtype(dtype) if dtype is not None else None,
            device=options.get("device"),
        )
        args, kwargs = prepared.args, prepared.kwargs
    kwargs = kwargs or {}
    results: dict[str, Any] = {}
    flags = [(m, m.training) for m in model.modules()]
    try:
        model.eval()

        def workload() -> None:
            with torch.inference_mode():
                model(*args, **kwargs)

        for name in names:
            try:
                results[name] = run_measurement(name, model, workload, args, kwargs, device)
            except Exception as error:  # noqa: BLE001 - one failed measurement fails alone
                results[name] = failed(error, blame)
    finally:
        for module, training in flags:
            module.training = training
    return results


def failed(error: BaseException, blame: Blame, *, requested: bool = True) -> dict[str, Any]:
    """A failed measurement's record, ``{"error": {type, message, file, line}, "requested": bool}``,
    located as a forward error (at the innermost workspace frame). ``requested``: the job asked for
    the measurement (an error for the front ends), rather than running it unasked (the training
    estimate of a target with ``train`` options: a warning)."""
    located = blame.error_from("forward", error)
    return {"error": {"type": located.type_name, "message": located.message, "file": located.file, "line": located.line},
            "requested": requested}


def model_device(model: torch.nn.Module) -> str:
    """The device of the model's first parameter or buffer (``cpu`` without any)."""
    for tensor in (*model.parameters(), *model.buffers()):
        return str(tensor.device)
    return "cpu"


def run_measurement(
    name: str,
    model: torch.nn.Module,
    workload: Any,
    args: tuple,
    kwargs: dict,
    device: str,
) -> dict[str, Any]:
    """One measurement ``name`` (``latency``, ``memory`` or ``layer_latency``) of ``workload``
    (a zero-argument call of ``model`` on ``args``, ``kwargs``) on ``device``, by the engine."""
    import torchscan_lsp

    if name == "latency":
        return dict(torchscan_lsp.measure_latency(workload, device=device, inputs=args or None))
    if name == "memory":
        return dict(torchscan_lsp.measure_peak_memory(workload, device=device))
    if name == "layer_latency":
        from torchscan_lsp.engine.measuring.layer_latency import measure_layer_latency

        return dict(measure_layer_latency(model, tuple(args), dict(kwargs), device=device))
    raise ValueError(f"unknown measurement {name!r}")
