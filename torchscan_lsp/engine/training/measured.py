"""The measured peak memory of a training step: one real step under ``measure_peak_memory``.

The factory's model (real tensors, on ``device``) gets its optimizer state first (one step on zero
gradients, as for the estimate), then one step runs inside :func:`~torchscan_lsp.engine.memory.measure_peak_memory`
-- the engine's peak-memory measurement, unchanged: on CPU the profiler's memory timeline, on CUDA
and MPS the caching allocator's peak statistics.

What it counts: on CPU, the tensor bytes the profiler tracked (tensors alive before the step that
the step used -- parameters, optimizer state, inputs -- and every tensor it allocated), with the
profiler's own categories at the peak (``peak_by_category``: parameters, optimizer state, inputs,
temporaries, activations, gradients, autograd detail, unknown); on CUDA, the allocator's reserved
peak (and its allocated peak), which include block rounding and cached free blocks but no category.
What it leaves out: the Python heap and the process's resident memory (RSS), memory outside
PyTorch's allocators, and tensors alive before the step that it never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torchscan_lsp.engine.memory import measure_peak_memory
from torchscan_lsp.engine.report import metric_result
from torchscan_lsp.engine.training.flops import TrainingFlopCounter
from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.training.step import build_training_step

__all__ = ["METHOD_MEASURED", "measure_training_memory"]

#: The method label of measured training memory.
METHOD_MEASURED = "torchscan_lsp.measure_peak_memory"


def measure_training_memory(
    build: Callable[[], Any], *, train: Any = None, input_shape: Any = None, input_dtype: Any = None,
    device: str | torch.device = "cpu", count_flops: bool = False, custom_mapping: Any = None,
) -> dict[str, Any]:
    """Measure one real training step of the model ``build()`` returns, on ``device``.

    Args:
        build: a zero-argument factory (see :mod:`.step`); its model is moved to ``device``.
        train: the ``train={...}`` options (:func:`~.options.parse_train_options`).
        input_shape, input_dtype: generated inputs, for a factory that returns only a model.
        device: where the step runs (``"cpu"``, ``"cuda[:i]"``, ``"mps"``).
        count_flops: also count the step's FLOPs (:mod:`.flops`; a dispatch mode, which allocates no
            tensor memory), for a model that cannot be estimated on fake tensors.
        custom_mapping: extra FLOP formulas (``{packet: formula}``).

    Returns:
        ``{"method", "options", "foreach", "device", "metric"`` (``pytorch_tensor_bytes`` on CPU,
        ``pytorch_reserved_bytes`` on CUDA/MPS), ``"peak"`` (a bytes metric), ``"by_category"``
        (CPU: the profiler's categories at the peak; ``None`` where the backend cannot say) and
        ``"memory"`` (the full ``measure_peak_memory`` report), and ``"flops"`` when counted}.

    Raises:
        RuntimeError: the model is on the meta device, or the device is unavailable.
        Any error of the factory, of the step or of ``measure_peak_memory``, unchanged.
    """
    options = parse_train_options(train)
    target = torch.device(device)
    step = build_training_step(
        build, options, input_shape=input_shape, input_dtype=input_dtype, foreach_device=target.type,
        device=target,
    )
    step.init_optimizer_state()
    if count_flops:
        counter = TrainingFlopCounter(step.model, custom_mapping)

        def workload() -> None:
            with counter:
                step.run(counter.enter_phase)

        report = measure_peak_memory(workload, device=target)
    else:
        report = measure_peak_memory(step.run, device=target)
    result = {
        "method": METHOD_MEASURED,
        "options": options.as_dict(),
        "foreach": step.foreach,
        "device": report["device"],
        "metric": report["metric"],
        "peak": metric_result(status="complete", value=report["peak_bytes"], unit="bytes", scope="workload", method=METHOD_MEASURED),
        "by_category": report.get("peak_by_category"),
        "memory": report,
    }
    if count_flops:
        result["flops"] = counter.report()
    return result
