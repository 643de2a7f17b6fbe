"""MobileNetV2 for 32×32 images (Sandler et al. 2018), the common CIFAR adaptation.

Two strides of the ImageNet network are set to 1 — the stem and the second stage — so a 32×32
input ends at 4×4 before the pool (ImageNet's 224×224 ends at 7×7). Everything else is the
paper's: inverted residual blocks (1×1 expand ×6, 3×3 depthwise, 1×1 linear projection), width
multiplier 1.0, a 1×1 conv to 1280 channels, global pool, linear classifier. ~2.2 M parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from wattcap.models.registry import ModelSpec, register_model

# (expansion t, output channels c, repeats n, stride of the first block s), as in Table 2 of
# the paper, with the second row's stride changed from 2 to 1 for 32×32 inputs
CIFAR_CONFIG: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 1),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def conv_bn(in_ch: int, out_ch: int, kernel: int, stride: int = 1, groups: int = 1,
            act: bool = True) -> nn.Sequential:
    """Conv (no bias, BN follows) + BatchNorm + optional ReLU6."""
    layers: list[nn.Module] = [
        nn.Conv2d(in_ch, out_ch, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch),
    ]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """Expand (1×1) -> depthwise 3×3 -> project (1×1, linear); residual when shapes match."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = in_ch * expansion
        layers: list[nn.Module] = []
        if expansion != 1:  # with t=1 the expansion would be an identity-sized 1×1: skipped
            layers.append(conv_bn(in_ch, hidden, 1))
        layers += [
            conv_bn(hidden, hidden, 3, stride, groups=hidden),
            conv_bn(hidden, out_ch, 1, act=False),  # linear bottleneck: ReLU would lose info
        ]
        self.block = nn.Sequential(*layers)
        self.use_residual = stride == 1 and in_ch == out_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


class MobileNetV2(nn.Module):
    """CIFAR-style MobileNetV2: (B, 3, 32, 32) images -> (B, num_classes) logits."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(in_channels, 32, 3, stride=1)]
        in_ch = 32
        for t, c, n, s in CIFAR_CONFIG:
            for i in range(n):
                layers.append(InvertedResidual(in_ch, c, s if i == 0 else 1, t))
                in_ch = c
        layers.append(conv_bn(in_ch, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


MOBILENETV2 = register_model(
    ModelSpec(
        name="mobilenetv2",
        input_shape=(3, 32, 32),
        input_dtype="float32",
        task="image-classification",
        default_num_classes=10,
        reference=True,
        description="MobileNetV2 width 1.0, CIFAR adaptation (stem and stage-2 stride 1), ~2.2 M",
        factory=lambda n: MobileNetV2(num_classes=n),
    )
)
