"""The training FLOPs people estimate by hand, beside the counted ones, with the difference taken apart.

The estimate is PaLM's (Chowdhery et al. 2022, appendix B), after Kaplan et al. 2020: per token,
``6·N`` (a forward multiply-add and two backward ones for each parameter) plus ``12·L·H·Q·T`` for
the attention's score and weighted-sum products (``L`` layers, ``H`` heads, ``Q`` head dimension,
``T`` sequence length), times the tokens of the step:

    estimate = 6·N·tokens + Σ over attention calls 12·H·Q·T_keys·tokens_call

``N`` is the model's trainable parameters (a tied embedding and head counted once); ``tokens`` the
elements of the step's first integer input (token ids); the attention term is read from the fused
attention calls the step's forward dispatched (their shapes, so ``L·H·Q·T`` needs no
configuration), and is unavailable when attention was written as plain matrix products.

Where the counted FLOPs (forward + backward, recomputation apart) differ, the parts:

* ``attention``: the counted fused attention operators (forward and backward, softmax included, by
  the operator formulas) minus the estimate's ``12·L·H·Q·T`` term;
* ``embeddings``: ``-6·N_emb·tokens``: a lookup multiplies nothing, but ``6·N`` counts the
  parameters of every embedding that no other layer uses (a token embedding tied to the output
  head does its multiply-adds there, and stays in);
* ``frozen``: ``2·N_frozen·tokens``, the forward multiply-adds of the frozen weights (a fine-tuned
  backbone, the base weights under LoRA adapters), which ``6·N`` over the trainable parameters
  leaves out (embeddings apart, which multiply nothing);
* ``other``: what remains: normalisation, activations, the loss, biases, residual additions, the
  input gradients that frozen weights pass back (none below the first trainable one), and the
  first layer's backward, which computes no gradient of the input data.

Two more are said beside them, never folded into the difference: **causal masking** (both sides
count attention dense, as PyTorch's formulas do; a causal kernel can skip about half of the score
and weighted-sum work, ``6·H·Q·T_keys·tokens_call`` per causal call) and **recomputation** (module
forwards run again in the backward under activation checkpointing: hardware FLOPs, which MFU
leaves out and HFU keeps).
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.engine.reporting.roofline.layers import tensors_in

__all__ = ["training_estimate", "step_tokens", "untied_embedding_parameters"]

_INTEGERS = ("torch.int64", "torch.int32", "torch.int16", "torch.uint8", "torch.int8")


def step_tokens(inputs: Any) -> int | None:
    """Elements of the first integer tensor among a step's inputs (its token ids), or ``None``."""
    for tensor in tensors_in(inputs):
        if tensor.get("dtype") in _INTEGERS:
            numel = 1
            for size in tensor.get("shape") or ():
                numel *= int(size)
            return numel
    return None


def untied_embedding_parameters(report: dict[str, Any], kind: str = "trainable") -> int:
    """Parameters (``kind``: ``"trainable"`` or ``"frozen"`` elements) of the embedding layers whose
    weight no other layer shares (``shared_with``)."""
    layers = report.get("layers") or []
    used_elsewhere = {path for layer in layers for path in (layer.get("parameters") or {}).get("shared_with") or ()}
    seen: set[str] = set()
    total = 0
    for layer in layers:
        path = layer.get("path")
        if layer.get("type") in ("Embedding", "EmbeddingBag") and path not in used_elsewhere and path not in seen:
            seen.add(path)
            params = layer.get("parameters") or {}
            total += int(params.get(kind) or 0)
    return total


def training_estimate(report: dict[str, Any], training: dict[str, Any]) -> dict[str, Any]:
    """The estimate and the difference's parts (module docstring) for a training report whose step
    was measured (its ``step_time.inputs`` name the tokens); ``{"available": False, "reason"}`` when
    the step has no token ids."""
    flops = training.get("flops") or {}
    inputs = (training.get("step_time") or {}).get("inputs")
    tokens = step_tokens(inputs)
    if not tokens:
        return {"available": False, "reason": "the step has no integer input (token ids), and 6·N·tokens counts per token"}
    parameters = metric_value((report.get("totals") or {}).get("trainable_parameters")) or 0
    calls = flops.get("attention_calls") or []
    attention = sum(12 * c["heads"] * c["head_dim"] * c["key_length"] * c["batch"] * c["query_length"] for c in calls)
    causal_skip = sum(6 * c["heads"] * c["head_dim"] * c["key_length"] * c["batch"] * c["query_length"]
                      for c in calls if c.get("causal"))
    six_n = 6 * parameters * tokens
    estimate = six_n + attention
    counted = metric_value((flops.get("totals") or {}).get("training_flops"))
    recomputed = int((flops.get("recomputed") or {}).get("flops") or 0)
    model_flops = counted - recomputed if counted is not None else None
    embeddings = untied_embedding_parameters(report)
    totals = report.get("totals") or {}
    frozen = max(int(metric_value(totals.get("frozen_parameters")) or 0) - untied_embedding_parameters(report, "frozen"), 0)
    parts = None
    if model_flops is not None:
        attention_part = int(flops.get("attention_flops") or 0) - attention if calls else 0
        embedding_part = -6 * embeddings * tokens
        frozen_part = 2 * frozen * tokens
        parts = {"attention": attention_part, "embeddings": embedding_part, "frozen": frozen_part,
                 "other": model_flops - estimate - attention_part - embedding_part - frozen_part}
    first = calls[0] if calls else None
    return {
        "available": True,
        "formula": "6·N·tokens + 12·L·H·Q·T·tokens",
        "parameters": parameters,
        "tokens": tokens,
        "six_n_tokens": six_n,
        "attention_term": attention if calls else None,
        "attention_layers": len(calls),
        "heads": first["heads"] if first else None,
        "head_dim": first["head_dim"] if first else None,
        "sequence_length": first["key_length"] if first else None,
        "value": estimate,
        "counted_model_flops": model_flops,
        "difference": model_flops - estimate if model_flops is not None else None,
        "parts": parts,
        "embedding_parameters": embeddings,
        "frozen_parameters": frozen,
        "causal_skippable_flops": causal_skip,
        "recomputed_flops": recomputed,
        "note": None if calls else "no fused attention operator ran: attention written as matrix products is in 'other'",
    }
