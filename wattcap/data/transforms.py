"""Converting a batch of images to the input shape a model expects: channels and size.

Users' data rarely has the shape of the model they fine-tune (MNIST is 1×28×28, STL-10 is
3×96×96, the models take 3×32×32), so a data set can be read at its own shape and converted
batch by batch. Both conversions are linear per pixel, so applying them before or after a
per-channel normalisation gives the same result, except 3 → 1 channels, where the
normalisation constants are converted approximately (see :func:`convert_stats`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wattcap.core.errors import WattcapError

# ITU-R BT.601 luma weights, the ones Pillow's convert("L") uses.
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


class ShapeConversionError(WattcapError, ValueError):
    """The images cannot be converted to the requested shape."""


def parse_image_shape(shape: Sequence[int] | str) -> tuple[int, int, int]:
    """(C, H, W) from a sequence or from text such as "3x32x32" or "3,32,32"."""
    if isinstance(shape, str):
        parts = shape.lower().replace("×", "x").replace(",", "x").split("x")
        try:
            values = tuple(int(p) for p in parts)
        except ValueError:
            raise ShapeConversionError(
                f"input shape {shape!r} is not C x H x W integers (e.g. 3x32x32)"
            ) from None
    else:
        values = tuple(int(v) for v in shape)
    if len(values) != 3 or min(values) < 1:
        raise ShapeConversionError(
            f"an image input shape is 3 positive integers C x H x W (e.g. 3x32x32), got {shape}"
        )
    return values


def check_convertible(from_shape: Sequence[int], to_shape: Sequence[int]) -> None:
    """Raise ShapeConversionError unless images of ``from_shape`` can become ``to_shape``."""
    c_from, c_to = int(from_shape[0]), int(to_shape[0])
    if c_from != c_to and (c_from, c_to) not in ((1, 3), (3, 1)):
        raise ShapeConversionError(
            f"cannot convert {c_from}-channel images to {c_to} channels "
            "(only 1 -> 3 and 3 -> 1 are supported)"
        )


def convert_images(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Float (N, C, H, W) images converted to ``shape`` = (C', H', W').

    Channels: 1 → 3 repeats the channel, 3 → 1 takes the BT.601 luma. Size: bilinear
    interpolation, anti-aliased when shrinking (so STL-10's 96 → 32 does not alias).
    Returns float32, C-contiguous; the input is returned unchanged when it already fits.
    """
    c_to, h_to, w_to = (int(s) for s in shape)
    check_convertible(x.shape[1:], shape)
    out = np.ascontiguousarray(x, dtype=np.float32)
    if out.shape[1] == 1 and c_to == 3:
        out = np.repeat(out, 3, axis=1)
    elif out.shape[1] == 3 and c_to == 1:
        w = np.asarray(LUMA_WEIGHTS, dtype=np.float32).reshape(1, 3, 1, 1)
        out = (out * w).sum(axis=1, keepdims=True, dtype=np.float32)
    if out.shape[2:] != (h_to, w_to):
        import torch  # deferred: reading data should not cost a torch import
        import torch.nn.functional as F

        shrinking = h_to < out.shape[2] or w_to < out.shape[3]
        with torch.no_grad():
            resized = F.interpolate(
                torch.from_numpy(out), size=(h_to, w_to), mode="bilinear",
                align_corners=False, antialias=shrinking,
            )
        out = resized.numpy()
    return np.ascontiguousarray(out, dtype=np.float32)


def convert_stats(
    values: Sequence[float] | None, from_channels: int, to_channels: int
) -> tuple[float, ...] | None:
    """Per-channel normalisation constants for converted images.

    1 → 3 repeats the value; 3 → 1 weights them like the luma. For the mean this is exact;
    for the standard deviation it is an upper bound (the channels are correlated, not
    independent), which only makes the normalised values a little smaller than unit scale.
    """
    if values is None:
        return None
    vals = tuple(float(v) for v in values)
    if len(vals) == 1 and to_channels > 1:
        return vals * to_channels
    if from_channels == to_channels or len(vals) == to_channels:
        return vals
    if from_channels == 3 and to_channels == 1:
        return (sum(w * v for w, v in zip(LUMA_WEIGHTS, vals, strict=True)),)
    raise ShapeConversionError(f"cannot convert {from_channels}-channel statistics to "
                               f"{to_channels} channels")
