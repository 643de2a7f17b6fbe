"""Small CNNs for the bundled data set, scikit-learn's 8×8 handwritten digits.

`digits-cnn` reads the native 1×8×8 images: tiny, trains to >90 % test accuracy in seconds
on a CPU, for tests and quick demos. `digits32-cnn` reads the digits upsampled to 1×32×32 and
is deliberately heavier (~86 MFLOP per sample forward+backward), so that on an emulated Jetson
it loads the GPU like a real small fine-tuning job while still training on a laptop CPU.
"""

from __future__ import annotations

import torch
from torch import nn

from wattcap.models.registry import ModelSpec, register_model


def conv_bn_relu(in_ch: int, out_ch: int) -> nn.Sequential:
    """3×3 same-padding conv (no bias, BN follows) + BatchNorm + ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False), nn.BatchNorm2d(out_ch), nn.ReLU()
    )


class DigitsCNN(nn.Module):
    """(B, 1, 8, 8) -> (B, num_classes): two conv layers, one pool, a linear classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            conv_bn_relu(1, 16), conv_bn_relu(16, 32), nn.MaxPool2d(2)  # -> 32×4×4
        )
        self.head = nn.Linear(32 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class Digits32CNN(nn.Module):
    """(B, 1, 32, 32) -> (B, num_classes): four conv stages, global pool, linear classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            conv_bn_relu(1, 16), conv_bn_relu(16, 32), nn.MaxPool2d(2),  # 32×16×16
            conv_bn_relu(32, 64), nn.MaxPool2d(2),  # 64×8×8
            conv_bn_relu(64, 128), nn.MaxPool2d(2),  # 128×4×4
        )
        self.head = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).mean(dim=(2, 3))  # global average pool
        return self.head(x)


DIGITS_CNN = register_model(
    ModelSpec(
        name="digits-cnn",
        input_shape=(1, 8, 8),
        input_dtype="float32",
        task="image-classification",
        default_num_classes=10,
        reference=False,
        description="small CNN for scikit-learn's 8x8 digits (~10 k parameters)",
        factory=lambda n: DigitsCNN(num_classes=n),
    )
)

DIGITS32_CNN = register_model(
    ModelSpec(
        name="digits32-cnn",
        input_shape=(1, 32, 32),
        input_dtype="float32",
        task="image-classification",
        default_num_classes=10,
        reference=False,
        description="CNN for digits upsampled to 32x32 (~100 k parameters, ~86 MFLOP fwd+bwd)",
        factory=lambda n: Digits32CNN(num_classes=n),
    )
)
