"""A step's inputs at another size: the batch, and the sequence axis a plan names.

The plan estimates one model at several sizes from the inputs it was first given -- those the
factory returned, or those generated from ``input_shape`` -- resized, never called again:

* **batch**: every tensor of the inputs and targets whose dimension 0 is the base batch (dimension
  0 of the sequence input when one is named, else of the first tensor input) is resized there;
  others (a ``(1, T)`` position index, a weight tensor) keep it;
* **sequence** (``"input_ids:1"``: keyword input ``input_ids``, dimension 1; ``"0:1"``: the first
  positional input): every dimension other than 0, of any input or target tensor, as long as the
  named one -- token ids, their attention mask, the labels, a ``(T, T)`` mask -- is resized.

New tensors keep dtype, device and ``requires_grad``: floating ones are ``torch.rand``, integer ones
zeros (a valid token id and label) and boolean ones ``True`` (an all-visible mask). Under
``FakeTensorMode`` they hold no data, which is all an estimate needs -- and an embedding lookup
past its table is never checked there, so :func:`position_limit` reads the longest sequence a
model's position table or configuration allows.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map_only

from torchscan_lsp.contract.plan import PlanOptionError, SequenceAxis

__all__ = ["InputScaler", "position_limit"]


#: The names models give a learned position table (GPT-2's ``wpe``, BERT's ``position_embeddings``,
#: BART's ``embed_positions``, ViT-style ``pos_embed``).
_POSITION_TABLE = re.compile(r"(^|[._])(wpe|pos_embed(ding)?s?|pos_emb|position_embeddings?|embed_positions)$")
#: Configuration fields that bound the sequence (transformers' configs name it one of these).
_CONFIG_LIMITS = ("max_position_embeddings", "n_positions", "max_seq_len", "block_size")


def position_limit(model: torch.nn.Module) -> tuple[int, str] | None:
    """The longest sequence ``model`` can take and what says so (``(64, "the position table
    'transformer.wpe' has 64 rows")``), or ``None`` when nothing does: the fewest rows of an
    ``nn.Embedding`` named as a position table, and a ``config`` field of :data:`_CONFIG_LIMITS`."""
    found: list[tuple[int, str]] = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and _POSITION_TABLE.search(name):
            found.append((int(module.num_embeddings), f"the position table '{name}' has {module.num_embeddings} rows"))
    config = getattr(model, "config", None)
    for field in _CONFIG_LIMITS:
        value = getattr(config, field, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found.append((value, f"the model's config has {field} = {value}"))
            break
    return min(found, default=None, key=lambda item: item[0])


def _new(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    if tuple(tensor.shape) == shape:
        return tensor
    kind = tensor.dtype
    if kind.is_floating_point or kind.is_complex:
        made = torch.rand(shape, dtype=kind, device=tensor.device)
    else:
        made = (torch.ones if kind is torch.bool else torch.zeros)(shape, dtype=kind, device=tensor.device)
    return made.requires_grad_(tensor.requires_grad) if tensor.requires_grad else made


def _kind(value: Any) -> str:
    """``"a tensor of shape (1, 64)"``, ``"a NoneType"``: what an input is, for a message."""
    return f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"


class InputScaler:
    """The inputs of a step at a batch and a sequence length, from the step's first inputs.

    Args:
        args, kwargs, targets: the step's inputs and the loss's targets (any nesting).
        sequence: the sequence axis, or ``None`` (batch alone).

    Attributes:
        base_batch: dimension 0 of the reference tensor (the sequence input, else the first tensor).
        base_sequence: the sequence input's length along its axis (``None`` without one).

    Raises:
        ValueError: no tensor input to scale.
        PlanOptionError: the sequence input does not exist, is no tensor, or has no such dimension
            (the message names the inputs there are, with their shapes).
    """

    def __init__(self, args: tuple, kwargs: dict[str, Any], targets: tuple, sequence: SequenceAxis | None = None):
        self._values = (tuple(args), dict(kwargs), tuple(targets))
        reference = self._reference(sequence)
        self.base_batch = int(reference.shape[0])
        self.base_sequence = int(reference.shape[sequence.dim]) if sequence is not None else None

    def _reference(self, sequence: SequenceAxis | None) -> torch.Tensor:
        args, kwargs, _ = self._values
        if sequence is None:
            tensors = [leaf for leaf in tree_flatten((args, kwargs))[0] if isinstance(leaf, torch.Tensor) and leaf.dim()]
            if not tensors:
                raise ValueError("the step has no tensor input whose dimension 0 is a batch to scale.")
            return tensors[0]
        if isinstance(sequence.input, int):
            named = f"positional input {sequence.input}"
            value = args[sequence.input] if sequence.input < len(args) else None
        else:
            named = f"keyword input {sequence.input!r}"
            value = kwargs.get(sequence.input)
        if not isinstance(value, torch.Tensor):
            there = [f"positional {index}, {_kind(item)}" for index, item in enumerate(args)]
            there += [f"keyword {name!r}, {_kind(item)}" for name, item in kwargs.items()]
            raise PlanOptionError(
                f"plan option 'sequence': {str(sequence)!r} names no tensor input of the step; its inputs are "
                f"{'; '.join(there) or 'none'} (a positional input by its index, \"0:1\", a keyword one by its name, "
                "\"input_ids:1\").")
        if value.dim() <= sequence.dim:
            raise PlanOptionError(
                f"plan option 'sequence': {str(sequence)!r} names dimension {sequence.dim} of {named}, "
                f"{_kind(value)}, which has dimensions 0 (the batch) to {value.dim() - 1}.")
        return value

    def at(self, batch: int, sequence: int | None = None) -> tuple[tuple, dict[str, Any], tuple]:
        """``(args, kwargs, targets)`` with the batch ``batch`` and, when given, the sequence length
        ``sequence`` (new tensors where a size changes; the first inputs where none does)."""
        base_batch, base_sequence = self.base_batch, self.base_sequence

        def resize(tensor: torch.Tensor) -> torch.Tensor:
            if not tensor.dim():
                return tensor
            shape = list(tensor.shape)
            if shape[0] == base_batch:
                shape[0] = batch
            if sequence is not None and base_sequence is not None:
                shape[1:] = [sequence if size == base_sequence else size for size in shape[1:]]
            return _new(tensor, tuple(shape))

        return tree_map_only(torch.Tensor, resize, self._values)
