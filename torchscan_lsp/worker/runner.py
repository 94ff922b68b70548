"""Run one analysis job: import the user's module, build the model, run the engine, attribute.

:func:`run_job` takes the job object of ``docs/architecture.md`` ("The worker job protocol") and
returns its result object. The worker's child process calls it, for the editor and for the
``scan`` and ``check`` commands alike.

Steps, each with its own error kind:

1. ``import``: the workspace root goes first on ``sys.path``; the file is imported as a module whose
   name follows its package path under the root (``models/net.py`` is ``models.net``), so relative
   imports work. ``source_text``, when given, is what runs instead of the file on disk.
2. ``factory``: the target is called (a factory) or instantiated (an ``nn.Module`` class) and
   raised. A factory may return ``model``, ``(model, args)`` or ``(model, args, kwargs)``; anything
   else is a ``result`` error.
3. ``options``: the options become ``crawl_module`` arguments (dtype names become ``torch.dtype``s,
   an ``input_shape`` gives generated inputs, ``device`` moves the model and any provided inputs).
4. ``forward``: ``torchscan_lsp.crawl_module`` runs the model once, observed by
   :class:`~torchscan_lsp.worker.attribution.SourceRecorder` (where each module was built and called,
   which lines dispatched which operators, what each line computed). Under ``strict=True`` an analysis that is
   not complete is a ``strict`` error listing what was not counted.
5. Optional measurements (``measure``: ``latency``, ``memory``, ``layer_latency``, ``train``,
   ``roofline``) run after the analysis, each failing on its own without failing the job; a target
   with ``train`` or ``train_memory`` options gets the training step's estimate (:mod:`.training`)
   unasked, and one with a ``roofline`` option its roofline (:mod:`.roofline`), last, over the others.
   The job's ``phase`` (:data:`~torchscan_lsp.contract.messages.JOB_PHASES`) may leave that estimate
   out (``forward``: the result carries the model's structure digest instead) or run it alone
   (``training``: steps 1-3, then the estimate, and no analysis).

A *plan job* (``"kind": "plan"``) stops after step 1 and the factory's lookup: it runs
``plan_training`` on the factory (:mod:`.planning`), which builds the model only on fake tensors,
and returns ``{"ok": true, "kind": "plan", "plan": report}``.

Each step has its module: :mod:`.imports` (importing the user's file), :mod:`.factory` (building
the model), :mod:`.options` (options to ``crawl_module`` arguments), :mod:`.measurements`, and
:mod:`.errors` (where each error is placed).

Errors never escape: they become ``{"ok": false, "error": {...}}`` naming the innermost traceback
frame inside the workspace. Nothing is printed to stdout (the model's own prints go to stderr), and
Python warnings go to the report's diagnostics (:mod:`.python_warnings`).
Modules imported from the workspace are removed from ``sys.modules`` afterwards, so the next job
sees the files as they are then.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch

from torchscan_lsp.contract.messages import failure
from torchscan_lsp.targets import find_targets
from torchscan_lsp.targets.discovery import Target
from torchscan_lsp.worker import measurements, planning, python_warnings, roofline, training
from torchscan_lsp.worker.attribution import SourceRecorder, Workspace
from torchscan_lsp.worker.compiled import hidden_from_dynamo
from torchscan_lsp.worker.errors import Blame, JobError, forward_advice, incomplete_message
from torchscan_lsp.worker.factory import build_model
from torchscan_lsp.worker.imports import ImportScope
from torchscan_lsp.worker.options import crawl_arguments, job_options

__all__ = ["run_job", "JobError"]


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run ``job`` and return its JSON-serialisable result (see ``docs/architecture.md``)."""
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr), python_warnings.recorded() as caught:
        runner = _Job(job, barrier=sys._getframe())
        result = runner.run()
    python_warnings.attach(result, caught, runner.blame.workspace if runner.blame is not None else None)
    result["elapsed_s"] = round(time.perf_counter() - started, 6)
    return result


