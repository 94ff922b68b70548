"""The formula library follows FlopCounterMode's contract and plugs into it as a custom mapping."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode, flop_registry, shape_wrapper

from torchscan_lsp.engine.operator_formulas import (
    DECOMPOSITION_GUARDS,
    DEFAULT_FORMULAS,
    EXTRA_IGNORED,
    FORMULA_FAMILIES,
    counter_mapping,
)

aten = torch.ops.aten


def test_keys_are_packets_not_overloads():
    assert DEFAULT_FORMULAS
    for key in DEFAULT_FORMULAS:
        assert isinstance(key, torch._ops.OpOverloadPacket), key
        # the rule measure_flops applies to custom mappings (docs/operator-formulas.md, "The contract")
        assert getattr(key, "_overloadpacket", key) is key


def test_never_overrides_pytorch_builtin_formulas():
    # the one exception: PyTorch's convolution_backward formula ignores groups (test_conv_backward)
    assert set(DEFAULT_FORMULAS) & set(flop_registry) == {aten.convolution_backward}
    for builtin in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.convolution):
        assert builtin not in DEFAULT_FORMULAS


def test_every_formula_documents_its_count():
    for packet, formula in DEFAULT_FORMULAS.items():
        doc = inspect.getdoc(formula)
        assert doc and len(doc) > 30, f"{packet} has no docstring stating its count"


def test_families_cover_every_formula():
    assert set(FORMULA_FAMILIES) == {str(p) for p in DEFAULT_FORMULAS}
    assert set(FORMULA_FAMILIES.values()) == {
        "elementwise", "activation", "normalization", "pooling", "reduction", "interpolation",
        "embedding", "matmul", "spectral", "loss", "attention", "recurrent", "backward",
    }


def test_required_operators_have_formulas():
    required = [
        "add", "add_", "sub", "mul", "mul_", "div", "neg", "pow", "sqrt", "rsqrt", "exp", "log", "abs",
        "clamp", "where", "maximum", "minimum", "addcmul", "lerp", "relu", "relu_", "gelu", "silu",
        "sigmoid", "tanh", "hardswish", "hardsigmoid", "hardtanh", "leaky_relu", "elu", "mish",
        "softplus", "_prelu_kernel", "softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax",
        "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
        "native_layer_norm", "native_group_norm", "_fused_rms_norm", "rms_norm", "max_pool2d_with_indices",
        "max_pool1d", "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
        "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_max_pool2d", "sum", "mean", "amax", "max",
        "min", "var", "std", "var_mean", "logsumexp", "cumsum", "norm", "linalg_vector_norm",
        "upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_linear1d",
        "_upsample_bilinear2d_aa", "embedding", "embedding_bag", "_embedding_bag",
        "_scaled_dot_product_flash_attention_for_cpu", "mkldnn_rnn_layer", "_native_multi_head_attention",
        "_transformer_encoder_layer_fwd",
    ]
    missing = [name for name in required if getattr(aten, name) not in DEFAULT_FORMULAS]
    assert not missing


def test_calling_convention_matches_installed_flop_counter():
    """PyTorch wraps a non-raw formula with shape_wrapper and calls it as
    formula(*args, **kwargs, out_val=out): tensors arrive as torch.Size, the output as out_shape."""
    seen = []

    def spy(*args, out_shape=None, **kwargs):
        seen.append((args, out_shape, kwargs))
        return 7

    x = torch.ones(2, 3)
    with FlopCounterMode(display=False, custom_mapping={aten.add: spy}) as counter:
        torch.add(x, x, alpha=2)
    assert seen == [((torch.Size([2, 3]), torch.Size([2, 3])), torch.Size([2, 3]), {"alpha": 2})]
    assert counter.get_flop_counts()["Global"] == {aten.add: 7}
    # the same wrapper the engine's attribution code uses
    assert shape_wrapper(DEFAULT_FORMULAS[aten.add])(x, x, out_val=x) == 6


def test_custom_mapping_end_to_end():
    # relu (6 elements x 1) + exp (6 x 1) + sum (6 - 1 = 5 additions) + mm (2*2*3*4 = 48)
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with FlopCounterMode(display=False, custom_mapping=DEFAULT_FORMULAS) as counter:
        torch.relu(a).exp().sum()
        a @ b
    counts = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    assert counts == {"aten.relu": 6, "aten.exp": 6, "aten.sum": 5, "aten.mm": 48}


def test_raw_formulas_marked():
    assert getattr(DEFAULT_FORMULAS[aten._native_multi_head_attention], "_get_raw", False)
    assert getattr(DEFAULT_FORMULAS[aten._transformer_encoder_layer_fwd], "_get_raw", False)
    assert not getattr(DEFAULT_FORMULAS[aten.relu], "_get_raw", False)


def test_caller_mapping_wins():
    def mine(*args, out_shape=None, **kwargs):
        return 1000

    x = torch.ones(4)
    with FlopCounterMode(display=False, custom_mapping=counter_mapping({aten.relu: mine})) as counter:
        torch.relu(x)
    assert counter.get_flop_counts()["Global"] == {aten.relu: 1000}


def test_decomposition_guards_keep_operator_names():
    """Without guards FlopCounterMode decomposes native_batch_norm and nearest upsampling before
    counting, so the count lands under other operator names than the ones a recorder sees."""
    assert all(isinstance(k, torch._ops.OpOverload) for k in DECOMPOSITION_GUARDS)
    assert aten.native_batch_norm.default in DECOMPOSITION_GUARDS
    bn = torch.nn.BatchNorm2d(2).eval()
    x = torch.randn(1, 2, 3, 3)
    with FlopCounterMode(display=False, custom_mapping=DEFAULT_FORMULAS) as plain:
        bn(x)
    assert set(plain.get_flop_counts()["Global"]) == {aten._native_batch_norm_legit_no_training}
    with FlopCounterMode(display=False, custom_mapping=counter_mapping()) as guarded:
        bn(x)
    # eval batch norm, N = 18, C = 2, affine: 2C + 2N + 2N = 4 + 36 + 36
    assert guarded.get_flop_counts()["Global"] == {aten.native_batch_norm: 76}
    with FlopCounterMode(display=False, custom_mapping=counter_mapping()) as near:
        torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest")
    assert near.get_flop_counts()["Global"] == {aten.upsample_nearest2d: 0}


def test_extra_ignored_is_disjoint_and_explained():
    assert not set(EXTRA_IGNORED) & set(FORMULA_FAMILIES)
    for name, reason in EXTRA_IGNORED.items():
        namespace = name.partition(".")[0]
        assert namespace in ("aten", "c10d", "_c10d_functional", "fsdp", "profiler") and reason.endswith(".")
    for name in ("aten.split_with_sizes", "aten.zeros_like", "aten.arange", "aten.index_select",
                 "aten.stack", "aten.new_ones", "aten.tril", "aten.bernoulli_", "aten._local_scalar_dense"):
        assert name in EXTRA_IGNORED


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_formulas_run_on_meta_tensors(device):
    x = torch.randn(2, 4, 8, 8, device=device)
    with FlopCounterMode(display=False, custom_mapping=counter_mapping()) as counter:
        torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (8,)))
    # layer norm N = 512, R = 64, no affine: 6N + 2R = 3200; gelu 5N = 2560
    assert {str(k): v for k, v in counter.get_flop_counts()["Global"].items()} == {
        "aten.native_layer_norm": 3200, "aten.gelu": 2560}
