"""Every non-view, non-data-movement operator that real architectures dispatch has a formula.

ResNet-, MobileNetV3- and U-Net-style CNN blocks are written by hand (torchvision is optional);
GPT-2, BERT, Llama, Mistral, ViT, T5 and Mamba come from ``transformers`` with tiny random configs.
Each runs in eval + no_grad (the fused fast paths), eval with autograd, train and inference mode
(where CompositeImplicit operators such as conv2d and layer_norm reach the dispatch mode and are
decomposed by the counter), on CPU and on the meta device, under FlopCounterMode with our mapping
and a recorder of the operators the counter executes.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from opformula_models import CNN_BUILDERS, TRANSFORMERS_BUILDERS, run_model, uncovered

from torchscan_lsp.engine.operator_formulas import DEFAULT_FORMULAS

OURS = {str(p) for p in DEFAULT_FORMULAS}
CASES = [("eval_no_grad", "cpu"), ("eval_no_grad", "meta"), ("eval", "cpu"), ("train", "cpu"),
         ("inference_mode", "cpu")]


def _check(builder, mode: str, device: str, dtype=None) -> dict[str, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flops, calls = run_model(builder, mode=mode, device=device, dtype=dtype)
    assert uncovered(calls) == {}
    # every operator the recorder saw with one of our formulas was counted under its own name
    # (FlopCounterMode did not decompose it into other operators first)
    assert [op for op in calls if op in OURS and op not in flops] == []
    # and nothing was counted that the recorder did not see
    assert set(flops) <= set(calls)
    return flops


@pytest.mark.parametrize(("mode", "device"), CASES)
@pytest.mark.parametrize("name", sorted(CNN_BUILDERS))
def test_hand_written_models_fully_covered(name, mode, device):
    flops = _check(CNN_BUILDERS[name], mode, device)
    assert sum(flops.values()) > 0


@pytest.mark.parametrize(("mode", "device"), CASES)
@pytest.mark.parametrize("name", sorted(TRANSFORMERS_BUILDERS))
def test_transformers_models_fully_covered(name, mode, device):
    pytest.importorskip("transformers")
    if name == "bert" and device == "meta":
        pytest.skip("BertModel's padding-mask check calls Tensor.item(), impossible on meta tensors")
    flops = _check(TRANSFORMERS_BUILDERS[name], mode, device)
    assert sum(flops.values()) > 0


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_bf16_transformers_fully_covered(name):
    pytest.importorskip("transformers")
    _check(TRANSFORMERS_BUILDERS[name], "eval_no_grad", "cpu", dtype=torch.bfloat16)


def test_fused_paths_are_used_and_counted():
    """In eval + no_grad the fused CPU kernels run, and they are counted, not zero."""
    flops, calls = run_model(CNN_BUILDERS["torch_transformer_encoder"])
    assert calls.get("aten._transformer_encoder_layer_fwd") == 2 and flops["aten._transformer_encoder_layer_fwd"] > 0
    flops, calls = run_model(CNN_BUILDERS["torch_lstm"])
    assert calls.get("aten.mkldnn_rnn_layer") == 4 and flops["aten.mkldnn_rnn_layer"] > 0
    flops, calls = run_model(CNN_BUILDERS["torch_mha"])
    assert calls.get("aten._native_multi_head_attention") == 1


def test_transformers_sdpa_is_counted():
    pytest.importorskip("transformers")
    flops, calls = run_model(TRANSFORMERS_BUILDERS["gpt2"])
    assert calls["aten._scaled_dot_product_flash_attention_for_cpu"] == 2
    assert flops["aten._scaled_dot_product_flash_attention_for_cpu"] > 0


@pytest.mark.parametrize("name", ["resnet", "mobilenet_v3", "unetish", "torch_lstm", "torch_gru"])
def test_meta_device_counts_equal_cpu(name):
    """CNNs and recurrent layers count the same on the meta device (the LSTM's oneDNN kernel and its
    meta decomposition differ in operator names, not in total)."""
    cpu, _ = run_model(CNN_BUILDERS[name], device="cpu")
    meta, _ = run_model(CNN_BUILDERS[name], device="meta")
    assert sum(cpu.values()) == sum(meta.values())
    if name != "torch_lstm":
        assert cpu == meta
