"""A small UNet written the way diffusers' ``UNet2DModel`` writes its forward, annotated for torchscan-lsp.

What this style asks of the editor: each down block returns two values, the next hidden states and
the skip connections, assigned in a loop whose shapes change at every iteration
(``sample, res_samples = downsample_block(hidden_states=sample)``); the up blocks consume the skips in
a second loop. The hint shows the first iteration and says that the shapes vary, with their range.
Channels 8, 16, 32 on a 32x32 image, random weights. Open this file in an editor with torchscan-lsp
running, or run

    torchscan-lsp check examples/unet.py
"""

import torch
import torch.nn.functional as F
from torch import nn


class DownBlock2D(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.downsampler = nn.Conv2d(out_channels, out_channels, 3, stride=2, padding=1)

    def forward(self, hidden_states: torch.Tensor):
        hidden_states = F.silu(self.conv(hidden_states))
        output_states = (hidden_states,)
        hidden_states = self.downsampler(hidden_states)
        return hidden_states, output_states


class UpBlock2D(nn.Module):
    def __init__(self, in_channels: int, skip_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels + skip_channels, out_channels, 3, padding=1)

    def forward(self, hidden_states: torch.Tensor, res_hidden_states_tuple: tuple):
        hidden_states = F.interpolate(hidden_states, scale_factor=2.0, mode="nearest")
        hidden_states = torch.cat([hidden_states, res_hidden_states_tuple[-1]], dim=1)
        return F.silu(self.conv(hidden_states))


class UNet(nn.Module):
    def __init__(self, in_channels: int = 3, block_out_channels: tuple = (8, 16, 32)):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], 3, padding=1)
        self.down_blocks = nn.ModuleList([])
        channels = block_out_channels[0]
        for out_channels in block_out_channels:
            self.down_blocks.append(DownBlock2D(channels, out_channels))
            channels = out_channels
        self.mid_block = nn.Conv2d(channels, channels, 3, padding=1)
        self.up_blocks = nn.ModuleList([])
        for skip_channels in reversed(block_out_channels):
            self.up_blocks.append(UpBlock2D(channels, skip_channels, skip_channels))
            channels = skip_channels
        self.conv_out = nn.Conv2d(channels, in_channels, 3, padding=1)

    def forward(self, sample: torch.Tensor) -> torch.Tensor:
        sample = self.conv_in(sample)
        down_block_res_samples = ()
        for downsample_block in self.down_blocks:
            sample, res_samples = downsample_block(hidden_states=sample)
            down_block_res_samples += res_samples
        sample = self.mid_block(sample)
        for upsample_block in self.up_blocks:
            res_samples = down_block_res_samples[-1:]
            down_block_res_samples = down_block_res_samples[:-1]
            sample = upsample_block(sample, res_samples)
        return self.conv_out(sample)


# torchscan: input_shape=(3, 32, 32)
def unet_small():
    """The UNet on one 32x32 image."""
    torch.manual_seed(0)
    return UNet()
