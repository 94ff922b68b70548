"""Training FLOPs: the operator FLOPs of a step's forward and backward, per module and in total.

One :class:`~torchscan_lsp.engine.recording.operator_counter.OperatorCounter` -- the forward's counter, with the same
formula library (PyTorch's ``FlopCounterMode`` formulas, this project's ``operator_formulas``, the
backward families included) and the same ignore list -- counts the whole step. Its module tracker
(``torch.utils.module_tracker.ModuleTracker``) attributes the operators of a module's backward to
that module, so a module's backward FLOPs are the gradient work of its own operators: for a
``Linear`` whose input requires grad, ``2 x`` its forward (the gradients of the input and of the
weight are one matrix product each); for the first layer of a model, whose input is data,
``1 x`` (no input gradient is computed).

Phases: the count is taken and reset when the backward starts, and paused for the optimizer step,
whose update is element-wise work outside the usual definition of training FLOPs (forward +
backward; e.g. ``6 x parameters x tokens`` for a dense transformer). The loss belongs to the
forward phase (and is attributed to no module).

Statuses: a phase's total is ``complete`` when every operator it dispatched was counted or ignored,
else ``partial`` (a lower bound) with one ``uncounted_operator`` diagnostic per operator; a module's
count is ``partial`` when an uncounted operator ran while that module (or its backward) was active.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchscan_lsp.contract.metrics import aggregate
from torchscan_lsp.engine.recording.formula_provenance import flop_method
from torchscan_lsp.engine.recording.operator_counter import OperatorCounter
from torchscan_lsp.engine.recording.skipped_operators import SKIPPED_OPERATORS
from torchscan_lsp.engine.recording.operator_table import IGNORED_OPERATORS, validate_mapping
from torchscan_lsp.engine.recording.operators import counter_report
from torchscan_lsp.engine.report import MetricResult, metric_result

__all__ = ["TrainingFlopCounter", "FLOP_PHASES"]

_HigherOrderOperator = getattr(torch._ops, "HigherOrderOperator", ())

#: The phases whose operators are counted.
FLOP_PHASES = ("forward", "backward")


def _metric(known: int, complete: bool, method: str) -> MetricResult:
    status = "complete" if complete else "partial"
    return metric_result(status=status, value=known if complete else None, known_value=known, unit="FLOPs",
                         scope="workload", method=method)


class _UncountedLocator(TorchDispatchMode):
    """Notes, per active module label, the operators that no formula counts.

    Entered *below* the operator counter, so it sees what the counter executes: the operators left
    after its CompositeImplicit decompositions, as the counter records them (``measure_flops`` has
    no per-label record of what it could not count)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch._disable_dynamo wrapper around every dispatch (the step runs eagerly)

    def __init__(self, counter: OperatorCounter) -> None:
        super().__init__()
        self.counter = counter
        self.names: dict[int, str | None] = {}
        self.by_label: dict[str, set[str]] = defaultdict(set)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        counter = self.counter
        if not counter.paused and func not in SKIPPED_OPERATORS and not isinstance(func, _HigherOrderOperator):
            try:
                name = self.names[id(func)]
            except KeyError:
                packet = func._overloadpacket
                uncounted = packet not in counter.registry and str(packet) not in IGNORED_OPERATORS
                name = self.names[id(func)] = str(packet) if uncounted else None
            if name is not None:
                for label in counter.tracker.parents:
                    self.by_label[label].add(name)
        return func(*args, **(kwargs or {}))


class TrainingFlopCounter:
    """Counts one training step's operator FLOPs by phase; use :meth:`enter_phase` as the step's
    ``on_phase`` callback, inside ``with counter:``.

    Args:
        root: the model, whose class name prefixes every module label (``"Net.fc"`` -> path ``"fc"``).
        custom_mapping: extra ``{packet: formula}`` formulas, as for ``measure_flops``.
    """

    def __init__(self, root: Any, custom_mapping: Any = None) -> None:
        self._root_label = type(root).__name__
        self._counter = OperatorCounter(validate_mapping(custom_mapping))
        self._locator = _UncountedLocator(self._counter)
        self._phase: str | None = None
        self.reports: dict[str, dict[str, Any]] = {}
        self.uncounted_by_label: dict[str, dict[str, set[str]]] = {}

    def __enter__(self) -> TrainingFlopCounter:
        self._locator.__enter__()
        try:
            self._counter.__enter__()
        except BaseException:
            self._locator.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._close_phase()
        finally:
            try:
                self._counter.__exit__(*exc)
            finally:
                self._locator.__exit__(*exc)

    def _close_phase(self) -> None:
        if self._phase in FLOP_PHASES and self._phase not in self.reports:
            counter = self._counter
            self.reports[self._phase] = counter_report(counter)
            self.uncounted_by_label[self._phase] = dict(self._locator.by_label)
            # the next phase counts from zero
            counter.restore(({}, {}, None))
            counter.calls.clear()
            counter.failures.clear()
            self._locator.by_label = defaultdict(set)

    def enter_phase(self, name: str) -> None:
        """Close the running phase's count and start counting ``name`` (not counted unless it is one
        of :data:`FLOP_PHASES`)."""
        self._close_phase()
        self._phase = name
        if name in FLOP_PHASES:
            self._counter.resume()
        else:
            self._counter.pause()

    def _path(self, label: str) -> str:
        if label == self._root_label:
            return ""
        prefix = self._root_label + "."
        return label[len(prefix):] if label.startswith(prefix) else label

    def report(self) -> dict[str, Any]:
        """The training FLOPs: ``totals`` (``forward_flops``, ``backward_flops``, ``training_flops``),
        ``by_module`` (path -> the same three metrics; ``training_flops`` is their sum by the contract's
        ``aggregate``: ``complete`` only when both phases are), ``phases`` (each phase's ``FlopReport``:
        ``by_operator``, ``ignored_operators``, ``diagnostics``) and ``diagnostics`` (each phase's
        ``uncounted_operator`` diagnostics, their ``metric`` naming the phase)."""
        totals: dict[str, MetricResult] = {}
        diagnostics: list[dict[str, Any]] = []
        modules: dict[str, dict[str, MetricResult]] = defaultdict(dict)
        method = flop_method(self._counter.mapping)
        for phase in FLOP_PHASES:
            phase_report = self.reports.get(phase)
            key = f"{phase}_flops"
            if phase_report is None:
                totals[key] = metric_result(status="unavailable", unit="FLOPs", scope="workload", method=method)
                continue
            totals[key] = phase_report["total"]
            diagnostics.extend({**diag, "metric": key} for diag in phase_report["diagnostics"])
            uncounted = self.uncounted_by_label.get(phase, {})
            for label, flops in phase_report["by_module"].items():
                modules[self._path(label)][key] = _metric(int(flops), not uncounted.get(label), method)
            for label in uncounted:
                if label != "Global":
                    modules[self._path(label)].setdefault(key, _metric(0, False, method))
        totals["training_flops"] = aggregate((totals["forward_flops"], totals["backward_flops"]))
        by_module: dict[str, dict[str, MetricResult]] = {}
        for path in sorted(modules):
            record = modules[path]
            for key in ("forward_flops", "backward_flops"):
                # a counted phase that ran no operator under this module: 0, complete
                record.setdefault(key, _metric(0, True, method) if totals[key]["status"] != "unavailable" else totals[key])
            record["training_flops"] = aggregate((record["forward_flops"], record["backward_flops"]))
            by_module[path] = {key: record[key] for key in ("forward_flops", "backward_flops", "training_flops")}
        return {"totals": totals, "by_module": by_module, "phases": dict(self.reports), "diagnostics": diagnostics}
