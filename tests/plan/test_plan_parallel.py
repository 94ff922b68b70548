"""A plan's policies in forked processes: every record back, in order, whatever ends a process."""

from __future__ import annotations

import os
import signal
import traceback

import pytest
import torch

from torchscan_lsp.engine.training import plan_training
from torchscan_lsp.engine.training.parallel import run_policies
from torchscan_lsp.engine.training.plan import PlanError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forking needs os.fork")


def _run(run_one, order, processes=2):
    progress: list[tuple[int, str]] = []
    found = run_policies(run_one, order, processes, lambda index, message, finished: progress.append((index, message)),
                         lambda index, how: {"index": index, "died": how})
    return found, progress


def test_two_processes_answer_every_policy_with_its_estimates_and_progress():
    def run_one(index, note):
        note(f"policy {index} started")
        return {"index": index, "pid": os.getpid()}, 10 * index

    found, progress = _run(run_one, [3, 1, 0, 2])
    assert sorted(found) == [0, 1, 2, 3]
    assert all(found[i][0]["index"] == i and found[i][1] == 10 * i for i in found)
    assert all(found[i][0]["pid"] != os.getpid() for i in found)  # none ran here
    assert sorted(progress) == [(i, f"policy {i} started") for i in range(4)]


def test_a_policy_whose_process_is_killed_says_so_and_the_others_still_answer():
    def run_one(index, note):
        if index == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"index": index}, 1

    found, _ = _run(run_one, [0, 1, 2, 3])
    assert found[1] == ({"index": 1, "died": "killed by signal 9"}, 0)
    assert [found[i][0] for i in (0, 2, 3)] == [{"index": 0}, {"index": 2}, {"index": 3}]


def test_one_process_runs_every_policy_here_in_order():
    seen = []

    def run_one(index, note):
        seen.append(index)
        return {"pid": os.getpid()}, 1

    found, _ = _run(run_one, [2, 0, 1], processes=1)
    assert seen == [2, 0, 1]
    assert {found[i][0]["pid"] for i in found} == {os.getpid()}


def _factory_that_raises():
    raise ValueError("the factory cannot build the model")


def test_a_factory_that_fails_in_every_policy_raises_with_the_traceback_of_its_own_line():
    # the policies failed in other processes: one runs again here, so the error carries the factory's frame
    with pytest.raises(PlanError, match="the factory cannot build the model") as raised:
        plan_training(_factory_that_raises,
                      plan={"precision": ["float32", "bfloat16"], "checkpointing": ["none"], "sharding": ["single"]})
    frames = [frame.name for frame in traceback.extract_tb(raised.value.__traceback__)]
    assert "_factory_that_raises" in frames
