"""Source lines of model code that a running program cannot see on its own, read with ``ast`` only.

Two questions the worker's source attribution asks about a file it ran through (never importing or
running it here):

* **Which line built each child of a container constructor?** ``nn.Sequential(`` spread over five
  lines registers all its children while its one call runs, so every frame on the stack points at
  the call's first line. Given the span of the call being executed (from the frame's current
  instruction, ``code.co_positions()``), :meth:`SourceLines.child_line` maps each child
  name the container gives (``"0"``, ``"1"``, ... or the keys) to the line of the argument or
  element that built it, following the naming rules of PyTorch's containers:

  - ``nn.Sequential(a, b, c)``: positional arguments are children ``"0"``, ``"1"``, ...;
    ``nn.Sequential(OrderedDict([("conv", a), ...]))`` (or ``OrderedDict(conv=a)``): the keys;
  - ``nn.ModuleList([a, b])`` / ``((a, b))``: the elements, ``"0"``, ``"1"``, ...; a list
    comprehension or generator gives every child the line of its element expression;
  - ``nn.ModuleDict({"a": m, ...})``, ``nn.ModuleDict([("a", m), ...])``, an ``OrderedDict`` or a
    ``dict(a=m, ...)`` argument: the keys; a dict comprehension gives its value expression's line.

  A ``*starred`` argument ends the positional mapping (the indexes after it are unknown).
* **On which line is a class defined?** :meth:`SourceLines.class_line` finds a class above a
  line of its body, or by its ``__qualname__`` (``Outer.Inner``; classes inside functions carry
  ``<locals>`` and are found by the same path).

Lines are 1-based; columns are UTF-8 byte offsets, as both ``ast`` and ``co_positions`` give them.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

__all__ = ["SEQUENTIAL", "MODULE_LIST", "MODULE_DICT", "SourceLines"]

SEQUENTIAL = "sequential"
MODULE_LIST = "module_list"
MODULE_DICT = "module_dict"
"""The container kinds :meth:`SourceLines.child_line` knows the naming rules of."""

_EVERY = "*"
"""The key of a line that built every child (a comprehension): no child of a container is named ``*``."""

Position = tuple[int, int]
"""A place in a file: 1-based line and 0-based UTF-8 byte column (an expression's end: just past it)."""


class SourceLines:
    """One file's source text, with the look-ups the worker needs (parsed only as far as needed).

    Args:
        source: the file's text. A text that does not parse gives no answers (every look-up
            returns None), never an error: the worker then keeps the frame's own line.
    """

    def __init__(self, source: str):
        self._lines = source.splitlines()
        self._source = source
        self._children: dict[tuple[Position, Position, str], dict[str, int]] = {}
        self._classes: dict[str, int] | None = None

    def child_line(self, start: Position, end: Position, kind: str, name: str) -> int | None:
        """The line of the expression that built child ``name`` of the container call spanning
        ``start`` to ``end`` (the span ``co_positions`` gives the call instruction).

        ``kind`` is :data:`SEQUENTIAL`, :data:`MODULE_LIST` or :data:`MODULE_DICT` (the runtime type
        of the container, which the worker knows; the call's spelling is not trusted). None when the
        span is no call or its arguments are not literal enough to tell. Only the call's own text
        is parsed: a file's whole tree costs tens of milliseconds, a call's a fraction of one.
        """
        key = (start, end, kind)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = self._container_children(start, end, kind)
        line = children.get(name)
        return children.get(_EVERY) if line is None else line

    def _call_between(self, start: Position, end: Position) -> ast.Call | None:
        (first, column), (last, end_column) = start, end
        if not 1 <= first <= last <= len(self._lines):
            return None
        text = [line.encode("utf-8") for line in self._lines[first - 1:last]]
        text[-1] = text[-1][:end_column]
        text[0] = text[0][column:]
        try:
            node = ast.parse(b"\n".join(text).decode("utf-8"), mode="eval").body
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not isinstance(node, ast.Call):
            return None
        for child in ast.walk(node):  # back to the file's line numbers
            if hasattr(child, "lineno"):
                child.lineno += first - 1
        return node

    def _container_children(self, start: Position, end: Position, kind: str) -> dict[str, int]:
        call = self._call_between(start, end)
        if call is None:
            return {}
        if kind == SEQUENTIAL:
            if len(call.args) == 1 and not call.keywords and _is_ordered_dict(call.args[0]):
                return dict(_ordered_dict_items(call.args[0]))  # type: ignore[arg-type]
            return dict(_positional(call.args))
        argument = _first_argument(call, "modules")
        if argument is None:
            return {}
        if kind == MODULE_LIST:
            return dict(_sequence_items(argument))
        if kind == MODULE_DICT:
            return dict(_mapping_items(argument))
        return {}

    def class_line(self, qualname: str, before: int | None = None) -> int | None:
        """The ``class`` line (after any decorators) of the class named ``qualname``, or None.

        ``before``: a line inside the class body (its first method's ``co_firstlineno``): the
        nearest ``class <name>`` line above it is the class's, found without parsing the file.
        Otherwise the file is parsed once and the class found by its qualified name.
        """
        name = qualname.rpartition(".")[2]
        if before is not None and 1 <= before <= len(self._lines) + 1:
            pattern = re.compile(rf"\s*class\s+{re.escape(name)}\s*[(:]")
            for index in range(before - 1, 0, -1):
                if pattern.match(self._lines[index - 1]):
                    return index
        if self._classes is None:
            self._classes = {}
            try:
                tree = ast.parse(self._source)
            except (SyntaxError, ValueError, RecursionError):
                return None
            _collect_classes(tree.body, "", self._classes)
        return self._classes.get(qualname)


def _positional(args: list[ast.expr]) -> Iterator[tuple[str, int]]:
    for index, arg in enumerate(args):
        if isinstance(arg, ast.Starred):
            return
        yield str(index), arg.lineno


def _first_argument(call: ast.Call, keyword: str) -> ast.expr | None:
    if call.args:
        return None if isinstance(call.args[0], ast.Starred) else call.args[0]
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    return None


def _sequence_items(node: ast.expr) -> Iterator[tuple[str, int]]:
    if isinstance(node, (ast.List, ast.Tuple)):
        yield from _positional(node.elts)
    elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        # every child is built by the one element expression; its names are 0, 1, ... in turn
        yield from _every(node.elt.lineno)


def _mapping_items(node: ast.expr) -> Iterator[tuple[str, int]]:
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value, value.lineno
    elif isinstance(node, ast.DictComp):
        yield from _every(node.value.lineno)
    elif _is_ordered_dict(node, ("OrderedDict", "dict")):
        yield from _ordered_dict_items(node)  # type: ignore[arg-type]
    else:
        yield from _pairs(node)


def _pairs(node: ast.expr) -> Iterator[tuple[str, int]]:
    """``[("a", m), ("b", n)]``: each key with its value's line."""
    if isinstance(node, (ast.List, ast.Tuple)):
        for item in node.elts:
            if (isinstance(item, ast.Tuple) and len(item.elts) == 2 and isinstance(item.elts[0], ast.Constant)
                    and isinstance(item.elts[0].value, str)):
                yield item.elts[0].value, item.elts[1].lineno


def _is_ordered_dict(node: ast.expr, names: tuple[str, ...] = ("OrderedDict",)) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name in names


def _ordered_dict_items(call: ast.Call) -> Iterator[tuple[str, int]]:
    if call.args:
        yield from _mapping_items(call.args[0]) if isinstance(call.args[0], ast.Dict) else _pairs(call.args[0])
    for item in call.keywords:
        if item.arg is not None:
            yield item.arg, item.value.lineno


def _every(line: int) -> Iterator[tuple[str, int]]:
    yield _EVERY, line


def _collect_classes(body: list[ast.stmt], prefix: str, found: dict[str, int]) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            name = prefix + node.name
            found.setdefault(name, node.lineno)
            _collect_classes(node.body, name + ".", found)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _collect_classes(node.body, f"{prefix}{node.name}.<locals>.", found)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            # classes defined under ``if TYPE_CHECKING:``, in ``try:`` import fallbacks and the like
            for part in ("body", "orelse", "finalbody"):
                _collect_classes(getattr(node, part, []), prefix, found)
            for handler in getattr(node, "handlers", []):
                _collect_classes(handler.body, prefix, found)
