"""``crawl_module``: structure, module formulas and operator FLOPs of one forward call.

The steps, each in its own module:

1. inputs (:mod:`.inputs`): validate the call and prepare its values;
2. recording (:mod:`.recorder`): global module hooks, filtered to the model's modules, record one
   layer per module call; at each metric-leaf call they evaluate module formulas
   (:mod:`.module_metrics`) while the operator counter is paused;
3. operators (:mod:`.operators`): the same forward runs inside the operator counter;
4. the executed path (:mod:`.paths`): told of every module call and of every operator that runs
   outside leaf calls, it composes the cumulative receptive field along the data flow, names work
   done in containers' own ``forward`` (making module totals partial), records token dependencies
   and which fused kernels ran;
5. aggregation (:mod:`.totals`): context, totals, and the strict check.

The caller's forward runs exactly once, in evaluation mode under ``torch.no_grad()``. Training flags
are restored and hooks removed whatever happens; an exception of the forward propagates unchanged.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.inputs import PreparedInputs, check_mode, prepare_inputs
from torchscan_lsp.engine.module_metrics import call_failed
from torchscan_lsp.engine.operators import OperatorCounter, not_requested_flop_report
from torchscan_lsp.engine.paths import ExecutionPaths
from torchscan_lsp.engine.recorder import CallRecorder, install_hooks, remove_hooks
from torchscan_lsp.engine.report import SCHEMA_VERSION, AnalysisReport
from torchscan_lsp.engine.totals import build_context, check_strict, forward_totals, model_totals

__all__ = ["crawl_module", "run_forward"]


def _tensors(named: list[tuple[str, nn.Module]]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``module.parameters()`` and ``module.buffers()`` (same order, shared tensors once) in one pass."""
    parameters: list[torch.Tensor] = []
    buffers: list[torch.Tensor] = []
    seen: set[int] = set()
    for _, submodule in named:
        for found, table in ((parameters, submodule._parameters), (buffers, submodule._buffers)):
            if not table:
                continue
            for tensor in table.values():
                if tensor is not None and id(tensor) not in seen:
                    seen.add(id(tensor))
                    found.append(tensor)
    return parameters, buffers


def run_forward(
    module: nn.Module,
    inputs: PreparedInputs,
    recorder: CallRecorder,
    counter: OperatorCounter | None,
    modules: list[nn.Module] | None = None,
) -> None:
    """Run ``module`` once on ``inputs`` with the recorder's hooks and, if given, the counter.

    The model is put in evaluation mode for the call (``module.eval()``, skipped when no module is
    training); every module's ``training`` flag is restored by assignment afterwards (so no
    ``train()`` override runs and BatchNorm statistics stay as they were), even when the forward
    raises. ``modules``: ``list(module.modules())`` when the caller has it already.
    """
    flags = [(m, m.training) for m in (module.modules() if modules is None else modules)]
    handles: list[Any] = []
    try:
        handles = install_hooks(module, recorder)
        if any(flag for _, flag in flags):
            module.eval()
        with torch.no_grad():
            if counter is None:
                module(*inputs.args, **inputs.kwargs)
            else:
                with counter:
                    module(*inputs.args, **inputs.kwargs)
    finally:
        remove_hooks(handles)
        for submodule, flag in flags:
            if submodule.training is not flag:
                submodule.training = flag


def _collector_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Pause Python's cyclic garbage collector while ``fn`` runs (as ``timeit`` does).

    An analysis allocates thousands of small dicts and lists (one layer record per module call).
    With the collector on, those allocations trigger collections that traverse every object of the
    process — on a model of many small modules that costs more than the analysis itself. The
    records form no reference cycles and are freed by reference counting when the report is
    dropped. The collector's previous state is restored afterwards, even when ``fn`` raises.
    """

    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if collecting:
                gc.enable()

    return paused


@_collector_paused
def crawl_module(
    module: nn.Module,
    input_shape: Any = None,
    dtype: Any = None,
    *,
    args: tuple | None = None,
    kwargs: dict[str, Any] | None = None,
    device: Any = None,
    strict: bool = False,
    mode: str = "full",
) -> AnalysisReport:
    """Analyse one forward call of ``module``.

    Args:
        module: the model.
        input_shape: shape of one generated input without the batch dimension, e.g. ``(3, 224, 224)``,
            or a non-empty list of such tuples for several positional inputs.
        dtype: a ``torch.dtype`` for every generated input, or one per shape (default: the dtype of
            the model's first parameter or buffer, else ``torch.float32``).
        args: the call's positional values, forwarded unchanged (exclusive with ``input_shape``).
        kwargs: the call's keyword values (str keys), forwarded unchanged.
        device: where generated inputs are created (default: the model's first parameter's device).
        strict: raise :class:`IncompleteAnalysisError` when the report is not complete.
        mode: ``"full"`` (structure, module formulas and operator FLOPs) or ``"structure"``.

    Returns:
        A JSON-safe :class:`AnalysisReport` (schema version 1).
    """
    check_mode(mode)
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}.")
    inputs = prepare_inputs(module, input_shape, dtype, args=args, kwargs=kwargs, device=device)
    named = list(module.named_modules())
    parameters, buffers = _tensors(named)
    context = build_context(module, mode, [*parameters, *buffers])
    full = mode == "full"
    # follows the executed path: cumulative receptive field, container work, token dependencies
    paths = ExecutionPaths((inputs.args, inputs.kwargs), [*parameters, *buffers]) if full else None
    recorder = CallRecorder(
        module,
        evaluate=paths.evaluate if paths is not None else None,
        on_failure=call_failed if full else None,
        named=named,
    )
    # the recorder tracks which module labels are active, for the counter's by_module attribution
    counter = OperatorCounter(tracker=recorder) if full else None
    recorder.counter = counter
    if paths is not None:
        paths.attach(recorder, counter)
    run_forward(module, inputs, recorder, counter, [m for _, m in named])

    operator_flops = counter.report() if counter is not None else not_requested_flop_report()
    layers = recorder.layers
    report: AnalysisReport = {
        "schema_version": SCHEMA_VERSION,
        "context": context,
        "inputs": inputs.meta,
        "layers": layers,
        "operator_flops": operator_flops,  # type: ignore[typeddict-item]
        "totals": {**model_totals(module, parameters, buffers), **forward_totals(layers, operator_flops["total"], mode)},
        "diagnostics": [*recorder.diagnostics, *operator_flops["diagnostics"]],
    }
    if paths is not None:
        paths.finish(report)  # type: ignore[arg-type]
    if strict:
        check_strict(report)  # type: ignore[arg-type]
    return report