class _Job:
    """One job's steps, in order; each raises a :class:`JobError` of its kind."""

    def __init__(self, job: dict[str, Any], barrier: types.FrameType):
        self.job = job
        self.target_name = job.get("target")
        self.barrier = barrier
        self.file: Path | None = None
        self.blame: Blame | None = None
        self.target: Target | None = None
        self.imported_files: list[str] = []

    def run(self) -> dict[str, Any]:
        try:
            workspace = self._check_job()
        except JobError as error:
            return self._failure(error)
        with ImportScope(workspace) as scope:
            try:
                result = self._run_in_scope(scope)
            except JobError as error:
                result = self._failure(error)
            except Exception as error:  # noqa: BLE001 - a bug of ours still becomes a result
                result = self._failure(JobError("crash", f"{type(error).__name__}: {error}",
                                                type_name=type(error).__name__))
            finally:
                self.imported_files = scope.workspace_files()
                stamps = scope.library_stamps()
        result["imported_files"] = self.imported_files
        if result.get("ok"):
            result["library_stamps"] = stamps
        return result

    def _check_job(self) -> Workspace:
        job = self.job
        root = job.get("workspace_root")
        file = job.get("file")
        if not isinstance(self.target_name, str) or not self.target_name:
            raise JobError("options", "the job names no target")
        if not isinstance(root, str) or not root:
            raise JobError("options", "the job has no workspace_root")
        if not isinstance(file, str) or not file:
            raise JobError("options", "the job has no file")
        workspace = Workspace(root)
        path = Path(file)
        if not path.is_absolute():
            path = Path(root) / path
        self.file = path
        self.blame = Blame(workspace, workspace.relative(str(path)) or path.name)
        if not isinstance(job.get("options") or {}, dict):
            raise JobError("options", "the job's options must be an object")
        return workspace

    def _run_in_scope(self, scope: ImportScope) -> dict[str, Any]:
        assert self.blame is not None and self.file is not None
        blame = self.blame
        source = self._source()
        self._find_target(source)
        options = job_options(dict(self.job.get("options") or {}), blame)
        # the text that runs is the one lines are read from (an unsaved buffer differs from the disk)
        blame.recorder = SourceRecorder(blame.workspace, barrier=self.barrier, sources={str(self.file): source})

        module = self._import(scope, source)
        factory = self._lookup(module)
        if self.job.get("kind") == "plan":  # no analysis, and the model only ever on fake tensors
            report = planning.run_plan(factory, options, blame=blame, progress=self.job.get("progress"))
            return {"ok": True, "target": self.target_name, "kind": "plan", "plan": report}
        model, args, kwargs = build_model(factory, self.target_name, source, blame, device=options.get("device"))
        with hidden_from_dynamo():  # a compiled model: Dynamo traces the user's code, never ours
            return self._analyse(model, args, kwargs, factory, options)

    def _analyse(self, model: torch.nn.Module, args: Any, kwargs: Any, factory: Any,
                 options: dict[str, Any]) -> dict[str, Any]:
        assert self.blame is not None
        blame = self.blame
        crawl_kwargs, args, kwargs = crawl_arguments(model, args, kwargs, options, self.target_name, blame)
        phase = self.job.get("phase") or "all"
        wanted = measurements.requested(self.job, options)
        unasked = training.estimate_unasked(options)
        trains = "train" in wanted or (unasked and phase != "forward")
        if trains or unasked:
            training.check_options(options, own_inputs=args is not None, name=self.target_name, blame=blame)
        if phase == "training":  # the estimate alone, for a forward analysis that already ran
            estimate = training.measure_training(factory, options, measured=False, blame=blame,
                                                 memory_mb=self.job.get("memory_mb"))
            return {"ok": True, "target": self.target_name, "measurements": {"train": estimate}}
        report = self._crawl(model, crawl_kwargs)
        result: dict[str, Any] = {
            "ok": True,
            "target": self.target_name,
            "report": report,
            "source_map": blame.recorder.source_map(report.get("layers")),
        }
        if unasked:
            result["structure"] = training.structure_digest(model)
        found: dict[str, Any] = {}
        # training builds models of its own; the roofline joins what the others measured
        on_the_model = [name for name in wanted if name not in ("train", "roofline")]
        if on_the_model:
            found.update(measurements.measure(on_the_model, model, args, kwargs, options, blame))
        if trains:
            found["train"] = training.measure_training(factory, options, measured="train" in wanted, blame=blame,
                                                       memory_mb=self.job.get("memory_mb"))
        if "roofline" in wanted or roofline.automatic(options):
            device = options.get("device") or measurements.model_device(model)
            found["roofline"] = roofline.measure_roofline(report, found, options, device, blame,
                                                          requested="roofline" in wanted)
        if found:
            result["measurements"] = found
        return result

    # -- reading and importing the file -------------------------------------------------------

    def _source(self) -> str:
        text = self.job.get("source_text")
        if isinstance(text, str):
            return text
        assert self.file is not None and self.blame is not None
        rel = self.blame.rel_file
        if self.file.suffix == ".ipynb":  # its JSON is no program: the session joins the cells
            raise JobError("import", f"{rel} is a notebook: its job must carry the joined code cells as source_text",
                           type_name="JobError", file=rel, line=None)
        try:
            data = self.file.read_bytes()
        except OSError as error:
            raise JobError("import", f"cannot read {rel}: {error.strerror or error}",
                           type_name=type(error).__name__, file=rel, line=None) from None
        try:
            return importlib.util.decode_source(data)
        except (UnicodeDecodeError, SyntaxError) as error:  # Python would refuse to import it too
            raise self._undecodable(data, error) from None

    def _undecodable(self, data: bytes, error: Exception) -> JobError:
        """The error for a file whose bytes do not decode, located at the first bad byte's line."""
        try:
            data.decode("utf-8")
            where, line = "", None
        except UnicodeDecodeError as bad:
            line = data[: bad.start].count(b"\n") + 1
            where = f" (byte 0x{data[bad.start]:02x} on line {line})"
        message = getattr(error, "msg", None) or str(error)
        rel = self.blame.rel_file if self.blame is not None else None
        return JobError("import", f"{rel} is not valid UTF-8{where}: {message}; save it as UTF-8 or declare its "
                        "encoding in a coding comment", type_name=type(error).__name__, file=rel, line=line)

    def _find_target(self, source: str) -> None:
        assert self.blame is not None
        blame = self.blame
        scan = find_targets(source, str(self.file))
        self.target = scan.get(self.target_name)
        if self.target is not None:
            blame.target_line, blame.annotation_line = self.target.line, self.target.annotation_line
            return
        for problem in scan.errors:
            if problem.target in (None, self.target_name) and problem.message.startswith("syntax error"):
                raise JobError("import", problem.message.removeprefix("syntax error: "), type_name="SyntaxError",
                               file=blame.rel_file, line=problem.line)
        for problem in scan.errors:
            if problem.target == self.target_name:
                raise JobError("options", problem.message, type_name="OptionError", file=blame.rel_file,
                               line=problem.line)
        # Not annotated: still runnable by name; find its line for error messages.
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == self.target_name:
                blame.target_line = node.lineno

    def _import(self, scope: ImportScope, source: str) -> types.ModuleType:
        assert self.file is not None and self.blame is not None
        try:
            return scope.import_file(self.file, source)
        except BaseException as error:  # noqa: BLE001 - SystemExit from a module is an error too
            if isinstance(error, KeyboardInterrupt):
                raise
            raise self.blame.error_from("import", error) from None

    def _lookup(self, module: types.ModuleType) -> Any:
        assert self.blame is not None
        try:
            return getattr(module, self.target_name)
        except AttributeError:
            raise JobError("factory", f"{self.blame.rel_file} defines no '{self.target_name}' at module level",
                           type_name="AttributeError", file=self.blame.rel_file,
                           line=self.blame.target_line) from None

    # -- the analysis -----------------------------------------------------------------------------

    def _crawl(self, model: torch.nn.Module, crawl_kwargs: dict[str, Any]) -> dict[str, Any]:
        assert self.blame is not None and self.blame.recorder is not None
        blame, recorder = self.blame, self.blame.recorder
        try:
            from torchscan_lsp.engine import IncompleteAnalysisError, crawl_module
        except ImportError as error:
            raise JobError("crash", f"the analysis engine is not available: {error}",
                           type_name=type(error).__name__) from None
        # attribution observes the engine's one recording pass: nothing else hooks or dispatches
        observer = recorder.observer(model)
        try:
            return crawl_module(model, **crawl_kwargs, observers=[observer])
        except BaseException as error:  # noqa: BLE001
            if isinstance(error, KeyboardInterrupt):
                raise
            started = bool(recorder.calls)
            partial_report = getattr(error, "report", None)
            if isinstance(error, IncompleteAnalysisError):
                job_error = blame.error_from("strict", error)
                job_error.message = incomplete_message(error)
                job_error.report = error.report  # type: ignore[attr-defined]
                raise job_error from None
            if started:
                kind = "forward"
            elif isinstance(error, (ValueError, TypeError, RuntimeError)):
                kind = "options"  # the engine refused the inputs before the model ran
            else:
                kind = "crash"
            job_error = blame.error_from(kind, error)
            if kind == "forward":
                job_error.message = forward_advice(job_error.message, crawl_kwargs.get("input_shape"),
                                                   recorder.failed_call)
            if isinstance(partial_report, dict):
                job_error.report = partial_report  # type: ignore[attr-defined]
            raise job_error from None

    def _failure(self, error: JobError) -> dict[str, Any]:
        result: dict[str, Any] = dict(failure(
            self.target_name, error.kind, error.message, type_name=error.type_name or "Error",
            file=error.file, line=error.line, imported_files=self.imported_files,
            traceback=error.traceback, cause=error.cause,
        ))
        report = getattr(error, "report", None)
        recorder = self.blame.recorder if self.blame is not None else None
        if isinstance(report, dict):
            result["report"] = report
            if recorder is not None:
                result["source_map"] = recorder.source_map(report.get("layers"))
        return result
