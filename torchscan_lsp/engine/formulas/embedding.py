"""Embedding look-ups: ``Embedding`` and ``EmbeddingBag``.

``Embedding`` (``D = embedding_dim``, ``Nx`` indices, ``Ny = Nx·D``):

* FLOPs 0 and MACs 0: a row gather computes nothing.
* DMAs ``Nx + 2·Ny``: read the indices, read the ``D`` elements of each selected row, write them.
  Only the selected rows are read, not the whole table.
* With ``max_norm`` set, PyTorch renormalises the looked-up rows in place first; how many rows
  exceed the norm depends on the data, so that work is not counted and the formula warns that its
  FLOPs and DMAs are lower bounds.
* A subclass whose ``forward`` multiplies the looked-up rows by a scalar ``embed_scale``
  (``transformers``' ``...ScaledWordEmbedding``: Gemma, BART, M2M100, ..., ``super().forward(ids) *
  self.embed_scale``, told by the names its ``forward`` refers to) adds that multiply: ``Ny`` FLOPs,
  and ``Ny + 1 + Ny`` DMAs (read the rows and the scale, write the product).
* Receptive field ``(1.0, 1.0, 0.0)`` (token-wise).

``EmbeddingBag`` (``N`` indices, ``B`` bags = ``y.shape[0]``, ``D``): gather ``N`` rows and reduce
each bag.

* FLOPs: ``sum`` ``(N − B)·D`` adds; ``mean`` adds ``B·D`` divides; ``max`` ``(N − B)·D``
  comparisons; ``per_sample_weights`` (``sum`` only) adds ``N·D`` multiplies. Entries equal to
  ``padding_idx`` are still counted (dense convention: which entries are padding depends on data).
* MACs ``N·D`` with ``per_sample_weights`` (a weighted sum is a multiply-accumulate), else 0.
* DMAs ``N + [offsets] + [weights]·N + N·D + Ny``: indices, offsets, per-sample weights, the gathered
  rows, the output.
* ``per_sample_weights`` and ``offsets`` are inputs 3 and 2: pass ``inputs=`` to ``module_macs`` /
  ``module_dmas`` (``module_flops`` always receives them); without it none are assumed.
* Receptive field: not defined — a bag reduces a whole index axis (the formula warns; the crawler
  reports it unavailable).
"""

from __future__ import annotations

from torch import nn

from ._common import arg, as_inputs, input_tensor, lower_bound, numel, output_tensor, rf_pointwise, rf_undefined, shape
from ._library_structure import forward_names
from ._registry import Family

__all__ = [
    "dmas_embedding",
    "dmas_embeddingbag",
    "flops_embedding",
    "flops_embeddingbag",
    "macs_embedding",
    "macs_embeddingbag",
    "rf_embedding",
    "rf_embeddingbag",
]


def _warn_max_norm(module: nn.Embedding) -> None:
    if module.max_norm is not None:
        lower_bound(
            f"{type(module).__name__} max_norm renormalisation is data-dependent and not counted; "
            "the value is a lower bound."
        )


#: what a scaled embedding's ``forward`` refers to: the base look-up, the scale and casts
_SCALED_NAMES = frozenset(("super", "forward", "embed_scale", "to", "weight", "dtype"))


def _scaled(module: nn.Embedding) -> bool:
    """Whether ``module``'s class overrides ``forward`` with ``super().forward(ids) * embed_scale``."""
    return _scaled_class(type(module))


def _scaled_class(cls: type) -> bool:
    if cls.forward is nn.Embedding.forward:
        return False
    names = forward_names(cls)
    return "embed_scale" in names and names <= _SCALED_NAMES


def flops_embedding(module: nn.Embedding, inputs, out=None) -> int:
    """0 (a gather); ``Ny`` for a scaled embedding's multiply."""
    _warn_max_norm(module)
    return numel(output_tensor(out, module)) if _scaled(module) else 0


def macs_embedding(module: nn.Embedding, x=None, y=None, *, inputs=None) -> int:
    """0."""
    return 0


def dmas_embedding(module: nn.Embedding, x, y, *, inputs=None) -> int:
    """``Nx + 2·Ny``; a scaled embedding's multiply adds ``2·Ny + 1``."""
    _warn_max_norm(module)
    return numel(x) + 2 * numel(y) + (2 * numel(y) + 1 if _scaled(module) else 0)


rf_embedding = rf_pointwise


def _bag_call(module: nn.EmbeddingBag, x, y, inputs):
    inputs = as_inputs(inputs) if inputs is not None else (x,)
    offsets = arg(inputs, 1)
    weights = arg(inputs, 2)
    n_idx = numel(x)
    bags = shape(y)[0] if len(shape(y)) > 1 else 1
    return n_idx, bags, module.embedding_dim, offsets, weights


def flops_embeddingbag(module: nn.EmbeddingBag, inputs, out) -> int:
    """sum ``(N − B)·D`` (+ ``N·D`` with per-sample weights); mean ``+ B·D``; max ``(N − B)·D``."""
    x, y = input_tensor(inputs, module), output_tensor(out, module)
    _warn_max_norm(module)
    n_idx, bags, dim, _, weights = _bag_call(module, x, y, inputs)
    flops = max(n_idx - bags, 0) * dim
    if module.mode == "mean":
        flops += bags * dim
    if weights is not None:
        flops += n_idx * dim
    return flops


def macs_embeddingbag(module: nn.EmbeddingBag, x, y, *, inputs=None) -> int:
    """``N·D`` with per-sample weights, else 0."""
    n_idx, _, dim, _, weights = _bag_call(module, x, y, inputs)
    return n_idx * dim if weights is not None else 0


def dmas_embeddingbag(module: nn.EmbeddingBag, x, y, *, inputs=None) -> int:
    """``N + [offsets] + [weights]·N + N·D + Ny``."""
    _warn_max_norm(module)
    n_idx, _, dim, offsets, weights = _bag_call(module, x, y, inputs)
    dmas = n_idx + n_idx * dim + numel(y)
    if offsets is not None and hasattr(offsets, "shape"):
        dmas += numel(offsets)
    if weights is not None:
        dmas += n_idx
    return dmas


def rf_embeddingbag(module: nn.EmbeddingBag, x=None, y=None):
    """Not defined (warns)."""
    return rf_undefined(module, "each bag reduces a whole axis of indices.")


FAMILIES = [
    Family("embedding", (nn.Embedding,), flops_embedding, macs_embedding, dmas_embedding, rf_embedding,
           covers_forward=_scaled_class),
    Family("embedding_bag", (nn.EmbeddingBag,), flops_embeddingbag, macs_embeddingbag, dmas_embeddingbag,
           rf_embeddingbag),
]
