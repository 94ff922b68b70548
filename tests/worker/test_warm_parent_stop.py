"""Stopping a warm parent leaves its reaping to asyncio's child watcher: no stray
``Unknown child process pid ..., will report returncode 255`` on stderr.

Before Python 3.13, ``asyncio.subprocess.Process.kill`` polls the child with ``waitpid`` first
(CPython gh-87744); on a loaded machine the watcher's thread runs late, the poll reaps the parent
that just exited, and the watcher then finds no child and logs that line. The watcher here is made
late on purpose (half a second), so the race is lost every time a ``kill`` polls.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import warnings

import pytest

from torchscan_lsp.worker import pool

ThreadedChildWatcher = getattr(asyncio, "ThreadedChildWatcher", None)
pytestmark = pytest.mark.skipif(ThreadedChildWatcher is None or sys.platform != "linux",
                                reason="asyncio's child watchers (Linux, Python before 3.14)")

FAKE_PARENT = """#!/bin/sh
# ready at once, then wait for stdin to close, as the warm parent does, and exit
echo '{"event": "ready", "pid": '$$'}'
cat > /dev/null
"""


class LateWatcher(ThreadedChildWatcher):  # type: ignore[misc, valid-type]
    """asyncio's own watcher, whose thread starts waiting for each child half a second late."""

    def _do_waitpid(self, loop, expected_pid, callback, args):
        time.sleep(0.5)
        super()._do_waitpid(loop, expected_pid, callback, args)


@pytest.fixture
def late_watcher():
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # child watchers are deprecated from 3.12
        before = policy.get_child_watcher()
        policy.set_child_watcher(LateWatcher())
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        policy.set_child_watcher(before)


@pytest.mark.parametrize("stop", ["close", "exit by itself"])
async def test_a_stopped_warm_parent_is_reaped_by_the_watcher_alone(tmp_path, late_watcher, caplog, stop):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PARENT)
    fake.chmod(0o755)
    parent = pool.WarmParent(str(fake))
    assert await parent.ensure_started()
    process, reader = parent.process, parent._reader
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        if stop == "close":
            parent.close()  # closes its stdin, then kills it
        else:
            process.stdin.close()  # it exits; the reader sees the end of its events and kills it anyway
        await asyncio.wait_for(reader, 10)
        # the watcher reaped it, half a second late, and reported its real exit status
        assert await asyncio.wait_for(process.wait(), 10) in (0, -9)
    assert [r.getMessage() for r in caplog.records if "child process" in r.getMessage()] == []
