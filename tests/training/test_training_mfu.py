"""MFU of a measured CPU training step of the nanoGPT-style example (examples/gpt.py), through the
worker as **Measure training step** runs it (``measure=["train", "roofline"]``, this machine's
ceilings measured into a cache folder of the test's own): the MFU is recomputed here from the
report's own fields, the ``6·N·tokens`` estimate from the model's parameters counted here, and the
text the hover and ``scan`` show names both with their difference."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from torchscan_lsp.session.roofline import step_lines
from torchscan_lsp.worker.runner import run_job

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt")
    shutil.copy(EXAMPLES / "gpt.py", root / "gpt.py")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "cache"))
    try:
        found = run_job({"workspace_root": str(root), "file": str(root / "gpt.py"), "target": "gpt_small",
                         "options": {"device": "cpu"}, "source_text": None, "measure": ["train", "roofline"]})
    finally:
        monkeypatch.undo()
    assert json.loads(json.dumps(found, allow_nan=False)) == found
    assert found["ok"] is True, found
    return found


def test_mfu_is_the_counted_flops_over_time_times_peak(result):
    train, roofline = result["measurements"]["train"], result["measurements"]["roofline"]
    step = roofline["training_step"]
    mfu = step["mfu"]
    flops = train["flops"]["totals"]["training_flops"]["value"]
    recomputed = train["flops"]["recomputed"]["flops"]
    seconds = train["step_time"]["time"]["value"]
    peak = roofline["ceilings"]["peak_flops"]["value"]
    assert roofline["ceilings"]["source"] == "measured" and roofline["ceilings"]["dtype"] == "float32"
    assert recomputed == 0 and mfu["hfu"] is None  # no checkpointing: nothing recomputed
    assert mfu["value"] == pytest.approx((flops - recomputed) / (seconds * peak), rel=1e-12)
    assert 0 < mfu["value"] < 1


def test_the_6nt_estimate_beside_it(result):
    import sys

    sys.path.insert(0, str(EXAMPLES))
    import gpt

    model, (idx,) = gpt.gpt_small()
    parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)  # the tied weight once
    tokens = idx.numel()
    roofline = result["measurements"]["roofline"]
    mfu = roofline["training_step"]["mfu"]
    estimate = mfu["estimate"]
    config = gpt.GPTConfig()
    attention = 12 * config.n_layer * config.n_head * (config.n_embd // config.n_head) * tokens * tokens
    assert (estimate["parameters"], estimate["tokens"]) == (parameters, tokens)
    assert estimate["six_n_tokens"] == 6 * parameters * tokens
    assert estimate["attention_term"] == attention  # 12·L·H·Q·T·tokens, T = 16 tokens
    assert estimate["value"] == 6 * parameters * tokens + attention
    seconds, peak = mfu["step_time"], mfu["peak_flops"]
    assert mfu["estimate_mfu"] == pytest.approx(estimate["value"] / (seconds * peak))
    # the position embedding (block_size x n_embd) is looked up, never multiplied; the token
    # embedding does its multiply-adds as the tied head
    assert estimate["parts"]["embeddings"] == -6 * config.block_size * config.n_embd * tokens
    parts = estimate["parts"]
    assert sum(parts.values()) == estimate["difference"] == mfu["model_flops"] - estimate["value"]
    text = "\n".join(step_lines(roofline))
    assert f"6 x {parameters:,} x {tokens:,}" in text
    assert "embedding lookups, which multiply nothing" in text
    assert "Causal masking: both count attention dense" in text
