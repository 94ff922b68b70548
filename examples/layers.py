"""Small models on which counting tools often stumble, annotated for torchscan-lsp.

- ``TokenNet``: a convolution, a module that only reshapes (``Tokenizer``, no arithmetic at all) and
  the model's own normalisation over ``F.layer_norm`` (``ChannelNorm``): no module formula covers
  the last two, the dispatched operators count all of it;
- ``mlp_stack``: an ``nn.Sequential`` written over several lines, one child per line;
- ``MixerNet``: its ``OrthogonalMixer`` orthogonalises its weight with ``torch.linalg.qr`` on every
  call — an operator no FLOP formula covers, so its counts are honest lower bounds.

Run

    torchscan-lsp scan examples/layers.py
"""

import torch
from torch import nn
from torch.nn import functional as F


class Tokenizer(nn.Module):
    """(B, C, H, W) feature maps to (B, H*W, C) tokens: a flatten and a transpose."""

    def forward(self, x):
        return x.flatten(2).transpose(1, 2)


class ChannelNorm(nn.Module):
    """Layer normalisation over the last dimension, written with ``F.layer_norm``."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


# torchscan: input_shape=(8, 4, 4)
class TokenNet(nn.Module):
    """A convolution, then tokens normalised by the model's own norm, then a linear read-out."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.tokens = Tokenizer()
        self.norm = ChannelNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        x = self.tokens(self.conv(x))
        return self.head(self.norm(x))


# torchscan: input_shape=(32,)
def mlp_stack():
    """Three Linear layers with activations in between, one child per line."""
    return nn.Sequential(
        nn.Linear(32, 64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.GELU(),
        nn.Linear(64, 10),
    )


class OrthogonalMixer(nn.Module):
    """Mixes features with the orthogonal factor of its weight, recomputed by QR at every call."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim))

    def forward(self, x):
        q, _ = torch.linalg.qr(self.weight)
        return x @ q


# torchscan: input_shape=(16,)
class MixerNet(nn.Module):
    """A Linear, an orthogonal mixer (QR: not counted by any formula), and a Linear."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.mix = OrthogonalMixer(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.mix(self.proj(x)))
