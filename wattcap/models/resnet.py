"""ResNet18 for 32×32 images: the CIFAR variant (He et al. 2016), as in kuangliu/pytorch-cifar.

Differences from the ImageNet ResNet18: a 3×3 stride-1 stem and no max-pool, because a 32×32
input downsampled 4× at the start would leave 1×1 maps in the last stage. The rest is the same:
BasicBlocks [2, 2, 2, 2] with widths 64-128-256-512. About 11.2 M parameters with 10 classes
and ~3.33 GFLOP per sample forward+backward (torch's FlopCounterMode).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from wattcap.models.registry import ModelSpec, register_model


class BasicBlock(nn.Module):
    """Two 3×3 convolutions with a residual connection (1×1 projection when the shape changes)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """CIFAR-style ResNet18: (B, 3, 32, 32) images -> (B, num_classes) logits."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()
        )
        layers: list[nn.Module] = []
        in_ch = 64
        for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(in_ch, width, stride), BasicBlock(width, width, 1)]
            in_ch = width
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


RESNET18 = register_model(
    ModelSpec(
        name="resnet18",
        input_shape=(3, 32, 32),
        input_dtype="float32",
        task="image-classification",
        default_num_classes=10,
        reference=True,
        description="ResNet18, CIFAR variant (3x3 stem, no max-pool), ~11.2 M parameters",
        factory=lambda n: ResNet18(num_classes=n),
    )
)
