"""Formulas for model-library classes (``formulas/library.py``), built from the installed
``transformers`` with tiny shapes. Expected values are derived by hand in the comments, from
PyTorch's own counter, or from the torch module that computes the same function."""

import warnings

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_lsp.engine.formulas import family_of
from torchscan_lsp.engine.recording.operators import measure_flops

transformers = pytest.importorskip("transformers")
activations = pytest.importorskip("transformers.activations")
pytorch_utils = pytest.importorskip("transformers.pytorch_utils")

POINTWISE = (1.0, 1.0, 0.0)


def _values(got) -> tuple:
    return got.flops, got.macs, got.dmas, got.rf


# ---------------------------------------------------------------------------- GPT-2's Conv1D


def test_conv1d_is_a_transposed_linear(measure):
    # Conv1D(nf=6, nx=4) on (2, 3, 4): T = 6 tokens
    # FLOPs 6·6·(2·4 − 1) + 6·6 (bias) = 252 + 36 = 288; MACs 4·6·6 = 144
    # DMAs Nx 24 + P (4·6 + 6) 30 + Ny 36 = 90
    module = pytorch_utils.Conv1D(6, 4)
    got = measure(module, torch.randn(2, 3, 4))
    assert family_of(module).name == "gpt2_conv1d"
    assert _values(got) == (288, 144, 90, POINTWISE)
    assert got.warnings == []


def test_conv1d_matches_nn_linear_and_the_addmm_count(measure):
    module, x = pytorch_utils.Conv1D(5, 3), torch.randn(4, 3)
    linear = nn.Linear(3, 5)
    got, ref = measure(module, x), measure(linear, x)
    assert _values(got) == _values(ref)
    # PyTorch's counter counts 2 FLOPs per multiply-accumulate of the addmm
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(x)
    assert counter.get_flop_counts()["Global"][torch.ops.aten.addmm] == 2 * got.macs


def test_conv1d_without_bias(measure):
    # bias None: FLOPs 5·4·(2·3 − 1) = 100; DMAs 12 + 15 + 20 = 47
    module = pytorch_utils.Conv1D(5, 3)
    module.bias = None
    module.forward = lambda x: x @ module.weight  # transformers' forward needs a bias
    got = measure(module, torch.randn(4, 3))
    assert (got.flops, got.macs, got.dmas) == (100, 60, 47)


def test_other_modules_with_nf_are_not_conv1d():
    class Projection(nn.Module):  # a (nx, nf) weight, but a forward that is not one addmm
        def __init__(self):
            super().__init__()
            self.nf = 4
            self.weight = nn.Parameter(torch.zeros(3, 4))

        def forward(self, x):
            return torch.relu(x @ self.weight)

    class Lin(nn.Linear):  # an nn.Linear subclass keeps the torch family
        nf = 2

    assert family_of(Projection()) is None
    assert family_of(Lin(3, 2)).name == "linear"


# ---------------------------------------------------------------------------- activations


@pytest.mark.parametrize(
    ("library", "torch_module"),
    [
        ("NewGELUActivation", nn.GELU(approximate="tanh")),
        ("GELUTanh", nn.GELU(approximate="tanh")),
        ("FastGELUActivation", nn.GELU(approximate="tanh")),
        ("AccurateGELUActivation", nn.GELU(approximate="tanh")),
        ("GELUActivation", nn.GELU()),
        ("SiLUActivation", nn.SiLU()),
        ("MishActivation", nn.Mish()),
    ],
)
def test_activation_equals_the_torch_formula(measure, library, torch_module):
    x = torch.randn(2, 3, 5)
    got = measure(getattr(activations, library)(), x)
    assert _values(got) == _values(measure(torch_module, x))
    assert got.warnings == []


