"""The data-flow tracker of one crawl: data flow, container work and the kernels that ran.

:class:`DataFlowTracker` is the engine's own observer (:mod:`.observers`) of the crawl's recording
pass: told of every module call entering and leaving, and of every operator, it follows the
operators that run while no metric-leaf call is active (in a container's own ``forward``). From
this it builds:

* the cumulative receptive field of every leaf call (:mod:`.receptive`, :mod:`.dataflow`): the
  module-local values move to ``local_receptive_field``, ``local_stride`` and ``local_padding``;
  ``receptive_field``, ``effective_stride`` and ``effective_padding`` become the model's field up to
  the call's output;
* the container-work cross-check (:mod:`.containers`);
* ``token_dependencies`` records of attention, Transformer, normalisation and ``Linear`` calls
  (:mod:`.tokens`);
* ``context["execution_path"]``: how the forward ran, which fused kernels were counted and, on the
  meta device, what cannot be measured there (peak memory, latency) and why.

The hot path is the operator check: :meth:`DataFlowTracker.operator_ran` returns at once unless
:attr:`DataFlowTracker.outside` (a bool kept up to date on every module call) is true.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchscan_lsp.contract.format import layer_name
from torchscan_lsp.engine.recording.containers import container_diagnostics, mark_partial
from torchscan_lsp.engine.dataflow.flow import TensorStates, propagate, tensors_in
from torchscan_lsp.engine.recording.module_info import ModuleInfo
from torchscan_lsp.engine.recording.formula_memo import FormulaMemo
from torchscan_lsp.engine.recording.module_metrics import evaluate_call, ordered_inputs
from torchscan_lsp.engine.recording.observers import PassObserver
from torchscan_lsp.engine.dataflow.receptive import (
    CONSTANT,
    LOCAL_METRICS,
    SOURCE,
    Field,
    compose,
    field_metrics,
    fold_into_features,
    mix_folded,
    mixes_feature_axis,
)
from torchscan_lsp.engine.report import Diagnostic, make_diagnostic
from torchscan_lsp.engine.dataflow.tokens import KINDS_BY_CLASS as _TOKEN_KINDS
from torchscan_lsp.engine.dataflow.tokens import UNKNOWN, token_dependencies, token_kind

__all__ = ["DataFlowTracker", "FUSED_KERNELS", "META_UNAVAILABLE"]

#: Fused CPU/GPU kernels that replace a module's decomposed work when PyTorch takes a fast path.
FUSED_KERNELS = frozenset(
    (
        "aten._transformer_encoder_layer_fwd",
        "aten._native_multi_head_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_cudnn_attention",
        "aten._flash_attention_forward",
        "aten._efficient_attention_forward",
        "aten.mkldnn_rnn_layer",
    )
)
#: What an analysis on the meta device cannot give, and why (docs/report-schema.md, `execution_path`).
META_UNAVAILABLE = {
    "peak_memory": "The meta device holds no data and allocates no memory; measure peak memory on cpu, "
    "cuda or mps.",
    "latency": "The meta device runs no kernels, so there is nothing to time; measure latency on cpu, cuda or mps.",
}
_POINTWISE = (1, 1, 0)
_TENSOR = torch.Tensor
_UNKNOWN_KIND = object()


class DataFlowTracker(PassObserver):
    """Follows one crawl's data flow (see the module docstring).

    Args:
        inputs: the call's positional and keyword values (their tensors start the data flow).
        constants: the model's parameters and buffers.
    """

    def __init__(self, inputs: tuple[tuple, dict], constants: list[torch.Tensor]) -> None:
        self.states = TensorStates({id(t) for t in constants})
        sources = tensors_in(inputs)
        for tensor in sources:
            self.states.set(tensor, SOURCE)
        self._meta = any(t.is_meta for t in sources) or any(t.is_meta for t in constants)
        #: True while a container is the innermost active module and no leaf call is active.
        self.outside = False
        self._depth = 0
        self._leaf_depth = 0
        self._escaped: dict[tuple[str, int | None], dict[str, int]] = {}  # (path, record) -> op -> calls
        self._noted: set[str] = set()
        self._names: dict[int, str] = {}
        self._memo = FormulaMemo()
        self._recorder: Any = None
        self._counter: Any = None

    def attach(self, recorder: Any, counter: Any) -> None:
        """Read ``recorder``'s records and pause ``counter`` while reading mask values."""
        self._recorder = recorder
        self._counter = counter

    # ------------------------------------------------------------------------------ module calls

    def call_started(self, module: nn.Module, info: ModuleInfo, layer: int | None, args: tuple) -> None:
        self._depth += 1
        if info.leaf or info.script:
            self._leaf_depth += 1
        self.outside = not self._leaf_depth

    def call_ended(
        self, module: nn.Module, info: ModuleInfo, layer: int | None, args: tuple, kwargs: dict, output: Any,
        error: BaseException | None,
    ) -> None:  # fmt: skip
        self._depth -= 1
        if info.leaf or info.script:
            self._leaf_depth -= 1
        self.outside = self._depth > 0 and not self._leaf_depth
        if layer is None or error is not None:
            return
        kind = _TOKEN_KINDS.get(type(module), _UNKNOWN_KIND)
        if kind is _UNKNOWN_KIND:
            kind = token_kind(module)
        if kind is not None:
            self._tokens(module, info, args, kwargs, layer)

    def _tokens(self, module: nn.Module, info: ModuleInfo, args: tuple, kwargs: dict, index: int) -> None:
        counter = self._counter
        if counter is not None:
            counter.pause()  # reading mask values dispatches operators: not the model's work
        try:
            record = token_dependencies(module, args, kwargs)
        except TypeError:
            return  # a call that does not bind to forward's signature: nothing to describe
        finally:
            if counter is not None:
                counter.resume()
        if record is None:
            return
        self._recorder.layers[index]["token_dependencies"] = record
        for entry in record["dependencies"]:
            if entry["relation"] == UNKNOWN:
                self._recorder.diagnostics.append(
                    make_diagnostic(
                        "token_dependencies_unknown",
                        "token_dependencies",
                        f"{entry['stage']}: {entry['reason']}.",
                        path=info.path,
                    )
                )

    # -------------------------------------------------------------------------------- operators

    def operator_ran(
        self, func: Any, args: tuple, kwargs: dict, out: Any, flops: int | None, macs: int | None, layer: int | None
    ) -> None:
        """An operator ran: when in a container's own forward, note it and follow its data flow."""
        if not self.outside or layer is None:
            return
        name = self._names.get(id(func))
        if name is None:
            name = self._names[id(func)] = str(func._overloadpacket)
        path = self._recorder.layers[layer]["path"]
        ops = self._escaped.get((path, layer))
        if ops is None:
            ops = self._escaped[(path, layer)] = {}
        ops[name] = ops.get(name, 0) + 1
        where = f"{name} in {layer_name(path)}"
        try:
            propagate(self.states, name, args, kwargs, out, where)
        except Exception as exc:  # noqa: BLE001 - a tensor subclass the data flow cannot read
            cause = f"{where} could not be followed ({type(exc).__name__})"
            for tensor in tensors_in(out):
                self.states.set(tensor, Field.unavailable(cause))

    # ------------------------------------------------------------------------------- leaf calls

    def evaluate(
        self,
        module: nn.Module,
        info: ModuleInfo,
        args: tuple,
        kwargs: dict,
        output: Any,
        record: dict[str, Any],
        diagnostics: list[Diagnostic],
    ) -> None:
        """The recorder's evaluator: module formulas, then the cumulative receptive field."""
        evaluate_call(module, info, args, kwargs, output, record, diagnostics, self._memo)
        metrics = record["metrics"]
        if "receptive_field" not in metrics:
            # no input or output tensor, or a ScriptModule: its own diagnostic says why, and what it
            # returned has no field either
            cause = f"{layer_name(info.path)} ({info.type}) could not be measured"
            self._noted.add(cause)
            for tensor in tensors_in(output):
                self.states.set(tensor, Field.unavailable(cause))
            return
        local = (metrics.pop("receptive_field"), metrics.pop("effective_stride"), metrics.pop("effective_padding"))
        for name, metric in zip(LOCAL_METRICS, local):
            metrics[name] = metric
        if args and type(args[0]) is _TENSOR:  # the usual call: one tensor first
            x = args[0]
        else:
            x = next(iter(tensors_in(ordered_inputs(module, args, kwargs))), None)
        outputs = [output] if type(output) is _TENSOR else tensors_in(output)
        path = info.path
        if x is None:
            field = SOURCE
        else:
            in_place = any(t is x for t in outputs)
            field = self.states.get(x, f"the input of {layer_name(path)}", modified_by_caller=in_place)
        if field is CONSTANT:
            field = SOURCE
        if local[0]["status"] != "complete":
            field = Field.unavailable(f"{layer_name(path)} ({info.type}) has no module-local receptive field")
            self._noted.add(field.cause)  # its own diagnostic already says why
        else:
            values = tuple(m["value"] for m in local)
            if field.folded is not None:
                if mixes_feature_axis(module, x.dim()):
                    field = mix_folded(field)
                elif values != _POINTWISE:
                    field = Field.unavailable(
                        f"{layer_name(path)} ({info.type}) reads positions that were folded into its feature axis"
                    )
            field = compose(field, values)
            if x is not None and x.dim() >= 3 and outputs and outputs[0].dim() <= 2:
                field = fold_into_features(field, int(x.shape[2]))
        metrics.update(field_metrics(field))
        if field.cause is not None and field.cause not in self._noted:
            self._noted.add(field.cause)
            status = "partial" if field.status == "partial" else "unavailable"
            diagnostics.append(
                make_diagnostic(
                    "receptive_field_path",
                    "receptive_field",
                    f"The cumulative receptive field of {layer_name(path)} is {status}: {field.cause}.",
                    path=path,
                )
            )
        for tensor in outputs:
            self.states.set(tensor, field)

    # ------------------------------------------------------------------------------------ report

    def finish(self, report: dict[str, Any]) -> None:
        """Add container-work diagnostics (before the operator ones), mark the totals they affect
        partial, and record the execution path in the report's context."""
        layers = report["layers"]
        escaped: dict[str, dict[str, int]] = {}
        for (path, index), ops in self._escaped.items():
            if index is not None and "module_flops" in layers[index]["metrics"]:
                continue  # a container whose children never ran, measured as one unit by its formula
            merged = escaped.setdefault(path, {})
            for op, count in ops.items():
                merged[op] = merged.get(op, 0) + count
        diagnostics, affected = container_diagnostics(escaped)
        operator_count = len(report["operator_flops"]["diagnostics"])
        cut = len(report["diagnostics"]) - operator_count
        report["diagnostics"][cut:cut] = diagnostics
        mark_partial(report["totals"], affected)
        report["context"]["execution_path"] = self._execution_path()

    def _execution_path(self) -> dict[str, Any]:
        counter = self._counter
        ran = {str(counter.packets[key]) for key in counter.calls} if counter is not None else set()
        path: dict[str, Any] = {
            "grad_mode": "no_grad",
            "module_hooks": "global",
            "fused_kernels": sorted(ran & FUSED_KERNELS),
        }
        if self._meta:
            path["unavailable_on_meta"] = dict(META_UNAVAILABLE)
        return path
