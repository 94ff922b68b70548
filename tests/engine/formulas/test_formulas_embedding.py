"""Embedding and EmbeddingBag formulas; expected values derived by hand."""

import torch
from torch import nn


def test_embedding(measure):
    # Embedding(10, 4) on ids (2, 3): Nx = 6, Ny = 24. A gather: 0 FLOPs, 0 MACs;
    # DMAs = 6 indices + 24 row elements read + 24 written = 54
    got = measure(nn.Embedding(10, 4), torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 54, (1.0, 1.0, 0.0))
    assert got.warnings == []


def test_embedding_max_norm_is_a_lower_bound(measure):
    got = measure(nn.Embedding(10, 4, max_norm=1.0), torch.tensor([[1, 2, 3]]))
    assert got.dmas == 3 + 24
    assert any("lower bound" in text for text in got.warnings)
    assert not any("not supported" in text for text in got.warnings)


def test_embedding_bag_mean_2d(measure):
    # EmbeddingBag(10, 4, mode="mean") on (2, 3): N = 6, B = 2 bags, D = 4
    # FLOPs (6 − 2)·4 adds + 2·4 divides = 24; MACs 0
    # DMAs 6 + 6·4 + 2·4 = 38
    got = measure(nn.EmbeddingBag(10, 4, mode="mean"), torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert (got.flops, got.macs, got.dmas) == (24, 0, 38)
    assert any("Receptive field is not defined for EmbeddingBag" in t for t in got.warnings)


def test_embedding_bag_weighted_sum_with_offsets(measure):
    # EmbeddingBag(10, 4, mode="sum"), 5 indices, offsets [0, 2] → 2 bags, per-sample weights
    # FLOPs (5 − 2)·4 adds + 5·4 multiplies = 32; MACs 5·4 = 20
    # DMAs 5 indices + 2 offsets + 5 weights + 20 rows + 8 outputs = 40
    bag = nn.EmbeddingBag(10, 4, mode="sum")
    ids, offsets, weights = torch.tensor([1, 2, 3, 4, 5]), torch.tensor([0, 2]), torch.rand(5)
    got = measure(bag, ids, offsets, weights)
    assert (got.flops, got.macs, got.dmas) == (32, 20, 40)


def test_embedding_bag_max(measure):
    # mode="max" on (2, 3), D = 4: (6 − 2)·4 = 16 comparisons
    got = measure(nn.EmbeddingBag(10, 4, mode="max"), torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert (got.flops, got.macs) == (16, 0)


def test_case_p03_tied_head_is_the_only_mac_work(measure):
    # case P03: Embedding(50, 8) + Linear(8, 50) sharing the weight, ids (1, 4):
    # the embedding has 0 MACs, the head 4·8·50 = 1600
    emb = nn.Embedding(50, 8)
    head = nn.Linear(8, 50, bias=False)
    head.weight = emb.weight
    ids = torch.zeros(1, 4, dtype=torch.long)
    assert measure(emb, ids).macs == 0
    assert measure(head, emb(ids)).macs == 1600