def test_activation_values_by_hand(measure):
    x = torch.randn(2, 3)  # Nx = Ny = 6
    # tanh GELU 13/elt: x³ (torch.pow, one power), ·0.044715, +x, ·√(2/π), tanh (6), +1, ·x, ·0.5
    # → 78, the operators NewGELUActivation.forward dispatches; DMAs 6 + 6
    assert _values(measure(activations.NewGELUActivation(), x)) == (78, 0, 12, POINTWISE)
    # erf GELU 5/elt: ·1/√2, erf, +1, ·x, ·0.5 → 30
    assert _values(measure(activations.GELUActivation(use_gelu_python=True), x)) == (30, 0, 12, POINTWISE)
    # SiLU 5/elt: sigmoid (4), ·x → 30
    assert _values(measure(activations.SiLUActivation(), x)) == (30, 0, 12, POINTWISE)
    # QuickGELU: ·1.702, sigmoid (4), ·x = 6/elt → 36
    assert measure(activations.QuickGELUActivation(), x).flops == 36
    # relu² : relu, square = 2/elt → 12
    assert measure(activations.ReLUSquaredActivation(), x).flops == 12
    # clip(gelu): 5 + 2 clamps = 7/elt → 42; DMAs 6 + 2 bounds + 6 = 14
    assert _values(measure(activations.ClippedGELUActivation(-10, 10), x)) == (42, 0, 14, POINTWISE)
    # sqrt(softplus): softplus 6 (β multiply, exp, +1, log, ÷β, threshold) + sqrt = 7/elt → 42
    assert measure(activations.SqrtSoftplusActivation(), x).flops == 42
    # Laplace: −μ, ÷(σ√2), erf, +1, ·0.5 = 5/elt → 30
    assert measure(activations.LaplaceActivation(), x).flops == 30
    # the identity: no FLOPs, reads Nx as nn.Identity
    assert _values(measure(activations.LinearActivation(), x)) == (0, 0, 6, POINTWISE)


def test_unknown_or_parameterised_activations_stay_unsupported(measure):
    class SiLUActivation(nn.Module):  # a known name, but with a parameter: not the library class
        def __init__(self):
            super().__init__()
            self.beta = nn.Parameter(torch.ones(1))

        def forward(self, x):
            return x * torch.sigmoid(self.beta * x)

    got = measure(SiLUActivation(), torch.randn(2, 3))
    assert got.flops == 0
    assert f"Module type not supported: {__name__}.SiLUActivation" in got.warnings


# ---------------------------------------------------------------------------- RMS norms


def _rms_classes():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    from transformers.models.mamba.modeling_mamba import MambaRMSNorm
    from transformers.models.mistral.modeling_mistral import MistralRMSNorm
    from transformers.models.t5.modeling_t5 import T5LayerNorm

    return [LlamaRMSNorm, MistralRMSNorm, MambaRMSNorm, T5LayerNorm]


@pytest.mark.parametrize("cls", _rms_classes(), ids=lambda c: c.__name__)
def test_rms_norm_by_hand(measure, cls):
    # (2, 3, 4): N = 24, R = 6 rows, P = 4
    # FLOPs pow 24 + mean 24 (18 adds, 6 divisions) + ε add 6 + rsqrt 2·6 (sqrt, reciprocal)
    #       + ·rsqrt 24 + ·weight 24 = 114; MACs 0; DMAs 24 + 4 + 24 + 2·6 = 64
    module = cls(4)
    got = measure(module, torch.randn(2, 3, 4))
    assert family_of(module).name == "library_rms_norm"
    assert _values(got) == (114, 0, 64, POINTWISE)
    assert got.warnings == []


@pytest.mark.skipif(not hasattr(nn, "RMSNorm"), reason="nn.RMSNorm needs torch >= 2.4")
def test_rms_norm_equals_nn_rmsnorm(measure):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    x = torch.randn(3, 5, 8)
    assert _values(measure(LlamaRMSNorm(8), x)) == _values(measure(nn.RMSNorm(8), x))


def test_rms_norm_in_half_precision_counts_no_casts(measure):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    # the float32 upcast and the cast back are data movement: the same 114 FLOPs and 64 DMAs
    got = measure(LlamaRMSNorm(4).to(torch.bfloat16), torch.randn(2, 3, 4, dtype=torch.bfloat16))
    assert _values(got) == (114, 0, 64, POINTWISE)


def test_mean_subtracting_and_gated_norms_are_not_rms_norms():
    from transformers.models.cohere.modeling_cohere import CohereLayerNorm
    from transformers.models.mamba2.modeling_mamba2 import MambaRMSNormGated

    class GatedRMSNorm(nn.Module):  # an RMSNorm's name and attributes, but a second input
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(4))
            self.variance_epsilon = 1e-6

        def forward(self, hidden_states, gate):
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon) * gate

    # Cohere's LayerNorm has an RMSNorm's attributes but subtracts the mean; the gated norms take a gate
    assert family_of(CohereLayerNorm(4)) is None
    assert family_of(MambaRMSNormGated(4, group_size=4)) is None
    assert family_of(GatedRMSNorm()) is None


# ---------------------------------------------------------------------------- rotary embeddings


def _llama_rotary(**config):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(transformers.LlamaConfig(hidden_size=16, num_attention_heads=2, **config))


