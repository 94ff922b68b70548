"""A replaced job of a key finishes only after the job it replaced, even when it is replaced in
turn before it started: a chain of quick replacements never runs two jobs of one key at once."""

import asyncio

from torchscan_lsp.session.scheduler import Scheduler


async def test_replacements_never_overlap():
    scheduler = Scheduler(max_workers=4)
    running, peak, finished = 0, 0, []

    def job(number):
        async def run():
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            try:
                await asyncio.sleep(0.05)
                finished.append(number)
            finally:
                # a killed worker takes a while to be reaped, during which the job still counts
                await asyncio.shield(asyncio.sleep(0.02))
                running -= 1
        return run

    for number in range(30):
        scheduler.submit("target", job(number))
        await asyncio.sleep(0.001)
    await scheduler.wait_idle()
    assert peak == 1
    assert finished == [29]  # only the last one ran to its end
