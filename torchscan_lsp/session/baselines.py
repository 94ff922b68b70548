"""Each target's baseline: the same target analysed from the files at a git revision, or its previous
analysis, turned into a :class:`~.deltas.Comparison` with its current result.

``compare_with`` (the target's option, else the setting ``torchscan.compareWith``, whose default is
``[tool.torchscan-lsp]``'s ``compare_with``, else ``"HEAD"``) names it:

* a git ref (``"HEAD"``, ``"main"``, a commit): after each good result, the ref is resolved
  (:func:`~.git.resolve`) and the baseline looked up by (commit, target, the workspace files its
  model imported, the options, the interpreter). When it is not known, the target's file and those
  files are read from the commit (one ``git cat-file --batch``): identical to what the result was
  computed from, the result is its own baseline; otherwise they are written into a scratch folder
  that the worker analyses like any job (same limits, cancellable, off the hint path; at most
  ``torchscan.maxWorkers`` jobs at once, analyses included), without measurements or a training
  step. The target's options there are those its pragma had in that commit, over today's
  workspace defaults. Good baselines are kept in memory and, with ``torchscan.cacheResults``, on
  disk; a baseline that failed is remembered for the commit and not run again;
* ``"save"``: the target's previous good result in this session;
* ``"off"``: none.

No git, no repository, no such ref, a file or target that did not exist then, or a baseline that
failed: no delta, and the comparison's ``note`` says why, once, in the hover.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from torchscan_lsp.session import git
from torchscan_lsp.session.cache import FORMAT, ResultCache, cache_folder
from torchscan_lsp.session.deltas import Comparison, compare_views
from torchscan_lsp.session.jobs import build_job, build_render_job
from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.state import TargetState, content_hash
from torchscan_lsp.targets import find_targets
from torchscan_lsp.targets.budgets import BASELINE_WORDS
from torchscan_lsp.version import package_version
from torchscan_lsp.worker import client as worker_client

__all__ = ["Baselines", "PREVIOUS", "baseline_ref"]

log = logging.getLogger(__name__)

PREVIOUS = "the last analysis"
"""How the baseline ``"save"`` is named."""

_SKIPPED_OPTIONS = ("train", "train_memory")
_KEPT_VIEWS = 16


def _fixed(_: str) -> str:
    """A baseline's files are those of its commit: nothing it imported changes under it."""
    return "commit"


def baseline_ref(state: TargetState, setting: str) -> str:
    """The baseline ``state``'s target compares with: its own ``compare_with``, else ``setting``."""
    own = (getattr(state.target, "options", None) or {}).get("compare_with")
    return own if isinstance(own, str) else setting


