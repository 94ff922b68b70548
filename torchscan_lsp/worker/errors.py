"""A job's errors: each step fails with a :class:`JobError` of its kind, placed at the innermost
frame of the traceback that lies inside the workspace, else at the target (its annotation for an
options error, its ``def``/``class`` line otherwise); :class:`Blame` knows where that is."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import traceback
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.tracebacks import TracebackFrame
from torchscan_lsp.contract.strict import failure_diagnostics
from torchscan_lsp.worker.attribution import SourceRecorder, Workspace
from torchscan_lsp.worker.workspace import PACKAGE_DIR, real_path, under

__all__ = ["JobError", "Blame", "FRAMES_SHOWN", "innermost_frames", "incomplete_message", "forward_advice"]


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
        traceback: list[TracebackFrame] | None = None,
        cause: str | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.type_name = type_name
        self.file = file
        self.line = line
        self.traceback = traceback
        self.cause = cause


@dataclass
class Blame:
    """Where a job's errors are placed when no workspace frame says better.

    Attributes:
        workspace: the job's workspace (its files are the ones a traceback may name).
        rel_file: the target's file, workspace-relative.
        target_line: the target's ``def``/``class`` line, once known.
        annotation_line: its pragma's or decorator's line, once known.
        recorder: the job's source recorder, once it exists (it reads tracebacks).
    """

    workspace: Workspace
    rel_file: str | None
    target_line: int | None = None
    annotation_line: int | None = None
    recorder: SourceRecorder | None = None

    def options_error(self, message: str, type_name: str = "OptionError") -> JobError:
        """An ``options`` error at the target's annotation."""
        line = self.annotation_line if self.annotation_line is not None else self.target_line
        return JobError("options", message, type_name=type_name, file=self.rel_file, line=line)

    def error_from(self, kind: str, error: BaseException) -> JobError:
        """A :class:`JobError` of ``kind`` located at the innermost workspace frame of ``error``.

        Without such a frame the error points at the target: its annotation for an options error,
        its ``def``/``class`` line otherwise.
        """
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
            if kind == "options" and self.annotation_line is not None:
                line = self.annotation_line
            location = {"file": self.rel_file, "line": line}
        root = _root_cause(error)
        return JobError(kind, _exception_message(error), type_name=type(error).__name__,
                        file=location["file"], line=location["line"],
                        traceback=innermost_frames(root, self.workspace),
                        cause=f"{type(root).__name__}: {_exception_message(root)}" if root is not error else None)


FRAMES_SHOWN = 4
"""How many of a traceback's innermost frames a failure carries (:func:`innermost_frames`)."""


def _root_cause(error: BaseException) -> BaseException:
    """The exception ``error`` was made from, following ``raise ... from`` to its first link
    (``diffusers``' "Failed to import ... (look up to see its traceback)" is raised from the
    error that stopped the import). An implicit context (an error while handling another) is no
    cause: the error raised is then the one to show."""
    seen = {id(error)}
    while error.__cause__ is not None and id(error.__cause__) not in seen:
        error = error.__cause__
        seen.add(id(error))
    return error


_STDLIB = real_path(sysconfig.get_paths()["stdlib"])


def _own_frame(filename: str) -> bool:
    """Frames a reader never fixes anything in: pseudo-files (``<frozen importlib._bootstrap>``),
    the standard library's (``importlib.import_module``), this project's, and PyTorch's own, where
    every error of an operator surfaces."""
    if filename.startswith("<"):
        return True
    real = real_path(filename)
    if under(real, _STDLIB) and not {"site-packages", "dist-packages"} & set(Path(real).parts):
        return True
    torch = sys.modules.get("torch")
    torch_dir = os.path.dirname(real_path(torch.__file__)) if getattr(torch, "__file__", None) else None
    return under(real, PACKAGE_DIR) or (torch_dir is not None and under(real, torch_dir))


