"""One policy of a plan, estimated at any size on fake tensors: the model is built once.

:class:`PolicyEstimator` calls the factory under ``FakeTensorMode``, applies the policy (its options,
activation checkpointing, FSDP2 or DDP: :mod:`.policies`, :mod:`.sharding`), creates the optimizer's
state once (a steady-state step, as for one estimate), and then estimates a step at each size asked
(:meth:`PolicyEstimator.estimate`): the inputs resized (:mod:`.scaling`), one step under the
tracker, the result a :class:`Point`. A 7B-parameter model is built and sharded once per policy,
however many sizes are tried.

FLOPs are counted in the same pass as the memory when nothing is checkpointed; with checkpointing
they are counted in a pass of their own (:meth:`PolicyEstimator.count_flops`), because the FLOP
counter's module tracker (PyTorch's ``ModuleTracker``) keeps the recomputed blocks' tensors alive,
which made a checkpointed 4-block decoder's estimated peak 18 % higher than the measured one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from torchscan_lsp.contract.plan import Policy, SequenceAxis
from torchscan_lsp.contract.training import TrainOptions
from torchscan_lsp.engine.training.estimate import METHOD_MEM_TRACKER, count_step_flops, track_step
from torchscan_lsp.engine.training.fake_modules import swappable_fake_tensors
from torchscan_lsp.engine.training.policies import checkpoint_blocks, policy_options, repeated_blocks
from torchscan_lsp.engine.training.scaling import InputScaler, position_limit
from torchscan_lsp.engine.training.sharding import (DDP_METHOD, FSDP_METHOD, ddp_buckets, fsdp_tracker,
                                                    fully_shard_model)
from torchscan_lsp.engine.training.step import build_training_step

__all__ = ["NotApplicable", "Point", "PolicyEstimator"]


class NotApplicable(ValueError):
    """A policy the model cannot run (no repeated block to checkpoint); the message says why."""


@dataclass
class Point:
    """One estimated step.

    Attributes:
        batch, sequence: its size (``sequence`` ``None`` without a sequence axis).
        peak_bytes: the peak the budget is held against: the tracker's tensor bytes, or the CUDA
            allocator's allocated peak derived from them (``cuda``), plus DDP's buckets.
        peak_phase: the phase of the peak (``forward``, ``backward``, ``optimizer_step``).
        phase_bytes: each phase's peak, as ``peak_bytes``.
        by_category: bytes by category at the peak (tensor bytes; DDP's buckets as
            ``gradient_buckets``).
        largest: each category's most bytes at any moment of the step.
        flops: the training FLOPs metric, when counted in this pass.
        communication: bytes of each kind of collective (sharded steps).
        size: its size along the axis a search scales (set by the search).
        extra: further JSON-safe fields of the record.
    """

    batch: int
    sequence: int | None
    peak_bytes: int
    peak_phase: str
    phase_bytes: dict[str, int]
    by_category: dict[str, int]
    largest: dict[str, int]
    flops: dict[str, Any] | None = None
    communication: dict[str, int] | None = None
    size: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe fields."""
        record = {"batch": self.batch, "sequence": self.sequence, "peak_bytes": self.peak_bytes,
                  "peak_phase": self.peak_phase, "phase_bytes": dict(self.phase_bytes),
                  "by_category": dict(self.by_category), "largest": dict(self.largest)}
        if self.flops is not None:
            record["training_flops"] = self.flops
        if self.communication is not None:
            record["communication"] = dict(self.communication)
        return {**record, **self.extra}


