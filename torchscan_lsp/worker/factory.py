"""Building the model: the target is called (a factory) or instantiated (an ``nn.Module``
class) while the source recorder notes where each module is built; what it returns must be a
model, ``(model, args)`` or ``(model, args, kwargs)``, or the training step's mapping
``{"model": ..., "args": ..., "kwargs": ..., "loss": ..., "targets": ...}`` (docs/annotations.md)."""

from __future__ import annotations

import ast
import contextlib
from typing import Any

import torch

from torchscan_lsp.worker.errors import Blame, JobError

__all__ = ["build_model"]

_HINT = "return the model, (model, args) or (model, args, kwargs)"


def build_model(factory: Any, name: str, source: str, blame: Blame,
                device: str | None = None) -> tuple[torch.nn.Module, tuple | None, dict | None]:
    """Call (or instantiate) the target ``factory`` named ``name`` of the file whose text is
    ``source``; return the model and the inputs it returned (``None`` for none: generate them).

    With ``device="meta"`` the factory runs under ``torch.device("meta")``, so that a model too
    big for this machine (a 7B-parameter configuration) is built without memory, as PyTorch's
    meta-device initialisation builds it, instead of on the CPU first and moved afterwards.

    The model's root is said to be defined on the factory's only ``return`` line (else the target's
    line) when no workspace line built it.

    Raises:
        JobError: ``factory`` for a target that is not callable, not a module class, or raised;
            ``result`` for a return value of another shape.
    """
    assert blame.recorder is not None
    recorder = blame.recorder
    is_class = isinstance(factory, type)
    if is_class and not issubclass(factory, torch.nn.Module):
        raise JobError("factory", f"'{name}' is a class but not an nn.Module subclass; annotate a factory function "
                       "or an nn.Module class", type_name="TypeError", file=blame.rel_file, line=blame.target_line)
    if not callable(factory):
        raise JobError("factory", f"'{name}' is not callable ({type(factory).__name__})",
                       type_name="TypeError", file=blame.rel_file, line=blame.target_line)
    try:
        building = torch.device("meta") if device == "meta" else contextlib.nullcontext()
        with recorder.recording_definitions(None if is_class else factory), building:
            produced = factory()
    except BaseException as error:  # noqa: BLE001
        if isinstance(error, KeyboardInterrupt):
            raise
        raise blame.error_from("factory", error) from None
    if is_class or recorder.root_defined_at is None:
        line = blame.target_line if is_class else (_return_line(source, name) or blame.target_line)
        if line is not None:
            recorder.root_defined_at = {"file": blame.rel_file, "line": line}
    return _unpack(produced, name, blame)


def _result_error(message: str, blame: Blame) -> JobError:
    """A ``result`` error at the line that built the root module (else the target's)."""
    location = blame.recorder.root_defined_at if blame.recorder is not None else None
    file = location["file"] if location else blame.rel_file
    line = location["line"] if location else blame.target_line
    return JobError("result", message, type_name="TypeError", file=file, line=line)


def _unpack(produced: Any, name: str, blame: Blame) -> tuple[torch.nn.Module, tuple | None, dict | None]:
    if isinstance(produced, torch.nn.Module):
        return produced, None, None
    if isinstance(produced, dict) and "model" in produced:
        # the training step's form: its loss and targets are for the step (engine.training.step)
        if "args" not in produced and "kwargs" not in produced:
            return _unpack(produced["model"], name, blame)
        produced = (produced["model"], produced.get("args"), produced.get("kwargs"))
    if isinstance(produced, tuple) and 2 <= len(produced) <= 3:
        model, args = produced[0], produced[1]
        kwargs = produced[2] if len(produced) == 3 else None
        if not isinstance(model, torch.nn.Module):
            raise _result_error(f"'{name}' returned a tuple whose first item is {_a_type(model)}, not an nn.Module; "
                                f"{_HINT}", blame)
        if isinstance(args, torch.Tensor):
            args = (args,)
        elif isinstance(args, list):
            args = tuple(args)
        elif args is None:
            args = ()
        elif not isinstance(args, tuple):
            raise _result_error(f"'{name}' returned args of type {type(args).__name__}; args must be a tuple of "
                                "positional inputs (use (model, (), kwargs) for keyword inputs only)", blame)
        if kwargs is None:
            kwargs = {}
        elif not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise _result_error(f"'{name}' returned kwargs of type {type(kwargs).__name__}; kwargs must be a dict "
                                "with string keys", blame)
        return model, args, kwargs
    if isinstance(produced, tuple):
        raise _result_error(f"'{name}' returned a tuple of {len(produced)} items; {_HINT}", blame)
    raise _result_error(f"'{name}' returned {_a_type(produced)}, not an nn.Module; {_HINT}", blame)


def _return_line(source: str, name: str) -> int | None:
    """The line of the factory's only ``return`` statement, when it has exactly one."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            returns = list(_own_returns(node))
            return returns[0].lineno if len(returns) == 1 else None
    return None


def _a_type(value: Any) -> str:
    """``value``'s type with its article, and the value when short: ``an int (3)``, ``a str ('x')``."""
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    text = repr(value)
    shown = f" ({text})" if isinstance(value, (int, float, str, bool)) and len(text) <= 40 else ""
    return f"{article} {name}{shown}"


def _own_returns(function: Any) -> Any:
    """The ``return`` statements of ``function`` itself, not of functions or classes inside it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
