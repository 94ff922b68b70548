"""A plan that cannot give a batch says why: a model too large for the budget even at batch 1, a
model that raises (an error at the line that raised, through the worker), a search ceiling."""

from __future__ import annotations

import textwrap

import pytest

from plan_models import gpt_factory, measured_peak, mlp

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.engine.training import plan_training
from torchscan_lsp.session.plan_summary import plan_summary
from torchscan_lsp.worker.runner import run_job

#: the small GPT's parameters (examples/llama_blocks.py's count for vocabulary 1000, width 128,
#: 2 blocks, feed-forward 344) and its parameter tensors: embedding, head, final norm, 9 a block
GPT_PARAMETERS, GPT_TENSORS = 651_904, 3 + 2 * 9


def test_a_model_that_does_not_fit_even_at_batch_1_says_so_with_the_smallest_peak_and_its_largest_category():
    report = plan_training(gpt_factory(4), plan={"precision": ["float32"], "checkpointing": ["none"]},
                           memory_budget="8 MiB")
    batch = report["policies"][0]["batch"]
    assert (batch["largest"]["value"], batch["limit"], batch["fits"]) == (0, "does_not_fit", False)
    real = measured_peak(gpt_factory(1))
    assert abs(batch["smallest"]["peak_bytes"] - real) <= 0.05 * real
    # AdamW's two moments, 8 bytes a parameter (5.2 MB) and a 4-byte step per tensor, outweigh the
    # 4-byte parameters, gradients and one sample's activations
    assert batch["largest_category"] == {"category": "optimizer_state", "bytes": 8 * GPT_PARAMETERS + 4 * GPT_TENSORS}
    (message,) = [d["message"] for d in report["diagnostics"] if d["code"] == "plan_does_not_fit"]
    assert "no policy fits the budget of 8.00 MiB even at batch 1" in message
    assert f"largest optimizer state {fmt.byte_size(8 * GPT_PARAMETERS + 4 * GPT_TENSORS)}" in message
    row = plan_summary(report).rows[0]
    assert row.batch == "none fits" and row.peak.endswith("at batch 1")
    # one estimate, at batch 1: nothing fits, so no answer to say was confirmed
    assert report["estimates"] == 1
    assert plan_summary(report).notes[-1] == f"1 estimate on fake tensors in {report['elapsed_s']:.1f} s."


def test_the_search_ceiling_bounds_the_answer_as_a_lower_bound():
    report = plan_training(mlp, plan={"precision": ["float32"], "checkpointing": ["none"], "max_batch": 64},
                           memory_budget="64 MiB", input_shape=(256,))
    batch = report["policies"][0]["batch"]
    # 8.1 MiB of weights, gradients and state and about 1 KiB a sample: 64 samples fit 64 MiB
    assert batch["largest"] == {**batch["largest"], "status": "partial", "value": None, "known_value": 64}
    assert batch["limit"] == "ceiling" and batch["above"] is None
    summary = plan_summary(report)
    assert summary.rows[0].batch == "≥ 64"
    # no size above the ceiling was estimated: the answer is a bound, confirmed by nothing
    assert "confirmed" not in summary.notes[-1] and summary.rows[0].reason == "a lower bound: the search's ceiling"


