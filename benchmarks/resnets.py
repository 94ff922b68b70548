"""ResNet-18 and ResNet-50 written out (torchvision is not installable beside the pinned torch),
shared by the benchmarks that need a ResNet-sized model.

The architectures are torchvision's: BasicBlock layers 2-2-2-2 (11.7 M parameters) and Bottleneck
layers 3-4-6-3 (25.6 M parameters), 1000 classes, for (N, 3, 224, 224) inputs. The file imports only
``torch.nn``, so ``warm_pool.py`` can copy its text into a workspace as the model the editor analyses.
"""

import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and a residual add (ResNet-18/34)."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1, 3x3 and 1x1 convolutions widening by 4, and a residual add (ResNet-50 and deeper)."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """The ResNet stem, four stages of ``block`` with ``layers`` blocks each, and the classifier."""

    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._stage(block, 64, layers[0])
        self.layer2 = self._stage(block, 128, layers[1], 2)
        self.layer3 = self._stage(block, 256, layers[2], 2)
        self.layer4 = self._stage(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _stage(self, block, planes, blocks, stride=1):
        width = planes * block.expansion
        downsample = None
        if stride != 1 or self.inplanes != width:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, width, 1, stride, bias=False), nn.BatchNorm2d(width))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = width
        layers += [block(width, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18():
    """ResNet-18: BasicBlock, 2-2-2-2."""
    return ResNet(BasicBlock, (2, 2, 2, 2))


def resnet50():
    """ResNet-50: Bottleneck, 3-4-6-3."""
    return ResNet(Bottleneck, (3, 4, 6, 3))
