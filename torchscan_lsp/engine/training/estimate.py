"""The estimated peak memory of a training step: the step run on fake tensors, for any model size.

``estimate_training_memory`` calls the factory under ``torch._subclasses.fake_tensor.FakeTensorMode``
(tensors carry shapes, dtypes and storage sizes but no data: a 7B-parameter model costs no memory),
creates the optimizer's state (one step on zero gradients, so that the step estimated is a
steady-state one), then runs one step -- forward, loss, backward, optimizer step -- under
:class:`~.tracker.PhaseMemTracker` (PyTorch's ``MemTracker``), optionally counting its FLOPs in the
same pass.

What it counts: the bytes of every tensor storage live at each moment of the step, by category --
``parameters``, ``buffers``, ``gradients``, ``optimizer_state``, ``activations`` (tensors the forward
created: what autograd saved, the output, the loss), ``temporaries`` (created in the backward and the
optimizer step and freed before the step ends; the optimizer's are the share of its tensors above the
state that persists), ``inputs`` (the step's inputs and targets). What it leaves out: the Python
heap, allocator caching and fragmentation (on CPU the allocator returns memory at once; on CUDA see
:mod:`.cuda` for what is derived), memory a C++ kernel allocates internally without returning it as
a tensor (e.g. oneDNN scratch space), and tensors the factory keeps elsewhere (a closure, a global)
that the step never produces or receives. A model built on the meta device is materialised as fake
CPU tensors; a factory that converts its model (``.to(torch.bfloat16)``, ``.double()``) converts
fake tensors (:mod:`.fake_modules`); a factory that reads tensor values while it builds the model
(timm's ``.tolist()`` of its drop-path rates, ``trunc_normal_``) builds it on the meta device or,
small, for real, converted to fake tensors (:mod:`.construction`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode
from torch.utils._pytree import tree_flatten

from torchscan_lsp.engine.recording.totals import model_totals
from torchscan_lsp.engine.report import metric_result
from torchscan_lsp.engine.training.construction import REAL_BUILD_LIMIT_BYTES, VALUE_READS, FakeBuild, step_value_read
from torchscan_lsp.engine.training.fake_modules import swappable_fake_tensors
from torchscan_lsp.engine.training.flops import FLOP_PHASES, TrainingFlopCounter
from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.training.step import PHASES, TrainingStep, build_training_step

__all__ = ["METHOD_MEM_TRACKER", "PARAMETER_TOTALS", "estimate_failure", "estimate_training_memory", "track_step",
           "with_optimizer_split"]

#: The method label of estimated training memory.
METHOD_MEM_TRACKER = "torch.distributed._tools.mem_tracker.MemTracker+FakeTensorMode"


def estimate_failure(exc: BaseException, *, measured: bool = True) -> str:
    """Why an estimate on fake tensors failed, in words: the exception, and for one that read a
    tensor's value (``DataDependentOutputException``: ``.item()``, ``.tolist()``, control flow on a
    tensor, in the model or in its optimizer's step -- ``torch.optim.Adafactor`` reads its step count
    and the parameters' norms) what that means; ``measured``: a measured step runs beside it."""
    reason = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, DataDependentOutputException):
        reason += (" (fake tensors hold no values, so a step that reads them -- .item(), .tolist(), control flow on "
                   "a tensor, in the model or in its optimizer, as torch.optim.Adafactor's step does -- cannot be "
                   "estimated" + ("; the measured step still runs)" if measured else ")"))
    return reason


#: The parameter totals of a step's model (elements): all of them, those the step trains (they
#: alone get gradients and optimizer state) and the frozen rest.
PARAMETER_TOTALS = ("parameters", "trainable_parameters", "frozen_parameters")


def with_optimizer_split(categories: dict[str, int], state_bytes: int) -> dict[str, int]:
    """Move the optimizer step's own temporaries (tagged as optimizer state by ``MemTracker``: it
    tags everything created inside ``optimizer.step``) from ``optimizer_state`` to ``temporaries``.
    The state only grows during the step, so what exceeds the state left after it is temporary."""
    split = dict(categories)
    extra = max(0, split["optimizer_state"] - state_bytes)
    split["optimizer_state"] -= extra
    split["temporaries"] += extra
    return split


def _path(fqn: str, root_label: str) -> str:
    if fqn == root_label:
        return ""
    return fqn[len(root_label) + 1:] if fqn.startswith(root_label + ".") else fqn


