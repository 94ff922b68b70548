"""What an edit cost: a target's result against its baseline, for every front end.

A :class:`Comparison` holds the baseline's result (the same target analysed from the files at git
``HEAD``, another ref, or the previous analysis: :mod:`.baselines`), ``compare_reports``' diff of
the two reports (with its compatibility checks), or the one sentence that says why there is no
delta. From it come the numbers the editor shows:

* :func:`metric_change` — the change of one metric, with the status rules of the contract: between
  two complete counts an exact difference; when either side is a lower bound, the difference of
  the known parts (``known``), never shown as exact; when either is unavailable, none;
* :meth:`Comparison.line_change` — the change of the parameters and FLOPs a line's modules have
  (their subtree sums, :meth:`~.results.ResultView.module_summary`, on both sides), ``new`` when
  the baseline has none of them;
* :meth:`Comparison.layer_rows` — the per-layer table: outermost added and removed calls, innermost
  changed ones (a call whose children did not change), largest FLOP change first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from torchscan_lsp.contract.compare import ReportDiff, compare_reports
from torchscan_lsp.contract.metrics import STATUS_COMPLETE, STATUS_PARTIAL, metric_value
from torchscan_lsp.contract.report import ancestors
from torchscan_lsp.session.results import ResultView

__all__ = ["Change", "Comparison", "LayerRow", "compare_views", "metric_change"]


@dataclass(frozen=True)
class Change:
    """The change of one number between the baseline and now.

    Attributes:
        before: the baseline's number (a lower bound when ``known``), or ``None`` (no such number).
        after: the number now (likewise).
        known: a side is a lower bound: ``delta`` is the difference of the counted parts only, and
            says nothing exact about the whole.
    """

    before: float | None
    after: float | None
    known: bool = False

    @property
    def delta(self) -> float | None:
        """``after − before`` (of the known parts when :attr:`known`), ``None`` without both."""
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def changed(self) -> bool:
        """Whether the number changed (a missing side counts as a change only when the other exists)."""
        return self.delta != 0 if self.delta is not None else (self.before is None) != (self.after is None)


def metric_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> Change:
    """The :class:`Change` of a metric object: both complete, their values; either partial, their
    known values (``known``); either unavailable or missing, no number on that side."""
    statuses = {(m or {}).get("status") for m in (before, after)}
    known = STATUS_PARTIAL in statuses and statuses <= {STATUS_PARTIAL, STATUS_COMPLETE}
    return Change(_number(before), _number(after), known)


def _number(metric: Mapping[str, Any] | None) -> float | None:
    value = metric_value(metric)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class LayerRow:
    """One row of the per-layer table.

    Attributes:
        path: the module path (``""``: the root module).
        call_index: which call of it.
        kind: ``added``, ``removed`` or ``changed``.
        type: the module's type name.
        params: the parameters of the module's subtree, before and after.
        flops: the headline method's FLOPs of the call, before and after.
        shapes: the call's output metadata before and after (``None`` on a side without the call).
        folded: calls below an added or removed one that the row stands for.
    """

    path: str
    call_index: int
    kind: str
    type: str
    params: Change
    flops: Change
    shapes: tuple[Any, Any]
    folded: int = 0


@dataclass(eq=False)  # compared by identity: a new comparison is a new one (the hints' cache)
class Comparison:
    """A target's result against its baseline.

    Attributes:
        label: the baseline as the editor names it (``HEAD``, ``main``, ``the last analysis``).
        commit: the baseline's commit, abbreviated (``None`` for the previous analysis).
        baseline: the baseline's result, or ``None`` (see ``note``).
        current: the result compared with it.
        diff: ``compare_reports(baseline, current)``, or ``None`` when it refused (``note``) or
            there is no baseline.
        note: why there is no delta, one sentence for the hover (``"build is new since HEAD"``), or
            ``None``.
        pending: the baseline is being analysed.
        unknown_ref: there is no baseline because the repository has no commit that ``label``
            names (a misspelt ``compare_with``): a ``max_increase`` gate on it fails, not passes.

    Raises nothing: a pair of reports ``compare_reports`` refuses is a comparison without ``diff``
    whose ``note`` says why (:func:`compare_views`).
    """

    label: str
    commit: str | None = None
    baseline: ResultView | None = None
    current: ResultView | None = None
    diff: ReportDiff | None = None
    note: str | None = None
    pending: bool = False
    unknown_ref: bool = False
    _rows: dict[str, list[LayerRow]] = field(default_factory=dict, repr=False)

    @property
    def since(self) -> str:
        """``"since HEAD (1a2b3c4)"``: how hovers and messages name the baseline."""
        return f"since {self.label}" + (f" ({self.commit})" if self.commit else "")

    @property
    def ready(self) -> bool:
        """Whether there are deltas to show (a baseline, and a diff of the two reports)."""
        return self.diff is not None and self.baseline is not None and self.current is not None

    def total(self, name: str) -> Change:
        """The change of total ``name`` (``parameters``, ``operator_flops``...)."""
        if not self.ready:
            return Change(None, None)
        entry = self.diff["totals"].get(name) or {}
        return metric_change(entry.get("before"), entry.get("after"))

    def has_paths(self, paths: list[str]) -> bool:
        """Whether the baseline has any of the modules at ``paths``."""
        return self.baseline is not None and any(p in self.baseline.known_paths for p in paths)

    def line_change(self, paths: list[str], flops: str) -> tuple[Change, Change] | None:
        """The change of the parameters and of the FLOPs (metric ``flops``) of the modules at
        ``paths``, summed over their subtrees on both sides (of the paths the baseline has:
        a loop that builds one more block adds that block); ``None`` when the baseline has none
        of them (a line new since the baseline) or there is no baseline."""
        if not self.ready or not self.has_paths(paths):
            return None
        now = self.current.module_summary(paths)
        then = self.baseline.module_summary(self._baseline_paths(paths))
        return Change(then["parameters"], now["parameters"]), metric_change(then[flops], now[flops])

    def warm(self, file: str) -> None:
        """Compute now the summaries that the hints of ``file``'s lines compare (:meth:`line_change`
        of each of the current result's :meth:`~.results.ResultView.hint_paths`) on both sides, so
        that answering them is a look-up: the baseline's are computed on first use otherwise, and
        each costs time in proportion to its report's layers. Call it off the event loop."""
        if not self.ready:
            return
        for paths in self.current.hint_paths(file):
            self.current.module_summary(paths)
            if self.has_paths(paths):
                self.baseline.module_summary(self._baseline_paths(paths))

    def _baseline_paths(self, paths: list[str]) -> list[str]:
        """Those of ``paths`` the baseline has (a loop that builds one more block adds that block)."""
        assert self.baseline is not None
        return [p for p in paths if p in self.baseline.known_paths]

    def unchanged(self, flops: str, macs: str) -> bool:
        """Whether no number the editor shows changed: parameters, ``flops`` and ``macs`` totals,
        and no call was added or removed."""
        if not self.ready:
            return True
        layers = self.diff["layers"]
        return not (layers["added"] or layers["removed"]) and not any(
            self.total(name).changed for name in ("parameters", flops, macs))

    def layer_rows(self, flops: str) -> list[LayerRow]:
        """The per-layer table for metric ``flops`` (see the module's docstring)."""
        if not self.ready:
            return []
        if flops not in self._rows:
            self._rows[flops] = _rows(self, flops)
        return self._rows[flops]