class PolicyEstimator:
    """A policy's step, ready to be estimated at any size; use as a context manager (it holds the
    fake mode while it lives).

    Args:
        build: the target's zero-argument factory.
        policy: the policy.
        base: the target's ``train`` options (optimizer keyword arguments, ``batch``).
        input_shape, input_dtype: generated inputs, for a factory that returns only a model.
        sequence: the sequence axis, or ``None``.
        cuda: estimate for a CUDA GPU: its default ``foreach`` and the allocator's derived peak.
        mesh: the fake process group's device mesh, for a ``fsdp`` policy.
        custom_mapping: extra FLOP formulas.

    Raises:
        NotApplicable: ``checkpointing="blocks"`` on a model without repeated blocks.
        Any error of the factory or of the optimizer's first step, unchanged.
    """

    def __init__(self, build: Callable[[], Any], policy: Policy, base: TrainOptions, *, input_shape: Any = None,
                 input_dtype: Any = None, sequence: SequenceAxis | None = None, cuda: bool = False, mesh: Any = None,
                 custom_mapping: Any = None) -> None:
        self.policy, self.cuda, self.custom_mapping = policy, cuda, custom_mapping
        self.options = policy_options(base, policy)
        self.blocks: list[tuple[str, Any]] = []
        self._mesh = mesh
        self._stack = contextlib.ExitStack()
        self._build, self._inputs = build, (input_shape, input_dtype, sequence)
        self.step: Any = None
        self.scaler: InputScaler | None = None
        self.buckets = 0
        self.positions: tuple[int, str] | None = None

    @property
    def method(self) -> str:
        """How this policy's figures are obtained."""
        sharding = self.policy.sharding
        method = FSDP_METHOD if sharding == "fsdp" else DDP_METHOD if sharding == "ddp" else METHOD_MEM_TRACKER
        return method + ("; CUDA allocated peak derived from the caching allocator's rules" if self.cuda else "")

    def _prepare(self, model: torch.nn.Module) -> None:
        self.blocks = repeated_blocks(model)
        if self.policy.checkpointing == "blocks":
            if not self.blocks:
                raise NotApplicable("the model has no repeated block to checkpoint (no module class with children "
                                    "occurs twice), so checkpointing would change nothing.")
            checkpoint_blocks(self.blocks)
        if self.policy.sharding == "fsdp":
            fully_shard_model(model, self._mesh, self.blocks, mixed=self.policy.precision == "bfloat16-mixed")

    def __enter__(self) -> PolicyEstimator:
        mode = self._stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        self._stack.enter_context(swappable_fake_tensors(mode))
        try:
            input_shape, input_dtype, sequence = self._inputs
            self.step = build_training_step(self._build, self.options, input_shape=input_shape,
                                            input_dtype=input_dtype, foreach_device="cuda" if self.cuda else "cpu",
                                            materialise=True, prepare=self._prepare)
            self.step.init_optimizer_state()
            step = self.step
            self.scaler = InputScaler(step.args, step.kwargs, step.targets, sequence)
            self.positions = position_limit(step.model) if sequence is not None else None
            if self.policy.sharding == "ddp":
                self.buckets = ddp_buckets(step.model)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.step = None
        self._stack.close()

    def _resize(self, batch: int, sequence: int | None) -> None:
        assert self.scaler is not None
        self.step.args, self.step.kwargs, self.step.targets = self.scaler.at(batch, sequence)

    def estimate(self, batch: int, sequence: int | None = None, *, flops: bool = False) -> Point:
        """One step at ``batch`` (and ``sequence``) under the tracker; with ``flops``, its training
        FLOPs too (in the same pass unless blocks are checkpointed: then :meth:`count_flops`).

        Raises:
            ValueError: a ``sequence`` longer than the model's position table or configuration
                allows (fake tensors would not see the lookup fail).
            Any error of the model at that size; the step is left ready for the next size."""
        if sequence is not None and self.positions is not None and sequence > self.positions[0]:
            raise ValueError(f"{self.positions[1]}: a sequence of {sequence} would index past it")
        self._resize(batch, sequence)
        fsdp = self.policy.sharding == "fsdp"
        same_pass = flops and self.policy.checkpointing == "none" and not fsdp
        tracker = fsdp_tracker(self.step.model, self.step.optimizer) if fsdp else None
        try:
            tracked = track_step(self.step, count_flops=same_pass, custom_mapping=self.custom_mapping, tracker=tracker)
        finally:
            self.step.optimizer.zero_grad(set_to_none=True)
        key = "cuda_allocated_peak_bytes" if self.cuda else "peak_bytes"
        phases = {name: record[key] + self.buckets for name, record in tracked["phases"].items()}
        categories = dict(tracked["by_category"])
        largest = dict(tracked["largest"])
        if self.buckets:
            categories["gradient_buckets"] = largest["gradient_buckets"] = self.buckets
        metric = tracked["flops"]["totals"]["training_flops"] if same_pass else (
            self.count_flops(batch, sequence) if flops else None)
        # DDP's rule: one all-reduce of every gradient (its buckets) per step
        communication = getattr(tracker, "communication", None) if fsdp else (
            {"all_reduce_bytes": self.buckets} if self.buckets else None)
        return Point(batch, sequence, max(phases.values()), tracked["peak_phase"], phases, categories, largest,
                     flops=metric, communication=communication)

    def count_flops(self, batch: int, sequence: int | None = None) -> dict[str, Any]:
        """The training FLOPs (forward and backward; a ``training_flops`` metric) of a step at this
        size, counted alone: no memory tracker (see the module docstring), and no optimizer step,
        whose operators the count leaves out (:data:`~.flops.FLOP_PHASES`)."""
        self._resize(batch, sequence)
        return count_step_flops(self.step, self.custom_mapping)["totals"]["training_flops"]
