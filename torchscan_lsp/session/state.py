"""What the server knows: documents, their targets, and each target's latest results.

A target is identified by :class:`TargetKey` (its file, workspace-relative, and its name). Its
:class:`TargetState` keeps the last good result (as a :class:`ResultView`) until a newer analysis
succeeds, the last failure, and whether the good result is stale (the code changed since, or the
latest analysis failed). Nothing here talks to the client or runs anything.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from torchscan_lsp.session.deltas import Comparison
from torchscan_lsp.session.line_map import IDENTITY, LineMap
from torchscan_lsp.session.notebooks import Program
from torchscan_lsp.session.results import LineInfo, ResultView


class TargetKey(NamedTuple):
    """A target's identity: workspace root (absolute), file (workspace-relative), factory name."""

    root: str
    file: str
    name: str


def content_hash(text: str) -> str:
    """SHA-256 hex digest of ``text`` encoded as UTF-8: the cache's notion of a file's content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def relative(path: str | Path, root: str | Path) -> str | None:
    """``path`` relative to ``root`` with ``/`` separators, or ``None`` when it lies outside."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


@dataclass
class Document:
    """One source file the server tracks (open in the editor, or read from disk by ``check``).

    Attributes:
        path: absolute file path.
        root: the workspace root the file belongs to (absolute).
        rel: the file relative to ``root``.
        text: current text (the editor's buffer when open).
        saved_hash: content hash of the text last saved (or read from disk).
        targets: targets found in the last scan that parsed (kept across a syntax error).
        problems: problems of the latest scan (syntax errors, bad pragmas).
        retained: names of targets the latest scan lost to an error, kept with their last results.
        scanned_text: the text of the latest scan, so that retained targets follow later edits.
        program: for a Jupyter notebook, its code cells joined (:class:`~.notebooks.Program`),
            whose ``text`` is :attr:`text` and whose map names the cell of each line; else ``None``.
        from_disk: no front end opened the file: the session read it from disk for a target whose
            model imports a file that changed (its targets are analysed, not shown).
        imports: what the import statements of the latest scan that found targets name (preload
            entries, :func:`torchscan_lsp.targets.imports.imported_names`), for the warm worker.
        uri: the editor's URI of the text document that stands for this file without being its
            text (``jupyterlab-lsp``'s document of a notebook, :mod:`.lab_notebooks`: a virtual
            document's URI, or the notebook's own), which its diagnostics go to; else ``None``.
    """

    path: str
    root: str
    rel: str
    text: str
    saved_hash: str
    targets: list[Any] = field(default_factory=list)
    problems: list[Any] = field(default_factory=list)
    retained: set[str] = field(default_factory=set)
    scanned_text: str = ""
    program: Program | None = None
    from_disk: bool = False
    imports: list[str] = field(default_factory=list)
    uri: str | None = None

    @property
    def lines(self) -> list[str]:
        """The text split into lines, without line ends."""
        return self.text.splitlines()


