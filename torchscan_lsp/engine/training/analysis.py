"""``analyse_training_step``: a training step's FLOPs and peak memory, both methods side by side.

It runs the *estimated* method (:mod:`.estimate`: fake tensors and ``MemTracker``, any size; the
FLOPs are counted in the same pass) and the *measured* one (:mod:`.measured`: a real step under
``measure_peak_memory``, then real steps timed, :mod:`.timed`), compares them where both ran, and holds the peak against a memory budget.
A method that cannot run is ``unavailable`` with its reason (a model on the meta device or an
absent GPU cannot be measured; a step that reads tensor values cannot be faked: one message naming
the line, :class:`~.construction.ValueReadError`, with a ``training_memory_unavailable`` warning);
when every method asked for failed otherwise, the first failure is raised, so a broken model is an
error, not a silent blank.

The comparison: where both ran, ``agree`` says whether the two peaks are within
:data:`AGREEMENT_TOLERANCE` (1 %) of the measured one, or :data:`AGREEMENT_SLACK_BYTES` (1 KiB),
whichever is larger. They agree to within a few bytes when every
byte the step allocates is an operator's output (MLPs, transformers, stride-1 convolutions on CPU);
they differ when a kernel allocates buffers it does not return (oneDNN's backward of a strided
convolution copies the input gradient; cuDNN and cuBLAS workspaces on CUDA), which only the
measurement sees. docs/measurement.md lists the cases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torchscan_lsp.contract.format import byte_size
from torchscan_lsp.contract.plan import parse_budget
from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.measuring.shared import measurement_context
from torchscan_lsp.engine.report import SCHEMA_VERSION, make_diagnostic, metric_result
from torchscan_lsp.engine.training.construction import REAL_BUILD_LIMIT_BYTES, ValueReadError
from torchscan_lsp.engine.training.estimate import METHOD_MEM_TRACKER, estimate_failure, estimate_training_memory
from torchscan_lsp.engine.training.measured import METHOD_MEASURED, measure_training_memory
from torchscan_lsp.engine.training.timed import time_training_step

__all__ = ["AGREEMENT_SLACK_BYTES", "AGREEMENT_TOLERANCE", "analyse_training_step"]

#: Largest relative difference (of the measured peak) at which the two methods are said to agree.
AGREEMENT_TOLERANCE = 0.01
#: ... or this many bytes, whichever is larger: the profiler also sees a few scalar tensors
#: (4 bytes each) that a small model's 1 % would not cover.
AGREEMENT_SLACK_BYTES = 1024


def _unavailable(method: str, reason: str) -> dict[str, Any]:
    return {"method": method, "reason": reason,
            "peak": metric_result(status="unavailable", unit="bytes", scope="workload", method=method)}


def _measured_skip(device: torch.device, estimated: dict[str, Any], limit: tuple[int, str] | None) -> str | None:
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"CUDA device '{device}' is unavailable in this process (the estimate holds for it: derived)."
    if device.type == "meta":
        return "the meta device holds no memory and runs no kernels to measure."
    peak = estimated["peak"]
    if limit is not None and device.type == "cpu" and peak["status"] == "complete" and peak["value"] > limit[0]:
        # run, the step would be stopped at the limit, and everything else with it
        return (f"not run: the step needs about {byte_size(peak['value'])} by the estimate, more than "
                f"{limit[1]}; the estimate stands for it")
    return None


def _comparison(estimated: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any] | None:
    if estimated["peak"]["status"] != "complete" or measured["peak"]["status"] != "complete":
        return None
    if measured["metric"] == "pytorch_tensor_bytes":
        estimate, actual, compared = estimated["peak"]["value"], measured["peak"]["value"], "tensor bytes"
    else:  # CUDA/MPS: the allocator's allocated peak against the derived one
        estimate = estimated["cuda"]["allocated_peak_bytes"]
        actual, compared = measured["memory"]["allocated_peak_bytes"], "allocated bytes (block-rounded)"
    difference = actual - estimate
    relative = difference / actual if actual else 0.0
    allowed = max(AGREEMENT_TOLERANCE * actual, AGREEMENT_SLACK_BYTES)
    return {"compared": compared, "estimated_bytes": estimate, "measured_bytes": actual, "difference_bytes": difference,
            "relative_difference": relative, "tolerance": AGREEMENT_TOLERANCE, "slack_bytes": AGREEMENT_SLACK_BYTES,
            "agree": abs(difference) <= allowed}


def _budget(budget: int, memory: dict[str, Any], cuda: bool) -> tuple[dict[str, Any], list[Any]]:
    estimated, measured = memory["estimated"], memory["measured"]
    if estimated["peak"]["status"] == "complete":
        peak = estimated["cuda"]["allocated_peak_bytes"] if cuda else estimated["peak"]["value"]
        compared = "estimated peak, CUDA allocated (derived)" if cuda else "estimated peak"
        categories, phase = estimated["by_category"], estimated["peak_phase"]
    elif measured["peak"]["status"] == "complete":
        peak, compared, categories, phase = measured["peak"]["value"], "measured peak", measured["by_category"] or {}, None
    else:
        return {"bytes": budget, "compared": None, "fits": None}, []
    largest = sorted(((name, size) for name, size in categories.items() if size > 0), key=lambda item: -item[1])[:3]
    record = {"bytes": budget, "compared": compared, "peak_bytes": peak, "fits": peak <= budget,
              "headroom_bytes": budget - peak, "largest_categories": [{"category": n, "bytes": s} for n, s in largest]}
    if peak <= budget:
        return record, []
    named = ", ".join(f"{name.replace('_', ' ')} {byte_size(size)}" for name, size in largest)
    when = f" (in the {phase.replace('_', ' ')})" if phase else ""
    message = f"the training step's {compared}, {byte_size(peak)}{when}, exceeds the memory budget of {byte_size(budget)}; largest: {named}."
    return record, [make_diagnostic("training_memory_over_budget", "training_memory", message)]


def analyse_training_step(
    build: Callable[[], Any], *, train: Any = None, input_shape: Any = None, input_dtype: Any = None,
    device: str | torch.device | None = None, memory_budget: int | str | None = None, estimate: bool = True,
    measure: bool = True, custom_mapping: Any = None, real_build_limit: int = REAL_BUILD_LIMIT_BYTES,
    name_file: Callable[[str], str] = str, measure_limit: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """Analyse one training step of the model ``build()`` returns.

    Args:
        build: a zero-argument factory (see :mod:`.step`); called once per method.
        train: the ``train={...}`` options (:func:`~.options.parse_train_options`).
        input_shape, input_dtype: generated inputs, for a factory that returns only a model.
        device: where the step runs (measured) and what it is estimated for (PyTorch's default
            ``foreach``; on ``cuda`` the budget is held against the derived CUDA allocation);
            ``None``: the ``device`` of ``train``, else ``"cpu"``.
        memory_budget: bytes, a size such as ``"24 GiB"``, or a GPU of the device table
            (``"L4"``: its memory, held against the derived CUDA peak): an estimate above it gets a
            ``training_memory_over_budget`` warning naming the largest categories.
        estimate, measure: which memory methods to run.
        custom_mapping: extra FLOP formulas (``{packet: formula}``).
        real_build_limit, name_file: for a model whose construction reads tensor values, as
            :func:`~.estimate.estimate_training_memory` takes them.
        measure_limit: ``(bytes, what they are)``: the memory this process may use; a step on the
            CPU whose estimated peak is above it is not measured (its ``reason`` says so).

    Returns:
        ``{"schema_version": 1, "kind": "training_step", "context", "options", "flops"`` (see
        :class:`~.flops.TrainingFlopCounter.report`, or ``None`` when no method ran a step),
        ``"parameters"`` (the model's parameters, trainable and frozen, element metrics, from the
        first method that ran; ``None`` when none did),
        ``"memory": {"estimated", "measured", "comparison", "budget"}``, ``"step_time"`` (the
        measured step's time, :func:`.timed.time_training_step`; ``None`` when no step was
        measured), ``"diagnostics"}``.
        Each memory method has ``method``, ``peak`` (a bytes metric) and, when unavailable, ``reason``.

    Raises:
        TypeError, ValueError: bad ``train`` options or ``memory_budget`` (before anything runs).
        The first method's error when every method asked for failed (a value read the estimate
        cannot stand in for is no such error: it is the estimate's reason and a warning).
    """
    options = parse_train_options(train)
    budget = parse_budget(memory_budget, name="memory_budget") if memory_budget is not None else None
    target = torch.device(device if device is not None else options.device or "cpu")
    memory: dict[str, Any] = {}
    failures: list[BaseException] = []
    flops: dict[str, Any] | None = None
    diagnostics: list[Any] = []
    inputs = {"train": options, "input_shape": input_shape, "input_dtype": input_dtype}
    if estimate:
        try:
            result = estimate_training_memory(build, **inputs, target_device=str(target), custom_mapping=custom_mapping,
                                              real_build_limit=real_build_limit, name_file=name_file)
            flops = result.pop("flops")
            memory["estimated"] = result
        except ValueReadError as exc:  # a limit of the method, not an error of the model: one message
            memory["estimated"] = {**_unavailable(METHOD_MEM_TRACKER, str(exc)),
                                   "value_read": {"file": exc.file, "line": exc.line, "phase": exc.phase}}
        except Exception as exc:  # noqa: BLE001 - reported, and raised below if nothing else ran
            failures.append(exc)
            memory["estimated"] = _unavailable(METHOD_MEM_TRACKER, estimate_failure(exc))
    else:
        memory["estimated"] = _unavailable(METHOD_MEM_TRACKER, "not requested")
    skip = _measured_skip(target, memory["estimated"], measure_limit) if measure else "not requested"
    if skip is None:
        try:
            result = measure_training_memory(build, **inputs, device=target, count_flops=flops is None,
                                             custom_mapping=custom_mapping)
            flops = result.pop("flops", flops)
            memory["measured"] = result
        except Exception as exc:  # noqa: BLE001
            failures.append(exc)
            memory["measured"] = _unavailable(METHOD_MEASURED, f"{type(exc).__name__}: {exc}")
    else:
        memory["measured"] = _unavailable(METHOD_MEASURED, skip)
    step_time = _timed_step(build, inputs, target) if skip is None and memory["measured"]["peak"]["status"] == "complete" \
        else None
    ran = [name for name in ("estimated", "measured") if memory[name]["peak"]["status"] == "complete"]
    if failures and not ran:
        raise failures[0]
    for name, failed in (("estimated", estimate), ("measured", skip is None)):
        reason = memory[name].get("reason")
        if failed and reason:  # a method that ran and failed; one that does not apply is no warning
            diagnostics.append(make_diagnostic("training_memory_unavailable", "training_memory",
                                               f"{name} training memory is unavailable: {reason}"))
    memory["comparison"] = _comparison(memory["estimated"], memory["measured"])
    memory["budget"] = None
    if budget is not None:
        # a budget that names a GPU is that GPU's memory: the derived CUDA peak is held against it
        memory["budget"], over = _budget(budget.bytes, memory, target.type == "cuda" or budget.device is not None)
        diagnostics.extend(over)
    if step_time is not None and "reason" in step_time:
        diagnostics.append(make_diagnostic("training_step_time_unavailable", "training_step_time",
                                           f"the training step could not be timed: {step_time['reason']}"))
    if flops is not None:
        diagnostics = [*flops["diagnostics"], *diagnostics]
    counted = [found for name in ran if (found := memory[name].pop("parameters", None)) is not None]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "training_step",
        "context": measurement_context(),
        "options": {**options.as_dict(), "device": str(target)},
        "flops": flops,
        "parameters": next(iter(counted), None),
        "memory": memory,
        "step_time": step_time,
        "diagnostics": diagnostics,
    }


def _timed_step(build: Callable[[], Any], inputs: dict[str, Any], target: torch.device) -> dict[str, Any]:
    """The measured step's time (:func:`.timed.time_training_step`), or ``{"method", "reason"}``
    when timing it failed (the memory measurement stands)."""
    try:
        return time_training_step(build, **inputs, device=target)
    except Exception as exc:  # noqa: BLE001 - reported as a diagnostic; the step's memory stands
        return {"method": "torch.utils.benchmark.Timer", "reason": f"{type(exc).__name__}: {exc}"}
