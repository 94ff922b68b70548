"""A target's ``train={...}`` merges per key with the workspace's ``[tool.torchscan-lsp.train]``
(docs/annotations.md, "Training step"), in the options and in the job the worker gets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from torchscan_lsp.session.jobs import build_job
from torchscan_lsp.session.settings import Settings
from torchscan_lsp.targets import merge_options

WORKSPACE = {"train": {"optimizer": "sgd", "momentum": 0.9, "batch": 8}, "train_memory": "24 GiB"}


@pytest.mark.parametrize(
    ("own", "train"),
    [
        # the target's batch over the workspace's; the optimizer and its momentum kept
        ({"batch": 64}, {"optimizer": "sgd", "momentum": 0.9, "batch": 64}),
        # another optimizer: SGD's momentum is not AdamW's, so it goes; the batch stays
        ({"optimizer": "adamw", "betas": (0.9, 0.95)}, {"optimizer": "adamw", "betas": (0.9, 0.95), "batch": 8}),
        # the same optimizer named again keeps its keyword arguments
        ({"optimizer": "SGD", "nesterov": True}, {"optimizer": "SGD", "momentum": 0.9, "nesterov": True, "batch": 8}),
        ({}, WORKSPACE["train"]),
    ],
)
def test_train_merges_per_key(own, train):
    merged = merge_options(WORKSPACE, {"train": own})
    assert merged == {"train": train, "train_memory": "24 GiB"}


def test_none_and_other_options_replace():
    assert merge_options(WORKSPACE, {"train": None})["train"] is None           # unsets the workspace's
    assert merge_options({"input_shape": (3, 8, 8)}, {"input_shape": (4,)}) == {"input_shape": (4,)}
    assert merge_options({"train": {"batch": 8}}, None, {}) == {"train": {"batch": 8}}


def test_the_job_carries_the_merged_train():
    target = SimpleNamespace(name="build", options={"input_shape": (16,), "train": {"batch": 64}})
    job, _ = build_job("/ws", "/ws/net.py", target, WORKSPACE, Settings(device="cpu"))
    assert job["options"] == {"train": {"optimizer": "sgd", "momentum": 0.9, "batch": 64}, "train_memory": "24 GiB",
                              "device": "cpu", "input_shape": (16,)}
