"""What a plan's policy changes in a training step: its options, and activation checkpointing.

* **Precision** (:func:`policy_options`): ``float32`` casts the model and its floating inputs to
  float32; ``bfloat16-mixed`` keeps float32 parameters, gradients and optimizer state and runs the
  forward under ``torch.autocast(dtype=torch.bfloat16)`` (under FSDP2, its own
  ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`` instead, :mod:`.sharding`);
  ``bfloat16`` casts the model and its inputs to bfloat16, so that gradients and optimizer state are
  bfloat16 too.
* **Optimizer**: the policy's, with the ``train`` options that it accepts (``betas`` of AdamW for
  Adam; none of them for SGD).
* **Activation checkpointing** (:func:`checkpoint_blocks`): every repeated block
  (:func:`repeated_blocks`) goes through ``torch.utils.checkpoint`` (non-reentrant), applied with
  PyTorch's composable ``torch.distributed._composable.checkpoint``, which keeps the module where it
  is (names, hooks and sharding see the same model): the block's forward saves only its inputs, and
  the backward runs the forward again to recompute what it needs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from torch import nn

from torchscan_lsp.contract.plan import Policy
from torchscan_lsp.contract.training import OPTIMIZERS, TrainOptions

__all__ = ["CONTAINERS", "checkpoint_blocks", "policy_options", "repeated_blocks"]

#: Module classes that only hold others: never a block of their own.
CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def policy_options(base: TrainOptions, policy: Policy) -> TrainOptions:
    """The step's options under ``policy``: ``base`` (the target's ``train`` options) with the
    policy's optimizer and precision; keyword arguments of another optimizer are dropped."""
    accepted = OPTIMIZERS[policy.optimizer]
    kwargs = {key: value for key, value in base.optimizer_options.items() if key in accepted}
    mixed = policy.precision == "bfloat16-mixed" and policy.sharding != "fsdp"
    dtype = "bfloat16" if policy.precision == "bfloat16" else "float32"
    return replace(base, optimizer=policy.optimizer, optimizer_options=kwargs, dtype=dtype,
                   autocast="bfloat16" if mixed else None)


def repeated_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The repeated blocks of ``model``, ``(path, module)`` in model order: the outermost modules
    that have children of their own, are no container (:data:`CONTAINERS`), and whose class occurs
    at least twice among such modules -- the transformer layers of a decoder, the residual blocks of
    a ResNet; a module inside a chosen one is not chosen again, and the model itself never is."""
    candidates = [(path, module) for path, module in model.named_modules()
                  if path and not isinstance(module, CONTAINERS) and next(module.children(), None) is not None]
    counts = Counter(type(module) for _, module in candidates)
    chosen: list[tuple[str, nn.Module]] = []
    for path, module in candidates:
        if counts[type(module)] < 2 or any(path.startswith(outer + ".") for outer, _ in chosen):
            continue
        chosen.append((path, module))
    return chosen


def checkpoint_blocks(blocks: list[tuple[str, nn.Module]]) -> None:
    """Apply activation checkpointing to each block (``torch.distributed._composable.checkpoint``:
    ``torch.utils.checkpoint``'s non-reentrant implementation, as hooks on the module)."""
    from torch.distributed._composable import checkpoint

    for _, module in blocks:
        checkpoint(module)
