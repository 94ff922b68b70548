"""Interpolation, embeddings and the matrix products PyTorch leaves uncounted."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from opformula_models import op_flops
from torch import nn

X = torch.randn(1, 2, 3, 3)


def test_nearest_is_data_movement():
    assert op_flops(lambda: F.interpolate(X, scale_factor=2, mode="nearest")) == {"aten.upsample_nearest2d": 0}
    assert op_flops(lambda: F.interpolate(X, scale_factor=2, mode="nearest-exact")) == {
        "aten._upsample_nearest_exact2d": 0}


def test_linear_modes():
    # output (1, 2, 6, 6) = 72 elements; bilinear: 4 taps -> 4 multiplies + 3 adds = 7 -> 504
    assert op_flops(lambda: F.interpolate(X, scale_factor=2.0, mode="bilinear")) == {"aten.upsample_bilinear2d": 504}
    # bicubic: 16 taps -> 31 per output -> 2232
    assert op_flops(lambda: F.interpolate(X, size=(6, 6), mode="bicubic")) == {"aten.upsample_bicubic2d": 2232}
    # linear 1-D: (1, 2, 3) -> (1, 2, 6): 12 outputs * 3 = 36
    assert op_flops(lambda: F.interpolate(X[:, :, 0], scale_factor=2, mode="linear")) == {"aten.upsample_linear1d": 36}
    # trilinear: (1,1,2,2,2) -> (1,1,4,4,4) = 64 outputs * 15 = 960
    x3 = torch.randn(1, 1, 2, 2, 2)
    assert op_flops(lambda: F.interpolate(x3, scale_factor=2, mode="trilinear")) == {"aten.upsample_trilinear3d": 960}
    # an upsampling module with a scale factor (the reference's F.interpolate trap) counts the same
    assert op_flops(lambda: nn.Upsample(scale_factor=2, mode="bilinear")(X)) == {"aten.upsample_bilinear2d": 504}


def _windows(in_size, out_size, half_width):
    """The inputs each output of an anti-aliased pass reads, by hand from ATen's rule: support =
    half_width * scale when downsampling, center = scale * (i + 0.5), the window [center - support
    + 0.5, center + support + 0.5) truncated and clipped to [0, in_size)."""
    scale = in_size / out_size
    support = half_width * scale
    return [min(int(scale * (i + 0.5) + support + 0.5), in_size) - max(int(scale * (i + 0.5) - support + 0.5), 0)
            for i in range(out_size)]


def test_antialiased_windows_are_clipped_at_the_borders():
    # bilinear (half width 1), 8 -> 4: scale 2, support 2; centers 1, 3, 5, 7:
    # [0, 3), [1, 5), [3, 7), [5, 8): 3, 4, 4, 3 taps (not 2 * 2 + 1 = 5 everywhere)
    assert _windows(8, 4, 1) == [3, 4, 4, 3]
    per_line = (2 * 3 - 1) + (2 * 4 - 1) + (2 * 4 - 1) + (2 * 3 - 1)  # 24
    # (1, 1, 4, 8) -> (4, 4): one horizontal pass over 4 rows
    x = torch.randn(1, 1, 4, 8)
    assert 4 * per_line == 96  # not 16 outputs x (2 * 5 - 1) = 144
    assert op_flops(lambda: F.interpolate(x, size=(4, 4), mode="bilinear", antialias=True)) == {
        "aten._upsample_bilinear2d_aa": 4 * per_line}
    # the windows are what the kernel reads: each output's row of the Jacobian has that many
    # non-zero weights (the triangle filter is non-zero across every window here)
    row = torch.randn(1, 1, 1, 8)
    jacobian = torch.autograd.functional.jacobian(
        lambda t: F.interpolate(t, size=(1, 4), mode="bilinear", antialias=True), row).reshape(4, 8)
    assert [int(n) for n in (jacobian != 0).sum(1)] == [3, 4, 4, 3]


def test_antialiased_downsampling():
    x = torch.randn(1, 1, 8, 8)
    # bilinear aa 8 -> 4 along each axis, 24 per line (above): the horizontal pass (1, 1, 8, 4) runs
    # over 8 rows, the vertical (1, 1, 4, 4) over 4 columns
    assert op_flops(lambda: F.interpolate(x, size=(4, 4), mode="bilinear", antialias=True)) == {
        "aten._upsample_bilinear2d_aa": 8 * 24 + 4 * 24}
    # bicubic aa: half width 2, support 4: windows [0, 5), [0, 7), [1, 8), [3, 8)
    assert _windows(8, 4, 2) == [5, 7, 7, 5]
    bicubic = 9 + 13 + 13 + 9
    assert op_flops(lambda: F.interpolate(x, size=(4, 4), mode="bicubic", antialias=True)) == {
        "aten._upsample_bicubic2d_aa": 8 * bicubic + 4 * bicubic}
    # only the width changes: one pass over 8 rows
    assert op_flops(lambda: F.interpolate(x, size=(8, 4), mode="bilinear", antialias=True)) == {
        "aten._upsample_bilinear2d_aa": 8 * 24}


def test_grid_sample():
    inp = torch.randn(1, 2, 4, 4)
    grid = torch.rand(1, 3, 3, 2) * 2 - 1
    # output (1, 2, 3, 3) = 18 * 7 (bilinear) = 126, + 9 grid points * 2 coords * 2 = 36
    assert op_flops(lambda: F.grid_sample(inp, grid, align_corners=False)) == {"aten.grid_sampler_2d": 162}


def test_embedding_lookup_is_zero():
    emb = nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 3]])
    assert op_flops(lambda: emb(ids)) == {"aten.embedding": 0}


def test_embedding_bag_reduction():
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])  # I = 6 indices, B = 2 bags, D = 4
    # sum: (I - B) * D = 16 additions
    assert op_flops(lambda: nn.EmbeddingBag(10, 4, mode="sum")(ids)) == {"aten._embedding_bag": 16}
    # mean: 16 additions + B * D = 8 divisions = 24
    assert op_flops(lambda: nn.EmbeddingBag(10, 4, mode="mean")(ids)) == {"aten._embedding_bag": 24}
    # max: 16 comparisons
    assert op_flops(lambda: nn.EmbeddingBag(10, 4, mode="max")(ids)) == {"aten._embedding_bag": 16}
    # per-sample weights (sum mode): + I * D = 24 multiplies -> 40
    bag = nn.EmbeddingBag(10, 4, mode="sum")
    assert op_flops(lambda: bag(ids, per_sample_weights=torch.ones(2, 3))) == {"aten._embedding_bag": 40}


def test_vector_products():
    m, v = torch.randn(3, 4), torch.randn(4)
    # (3 x 4) @ 4-vector: 12 multiply-adds = 24
    assert op_flops(lambda: torch.mv(m, v)) == {"aten.mv": 24}
    assert op_flops(lambda: m @ v) == {"aten.mv": 24}
    assert op_flops(lambda: torch.addmv(torch.zeros(3), m, v)) == {"aten.addmv": 24}
    assert op_flops(lambda: torch.dot(v, v)) == {"aten.dot": 8}
    # addbmm: 2 products (3x4)(4x5) summed: 2 * 2*3*4*5 = 240
    b1, b2 = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    assert op_flops(lambda: torch.addbmm(torch.zeros(3, 5), b1, b2)) == {"aten.addbmm": 240}
    # outer product added to self: 3*4 multiplies + 12 additions = 24
    assert op_flops(lambda: torch.addr(torch.zeros(3, 4), torch.ones(3), torch.ones(4))) == {"aten.addr": 24}


def test_fft():
    x = torch.randn(2, 8, 16)  # N = 256
    # real FFT along 16 points: 2.5 * N * log2 16 = 2.5 * 256 * 4 = 2560
    assert op_flops(lambda: torch.fft.rfft(x)) == {"aten._fft_r2c": 2560}
    # complex 2-D FFT over 8 x 16 = 128 points: 5 * 256 * 7 = 8960, + 2 * 256 for the "ortho"
    # scaling (a real factor times a complex output is two real multiplies)
    z = x.to(torch.complex64)
    assert op_flops(lambda: torch.fft.fft2(z, norm="ortho")) == {"aten._fft_c2c": 8960 + 2 * 256}
    # inverse real FFT to 16 real outputs per row: 2560 + 256 for the default 1/n scaling
    spectrum = torch.fft.rfft(x)
    assert op_flops(lambda: torch.fft.irfft(spectrum, n=16)) == {"aten._fft_c2r": 2816}


def test_losses():
    x, y = torch.randn(4, 5), torch.rand(4, 5)  # N = 20
    target = torch.tensor([0, 1, 2, 3])  # T = 4
    # cross entropy = log-softmax (4N - R = 80 - 4 = 76) + NLL: 4 negations + mean over 4 (4) = 8
    assert op_flops(lambda: F.cross_entropy(x, target)) == {"aten._log_softmax": 76, "aten.nll_loss_forward": 8}
    # sum reduction: 4 negations + 3 additions
    assert op_flops(lambda: F.nll_loss(x, target, reduction="sum")) == {"aten.nll_loss_forward": 7}
    # MSE: subtract and square (2N = 40) + mean (N = 20)
    assert op_flops(lambda: F.mse_loss(x, y)) == {"aten.mse_loss": 60}
    assert op_flops(lambda: F.mse_loss(x, y, reduction="none")) == {"aten.mse_loss": 40}
    # BCE with logits: 12 per element + mean: 240 + 20
    assert op_flops(lambda: F.binary_cross_entropy_with_logits(x, y)) == {"aten.binary_cross_entropy_with_logits": 260}
    assert op_flops(lambda: F.huber_loss(x, y)) == {"aten.huber_loss": 120}
