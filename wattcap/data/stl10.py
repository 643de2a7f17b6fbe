"""STL-10 from its binary files (``train_X.bin``/``train_y.bin``, ``test_X.bin``/``test_y.bin``).

``*_X.bin`` is uint8 images of 3×96×96, each channel stored column-major (the official reader
reshapes to (N, 3, 96, 96) and transposes the last two axes); ``*_y.bin`` is one uint8 label
per image, 1..10. The 100,000 unlabeled images are not read: a classification set needs labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wattcap.data._files import locate, read_bytes, read_names
from wattcap.data.base import ArrayDataset, DatasetFormatError, UInt8ImageDataset

# Commonly used training-split statistics (pixels scaled to [0, 1]).
STL10_MEAN = (0.4467, 0.4398, 0.4066)
STL10_STD = (0.2603, 0.2566, 0.2713)
STL10_CLASSES = (
    "airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck",
)
_IMAGE_BYTES = 3 * 96 * 96


def read_stl10(root: str | Path, split: str = "train", normalize: bool = True) -> ArrayDataset:
    """STL-10 ``split`` ("train" or "test") from the folder holding ``stl10_binary`` or its
    files, as (N, 3, 96, 96) with labels 0..9."""
    return stl10_pixels(root, split).to_array_dataset(normalize)


def stl10_pixels(root: str | Path, split: str = "train") -> UInt8ImageDataset:
    """STL-10 as uint8 3×96×96 images (see :func:`read_stl10`)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    folder = locate(root, [f"{split}_X.bin"], ["stl10_binary"])
    x_path, y_path = folder / f"{split}_X.bin", folder / f"{split}_y.bin"
    if not y_path.is_file():
        raise DatasetFormatError(y_path, "label file missing next to the image file")
    raw_x, raw_y = read_bytes(x_path), read_bytes(y_path)
    if len(raw_x) == 0 or len(raw_x) % _IMAGE_BYTES:
        raise DatasetFormatError(
            x_path, f"size {len(raw_x)} bytes is not a positive multiple of one 3×96×96 "
            f"image ({_IMAGE_BYTES} bytes): truncated or not STL-10",
        )
    n = len(raw_x) // _IMAGE_BYTES
    if len(raw_y) != n:
        raise DatasetFormatError(y_path, f"{len(raw_y)} labels for {n} images in {x_path.name}")
    labels = np.frombuffer(raw_y, dtype=np.uint8).astype(np.int64)
    if labels.min() < 1 or labels.max() > 10:
        raise DatasetFormatError(y_path, f"labels span {labels.min()}..{labels.max()}, need 1..10")
    # Stored (N, C, W, H): swapping the last two axes gives row-major (N, C, H, W).
    images = np.frombuffer(raw_x, dtype=np.uint8).reshape(n, 3, 96, 96).transpose(0, 1, 3, 2)
    classes = read_names(folder / "class_names.txt") or STL10_CLASSES
    return UInt8ImageDataset(
        name="stl10",
        images=np.ascontiguousarray(images),
        labels=labels - 1,
        num_classes=10,
        mean=STL10_MEAN,
        std=STL10_STD,
        classes=classes if len(classes) == 10 else STL10_CLASSES,
        info={"files": [str(x_path), str(y_path)]},
    )
