"""Per-job limits and process hygiene, shared by the server side and the worker processes.

Never imports torch. Three concerns, each a few small functions:

* **Dying with the parent** (:func:`die_with_parent`): a worker process asks the kernel to send it
  ``SIGKILL`` when its parent goes away (Linux ``PR_SET_PDEATHSIG``), so a server that crashes or
  is killed leaves no model running; :func:`isolate_forked_child` does that and the rest of
  leaving the warm parent behind for the children it forks.
* **Memory** (:func:`rss_bytes`, :func:`cap_address_space`, :func:`blame_the_memory_limit`): the server
  polls the resident set size of each job's process and kills it past the limit; in the process
  itself an address-space cap a good deal above the limit makes one huge allocation fail at once
  (before it can touch pages) instead of swapping the machine.
* **Messages** (:func:`timeout_message`, :func:`memory_message`): the text of the diagnostics.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal
import sys
from typing import Any, Mapping

_PR_SET_PDEATHSIG = 1
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

ADDRESS_SPACE_FACTOR = 2
"""The address-space cap is the process's size at the start of the job plus this many times the
memory limit: virtual reservations (thread stacks, allocator arenas) must not trip it, while an
allocation of far more than the limit still fails at once."""

def die_with_parent(expected_parent: int | None = None) -> bool:
    """Have the kernel ``SIGKILL`` this process when its parent exits (Linux only).

    ``expected_parent`` is the pid the caller believes is its parent; if the parent already died
    before the request took effect (the process was re-parented), this process exits at once.
    Returns whether the request is in place (``False`` off Linux, where the caller falls back to
    other means: the parent's pipe closing, process groups).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The process's own symbols include libc's (find_library would start ldconfig).
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)
    return True


def isolate_forked_child(inherited: list[int], parent: int) -> None:
    """In a child just forked by the warm parent ``parent``: a session of its own (so its whole
    process group can be killed), death with the parent, default signal handling, and none of the
    parent's file descriptors ``inherited`` (its event channel, its other children's pipes)."""
    os.setsid()
    die_with_parent(parent)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in inherited:
        os.close(fd)


def job_rss_bytes(pid: int) -> int | None:
    """Resident set size of job process ``pid`` and of the processes it forked (a plan's policies run
    in processes of their own, :mod:`torchscan_lsp.engine.training.parallel`), in bytes, from
    ``/proc``; ``None`` when unknown (the process is gone, or the platform has no ``/proc``)."""
    own = rss_bytes(pid)
    if own is None:
        return None
    return own + sum(rss_bytes(child) or 0 for child in _children(pid))


def rss_bytes(pid: int) -> int | None:
    """Resident set size of process ``pid`` alone in bytes, from ``/proc``; ``None`` when unknown
    (the process is gone, or the platform has no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    """The processes forked by ``pid``'s main thread and, in turn, by theirs (``/proc``'s
    ``children`` file; none where the kernel does not provide it)."""
    found, waiting = [], [pid]
    while waiting:
        parent = waiting.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children", "rb") as handle:
                children = [int(child) for child in handle.read().split()]
        except (OSError, ValueError):
            children = []
        found += children
        waiting += children
    return found


def _address_space_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def cap_address_space(memory_mb: float | None) -> None:
    """Cap this process's address space (``RLIMIT_AS``) at its current size plus
    :data:`ADDRESS_SPACE_FACTOR` times ``memory_mb`` MiB; nothing happens without a limit, off
    Linux, or when the current hard limit is lower already."""
    if not memory_mb:
        return
    current = _address_space_bytes()
    if current is None:
        return
    cap = current + int(ADDRESS_SPACE_FACTOR * memory_mb * 1024 * 1024)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and hard < cap:
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def format_mebibytes(memory_mb: float) -> str:
    """``8192`` → ``"8 GiB"``, ``1536`` → ``"1.5 GiB"``, ``300`` → ``"300 MiB"``."""
    if memory_mb >= 1024:
        return f"{memory_mb / 1024:g} GiB"
    return f"{memory_mb:g} MiB"


def timeout_message(timeout_s: float) -> str:
    """The message of a job stopped at its wall-clock limit of ``timeout_s`` seconds."""
    return (f"analysis stopped after {timeout_s:g} s (raise torchscan.timeoutSeconds, or the target's "
            "timeout option, if the model needs longer)")


def memory_message(memory_mb: float) -> str:
    """The message of a job stopped at its memory limit of ``memory_mb`` MiB."""
    return (f"analysis used more than {format_mebibytes(memory_mb)} and was stopped "
            "(raise torchscan.memoryLimitMb if the model needs more)")


_TRIED = re.compile(r"tried to allocate (\d+) bytes")


def allocation_message(message: str, memory_mb: float) -> str:
    """The memory diagnostic of an allocation that failed under the cap: when the allocator says
    how much was asked (PyTorch's ``you tried to allocate N bytes``) and it is more than the limit
    itself, that one allocation was refused (nothing was used): its size, and the way to analyse a
    model or an input that large without memory; else :func:`memory_message`."""
    found = _TRIED.search(message)
    asked = int(found.group(1)) if found else 0
    if asked <= memory_mb * 1024 * 1024:
        return f"{memory_message(memory_mb)}: {message}"
    size = f"{asked / 2**40:.2f} TiB" if asked >= 2**40 else f"{asked / 2**30:.1f} GiB"
    return (f"an allocation of {size} was refused, more than the {format_mebibytes(memory_mb)} memory limit of the "
            f"analysis (raise torchscan.memoryLimitMb if the model needs more; device=\"meta\" analyses a model or "
            f"input of any size without memory): {message}")


def is_allocation_failure(error: Mapping[str, Any]) -> bool:
    """Whether an error record (``type``, ``message``) is an allocation that failed: Python's
    ``MemoryError``, PyTorch's CPU allocator refusing (``DefaultCPUAllocator: can't allocate
    memory``), C++'s ``std::bad_alloc``, the system's ``ENOMEM`` (``Cannot allocate memory``), or
    oneDNN unable to create a primitive (the allocation of its scratch memory or its generated code
    failed; a primitive *descriptor* it cannot create is an unsupported configuration instead)."""
    if error.get("type") == "MemoryError":
        return True
    return _ALLOCATION_FAILED.search(str(error.get("message") or "")) is not None


_ALLOCATION_FAILED = re.compile(
    r"can't allocate memory|cannot allocate memory|out of memory|std::bad_alloc"
    r"|could not create a primitive(?! descriptor)",
    re.IGNORECASE,
)


def blame_the_memory_limit(result: dict[str, Any], memory_mb: float) -> None:
    """Under an address-space cap of ``memory_mb`` MiB (:func:`cap_address_space`), an allocation
    that failed means the limit was hit: make such a failed result a ``memory`` failure, and such a
    failed measurement's error say so, each with :func:`memory_message` before the original text."""
    error = result.get("error")
    if not result.get("ok") and isinstance(error, dict) and is_allocation_failure(error):
        error["kind"] = "memory"
        error["message"] = allocation_message(str(error.get("message")), memory_mb)
    for measurement in (result.get("measurements") or {}).values():
        failed = measurement.get("error") if isinstance(measurement, dict) else None
        if isinstance(failed, dict) and is_allocation_failure(failed):
            failed["message"] = allocation_message(str(failed.get("message")), memory_mb)