def _subtree_params(view: ResultView, path: str) -> int:
    return int(view.module_summary([path])["parameters"])


def _rows(comparison: Comparison, flops: str) -> list[LayerRow]:
    before, after, diff = comparison.baseline, comparison.current, comparison.diff
    assert before is not None and after is not None and diff is not None
    rows: list[LayerRow] = []
    for kind, view in (("added", after), ("removed", before)):
        entries = diff["layers"][kind]
        paths = {entry["path"] for entry in entries}
        for entry in entries:
            if any(above in paths for above in ancestors(entry["path"])):
                continue  # folded into its outermost added (removed) call
            layer = view.by_key[(entry["path"], entry["call_index"])]
            params = _subtree_params(view, entry["path"])
            count = _number((entry["metrics"] or {}).get(flops))
            folded = sum(1 for other in paths if other.startswith(entry["path"] + ".") or (entry["path"] == "" and other))
            rows.append(LayerRow(
                entry["path"], entry["call_index"], kind, str(layer.get("type", "")),
                Change(None, params) if kind == "added" else Change(params, None),
                Change(None, count) if kind == "added" else Change(count, None),
                (None, layer.get("output")) if kind == "added" else (layer.get("output"), None), folded))
    changed = {(entry["path"], entry["call_index"]): entry for entry in diff["layers"]["changed"]}
    changed_paths = {path for path, _ in changed}
    for key, entry in changed.items():
        path = key[0]
        if path == "" or any(other.startswith(path + ".") for other in changed_paths if other != path):
            continue  # the root is the totals; a container stands for its changed children
        metrics = entry["metrics"]
        old, new = before.by_key.get(key, {}), after.by_key.get(key, {})
        work = (metric_change(metrics[flops]["before"], metrics[flops]["after"]) if flops in metrics
                else metric_change((old.get("metrics") or {}).get(flops), (new.get("metrics") or {}).get(flops)))
        rows.append(LayerRow(path, key[1], "changed", str(new.get("type", "")),
                             Change(_subtree_params(before, path), _subtree_params(after, path)), work,
                             (old.get("output"), new.get("output"))))
    return sorted(rows, key=lambda row: (-abs(_size(row.flops)), row.path, row.call_index))


def _size(change: Change) -> float:
    if change.delta is not None:
        return change.delta
    return change.after if change.after is not None else (change.before or 0)


def compare_views(baseline: ResultView, current: ResultView, label: str, commit: str | None = None) -> Comparison:
    """The :class:`Comparison` of ``current`` with ``baseline``; a pair ``compare_reports`` refuses
    (another schema version, a metric measured another way, as a structure-mode report against a
    full one) has no delta and says why."""
    try:
        diff = compare_reports(dict(baseline.report), dict(current.report))
    except (TypeError, ValueError) as error:
        return Comparison(label, commit, baseline, current, None, f"the two reports do not compare: {error}")
    return Comparison(label, commit, baseline, current, diff)
