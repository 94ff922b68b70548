"""A plan's sharded steps: FSDP2 run by PyTorch under a fake process group, and DDP's rules.

**FSDP2** (``torch.distributed.fsdp.fully_shard``, full shard) runs for real -- PyTorch's own
sharding, all-gathers, reduce-scatters and resharding -- on fake tensors, over a *fake process
group* (``torch.testing._internal.distributed.fake_pg``: collectives that return at once without
moving data) of ``ranks`` ranks, with this process as rank 0. Its memory is tracked by PyTorch's
``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`` (with :class:`~.tracker.PhaseTracking`'s
phases, speed and CUDA derivation), whose categories tell sharded from gathered parameters and
gradients and name the communication buffers. The wrapping (:func:`fully_shard_model`) is the one of
PyTorch's FSDP2 examples and torchtitan: each repeated block a group, each other module that owns
parameters (the embedding, the final norm, the head) a group of its own unless it shares them (a
tied head stays with the root), then the root; every group but the root reshards after its forward.

**DDP**: PyTorch's ``DistributedDataParallel`` cannot run on fake tensors (its C++ reducer reads
the parameters' data to check them across ranks: ``RuntimeError: The tensor has a non-zero number of
elements, but its data is not allocated yet``), so its per-rank memory follows the **ZeRO stage 0
rule**, labelled as such (:func:`ddp_buckets`): the single-device step at the per-rank batch, plus
the reducer's gradient buckets -- a flat copy of every gradient (``gradient_as_bucket_view=False``,
the default) -- which live as long as the model is wrapped. Its communication is one all-reduce of
every gradient per step.

The fake process group lives only while a plan runs (:func:`fake_process_group`), in the process
that runs it -- the worker's child, never the warm parent or the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.training.tracker import PhaseTracking

__all__ = ["DDP_METHOD", "FSDP_METHOD", "FSDP_CATEGORIES", "ddp_buckets", "fake_process_group", "fsdp_tracker",
           "fully_shard_model"]

#: Method label of a sharded estimate run by PyTorch.
FSDP_METHOD = ("torch.distributed.fsdp.fully_shard + torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker"
               "+FakeTensorMode (fake process group)")
#: Method label of the DDP rule.
DDP_METHOD = ("ZeRO stage 0 rule (DDP): MemTracker+FakeTensorMode on one rank's step, plus the reducer's "
              "gradient buckets (a flat copy of every gradient)")
#: The categories of a sharded step, in display order.
FSDP_CATEGORIES = ("parameters", "gathered_parameters", "buffers", "gradients", "gathered_gradients",
                   "optimizer_state", "activations", "temporaries", "communication_buffers", "inputs")


@contextlib.contextmanager
def fake_process_group(ranks: int) -> Iterator[Any]:
    """A fake process group of ``ranks`` ranks (this process rank 0) and its one-dimensional device
    mesh, destroyed on exit.

    Raises:
        RuntimeError: a process group is already initialised in this process (a plan never
            replaces one it did not make).
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    if dist.is_initialized():
        raise RuntimeError("a torch.distributed process group is already initialised in this process; a plan runs "
                           "its sharded steps under a fake process group of its own.")
    dist.init_process_group("fake", rank=0, world_size=ranks, store=FakeStore())
    try:
        yield init_device_mesh("cpu", (ranks,))
    finally:
        dist.destroy_process_group()


def _shared(module: nn.Module, model: nn.Module) -> bool:
    """Whether a parameter ``module`` owns is also owned by another module of ``model`` (tied)."""
    own = {id(p) for p in module.parameters(recurse=False)}
    return any(id(p) in own for other in model.modules() if other is not module
               for p in other.parameters(recurse=False))


def fully_shard_model(model: nn.Module, mesh: Any, blocks: list[tuple[str, nn.Module]], *, mixed: bool) -> int:
    """Wrap ``model`` with ``fully_shard`` (see the module docstring); returns the number of groups.

    ``mixed``: FSDP2's mixed precision, ``MixedPrecisionPolicy(param_dtype=torch.bfloat16,
    reduce_dtype=torch.float32)`` -- float32 sharded parameters (the master weights), gradients and
    optimizer state; bfloat16 gathered parameters and compute."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed \
        else MixedPrecisionPolicy()
    groups = [module for _, module in blocks]
    inside = {id(m) for block in groups for m in block.modules()}
    for path, module in model.named_modules():
        if path and id(module) not in inside and next(module.parameters(recurse=False), None) is not None \
                and not _shared(module, model):
            groups.append(module)
            inside |= {id(m) for m in module.modules()}
    for module in groups:
        fully_shard(module, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return len(groups) + 1


def _collectives() -> dict[Any, tuple[str, Any]]:
    """The c10d collectives FSDP2 issues, each with its kind and the tensor bytes counted: the output
    of an all-gather, the input of a reduce-scatter, the tensors of an all-reduce."""
    c10d = torch.ops.c10d
    size = lambda t: t.numel() * t.element_size()  # noqa: E731
    return {c10d._allgather_base_.default: ("all_gather_bytes", lambda args: size(args[0])),
            c10d._reduce_scatter_base_.default: ("reduce_scatter_bytes", lambda args: size(args[1])),
            c10d.allreduce_.default: ("all_reduce_bytes", lambda args: sum(size(t) for t in args[0]))}


def fsdp_tracker(model: nn.Module, optimizer: Any) -> Any:
    """PyTorch's ``FSDPMemTracker`` of ``model`` (a ``fully_shard``-ed root) and ``optimizer``, with
    :class:`~.tracker.PhaseTracking`, :data:`FSDP_CATEGORIES` (``names``) and ``communication``: the
    bytes of each kind of collective the step issued (:func:`_collectives`)."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker, _FSDPRefType

    wrapped = FSDPMemTracker.__torch_dispatch__
    dispatch = getattr(wrapped, "__wrapped__", wrapped)
    collectives = _collectives()

    class FSDPPhaseMemTracker(PhaseTracking, FSDPMemTracker):
        names = {
            _FSDPRefType.SHARDED_PARAM: "parameters", _FSDPRefType.UNSHARDED_PARAM: "gathered_parameters",
            _FSDPRefType.BUFFER: "buffers", _FSDPRefType.SHARDED_GRAD: "gradients",
            _FSDPRefType.UNSHARDED_GRAD: "gathered_gradients", _FSDPRefType.OPT: "optimizer_state",
            _FSDPRefType.ACT: "activations", _FSDPRefType.TEMP: "temporaries",
            _FSDPRefType.ALL_GATHER: "communication_buffers", _FSDPRefType.REDUCE_SCATTER: "communication_buffers",
            _FSDPRefType.INP: "inputs",
        }

        def __init__(self) -> None:
            super().__init__(model, optimizer)
            self.communication = {"all_gather_bytes": 0, "reduce_scatter_bytes": 0, "all_reduce_bytes": 0}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            counted = collectives.get(func)
            if counted is not None:
                self.communication[counted[0]] += counted[1](args)
            return dispatch(self, func, types, args, kwargs)

    return FSDPPhaseMemTracker()


def ddp_buckets(model: nn.Module) -> int:
    """Bytes of DDP's gradient buckets for ``model``: one flat copy of the gradient of every
    parameter that requires grad, in its dtype (``torch.nn.parallel.DistributedDataParallel``'s
    reducer with ``gradient_as_bucket_view=False``; each tied tensor once)."""
    seen: dict[int, int] = {}
    for parameter in model.parameters():
        if parameter.requires_grad:
            seen[id(parameter)] = parameter.numel() * parameter.element_size()
    return sum(seen.values())
