"""Per-layer latency of a ResNet-18 with default options must finish in under 30 s (issue 4).

Run: ``python benchmarks/layer_latency.py`` (exit status 1 when over budget). The ResNet-18 is written
here (torchvision is not installable beside the pinned torch): BasicBlock, layers [2, 2, 2, 2], 1000
classes, input (1, 3, 224, 224) — 11.7 M parameters, the torchvision architecture.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

BUDGET_S = 30.0


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], 2)
        self.layer3 = self._make_layer(256, layers[2], 2)
        self.layer4 = self._make_layer(512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers.extend(BasicBlock(planes, planes) for _ in range(1, blocks))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> ResNet:
    return ResNet((2, 2, 2, 2))


def main() -> int:
    from torchscan_lsp.engine.latency import measure_layer_latency

    model = resnet18()
    x = torch.rand(1, 3, 224, 224)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    report = measure_layer_latency(model, (x,), device="cpu")
    elapsed = time.perf_counter() - start
    totals = report["totals"]
    layer_sum = totals["layer_latency_sum"]
    model_latency = totals["model_latency"]
    measured = sum(1 for layer in report["layers"] if layer["metrics"]["latency"]["status"] == "complete")
    print(f"machine load (1-min average) before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"threads: {report['threads']}  device: {report['device']} ({report['device_name']})")
    print(f"layer calls measured: {measured}/{len(report['layers'])}")
    print(f"sum of layer latencies: {layer_sum['status']} {1e3 * (layer_sum['known_value'] or 0):.2f} ms")
    print(f"whole-model latency:    {model_latency['status']} {1e3 * (model_latency['value'] or 0):.2f} ms")
    print(f"per-layer latency of ResNet-18 took {elapsed:.1f} s (budget {BUDGET_S:.0f} s)")
    return 0 if elapsed < BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
