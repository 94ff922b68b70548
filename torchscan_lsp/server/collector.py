"""The cyclic garbage collector's full collections, run when the client is quiet.

A full collection walks every object the collector tracks while it holds the interpreter lock, and
the interpreter starts one whenever its middle generation has been collected ten times and the
old objects have grown by a quarter: as results arrive, that is, while the editor asks most. In
the server of a 400-module model they took 70-130 ms, in which no hint or hover was answered
(a result of that model adds 15,000 tracked objects, its index 11,000). So the server process

* freezes what exists at startup (:func:`gc.freeze`: modules, classes, pygls' and lsprotocol's
  types, 60,000 objects that live as long as the process), which no full collection walks again;
* leaves the two young generations to the interpreter: they hold what was made since their last
  collection, a few milliseconds to walk;
* runs each full collection that is due itself (:meth:`QuietCollector.collect_if_due`), once no
  message came from the client for :data:`QUIET_S`, or at the latest :data:`DEFER_S` after it fell
  due, quiet or not, so that garbage in cycles never piles up.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Callable

__all__ = ["DEFER_S", "QUIET_S", "QuietCollector"]

QUIET_S = 1.0
"""How long no message from the client makes a quiet moment, seconds."""

DEFER_S = 30.0
"""How long a due full collection waits for a quiet moment at most, seconds."""

_NEVER = 2**31 - 1
"""A third threshold the middle generation's collections never reach: no full collection by the
interpreter."""


class QuietCollector:
    """Full collections at quiet moments (see the module's docstring).

    Args:
        quiet_s: no message for this long is a quiet moment.
        defer_s: a due collection runs after this long, quiet or not.
        clock: seconds, monotonic (a test's own).
    """

    def __init__(self, *, quiet_s: float = QUIET_S, defer_s: float = DEFER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._quiet_s, self._defer_s, self._clock = quiet_s, defer_s, clock
        self._heard = clock()
        self._due_since: float | None = None
        self._every = gc.get_threshold()[2]  # the interpreter's own count of middle collections
        self._taken_over = False
        self._task: asyncio.Task | None = None

    def take_over(self) -> None:
        """Freeze what exists now and stop the interpreter's own full collections, for the rest
        of the process: the server's ``main`` calls this once, before serving."""
        gc.freeze()
        young, middle, self._every = gc.get_threshold()
        gc.set_threshold(young, middle, _NEVER)
        self._taken_over = True

    def heard(self) -> None:
        """A message came from the client (on the event loop, before it is handled). After
        :meth:`take_over`, the first one starts the check every half :data:`QUIET_S`."""
        self._heard = self._clock()
        if self._taken_over and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._check_now_and_then())

    def collect_if_due(self) -> bool:
        """Run a full collection if one is due (the middle generation was collected as often as
        the interpreter waits for) and the client is quiet, or it waited :data:`DEFER_S`. Returns
        whether it ran."""
        now = self._clock()
        if gc.get_count()[2] < self._every:
            self._due_since = None
            return False
        if self._due_since is None:
            self._due_since = now
        if now - self._heard < self._quiet_s and now - self._due_since < self._defer_s:
            return False
        gc.collect()
        self._due_since = None
        return True

    async def _check_now_and_then(self) -> None:
        while True:
            await asyncio.sleep(self._quiet_s / 2)
            self.collect_if_due()
