"""Observers of the crawl's one recording pass.

A crawl runs the model's forward exactly once, under the engine's global module hooks
(:class:`~torchscan_lsp.engine.recording.recorder.CallRecorder`) and, in full mode, its counting dispatch mode
(:class:`~torchscan_lsp.engine.recording.operator_counter.OperatorCounter`). Anything else that needs to see
that pass — the worker's source attribution, per-layer latency's input capture, the engine's own
data-flow tracker — is a :class:`PassObserver` handed to ``crawl_module(..., observers=[...])``
(or to :func:`~torchscan_lsp.engine.crawler.record_pass`) instead of installing hooks or a dispatch
mode of its own: one pass, one leaf rule, one FLOP table, one layer numbering.

Rules every observer can rely on:

* Calls: ``call_started`` and ``call_ended`` are called exactly once for every call of a module of
  the analysed model (shared modules included; a ``ScriptModule``'s insides are invisible to
  hooks), in nesting order, on the thread that runs the forward (calls on other threads are not
  observed). ``call_ended`` is called even when the forward raised. A call made through
  ``module.forward(...)`` starts with ``forward_started`` instead (``call_started`` unless
  overridden), at the first event inside it, and ends at the first event after it.
* Operators (full mode only; structure mode dispatches through no counter): ``operator_ran`` is
  called once for every operator the counter counted, after it ran, with the engine's counts.
  It is not called for size and metadata queries, for higher-order operators themselves (the
  operators of their branches are reported), nor for the engine's own work (module formulas,
  token-dependency reads), during which the counter is paused.
* ``layer`` is an index into ``report["layers"]`` (the list being built), so an observer can key
  what it records by layer and join it to the report without counting calls itself.
* Observers are called in the order given, after the engine's own bookkeeping for the event. They
  must not raise (an exception propagates out of the forward) and should be cheap: they run inside
  the forward. A method left as the no-op default costs nothing: the recorder only calls methods
  that a subclass overrides, and a crawl without observers runs no observer code at all.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from torchscan_lsp.engine.recording.module_info import ModuleInfo

__all__ = ["PassObserver", "overriding", "forward_starts"]


class PassObserver:
    """Told of the events of the crawl's one recording pass; override what you need (no-op defaults).

    Called on the forward's thread, inside the forward: keep each call cheap.
    """

    def call_started(self, module: nn.Module, info: ModuleInfo, layer: int | None, args: tuple) -> None:
        """A call of ``module`` starts (from the global forward pre-hook, before ``forward`` runs).

        Args:
            module: the module being called.
            info: the engine's facts about it (path, type, leaf, recorded, label, ...).
            layer: the index into ``report["layers"]`` of the record this call opened, or ``None``
                when it opens none (a module below a metric leaf, e.g. inside an ``nn.Transformer``).
            args: the call's positional arguments (global pre-hooks are not given keyword ones).
        """

    def forward_started(self, module: nn.Module, info: ModuleInfo, layer: int | None, args: tuple,
                        frame: Any) -> None:
        """A call of ``module`` made through ``module.forward(...)`` was found running (no hook fired:
        :mod:`~torchscan_lsp.engine.recording.direct_calls`), at the first event inside it; it ends
        with :meth:`call_ended` like any call. By default this is :meth:`call_started`.

        Args:
            frame: the frame of its ``forward``, on the stack until the call ends (its ``f_back`` is
                the caller's frame).
            args: the call's positional arguments, read from that frame.
        """
        self.call_started(module, info, layer, args)

    def call_ended(
        self,
        module: nn.Module,
        info: ModuleInfo,
        layer: int | None,
        args: tuple,
        kwargs: dict[str, Any],
        output: Any,
        error: BaseException | None,
    ) -> None:
        """A call of ``module`` ended (from the global forward hook), after the engine recorded it.

        Args:
            layer: as in :meth:`call_started`; the record holds the call's input and output
                metadata and, in full mode, its module-formula metrics (its ``parameters``,
                ``buffers``, ``operator_flops`` and ``operator_macs`` are filled in when the pass ends).
            kwargs: the call's keyword arguments (``{}`` when the forward raised: PyTorch passes
                none to hooks then).
            output: what ``forward`` returned (``None`` when it raised).
            error: the exception when the forward raised, else ``None``.
        """

    def operator_ran(
        self,
        func: Any,
        args: tuple,
        kwargs: dict[str, Any],
        out: Any,
        flops: int | None,
        macs: int | None,
        layer: int | None,
    ) -> None:
        """An operator ran (full mode only).

        Args:
            func: the ``OpOverload`` counted (after CompositeImplicit decomposition, as
                ``FlopCounterMode`` counts), e.g. ``torch.ops.aten.addmm.default``.
            args, kwargs, out: its arguments and result (real tensors; do not modify them).
            flops: its FLOPs from the engine's formula table (``None``: no formula; an operator on
                the ignore list, a view or a copy, has none either).
            macs: its multiply-accumulates (matrix, convolution, attention and recurrent operators;
                0 for other counted operators; ``None`` when unknown).
            layer: the index of the innermost active layer record (``None`` outside every record).
        """


def overriding(observers: Any, method: str) -> tuple[Any, ...]:
    """The bound ``method`` of each observer whose class overrides :class:`PassObserver`'s no-op
    (objects that do not subclass it count as overriding when they have the method)."""
    default = getattr(PassObserver, method)
    found = []
    for observer in observers:
        bound = getattr(observer, method, None)
        if bound is None:
            continue
        if getattr(type(observer), method, None) is default:
            continue
        found.append(bound)
    return tuple(found)


def forward_starts(observers: Any) -> tuple[Any, ...]:
    """The bound ``forward_started`` of each observer that overrides it or ``call_started`` (a
    direct ``forward`` call starts for every observer that follows calls)."""
    found = []
    for observer in observers:
        if overriding((observer,), "forward_started"):
            found.append(observer.forward_started)
        elif overriding((observer,), "call_started"):
            start = observer.call_started
            found.append(lambda module, info, layer, args, frame, start=start: start(module, info, layer, args))
    return tuple(found)
