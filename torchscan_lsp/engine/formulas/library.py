"""Module classes of third-party model libraries (``transformers`` and code copied from it,
``torchvision``, ``timm``).

The engine imports no model library, so these families match modules by *structure*: the
attributes, parameters and children of the instance, and the names its class's ``forward`` refers
to (``forward.__code__.co_names``, decorators unwrapped, with the class's own methods it calls on
``self``) and, where names cannot tell, its binary operators. Where two classes share a structure but
compute different things, the class name decides as well. Each family's ``match_*`` docstring states
its rule and why it is enough. The families come after every torch family in the registry, so a
subclass of a torch module keeps its torch formula.

==========================  ===================================================================
family                      formulas
==========================  ===================================================================
``gpt2_conv1d``             ``nn.Linear``'s (``linear.py``) with ``in = weight.shape[0]``,
                            ``out = nf``: the same ``addmm``, with the weight stored transposed
``library_activation``      ``cost·Nx`` FLOPs, 0 MACs, ``Nx + scalars + Ny`` DMAs; ``cost`` from the
                            torch activation table (``activation.py``) for the same function
``library_rms_norm``        ``4N + 3R + [offset]·P`` FLOPs (the operators of ``x·rsqrt(mean(x²) + ε)·w``),
                            0 MACs, ``N + P + Ny + 2R + [offset]·2P`` DMAs, ``R = N / x.shape[-1]``,
                            ``offset``: Gemma's ``1 + weight`` scale
``rotary_embedding``        ``A + 4·Ny`` FLOPs, ``A`` MACs for a matrix-product outer product (else 0),
                            ``A/F + F + A + 4·Ny + 2`` DMAs (below)
``trailing_trim``           Wav2Vec2's ``SamePadLayer`` and its copies: 0, 0, ``2·Ny`` (``Nx`` untrimmed)
``library_drop_path``       ``transformers``' ``DropPath`` copies: 0, 0, 0 in evaluation; in training
                            ``2·Nx + 2M`` FLOPs, 0 MACs, ``3·Nx + Ny + 6M + 2`` DMAs
``elementwise_affine``      MobileBERT's ``NoNorm`` (``x·w + b``): ``2·Nx``, 0, ``Nx + P + Ny``
``stochastic_depth``        torchvision's ``StochasticDepth``, timm's ``DropPath``: 0, 0, 0 in
                            evaluation (dropout's elided identity); in training ``Nx + [s]·M``
                            FLOPs, 0 MACs, ``Nx + Ny + 2M + [s]·(2M + 1)`` DMAs (``M`` mask values)
``vision_permute``          torchvision's ``Permute``: 0, 0, ``2·Nx`` (``nn.Flatten``'s view)
``timm_activation``         timm's ``GELU``, ``Sigmoid``, ``Swish``, ...: the torch activation's
``layer_scale``             timm's ``LayerScale``/``LayerScale2d``/``Scale``: ``Nx``, 0,
                            ``Nx + P + Ny``; ``Affine``: ``2·Nx``, 0, ``Nx + P + Ny``
``global_response_norm``    timm's ``GlobalResponseNorm``: ``6·Nx + 2G + B``, 0,
                            ``Nx + P + Ny + 2G + 2B`` (``G`` = batch·channels, ``B`` = batch)
``fast_adaptive_avg_pool``  timm's ``FastAdaptiveAvgPool``: ``nn.AdaptiveAvgPool2d(1)``'s
==========================  ===================================================================

The families live in ``library_vision.py`` (torchvision, timm), ``library_transformers.py`` and
``library_elementwise.py`` (the last three rows);
``_library_structure.py`` holds what their rules share. The vision-library families
(``torchvision``, ``timm``) match on the class's module path (``type(module).__module__`` under
``torchvision.ops`` or ``timm``), the class name and the attributes the formula reads: their
classes have too little structure to be told apart otherwise.

Casts (``.to(torch.float32)``, ``.float()``, the cast back to the input dtype) are data movement:
they add no FLOPs, and, as everywhere in this package, DMAs count the logical algorithm's reads and
writes, not an implementation's extra copies.
"""

from __future__ import annotations

from ._common import rf_pointwise
from ._registry import Family
from .library_elementwise import *  # noqa: F403
from .library_elementwise import __all__ as _ELEMENTWISE
from .library_transformers import *  # noqa: F403
from .library_transformers import __all__ as _TRANSFORMERS
from .library_vision import *  # noqa: F403
from .library_vision import __all__ as _VISION
from .structural import flops_zero, macs_zero

__all__ = [*_VISION, *_TRANSFORMERS, *_ELEMENTWISE, "rf_library"]

rf_library = rf_pointwise

FAMILIES = [
    Family("stochastic_depth", (), flops_stochastic_depth, macs_stochastic_depth, dmas_stochastic_depth, rf_library,
           match=match_stochastic_depth),
    Family("vision_permute", (), flops_permute, macs_zero, dmas_permute, rf_library, match=match_permute),
    Family("timm_activation", (), flops_timm_activation, macs_zero, dmas_timm_activation, rf_library,
           match=match_timm_activation),
    Family("layer_scale", (), flops_layer_scale, macs_zero, dmas_layer_scale, rf_library, match=match_layer_scale),
    Family("global_response_norm", (), flops_global_response_norm, macs_global_response_norm,
           dmas_global_response_norm, rf_library, match=match_global_response_norm),
    Family("fast_adaptive_avg_pool", (), flops_fast_adaptive_avg_pool, macs_fast_adaptive_avg_pool,
           dmas_fast_adaptive_avg_pool, rf_fast_adaptive_avg_pool, match=match_fast_adaptive_avg_pool),
    Family("gpt2_conv1d", (), flops_conv1d, macs_conv1d, dmas_conv1d, rf_library, match=match_conv1d),
    Family("library_activation", (), flops_library_activation, macs_library_activation, dmas_library_activation,
           rf_library, match=match_library_activation),
    Family("library_rms_norm", (), flops_library_rmsnorm, macs_library_rmsnorm, dmas_library_rmsnorm, rf_library,
           match=match_rms_norm),
    Family("rotary_embedding", (), flops_rotary, macs_rotary, dmas_rotary, rf_library, match=match_rotary),
    Family("trailing_trim", (), flops_zero, macs_zero, dmas_trailing_trim, rf_library, match=match_trailing_trim),
    Family("library_drop_path", (), flops_drop_path, macs_zero, dmas_drop_path, rf_library, match=match_drop_path),
    Family("elementwise_affine", (), flops_affine, macs_zero, dmas_affine, rf_library, match=match_affine),
]
