"""Image-folder data sets (``root/<split>/<class>/*.png``), such as CINIC-10, read with Pillow.

Classes are the sub-folders sorted by name (the same order torchvision's ImageFolder uses, so
label numbers agree with models trained elsewhere). Hidden files and folders are skipped.

Decoding 270,000 PNGs (CINIC-10) takes minutes, so :func:`image_folder_pixels` can keep a
one-time uint8 cache (see :mod:`wattcap.data.pixel_cache`): later runs map it into memory and
start in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from wattcap.data.base import ArrayDataset, UInt8ImageDataset
from wattcap.data.image_files import (
    channel_stats,
    decode_images,
    first_size_that_fits,
    list_image_folder,
    size_attempts,
)

# From the CINIC-10 README (training split, pixels scaled to [0, 1]).
CINIC10_MEAN = (0.47889522, 0.47227842, 0.43047404)
CINIC10_STD = (0.24205776, 0.23828046, 0.25874835)


def image_folder_pixels(
    root: str | Path,
    split: str | None = None,
    mode: str = "RGB",
    size: tuple[int, int] | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    name: str | None = None,
    cache: bool = False,
    cache_dir: str | Path | None = None,
    *,
    resize_if_mixed: tuple[int, int] | None = None,
    write_cache: bool = True,
) -> UInt8ImageDataset:
    """``root/<split>/<class>/<image>`` (or ``root/<class>/<image>``) as uint8 images.

    Every image must have the same size unless ``size=(height, width)`` resizes them all, or
    ``resize_if_mixed=(height, width)`` resizes them all where their sizes differ (what
    :func:`wattcap.data.load_splits` passes for ``input_shape``). Without ``mean``/``std`` the
    per-channel statistics of these images are used. With ``cache``, the decoded pixels are
    kept in a ``.npy`` file and memory-mapped on later calls (see
    :func:`wattcap.data.pixel_cache.cached_pixels` for where it goes and how to clear it);
    ``cache_dir`` puts the cache in that folder instead, and ``write_cache=False`` reads a
    current cache but writes none (the pixels are then decoded in memory).
    """
    if mode not in ("RGB", "L"):
        raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
    if (mean is None) != (std is None):
        raise ValueError("give both mean and std, or neither")
    folder = Path(root) / split if split else Path(root)
    listing = list_image_folder(folder)
    if cache:
        from wattcap.data.pixel_cache import cached_pixels

        images, cached_stats = cached_pixels(listing, mode, size, cache_dir,
                                             resize_if_mixed=resize_if_mixed,
                                             write=write_cache)
        stats: tuple[tuple[float, ...], ...] | None = cached_stats
    else:
        images = first_size_that_fits(size_attempts(size, resize_if_mixed),
                                      lambda s: decode_images(listing.files, mode, s))
        stats = channel_stats(images) if mean is None else None
    if mean is None or std is None:
        assert stats is not None
        mean, std = stats
    return UInt8ImageDataset(
        name=name or folder.name,
        images=images,
        labels=listing.labels,
        num_classes=len(listing.classes),
        mean=tuple(mean),
        std=tuple(std),
        classes=listing.classes,
        info={"files": len(listing.files), "root": str(folder)},
    )


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
    pixels = image_folder_pixels(root, split, mode, size, mean, std, name)
    return pixels.to_array_dataset(normalize)


def read_cinic10(root: str | Path, split: str = "train", normalize: bool = True) -> ArrayDataset:
    """CINIC-10 (``root/{train,valid,test}/<class>/*.png``, 32×32 RGB) with its published
    normalisation."""
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    return read_image_folder(
        root, split=split, mode="RGB", normalize=normalize,
        mean=CINIC10_MEAN, std=CINIC10_STD, name="cinic10",
    )
