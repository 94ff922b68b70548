"""Workspace commands (docs/server.md): ``torchscan.reanalyze``, ``torchscan.showReport``,
``torchscan.measureLatency``, ``torchscan.measureMemory``, ``torchscan.measureTraining``,
``torchscan.planTraining`` (the training plan, a job of its own: it answers with the plan), and
``torchscan.compareReport`` (the target against its baseline, as an HTML diff).

Arguments are ``uri`` then the target name (optional for ``reanalyze``; without it every target of
the file), then for ``showReport`` an optional format (``html``, the default, or ``json``). Reports
are written under the user's cache directory, one folder per workspace
(``$XDG_CACHE_HOME/torchscan-lsp/reports/<name>-<hash>``); HTML is rendered in a worker process,
since rendering imports torch. A command whose arguments name no open file or target answers with
an error that carries its message only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.comparison_card import layer_table
from torchscan_lsp.server.messages import (COMPARE_REPORT, MEASURE_LATENCY, MEASURE_MEMORY, MEASURE_TRAINING,
                                           PLAN_TRAINING, REANALYSE,
                                           SHOW_REPORT)
from torchscan_lsp.session.cache import cache_folder
from torchscan_lsp.session.state import Document, TargetState


def reports_dir(root: str) -> Path:
    """Folder that receives the reports of workspace ``root`` (created on demand):
    ``$XDG_CACHE_HOME/torchscan-lsp/reports/<name>-<hash>/`` (:func:`~torchscan_lsp.session.cache.cache_folder`),
    so that two projects with the same file and target names never overwrite each other's reports."""
    return cache_folder("reports", root)


class CommandError(JsonRpcInvalidParams):
    """A command's arguments name no open file or no target: the client gets this message alone
    (code -32602), where any other exception would also carry the server's traceback."""


def _states(ls: Editor, uri: str, name: str | None) -> tuple[Document, list[TargetState]]:
    document = ls.document(uri)
    if document is None:
        raise CommandError(f"{uri} is not open in the torchscan server")
    states = ls.session.store.states_in(document.root, document.rel)
    if name is not None:
        states = [s for s in states if s.key.name == name]
        if not states:
            raise CommandError(f"no torchscan target named {name!r} in {document.rel}")
    return document, states


async def _measure(ls: Editor, uri: str, name: str, measure: list[str]) -> dict | None:
    document, states = _states(ls, uri, name)
    ls.session.analyse(document, [name], measure=measure, use_cache=False)
    state = states[0]
    await ls.session.finished(state)
    if state.error is not None:
        ls.show_message(f"torchscan: measuring {name} failed; see the diagnostics")
    return {kind: state.measurements.get(kind) for kind in measure if kind in state.measurements} or None


async def _plan(ls: Editor, uri: str, name: str) -> dict | None:
    document, states = _states(ls, uri, name)
    state = states[0]
    ls.session.plans.request(document, [name], requested=True, use_cache=False)
    await ls.session.plans.finished(state)
    plan = state.measurements.get("plan")
    if isinstance(plan, dict) and "error" in plan:
        ls.show_message(f"torchscan: planning {name} failed; see the diagnostics")
    return plan if isinstance(plan, dict) else None


async def _show_report(ls: Editor, uri: str, name: str, fmt: str) -> str | None:
    document, states = _states(ls, uri, name)
    state = states[0]
    if state.view is None:
        ls.show_message(f"torchscan: {name} has no report yet")
        return None
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{document.rel}-{name}")
    try:
        json_path = reports_dir(document.root) / f"{stem}.json"
        json_path.write_text(json.dumps(state.view.report, indent=2), encoding="utf-8")
    except OSError as error:  # the message is the answer; the traceback stays in the log
        raise JsonRpcInternalError(f"torchscan could not write the report: {error}") from error
    shown = json_path
    if fmt == "html":
        html_path = json_path.with_suffix(".html")
        rendered = await ls.session.render_html(state, str(html_path))
        if rendered.get("ok") and html_path.exists():
            shown = html_path
        else:
            message = (rendered.get("error") or {}).get("message", "")
            ls.show_message(f"torchscan: could not render HTML ({message}); showing the JSON report",
                            types.MessageType.Info)
    return await _show(ls, shown)


async def _show(ls: Editor, shown: Path) -> str:
    """Ask the client to show the report at ``shown`` (a browser for HTML); returns its path."""
    answer = await ls.show_document(str(shown), external=shown.suffix == ".html")
    if answer is not None and not answer.success:  # a browser that refused says nothing itself
        ls.show_message(f"torchscan: the editor could not open the report; it is at {shown}", types.MessageType.Info)
    return str(shown)


async def _compare_report(ls: Editor, uri: str, name: str) -> str | None:
    """Write the target's comparison with its baseline (JSON, and HTML rendered in a worker) and
    show it; says why when there is none."""
    document, states = _states(ls, uri, name)
    state = states[0]
    comparison = state.comparison
    if comparison is None or not comparison.ready:
        why = comparison.note if comparison is not None else "compare_with is off"
        ls.show_message(f"torchscan: {name} has no comparison: {why}", types.MessageType.Info)
        return None
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{document.rel}-{name}-vs-{comparison.label}")
    try:
        json_path = reports_dir(document.root) / f"{stem}.json"
        json_path.write_text(json.dumps(comparison.diff, indent=2), encoding="utf-8")
    except OSError as error:
        raise JsonRpcInternalError(f"torchscan could not write the comparison: {error}") from error
    html_path = json_path.with_suffix(".html")
    table = layer_table(comparison, ls.session.settings.headline)
    rendered = await ls.session.baselines.render(state, str(html_path), table)
    shown = html_path if rendered.get("ok") and html_path.exists() else json_path
    if shown is json_path:
        message = (rendered.get("error") or {}).get("message", "")
        ls.show_message(f"torchscan: could not render HTML ({message}); showing the JSON diff", types.MessageType.Info)
    return await _show(ls, shown)


def register(server: LanguageServer) -> None:
    """Register the six commands."""

    @server.command(REANALYSE)
    def reanalyse(ls: Editor, uri: str, *rest: Any) -> None:
        name = rest[0] if rest and isinstance(rest[0], str) else None
        document, states = _states(ls, uri, name)
        ls.session.analyse(document, [s.key.name for s in states], use_cache=False)

    @server.command(SHOW_REPORT)
    async def show_report(ls: Editor, uri: str, name: str, *rest: Any) -> str | None:
        return await _show_report(ls, uri, name, rest[0] if rest and rest[0] in ("html", "json") else "html")

    @server.command(MEASURE_LATENCY)
    async def measure_latency(ls: Editor, uri: str, name: str) -> dict | None:
        return await _measure(ls, uri, name, ["latency", "layer_latency", "roofline"])

    @server.command(MEASURE_MEMORY)
    async def measure_memory(ls: Editor, uri: str, name: str) -> dict | None:
        return await _measure(ls, uri, name, ["memory"])

    @server.command(MEASURE_TRAINING)
    async def measure_training(ls: Editor, uri: str, name: str) -> dict | None:
        return await _measure(ls, uri, name, ["train", "roofline"])

    @server.command(PLAN_TRAINING)
    async def plan_training(ls: Editor, uri: str, name: str) -> dict | None:
        return await _plan(ls, uri, name)

    @server.command(COMPARE_REPORT)
    async def compare_report(ls: Editor, uri: str, name: str) -> str | None:
        return await _compare_report(ls, uri, name)
