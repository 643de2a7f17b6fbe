"""FLOP counting for a training step, with torch's FlopCounterMode corrected where it is wrong.

torch 2.13's formula for `aten.convolution_backward` ignores `groups` in the weight gradient:
it counts a depthwise conv's weight gradient as if the conv were dense, C_in times too many.
That makes MobileNetV2's forward+backward look costlier than ResNet18's (3.9 vs 3.3 GFLOP per
32×32 sample) when it really is ~6× cheaper. (An upstream fix was proposed in pytorch/pytorch
PR #183405.) Torch's CPU kernel for scaled_dot_product_attention has no formula at all and
counts as zero. `flop_counter()` returns a FlopCounterMode with both fixed; models in this
package count the same either way except for their grouped convolutions.
"""

from __future__ import annotations

from math import prod
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from wattcap.models.registry import ModelSpec

aten = torch.ops.aten


def conv_backward_flop(grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any,
                       _stride: Any, _padding: Any, _dilation: Any, transposed: bool,
                       _output_padding: Any, _groups: int, output_mask: Any,
                       out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of a convolution's backward: grad_input and grad_weight each cost one forward.

    The forward of a conv costs 2·batch·(positions)·numel(weight), where the weight already
    holds C_in/groups input channels and positions are those of the smaller side (the output
    for a conv, the input for a transposed conv); each requested gradient repeats that work.
    """
    spatial = x_shape[2:] if transposed else grad_out_shape[2:]
    one_pass = 2 * x_shape[0] * prod(spatial) * prod(w_shape)
    return one_pass * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _sdpa_cpu_flop(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None,
                   **kwargs: Any) -> int:
    return sdpa_flop_count(q, k, v)


def _sdpa_cpu_backward_flop(grad_out: Any, q: Any, k: Any, v: Any, *args: Any,
                            out_shape: Any = None, **kwargs: Any) -> int:
    return sdpa_backward_flop_count(grad_out, q, k, v)


def _corrections() -> dict[Any, Any]:
    mapping: dict[Any, Any] = {aten.convolution_backward: conv_backward_flop}
    # these ops exist in current torch builds; guard anyway so an older build still counts
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu] = _sdpa_cpu_flop
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu_backward] = (
            _sdpa_cpu_backward_flop
        )
    return mapping


def flop_counter(display: bool = False) -> FlopCounterMode:
    """A FlopCounterMode with correct grouped-conv backward and CPU attention formulas."""
    return FlopCounterMode(display=display, custom_mapping=_corrections())


def train_flops_per_sample(spec: ModelSpec, model: nn.Module | None = None,
                           batch_size: int = 2) -> float:
    """Forward+backward FLOPs per sample of one training step (loss included, no optimizer).

    Builds a fresh model from `spec` unless one is given; the model is put in train mode.
    Batch size only divides out (every layer here is linear in the batch), so a small one is
    enough; it must be >= 2 because BatchNorm refuses a single sample in train mode.
    """
    model = spec.build() if model is None else model
    model.train()
    inputs, targets = spec.example_batch(batch_size, generator=torch.Generator().manual_seed(0))
    with flop_counter() as counter:
        spec.loss(model(inputs), targets).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / batch_size
