"""Per-layer latency: each module call of one forward, replayed alone and timed in calibrated blocks.

:func:`measure_layer_latency` runs one capture forward (:mod:`.call_capture`), then replays each
replay unit alone, on copies of the inputs it received: calls per block are calibrated until a block
lasts at least ``min_block_time``, and at least ``min_repeats`` (>= 5) blocks are timed
(:func:`~torchscan_lsp.engine.measuring.timing.time_blocks`). Each call is reported with its median, its
spread (IQR) and its share of the model's latency; a noisy call or a layer sum far from the model's
latency is flagged unstable (:mod:`.layer_latency_report`). The whole model is timed as well, by
:func:`~torchscan_lsp.engine.measuring.latency.latency_report`, with at least as many blocks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.measuring.shared import (
    MEASUREMENT_LOCK,
    check_runnable_device,
    normalise_device,
    synchronizer,
    tensor_dtypes,
)
from torchscan_lsp.engine.measuring.call_capture import CaptureError, CapturedCall, capture_calls, copy_tree, stateful_reason
from torchscan_lsp.engine.recording.inputs import call_meta, value_meta
from torchscan_lsp.engine.measuring.latency import DEFAULT_MIN_RUN_TIME, DEFAULT_WARMUP, latency_report
from torchscan_lsp.engine.measuring.layer_latency_report import UNSTABLE_SPREAD, LayerLatency, LayerLatencyReport, build_report
from torchscan_lsp.engine.measuring.timing import (
    block_statistics,
    check_seconds,
    check_timing,
    load_timer,
    same_device,
    seconds,
    tensors_of,
    time_blocks,
    unavailable_seconds,
)

__all__ = [
    "measure_layer_latency",
    "LAYER_DEFAULT_WARMUP",
    "LAYER_DEFAULT_MIN_RUN_TIME",
    "LAYER_DEFAULT_MIN_REPEATS",
    "LAYER_DEFAULT_MIN_BLOCK_TIME",
    "LAYER_MIN_BLOCKS",
]

#: Defaults: no explicit warm-up (the capture forward has already called each module once and the
#: calibration calls it again), 20 ms of timed blocks at least, 5 blocks at least, each block at
#: least 1 ms long (about 50 calls of a 20 µs LayerNorm: timer resolution and Python's loop
#: overhead vanish, and one slow call no longer makes a block of its own).
LAYER_DEFAULT_WARMUP = 0
LAYER_DEFAULT_MIN_RUN_TIME = 0.02
LAYER_DEFAULT_MIN_REPEATS = 5
LAYER_DEFAULT_MIN_BLOCK_TIME = 0.001
#: Fewest blocks a call is timed over: an IQR of fewer blocks says little about the spread.
LAYER_MIN_BLOCKS = 5


def _model_devices(model: nn.Module) -> set[torch.device]:
    return {tensor.device for tensor in [*model.parameters(), *model.buffers()]}


def _check_call(model: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple, got {type(args).__name__}.")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a mapping, got {type(kwargs).__name__}.")
    kwargs = dict(kwargs or {})
    if any(not isinstance(key, str) for key in kwargs):
        raise TypeError("kwargs keys must be strings.")
    return kwargs


def _resolve_device(model: nn.Module, args: tuple, kwargs: dict, device: Any) -> tuple[str, bool]:
    """``(canonical device name, on_meta)``; refuses a model or inputs living elsewhere."""
    dev = normalise_device(device, api="measure_layer_latency")
    placed = _model_devices(model) | {tensor.device for tensor in tensors_of((args, kwargs))}
    if dev.type == "meta" or any(place.type == "meta" for place in placed):
        return "meta", True
    device_name = check_runnable_device(dev, str(device), api="measure_layer_latency")
    wanted = torch.device(device_name)
    stray = sorted({str(place) for place in placed if not same_device(place, wanted)})
    if stray:
        raise ValueError(
            f"the model or its inputs live on {', '.join(stray)}, but device is '{device_name}': "
            "device must name where the model runs (measure_layer_latency never moves tensors)."
        )
    return device_name, False


def measure_layer_latency(
    model: nn.Module,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    device: str | torch.device,
    warmup: int = LAYER_DEFAULT_WARMUP,
    min_run_time: float = LAYER_DEFAULT_MIN_RUN_TIME,
    min_repeats: int = LAYER_DEFAULT_MIN_REPEATS,
    min_block_time: float = LAYER_DEFAULT_MIN_BLOCK_TIME,
    include_model: bool = True,
    eval_mode: bool = True,
    time_budget: float | None = None,
) -> LayerLatencyReport:
    """Latency of each leaf module call of ``model(*args, **kwargs)``, replayed alone on ``device``.

    One forward runs on private copies of ``args``/``kwargs`` under PyTorch's global module hooks,
    which copy each call's inputs. Each metric-leaf call (a module without children, or a
    ``MultiheadAttention``) is then replayed alone: ``warmup`` calls, then blocks of as many calls
    as it takes to last ``min_block_time`` (calibrated on the shortest of three timings), at least
    ``min_repeats`` blocks and at least ``min_run_time`` seconds of them. A container whose call ran
    none of its children (a fused fast path such as ``TransformerEncoderLayer``'s) is replayed
    whole, as a ``"container"`` unit.

    Each record has ``metrics.latency`` (median of the block averages), ``metrics.latency_iqr``,
    ``metrics.latency_share`` (of the model's latency), ``relative_spread`` and ``stable``; a spread
    above 25 % of the median, or a layer sum more than 1.5x above or below the model's latency, is
    flagged with a diagnostic (``layer_latency_unstable``, ``layer_latency_sum_mismatch``).
    ``totals``: ``layer_latency_sum`` (``complete`` only when every call was measured, else
    ``partial``), ``model_latency`` and ``model_latency_iqr`` (the whole forward timed with
    :func:`~torchscan_lsp.engine.measuring.latency.measure_latency`'s procedure and at least ``min_repeats``
    blocks; ``not_requested`` with ``include_model=False``). The two are separate numbers.

    With ``eval_mode=True`` (the default, like ``crawl_module``) every module is put in evaluation
    mode for the measurement and the flags are restored afterwards; everything runs under
    ``torch.no_grad()``. The caller's tensors are never passed to the model.

    A call is ``unavailable``, with a ``reason`` and a ``layer_latency_unavailable`` diagnostic, when
    its inputs cannot be copied, when the module is stateful (BatchNorm in training mode, a call that
    changes parameters, buffers or attributes), when it draws random numbers, when its replay raises,
    or on the meta device. ``time_budget`` (seconds, default unlimited) bounds the measurement
    for callers with a deadline: once it is spent, the remaining calls are ``unavailable`` with that
    reason. The whole model is timed first, right after the capture.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``; ``args`` not a tuple; ``kwargs`` not a mapping
            with string keys; caller inputs that cannot be copied; a wrongly typed option.
        ValueError / RuntimeError: as :func:`~torchscan_lsp.engine.measuring.latency.measure_latency` for the
            device and options (``min_repeats`` must be >= 5), and when the model or inputs live on
            another device than ``device``.
        ImportError: the timer cannot be imported (before anything runs).
    """
    kwargs = _check_call(model, args, kwargs)
    warmup, min_run_time, min_repeats = check_timing(warmup, min_run_time, min_repeats, LAYER_MIN_BLOCKS)
    min_block_time = check_seconds("min_block_time", min_block_time)
    if time_budget is not None:
        if isinstance(time_budget, bool) or not isinstance(time_budget, (int, float)):
            raise TypeError(f"time_budget must be a number of seconds or None, got {type(time_budget).__name__}.")
        time_budget = check_seconds("time_budget", time_budget)
    device_name, on_meta = _resolve_device(model, args, kwargs, device)
    timer_cls = None if on_meta else load_timer()
    try:
        capture_args, capture_kwargs = copy_tree((args, kwargs))
    except CaptureError as exc:
        raise TypeError(f"measure_layer_latency copies its inputs and could not: {exc}.") from None
    inputs_meta = call_meta(args, kwargs)
    options = {"warmup": warmup, "min_run_time": min_run_time, "min_repeats": min_repeats, "min_block_time": min_block_time}

    with MEASUREMENT_LOCK:
        deadline = None if time_budget is None else time.perf_counter() + time_budget
        spent = f"not timed: the time budget of {time_budget:g} s was spent" if time_budget is not None else ""
        flags = [(module, module.training) for module in model.modules()]
        try:
            if eval_mode:
                model.eval()
            with torch.no_grad():
                units = capture_calls(model, capture_args, capture_kwargs, device_name)
                del capture_args, capture_kwargs
                model_report, model_reason = None, None
                if include_model and not on_meta:
                    if deadline is not None and time.perf_counter() > deadline:
                        model_reason = spent
                    else:
                        model_report = _time_model(model, args, kwargs, timer_cls, device_name, min_repeats)
                layers = []
                for call in units:
                    over = deadline is not None and time.perf_counter() > deadline
                    layers.append(_measure_unit(call, device_name, on_meta, options, spent if over else None))
        finally:
            for module, training in flags:
                module.training = training
    timing = {
        **options,
        "timer": "timeit.Timer.repeat in calibrated blocks (the clock synchronises the device)",
        "model_timer": "torch.utils.benchmark.Timer.blocked_autorange",
        "time_budget": time_budget,
    }
    return build_report(
        model, layers, model_report, model_reason, device_name=device_name, on_meta=on_meta,
        inputs_meta=inputs_meta, eval_mode=eval_mode, timing=timing, include_model=include_model,
    )  # fmt: skip


def _time_model(model: nn.Module, args: tuple, kwargs: dict, timer_cls: Any, device_name: str, blocks: int) -> Any:
    model_args, model_kwargs = copy_tree((args, kwargs))
    meta = value_meta((args, kwargs))
    return latency_report(
        lambda: model(*model_args, **model_kwargs),
        timer_cls=timer_cls,
        device_name=device_name,
        inputs_meta={"supplied": True, "value": meta, "dtypes": tensor_dtypes(meta)},
        work_units=1,
        work_unit="calls",
        warmup=DEFAULT_WARMUP,
        min_run_time=DEFAULT_MIN_RUN_TIME,
        min_repeats=blocks,
    )


def _skip_reason(call: CapturedCall, device_name: str, on_meta: bool) -> str | None:
    """Why ``call`` is not replayed, or ``None``."""
    if on_meta:
        return "the meta device holds no data and runs no kernels, so there is no latency to measure"
    if call.capture_error is not None:
        return f"its inputs could not be captured: {call.capture_error}"
    reason = stateful_reason(call.module) or call.reason
    if reason is not None:
        return reason
    wanted = torch.device(device_name)
    tensors = [*tensors_of((call.args, call.kwargs)), *call.module.parameters()]
    stray = sorted({str(tensor.device) for tensor in tensors if not same_device(tensor.device, wanted)})
    if stray:
        return f"it ran on {', '.join(stray)}, not on the measured device '{device_name}'"
    return None


def _measure_unit(
    call: CapturedCall, device_name: str, on_meta: bool, options: dict[str, Any], skip_reason: str | None
) -> LayerLatency:
    record: dict[str, Any] = {
        "path": call.path,
        "call_index": call.call_index,
        "type": call.type,
        "unit": "leaf" if call.leaf else "container",
        "input": call.input_meta,
    }
    reason = skip_reason or _skip_reason(call, device_name, on_meta)
    timing = None
    if reason is None:
        module, call_args, call_kwargs = call.module, call.args, call.kwargs
        try:
            timing = time_blocks(
                lambda: module(*call_args, **call_kwargs),
                sync=synchronizer(device_name)[0],
                warmup=options["warmup"],
                min_block_time=options["min_block_time"],
                min_blocks=options["min_repeats"],
                min_run_time=options["min_run_time"],
            )
        except Exception as exc:  # noqa: BLE001 - a replay failure makes this one call unavailable
            reason = f"replaying it raised {type(exc).__name__}: {exc}"
    call.args = call.kwargs = None
    if timing is None:
        record.update(
            metrics={"latency": unavailable_seconds("module_call"), "latency_iqr": unavailable_seconds("module_call")},
            relative_spread=None, stable=None, timing=None, reason=reason,
        )  # fmt: skip
        return record  # type: ignore[return-value]
    median, iqr = block_statistics(timing["block_durations"], timing["calls_per_block"])
    spread = iqr / median if median > 0 else 0.0
    record.update(
        metrics={"latency": seconds(median, "module_call"), "latency_iqr": seconds(iqr, "module_call")},
        relative_spread=spread,
        stable=spread <= UNSTABLE_SPREAD,
        timing={
            "block_durations": timing["block_durations"],
            "calls_per_block": timing["calls_per_block"],
            "timed_calls": timing["calls_per_block"] * len(timing["block_durations"]),
        },
    )
    return record  # type: ignore[return-value]
