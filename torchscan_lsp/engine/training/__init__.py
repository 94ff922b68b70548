"""The training step: its FLOPs (forward and backward) and its peak memory, estimated and measured.

* :func:`analyse_training_step` -- both memory methods side by side, the FLOPs, a memory budget;
* :func:`estimate_training_memory` -- fake tensors and PyTorch's ``MemTracker``, for any size;
* :func:`measure_training_memory` -- one real step under ``measure_peak_memory``;
* :func:`parse_train_options` / :class:`TrainOptions` -- the ``train={...}`` options;
* :func:`build_training_step` / :class:`TrainingStep` -- the step itself, from a factory;
* :func:`plan_training` -- the largest batch (and sequence) that fits a budget, policy by policy.

docs/measurement.md ("Training step", "Planning a training run") explains the methods, what each counts
and when they differ.
"""

from torchscan_lsp.engine.training.analysis import AGREEMENT_TOLERANCE, analyse_training_step
from torchscan_lsp.engine.training.estimate import estimate_training_memory
from torchscan_lsp.engine.training.measured import measure_training_memory
from torchscan_lsp.contract.training import TrainOptions, parse_bytes, parse_train_options
from torchscan_lsp.engine.training.plan import plan_training
from torchscan_lsp.engine.training.step import TrainingStep, build_training_step

__all__ = [
    "AGREEMENT_TOLERANCE",
    "analyse_training_step",
    "estimate_training_memory",
    "measure_training_memory",
    "TrainOptions",
    "parse_train_options",
    "parse_bytes",
    "TrainingStep",
    "build_training_step",
    "plan_training",
]