def track_step(step: TrainingStep, *, count_flops: bool = False, custom_mapping: Any = None,
               tracker: Any = None) -> dict[str, Any]:
    """Run ``step`` once under a :class:`PhaseMemTracker` (and a FLOP counter when asked) and report.

    ``tracker``: another :class:`~.tracker.PhaseTracking` tracker to run it under (a sharded step's,
    :func:`~.sharding.fsdp_tracker`: it finds the model and optimizer itself and is told the inputs;
    its categories are its ``names``; no ``by_module``).

    Returns the estimate's fields (see :func:`estimate_training_memory`) without ``options``, plus
    ``largest`` (each category's most bytes at any moment, the optimizer's temporaries split off as
    at the peak) and ``cuda_phase_peaks`` (each phase's derived CUDA allocated peak).
    """
    # imported here: MemTracker's module imports torch.distributed and the compiler stack (over a
    # second), which no analysis but a training step needs
    from torchscan_lsp.engine.training.tracker import PhaseMemTracker, categories_of

    externals = [leaf for leaf in tree_flatten((step.args, step.kwargs, step.targets))[0] if isinstance(leaf, torch.Tensor)]
    own = tracker is None
    if own:
        tracker = PhaseMemTracker()
        tracker.track_external(step.model, step.optimizer, *externals)
    else:
        tracker.track_inputs(tuple(externals))
    names = tracker.names
    counter = TrainingFlopCounter(step.model, custom_mapping) if count_flops else None

    def on_phase(name: str) -> None:
        tracker.enter_phase(name)
        if counter is not None:
            counter.enter_phase(name)

    with tracker:
        if counter is not None:
            with counter:
                step.run(on_phase)
        else:
            step.run(on_phase)
        tracker.enter_phase(None)
    persistent = categories_of(tracker.get_tracker_snapshot("current"), names)
    state = persistent["optimizer_state"]
    phases = {
        name: {
            "peak_bytes": total,
            "cuda_allocated_peak_bytes": tracker.cuda_phase_peaks[name],
            "by_category": with_optimizer_split(categories_of(snapshot, names), state),
            "end_by_category": with_optimizer_split(categories_of(tracker.phase_ends[name], names), state),
        }
        for name, (total, snapshot) in tracker.phase_peaks.items()
    }
    peak_phase = max(PHASES, key=lambda name: (phases[name]["peak_bytes"], -PHASES.index(name)))
    peak = phases[peak_phase]["peak_bytes"]
    root_label = type(step.model).__name__
    largest = {**dict.fromkeys(persistent, 0), **tracker.largest}
    largest["temporaries"] = max(largest["temporaries"], largest["optimizer_state"] - state)
    largest["optimizer_state"] = state  # the state only grows during a step: the rest was temporary
    result: dict[str, Any] = {
        "method": METHOD_MEM_TRACKER,
        "foreach": step.foreach,
        "peak": metric_result(status="complete", value=peak, unit="bytes", scope="workload", method=METHOD_MEM_TRACKER),
        "peak_phase": peak_phase,
        "by_category": phases[peak_phase]["by_category"],
        "phases": phases,
        "persistent": {"bytes": sum(persistent.values()), "by_category": persistent},
        "largest": largest,
        "by_module": {_path(fqn, root_label): record for fqn, record in sorted(tracker.module_stats())} if own else {},
        "parameters": {name: metric for name, metric in model_totals(step.model).items() if name in PARAMETER_TOTALS},
        "cuda": tracker.cuda.report(),
    }
    if counter is not None:
        result["flops"] = counter.report()
    return result


def count_step_flops(step: TrainingStep, custom_mapping: Any = None) -> dict[str, Any]:
    """The forward and backward FLOPs of ``step`` (:class:`~.flops.TrainingFlopCounter`'s report),
    counted in a pass of their own, without the optimizer step (whose operators the count leaves
    out, :data:`~.flops.FLOP_PHASES`) and with no gradient left before or after it.

    Not in the memory pass of a step that recomputes: the counter's module attribution (PyTorch's
    ``ModuleTracker``) keeps the tensors of a checkpointed block's recomputation alive, which made
    the estimated peak of a model with activation checkpointing larger than a real step's, and
    different from one run to the next.
    """
    step.optimizer.zero_grad(set_to_none=True)
    counter = TrainingFlopCounter(step.model, custom_mapping)
    try:
        with counter:
            step.run(counter.enter_phase, phases=FLOP_PHASES)
    finally:
        step.optimizer.zero_grad(set_to_none=True)
    return counter.report()


