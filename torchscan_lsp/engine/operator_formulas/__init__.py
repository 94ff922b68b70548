"""FLOP formulas for the operators that PyTorch's ``FlopCounterMode`` leaves uncounted (docs/operator-formulas.md).

``DEFAULT_FORMULAS`` maps operator packets (``torch.ops.aten.relu`` — packets, not overloads) to
callables that follow ``FlopCounterMode``'s formula contract: PyTorch calls
``formula(*args, **kwargs, out_val=out)`` after wrapping it with ``shape_wrapper``, so the formula
sees every tensor replaced by its ``torch.Size`` and the output's shape as ``out_shape=``; a formula
with ``_get_raw = True`` gets the real arguments and ``out_val=`` instead. Pass the mapping as
``FlopCounterMode(custom_mapping=DEFAULT_FORMULAS)``; ``measure_flops`` and ``crawl_module`` use it
by default, and a caller's ``custom_mapping`` wins over it.

No packet that PyTorch already counts (``torch.utils.flop_counter.flop_registry``: mm, addmm, bmm,
baddbmm, convolution, the CUDA attention kernels, ...) is overridden, except those in
``CORRECTIONS``, where PyTorch's formula is wrong: ``convolution_backward`` (its grad-weight term
ignores groups; see ``convolution.convolution_backward_flop``).

``DECOMPOSITION_GUARDS`` maps *overloads* (``torch.ops.aten.native_batch_norm.default``) to the same
formulas. ``FlopCounterMode`` calls ``func.decompose()`` on every overload that is not a key of its
registry (its registry is keyed by packets, so that is every overload) and counts the pieces: an
overload with a ``CompositeImplicitAutograd`` decomposition that still reaches the dispatch mode —
``native_batch_norm`` and ``upsample_nearest2d`` (Python decompositions), ``silu_backward`` and
``mish_backward`` (called below autograd in a backward pass) — is then counted under other names (``_native_batch_norm_legit_no_training``,
or the index arithmetic ``add``/``mul`` of nearest upsampling) while an operator recorder sees the
original one. Merging ``DECOMPOSITION_GUARDS`` into the custom mapping makes the overload a registry
key, so the counter runs it whole and counts it with its packet's formula. The values are never
called (the counter looks formulas up by packet), so a caller's formula for the packet still wins.
Use ``counter_mapping(custom)`` to build the whole mapping.

``MAC_FORMULAS`` maps the packets of matrix, convolution, attention and recurrent operators
(PyTorch's and ours) to their multiply-accumulates, from matrix dimensions (``macs``); ``MAC_CLASS``
names every operator that does such products, so that one without a MAC formula is never a silent 0.

``EXTRA_IGNORED`` (op name -> reason) lists operators that do no arithmetic but are missing from the
reference ignore list (views, data movement, creation, random generation, runtime queries).

The families, one module each: ``elementwise``, ``activation`` (with softmax), ``normalization``,
``pooling``, ``reduction``, ``interpolation``, ``embedding``, ``matmul``, ``spectral`` (FFTs), ``loss``,
``attention`` (fused CPU attention and Transformer kernels), ``recurrent`` (fused RNN kernels),
``backward`` (the gradients of these families, for training-step workloads) and ``convolution``
(convolution backward, in place of PyTorch's formula). ``complex`` turns any of them into real
arithmetic for complex operands (a complex multiply 6 FLOPs, a complex MAC 4 real MACs). The
convention is explained once in docs/operator-formulas.md.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import flop_registry as _torch_registry

from . import (  # noqa: F401  (importing a family registers its formulas)
    activation,
    attention,
    backward,
    convolution,
    elementwise,
    embedding,
    interpolation,
    loss,
    matmul,
    normalization,
    pooling,
    recurrent,
    reduction,
    spectral,
)
from ._base import CORRECTIONS, FAMILY, REGISTRY
from .ignored import EXTRA_IGNORED
from .macs import MAC_CLASS, MAC_FORMULAS

#: operator packet -> FLOP formula (FlopCounterMode custom_mapping contract).
DEFAULT_FORMULAS: dict = {
    packet: fn for packet, fn in REGISTRY.items() if packet not in _torch_registry or packet in CORRECTIONS
}

#: "aten.relu" -> family module name ("activation"), for documentation and tests.
FORMULA_FAMILIES: dict[str, str] = {str(packet): FAMILY[str(packet)] for packet in DEFAULT_FORMULAS}


def _decomposition_guards() -> dict:
    guards: dict = {}
    composite = torch._C.DispatchKey.CompositeImplicitAutograd
    for packet, formula in DEFAULT_FORMULAS.items():
        for name in packet.overloads():
            try:
                overload = getattr(packet, name)
                decomposes = composite in overload.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(
                    overload.name(), composite)
            except (AttributeError, RuntimeError):  # listed, but not registered in this build
                continue
            if decomposes:
                guards[overload] = formula
    return guards


#: overload -> formula: overloads FlopCounterMode would otherwise decompose before counting.
DECOMPOSITION_GUARDS: dict = _decomposition_guards()


def counter_mapping(custom: dict[Any, Any] | None = None) -> dict[Any, Any]:
    """The ``custom_mapping`` for ``FlopCounterMode``: our formulas, the decomposition guards, then
    the caller's formulas (which win)."""
    return {**DEFAULT_FORMULAS, **DECOMPOSITION_GUARDS, **(custom or {})}


__all__ = [
    "CORRECTIONS", "DECOMPOSITION_GUARDS", "DEFAULT_FORMULAS", "EXTRA_IGNORED", "FORMULA_FAMILIES", "MAC_CLASS",
    "MAC_FORMULAS", "counter_mapping",
]  # fmt: skip
