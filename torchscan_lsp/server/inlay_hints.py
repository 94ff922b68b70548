"""Inlay hints: totals on target lines, cost on module definition lines, shapes on call lines.

Built from the target states alone (no I/O), so the request handler answers at once from what the
last analyses left. Lines a result names are mapped onto the current text, so hints follow unsaved
edits and leave lines that changed. Labels stay short: the detail goes in the tooltip, and a stale
hint ends with :data:`STALE_MARK`.
"""

from __future__ import annotations

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.server import labels
from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.messages import NEVER_CALLED, NEVER_CALLED_NOTE, STALE_MARK, STALE_NOTE
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.deltas import Change, Comparison
from torchscan_lsp.session.measurements import layer_latency
from torchscan_lsp.session.headline import DEFAULT_HEADLINE, method, other
from torchscan_lsp.session.results import ResultView, outermost
from torchscan_lsp.session.settings import InlayHintSettings
from torchscan_lsp.session.state import TargetState


def _tooltip(state: TargetState, text: str) -> types.MarkupContent:
    parts = [STALE_NOTE] if state.stale or state.error is not None else []
    parts.append(text)
    parts.append(f"_target `{state.key.name}` in `{state.key.file}`_")
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts))


def _hint(lines: Lines, line: int, label: str, kind: types.InlayHintKind | None, tooltip: types.MarkupContent,
          stale: bool) -> types.InlayHint:
    return types.InlayHint(position=lines.end(line), label=label + (STALE_MARK if stale else ""), kind=kind,
                           tooltip=tooltip, padding_left=True)


def methods_lines(metrics: dict, headline: str) -> str:
    """Markdown lines of both methods' FLOPs and MACs in ``metrics`` (totals or a module summary),
    the headline's first, each with its method: the detail behind a label."""
    rows = []
    for shown in (method(headline), other(headline)):
        values = fmt.SEPARATOR.join(fmt.metric_text(metrics.get(name), unit) for name, unit in
                                    ((shown.flops, "FLOPs"), (shown.macs, "MACs")))
        rows.append(f"- {shown.title}{' (shown)' if shown is method(headline) else ''}: {values}")
    return "\n".join(rows)


def totals_tooltip(view: ResultView, headline: str = DEFAULT_HEADLINE, comparison: Comparison | None = None) -> str:
    """Markdown lines of a report's totals: parameters, then both methods' counts, then what
    changed since the baseline."""
    text = f"- parameters: {fmt.metric_text(view.totals.get('parameters'), 'params')}\n" + methods_lines(dict(view.totals), headline)
    if comparison is not None and comparison.ready:
        shown = method(headline)
        text += "\n\n" + change_lines(comparison, [("parameters", comparison.total("parameters"), "params"),
                                                    ("FLOPs", comparison.total(shown.flops), "FLOPs")])
    return text


def change_lines(comparison: Comparison, changes: list[tuple[str, Change, str]]) -> str:
    """``"Since HEAD (1a2b3c4): parameters 224 → 336 (+112); FLOPs 389 kFLOPs → 583 kFLOPs (+50 %)"``,
    or that nothing changed; a difference between lower bounds says so."""
    parts = []
    for name, change, unit in changes:
        if not change.changed:
            continue
        old, new = (fmt.number(v, "" if unit == "params" else unit) if v is not None else "none"
                    for v in (change.before, change.after))
        shown = labels.change_text(change, unit != "params")
        parts.append(f"{name} {old} → {new}" + (f" ({shown})" if shown else "")
                     + (" (both lower bounds: the counted parts only)" if change.known else ""))
    since = comparison.since[0].upper() + comparison.since[1:]
    return f"{since}: " + ("; ".join(parts) if parts else "no change")


