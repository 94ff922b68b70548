"""Without warm workers (no fork, or ``TORCHSCAN_LSP_WARM=0``) each job is a cold process: the
limits, the crash diagnostics and their lines are the same."""

import pytest

import fault_support as faults
import lsp_support as lsp
from torchscan_lsp.worker import client


def _job(root, name):
    return {"workspace_root": str(root), "file": str(root / name), "target": "build",
            "options": {"input_shape": [4]}, "source_text": None, "measure": []}


@pytest.mark.parametrize("name, marker, kind, expected", [
    ("memory_grow.py", "32 MiB each", "memory", "analysis used more than 1 GiB"),
    ("segfault.py", "the crash", "crash", "SIGSEGV"),
])
async def test_cold_start_faults(tmp_path, monkeypatch, name, marker, kind, expected):
    monkeypatch.setenv("TORCHSCAN_LSP_WARM", "0")
    root = faults.copy_models(tmp_path)
    result = await client.run(_job(root, name), timeout_s=60, memory_mb=faults.LIMITS["memoryLimitMb"])
    error = result["error"]
    assert (error["kind"], error["file"], error["line"]) == (kind, name, lsp.line_of(root / name, marker))
    assert expected in error["message"]