def estimate_training_memory(
    build: Callable[[], Any], *, train: Any = None, input_shape: Any = None, input_dtype: Any = None,
    target_device: str = "cpu", count_flops: bool = True, custom_mapping: Any = None,
    real_build_limit: int = REAL_BUILD_LIMIT_BYTES, name_file: Callable[[str], str] = str,
) -> dict[str, Any]:
    """Estimate one training step of the model ``build()`` returns, on fake tensors.

    Args:
        build: a zero-argument factory (see :mod:`.step` for what it may return); it is called under
            ``FakeTensorMode``; when that reads a tensor value (``.item()``, ``.tolist()``) it is
            called again on the meta device, else for real (:mod:`.construction`).
        train: the ``train={...}`` options (:func:`~.options.parse_train_options`).
        input_shape, input_dtype: generated inputs, for a factory that returns only a model.
        target_device: the device type the step is estimated for; it decides PyTorch's default
            ``foreach`` (the tensors themselves are fake CPU tensors either way).
        count_flops: also count the step's forward and backward FLOPs (:mod:`.flops`) in the
            same pass; when that pass recomputed checkpointed blocks, the memory is tracked again
            without the counter (:func:`count_step_flops` says why).
        custom_mapping: extra FLOP formulas (``{packet: formula}``).
        real_build_limit: bytes a real build of a model whose construction reads values may
            allocate (0: never build for real).
        name_file: how a :class:`~.construction.ValueReadError` names a source file.

    Returns:
        ``{"method", "options", "foreach", "stand_in"`` (how the model was built: ``None`` under
        the fake mode, ``"meta"`` or ``"real"`` when its construction read a value), ``"peak"`` (a bytes metric), ``"peak_phase"`` (``forward``,
        ``backward`` or ``optimizer_step``), ``"by_category"`` (bytes at the peak),
        ``"phases"`` (each phase's ``peak_bytes``, ``by_category`` at its peak and ``end_by_category``
        when it ended; the optimizer step ends once the output and the loss are released),
        ``"persistent"`` (what stays live between
        steps: parameters, buffers, optimizer state, inputs), ``"by_module"`` (path -> parameters,
        buffers, inputs, outputs, forward and backward peak bytes), ``"parameters"`` (the model's
        :data:`PARAMETER_TOTALS`, element metrics: a frozen parameter -- ``requires_grad=False``, a
        fine-tuned backbone, the base weights under LoRA adapters -- has no gradient and no
        optimizer state), ``"cuda"`` (:mod:`.cuda`'s derived figures) and ``"flops"`` when counted}.

    Raises:
        RuntimeError: this PyTorch has no ``MemTracker``.
        ValueReadError: the step reads a tensor's value, or the construction does and no stand-in
            worked; it names the file and line.
        Any other error of the factory or of the step, unchanged.
    """
    from torchscan_lsp.engine.training.tracker import MEM_TRACKER_AVAILABLE

    if not MEM_TRACKER_AVAILABLE:
        raise RuntimeError(
            f"PyTorch {torch.__version__} has no torch.distributed._tools.mem_tracker.MemTracker (PyTorch 2.4 or "
            "later, built with torch.distributed), so training memory cannot be estimated."
        )
    options = parse_train_options(train)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode, swappable_fake_tensors(mode):
        faked = FakeBuild(build, mode, real_limit=real_build_limit, name_file=name_file)
        step = build_training_step(
            faked, options, input_shape=input_shape, input_dtype=input_dtype,
            foreach_device=target_device.split(":", 1)[0], materialise=True,
        )
        step.init_optimizer_state()
        try:
            result = track_step(step, count_flops=count_flops, custom_mapping=custom_mapping)
            if count_flops and result["flops"]["recomputed"]["calls"]:
                # the model checkpoints in its own code: the memory again, without the counter
                # (count_step_flops says why); a step without recomputation is exact in one pass
                flops = result["flops"]
                step.optimizer.zero_grad(set_to_none=True)
                result = track_step(step, custom_mapping=custom_mapping)
                result["flops"] = flops
        except VALUE_READS as error:
            raise step_value_read(error, step.running or "forward", name_file) from None
    return {"method": result.pop("method"), "options": options.as_dict(), "stand_in": faked.stand_in, **result}