def module_label(view: ResultView, paths: list[str], headline: str = DEFAULT_HEADLINE,
                 comparison: Comparison | None = None) -> tuple[str, str]:
    """Label and tooltip of a definition line that built the modules at ``paths`` (each the
    outermost of what the line built: :meth:`ResultView.line_modules`).

    The label is ``"<params> · <FLOPs>"`` summed over every instance, the FLOPs of the ``headline``
    method, prefixed ``"×n · "`` when the line built ``n`` > 1 instances of one type (a loop or
    comprehension), or ``"n modules · "`` when they differ (``a, b = A(), B()``). With a
    ``comparison`` that has a baseline, a number that changed carries its change (``"336 params
    (+112) · 583 kFLOPs (+50 %)"``), and modules the baseline lacks end with ``(new)``. Modules
    the forward pass never called say so in place of their FLOPs (``"900 params · never called"``).
    """
    summary = view.module_summary(paths)
    flops = method(headline).flops
    params, work = labels.params_text(summary), fmt.metric_text(summary[flops], "FLOPs")
    if not summary["ran"]:  # built, never called: parameters of the model, no work in this pass
        work = NEVER_CALLED
    change = comparison.line_change(paths, flops) if comparison is not None and comparison.ready else None
    if change is not None:
        params, work = labels.with_change(params, change[0], False), labels.with_change(work, change[1], True)
    label = fmt.SEPARATOR.join([params, work])
    if comparison is not None and comparison.ready and change is None:
        label += " (new)"
    types_ = view.types_of(paths)
    if len(paths) > 1:
        count = f"×{len(paths)}" if len(types_) == 1 else f"{len(paths)} modules"
        label = f"{count}{fmt.SEPARATOR}{label}"
    shown = ", ".join(f"{fmt.layer_name(p, '`')}" for p in paths[:8]) + (" …" if len(paths) > 8 else "")
    shared = (f"; {summary['shared_elements']:,} more shared with {', '.join(f'`{p}`' for p in summary['shared_with'])}"
              if summary.get("shared_elements") else "")
    tooltip = (f"{' / '.join(types_)} built here: {shown}\n\n"
               f"- parameters: {summary['parameters']:,} ({summary['trainable']:,} trainable){shared}\n"
               + (methods_lines(summary, headline) if summary["ran"] else "\n" + NEVER_CALLED_NOTE))
    if change is not None:
        tooltip += "\n\n" + change_lines(comparison, [("parameters", change[0], "params"), ("FLOPs", change[1], "FLOPs")])
    elif comparison is not None and comparison.ready:
        tooltip += f"\n\nNew {comparison.since}."
    return label, tooltip


def shape_label(view: ResultView, calls: list[tuple[str, int]]) -> tuple[str, str]:
    """Label and tooltip of a call line: the output of the last outermost module call made from it."""
    last = view.by_key[outermost(calls)[-1]]
    label = labels.shape_label(last.get("output"))
    shown = "\n".join(f"- {fmt.layer_name(p, '`')} call {i}: {labels.shape(view.by_key[(p, i)].get('output'))}" for p, i in calls[:12])
    return label, f"Module calls on this line ({len(calls)}), outputs:\n{shown}"


def output_label(info) -> tuple[str, str]:
    """Label and tooltip of a line's result in its first run: the output of the last operator it
    dispatched or module call it made (``→ (1, 2, 8, 8)``), or the shapes of the names it assigned
    (``xq (1, 32, 64) · xk (1, 32, 32)``), noting runs whose shapes vary (:func:`labels.line_label`)."""
    return labels.line_label(info.output), labels.result_text(info.output)


def parameters_label(entries: list[dict]) -> tuple[str, str]:
    """Label and tooltip of a line that assigned parameters itself (``self.cls_token =
    nn.Parameter(...)``): their elements summed over every instance, ``"×2 · 16 params"`` when
    the line ran for several."""
    label = fmt.params(sum(entry["numel"] for entry in entries))
    if len(entries) > 1:
        label = f"×{len(entries)}{fmt.SEPARATOR}{label}"
    return label, "Parameters assigned here:\n" + "\n".join(f"- {labels.parameter_text(e)}" for e in entries[:12])


