"""A small residual CNN written in this repository, annotated for torchscan-lsp.

Open this file in an editor with torchscan-lsp running to see parameters and FLOPs on each
``self.x = ...`` line and output shapes on each call in ``forward``; or run

    torchscan-lsp scan examples/cnn.py

Both annotation forms are shown: the ``# torchscan:`` pragma above a factory function, and the
``@torchscan_lsp.target(...)`` decorator on an ``nn.Module`` class.
"""

from torch import nn

import torchscan_lsp


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (a ResNet basic block)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class SmallResNet(nn.Module):
    """A ResNet-style classifier for small images: a stem, three stages, a linear head."""

    def __init__(self, num_classes: int = 10, width: int = 32):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        )
        self.stage1 = nn.Sequential(BasicBlock(width, width), BasicBlock(width, width))
        self.stage2 = nn.Sequential(BasicBlock(width, 2 * width, stride=2), BasicBlock(2 * width, 2 * width))
        self.stage3 = nn.Sequential(BasicBlock(2 * width, 4 * width, stride=2), BasicBlock(4 * width, 4 * width))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.stage1(x)
        x = self.stage2(x)
        x = self.stage3(x)
        x = self.flatten(self.pool(x))
        return self.head(x)


# torchscan: input_shape=(3, 64, 64)
def small_resnet():
    return SmallResNet(num_classes=10)


@torchscan_lsp.target(input_shape=(1, 28, 28))
class TinyConvNet(nn.Module):
    """A LeNet-sized network for 28x28 grey images, annotated with the decorator form."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.classifier = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool(self.act(self.conv1(x)))
        x = self.pool(self.act(self.conv2(x)))
        return self.classifier(x.flatten(1))
