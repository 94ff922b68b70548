"""Whether a JSON value read back from storage has the shape of one of the contract's types.

A result kept on disk between sessions is only as good as the file it was read from: valid JSON
that is not a result (a hand-edited file, one written by another program) must never stand in for
an analysis. :func:`result_problem` checks an ``ok`` :class:`~.messages.Result` against the
TypedDicts of this package (:class:`~.report.AnalysisReport`, :class:`~.messages.SourceMap` and
what they hold) and the report's :data:`~.report.SCHEMA_VERSION`, and says what is wrong where.
The check reads the types' own annotations (``typing.get_type_hints``), so it follows the contract
as it changes.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from torchscan_lsp.contract.messages import SourceMap
from torchscan_lsp.contract.report import SCHEMA_VERSION, AnalysisReport

__all__ = ["type_problem", "result_problem"]


Check = typing.Callable[[Any], "tuple[str, str] | None"]
"""A compiled check: ``None``, or where below the value (``.key[3]``) and what is wrong there."""


def type_problem(value: Any, hint: Any, where: str = "") -> str | None:
    """What makes ``value`` (plain JSON: dicts, lists, strings, numbers, booleans, ``None``) not an
    instance of ``hint``, or ``None`` when it is one.

    ``hint`` is a type of the contract: a TypedDict (its required keys must be there, every key it
    names must hold its type, other keys are allowed), ``list[X]``, ``dict[str, X]``, a
    ``Literal``, a union (``X | None``), ``Any``, or ``str``, ``int``, ``float`` (an int is a
    float, as in JSON), ``bool``, ``None``. A boolean is never an int here, though Python's
    ``bool`` subclasses ``int``: JSON keeps them apart.

    Returns: the first problem found, as ``"<where>: <what was expected>, got <what was there>"``,
    ``where`` being the path of keys and indexes from the top (``report.layers[3].metrics``).

    Raises:
        TypeError: ``hint`` is none of the forms above.
    """
    found = _compile(hint)(value)
    if found is None:
        return None
    below, what = found
    return f"{(where + below).lstrip('.') or 'the value'}: {what}"


@functools.cache
def _compile(hint: Any) -> Check:
    """The check of ``hint``, built once per type (a report holds thousands of values)."""
    if hint is Any:
        return lambda value: None
    if hint is None or hint is type(None):
        return lambda value: None if value is None else ("", f"expected null, got {_kind(value)}")
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        allowed = typing.get_args(hint)
        return lambda value: None if value in allowed else ("", f"expected one of {list(allowed)}, got {value!r}")
    if origin in (typing.Union, types.UnionType):
        return _union(tuple(_compile(option) for option in typing.get_args(hint)))
    if origin in (list, tuple):
        return _list(_compile((typing.get_args(hint) or (Any,))[0]))
    if origin in (dict, Mapping) or hint is dict:
        return _dict(_compile((typing.get_args(hint) or (str, Any))[1]))
    if isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__required_keys__"):
        return _typed_dict(hint)
    if hint in _SCALARS:
        test = _SCALARS[hint]
        return lambda value: None if test(value) else ("", f"expected {hint.__name__}, got {_kind(value)}")
    raise TypeError(f"type_problem cannot check {hint!r}")


_SCALARS: dict[Any, typing.Callable[[Any], bool]] = {
    bool: lambda value: isinstance(value, bool),
    int: lambda value: isinstance(value, int) and not isinstance(value, bool),
    float: lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    str: lambda value: isinstance(value, str),
}


def _union(options: tuple[Check, ...]) -> Check:
    def check(value: Any) -> tuple[str, str] | None:
        problems = []
        for option in options:
            problem = option(value)
            if problem is None:
                return None
            problems.append(problem)
        return min(problems, key=lambda problem: len(problem[1]))  # the nearest miss says most

    return check


def _list(item: Check) -> Check:
    def check(value: Any) -> tuple[str, str] | None:
        if not isinstance(value, list):
            return "", f"expected a list, got {_kind(value)}"
        for index, element in enumerate(value):
            if (problem := item(element)) is not None:
                return f"[{index}]{problem[0]}", problem[1]
        return None

    return check


def _dict(item: Check) -> Check:
    def check(value: Any) -> tuple[str, str] | None:
        if not isinstance(value, dict):
            return "", f"expected an object, got {_kind(value)}"
        for key, element in value.items():
            if (problem := item(element)) is not None:
                return f".{key}{problem[0]}", problem[1]
        return None

    return check


def _typed_dict(typed: type) -> Check:
    required = frozenset(typed.__required_keys__)  # type: ignore[attr-defined]
    fields: list[tuple[str, Check]] = []

    def check(value: Any) -> tuple[str, str] | None:
        if not isinstance(value, dict):
            return "", f"expected {typed.__name__} (an object), got {_kind(value)}"
        if not required <= value.keys():
            return "", f"{typed.__name__} without {', '.join(sorted(required - value.keys()))}"
        if not fields:  # resolved on first use: a TypedDict may name types defined after it
            fields[:] = [(key, _compile(hint)) for key, hint in typing.get_type_hints(typed).items()]
        for key, field in fields:
            if key in value and (problem := field(value[key])) is not None:
                return f".{key}{problem[0]}", problem[1]
        return None

    return check


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"[:80]


def result_problem(result: Any) -> str | None:
    """What makes ``result`` not a successful analysis result of this contract, or ``None``.

    A successful result (:class:`~.messages.Result` with ``ok`` true) has a ``report`` that is an
    :class:`~.report.AnalysisReport` of schema version :data:`~.report.SCHEMA_VERSION`, a
    ``source_map`` that is a :class:`~.messages.SourceMap`, ``imported_files`` (workspace-relative
    paths), ``library_stamps`` (modification times in nanoseconds by absolute path) and, when
    present, ``measurements`` (an object by kind) and ``target`` (a string). The result of a
    training estimate alone (``phase`` ``"training"``, as the editor's session keeps it) has
    ``measurements`` holding a ``train`` object instead of the report and its source map; a plan
    job's result (``kind`` ``"plan"``) has a ``plan`` (the ``plan_training`` report, an object) in
    place of the report and the source map.

    Returns: the first problem, as :func:`type_problem` words it.
    """
    if not isinstance(result, dict):
        return f"the result: expected an object, got {_kind(result)}"
    if result.get("ok") is not True:
        return f"ok: expected true, got {_kind(result.get('ok'))}"
    report = result.get("report")
    if isinstance(report, dict) and report.get("schema_version") != SCHEMA_VERSION:
        return f"report.schema_version: expected {SCHEMA_VERSION}, got {_kind(report.get('schema_version'))}"
    analysed = {"plan": dict[str, Any]} if result.get("kind") == "plan" else {"report": AnalysisReport,
                                                                              "source_map": SourceMap}
    wanted = {**analysed, "imported_files": list[str], "library_stamps": dict[str, int]}
    if result.get("phase") == "training":
        wanted = {"measurements": dict[str, Any], "imported_files": list[str], "library_stamps": dict[str, int]}
        if not isinstance((result.get("measurements") or {}).get("train"), dict):
            return "measurements.train: expected an object in a training estimate's result"
    for key, hint in wanted.items():
        if key not in result:
            return f"the result has no {key}"
        if problem := type_problem(result[key], hint, key):
            return problem
    optional = {"measurements": dict[str, Any], "target": str | None}
    for key, hint in optional.items():
        if key in result and (problem := type_problem(result[key], hint, key)):
            return problem
    return None
