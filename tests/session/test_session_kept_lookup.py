"""A kept result is looked up before a job waits for a worker slot: a target whose result is in
the cache gets it while every slot is busy with other targets' models."""

from __future__ import annotations

import asyncio

from kept_results import ok_result, totals

from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.settings import Settings

MODEL = """# torchscan: input_shape=(4,)
def slow():
    pass


# torchscan: input_shape=(4,)
def kept():
    pass
"""


async def test_a_kept_result_is_taken_while_every_worker_slot_is_busy(tmp_path):
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    release = asyncio.Event()
    jobs: list[str] = []

    async def worker(job: dict, **limits) -> dict:
        jobs.append(job["target"])
        if job["target"] == "slow":
            await release.wait()
        # Linear(4, 2): 8 + 2 parameters, 8 MACs, 16 FLOPs
        return ok_result(["model.py"], target=job["target"], report_totals=totals(10, 8, 16))

    session = Session(Settings(maxWorkers=1), trusted=True, run_job=worker)
    try:
        document = session.open(str(tmp_path / "model.py"), str(tmp_path), MODEL)
        (kept,) = session.analyse(document, ["kept"])
        await session.finished(kept)
        assert jobs == ["kept"] and kept.view is not None

        kept.view = None                                  # forgotten by the state, still in the cache
        (slow,) = session.analyse(document, ["slow"])
        await asyncio.sleep(0.05)
        assert slow.running                               # the only slot is taken
        session.analyse(document, ["kept"])
        await asyncio.wait_for(session.finished(kept), 5)  # served from the cache meanwhile
        assert kept.view is not None and kept.view.totals["parameters"]["value"] == 10
        assert jobs == ["kept", "slow"] and slow.running
        release.set()
        await session.finished(slow)
        assert not slow.running and slow.view is not None
        # its comparison with HEAD (git, in a folder of no repository) ends too: a task left
        # running while the test's event loop closes may never end on Python 3.11
        await session.scheduler.wait_idle()
    finally:
        session.shutdown()
