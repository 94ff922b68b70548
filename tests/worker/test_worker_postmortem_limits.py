"""Pure helpers of the worker's supervision: stack dumps to locations, limit messages, memory."""

import os

import pytest

from torchscan_lsp.worker.limits import (
    blame_the_memory_limit,
    format_mebibytes,
    is_allocation_failure,
    job_rss_bytes,
    memory_message,
    rss_bytes,
    timeout_message,
)
from torchscan_lsp.worker.postmortem import last_stack_location, last_traceback_location

DUMP = """some output of the model
Fatal Python error: Segmentation fault

Current thread 0x00007f (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/ws/models/net.py", line 12 in build
  File "/ws/models/net.py", line 40 in <module>
  File "/site/torchscan_lsp/worker/runner.py", line 300 in _build
"""


def test_innermost_workspace_frame_of_the_last_dump():
    assert last_stack_location(DUMP, "/ws") == ("models/net.py", 12)
    # a later dump (a stop at a limit after a first SIGUSR1) wins
    later = DUMP + 'Stack (most recent call first):\n  File "/ws/other.py", line 3 in forward\n'
    assert last_stack_location(later, "/ws") == ("other.py", 3)


def test_no_dump_or_no_workspace_frame():
    assert last_stack_location("just prints\n", "/ws") is None
    assert last_stack_location(DUMP, "/elsewhere") is None


def test_tracebacks_are_read_most_recent_call_last():
    text = """Traceback (most recent call last):
  File "/site/torchscan_lsp/worker/child.py", line 90, in run_job_file
  File "/ws/a.py", line 7, in build
    helper()
  File "/ws/b.py", line 2, in helper
    raise KeyboardInterrupt
KeyboardInterrupt
"""
    assert last_traceback_location(text, "/ws") == ("b.py", 2)
    # faulthandler frames (no comma) are not traceback frames
    assert last_traceback_location(DUMP, "/ws") is None


def test_messages():
    assert format_mebibytes(8192) == "8 GiB"
    assert format_mebibytes(1536) == "1.5 GiB"
    assert format_mebibytes(300) == "300 MiB"
    assert timeout_message(60).startswith("analysis stopped after 60 s")
    assert memory_message(8192).startswith("analysis used more than 8 GiB")


@pytest.mark.parametrize(("type_name", "message"), [
    ("MemoryError", ""),
    ("RuntimeError", "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried "
                     "to allocate 8589934592 bytes. Error code 12 (Cannot allocate memory)"),
    ("RuntimeError", "std::bad_alloc"),
    ("OSError", "[Errno 12] Cannot allocate memory"),
    ("RuntimeError", "could not create a primitive"),  # oneDNN's convolution under a 1 MiB limit
])
def test_allocation_failures(type_name, message):
    assert is_allocation_failure({"type": type_name, "message": message})


@pytest.mark.parametrize("message", [
    "shape mismatch",
    # oneDNN refusing a configuration is no allocation
    "could not create a primitive descriptor for a convolution forward propagation primitive",
])
def test_other_failures(message):
    assert not is_allocation_failure({"type": "RuntimeError", "message": message})


def test_the_memory_limit_is_blamed_for_every_failed_allocation():
    refused = {"type": "RuntimeError", "message": "could not create a primitive", "file": "unet.py", "line": 6}
    result = {"ok": False, "error": {"kind": "forward", **refused},
              "measurements": {"memory": {"error": dict(refused)}, "latency": {"totals": {}}}}
    blame_the_memory_limit(result, 1)
    expected = f"{memory_message(1)}: could not create a primitive"
    # the failure is the memory diagnostic, still on the line that allocated
    assert result["error"] == {"kind": "memory", **refused, "message": expected}
    assert result["measurements"]["memory"]["error"]["message"] == expected
    assert result["measurements"]["latency"] == {"totals": {}}
    other = {"ok": False, "error": {"kind": "forward", "type": "RuntimeError", "message": "shape mismatch"}}
    blame_the_memory_limit(other, 1)
    assert other["error"]["kind"] == "forward"


def test_rss_of_this_process():
    with open("/proc/self/status") as handle:
        status_kib = int(handle.read().split("VmRSS:")[1].split()[0])
    # both read the same counters a moment apart: within a few MiB of each other
    assert abs(rss_bytes(os.getpid()) - status_kib * 1024) < 16 * 1024 * 1024
    assert rss_bytes(2**22 + 12345) is None  # no such process


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")
def test_resident_memory_counts_the_processes_a_job_forked():
    # a child that writes to 128 MiB of fresh memory holds those pages resident: the job's
    # resident memory (what the memory limit is held against) grows by at least that much
    ready_r, ready_w = os.pipe()  # the child says its memory is written
    done_r, done_w = os.pipe()  # the parent says it has measured
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        block = bytearray(128 * 2**20)
        block[::4096] = b"\x01" * len(block[::4096])
        os.write(ready_w, b"x")
        os.read(done_r, 1)
        os._exit(0)
    try:
        alone = int(open(f"/proc/{os.getpid()}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        os.read(ready_r, 1)
        assert job_rss_bytes(os.getpid()) >= alone + 128 * 2**20
    finally:
        os.write(done_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)


def test_one_allocation_larger_than_the_limit_is_named_with_its_size():
    # (1, 100000, 100000, 32) float32: 1.28e12 bytes = 1.16 TiB, far over a 8 GiB limit; refused
    # at once, so nothing was "used": the size and the meta device are the advice
    message = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
               "to allocate 1280000000000 bytes. Error code 12 (Cannot allocate memory)")
    result = {"ok": False, "error": {"kind": "forward", "type": "RuntimeError", "message": message}}
    blame_the_memory_limit(result, 8192)
    assert result["error"]["kind"] == "memory"
    assert result["error"]["message"].startswith("an allocation of 1.16 TiB was refused, more than the 8 GiB memory "
                                                 "limit of the analysis (raise torchscan.memoryLimitMb")
    assert 'device="meta"' in result["error"]["message"]
    # an allocation under the limit failed because the job's memory was nearly all used: as before
    small = {"ok": False, "error": {"kind": "forward", "type": "RuntimeError",
                                   "message": "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1024 bytes"}}
    blame_the_memory_limit(small, 8192)
    assert small["error"]["message"].startswith(memory_message(8192))
