"""Formulas for ``torchvision`` and ``timm`` classes (``formulas/library.py``).

Neither library is a dependency, so each test uses a small stand-in class that reproduces the
original's class name, module path (``__module__``), attributes and ``forward``:

* ``StochasticDepth`` — ``torchvision.ops.stochastic_depth.StochasticDepth`` (and the function
  ``torchvision.ops.stochastic_depth.stochastic_depth``);
* ``Permute`` — ``torchvision.ops.misc.Permute``;
* ``DropPath`` — ``timm.layers.drop.DropPath`` (and ``timm.layers.drop.drop_path``);
* ``GELU``, ``GELUTanh``, ``Sigmoid``, ``Tanh``, ``Swish``, ``HardSwish``, ``HardSigmoid``,
  ``Mish``, ``QuickGELU`` — ``timm.layers.activations``;
* ``HardMish`` — ``timm.layers.activations``;
* ``LayerScale`` — ``timm.layers.layer_scale.LayerScale``; ``LayerScale2d`` —
  ``timm.layers.layer_scale.LayerScale2d``; ``Scale`` — ``timm.models.metaformer.Scale``;
  ``Affine`` — ``timm.models.mlp_mixer.Affine``;
* ``GlobalResponseNorm`` — ``timm.layers.grn.GlobalResponseNorm``;
* ``FastAdaptiveAvgPool`` — ``timm.layers.adaptive_avgmax_pool.FastAdaptiveAvgPool``.

Expected values are derived by hand in the comments, or taken from the torch module that does the
same work.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp.engine.formulas import family_of

POINTWISE = (1.0, 1.0, 0.0)


def _values(got) -> tuple:
    return got.flops, got.macs, got.dmas, got.rf


# ---------------------------------------------------------------------------- stand-ins


def _stochastic_depth(input, p, mode, training=True):
    if not training or p == 0.0:
        return input
    survival_rate = 1.0 - p
    if mode == "row":
        size = [input.shape[0]] + [1] * (input.ndim - 1)
    else:
        size = [1] * input.ndim
    noise = torch.empty(size, dtype=input.dtype, device=input.device)
    noise = noise.bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise.div_(survival_rate)
    return input * noise


class StochasticDepth(nn.Module):
    __module__ = "torchvision.ops.stochastic_depth"

    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        self.p = p
        self.mode = mode

    def forward(self, input):
        return _stochastic_depth(input, self.p, self.mode, self.training)


class Permute(nn.Module):
    __module__ = "torchvision.ops.misc"

    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return torch.permute(x, self.dims)


def _drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    __module__ = "timm.layers.drop"

    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return _drop_path(x, self.drop_prob, self.training, self.scale_by_keep)


class _TimmActivation(nn.Module):
    __module__ = "timm.layers.activations"

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class GELU(nn.Module):
    __module__ = "timm.layers.activations"

    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, input):
        return F.gelu(input)


class GELUTanh(nn.Module):
    __module__ = "timm.layers.activations"

    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, input):
        return F.gelu(input, approximate="tanh")


class Sigmoid(_TimmActivation):
    def forward(self, x):
        return x.sigmoid_() if self.inplace else x.sigmoid()


class Tanh(_TimmActivation):
    def forward(self, x):
        return x.tanh_() if self.inplace else x.tanh()


class Swish(_TimmActivation):
    def forward(self, x):
        return x.mul_(x.sigmoid()) if self.inplace else x.mul(x.sigmoid())


class HardSwish(_TimmActivation):
    def forward(self, x):
        inner = F.relu6(x + 3.0).div_(6.0)
        return x.mul_(inner) if self.inplace else x.mul(inner)


class HardSigmoid(_TimmActivation):
    def forward(self, x):
        if self.inplace:
            return x.add_(3.0).clamp_(0.0, 6.0).div_(6.0)
        return F.relu6(x + 3.0) / 6.0


class Mish(nn.Module):
    __module__ = "timm.layers.activations"

    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, x):
        return x.mul(F.softplus(x).tanh())


class QuickGELU(nn.Module):
    __module__ = "timm.layers.activations"

    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, input):
        return input * torch.sigmoid(1.702 * input)


class HardMish(_TimmActivation):
    def forward(self, x):
        if self.inplace:
            return x.mul_(0.5 * (x + 2).clamp(min=0, max=2))
        return 0.5 * x * (x + 2).clamp(min=0, max=2)


for _cls in (Sigmoid, Tanh, Swish, HardSwish, HardSigmoid, HardMish):
    _cls.__module__ = "timm.layers.activations"


class LayerScale(nn.Module):
    __module__ = "timm.layers.layer_scale"

    def __init__(self, dim, init_values=1e-5, inplace=False):
        super().__init__()
        self.inplace = inplace
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x.mul_(self.gamma) if self.inplace else x * self.gamma


class LayerScale2d(nn.Module):
    __module__ = "timm.layers.layer_scale"

    def __init__(self, dim, init_values=1e-5, inplace=False):
        super().__init__()
        self.inplace = inplace
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        gamma = self.gamma.view(1, -1, 1, 1)
        return x.mul_(gamma) if self.inplace else x * gamma


class Scale(nn.Module):
    __module__ = "timm.models.metaformer"

    def __init__(self, dim, init_value=1.0, trainable=True, use_nchw=True):
        super().__init__()
        self.shape = (dim, 1, 1) if use_nchw else (dim,)
        self.scale = nn.Parameter(init_value * torch.ones(dim), requires_grad=trainable)

    def forward(self, x):
        return x * self.scale.view(self.shape)


class Affine(nn.Module):
    __module__ = "timm.models.mlp_mixer"

    def __init__(self, dim):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones((1, 1, dim)))
        self.beta = nn.Parameter(torch.zeros((1, 1, dim)))

    def forward(self, x):
        return torch.addcmul(self.beta, self.alpha, x)


class GlobalResponseNorm(nn.Module):
    __module__ = "timm.layers.grn"

    def __init__(self, dim, eps=1e-6, channels_last=True):
        super().__init__()
        self.eps = eps
        if channels_last:
            self.spatial_dim = (1, 2)
            self.channel_dim = -1
            self.wb_shape = (1, 1, 1, -1)
        else:
            self.spatial_dim = (2, 3)
            self.channel_dim = 1
            self.wb_shape = (1, -1, 1, 1)
        self.weight = nn.Parameter(torch.zeros(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        x_g = x.norm(p=2, dim=self.spatial_dim, keepdim=True)
        x_n = x_g / (x_g.mean(dim=self.channel_dim, keepdim=True) + self.eps)
        return x + torch.addcmul(self.bias.view(self.wb_shape), self.weight.view(self.wb_shape), x * x_n)


class FastAdaptiveAvgPool(nn.Module):
    __module__ = "timm.layers.adaptive_avgmax_pool"

    def __init__(self, flatten: bool = False, input_fmt: str = "NCHW"):
        super().__init__()
        self.flatten = flatten
        self.dim = (2, 3) if input_fmt == "NCHW" else (1, 2)  # timm's get_spatial_dim

    def forward(self, x):
        return x.mean(self.dim, keepdim=not self.flatten)


# ---------------------------------------------------------------------------- stochastic depth


@pytest.mark.parametrize(
    "module", [StochasticDepth(0.2, "row"), StochasticDepth(0.2, "batch"), DropPath(0.1)], ids=repr
)
def test_stochastic_depth_in_evaluation_is_an_elided_identity(measure, module):
    # evaluation returns the very input: 0 FLOPs, 0 MACs, 0 DMAs, as nn.Dropout in evaluation
    x = torch.randn(4, 3, 5)
    got = measure(module, x)
    assert family_of(module).name == "stochastic_depth"
    assert _values(got) == (0, 0, 0, POINTWISE) == _values(measure(nn.Dropout(0.2), x))
    assert got.warnings == []


def test_stochastic_depth_in_training_by_hand(measure):
    x = torch.randn(4, 3, 5)  # Nx = Ny = 60, batch 4
    # row: M = 4; FLOPs 60 (mask multiply) + 4 (mask ÷ 0.8) = 64
    # DMAs 60 + 60 + 2·4 (mask drawn, then read by the multiply) + 2·4 + 1 (scale) = 137
    got = measure(StochasticDepth(0.2, "row"), x, train=True)
    assert _values(got) == (64, 0, 137, POINTWISE)
    # batch: M = 1; FLOPs 60 + 1 = 61; DMAs 120 + 2 + 3 = 125
    assert _values(measure(StochasticDepth(0.2, "batch"), x, train=True)) == (61, 0, 125, POINTWISE)
    # p = 0: the identity even in training
    assert _values(measure(StochasticDepth(0.0, "row"), x, train=True)) == (0, 0, 0, POINTWISE)
    # p = 1: survival 0, the mask is not scaled: FLOPs 60; DMAs 120 + 8 = 128
    assert _values(measure(StochasticDepth(1.0, "row"), x, train=True)) == (60, 0, 128, POINTWISE)


def test_drop_path_in_training_by_hand(measure):
    x = torch.randn(2, 6)  # Nx = Ny = 12, M = 2
    # FLOPs 12 + 2 = 14; DMAs 12 + 12 + 4 + 5 = 33
    assert _values(measure(DropPath(0.3), x, train=True)) == (14, 0, 33, POINTWISE)
    # scale_by_keep=False: FLOPs 12; DMAs 24 + 4 = 28
    assert _values(measure(DropPath(0.3, scale_by_keep=False), x, train=True)) == (12, 0, 28, POINTWISE)
    # drop_prob = 0: the identity
    assert _values(measure(DropPath(0.0), x, train=True)) == (0, 0, 0, POINTWISE)


def test_stochastic_depth_needs_the_package_and_the_attributes():
    class Elsewhere(StochasticDepth):
        pass

    Elsewhere.__name__ = "StochasticDepth"
    Elsewhere.__module__ = "mymodels.blocks"  # not torchvision.ops
    assert family_of(Elsewhere(0.1, "row")) is None
    assert family_of(StochasticDepth(0.1, "column")) is None  # not a torchvision mode
    assert family_of(DropPath(1.5)) is None  # not a probability
    assert family_of(DropPath(0.1)).name == "stochastic_depth"


# ---------------------------------------------------------------------------- Permute


def test_permute_by_hand(measure):
    # (2, 3, 4, 5) → (2, 4, 5, 3): a view, 0 FLOPs; DMAs 2·120 = 240, as nn.Flatten
    module, x = Permute([0, 2, 3, 1]), torch.randn(2, 3, 4, 5)
    got = measure(module, x)
    assert family_of(module).name == "vision_permute"
    assert _values(got) == (0, 0, 240, POINTWISE)
    assert (got.flops, got.macs, got.dmas) == _values(measure(nn.Flatten(), x))[:3]
    assert got.warnings == []


def test_permute_outside_torchvision_is_unsupported(measure):
    class Permute(nn.Module):  # a user's Permute: the module path is this test's, not torchvision's
        def __init__(self):
            super().__init__()
            self.dims = [0, 2, 1]

        def forward(self, x):
            return x.permute(self.dims)

    got = measure(Permute(), torch.randn(2, 3, 4))
    assert f"Module type not supported: {__name__}.Permute" in got.warnings


# ---------------------------------------------------------------------------- timm activations


@pytest.mark.parametrize(
    ("timm_module", "torch_module"),
    [
        (GELU(), nn.GELU()),
        (GELUTanh(), nn.GELU(approximate="tanh")),
        (Sigmoid(), nn.Sigmoid()),
        (Tanh(), nn.Tanh()),
        (Swish(), nn.SiLU()),
        (Swish(inplace=True), nn.SiLU(inplace=True)),
        (HardSwish(), nn.Hardswish()),
        (HardSwish(inplace=True), nn.Hardswish(inplace=True)),
        (HardSigmoid(), nn.Hardsigmoid()),
        (HardSigmoid(inplace=True), nn.Hardsigmoid(inplace=True)),
        (Mish(), nn.Mish()),
        (HardMish(), nn.Hardswish()),
    ],
    ids=lambda m: f"{type(m).__module__.split('.')[0]}.{type(m).__name__}",
)
def test_timm_activation_equals_the_torch_activation(measure, timm_module, torch_module):
    x = torch.randn(2, 3, 5)
    got = measure(timm_module, x.clone())
    assert family_of(timm_module).name == "timm_activation"
    assert _values(got) == _values(measure(torch_module, x.clone()))
    assert got.warnings == []


def test_timm_activation_values_by_hand(measure):
    x = torch.randn(2, 3)  # Nx = Ny = 6
    # GELU (erf) 5/elt → 30; DMAs 6 + 6
    assert _values(measure(GELU(), x)) == (30, 0, 12, POINTWISE)
    # tanh GELU 14/elt → 84
    assert measure(GELUTanh(), x).flops == 84
    # sigmoid 4/elt → 24; in place: the output is not written, DMAs 6
    assert _values(measure(Sigmoid(), x.clone())) == (24, 0, 12, POINTWISE)
    assert measure(Sigmoid(inplace=True), x.clone()).dmas == 6
    # tanh 6/elt → 36; DMAs the reference's 2·6 + 6 = 18
    assert _values(measure(Tanh(), x)) == (36, 0, 18, POINTWISE)
    # swish = SiLU 5/elt → 30; hard swish 5/elt → 30; hard sigmoid 4/elt → 24; mish 10/elt → 60
    assert measure(Swish(), x).flops == 30
    assert measure(HardSwish(), x).flops == 30
    assert measure(HardSigmoid(), x).flops == 24
    assert measure(Mish(), x).flops == 60
    # QuickGELU: ·1.702, sigmoid (4), ·x = 6/elt → 36; DMAs 12
    assert _values(measure(QuickGELU(), x)) == (36, 0, 12, POINTWISE)
    # HardMish: +2, two clamps, ·0.5, ·x = 5/elt → 30, as nn.Hardswish; in place DMAs 6
    assert _values(measure(HardMish(), x)) == (30, 0, 12, POINTWISE) == _values(measure(nn.Hardswish(), x))
    assert measure(HardMish(inplace=True), x.clone()).dmas == 6


def test_torch_named_classes_outside_timm_are_not_timm_activations(measure):
    class GELU(nn.Module):  # torch's name, this test's module path: not matched
        def forward(self, x):
            return F.gelu(x)

    assert family_of(nn.GELU()).name == "elementwise_activation"
    got = measure(GELU(), torch.randn(2, 3))
    assert f"Module type not supported: {__name__}.GELU" in got.warnings  # not read as torch.nn.GELU


# ---------------------------------------------------------------------------- LayerScale


def test_layer_scale_by_hand(measure):
    # (2, 3, 4) · gamma(4): FLOPs 24 multiplies; DMAs 24 + 4 + 24 = 52
    module = LayerScale(4)
    got = measure(module, torch.randn(2, 3, 4))
    assert family_of(module).name == "layer_scale"
    assert _values(got) == (24, 0, 52, POINTWISE)
    assert got.warnings == []
    # in place: no separate output write, 24 + 4 = 28
    assert measure(LayerScale(4, inplace=True), torch.randn(2, 3, 4)).dmas == 28


def test_layer_scale_2d_by_hand(measure):
    # (2, 3, 4, 5) · gamma(3) per channel: FLOPs 120; DMAs 120 + 3 + 120 = 243
    assert _values(measure(LayerScale2d(3), torch.randn(2, 3, 4, 5))) == (120, 0, 243, POINTWISE)


def test_metaformer_scale_and_resmlp_affine_by_hand(measure):
    # Scale(3) on NCHW (2, 3, 4, 5): FLOPs 120; DMAs 120 + 3 + 120 = 243
    module = Scale(3)
    assert family_of(module).name == "layer_scale"
    assert _values(measure(module, torch.randn(2, 3, 4, 5))) == (120, 0, 243, POINTWISE)
    # Scale(4, use_nchw=False) on (2, 3, 4): FLOPs 24; DMAs 24 + 4 + 24 = 52, as LayerScale(4)
    x = torch.randn(2, 3, 4)
    assert _values(measure(Scale(4, use_nchw=False), x)) == _values(measure(LayerScale(4), x))
    # Affine(4) on (2, 3, 4): addcmul, a multiply and an add per element: FLOPs 48;
    # DMAs 24 + P (4 + 4) + 24 = 56
    got = measure(Affine(4), x)
    assert family_of(Affine(4)).name == "layer_scale"
    assert _values(got) == (48, 0, 56, POINTWISE)
    assert got.warnings == []


def test_layer_scale_equals_a_multiply_by_a_parameter(measure):
    # the same work as torch's element-wise activation convention: one FLOP per element, the
    # activations' Nx + scalars + Ny DMAs with the P scales as the scalars read (PReLU's rule)
    x = torch.randn(2, 3, 4)
    prelu = nn.PReLU(4)  # PReLU costs 4/elt, so compare DMAs only: Nx + P + Ny
    assert measure(LayerScale(4), x).dmas == measure(prelu, x.transpose(1, 2).contiguous()).dmas


# ---------------------------------------------------------------------------- FastAdaptiveAvgPool


@pytest.mark.parametrize("flatten", [False, True])
def test_fast_adaptive_avg_pool_equals_adaptive_avg_pool(measure, flatten):
    # (2, 3, 4, 5): W = 120 window elements, Ny = 6 means
    # FLOPs = MACs = 120 − 6 + 2·6 = 126; DMAs 120 + 6 = 126; RF (4, 4, 0)
    x = torch.randn(2, 3, 4, 5)
    module = FastAdaptiveAvgPool(flatten=flatten)
    got = measure(module, x)
    assert family_of(module).name == "fast_adaptive_avg_pool"
    assert _values(got) == (126, 126, 126, (4, 4, 0))
    assert _values(got) == _values(measure(nn.AdaptiveAvgPool2d(1), x))
    assert got.warnings == []


def test_fast_adaptive_avg_pool_channels_last(measure):
    # NHWC (2, 4, 5, 3) pools the same 2·3 means over 4·5 positions: the NCHW values
    x = torch.randn(2, 3, 4, 5)
    got = measure(FastAdaptiveAvgPool(input_fmt="NHWC"), x.permute(0, 2, 3, 1))
    assert _values(got) == _values(measure(nn.AdaptiveAvgPool2d(1), x))


# ---------------------------------------------------------------------------- GlobalResponseNorm


def test_global_response_norm_by_hand(measure):
    # channels last (2, 4, 5, 3): Nx = 120, G = 2·3 = 6 norms, B = 2 means, P = 3 + 3 = 6
    # FLOPs: norms 120 squares + (120 − 6) adds + 6 roots = 240; mean 4 adds + 2 divides = 6; ε 2;
    # divide 6; x·x_n 120; addcmul 240; residual 120 → 240 + 6 + 2 + 6 + 120 + 240 + 120 = 734
    # = 6·120 + 2·6 + 2; DMAs 120 + 6 + 120 + 2·6 + 2·2 = 262
    module = GlobalResponseNorm(3)
    got = measure(module, torch.randn(2, 4, 5, 3))
    assert family_of(module).name == "global_response_norm"
    assert _values(got) == (734, 0, 262, POINTWISE)
    assert got.warnings == []
    # NCHW (2, 3, 4, 5) computes the same statistics: the same values
    nchw = measure(GlobalResponseNorm(3, channels_last=False), torch.randn(2, 3, 4, 5))
    assert _values(nchw) == (734, 0, 262, POINTWISE)



def test_global_response_norm_needs_its_parameters():
    module = GlobalResponseNorm(3)
    del module.bias  # a GRN without its bias is not timm's class
    assert family_of(module) is None
