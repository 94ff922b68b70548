"""Which module each deep copy made while a factory runs was copied from.

``nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])`` (DETR's and PyTorch's own
``_get_clones``) builds a model's layers without running their constructors: the copies' children
are never registered through a hook, so the lines that built the original's children are the only
lines that built theirs. While :meth:`CopyTracker.tracking` runs, ``copy.deepcopy`` is wrapped: a
top-level call hands the copy a memo of its own, and when it returns, every module in that memo is
mapped to the module it was copied from (``copy`` keeps each original alive in the memo, under the
memo's own id). Code that bound ``deepcopy`` before the factory ran (``from copy import deepcopy``
at import) calls the unwrapped function, and its copies keep their ancestors' lines.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator

import torch

__all__ = ["CopyTracker"]


class CopyTracker:
    """Deep copies of modules made while :meth:`tracking` ran, each with its original."""

    def __init__(self) -> None:
        #: id of a copy -> (the copy, the module it was copied from); both held, so ids stay valid
        self._originals: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """Wrap ``copy.deepcopy`` until the block ends."""
        original = copy.deepcopy

        def deepcopy(value: Any, memo: dict[int, Any] | None = None, _nil: Any = None) -> Any:
            if memo is not None:  # a call inside a copy (copy's own recursion, a __deepcopy__)
                return original(value, memo)
            memo = {}
            result = original(value, memo)
            self._note(memo)
            return result

        copy.deepcopy = deepcopy
        try:
            yield
        finally:
            copy.deepcopy = original

    def _note(self, memo: dict[int, Any]) -> None:
        for source in memo.get(id(memo), ()):
            if isinstance(source, torch.nn.Module):
                made = memo.get(id(source))
                if isinstance(made, torch.nn.Module) and made is not source:
                    self._originals[id(made)] = (made, source)

    def originals(self, module: torch.nn.Module) -> Iterator[torch.nn.Module]:
        """The modules ``module`` was deep-copied from, nearest first (a copy of a copy has two)."""
        entry = self._originals.get(id(module))
        while entry is not None and entry[0] is module:
            module = entry[1]
            yield module
            entry = self._originals.get(id(module))
