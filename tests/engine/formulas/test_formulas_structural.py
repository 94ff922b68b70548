"""Identity, Flatten, Unflatten and padding modules."""

import torch
from torch import nn


def test_identity_and_flatten_reference_values(measure):
    # docs/formulas.md: Identity DMAs Nx, Flatten 2·Nx; docs/report-schema.md Flatten on (1, 4, 4, 4) → 128
    got = measure(nn.Identity(), torch.randn(2, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 6, (1.0, 1.0, 0.0))
    got = measure(nn.Flatten(), torch.randn(1, 4, 4, 4))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 128, (1.0, 1.0, 0.0))
    got = measure(nn.Unflatten(1, (2, 3)), torch.randn(2, 6))
    assert got.dmas == 24


def test_an_empty_sequential_is_the_identity(measure):
    # nn.Sequential() returns its input (PyTorch's Sequential.forward over no modules): what
    # nn.Identity costs, 0 FLOPs and MACs, DMAs Nx = 6, a 1-wide window
    got = measure(nn.Sequential(), torch.randn(2, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 6, (1.0, 1.0, 0.0))


def test_a_residual_block_with_an_empty_shortcut_is_complete():
    from torchscan_lsp import crawl_module

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.shortcut = nn.Sequential()      # the identity shortcut, as ResNets write it

        def forward(self, x):
            return self.conv(x) + self.shortcut(x)

    report = crawl_module(Block(), (4, 8, 8))
    # the convolution: 4·8·8 = 256 outputs · 4·3·3 = 36 MACs each = 9,216 MACs; the shortcut none
    assert report["totals"]["macs"]["value"] == 9216 and report["totals"]["macs"]["status"] == "complete"
    shortcut = next(layer for layer in report["layers"] if layer["path"] == "shortcut")
    assert {name: metric["status"] for name, metric in shortcut["metrics"].items()
            if name in ("module_flops", "macs", "dmas")} == dict.fromkeys(("module_flops", "macs", "dmas"), "complete")
    # the one gap is the root's own addition (container work), none is about the shortcut
    assert {(d["code"], d["path"]) for d in report["diagnostics"]} == {("container_work", "")}


def test_padding_modules(measure):
    # ZeroPad2d((1, 1, 2, 2)) on (1, 1, 3, 3) → (1, 1, 7, 5), Ny = 35: DMAs 9 + 35 = 44;
    # RF along height: 2 elements before
    got = measure(nn.ZeroPad2d((1, 1, 2, 2)), torch.randn(1, 1, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 44, (1, 1, 2))
    # ReflectionPad1d(2) on (1, 2, 4) → (1, 2, 8): every output copied from an input, 2·16 = 32
    got = measure(nn.ReflectionPad1d(2), torch.randn(1, 2, 4))
    assert (got.dmas, got.rf) == (32, (1, 1, 2))
