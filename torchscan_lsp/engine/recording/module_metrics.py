"""Module metrics of one metric-leaf call: module formulas, with their statuses and diagnostics.

Runs inside the forward hook, while the operator counter is paused. For each formula the Python
warnings it emits are recorded: a formula that raises gives ``unavailable``; one that warns gives
``partial`` (its number is a lower bound; ``Module type not supported`` gives 0); one that returns
quietly gives ``complete``. Receptive-field metrics are never partial: any warning makes the three
of them ``unavailable``.
"""

from __future__ import annotations

import inspect
import numbers
import warnings
import weakref
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.recording.formula_memo import FormulaMemo
from torchscan_lsp.engine.recording.inputs import first_tensor
from torchscan_lsp.engine.recording.module_info import ModuleInfo
from torchscan_lsp.engine.report import (
    DIAGNOSTIC_NOT_APPLICABLE,
    METHOD_MODULE_FORMULA,
    Diagnostic,
    make_diagnostic,
    metric_result,
)
from torchscan_lsp.engine.recording.tensor_shapes import irregular_reason, regular_shape

__all__ = ["FORMULA_METRICS", "RF_METRICS", "ordered_inputs", "evaluate_call", "call_failed", "output_unseen"]

#: Formula metrics of a metric-leaf call, with their units, in evaluation order.
FORMULA_METRICS = (("module_flops", "FLOPs"), ("macs", "MACs"), ("dmas", "DMAs"))
#: The three values of ``module_rf``.
RF_METRICS = ("receptive_field", "effective_stride", "effective_padding")
#: Every metric ``evaluate_call`` sets on a call it could evaluate.
_EVALUATED = tuple(name for name, _ in FORMULA_METRICS) + RF_METRICS
_UNSUPPORTED = "Module type not supported"
_MISSING_TENSOR = "The module call did not expose both an input and output tensor."
_IRREGULAR = (
    "The module call's {} is {}, and module formulas need one: its module metrics are unavailable "
    "(operator_flops reports the operators it ran)."
)
_MISSING = object()
_WHOLE_OUTPUT = (nn.MultiheadAttention, nn.RNNBase)


# --------------------------------------------------------------------------------------------------
# ordered inputs


