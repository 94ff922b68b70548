"""Library classes that tiny ``transformers`` models use, by hand, and the module formulas held against
the operator counter on whole models (random weights from configs, nothing downloaded).

Expected values are derived by hand in the comments; the whole-model test compares the two methods
of the engine, which count independently (module formulas from shapes, operators from the
dispatcher)."""

import warnings

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.formulas import family_of

transformers = pytest.importorskip("transformers")

POINTWISE = (1.0, 1.0, 0.0)


def _values(got) -> tuple:
    return got.flops, got.macs, got.dmas, got.rf


# ---------------------------------------------------------------------------- Gemma's RMS norm


def test_gemma_rms_norm_by_hand(measure):
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

    # x·rsqrt(mean(x²) + ε)·(1 + w) on (2, 3, 4): N = 24, R = 6 rows, P = 4
    # FLOPs pow 24 + mean 24 + ε add 6 + rsqrt 2·6 + ·rsqrt 24 + (1 + w) 4 + ·(1 + w) 24 = 118
    # MACs 0; DMAs N 24 + P 4 + Ny 24 + 2R 12 + the P sums written and read back 8 = 72
    module = GemmaRMSNorm(4)
    got = measure(module, torch.randn(2, 3, 4))
    assert family_of(module).name == "library_rms_norm"
    assert _values(got) == (118, 0, 72, POINTWISE)
    assert got.warnings == []


def test_gemma_rms_norm_flops_equal_the_operator_count(measure):
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

    from torchscan_lsp.engine.recording.operators import measure_flops

    # (3, 5, 8): N = 120, R = 15, P = 8: 4·120 + 3·15 + 8 = 533
    module, x = GemmaRMSNorm(8), torch.randn(3, 5, 8)
    report = measure_flops(lambda: module(x))
    assert measure(module, x).flops == report["total"]["value"] == 533


def test_an_offset_elsewhere_is_not_gemmas():
    # 1 added to the input, not to the weight: not an RMS norm these formulas describe
    class ShiftedRMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(4))
            self.eps = 1e-6

        def forward(self, x):
            x = x + 1.0
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    assert family_of(ShiftedRMSNorm()) is None


# ---------------------------------------------------------------------------- Wav2Vec2's SamePadLayer


@pytest.mark.parametrize(("kernel", "dmas", "steps"), [
    # an even kernel pads one step too many: the layer drops the last, (2, 4, 7) -> (2, 4, 6):
    # a slice, read and written per kept element, 2·Ny = 2·48 = 96
    (16, 96, 6),
    # an odd kernel: the input itself, read once as nn.Identity, Nx = 56
    (15, 56, 7),
])
def test_same_pad_layer_by_hand(measure, kernel, dmas, steps):
    from transformers.models.hubert.modeling_hubert import HubertSamePadLayer
    from transformers.models.wav2vec2.modeling_wav2vec2 import Wav2Vec2SamePadLayer

    for cls in (Wav2Vec2SamePadLayer, HubertSamePadLayer):
        module = cls(kernel)
        x = torch.randn(2, 4, 7)
        assert module(x).shape[-1] == steps
        got = measure(module, x)
        assert family_of(module).name == "trailing_trim"
        assert _values(got) == (0, 0, dmas, POINTWISE)
        assert got.warnings == []


# ---------------------------------------------------------------------------- scaled word embeddings


def test_scaled_word_embedding_by_hand(measure):
    from transformers.models.gemma.modeling_gemma import GemmaTextScaledWordEmbedding

    # ids (1, 5), D = 4: Ny = 20; the gather computes nothing, the scale is one multiply per element
    # FLOPs 20; MACs 0; DMAs ids 5 + rows 20 + written 20, then the multiply reads 20 + the scale 1
    # and writes 20: 86
    module = GemmaTextScaledWordEmbedding(10, 4, padding_idx=0, embed_scale=2.0)
    got = measure(module, torch.tensor([[1, 2, 3, 4, 5]]))
    assert _values(got) == (20, 0, 86, POINTWISE)
    # a plain embedding gathers only: 0 FLOPs, ids 5 + 2·20 = 45 DMAs
    assert _values(measure(nn.Embedding(10, 4), torch.tensor([[1, 2, 3, 4, 5]]))) == (0, 0, 45, POINTWISE)


# ---------------------------------------------------------------------------- whole models


def _gemma():
    return transformers.GemmaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=2, num_key_value_heads=1, head_dim=16), torch.randint(0, 64, (1, 8))


def _llama():
    return transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=2, num_key_value_heads=1), torch.randint(0, 64, (1, 8))


