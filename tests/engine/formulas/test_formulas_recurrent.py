"""RNN/LSTM/GRU formulas; expected values derived by hand, MACs cross-checked against
FlopCounterMode on the meta device (where the fused CPU kernel decomposes into addmm/mm)."""

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from torchscan_lsp.engine.formulas import module_dmas, module_macs


def test_lstm_case_p10(measure, meta_operator_flops):
    # case P10: LSTM(5, 5) on (3, 1, 5): per token 4H(I + H) = 20·10 = 200 → 3·200 = 600 MACs
    # FLOPs per token: 20·(2·5 − 1)·2 (two gate matmuls) + 2·20 (biases) + 32·5 (cell) = 560
    #   → 1680
    # DMAs (N = T = 3): input projection 20·5 + 20 + 3·5 + 3·20 = 195; steps 3·20 + 3·5 + 3·5
    #   + 3·(20·5 + 20) + 2·3·5 = 480 → 675
    lstm, x = nn.LSTM(5, 5), torch.randn(3, 1, 5)
    got = measure(lstm, x)
    assert (got.flops, got.macs, got.dmas) == (1680, 600, 675)
    assert any("Receptive field is not defined for LSTM" in t for t in got.warnings)
    assert meta_operator_flops(lstm, x) == 2 * 600


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
def test_bidirectional_multilayer_lstm_with_projection(measure, meta_operator_flops):
    # LSTM(3, 5, num_layers=2, bidirectional, proj_size=2) on (4, 2, 3): N = 8 tokens, T = 4
    # layer 0, per direction and token: 4·5·(3 + 2) + 5·2 (projection) = 110
    # layer 1 (input 2 directions × 2 = 4): 4·5·(4 + 2) + 10 = 130
    # MACs = 8 tokens · 2 directions · (110 + 130) = 3840
    # FLOPs per direction and token: layer 0: 20·5 + 20·3 + 40 + 32·5 + 2·(2·5 − 1) = 378
    #   layer 1: 20·7 + 20·3 + 40 + 160 + 18 = 418 → 8·2·(378 + 418) = 12736
    # DMAs per direction: layer 0: projection 20·3 + 20 + 8·3 + 8·20 = 264; steps 8·20 + 8·2
    #   + 8·2 + 4·(20·2 + 20 + 2·5) + 2·8·5 = 552 → 816; layer 1: 20·4 + 20 + 8·4 + 160 = 292
    #   + 552 = 844 → 2·(816 + 844) = 3320
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    x = torch.randn(4, 2, 3)
    got = measure(lstm, x)
    assert (got.flops, got.macs, got.dmas) == (12736, 3840, 3320)
    assert meta_operator_flops(lstm, x) == 2 * 3840


def test_lstm_batch_first_and_given_state(measure):
    # same work as P10 with (B, T, I) = (1, 3, 5) and an explicit (h0, c0)
    lstm = nn.LSTM(5, 5, batch_first=True)
    x = torch.randn(1, 3, 5)
    state = (torch.zeros(1, 1, 5), torch.zeros(1, 1, 5))
    got = measure(lstm, x, state)
    assert (got.flops, got.macs, got.dmas) == (1680, 600, 675)


def test_gru(measure, meta_operator_flops):
    # GRU(2, 3) on (2, 1, 2): per token 3·3·(2 + 3) = 45 MACs → 90
    # FLOPs per token 9·3 + 9·5 + 18 + 22·3 = 156 → 312
    gru, x = nn.GRU(2, 3), torch.randn(2, 1, 2)
    got = measure(gru, x)
    assert (got.flops, got.macs) == (312, 90)
    assert meta_operator_flops(gru, x) == 180


def test_bidirectional_two_layer_gru_matches_flop_counter(meta_operator_flops):
    # GRU(3, 5, 2 layers, bidirectional) on (4, 2, 3): layer 0 15·8 = 120, layer 1 15·15 = 225
    # per direction and token → 8·2·(120 + 225) = 5520 MACs
    gru, x = nn.GRU(3, 5, num_layers=2, bidirectional=True), torch.randn(4, 2, 3)
    assert module_macs(gru, x, gru(x)[0]) == 5520
    assert meta_operator_flops(gru, x) == 2 * 5520


@pytest.mark.parametrize(("nonlinearity", "flops"), [("tanh", 2 * 51), ("relu", 2 * 36)])
def test_rnn(nonlinearity, flops, measure, meta_operator_flops):
    # RNN(2, 3) on (2, 1, 2): per token 3·(2 + 3) = 15 MACs → 30
    # FLOPs per token 3·3 + 3·5 + 6 + (tanh 7·3 = 21 | relu 2·3 = 6) = 51 | 36
    rnn, x = nn.RNN(2, 3, nonlinearity=nonlinearity), torch.randn(2, 1, 2)
    got = measure(rnn, x)
    assert (got.flops, got.macs) == (flops, 30)
    assert meta_operator_flops(rnn, x) == 60


def test_packed_sequence(measure):
    # LSTM(2, 3) on a packed batch of lengths [3, 1]: N = 4 tokens, T = 3 steps
    # MACs 4·12·(2 + 3) = 240
    # DMAs: projection 12·2 + 12 + 4·2 + 4·12 = 92; steps 4·12 + 4·3 + 4·3 + 3·(12·3 + 12)
    #   + 2·4·3 = 240 → 332
    lstm = nn.LSTM(2, 3)
    packed = pack_padded_sequence(torch.randn(3, 2, 2), lengths=[3, 1])
    got = measure(lstm, packed)
    assert (got.macs, got.dmas) == (240, 332)
    # FLOPs and MACs depend only on the token count, so the packed data alone gives them too
    assert module_macs(lstm, packed.data, None) == 240
    assert module_dmas(lstm, packed, None) == 332


def test_cells(measure):
    # LSTMCell(3, 4) on (2, 3): 2·16·(3 + 4) = 224 MACs; RF point-wise
    got = measure(nn.LSTMCell(3, 4), torch.randn(2, 3))
    assert (got.macs, got.rf) == (224, (1.0, 1.0, 0.0))
    # FLOPs per sample: 16·5 + 16·7 + 32 + 32·4 = 352 → 704
    assert got.flops == 704
    # GRUCell(3, 4) unbatched (3,): 12·7 = 84 MACs; RNNCell(3, 4): 4·7 = 28 per sample
    assert measure(nn.GRUCell(3, 4), torch.randn(3)).macs == 84
    assert measure(nn.RNNCell(3, 4), torch.randn(5, 3)).macs == 5 * 28