def test_a_factory_that_raises_is_the_plan_jobs_error_at_the_line_that_raised(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        from torch import nn


        # torchscan: input_shape=(8,), plan=True
        def build():
            model = nn.Linear(8, 4)
            raise RuntimeError("no weights here")
        """), encoding="utf-8")
    result = run_job({"workspace_root": str(tmp_path), "file": str(tmp_path / "model.py"), "target": "build",
                      "options": {"input_shape": [8], "plan": True}, "source_text": None, "measure": [], "kind": "plan"})
    assert result["ok"] is False
    error = result["error"]
    assert (error["kind"], error["file"], error["line"]) == ("forward", "model.py", 7)
    assert "no weights here" in error["message"]


def test_a_size_the_model_refused_is_named_with_its_error_when_the_estimates_run_out(monkeypatch):
    # a sequence the model cannot take (a table of 32 rows) is refused above 32, where the peak is
    # far under the budget: when the estimates run out before the bracket closes, the reason says
    # the size was refused and why, not that it did not fit
    from torchscan_lsp.engine.training import search
    from torchscan_lsp.engine.training.estimator import Point

    def estimate(size, flops):
        if size > 32:
            raise IndexError(f"index {size - 1} is out of bounds for dimension 0 with size 32")
        peak = 1000 + 10 * size * size
        return Point(1, size, peak, "backward", {"backward": peak}, {"activations": peak}, {"activations": peak})

    monkeypatch.setattr(search, "MAX_ESTIMATES", 5)
    answer = search.largest_fitting(estimate, lambda size: None, axis="sequence", kind="quadratic", fit_at=[4, 8, 16],
                                    budget=10**9, ceiling=4096, flops_kind="quadratic")
    assert answer.status == "partial" and answer.limit == "estimates"
    assert "the model refused" in answer.reason and "out of bounds for dimension 0 with size 32" in answer.reason


def test_a_sequence_past_the_position_table_is_refused_by_the_model():
    # a GPT with a learned position table of 24 rows (nn.Embedding(24, 32) named wpe): fake tensors
    # never check a lookup's indices, so without the table's limit the plan would answer lengths
    # the model raises on (IndexError) -- the answer is 24 tokens, the table's rows, and 25 is refused
    import torch
    from torch import nn

    class PositionGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(100, 32), nn.Embedding(24, 32)
            self.head = nn.Linear(32, 100)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.head(self.wte(ids) + self.wpe(positions))

    def build():
        ids = torch.zeros(1, 8, dtype=torch.long)
        return {"model": PositionGPT(), "args": (ids,), "loss": lambda logits: logits.float().mean()}

    with pytest.raises(IndexError):
        PositionGPT()(torch.zeros(1, 25, dtype=torch.long))  # what a real step at 25 tokens does
    report = plan_training(build, plan={"precision": ["float32"], "checkpointing": ["none"], "sequence": "0:1"},
                           memory_budget="1 GiB")
    sequence = report["policies"][0]["sequence"]
    assert sequence["largest"]["value"] == 24 and sequence["limit"] == "model"
    assert "the position table 'wpe' has 24 rows" in sequence["reason"]


def test_a_device_budget_is_shown_by_the_name_written_with_the_tables_name():
    # an alias of the device table ("H100-80GB") is the H100-SXM's 80 GiB (contract/devices.py)
    report = plan_training(mlp, plan={"precision": ["float32"], "checkpointing": ["none"], "max_batch": 4},
                           memory_budget="H100-80GB", input_shape=(256,))
    assert report["budget"]["bytes"] == 80 * 2**30
    assert plan_summary(report).budget.startswith("80.0 GiB per device (H100-80GB = H100-SXM, from train_memory")
    canonical = plan_training(mlp, plan={"precision": ["float32"], "checkpointing": ["none"], "max_batch": 4},
                              memory_budget="H100-SXM", input_shape=(256,))
    assert plan_summary(canonical).budget.startswith("80.0 GiB per device (H100-SXM, from train_memory")


def test_the_note_says_which_answers_the_estimates_confirmed():
    # an answer the budget bounds is confirmed by the estimate at it and the one above; a bound at
    # the search's ceiling is not, and its row says why
    def policy(name: str, limit: str, status: str) -> dict:
        largest = {"status": status, "value": 5 if status == "complete" else None, "known_value": 5}
        return {"policy": {"name": name}, "status": status,
                "batch": {"largest": largest, "limit": limit, "fits": True,
                          "at_largest": {"peak_bytes": 1000, "peak_phase": "backward"}}}

    report = {"budget": {"bytes": 2048, "source": "plan"}, "estimates": 9, "elapsed_s": 1.3,
              "policies": [policy("a", "budget", "complete"), policy("b", "ceiling", "partial")]}
    assert plan_summary(report).notes[-1] == (
        "9 estimates on fake tensors in 1.3 s; the answers the budget bounds (1 of 2) confirmed by the estimates at "
        "them and one above them; the others say why.")
    report["policies"] = report["policies"][:1]
    assert plan_summary(report).notes[-1].endswith("; each answer confirmed by the estimates at it and one above it.")