def _t5():
    return transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=2,
                                 is_encoder_decoder=False), torch.randint(0, 64, (1, 8))


def _gpt2():
    return transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2), torch.randint(0, 64, (1, 8))


def _wav2vec2():
    return transformers.Wav2Vec2Config(
        vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
    ), torch.randn(1, 400)


#: module formulas that count differently from the operators on purpose (docs/formulas.md, "Linear,
#: convolutions"): without a bias, out·(2·in − 1) FLOPs where the product counts 2·in·out
_CONVENTION = (nn.Linear, nn.Conv1d)


@pytest.mark.parametrize("config", [_gemma, _llama, _t5, _gpt2, _wav2vec2], ids=["gemma", "llama", "t5", "gpt2", "wav2vec2"])
def test_every_leaf_is_complete_and_counts_as_the_operators(config):
    from torchscan_lsp.engine import crawl_module

    cfg, x = config()
    torch.manual_seed(0)
    model = (transformers.T5EncoderModel(cfg) if isinstance(cfg, transformers.T5Config)
             else transformers.AutoModel.from_config(cfg)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = crawl_module(model, args=(x,))
    modules = dict(model.named_modules())
    checked = 0
    for layer in report["layers"]:
        metrics = layer["metrics"]
        if "module_flops" not in metrics:
            continue  # a container: no module formula of its own
        assert {metrics[name]["status"] for name in ("module_flops", "macs", "dmas")} == {"complete"}, layer["path"]
        if isinstance(modules[layer["path"]], _CONVENTION):
            continue
        assert metrics["module_flops"]["value"] == metrics["operator_flops"]["value"], layer["path"]
        assert metrics["macs"]["value"] == metrics["operator_macs"]["value"], layer["path"]
        checked += 1
    assert checked


# ---------------------------------------------------------------------------- DropPath copies, NoNorm


def test_drop_path_by_hand(measure):
    from transformers.models.swin.modeling_swin import SwinDropPath

    from torchscan_lsp.engine.recording.operators import measure_flops

    x = torch.randn(2, 3, 4)  # Nx = Ny = 24, a mask of M = 2 (one per sample)
    module = SwinDropPath(0.25)
    assert family_of(module).name == "library_drop_path"
    # evaluation: the input itself, an elided identity as Dropout: nothing counted
    assert _values(measure(module, x)) == (0, 0, 0, POINTWISE)
    # training: rand + keep (2), floor (2), x.div(keep) (24), · mask (24) = 52 FLOPs
    # DMAs: draw writes 2; + keep reads 2 + 1, writes 2; floor reads 2, writes 2; div reads 24 + 1,
    # writes 24; the multiply reads 24 + 2, writes 24: 2 + 5 + 4 + 49 + 50 = 110
    assert _values(measure(module, x, train=True)) == (52, 0, 110, POINTWISE)
    assert measure_flops(lambda: module(x))["total"]["value"] == 52
    # p = 0 returns the input in training too
    assert measure(SwinDropPath(0.0), x, train=True).flops == 0


def test_no_norm_is_an_elementwise_affine(measure):
    from transformers.models.mobilebert.modeling_mobilebert import NoNorm

    # x·w + b on (2, 3, 4): a multiply and an add per element, 48 FLOPs; DMAs 24 + P 8 + 24 = 56
    module = NoNorm(4)
    got = measure(module, torch.randn(2, 3, 4))
    assert family_of(module).name == "elementwise_affine"
    assert _values(got) == (48, 0, 56, POINTWISE)


# ---------------------------------------------------------------------------- rotary tables per layer type


def test_rotary_per_layer_type_by_hand(measure):
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    # Gemma 3 keeps one table per layer type; head_dim 8: F = 4 for each; position ids (1, 3):
    # A = 12 angles, cos (1, 3, 8): Ny = 24. FLOPs A + cos 24 + sin 24 + two scalings 48 = 108;
    # MACs 0 (a broadcast multiply); DMAs positions 3 + F 4 + A 12 + 2·(24 + 1 + 24) = 117
    config = transformers.Gemma3TextConfig(hidden_size=16, num_attention_heads=2, head_dim=8, num_hidden_layers=2)
    module = Gemma3RotaryEmbedding(config)
    assert family_of(module).name == "rotary_embedding"
    for layer_type in module.layer_types:
        got = measure(module, torch.randn(1, 3, 16), torch.arange(3)[None], layer_type)
        assert _values(got) == (108, 0, 117, POINTWISE), layer_type
        assert got.warnings == []
