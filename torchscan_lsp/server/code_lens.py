"""Code lenses on each target line: a one-line summary, then "Re-analyse", "Show report",
"Measure latency", "Measure memory", "Measure training step", "Plan training" ("Planning…" while a
plan runs) and, once the target has a baseline, "Compare with HEAD: +112 params · +50 % FLOPs" (the
baseline's name and what changed), which opens the full diff. Command names and arguments are those
of docs/server.md. A target of an untrusted workspace gets the summary alone: the other lenses would
run its code."""

from __future__ import annotations

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.server import labels
from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.comparison_card import summary_text
from torchscan_lsp.server.messages import (COMPARE_REPORT, MEASURE_LATENCY, MEASURE_MEMORY, MEASURE_TRAINING,
                                           PLAN_TRAINING, REANALYSE,
                                           SHOW_REPORT)
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.headline import DEFAULT_HEADLINE
from torchscan_lsp.session.measurements import model_latency, model_memory
from torchscan_lsp.session.state import TargetState


def summary_title(state: TargetState, headline: str = DEFAULT_HEADLINE) -> str:
    """The summary lens text: totals (MACs and FLOPs of the ``headline`` method), or what the
    target is waiting for or why it failed."""
    if state.untrusted:
        return "torchscan: not analysed (untrusted workspace)"
    if state.view is None:
        if state.running:
            return "torchscan: analysing…"
        if state.error is not None:
            return f"torchscan: failed ({(state.error.get('error') or {}).get('kind', 'crash')})"
        return "torchscan: not analysed yet"
    title = labels.totals_label(state.view.totals, headline)
    latency = model_latency(state)
    if latency is not None:
        title += fmt.SEPARATOR + fmt.metric_text(latency, "seconds")
    memory = model_memory(state)
    if memory is not None:
        title += fmt.SEPARATOR + f"peak memory +{fmt.byte_size(memory['delta_bytes'])}"
    if state.running:
        return title + " (updating…)"
    if state.error is not None or state.stale:
        return title + " (stale)"
    return title


def build_code_lenses(uri: str, lines: Lines, states: list[TargetState],
                      headline: str = DEFAULT_HEADLINE) -> list[types.CodeLens]:
    """Code lenses for the targets defined in the document at ``uri`` (``states``: its own)."""
    lenses = []
    for state in states:
        range_ = lines.statement(state.line)
        args = [uri, state.key.name]
        summary_command = SHOW_REPORT if state.view is not None else REANALYSE
        actions = () if state.untrusted else (("Re-analyse", REANALYSE), ("Show report", SHOW_REPORT),
                                              ("Measure latency", MEASURE_LATENCY), ("Measure memory", MEASURE_MEMORY),
                                              ("Measure training step", MEASURE_TRAINING),
                                              ("Planning…" if state.planning else "Plan training", PLAN_TRAINING))
        comparison = state.comparison
        if actions and comparison is not None and comparison.ready and not (state.stale or state.error is not None):
            actions += ((f"Compare with {comparison.label}: {summary_text(comparison, headline)}", COMPARE_REPORT),)
        for title, command in ((summary_title(state, headline), summary_command), *actions):
            lenses.append(types.CodeLens(range=range_, command=types.Command(title=title, command=command, arguments=args)))
    return lenses


def register(server: LanguageServer) -> None:
    """Register ``textDocument/codeLens`` (answered from the store, on the event loop)."""

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: Editor, params: types.CodeLensParams) -> list[types.CodeLens]:
        document = ls.document(params.text_document.uri)
        if document is None:
            return []
        states = ls.session.store.states_in(document.root, document.rel)
        return build_code_lenses(params.text_document.uri, ls.lines(document), states, ls.session.settings.headline)
