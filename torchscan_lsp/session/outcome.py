"""A job's outcome: made ready off the event loop, then taken by its target state on it.

Taking a result costs time that grows with the model: indexing it (:class:`~.results.ResultView`,
and the module summaries the hints of the target's own file show), and reading the files it names lines of (its lines follow
later edits of those texts). The session
does both in a thread (:func:`prepare`), so that hints and hovers are answered meanwhile, and only
assigns on the event loop (:func:`take`), where the features read the states.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.state import TargetKey, TargetState, content_hash


class Outcome(NamedTuple):
    """A result made ready to be taken by a target state.

    Attributes:
        result: the worker's result (``ok`` true, or a failure).
        text: the text of the target's file the job read.
        view: the result's index (``None`` for a failure).
        texts: the text of each file the result names lines of (or, for a failure, the file that
            raised), by workspace-relative path, as it is on disk now.
    """

    result: dict
    text: str
    view: ResultView | None
    texts: dict[str, str]


def prepare(key: TargetKey, result: dict, text: str) -> Outcome:
    """Make ``result`` of target ``key``'s job, whose target file read ``text``, ready to be taken:
    index it, sum what its hints show, and read the texts it was computed from. Reads files and
    takes time in proportion to the model: call it off the event loop."""
    if result.get("ok"):
        view = ResultView(result)
        view.warm(key.file)
        return Outcome(result, text, view, _texts(key, text, {file for file, _ in view.lines}))
    return Outcome(result, text, None, _texts(key, text, {(result.get("error") or {}).get("file")} - {None}))


def take(state: TargetState, outcome: Outcome) -> TargetState:
    """Make ``outcome`` ``state``'s latest: a success replaces the good result (the one before
    becomes ``previous_view``, and the comparison with a baseline is dropped until it is made
    again) and clears the failure; a failure keeps the good result, marked stale. Either way the state is no longer
    running. Returns ``state``."""
    result = outcome.result
    state.running = False
    if outcome.view is not None:
        state.analysed_hash = content_hash(outcome.text)
        state.previous_view = state.view
        state.view = outcome.view
        state.comparison = None  # compared with the new result next, never the old one's deltas on it
        state.set_analysed_texts(outcome.texts)
        state.error = None
        state.stale = False
        # a failure is the latest job's only: a later analysis that did not measure clears it
        state.measurements = {kind: record for kind, record in state.measurements.items()
                              if not (isinstance(record, dict) and "error" in record)}
        state.measurements.update(result.get("measurements") or {})
    else:
        state.error = result
        state.set_error_texts(outcome.texts)
        state.stale = state.view is not None
    return state


def _texts(key: TargetKey, text: str, files: set[str]) -> dict[str, str]:
    """``text`` for the target's own file, and for each other of ``files`` the file on disk (the
    worker imports files from disk; an unchanged file is what a cached result read too). A file
    that cannot be read is left out, and its lines are taken as they are."""
    texts = {key.file: text}
    for rel in files - {key.file}:
        try:
            texts[rel] = Path(key.root, rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return texts
