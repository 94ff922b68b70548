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
5. Optional measurements (``measure``: ``latency``, ``memory``, ``layer_latency``) run after the
   analysis, each failing on its own without failing the job.

Errors never escape: they become ``{"ok": false, "error": {...}}`` naming the innermost traceback
frame inside the workspace. Nothing is printed to stdout (the model's own prints go to stderr).
Modules imported from the workspace are removed from ``sys.modules`` afterwards, so the next job
sees the files as they are then.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch

from torchscan_lsp.targets import find_targets
from torchscan_lsp.targets.discovery import Target
from torchscan_lsp.targets.options import (
    MEASUREMENTS,
    OptionError,
    check_consistency,
    from_toml_value,
    validate_option,
)
from torchscan_lsp.worker.attribution import SourceRecorder, Workspace

__all__ = ["run_job", "JobError"]


class JobError(Exception):
    """A failure of one step of the job, with its kind and where it happened."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        type_name: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.type_name = type_name
        self.file = file
        self.line = line


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run ``job`` and return its JSON-serialisable result (see ``docs/architecture.md``)."""
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        result = _Job(job, barrier=sys._getframe()).run()
    result["elapsed_s"] = round(time.perf_counter() - started, 6)
    return result


class _Job:
    def __init__(self, job: dict[str, Any], barrier: types.FrameType):
        self.job = job
        self.target_name = job.get("target")
        self.barrier = barrier
        self.workspace: Workspace | None = None
        self.file: Path | None = None
        self.rel_file: str | None = None
        self.target: Target | None = None
        self.target_line: int | None = None
        self.recorder: SourceRecorder | None = None
        self.imported_files: list[str] = []
        self.source = ""

    # -- the job --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        try:
            self._check_job()
        except JobError as error:
            return self._failure(error)
        assert self.workspace is not None
        with _ImportScope(self.workspace) as scope:
            try:
                result = self._run_in_scope(scope)
            except JobError as error:
                result = self._failure(error)
            except Exception as error:  # noqa: BLE001 - a bug of ours still becomes a result
                result = self._failure(
                    JobError(
                        "crash", f"{type(error).__name__}: {error}", type_name=type(error).__name__
                    )
                )
            finally:
                self.imported_files = scope.workspace_files()
        result["imported_files"] = self.imported_files
        return result

    def _check_job(self) -> None:
        job = self.job
        root = job.get("workspace_root")
        file = job.get("file")
        if not isinstance(self.target_name, str) or not self.target_name:
            raise JobError("options", "the job names no target")
        if not isinstance(root, str) or not root:
            raise JobError("options", "the job has no workspace_root")
        if not isinstance(file, str) or not file:
            raise JobError("options", "the job has no file")
        self.workspace = Workspace(root)
        path = Path(file)
        if not path.is_absolute():
            path = Path(root) / path
        self.file = path
        self.rel_file = self.workspace.relative(str(path)) or path.name
        if not isinstance(job.get("options") or {}, dict):
            raise JobError("options", "the job's options must be an object")

    def _run_in_scope(self, scope: _ImportScope) -> dict[str, Any]:
        assert self.workspace is not None and self.file is not None
        source = self.source = self._source()
        self._find_target(source)
        options = self._options()
        # the text that runs is the one lines are read from (an unsaved buffer differs from the disk)
        self.recorder = SourceRecorder(self.workspace, barrier=self.barrier, sources={str(self.file): source})

        module = self._import(scope, source)
        factory = self._lookup(module)
        produced = self._build(factory)
        model, args, kwargs = self._unpack(produced)
        crawl_kwargs, args, kwargs = self._crawl_arguments(model, args, kwargs, options)
        report = self._crawl(model, crawl_kwargs)
        source_map = self.recorder.source_map(report.get("layers"))
        result: dict[str, Any] = {
            "ok": True,
            "target": self.target_name,
            "report": report,
            "source_map": source_map,
        }
        measure = self._measurements(options)
        if measure:
            result["measurements"] = self._measure(measure, model, args, kwargs, options)
        return result

    # -- steps ----------------------------------------------------------------------------------

    def _source(self) -> str:
        text = self.job.get("source_text")
        if isinstance(text, str):
            return text
        assert self.file is not None
        try:
            data = self.file.read_bytes()
        except OSError as error:
            raise JobError(
                "import", f"cannot read {self.rel_file}: {error.strerror or error}",
                type_name=type(error).__name__, file=self.rel_file, line=None,
            ) from None
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
        return JobError(
            "import", f"{self.rel_file} is not valid UTF-8{where}: {message}; save it as UTF-8 or "
            "declare its encoding in a coding comment",
            type_name=type(error).__name__, file=self.rel_file, line=line,
        )

    def _find_target(self, source: str) -> None:
        scan = find_targets(source, str(self.file))
        self.target = scan.get(self.target_name)
        if self.target is not None:
            self.target_line = self.target.line
            return
        for problem in scan.errors:
            if problem.target in (None, self.target_name) and problem.message.startswith("syntax error"):
                raise JobError(
                    "import", problem.message.removeprefix("syntax error: "), type_name="SyntaxError",
                    file=self.rel_file, line=problem.line,
                )
        for problem in scan.errors:
            if problem.target == self.target_name:
                raise JobError(
                    "options", problem.message, type_name="OptionError",
                    file=self.rel_file, line=problem.line,
                )
        # Not annotated: still runnable by name; find its line for error messages.
        import ast

        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == self.target_name:
                self.target_line = node.lineno

    @property
    def _return_line(self) -> int | None:
        """The line of the factory's only ``return`` statement, when it has exactly one."""
        import ast

        try:
            tree = ast.parse(self.source)
        except (SyntaxError, ValueError):
            return None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == self.target_name:
                returns = list(_own_returns(node))
                return returns[0].lineno if len(returns) == 1 else None
        return None

    def _options(self) -> dict[str, Any]:
        raw = dict(self.job.get("options") or {})
        options: dict[str, Any] = {}
        for name, value in raw.items():
            if value is None:
                continue
            value = _from_json(name, value)
            try:
                validate_option(name, value)
            except OptionError as error:
                raise self._options_error(error.message)
            options[name] = value
        try:
            check_consistency(options)
        except OptionError as error:
            raise self._options_error(error.message)
        return options

    def _options_error(self, message: str, type_name: str = "OptionError") -> JobError:
        line = self.target.annotation_line if self.target is not None else self.target_line
        return JobError("options", message, type_name=type_name, file=self.rel_file, line=line)

    def _import(self, scope: _ImportScope, source: str) -> types.ModuleType:
        assert self.file is not None
        try:
            return scope.import_file(self.file, source)
        except BaseException as error:  # noqa: BLE001 - SystemExit from a module is an error too
            if isinstance(error, KeyboardInterrupt):
                raise
            raise self._error_from("import", error) from None

    def _lookup(self, module: types.ModuleType) -> Any:
        try:
            return getattr(module, self.target_name)
        except AttributeError:
            raise JobError(
                "factory",
                f"{self.rel_file} defines no '{self.target_name}' at module level",
                type_name="AttributeError", file=self.rel_file, line=self.target_line,
            ) from None

    def _build(self, factory: Any) -> Any:
        assert self.recorder is not None
        is_class = isinstance(factory, type)
        if is_class and not issubclass(factory, torch.nn.Module):
            raise JobError(
                "factory",
                f"'{self.target_name}' is a class but not an nn.Module subclass; annotate a "
                "factory function or an nn.Module class",
                type_name="TypeError", file=self.rel_file, line=self.target_line,
            )
        if not callable(factory):
            raise JobError(
                "factory", f"'{self.target_name}' is not callable ({type(factory).__name__})",
                type_name="TypeError", file=self.rel_file, line=self.target_line,
            )
        try:
            with self.recorder.recording_definitions(None if is_class else factory):
                produced = factory()
        except BaseException as error:  # noqa: BLE001
            if isinstance(error, KeyboardInterrupt):
                raise
            raise self._error_from("factory", error) from None
        if is_class or self.recorder.root_defined_at is None:
            line = self.target_line if is_class else (self._return_line or self.target_line)
            if line is not None:
                self.recorder.root_defined_at = {"file": self.rel_file, "line": line}
        return produced

    def _unpack(self, produced: Any) -> tuple[torch.nn.Module, tuple | None, dict | None]:
        name = self.target_name
        hint = "return the model, (model, args) or (model, args, kwargs)"
        if isinstance(produced, torch.nn.Module):
            return produced, None, None
        if isinstance(produced, tuple) and 2 <= len(produced) <= 3:
            model, args = produced[0], produced[1]
            kwargs = produced[2] if len(produced) == 3 else None
            if not isinstance(model, torch.nn.Module):
                raise self._factory_error(
                    f"'{name}' returned a tuple whose first item is {_a_type(model)}, "
                    f"not an nn.Module; {hint}"
                )
            if isinstance(args, torch.Tensor):
                args = (args,)
            elif isinstance(args, list):
                args = tuple(args)
            elif args is None:
                args = ()
            elif not isinstance(args, tuple):
                raise self._factory_error(
                    f"'{name}' returned args of type {type(args).__name__}; args must be a tuple "
                    f"of positional inputs (use (model, (), kwargs) for keyword inputs only)"
                )
            if kwargs is None:
                kwargs = {}
            elif not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
                raise self._factory_error(
                    f"'{name}' returned kwargs of type {type(kwargs).__name__}; kwargs must be a "
                    "dict with string keys"
                )
            return model, args, kwargs
        if isinstance(produced, tuple):
            raise self._factory_error(f"'{name}' returned a tuple of {len(produced)} items; {hint}")
        raise self._factory_error(
            f"'{name}' returned {_a_type(produced)}, not an nn.Module; {hint}"
        )

    def _factory_error(self, message: str) -> JobError:
        location = None
        if self.recorder is not None:
            location = self.recorder.root_defined_at
        file = location["file"] if location else self.rel_file
        line = location["line"] if location else self.target_line
        return JobError("result", message, type_name="TypeError", file=file, line=line)

    def _crawl_arguments(
        self,
        model: torch.nn.Module,
        args: tuple | None,
        kwargs: dict | None,
        options: dict[str, Any],
    ) -> tuple[dict[str, Any], tuple | None, dict | None]:
        crawl: dict[str, Any] = {}
        provided = args is not None
        shape = options.get("input_shape")
        if provided and shape is not None:
            raise self._options_error(
                f"'{self.target_name}' returns its own inputs, and input_shape={_literal(shape)} is "
                "set too; remove input_shape or return only the model (input_shape=None in the "
                "pragma overrides a workspace default)"
            )
        if not provided and shape is None:
            raise self._options_error(
                f"'{self.target_name}' returns only a model and no input_shape is set; add "
                "input_shape=(...) (without the batch dimension) to its pragma, or return "
                "(model, args) or (model, args, kwargs)"
            )
        if provided and options.get("dtype") is not None:
            raise self._options_error(
                f"dtype={_literal(options['dtype'])} applies only to inputs generated from "
                f"input_shape, but '{self.target_name}' returns its own inputs; remove dtype and "
                "cast the inputs in the factory (dtype=None in the pragma overrides a workspace "
                "default)"
            )
        device = options.get("device")
        if device is not None:
            try:
                torch_device = torch.device(device)
                model.to(torch_device)
                if provided:
                    args = _to_device(args, torch_device)
                    kwargs = _to_device(kwargs, torch_device)
            except Exception as error:  # noqa: BLE001
                raise self._options_error(
                    f"cannot use device '{device}': {error}", type(error).__name__
                ) from None
        if provided:
            crawl["args"] = args
            crawl["kwargs"] = kwargs
        else:
            crawl["input_shape"] = shape
            if device is not None:
                crawl["device"] = device
            dtype = options.get("dtype")
            if dtype is not None:
                crawl["dtype"] = _torch_dtype(dtype)
        for name in ("mode", "strict"):
            if options.get(name) is not None:
                crawl[name] = options[name]
        return crawl, args, kwargs

    def _crawl(self, model: torch.nn.Module, crawl_kwargs: dict[str, Any]) -> dict[str, Any]:
        assert self.recorder is not None
        try:
            from torchscan_lsp.engine import IncompleteAnalysisError, crawl_module
        except ImportError as error:
            raise JobError(
                "crash", f"the analysis engine is not available: {error}",
                type_name=type(error).__name__,
            ) from None
        # attribution observes the engine's one recording pass: nothing else hooks or dispatches
        observer = self.recorder.observer(model)
        try:
            report = crawl_module(model, **crawl_kwargs, observers=[observer])
        except BaseException as error:  # noqa: BLE001
            if isinstance(error, KeyboardInterrupt):
                raise
            started = bool(self.recorder.calls)
            partial_report = getattr(error, "report", None)
            if isinstance(error, IncompleteAnalysisError):
                job_error = self._error_from("strict", error)
                job_error.message = _incomplete_message(error.report)
                job_error.report = error.report  # type: ignore[attr-defined]
                raise job_error from None
            if started:
                kind = "forward"
            elif isinstance(error, (ValueError, TypeError, RuntimeError)):
                kind = "options"  # the engine refused the inputs before the model ran
            else:
                kind = "crash"
            job_error = self._error_from(kind, error)
            if kind == "forward" and _MISMATCH.search(job_error.message):
                job_error.message += (
                    "; check input_shape, dtype and device: the inputs' dtype and device must match "
                    "the model's (the target's dtype and device options, or the inputs its factory "
                    "returns)"
                )
            if isinstance(partial_report, dict):
                job_error.report = partial_report  # type: ignore[attr-defined]
            raise job_error from None
        return report

    def _measurements(self, options: dict[str, Any]) -> list[str]:
        requested = list(self.job.get("measure") or []) + list(options.get("measure") or [])
        ordered = []
        for name in MEASUREMENTS:
            if name in requested and name not in ordered:
                ordered.append(name)
        return ordered

    def _measure(
        self,
        names: list[str],
        model: torch.nn.Module,
        args: tuple | None,
        kwargs: dict | None,
        options: dict[str, Any],
    ) -> dict[str, Any]:
        """Run each requested measurement on its own; a failure is reported in its place."""
        device = options.get("device") or _model_device(model)
        if args is None:  # generated inputs, made as the engine makes them
            from torchscan_lsp.engine.inputs import prepare_inputs

            dtype = options.get("dtype")
            prepared = prepare_inputs(
                model,
                options["input_shape"],
                _torch_dtype(dtype) if dtype is not None else None,
                device=options.get("device"),
            )
            args, kwargs = prepared.args, prepared.kwargs
        kwargs = kwargs or {}
        results: dict[str, Any] = {}
        flags = [(m, m.training) for m in model.modules()]
        try:
            model.eval()

            def workload() -> None:
                with torch.inference_mode():
                    model(*args, **kwargs)

            for name in names:
                try:
                    results[name] = _run_measurement(name, model, workload, args, kwargs, device)
                except Exception as error:  # noqa: BLE001 - one failed measurement fails alone
                    located = self._error_from("forward", error)
                    results[name] = {
                        "error": {
                            "type": located.type_name,
                            "message": located.message,
                            "file": located.file,
                            "line": located.line,
                        }
                    }
        finally:
            for module, training in flags:
                module.training = training
        return results

    # -- errors ---------------------------------------------------------------------------------

    def _error_from(self, kind: str, error: BaseException) -> JobError:
        """A :class:`JobError` of ``kind`` located at the innermost workspace frame of ``error``.

        Without such a frame the error points at the target: its annotation for an options error,
        its ``def``/``class`` line otherwise.
        """
        assert self.workspace is not None
        location = None
        if isinstance(error, SyntaxError) and error.filename:
            rel = self.workspace.relative(error.filename)
            if rel is not None and error.lineno:
                location = {"file": rel, "line": error.lineno}
        if location is None:
            recorder = self.recorder or SourceRecorder(self.workspace)
            location = recorder.location_of_traceback(error.__traceback__)
        if location is None:
            line = self.target_line
            if kind == "options" and self.target is not None:
                line = self.target.annotation_line
            location = {"file": self.rel_file, "line": line}
        message = _exception_message(error)
        return JobError(
            kind, message, type_name=type(error).__name__,
            file=location["file"], line=location["line"],
        )

    def _failure(self, error: JobError) -> dict[str, Any]:
        result: dict[str, Any] = {
            "ok": False,
            "target": self.target_name,
            "error": {
                "kind": error.kind,
                "type": error.type_name or "Error",
                "message": error.message,
                "file": error.file,
                "line": error.line,
            },
            "imported_files": list(self.imported_files),
        }
        report = getattr(error, "report", None)
        if isinstance(report, dict):
            result["report"] = report
            if self.recorder is not None:
                result["source_map"] = self.recorder.source_map(report.get("layers"))
        return result


_MISMATCH = re.compile(
    r"dtype|scalar type|Input type|weight type|bias type|same device|device type|on device",
    re.IGNORECASE,
)
"""Error messages of a forward that mixed dtypes or devices (PyTorch has no exception type for it)."""

_INCOMPLETE_SHOWN = 5
"""How many of the uncounted items a strict error names before summarising the rest."""


def _incomplete_message(report: Any) -> str:
    """What a strict analysis did not count: each distinct diagnostic as ``code in 'path'`` or
    ``code operator`` (with the operators of ``container_work``), else the incomplete totals."""
    items: list[str] = []
    for diag in report.get("diagnostics") or ():
        if not isinstance(diag, dict):
            continue
        code = diag.get("code") or "diagnostic"
        if diag.get("operator"):
            item = f"{code} {diag['operator']}"
        else:
            item = f"{code} in '{diag.get('path') or ''}'" if diag.get("path") else f"{code} in the root module"
        message = str(diag.get("message") or "")
        if code == "container_work" and ": " in message:
            # the message ends with the operators: "...: aten.relu x1, aten.add x2."
            item += f" ({message.rsplit(': ', 1)[1].rstrip('.').replace(' x', ' ×')})"
        if item not in items:
            items.append(item)
    if not items:
        totals = report.get("totals") or {}
        items = [
            f"{name} is {metric.get('status')}"
            for name, metric in totals.items()
            if isinstance(metric, dict) and metric.get("status") != "complete"
            and metric.get("method") != "not_requested"
        ]
    shown = "; ".join(items[:_INCOMPLETE_SHOWN]) or "unknown metrics"
    if len(items) > _INCOMPLETE_SHOWN:
        shown += f"; and {len(items) - _INCOMPLETE_SHOWN} more"
    return (f"analysis is incomplete: {shown} (strict=True makes this an error; the report's "
            "diagnostics list everything)")


def _a_type(value: Any) -> str:
    """``value``'s type with its article, and the value when short: ``an int (3)``, ``a str ('x')``."""
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    text = repr(value)
    shown = f" ({text})" if isinstance(value, (int, float, str, bool)) and len(text) <= 40 else ""
    return f"{article} {name}{shown}"


def _model_device(model: torch.nn.Module) -> str:
    for tensor in (*model.parameters(), *model.buffers()):
        return str(tensor.device)
    return "cpu"


def _run_measurement(
    name: str,
    model: torch.nn.Module,
    workload: Any,
    args: tuple,
    kwargs: dict,
    device: str,
) -> dict[str, Any]:
    import torchscan_lsp

    if name == "latency":
        return dict(torchscan_lsp.measure_latency(workload, device=device, inputs=args or None))
    if name == "memory":
        return dict(torchscan_lsp.measure_peak_memory(workload, device=device))
    if name == "layer_latency":
        from torchscan_lsp.engine.latency import measure_layer_latency

        return dict(measure_layer_latency(model, tuple(args), dict(kwargs), device=device))
    raise ValueError(f"unknown measurement {name!r}")


def _own_returns(function: Any) -> Any:
    """The ``return`` statements of ``function`` itself, not of functions or classes inside it."""
    import ast

    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _exception_message(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        return f"{error.msg}" if error.msg else "invalid syntax"
    text = str(error)
    if isinstance(error, KeyError) and error.args:
        text = repr(error.args[0])
    return text or type(error).__name__


def _literal(value: Any) -> str:
    return repr(value)


def _from_json(name: str, value: Any) -> Any:
    """JSON has lists, not tuples: ``[3, 32, 32]`` is one shape, ``[[3, 32], [8]]`` two.

    A job built in memory may hold the pragma's own literal, such as ``[(8,), (3,)]``; it is read
    as its JSON form would be, so a job means the same whether or not it was serialised.
    """
    if name == "input_shape" and isinstance(value, (list, tuple)):
        return from_toml_value(name, _as_json(value))
    return value


def _as_json(value: Any) -> Any:
    """``value`` with every tuple turned into a list, as a JSON round trip would turn it."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    return value


def _torch_dtype(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_torch_dtype(v) for v in value]
    name = value[len("torch.") :] if value.startswith("torch.") else value
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise JobError("options", f"this PyTorch ({torch.__version__}) has no dtype '{value}'",
                       type_name="OptionError")
    return dtype


def _to_device(value: Any, device: torch.device) -> Any:
    from torch.utils._pytree import tree_map

    return tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, value)


# -- importing the user's file ----------------------------------------------------------------


class _ImportScope:
    """Imports workspace files for one job and removes them from ``sys.modules`` afterwards.

    On entry the workspace root goes first on ``sys.path`` and modules already imported from the
    workspace are set aside (a file may have changed since). On exit every module imported from the
    workspace during the job is removed, whatever was set aside or shadowed comes back, and
    ``sys.path`` is restored.
    """

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self._saved_modules: dict[str, types.ModuleType] = {}
        self._created: set[str] = set()
        self._added_path = False
        self._appended: list[str] = []

    def __enter__(self) -> _ImportScope:
        root = self.workspace.root
        if root not in sys.path:
            sys.path.insert(0, root)
            self._added_path = True
        importlib.invalidate_caches()
        for name, module in list(sys.modules.items()):
            if self._is_workspace_module(module):
                self._saved_modules[name] = module
                del sys.modules[name]
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, module in list(sys.modules.items()):
            if name in self._created or self._is_workspace_module(module):
                del sys.modules[name]
        for name, module in self._saved_modules.items():
            sys.modules[name] = module
        if self._added_path:
            with contextlib.suppress(ValueError):
                sys.path.remove(self.workspace.root)
        for folder in self._appended:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)

    def _is_workspace_module(self, module: Any) -> bool:
        file = getattr(module, "__file__", None)
        return isinstance(file, str) and self.workspace.relative(file) is not None

    def workspace_files(self) -> list[str]:
        files = set()
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if isinstance(file, str):
                rel = self.workspace.relative(file)
                if rel is not None:
                    files.add(rel)
        return sorted(files)

    def _shadow(self, name: str) -> None:
        existing = sys.modules.get(name)
        if existing is not None and name not in self._saved_modules:
            self._saved_modules[name] = existing
        self._created.add(name)

    def module_name(self, path: Path) -> tuple[str, list[tuple[str, Path]]]:
        """The dotted name of ``path`` and its parent packages ``(name, directory)``."""
        real = Path(os.path.realpath(path))
        try:
            rel = real.relative_to(self.workspace.root)
        except ValueError:
            rel = None
        if rel is not None:
            parts = list(rel.with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and all(p.isidentifier() for p in parts):
                parents = [
                    (".".join(parts[: i + 1]), Path(self.workspace.root, *parts[: i + 1]))
                    for i in range(len(parts) - 1)
                ]
                return ".".join(parts), parents
        stem = "".join(c if c.isalnum() or c == "_" else "_" for c in real.stem) or "module"
        return f"_torchscan_target_{stem}", []

    def import_file(self, path: Path, source: str) -> types.ModuleType:
        name, parents = self.module_name(path)
        # Script-style sibling imports (``from blocks import Block`` next to ``blocks.py``) work as
        # they do under ``python models/net.py``; the folder goes last so that it shadows nothing.
        folder = os.path.realpath(path.parent)
        if folder != self.workspace.root and folder not in sys.path:
            sys.path.append(folder)
            self._appended.append(folder)
        for package, directory in parents:
            self._import_package(package, directory)
        is_package = path.name == "__init__.py"
        spec = importlib.util.spec_from_file_location(
            name, str(path), submodule_search_locations=[str(path.parent)] if is_package else None
        )
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        self._shadow(name)
        sys.modules[name] = module
        if parents:
            setattr(sys.modules[parents[-1][0]], name.rpartition(".")[2], module)
        code = compile(source, str(path), "exec", dont_inherit=True)
        # Marked as initialising, as the import system does, so that a module importing this one
        # back fails with Python's own "partially initialized module ... circular import" message.
        spec._initializing = True
        try:
            exec(code, module.__dict__)  # noqa: S102 - running the user's module is the job
        finally:
            spec._initializing = False
        return module

    def _import_package(self, name: str, directory: Path) -> None:
        existing = sys.modules.get(name)
        if existing is not None and name in self._created:
            return
        init = directory / "__init__.py"
        self._shadow(name)
        if init.is_file():
            spec = importlib.util.spec_from_file_location(
                name, str(init), submodule_search_locations=[str(directory)]
            )
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            self._link_to_parent(name, module)
            spec.loader.exec_module(module)
        else:
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [str(directory)]
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            self._link_to_parent(name, module)

    @staticmethod
    def _link_to_parent(name: str, module: types.ModuleType) -> None:
        parent, _, child = name.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)

