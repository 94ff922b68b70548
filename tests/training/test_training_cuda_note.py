"""The CUDA figure of a training step says which optimizer implementation it was derived for."""

from __future__ import annotations

import torch
from torch import nn

from torchscan_lsp.engine.training import analyse_training_step, estimate_training_memory
from torchscan_lsp.session.training import training_summary


def _mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64)), (torch.zeros(4, 64),)


def test_a_cpu_steps_cuda_figure_says_it_is_the_for_loop_update_and_the_foreach_one_holds_more():
    report = analyse_training_step(_mlp, train={"optimizer": "adamw"}, measure=False)
    (note,) = [note for note in training_summary(report).notes if note.startswith("On a CUDA GPU")]
    assert "with this step's for-loop optimizer" in note
    # why the note is needed: AdamW's foreach update (PyTorch's default on CUDA) computes each step
    # over every parameter tensor at once, so its temporaries outgrow the for-loop's one tensor at a time
    loop = estimate_training_memory(_mlp, train={"optimizer": "adamw"}, target_device="cpu", count_flops=False)
    foreach = estimate_training_memory(_mlp, train={"optimizer": "adamw"}, target_device="cuda", count_flops=False)
    assert (loop["foreach"], foreach["foreach"]) == (False, True)
    assert foreach["phases"]["optimizer_step"]["peak_bytes"] > loop["phases"]["optimizer_step"]["peak_bytes"]
    cuda_report = analyse_training_step(_mlp, train={"optimizer": "adamw", "device": "cuda"}, measure=False)
    notes = [note for note in training_summary(cuda_report).notes if note.startswith("On a CUDA GPU")]
    assert notes and "for-loop" not in notes[0]
