"""The worker client: a real child process per job, its time limit, crashes, cancellation, and
the separation of the model's prints from the result channel."""

import asyncio
import sys
import textwrap

import pytest

from torchscan_lsp.worker import client


def _job(root, name, source, target="build"):
    path = root / name
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return {"workspace_root": str(root), "file": str(path), "target": target,
            "options": {"input_shape": [3]}, "source_text": None, "measure": []}


async def test_timeout_kills_the_worker(tmp_path):
    job = _job(tmp_path, "slow.py", """
        import time
        time.sleep(60)
    """)
    result = await client.run(job, python=sys.executable, timeout_s=1.0)
    assert result["ok"] is False
    assert result["error"]["kind"] == "timeout"
    assert "1 s" in result["error"]["message"]


async def test_crash_without_result(tmp_path):
    job = _job(tmp_path, "dies.py", """
        import os
        print("about to die")
        os._exit(3)
    """)
    result = await client.run(job, python=sys.executable, timeout_s=60)
    assert result["error"]["kind"] == "crash"
    assert "exit status 3" in result["error"]["message"]
    # what the model printed is kept in the log, never on a protocol channel
    assert "about to die" in result["log_tail"]


async def test_model_prints_go_to_the_log(tmp_path):
    job = _job(tmp_path, "chatty.py", """
        import sys
        print("x" * 10)
        sys.stderr.write("noise on stderr\\n")
        raise ImportError("stop here")
    """)
    result = await client.run(job, python=sys.executable, timeout_s=60)
    assert result["ok"] is False and result["error"]["kind"] == "import"
    assert "xxxxxxxxxx" in result["log_tail"] and "noise on stderr" in result["log_tail"]


async def test_the_profilers_own_chatter_is_not_the_models_output(tmp_path):
    # A peak-memory measurement runs torch.profiler, whose C++ library writes these two lines to
    # stderr at every start and stop; the model's own print stays.
    job = _job(tmp_path, "profiled.py", """
        import torch
        print("the model speaks")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True):
            torch.ones(3)
        raise ImportError("stop here")
    """)
    result = await client.run(job, python=sys.executable, timeout_s=60)
    assert "the model speaks" in result["log_tail"]
    assert "profiler_start" not in result["log_tail"] and "USDT:" not in result["log_tail"]


async def test_cancellation_kills_the_worker(tmp_path):
    marker = tmp_path / "pid.txt"
    job = _job(tmp_path, "hangs.py", f"""
        import os, time
        open({str(marker)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    task = asyncio.ensure_future(client.run(job, python=sys.executable, timeout_s=120))
    for _ in range(600):
        if marker.exists() and marker.read_text():
            break
        await asyncio.sleep(0.05)
    pid = int(marker.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    import os

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_missing_interpreter(tmp_path):
    job = _job(tmp_path, "any.py", "x = 1\n")
    result = await client.run(job, python=str(tmp_path / "no-such-python"), timeout_s=5)
    assert result["error"]["kind"] == "crash"
    assert "could not start the worker interpreter" in result["error"]["message"]