def innermost_frames(error: BaseException, workspace: Workspace, limit: int = FRAMES_SHOWN) -> list[TracebackFrame]:
    """The innermost ``limit`` frames of ``error``'s traceback that lie below its innermost
    workspace frame (the line a failure is blamed on), outermost first; :func:`_own_frame`'s left
    out. Empty when the error was raised on a workspace line itself: the line blamed says it all.
    An installed library's import that fails in its own modules gives its frames there:
    ``torchvision/_meta_registrations.py:18 in wrapper``."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if not _own_frame(frame.filename)]
    for index in range(len(frames) - 1, -1, -1):
        if workspace.relative(frames[index].filename) is not None:
            frames = frames[index + 1:]
            break
    return [{"file": workspace.shown(frame.filename), "line": int(frame.lineno or 0), "function": frame.name,
             "source": (frame.line or "").strip()} for frame in frames[-limit:]]


_MISMATCH = re.compile(
    r"dtype|scalar type|Input type|weight type|bias type|same device|device type|on device",
    re.IGNORECASE,
)
"""Error messages of a forward that mixed dtypes or devices (PyTorch has no exception type for it)."""

_INCOMPLETE_SHOWN = 5
"""How many of the uncounted items a strict error names before summarising the rest."""


def incomplete_message(error: Any) -> str:
    """What a strict analysis did not count (``error``: an ``IncompleteAnalysisError``): the counts
    that are not complete with their methods' statuses, then each distinct diagnostic behind them as
    ``code in 'path'`` or ``code operator`` (with the operators of ``container_work``)."""
    report = error.report
    failures = tuple(getattr(error, "failures", ()))
    items: list[str] = []
    for diag in failure_diagnostics(report, failures):
        code = diag.get("code") or "diagnostic"
        if diag.get("operator"):
            item = f"{code} {diag['operator']}"
        else:
            item = f"{code} in {fmt.layer_name(diag.get('path'))}"
        message = str(diag.get("message") or "")
        if code == "container_work" and ": " in message:
            # the message ends with the operators: "...: aten.relu x1, aten.add x2."
            item += f" ({message.rsplit(': ', 1)[1].rstrip('.').replace(' x', ' ×')})"
        if item not in items:
            items.append(item)
    counts = "; ".join(str(failure) for failure in failures) or "unknown counts"
    shown = "; ".join(items[:_INCOMPLETE_SHOWN])
    if len(items) > _INCOMPLETE_SHOWN:
        shown += f"; and {len(items) - _INCOMPLETE_SHOWN} more"
    because = f": {shown}" if shown else ""
    return (f"analysis is incomplete for {counts}{because} (the strict option makes this an error; the "
            "report's diagnostics list everything)")


def forward_advice(message: str, input_shape: Any = None,
                   failed_call: tuple[str, str, list[tuple[int, ...]]] | None = None) -> str:
    """``message`` of a failed forward, with the advice that fits the case.

    ``input_shape`` is the option the inputs were generated from (``None``: the factory returned
    its own); ``failed_call`` the innermost module call that raised (its path, class name and
    tensor arguments' shapes), when one did. A dtype or device mismatch names the options that set
    them (generated) or the factory's inputs. A shape error in a call that got none of the
    generated inputs' shapes names that call and what it got: the model's layers disagree, or their
    sizes fit inputs of another size (``Linear(8 * 30 * 30, 10)`` after a convolution of a 28 × 28
    input). Any other shape error on generated inputs shows the shapes they
    had, batch dimension included, and suggests the shape without a leading 1 when every
    input_shape begins with one (the batch dimension written twice); other errors get no advice.
    """
    generated = input_shape is not None
    if _MISMATCH.search(message):
        where = "the target's dtype and device options" if generated else "the inputs the factory returns"
        return (f"{message}; check dtype and device: the inputs' dtype and device must match the model's "
                f"({where})")
    if not _SHAPE.search(message):
        return message
    if not generated:
        return f"{message}; check the shapes of the inputs the factory returns"
    shapes = [input_shape] if isinstance(input_shape, tuple) else list(input_shape)
    made = ", ".join(_shape_text((1, *shape)) for shape in shapes)
    if failed_call is not None and failed_call[2] and not {(1, *s) for s in shapes} & set(failed_call[2]):
        path, kind, got = failed_call
        return (f"{message}; `{path or 'the model'}` ({kind}) got {', '.join(_shape_text(s) for s in got)}, computed by "
                f"the model from the generated inputs {made}: either the model's own layers or code disagree about "
                f"this shape, or the model expects inputs of another size than input_shape={_option_text(input_shape)}")
    advice = (f"{message}; the inputs were generated from input_shape={_option_text(input_shape)} with a batch "
              f"dimension of 1 added, as {made}: input_shape excludes the batch dimension")
    if all(len(shape) > 1 and shape[0] == 1 for shape in shapes):
        bare = [tuple(shape[1:]) for shape in shapes]
        return advice + f" (did you mean input_shape={_option_text(bare[0] if isinstance(input_shape, tuple) else bare)}?)"
    return advice + "; fit input_shape to the model, or return (model, args) from the factory for inputs of your own"


_SHAPE = re.compile(r"size|shape|dimension|channels|\bdim\b|\d+D\b", re.IGNORECASE)
"""Error messages of a forward whose inputs had the wrong shape."""


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _option_text(value: Any) -> str:
    """An input_shape as a pragma writes it: ``(3, 32, 32)`` or ``[(3, 32, 32), (10,)]``."""
    return _shape_text(value) if isinstance(value, tuple) else "[" + ", ".join(_shape_text(s) for s in value) + "]"


def _exception_message(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        return f"{error.msg}" if error.msg else "invalid syntax"
    text = str(error)
    if isinstance(error, KeyError) and error.args:
        text = repr(error.args[0])
    return text or type(error).__name__
