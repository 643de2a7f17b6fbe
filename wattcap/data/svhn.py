"""SVHN (cropped digits, format 2) from its MATLAB files ``train_32x32.mat`` etc.

Each file holds ``X`` (32, 32, 3, N) uint8 — height, width, channel, sample — and ``y`` (N, 1)
with labels 1..10, where 10 stands for the digit 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io

from wattcap.data.base import ArrayDataset, DatasetFormatError, UInt8ImageDataset

# Commonly used training-split statistics (pixels scaled to [0, 1]).
SVHN_MEAN = (0.4377, 0.4438, 0.4728)
SVHN_STD = (0.1980, 0.2010, 0.1970)


def read_svhn(path: str | Path, split: str = "train", normalize: bool = True) -> ArrayDataset:
    """SVHN from a ``.mat`` file, or from a folder holding ``{split}_32x32.mat``.

    ``split`` is "train", "test" or "extra" and only matters when ``path`` is a folder. Label
    10 becomes 0, so classes are the digits 0..9.
    """
    return svhn_pixels(path, split).to_array_dataset(normalize)


def svhn_pixels(path: str | Path, split: str = "train") -> UInt8ImageDataset:
    """SVHN as uint8 3×32×32 images (see :func:`read_svhn`)."""
    path = Path(path)
    if path.is_dir():
        if split not in ("train", "test", "extra"):
            raise ValueError(f"split must be 'train', 'test' or 'extra', got {split!r}")
        path = path / f"{split}_32x32.mat"
    if not path.is_file():
        raise DatasetFormatError(path, "no such file")
    try:
        mat = scipy.io.loadmat(str(path), variable_names=["X", "y"])
    except NotImplementedError:  # scipy's message for MATLAB v7.3 (HDF5) files
        raise DatasetFormatError(
            path, "MATLAB v7.3 (HDF5) file; the official SVHN files are v5 — re-download"
        ) from None
    except Exception as exc:  # scipy raises ValueError, TypeError, MatReadError... on bad data
        raise DatasetFormatError(
            path, f"not a readable MATLAB file ({type(exc).__name__}: {exc})"
        ) from None
    if "X" not in mat or "y" not in mat:
        raise DatasetFormatError(path, "needs variables 'X' and 'y' (SVHN cropped-digit format)")
    x, y = mat["X"], np.asarray(mat["y"]).reshape(-1)
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.dtype != np.uint8:
        raise DatasetFormatError(
            path, f"'X' must be uint8 (32, 32, 3, N), found {x.dtype} {x.shape}"
        )
    if len(y) != x.shape[3]:
        raise DatasetFormatError(path, f"{x.shape[3]} images in 'X' but {len(y)} labels in 'y'")
    if y.size and (y.min() < 0 or y.max() > 10):
        raise DatasetFormatError(path, f"labels span {y.min()}..{y.max()}, expected 1..10")
    labels = np.where(y == 10, 0, y).astype(np.int64)
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1))  # (H, W, C, N) -> (N, C, H, W)
    return UInt8ImageDataset(
        name="svhn",
        images=images,
        labels=labels,
        num_classes=10,
        mean=SVHN_MEAN,
        std=SVHN_STD,
        classes=tuple(str(d) for d in range(10)),
        info={"files": [str(path)]},
    )