class Baselines:
    """The baselines of one session's targets (see the module's docstring).

    Args:
        session: the :class:`~torchscan_lsp.session.controller.Session` whose targets, settings,
            scheduler and worker it uses.
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.cache = ResultCache(max_entries=64)
        self._failed: dict[str, str] = {}
        self._views: dict[str, ResultView] = {}  # the indexed baselines last compared with, by key
        self._scans: dict[tuple[str, str], Any] = {}  # the commits' target files scanned, by path and hash

    def persist(self, on: bool) -> None:
        """Keep good baselines on disk too (``cache_folder("baselines")``), or in memory only."""
        self.cache.persist((lambda: cache_folder("baselines")) if on else None)

    def resolve_ahead(self, state: TargetState) -> asyncio.Task | None:
        """Start resolving ``state``'s baseline ref now (while its analysis runs), so that the
        result's comparison need not wait for git; ``None`` for ``"save"`` and ``"off"``."""
        ref = baseline_ref(state, self.session.settings_for(state.key.root).compareWith)
        if ref in BASELINE_WORDS:
            return None
        task = asyncio.ensure_future(git.resolve(state.key.root, ref))
        task.ref = ref  # type: ignore[attr-defined]
        return task

    async def refresh(self, state: TargetState, ahead: asyncio.Task | None = None) -> None:
        """Set ``state.comparison`` for its current result; schedules the baseline's analysis
        when it is not known yet (``pending`` meanwhile). ``ahead``: :meth:`resolve_ahead`'s task."""
        try:
            await self._refresh(state, ahead)
        except Exception:  # a baseline costs its deltas, never the result
            log.exception("comparing %s with its baseline failed", state.key.name)
            state.comparison = None

    async def compare(self, states: list[TargetState]) -> None:
        """Compare each of ``states`` with its baseline again (after a cached result, or when the
        setting ``compareWith`` changed) and tell the session's listener."""
        states = [state for state in states if state.view is not None]
        for state in states:
            await self.refresh(state)
        if states:
            self.session.notify_states(states)

    async def _refresh(self, state: TargetState, ahead: asyncio.Task | None) -> None:
        view = state.view
        if view is None:
            return
        ref = baseline_ref(state, self.session.settings_for(state.key.root).compareWith)
        comparison: Comparison | None = None
        if ref == "save":
            comparison = (await asyncio.to_thread(_compared, state.previous_view, view, state.key.file, PREVIOUS)
                          if state.previous_view is not None
                          else Comparison(PREVIOUS, note="this is the target's first analysis in this session"))
        elif ref != "off":
            resolved = ahead if ahead is not None and getattr(ahead, "ref", None) == ref else None
            comparison = await self._against(state, view, ref, resolved)
        if state.view is view:  # a newer result came meanwhile: its own refresh compares it
            state.comparison = comparison

    async def _against(self, state: TargetState, view: ResultView, ref: str,
                       ahead: asyncio.Task | None = None) -> Comparison:
        root, rel, name = state.key
        revision = await (ahead if ahead is not None else git.resolve(root, ref))
        if isinstance(revision, git.NoRevision):
            return Comparison(ref, note=revision.reason, unknown_ref=revision.unknown)
        files = sorted({rel, *(view.result.get("imported_files") or [])})
        key = self._key(revision, state, files)
        # Every step below takes time in proportion to the model (reading and checking a kept file,
        # indexing a result, comparing every layer, scanning the file, hashing what it imported):
        # each runs in a thread, so that hints and hovers are answered meanwhile.
        cached = await asyncio.to_thread(self.cache.get, key, _fixed)
        if cached is not None:
            baseline = await self._view(key, cached)
            return await asyncio.to_thread(_compared, baseline, view, rel, ref, revision.short)
        if key in self._failed:
            return Comparison(ref, revision.short, note=self._failed[key])
        texts = await git.read_files(root, revision, files)
        if texts.get(rel) is None:
            return Comparison(ref, revision.short, note=f"`{rel}` is new since {ref}")
        scan = await self._scan(rel, texts[rel])
        then = next((t for t in scan.targets if t.name == name), None)
        if then is None:
            errors = [p.message for p in scan.problems if str(getattr(p, "severity", "error")) == "error"]
            return Comparison(ref, revision.short, note=f"`{rel}` at {ref} does not parse: {errors[0]}" if errors
                              else f"`{name}` is new since {ref}")
        if await asyncio.to_thread(self._as_analysed, state.key.root, state.key.file, state.analysed_hash, texts):
            # the result itself, not a copy: the cache writes it from the text it was read from
            await asyncio.to_thread(self.cache.put, key, view.result, _fixed)
            return await asyncio.to_thread(_compared, view, view, rel, ref, revision.short)
        self._schedule(state, then, {path: text for path, text in texts.items() if text is not None}, key, revision)
        return Comparison(ref, revision.short, pending=True, note=f"the target at {ref} is being analysed")

    async def render(self, state: TargetState, html_path: str, layer_table: dict | None = None) -> dict:
        """Render ``state``'s comparison with its baseline (``compare_reports``' diff) as one offline
        HTML file in a worker process (rendering imports torch): ``{"ok": true, "path": ...}`` or
        a failure result. ``layer_table`` (``{"headers", "rows", "note"}``, text cells): the
        per-layer table the hover shows, drawn in full at the top of the page."""
        comparison = state.comparison
        assert comparison is not None and comparison.diff is not None, "render needs a comparison"
        title = f"{state.key.name}: now against {comparison.label}" + (f" ({comparison.commit})" if comparison.commit else "")
        diff = {**comparison.diff, "layer_table": layer_table} if layer_table else comparison.diff
        job = build_render_job(state.key.root, diff, None, title)
        return await worker_client.render_html(job, html_path, python=self.session.settings.python)

    async def _view(self, key: str, result: dict) -> ResultView:
        """``result`` indexed once (in a thread): every analysis compares with the same baseline again."""
        known = self._views.get(key)
        if known is None or known.result is not result:
            known = await asyncio.to_thread(ResultView, result)
            self._views[key] = known  # kept on the event loop only: no thread changes the dict
            while len(self._views) > _KEPT_VIEWS:
                self._views.pop(next(iter(self._views)))
        return known

    async def _scan(self, rel: str, text: str) -> Any:
        """The targets of ``text`` (file ``rel`` at a commit), scanned once (in a thread) while it
        is among the last few: every analysis reads the file at the commit again, mostly the same
        text, and scanning a file of 400 imports takes 50 ms."""
        key = (rel, content_hash(text))
        known = self._scans.get(key)
        if known is None:
            known = await asyncio.to_thread(find_targets, text, rel)
            self._scans[key] = known  # kept on the event loop only, as the views
            while len(self._scans) > _KEPT_VIEWS:
                self._scans.pop(next(iter(self._scans)))
        return known

    def _key(self, revision: git.Revision, state: TargetState, files: list[str]) -> str:
        settings = self.session.settings
        material = {"format": FORMAT, "version": package_version(), "commit": revision.commit, "prefix": revision.prefix,
                    "file": state.key.file, "target": state.key.name, "files": files,
                    "defaults": self.session.workspace_config(state.key.root).defaults, "device": settings.device,
                    "python": settings.interpreter}
        return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()

    def _as_analysed(self, root: str, file: str, analysed_hash: str | None, texts: dict[str, str | None]) -> bool:
        """Whether every file reads in the commit as the result read it (the target's ``file`` as
        analysed, whose hash is ``analysed_hash``; the others as on disk or saved in the editor).
        Hashes every file the result imported: call it off the event loop."""
        digest = self.session.file_hash(root)
        for path, text in texts.items():
            now = analysed_hash if path == file else digest(path)
            if text is None or content_hash(text) != now:
                return False
        return True

    def _schedule(self, state: TargetState, then: Any, texts: dict[str, str], key: str, revision: git.Revision) -> None:
        scheduler_key = ("baseline", state.key)
        self.session.scheduler.submit(scheduler_key, lambda: self._run(state, then, texts, key, revision))

    async def _run(self, state: TargetState, then: Any, texts: dict[str, str], key: str, revision: git.Revision) -> None:
        session = self.session
        scratch = await asyncio.to_thread(_write_tree, texts)
        try:
            defaults = session.workspace_config(state.key.root).defaults
            job, limits = build_job(str(scratch), str(scratch / state.key.file), then, defaults, session.settings_for(state.key.root))
            job["options"] = {k: v for k, v in job["options"].items() if k not in _SKIPPED_OPTIONS}
            job["measure"] = []
            result = await session.run_job(job, python=limits.python, timeout_s=limits.timeout_s,
                                           memory_mb=limits.memory_mb)
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)
        error = result.get("error") or {}
        if result.get("ok"):
            await asyncio.to_thread(self.cache.put, key, result, _fixed)  # writing the entry's file
            # an installed file changed meanwhile: never run it in a loop (the check stats every library file)
            if await asyncio.to_thread(self.cache.get, key, _fixed) is None:
                self._failed[key] = "the baseline's libraries changed while it was analysed; save again"
        elif error.get("kind") != "cancelled":  # (a cancelled one may run again)
            self._failed[key] = (f"the target at {revision.ref} could not be analysed "
                                 f"({error.get('kind', 'crash')}: {error.get('message', '')})").rstrip(": ")
        current = session.store.targets.get(state.key)
        if current is not None:
            await self.compare([current])


def _compared(baseline: ResultView, current: ResultView, file: str, label: str, commit: str | None = None) -> Comparison:
    """:func:`~.deltas.compare_views` of the two results, with the summaries that the hints of
    ``file`` (the target's own) compare computed (:meth:`~.deltas.Comparison.warm`): both take time
    in proportion to the model, so the session calls this in a thread."""
    comparison = compare_views(baseline, current, label, commit)
    comparison.warm(file)
    return comparison


def _write_tree(texts: dict[str, str]) -> Path:
    """A scratch folder holding ``texts`` (workspace-relative path to text)."""
    root = Path(tempfile.mkdtemp(prefix="torchscan-baseline-"))
    for path, text in texts.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root