class _Signature:
    """A cached ``forward`` signature with a fast path for calls without keyword arguments."""

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        params = list(signature.parameters.values())
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.positional = [p for p in params if p.kind in positional]
        self.var_positional = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        self.keyword_defaults = tuple(
            p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not p.empty
        )
        self._tails: dict[int, tuple | None] = {}

    def _tail(self, count: int) -> tuple | None:
        """Defaults that ``apply_defaults`` adds after ``count`` positional values (None: bind fails)."""
        tail = self._tails.get(count, _MISSING)
        if tail is _MISSING:
            if count > len(self.positional) and not self.var_positional:
                tail = None
            else:
                tail = tuple(p.default for p in self.positional[count:] if p.default is not p.empty)
                tail += self.keyword_defaults
            self._tails[count] = tail
        return tail  # type: ignore[return-value]

    def order(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        if not kwargs:
            tail = self._tail(len(args))
            if tail is None:
                raise TypeError("too many positional arguments")
            return args + tail if tail else args
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        ordered: list[Any] = []
        arguments = bound.arguments
        for name, param in self.signature.parameters.items():
            if name not in arguments:
                continue
            value = arguments[name]
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                ordered.extend(value)
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                ordered.extend(value.values())
            else:
                ordered.append(value)
        return tuple(ordered)


_SIGNATURES: weakref.WeakKeyDictionary[type, _Signature | None] = weakref.WeakKeyDictionary()


def _signature(module: nn.Module) -> _Signature | None:
    own_forward = "forward" in module.__dict__
    if not own_forward:
        cls = type(module)
        try:
            return _SIGNATURES[cls]
        except KeyError:
            pass
    try:
        found: _Signature | None = _Signature(inspect.signature(module.forward))
    except (TypeError, ValueError):
        found = None
    if not own_forward:
        _SIGNATURES[type(module)] = found
    return found


def ordered_inputs(module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple:
    """The call's values in ``forward`` signature order, defaults applied, ``*args`` flattened.

    Falls back to ``(*args, *kwargs.values())`` when the signature is unknown or does not bind.
    """
    signature = _signature(module)
    if signature is not None:
        try:
            return signature.order(args, kwargs)
        except TypeError:
            pass
    return (*args, *kwargs.values())


# --------------------------------------------------------------------------------------------------
# evaluation


_FORMULAS: tuple[Any, Any, Any, Any] | None = None


def _not_applicable() -> type:
    from torchscan_lsp.engine.formulas._common import NotApplicableWarning

    return NotApplicableWarning


def _formulas() -> tuple[Any, Any, Any, Any]:
    global _FORMULAS
    if _FORMULAS is None:
        from torchscan_lsp.engine.formulas import module_dmas, module_flops, module_macs, module_rf

        _FORMULAS = (module_flops, module_macs, module_dmas, module_rf)
    return _FORMULAS


class _RecordWarnings:
    """``warnings.catch_warnings(record=True)`` with ``simplefilter("always")``, made cheap.

    The standard pair copies and searches the whole filter list on every use, which costs more
    than the formulas themselves; this installs a one-entry ``always`` filter list instead (the same
    effect: every warning is recorded, none is shown) and restores everything on exit.
    """

    __slots__ = ("log", "_filters", "_showwarning", "_showwarnmsg_impl")

    def __enter__(self) -> list[warnings.WarningMessage]:
        module = warnings
        self._filters = module.filters
        self._showwarning = module.showwarning
        self._showwarnmsg_impl = module._showwarnmsg_impl  # type: ignore[attr-defined]
        module.filters = [("always", None, Warning, None, 0)]  # type: ignore[list-item]
        module._filters_mutated()  # type: ignore[attr-defined]
        self.log: list[warnings.WarningMessage] = []
        module._showwarnmsg_impl = self.log.append  # type: ignore[attr-defined]
        module.showwarning = module._showwarning_orig  # type: ignore[attr-defined]
        return self.log

    def __exit__(self, *exc: Any) -> None:
        module = warnings
        module.filters = self._filters
        module._filters_mutated()  # type: ignore[attr-defined]
        module.showwarning = self._showwarning
        module._showwarnmsg_impl = self._showwarnmsg_impl  # type: ignore[attr-defined]


def _plain(value: Any) -> Any:
    """A JSON-safe Python number (formulas may return numpy or torch scalars)."""
    kind = type(value)
    if kind is int or kind is float:
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return value


def _complete(value: Any, unit: str) -> dict[str, Any]:
    """``metric_result(status="complete", ...)`` for a value known not to be None, without checks."""
    return {
        "status": "complete",
        "value": value,
        "known_value": value,
        "unit": unit,
        "scope": "module_call",
        "method": METHOD_MODULE_FORMULA,
    }


def _unavailable(unit: str) -> dict[str, Any]:
    return metric_result(status="unavailable", unit=unit, scope="module_call", method=METHOD_MODULE_FORMULA)


def _mark_unavailable(record: dict, diagnostics: list[Diagnostic], code: str, message: str, path: str) -> None:
    metrics = record["metrics"]
    for name, unit in FORMULA_METRICS:
        metrics[name] = _unavailable(unit)
        diagnostics.append(make_diagnostic(code, name, message, path=path))


def _irregular(x: Any, y: Any) -> torch.Tensor | None:
    """The first of ``x``, ``y`` without a regular shape (a dense ``torch.Tensor`` always has one)."""
    for tensor in (x, y):
        if type(tensor) is torch.Tensor and not tensor.is_nested:
            continue
        if isinstance(tensor, torch.Tensor) and regular_shape(tensor) is None:
            return tensor
    return None


def evaluate_call(
    module: nn.Module,
    info: ModuleInfo,
    args: tuple,
    kwargs: dict[str, Any],
    output: Any,
    record: dict[str, Any],
    diagnostics: list[Diagnostic],
    memo: FormulaMemo | None = None,
) -> None:
    """Add module-formula metrics to ``record`` and their diagnostics to ``diagnostics``.

    With ``memo``, a call the formulas cannot tell from one evaluated before in the pass gets that
    call's metrics (:mod:`.formula_memo`), and a quiet, complete result is kept for the next.
    """
    path = info.path
    if info.script:
        _mark_unavailable(
            record,
            diagnostics,
            "unsupported_script_module",
            f"ScriptModule calls cannot be hooked or measured by module formulas "
            f"({getattr(module, 'original_name', info.type)}); its operators are still counted in "
            "operator_flops.",
            path,
        )
        return
    inputs = ordered_inputs(module, args, kwargs)
    x = first_tensor(inputs)
    y = first_tensor(output)
    if x is None or y is None:
        _mark_unavailable(record, diagnostics, "missing_metric_tensor", _MISSING_TENSOR, path)
        return
    irregular = _irregular(x, y)
    if irregular is not None:
        side = "input" if irregular is x else "output"
        _mark_unavailable(record, diagnostics, "irregular_tensor", _IRREGULAR.format(side, irregular_reason(irregular)), path)
        return
    key = memo.key(module, inputs, output) if memo is not None else None
    if key is not None:
        found = memo.get(key)  # type: ignore[union-attr]
        if found is not None:
            record["metrics"].update(found)
            return
    quiet = len(diagnostics)
    flops_fn, macs_fn, dmas_fn, rf_fn = _formulas()
    # attention and recurrent formulas read the whole output (attention weights, hidden states)
    out = output if isinstance(module, _WHOLE_OUTPUT) else y
    metrics = record["metrics"]
    with _RecordWarnings() as caught:
        for (name, unit), fn, fn_args in (
            (FORMULA_METRICS[0], flops_fn, (module, inputs, out)),
            (FORMULA_METRICS[1], macs_fn, (module, x, y)),
            (FORMULA_METRICS[2], dmas_fn, (module, x, y)),
        ):
            start = len(caught)
            try:
                value = _plain(fn(*fn_args) if fn is flops_fn else fn(*fn_args, inputs=inputs))
                if value is None:
                    raise TypeError(f"the {name} formula returned None")
            except Exception as exc:  # noqa: BLE001 - a formula error becomes a diagnostic
                metrics[name] = _unavailable(unit)
                diagnostics.append(
                    make_diagnostic("module_metric_error", name, f"{type(exc).__name__}: {exc}", path=path)
                )
                continue
            texts = [str(w.message) for w in caught[start:]]
            if not texts:
                metrics[name] = _complete(value, unit)
                continue
            metrics[name] = metric_result(
                status="partial", known_value=value, unit=unit, scope="module_call", method=METHOD_MODULE_FORMULA
            )
            unsupported = next((text for text in texts if _UNSUPPORTED in text), None)
            if unsupported is not None:
                diagnostics.append(make_diagnostic("unsupported_module_metric", name, unsupported, path=path))
            else:
                diagnostics.append(make_diagnostic("module_metric_warning", name, "; ".join(texts), path=path))

        start = len(caught)
        try:
            rf = tuple(rf_fn(module, x, y))
            if len(rf) != 3 or any(value is None for value in rf):
                raise ValueError(f"module_rf returned {rf!r} instead of (field, stride, padding)")
        except Exception as exc:  # noqa: BLE001
            for name in RF_METRICS:
                metrics[name] = _unavailable("elements")
            diagnostics.append(
                make_diagnostic("module_metric_error", "receptive_field", f"{type(exc).__name__}: {exc}", path=path)
            )
            return
        texts = [str(w.message) for w in caught[start:]]
        not_applicable = all(issubclass(w.category, _not_applicable()) for w in caught[start:])
    if texts:
        for name in RF_METRICS:
            metrics[name] = _unavailable("elements")
        code = DIAGNOSTIC_NOT_APPLICABLE if not_applicable else "unsupported_module_metric"
        diagnostics.append(make_diagnostic(code, "receptive_field", "; ".join(texts), path=path))
        return
    for name, value in zip(RF_METRICS, rf):
        metrics[name] = _complete(_plain(value), "elements")
    if key is not None and len(diagnostics) == quiet:
        memo.put(key, metrics, _EVALUATED)  # type: ignore[union-attr]


def call_failed(info: ModuleInfo, record: dict[str, Any], exc: BaseException | None, diagnostics: list[Diagnostic]) -> None:
    """A metric-leaf call raised (and a parent caught it): its module metrics are unavailable."""
    reason = f"{type(exc).__name__}" if exc is not None else "an exception"
    _mark_unavailable(
        record,
        diagnostics,
        "module_call_failed",
        f"The module call raised {reason} before returning; its work is not counted.",
        info.path,
    )


def output_unseen(info: ModuleInfo, record: dict[str, Any], diagnostics: list[Diagnostic]) -> None:
    """A metric-leaf call made through ``module.forward(...)`` whose output could not be seen
    (another trace function was installed): its module metrics are unavailable."""
    _mark_unavailable(
        record,
        diagnostics,
        "direct_forward_output",
        "The module was called through .forward while another trace function (a debugger, a coverage tool) "
        "was installed, so its output was not seen and its module formulas were not evaluated; its operators "
        "are counted.",
        info.path,
    )

