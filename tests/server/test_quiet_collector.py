"""Full garbage collections when the client is quiet (server/collector.py): never while messages
come, unless one waited too long; never when none is due; the interpreter's own ones stopped."""

import asyncio
import gc

import pytest

from torchscan_lsp.server.collector import QuietCollector


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def collections(monkeypatch):
    """The full collections run (the process's collector left alone), and the middle generation's
    count since the last one, which the test sets: 10 makes one due, as the interpreter counts."""
    ran, count = [], [0]
    monkeypatch.setattr(gc, "collect", lambda generation=2: ran.append(generation) or count.__setitem__(0, 0) or 0)
    monkeypatch.setattr(gc, "get_count", lambda: (0, 0, count[0]))
    monkeypatch.setattr(gc, "get_threshold", lambda: (700, 10, 10))
    return ran, count


def test_a_due_collection_waits_for_a_quiet_moment(collections):
    ran, count = collections
    clock = Clock()
    collector = QuietCollector(quiet_s=1.0, defer_s=30.0, clock=clock)
    count[0] = 9                                                       # not due: never, quiet or not
    clock.now += 5
    assert not collector.collect_if_due() and ran == []
    count[0] = 10
    collector.heard()
    clock.now += 0.5                                                   # a message half a second ago
    assert not collector.collect_if_due() and ran == []
    clock.now += 0.6                                                   # 1.1 s of quiet
    assert collector.collect_if_due() and ran == [2]
    assert not collector.collect_if_due() and ran == [2]               # the count starts again


def test_a_collection_that_waited_its_longest_runs_while_messages_come(collections):
    ran, count = collections
    clock = Clock()
    collector = QuietCollector(quiet_s=1.0, defer_s=30.0, clock=clock)
    count[0] = 12
    for _ in range(299):                                               # a message every 0.1 s for 29.9 s
        collector.heard()
        assert not collector.collect_if_due()
        clock.now += 0.1
    clock.now += 0.2
    collector.heard()
    assert collector.collect_if_due() and ran == [2]                   # 30.1 s after it fell due


def test_taking_over_freezes_what_exists_and_stops_the_interpreter_s_full_collections():
    before = gc.get_threshold()
    try:
        QuietCollector().take_over()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] >= 2**31 - 1
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_after_taking_over_the_first_message_starts_the_checks(collections, monkeypatch):
    ran, count = collections
    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.setattr(gc, "set_threshold", lambda *_: None)
    collector = QuietCollector(quiet_s=0.02)

    async def quiet_then_collected() -> None:
        collector.heard()                                              # before take_over: no checks
        count[0] = 10
        await asyncio.sleep(0.1)
        assert ran == []
        collector.take_over()
        collector.heard()
        for _ in range(200):
            if ran:
                return
            await asyncio.sleep(0.01)

    asyncio.run(quiet_then_collected())
    assert ran == [2]
