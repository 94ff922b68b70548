"""The measured time of a training step: real steps, timed with ``torch.utils.benchmark.Timer``.

The factory's model is built on ``device`` with its optimizer state (one step on zero gradients,
as for the memory methods), then whole steps -- forward, loss, backward, optimizer step -- are timed
by :func:`~torchscan_lsp.engine.measuring.timing.time_workload`: a first step, one warm-up step,
then ``blocked_autorange`` blocks topped up to five, each block's steps on the clock that
synchronises the device. The median of the block averages is the step's time and their
interquartile range its spread. The steps change the parameters (each is a real update), which
changes no step's work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.measuring.shared import MEASUREMENT_LOCK, check_runnable_device, synchronizer
from torchscan_lsp.engine.measuring.timing import METHOD_TIMER, block_statistics, load_timer, seconds, time_workload
from torchscan_lsp.engine.recording.inputs import call_meta
from torchscan_lsp.engine.training.step import build_training_step

__all__ = ["time_training_step"]

#: Fewest timed blocks (the spread of fewer says little).
MIN_BLOCKS = 5


def time_training_step(
    build: Callable[[], Any], *, train: Any = None, input_shape: Any = None, input_dtype: Any = None,
    device: str | torch.device = "cpu", min_run_time: float = 0.5,
) -> dict[str, Any]:
    """Time whole training steps of the model ``build()`` returns, on ``device``.

    Args:
        build: a zero-argument factory (see :mod:`.step`).
        train: the ``train={...}`` options (:func:`~torchscan_lsp.contract.training.parse_train_options`).
        input_shape, input_dtype: generated inputs, for a factory that returns only a model.
        device: where the steps run (``"cpu"``, ``"cuda[:i]"``, ``"mps"``).
        min_run_time: seconds of timed blocks at least.

    Returns:
        ``{"method", "device", "time"`` (the median step, a metric in seconds, scope ``workload``),
        ``"iqr"`` (seconds), ``"first_step"`` (seconds: the first step, allocations included),
        ``"blocks"``, ``"steps_per_block"``, ``"threads"``, ``"inputs"`` (the step's inputs as
        metadata: ``{"args", "kwargs"}`` of shapes and dtypes)}.

    Raises:
        RuntimeError: an unavailable device; ValueError: the meta device (nothing runs there).
        Any error of the factory or of a step, unchanged.
    """
    options = parse_train_options(train)
    target = torch.device(device)
    device_name = check_runnable_device(target, str(device), api="time_training_step")
    step = build_training_step(build, options, input_shape=input_shape, input_dtype=input_dtype,
                               foreach_device=target.type, device=target)
    step.init_optimizer_state()
    threads = torch.get_num_threads()
    with MEASUREMENT_LOCK:
        timing = time_workload(step.run, timer_cls=load_timer(), sync=synchronizer(device_name)[0], threads=threads,
                               warmup=1, min_run_time=min_run_time, min_repeats=MIN_BLOCKS)
    median, iqr = block_statistics(timing["block_durations"], timing["calls_per_block"])
    return {
        "method": METHOD_TIMER,
        "device": device_name,
        "time": seconds(median, "workload"),
        "iqr": seconds(iqr, "workload"),
        "first_step": timing["first_call"],
        "blocks": len(timing["block_durations"]),
        "steps_per_block": timing["calls_per_block"],
        "threads": threads,
        "inputs": call_meta(tuple(step.args), dict(step.kwargs or {})),
    }