@dataclass
class TargetState:
    """The analysis state of one target.

    Attributes:
        key: identity of the target.
        target: the target as found in the source (``name``, ``line``, ``column``, ``options``...).
        view: the last good result, indexed; ``None`` before the first success.
        error: the latest failed result (``ok`` false), cleared by a success.
        stale: the good result no longer matches the code (edited since, or the latest run failed).
        running: an analysis is in flight.
        untrusted: analysis was refused because the workspace is not trusted.
        measurements: the latest measurement results by kind (``latency``, ``memory``, ``train``).
        training_running: the training estimate runs as a job of its own (:mod:`.estimates`).
        training_key: the key of the model the held (or running) training estimate describes
            (:func:`~.estimates.training_key`), ``None`` without one.
        analysed_hash: content hash of the file text the good result was computed from.
        analysed_texts: the text of each workspace file the good result names lines of, as the
            worker read it, by workspace-relative path: its lines are mapped onto the current
            text (:meth:`line_map`), so hints and hovers follow unsaved edits.
        error_texts: the same for the latest failure (the file that raised), so that its error
            follows unsaved edits too.
        previous_view: the good result before :attr:`view` (the baseline ``"save"``).
        comparison: the good result against its baseline (:mod:`~torchscan_lsp.session.baselines`),
            or ``None`` (``compare_with="off"``, or not compared yet).
        planning: a plan job is in flight (``measurements["plan"]`` is the last plan's).
        plan_hash: content hash of the file text the last plan (``measurements["plan"]``) ran on.
    """

    key: TargetKey
    target: Any
    view: ResultView | None = None
    error: dict | None = None
    stale: bool = False
    running: bool = False
    untrusted: bool = False
    measurements: dict = field(default_factory=dict)
    training_running: bool = False
    training_key: str | None = None
    analysed_hash: str | None = None
    analysed_texts: dict[str, str] = field(default_factory=dict)
    error_texts: dict[str, str] = field(default_factory=dict)
    previous_view: ResultView | None = None
    comparison: Comparison | None = None
    planning: bool = False
    plan_hash: str | None = None
    _line_maps: dict[tuple[bool, str], tuple[list[str], LineMap]] = field(default_factory=dict, repr=False,
                                                                         compare=False)

    @property
    def line(self) -> int:
        """The target's 1-based line (its ``def`` or ``class`` line)."""
        return int(self.target.line)

    @property
    def files(self) -> set[str]:
        """Workspace-relative files this target has something to say about (its own included)."""
        files = {self.key.file}
        if self.view is not None:
            files |= self.view.files
        if self.error and self.error.get("error", {}).get("file"):
            files.add(self.error["error"]["file"])
        return files

    def set_analysed_texts(self, texts: dict[str, str]) -> None:
        """Remember the texts the new good result was computed from (by workspace-relative path)."""
        self.analysed_texts = texts
        self._forget_maps(error=False)

    def set_error_texts(self, texts: dict[str, str]) -> None:
        """Remember the texts the latest failure was computed from (by workspace-relative path)."""
        self.error_texts = texts
        self._forget_maps(error=True)

    def _forget_maps(self, *, error: bool) -> None:
        for key in [k for k in self._line_maps if k[0] == error]:
            del self._line_maps[key]

    def line_map(self, rel: str, current: list[str] | None, *, error: bool = False) -> LineMap:
        """How the lines of ``rel`` the good result (or, with ``error``, the latest failure) names
        map to ``current`` (the document's lines now); the identity when either text is unknown.
        Built once per current text."""
        analysed = (self.error_texts if error else self.analysed_texts).get(rel)
        if analysed is None or current is None:
            return IDENTITY
        cached = self._line_maps.get((error, rel))
        if cached is None or cached[0] != current:
            cached = self._line_maps[(error, rel)] = (list(current), LineMap(analysed.splitlines(), current))
        return cached[1]

    def lines_in(self, rel: str, current: list[str] | None) -> dict[int, LineInfo]:
        """What the good result says about each line of ``rel``, by current 1-based line; lines
        that changed since the analysis are left out. Empty without a good result."""
        if self.view is None:
            return {}
        moved = self.line_map(rel, current)
        out = {}
        for line, info in self.view.lines_in(rel).items():
            now = moved.to_current(line)
            if now is not None:
                out[now] = info
        return out

    def line_info(self, rel: str, line: int, current: list[str] | None) -> LineInfo | None:
        """What the good result says about current 1-based ``line`` of ``rel``, or ``None`` (also
        for a line that changed since the analysis)."""
        if self.view is None:
            return None
        analysed = self.line_map(rel, current).to_analysed(line)
        return None if analysed is None else self.view.line(rel, analysed)

    def name_for(self, rel: str, path: str | None = None) -> str:
        """The name this state's result gives a document: its absolute ``path`` when the result
        names it so (a library file, such as an installed modeling file), else ``rel``."""
        if path is not None and self.view is not None:
            absolute = Path(path).as_posix()
            if absolute in self.view.files:
                return absolute
        return rel

    def state_word(self) -> str:
        """One word for status displays: running, failed, stale, untrusted, done or idle."""
        if self.running:
            return "running"
        if self.untrusted:
            return "untrusted"
        if self.error is not None:
            return "failed"
        if self.stale:
            return "stale"
        return "done" if self.view is not None else "idle"


class Store:
    """Documents by absolute path and target states by key, for one server."""

    def __init__(self) -> None:
        self.documents: dict[str, Document] = {}
        self.targets: dict[TargetKey, TargetState] = {}

    def states_for_file(self, root: str, rel: str, path: str | None = None) -> list[TargetState]:
        """Target states with something to say about ``rel``: the file's own targets first,
        then those of other files whose model touches it, each group ordered by name. With the
        file's absolute ``path``, also the states of any workspace whose model ran through it as a
        library file (see :meth:`TargetState.name_for`)."""
        absolute = Path(path).as_posix() if path is not None else None
        own = [s for s in self.targets.values() if s.key.root == root and s.key.file == rel]
        others = [s for s in self.targets.values() if (s.key.root, s.key.file) != (root, rel) and (
            (s.key.root == root and rel in s.files) or (absolute is not None and absolute in s.files))]
        return sorted(own, key=lambda s: s.line) + sorted(others, key=lambda s: (s.key.file, s.key.name))

    def states_in(self, root: str, rel: str) -> list[TargetState]:
        """The target states defined in ``rel`` itself, by line."""
        return sorted((s for s in self.targets.values() if s.key.root == root and s.key.file == rel), key=lambda s: s.line)

    def sync_targets(self, document: Document) -> list[TargetState]:
        """Make the target states of ``document`` match its current targets.

        Targets that disappeared lose their state; new ones get an empty state; kept ones take
        the newly scanned ``target`` (lines and options may have moved). Returns the states.
        """
        keys = {TargetKey(document.root, document.rel, t.name): t for t in document.targets}
        for key in [k for k in self.targets if k.root == document.root and k.file == document.rel and k not in keys]:
            del self.targets[key]
        states = []
        for key, target in keys.items():
            state = self.targets.get(key)
            if state is None:
                state = self.targets[key] = TargetState(key=key, target=target)
            state.target = target
            states.append(state)
        return states

    def shown_states(self) -> list[TargetState]:
        """The target states whose results an open document shows: those defined in a document a
        front end opened (not one read from disk, :attr:`Document.from_disk`), and those with
        something to say about one (their model ran through it)."""
        opened = [d for d in self.documents.values() if not d.from_disk]
        files = {(d.root, d.rel) for d in opened} | {("", Path(d.path).as_posix()) for d in opened}
        return [state for state in self.targets.values()
                if (state.key.root, state.key.file) in files
                or any((state.key.root, rel) in files or ("", rel) in files for rel in state.files)]

    def dependents(self, root: str, rel: str) -> Iterable[TargetState]:
        """States of other files' targets whose last result imported ``rel``."""
        for state in list(self.targets.values()):
            if state.key.root == root and state.key.file != rel and state.view is not None:
                if rel in (state.view.result.get("imported_files") or []):
                    yield state
