"""A small EfficientViT for 32×32 images (Cai et al., "EfficientViT: Lightweight Multi-Scale
Attention for High-Resolution Dense Prediction", ICCV 2023; B-series layout of mit-han-lab).

Layout: conv stem + depthwise-separable block, two MBConv stages, then two stages that start
with a stride-2 MBConv and continue with EfficientViT blocks. An EfficientViT block is a
lightweight multi-scale linear attention module (ReLU linear attention over q/k/v tokens plus a
5×5 depthwise-aggregated copy of them) followed by an MBConv as the "FFN", each residual.

For 32×32 inputs the stem and first stage keep stride 1 (as the CIFAR adaptations of ResNet and
MobileNetV2 do), so the attention stages see 8×8 and 4×4 maps. Widths are those of
EfficientViT-B1 with fewer blocks and a single-layer head, ~2 M parameters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from wattcap.models.registry import ModelSpec, register_model

WIDTHS = (16, 32, 64, 128, 256)
DEPTHS = (1, 1, 2, 2, 1)  # stem's DS blocks, then MBConv/attention blocks per stage
STRIDES = (1, 1, 2, 2, 2)  # stem, stage 1..4; ImageNet uses 2 everywhere
HEAD_DIM = 16
EXPAND = 4
HEAD_WIDTH = 512


def conv(in_ch: int, out_ch: int, kernel: int = 1, stride: int = 1, groups: int = 1,
         norm: bool = True, act: bool = True) -> nn.Sequential:
    """Conv + optional BatchNorm + optional Hardswish; a conv with BN after it has no bias."""
    layers: list[nn.Module] = [
        nn.Conv2d(in_ch, out_ch, kernel, stride, kernel // 2, groups=groups, bias=not norm)
    ]
    if norm:
        layers.append(nn.BatchNorm2d(out_ch))
    if act:
        layers.append(nn.Hardswish())
    return nn.Sequential(*layers)


class Residual(nn.Module):
    """x + f(x)."""

    def __init__(self, fn: nn.Module) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fn(x)


class DSConv(nn.Sequential):
    """Depthwise 3×3 + pointwise 1×1 (linear)."""

    def __init__(self, ch: int) -> None:
        super().__init__(conv(ch, ch, 3, groups=ch), conv(ch, ch, 1, act=False))


class MBConv(nn.Sequential):
    """Inverted residual body: 1×1 expand, 3×3 depthwise, 1×1 linear projection.

    `fewer_norm` keeps BN only on the projection, as the original does inside attention blocks.
    """

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1, expand: int = EXPAND,
                 fewer_norm: bool = False) -> None:
        mid = in_ch * expand
        super().__init__(
            conv(in_ch, mid, 1, norm=not fewer_norm),
            conv(mid, mid, 3, stride, groups=mid, norm=not fewer_norm),
            conv(mid, out_ch, 1, act=False),
        )


class LiteMLA(nn.Module):
    """Lightweight multi-scale linear attention.

    q, k, v come from a 1×1 conv; a 5×5 depthwise + grouped 1×1 conv aggregates neighbouring
    tokens into a second set of heads ("multi-scale"). Attention is linear in the number of
    tokens: softmax is replaced by ReLU feature maps, so out = relu(q)·(relu(k)ᵀv) / normaliser,
    computed as (v·kᵀ)·q without ever forming the N×N attention matrix.
    """

    def __init__(self, ch: int, head_dim: int = HEAD_DIM, scales: tuple[int, ...] = (5,),
                 eps: float = 1e-15) -> None:
        super().__init__()
        heads = ch // head_dim
        total = heads * head_dim
        self.head_dim, self.eps = head_dim, eps
        self.qkv = nn.Conv2d(ch, 3 * total, 1, bias=False)
        self.aggreg = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(3 * total, 3 * total, s, padding=s // 2, groups=3 * total, bias=False),
                # one group per q/k/v of each head, so heads never mix
                nn.Conv2d(3 * total, 3 * total, 1, groups=3 * heads, bias=False),
            )
            for s in scales
        )
        self.proj = conv(total * (1 + len(scales)), ch, 1, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        qkv = self.qkv(x)
        qkv = torch.cat([qkv] + [op(qkv) for op in self.aggreg], dim=1)
        # channels are laid out head by head as [q | k | v] blocks of head_dim each
        qkv = qkv.reshape(b, -1, 3 * self.head_dim, h * w)
        q, k, v = qkv.split(self.head_dim, dim=2)  # each (B, heads, d, N)
        q, k = F.relu(q), F.relu(k)
        # an extra row of ones in v yields the normaliser sum_n k_n·q alongside the output
        v = F.pad(v, (0, 0, 0, 1), value=1.0)  # (B, heads, d+1, N)
        vk = v @ k.transpose(-1, -2)  # (B, heads, d+1, d)
        out = vk @ q  # (B, heads, d+1, N)
        # the normaliser is computed in float32 to keep the division stable under autocast
        out = out[:, :, :-1].float() / (out[:, :, -1:].float() + self.eps)
        return self.proj(out.to(x.dtype).reshape(b, -1, h, w))


class EfficientViTBlock(nn.Sequential):
    """Context (attention) then local (MBConv) mixing, both residual."""

    def __init__(self, ch: int) -> None:
        super().__init__(Residual(LiteMLA(ch)), Residual(MBConv(ch, ch, fewer_norm=True)))


class EfficientViT(nn.Module):
    """Small EfficientViT: (B, 3, 32, 32) images -> (B, num_classes) logits."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        w, d, s = WIDTHS, DEPTHS, STRIDES
        layers: list[nn.Module] = [conv(in_channels, w[0], 3, s[0])]
        layers += [Residual(DSConv(w[0])) for _ in range(d[0])]
        for i in (1, 2):  # convolutional stages
            layers.append(MBConv(w[i - 1], w[i], s[i]))
            layers += [Residual(MBConv(w[i], w[i])) for _ in range(d[i] - 1)]
        for i in (3, 4):  # attention stages: downsample with an MBConv, then attention blocks
            layers.append(MBConv(w[i - 1], w[i], s[i]))
            layers += [EfficientViTBlock(w[i]) for _ in range(d[i])]
        self.backbone = nn.Sequential(*layers)
        self.head_conv = conv(w[-1], HEAD_WIDTH, 1)
        self.head = nn.Linear(HEAD_WIDTH, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head_conv(self.backbone(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


EFFICIENTVIT = register_model(
    ModelSpec(
        name="efficientvit",
        input_shape=(3, 32, 32),
        input_dtype="float32",
        task="image-classification",
        default_num_classes=10,
        reference=True,
        description="small EfficientViT (B1 widths, ReLU linear attention) for 32x32 images",
        factory=lambda n: EfficientViT(num_classes=n),
    )
)
