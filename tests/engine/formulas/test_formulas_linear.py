"""nn.Linear formulas; expected values derived by hand in the comments."""

import torch
from torch import nn

from torchscan_lsp.engine.formulas import flops_linear, module_dmas, module_flops, module_macs


def test_linear_on_a_sequence_counts_every_token(measure):
    # case P09: Linear(16, 32) on (2, 10, 16): T = 20 tokens.
    # FLOPs = out·T·(2·in − 1) + out·T = 32·20·31 + 32·20 = 19840 + 640 = 20480
    # MACs = in·T·out = 16·20·32 = 10240; DMAs = Nx + P + Ny = 320 + (512 + 32) + 640 = 1504
    got = measure(nn.Linear(16, 32), torch.randn(2, 10, 16))
    assert (got.flops, got.macs, got.dmas) == (20480, 10240, 1504)
    assert got.rf == (1.0, 1.0, 0.0)
    assert got.warnings == []


def test_linear_without_bias(measure):
    # Linear(4, 3, bias=False) on (5, 4): FLOPs 3·5·(2·4 − 1) = 105; MACs 4·5·3 = 60;
    # DMAs 20 + 12 + 15 = 47
    got = measure(nn.Linear(4, 3, bias=False), torch.randn(5, 4))
    assert (got.flops, got.macs, got.dmas) == (105, 60, 47)


def test_contract_example_linear():
    # docs/report-schema.md: Linear(64, 2) on (1, 64): 2·1·127 + 2 = 256 FLOPs, 64·2 = 128 MACs,
    # 64 + 130 + 2 = 196 DMAs
    layer = nn.Linear(64, 2)
    x, y = torch.zeros(1, 64), torch.zeros(1, 2)
    assert module_flops(layer, (x,), y) == 256
    assert module_macs(layer, x, y) == 128
    assert module_dmas(layer, x, y) == 196


def test_bf16_linear(measure):
    # case P20: Linear(16, 32) in bf16 on (4, 16): MACs 4·16·32 = 2048, FLOPs 32·4·31 + 128 = 4096
    got = measure(nn.Linear(16, 32).to(torch.bfloat16), torch.randn(4, 16, dtype=torch.bfloat16))
    assert (got.macs, got.flops) == (2048, 4096)


def test_macs_match_flop_counter(meta_operator_flops):
    # FlopCounterMode counts aten.addmm as 2·M·N·K (bias excluded) = 2·MACs.
    layer, x = nn.Linear(16, 32), torch.randn(2, 10, 16)
    macs = module_macs(layer, x, torch.zeros(2, 10, 32))
    assert meta_operator_flops(layer, x) == 2 * macs == 20480


def test_helper_accepts_a_lone_tensor():
    layer = nn.Linear(4, 3)
    x = torch.zeros(5, 4)
    # 3·5·7 + 15 = 120
    assert flops_linear(layer, x) == flops_linear(layer, (x,)) == 120
