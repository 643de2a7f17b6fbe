"""Image-folder data sets (``root/<split>/<class>/*.png``), such as CINIC-10, read with Pillow.

Classes are the sub-folders sorted by name (the same order torchvision's ImageFolder uses, so
label numbers agree with models trained elsewhere). Hidden files and folders are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from wattcap.data.base import ArrayDataset, DatasetFormatError, images_to_float

IMAGE_EXTENSIONS = (
    ".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp",
)

# From the CINIC-10 README (training split, pixels scaled to [0, 1]).
CINIC10_MEAN = (0.47889522, 0.47227842, 0.43047404)
CINIC10_STD = (0.24205776, 0.23828046, 0.25874835)


def _load(path: Path, mode: str, size: tuple[int, int] | None) -> np.ndarray:
    try:
        with Image.open(path) as im:
            im = im.convert(mode)
            if size is not None and im.size != (size[1], size[0]):
                im = im.resize((size[1], size[0]), Image.Resampling.BILINEAR)
            return np.asarray(im, dtype=np.uint8)
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise DatasetFormatError(
            path, f"not a readable image ({type(exc).__name__}: {exc})"
        ) from None


def read_image_folder(
    root: str | Path,
    split: str | None = None,
    mode: str = "RGB",
    size: tuple[int, int] | None = None,
    normalize: bool = True,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    name: str | None = None,
) -> ArrayDataset:
    """Read ``root/<split>/<class>/<image>`` (or ``root/<class>/<image>`` without a split).

    ``mode`` is a Pillow mode: "RGB" gives 3 channels, "L" one. Every image must have the same
    size unless ``size=(height, width)`` resizes them. With ``normalize`` and no ``mean``/``std``
    the per-channel statistics of these images are used and recorded in ``info``; pass the
    training split's ``info["mean"]``/``info["std"]`` when reading its test split.
    """
    if mode not in ("RGB", "L"):
        raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
    folder = Path(root) / split if split else Path(root)
    if not folder.is_dir():
        raise DatasetFormatError(folder, "no such directory")
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise DatasetFormatError(folder, "no class sub-folders (expected <class>/<image> files)")
    files: list[Path] = []
    labels: list[int] = []
    for label, cls in enumerate(classes):
        found = sorted(
            p for p in (folder / cls).iterdir()
            if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_EXTENSIONS
        )
        if not found:
            raise DatasetFormatError(
                folder / cls, f"class folder holds no images ({', '.join(IMAGE_EXTENSIONS)})"
            )
        files += found
        labels += [label] * len(found)

    first = _load(files[0], mode, size)
    images = np.empty((len(files), *first.shape), dtype=np.uint8)
    images[0] = first
    for i, f in enumerate(files[1:], start=1):
        img = _load(f, mode, size)
        if img.shape != first.shape:
            raise DatasetFormatError(
                f, f"image is {img.shape[1]}×{img.shape[0]} but {files[0].name} is "
                f"{first.shape[1]}×{first.shape[0]}; pass size=(height, width) to resize",
            )
        images[i] = img
    nchw = images[:, None] if mode == "L" else images.transpose(0, 3, 1, 2)

    if normalize and (mean is None) != (std is None):
        raise ValueError("give both mean and std, or neither")
    x = images_to_float(nchw, None, None)
    if normalize:
        if mean is None or std is None:
            # Channel by channel so the float64 temporaries stay a third of the data's size.
            mean = tuple(float(x[:, c].mean(dtype=np.float64)) for c in range(x.shape[1]))
            # A constant channel has std 0; 1 leaves it centred instead of dividing by zero.
            std = tuple(
                float(v) if v > 0 else 1.0
                for v in (x[:, c].std(dtype=np.float64) for c in range(x.shape[1]))
            )
        m = np.asarray(mean, dtype=np.float32).reshape(1, -1, 1, 1)
        s = np.asarray(std, dtype=np.float32).reshape(1, -1, 1, 1)
        if m.size not in (1, x.shape[1]) or s.size not in (1, x.shape[1]) or np.any(s <= 0):
            raise ValueError(f"mean/std {mean}/{std} do not fit {x.shape[1]} channels")
        x -= m
        x /= s
    return ArrayDataset(
        name=name or folder.name,
        x=x,
        y=np.asarray(labels, dtype=np.int64),
        num_classes=len(classes),
        task="image-classification",
        classes=tuple(classes),
        info={
            "files": len(files),
            "root": str(folder),
            "mean": tuple(mean) if normalize and mean is not None else None,
            "std": tuple(std) if normalize and std is not None else None,
        },
    )


def read_cinic10(root: str | Path, split: str = "train", normalize: bool = True) -> ArrayDataset:
    """CINIC-10 (``root/{train,valid,test}/<class>/*.png``, 32×32 RGB) with its published
    normalisation."""
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    return read_image_folder(
        root, split=split, mode="RGB", normalize=normalize,
        mean=CINIC10_MEAN, std=CINIC10_STD, name="cinic10",
    )