def test_rotary_by_hand(measure):
    # head_dim 8: F = 4 frequencies; position ids (1, 3): A = 12 angles; cos (1, 3, 8): Ny = 24
    # FLOPs A + cos 24 + sin 24 + two scalings 48 = 108; MACs 0: the outer product is a broadcast
    # multiply (position_ids[..., None] * inv_freq), element-wise work, not a multiply-accumulate
    # DMAs positions 3 + F 4 + A 12 + 2·(24 + 1 + 24) = 117
    module, x = _llama_rotary(), torch.randn(1, 3, 16)
    got = measure(module, x, torch.arange(3)[None])
    assert family_of(module).name == "rotary_embedding"
    assert _values(got) == (108, 0, 117, POINTWISE)
    assert got.warnings == []


def test_rotary_flops_equal_the_operator_count(measure):
    # what the dispatcher runs: mul (A), cat (data movement), cos, sin, two scalar muls (Ny each)
    module, x, pos = _llama_rotary(), torch.randn(2, 5, 16), torch.arange(5).expand(2, 5)
    got = measure(module, x, pos)
    report = measure_flops(lambda: module(x, pos))
    assert report["total"]["status"] == "complete"
    assert got.flops == report["total"]["value"] == 40 + 4 * 80


def test_mistral_rotary_is_covered(measure):
    from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding

    module = MistralRotaryEmbedding(transformers.MistralConfig(hidden_size=16, num_attention_heads=2))
    assert _values(measure(module, torch.randn(1, 3, 16), torch.arange(3)[None])) == (108, 0, 117, POINTWISE)


def test_rotary_as_a_matrix_product_has_macs(measure):
    # older transformers: inv_freq (B, F, 1) @ positions (B, 1, T), a contraction of inner length 1:
    # one multiply-accumulate per angle, A = 3·4 = 12 MACs (FlopCounterMode's bmm: 2·B·F·T·1 = 24 FLOPs)
    class MatmulRotaryEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8), persistent=False)
            self.attention_scaling = 1.0

        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos() * self.attention_scaling
            sin = emb.sin() * self.attention_scaling
            return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    module = MatmulRotaryEmbedding()
    got = measure(module, torch.randn(1, 3, 16), torch.arange(3)[None])
    assert family_of(module).name == "rotary_embedding"
    assert got.macs == 12
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, 3, 16), torch.arange(3)[None])
    assert counter.get_total_flops() == 2 * 12


def test_rotary_without_duplicated_angles(measure):
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

    # GPT-OSS returns cos/sin of the F-wide angle table itself: F = 4, A = Ny = 12
    # FLOPs 12 + 4·12 = 60; MACs 0 (a broadcast multiply); DMAs 3 + 4 + 12 + 2·(12 + 1 + 12) = 69
    config = transformers.GptOssConfig(hidden_size=16, num_attention_heads=2, head_dim=8)
    module = GptOssRotaryEmbedding(config)
    got = measure(module, torch.randn(1, 3, 16), torch.arange(3)[None])
    assert _values(got) == (60, 0, 69, POINTWISE)


def test_dynamic_rope_is_a_lower_bound(measure):
    module = _llama_rotary(rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
    got = measure(module, torch.randn(1, 3, 16), torch.arange(3)[None])
    assert got.flops == 108
    assert any("may recompute its frequencies" in text for text in got.warnings)


# ---------------------------------------------------------------------------- whole models


def _gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, n_positions=64, vocab_size=100)
    return transformers.GPT2LMHeadModel(config), {"input_ids": torch.randint(0, 100, (1, 8))}


def _bert():
    config = transformers.BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64,
    )
    return transformers.BertModel(config), {"input_ids": torch.randint(0, 100, (1, 8))}


def _llama():
    config = transformers.LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config), {"input_ids": torch.randint(0, 100, (1, 8))}


LIBRARY_CLASSES = {
    "Conv1D", "NewGELUActivation", "GELUActivation", "SiLUActivation", "LlamaRMSNorm", "LlamaRotaryEmbedding",
}


@pytest.mark.parametrize("build", [_gpt2, _bert, _llama], ids=["gpt2", "bert", "llama"])
def test_models_report_no_unsupported_library_modules(build):
    from torchscan_lsp.engine import crawl_module

    torch.manual_seed(0)
    model, kwargs = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = crawl_module(model, kwargs=kwargs)
    unsupported = [d for d in report["diagnostics"] if d["code"] == "unsupported_module_metric"]
    assert unsupported == []
    # every library class that ran has a complete module-FLOPs value
    seen = set()
    for layer in report["layers"]:
        if layer["type"] in LIBRARY_CLASSES:
            seen.add(layer["type"])
            assert layer["metrics"]["module_flops"]["status"] == "complete", layer["path"]
    assert seen
