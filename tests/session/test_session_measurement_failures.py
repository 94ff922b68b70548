"""A measurement that failed belongs to the job that ran it: the next analysis, which measured
nothing, clears it (the editor no longer shows its error), while good measurements stay."""

from __future__ import annotations

from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.measurements import measurement_failures

SOURCE = "import torch.nn as nn\n\n\n# torchscan: input_shape=(4,)\ndef build():\n    return nn.Linear(4, 2)\n"
LATENCY = {"kind": "latency", "totals": {}}
FAILED = {"error": {"type": "RuntimeError", "message": "boom", "file": "net.py", "line": 6}, "requested": True}


async def test_a_failure_lasts_until_the_next_analysis(tmp_path):
    answers = [{"latency": LATENCY, "memory": FAILED}, None]

    async def run_job(job, **limits):
        measured = answers.pop(0)
        result = {"ok": True, "target": job["target"], "imported_files": ["net.py"],
                  "report": {"layers": [], "totals": {}, "diagnostics": []}, "source_map": {}}
        return {**result, "measurements": measured} if measured else result

    (tmp_path / "net.py").write_text(SOURCE, encoding="utf-8")
    session = Session(trusted=True, run_job=run_job)
    document = session.open(str(tmp_path / "net.py"), str(tmp_path), SOURCE)
    (state,) = session.analyse(document, measure=["latency", "memory"])
    await session.finished(state)
    (failure,) = measurement_failures(state.measurements)
    assert (failure.kind, failure.severity, failure.message("build")) == (
        "memory", "error", "build: the memory measurement failed: RuntimeError: boom")
    session.analyse(document, use_cache=False)
    await session.finished(state)
    assert state.measurements == {"latency": LATENCY}
