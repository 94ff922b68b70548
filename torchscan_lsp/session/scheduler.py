"""One analysis job per target, at most ``max_workers`` at once; a newer job cancels the older.

Jobs are coroutines run as asyncio tasks on the server's event loop; they wait on worker
processes, so the loop stays free to answer requests. Cancelling a task kills its worker (see
:func:`torchscan_lsp.worker.client.run`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Awaitable, Callable, Hashable


class Scheduler:
    """Runs keyed jobs with bounded concurrency.

    Args:
        max_workers: how many jobs may run at once (at least 1).
    """

    def __init__(self, max_workers: int = 2) -> None:
        self._tasks: dict[Hashable, asyncio.Task] = {}
        self._limit = asyncio.Semaphore(max(1, int(max_workers)))

    def set_max_workers(self, max_workers: int) -> None:
        """Change the limit for jobs that start from now on (running jobs keep their slot)."""
        self._limit = asyncio.Semaphore(max(1, int(max_workers)))

    def submit(self, key: Hashable, job: Callable[[], Awaitable[Any]], *, delay_s: float = 0.0,
               bounded: bool = True) -> asyncio.Task:
        """Start ``job()`` for ``key``, cancelling the job already queued or running for ``key``.

        The job waits ``delay_s`` seconds (a debounce: a newer submit cancels it meanwhile), then
        until the cancelled job of ``key`` has finished (its worker process is gone), then for a
        free slot. With ``bounded=False`` it waits for no slot: it takes one itself
        (:meth:`slot`) for the part of its work that needs one (a worker process, after a look-up
        in the cache that needs none). Returns its task.
        """
        previous = self._tasks.get(key)
        self.cancel(key)
        task = asyncio.ensure_future(self._run(job, self._limit if bounded else None, delay_s, previous))
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    def slot(self) -> asyncio.Semaphore:
        """One of the ``max_workers`` slots, for ``async with``: what a job submitted with
        ``bounded=False`` holds while its worker runs."""
        return self._limit

    def is_current(self, key: Hashable, task: asyncio.Task | None) -> bool:
        """Whether ``task`` is still the newest job of ``key`` (not superseded)."""
        return task is not None and self._tasks.get(key) is task

    def task(self, key: Hashable) -> asyncio.Task | None:
        """The newest job task of ``key`` (done or not), while it is remembered."""
        return self._tasks.get(key)

    def cancel(self, key: Hashable) -> bool:
        """Cancel the job of ``key``; returns whether there was one."""
        task = self._tasks.pop(key, None)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def cancel_all(self) -> None:
        """Cancel every job (at shutdown)."""
        for key in list(self._tasks):
            self.cancel(key)

    async def wait_idle(self) -> None:
        """Wait until no job is queued or running (jobs started meanwhile included)."""
        while pending := [t for t in self._tasks.values() if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    @staticmethod
    async def _run(job: Callable[[], Awaitable[Any]], limit: asyncio.Semaphore | None, delay_s: float,
                   previous: asyncio.Task | None) -> Any:
        # A job ends only after the job it replaced has ended (its worker killed and reaped), also
        # when it is cancelled itself: so a chain of replaced jobs never runs two workers per key.
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            if previous is not None:
                await asyncio.wait({previous})  # (gather would cancel it again if this one is cancelled)
            if limit is None:
                return await job()
            async with limit:
                return await job()
        finally:
            while previous is not None and not previous.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({previous})

    def _forget(self, key: Hashable, task: asyncio.Task) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
