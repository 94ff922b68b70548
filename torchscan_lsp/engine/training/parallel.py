"""A plan's policies estimated side by side, one forked process per CPU (at most :data:`MAX_PROCESSES`).

Each policy builds, shards and estimates its own copy of the model on fake tensors, sharing nothing
with the others, so policies are independent and a machine with several cores can run several at
once: on two cores, the four policies of a Llama-7B plan take about the time of the costliest two.
The processes are forked (the factory is a closure, which could not be sent to a spawned process),
from a process that has the plan's fake process group set up; each asks this process for the next
policy, sends its progress messages and, at the end of each policy, its record and the number of
estimates it made. A policy whose process died (killed for memory, a crash in native code) gets a
record that says so; the others are unaffected. Records come back in the plan's order.

Where forking is not available or not safe (no ``os.fork``, CUDA initialised here, one CPU, one
policy), :func:`run_policies` runs them one after another in this process.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import connection
from typing import Any

__all__ = ["MAX_PROCESSES", "processes_for", "run_policies"]

#: The most processes a plan forks: each holds a fake copy of the model (hundreds of MiB for 7B).
MAX_PROCESSES = 4

#: ``run_one(index, on_progress) -> (record, estimates)`` for the policy at ``index``.
RunOne = Callable[[int, Callable[[str], None]], tuple[dict[str, Any], int]]


def processes_for(count: int) -> int:
    """How many processes a plan of ``count`` policies uses here: one per CPU this process may run
    on, at most :data:`MAX_PROCESSES` and ``count``; 1 (no fork) where forking is unsafe."""
    if count < 2 or not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return 1
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # CUDA cannot be used again in a forked child
        return 1
    return max(1, min(count, len(os.sched_getaffinity(0)), MAX_PROCESSES))


def run_policies(run_one: RunOne, order: Sequence[int], processes: int,
                 on_progress: Callable[[int, str, int], None], died: Callable[[int, str], dict[str, Any]]
                 ) -> dict[int, tuple[dict[str, Any], int]]:
    """Run the policies ``order`` names (indices, the costliest first) in ``processes`` forked
    processes, each taking the next policy when it is free.

    Args:
        run_one: runs one policy (in a child): its record and the estimates it made.
        order: the policies' indices in the order they are handed out.
        processes: how many children (:func:`processes_for`); 1 runs every policy here.
        on_progress: ``on_progress(index, message, finished)``, in this process, for each progress
            message of the policy at ``index`` (``finished``: how many policies have ended).
        died: the record of a policy whose process ended before it had answered, from its index and
            what ended it.

    Returns:
        ``{index: (record, estimates)}`` for every index of ``order``.
    """
    results: dict[int, tuple[dict[str, Any], int]] = {}
    if processes <= 1:
        for index in order:
            results[index] = run_one(index, lambda message, index=index: on_progress(index, message, len(results)))
        return results
    waiting = list(order)
    running: dict[connection.Connection, tuple[int, int | None]] = {}  # pipe -> (pid, its policy)
    for _ in range(min(processes, len(waiting))):
        ours, theirs = connection.Pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's side, seen through its messages
            ours.close()
            for other in running:
                other.close()
            _child(run_one, theirs)
        theirs.close()
        running[ours] = (pid, None)
        _hand_out(ours, running, waiting)
    while running:
        for pipe in connection.wait(list(running)):
            pid, index = running[pipe]
            try:
                kind, *message = pipe.recv()
            except (EOFError, OSError):
                _, status = os.waitpid(pid, 0)
                if index is not None:
                    results[index] = (died(index, _ending(status)), 0)
                    on_progress(index, "ended", len(results))
                del running[pipe]
                pipe.close()
                continue
            if kind == "progress":
                on_progress(index, message[0], len(results))
            elif kind == "record":
                results[index] = (message[0], message[1])
                _hand_out(pipe, running, waiting)
    return results


def _hand_out(pipe: connection.Connection, running: dict, waiting: list[int]) -> None:
    pid, _ = running[pipe]
    index = waiting.pop(0) if waiting else None
    running[pipe] = (pid, index)
    pipe.send(index)  # None: nothing left, the child exits


def _child(run_one: RunOne, pipe: connection.Connection) -> None:  # pragma: no cover - runs in the child
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        while (index := pipe.recv()) is not None:
            record, estimates = run_one(index, lambda message: pipe.send(("progress", message)))
            pipe.send(("record", record, estimates))
    except BaseException:  # noqa: BLE001 - the parent sees the pipe close and says the policy's process ended
        traceback.print_exc()
        status = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _ending(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"