def build_inlay_hints(rel: str, lines: Lines, states: list[TargetState], settings: InlayHintSettings,
                      first_line: int = 1, last_line: int | None = None, path: str | None = None,
                      headline: str = DEFAULT_HEADLINE) -> list[types.InlayHint]:
    """Inlay hints for workspace-relative file ``rel`` (absolute ``path``) between 1-based lines (inclusive).

    ``states`` are ordered by priority (:meth:`Store.states_for_file`): when several targets
    annotate the same line with the same kind of hint, the first one's hint is shown. A state whose
    model ran through the file as a library file names it by ``path`` (:meth:`TargetState.name_for`).
    ``headline`` is the method whose MACs and FLOPs the labels show (``torchscan.headline``).
    """
    last_line = last_line or len(lines.lines)
    taken: set[tuple[int, str]] = set()
    hints: list[types.InlayHint] = []
    # a target's own line shows its totals: another target's sums of the same modules there (a
    # class that is a target, built by another target too) would be a second number without a name
    totals = {state.line for state in states if settings.totals and state.view is not None
              and state.key.file == state.name_for(rel, path)}

    def add(line: int, kind_name: str, make) -> None:
        if kind_name == "module" and line in totals:
            return
        if first_line <= line <= last_line and (line, kind_name) not in taken and lines.text(line).strip():
            taken.add((line, kind_name))
            hints.append(make())

    for state in states:
        view = state.view
        if view is None:
            continue
        stale = state.stale or state.error is not None
        name = state.name_for(rel, path)
        # deltas only on a fresh result: a stale one is compared with what was analysed, not the text
        comparison = state.comparison if not stale else None
        if settings.totals and state.key.file == name:
            add(state.line, "totals", lambda: _hint(lines, state.line, labels.totals_label(view.totals, headline, comparison),
                                                     None, _tooltip(state, totals_tooltip(view, headline, comparison)), stale))
        for line, info in sorted(state.lines_in(name, lines.lines).items()):
            # The line that built the model (``model = Whisper(dims)``, or a library model's
            # constructor) gets the root's hint; the target's own line has it as the totals already.
            own_line = name == state.key.file and line == state.line
            defined = view.line_modules(info.defined)
            if defined == [""] and own_line:
                defined = []
            if settings.modules and defined:
                label, tip = module_label(view, defined, headline, comparison)
                add(line, "module", lambda: _hint(lines, line, label, types.InlayHintKind.Type, _tooltip(state, tip), stale))
            if settings.modules and info.instances and not own_line:
                label, tip = module_label(view, info.instances, headline, comparison)
                add(line, "module", lambda: _hint(lines, line, label, types.InlayHintKind.Type, _tooltip(state, tip), stale))
            if settings.latency and defined and (measured := layer_latency(state, defined)) is not None:
                add(line, "latency", lambda: _hint(lines, line, fmt.metric_text(measured, "seconds"), None, _tooltip(
                    state, "Measured latency of these module calls, each replayed alone (torch.utils.benchmark)"), stale))
            if settings.modules and info.parameters and not defined:
                label, tip = parameters_label(info.parameters)
                add(line, "module", lambda: _hint(lines, line, label, types.InlayHintKind.Type, _tooltip(state, tip), stale))
            # the line's result in its first run; a line whose calls the map gives no result for
            # (a source map without it) shows its last call's output
            if settings.shapes and info.output is not None:
                label, tip = output_label(info)
                add(line, "shape", lambda: _hint(lines, line, label, types.InlayHintKind.Type, _tooltip(state, tip), stale))
            elif settings.shapes and info.called:
                label, tip = shape_label(view, info.called)
                add(line, "shape", lambda: _hint(lines, line, label, types.InlayHintKind.Type, _tooltip(state, tip), stale))
    return hints


def register(server: LanguageServer) -> None:
    """Register ``textDocument/inlayHint`` (answered from the store, on the event loop)."""

    # The hints of a document only change with its text, its states' results and the settings:
    # build them once per such version and answer repeated requests by filtering on the range.
    built: dict[str, tuple[tuple, list[types.InlayHint]]] = {}

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    def inlay_hint(ls: Editor, params: types.InlayHintParams) -> list[types.InlayHint]:
        document = ls.document(params.text_document.uri)
        if document is None:
            return []
        states = ls.states_for(document)
        settings = ls.session.settings
        version = (hash(document.text), settings.inlayHints, settings.headline,
                   tuple((s.view, s.error, s.stale, s.comparison) for s in states))  # views compare by identity
        cached = built.get(document.path)
        if cached is None or cached[0] != version:
            cached = built[document.path] = (version, build_inlay_hints(
                document.rel, ls.lines(document), states, settings.inlayHints, path=document.path,
                headline=settings.headline))
        first, last = params.range.start.line, params.range.end.line
        return [hint for hint in cached[1] if first <= hint.position.line <= last]
