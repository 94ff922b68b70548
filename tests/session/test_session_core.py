"""Scheduler, cache and settings: the server's plumbing, without a client."""

import asyncio

from torchscan_lsp.session.cache import ResultCache, job_key
from torchscan_lsp.session.scheduler import Scheduler
from torchscan_lsp.session.settings import InlayHintSettings, Settings, resolve


async def test_newer_job_cancels_older_and_limit_holds():
    scheduler = Scheduler(max_workers=2)
    running, peak, finished = 0, 0, []

    async def job(name, seconds):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(seconds)
            finished.append(name)
        finally:
            running -= 1

    old = scheduler.submit("a", lambda: job("a-old", 10))
    await asyncio.sleep(0)
    new = scheduler.submit("a", lambda: job("a-new", 0.01))
    others = [scheduler.submit(key, lambda key=key: job(key, 0.02)) for key in ("b", "c", "d")]
    await scheduler.wait_idle()
    assert old.cancelled() and not new.cancelled()
    assert sorted(finished) == ["a-new", "b", "c", "d"]
    assert peak == 2                       # four jobs, never more than two at once
    assert not scheduler.is_current("a", old) and all(t.done() for t in others)


async def test_debounce_cancels_before_starting():
    scheduler = Scheduler()
    started = []

    async def job(name):
        started.append(name)

    scheduler.submit("a", lambda: job("first"), delay_s=0.05)
    scheduler.submit("a", lambda: job("second"), delay_s=0.05)
    await scheduler.wait_idle()
    assert started == ["second"]


def test_cache_is_invalidated_by_an_imported_file():
    hashes = {"net.py": "1", "blocks.py": "x"}
    job = {"workspace_root": "/ws", "file": "/ws/net.py", "target": "build", "options": {"input_shape": [3]}}
    key = job_key(job, "1", "/usr/bin/python3")
    cache = ResultCache()
    result = {"ok": True, "imported_files": ["net.py", "blocks.py"]}
    cache.put(key, result, hashes.get)
    assert cache.get(key, hashes.get) is result
    hashes["blocks.py"] = "y"                       # an imported file changed
    assert cache.get(key, hashes.get) is None
    assert job_key({**job, "options": {"input_shape": [4]}}, "1", "/usr/bin/python3") != key
    assert job_key(job, "1", "/other/python") != key
    cache.put(key, {"ok": False, "imported_files": []}, hashes.get)   # failures are never cached
    assert cache.get(key, hashes.get) is None


def test_settings_precedence_and_bad_values():
    settings, problems = resolve({"device": "cuda", "timeoutSeconds": 30},
                                 {"timeout_seconds": 10, "maxWorkers": "many", "inlayHints": {"shapes": False},
                                  "unrelated": 1})
    assert settings.device == "cuda"                 # from pyproject, not overridden
    assert settings.timeoutSeconds == 10.0           # the editor wins; snake_case accepted
    assert settings.maxWorkers == Settings().maxWorkers
    assert problems == ["setting torchscan.maxWorkers must be a positive integer, got 'many'"]
    assert settings.inlayHints == InlayHintSettings(shapes=False)
    assert resolve(None, {"python": None})[0].python is None
