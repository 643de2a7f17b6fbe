"""Image files on disk: listing a class-per-folder tree, decoding images, channel statistics (read
by the image-folder reader and its pixel cache)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from PIL import Image

from wattcap.data.base import DatasetFormatError

IMAGE_EXTENSIONS = (
    ".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp",
)


class MixedImageSizesError(DatasetFormatError):
    """The images of a folder are not all the same size, and nothing said what to resize
    them to. ``sizes`` is the part of the message that says which two differ."""

    #: how to resize them, in each of the ways wattcap is used
    REMEDY = ("pass size=(height, width) to resize them (input_shape= of load_splits, "
              "--input-shape on the command line)")

    def __init__(self, path: str | Path | None, sizes: str) -> None:
        self.sizes = sizes
        super().__init__(path, f"{sizes}; {self.REMEDY}")

    def __reduce__(self) -> tuple[type, tuple[Path | None, str]]:
        return (type(self), (self.path, self.sizes))


def _load(path: str | Path, mode: str, size: tuple[int, int] | None) -> np.ndarray:
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

@dataclass(frozen=True)
class FolderListing:
    """The images of a folder: class names, files and labels, and what identifies them."""

    folder: Path
    classes: tuple[str, ...]
    files: tuple[str, ...]  # paths as text: 270,000 Path objects cost seconds
    labels: np.ndarray
    #: every file's path relative to the folder, size and modification time (ns): a change
    #: to any of them changes the pixel cache's key
    names: tuple[str, ...]
    sizes: np.ndarray
    mtimes_ns: np.ndarray

def list_image_folder(folder: str | Path) -> FolderListing:
    """Classes (sorted sub-folders) and their image files, refusing an empty class and a
    folder of one class."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetFormatError(folder, "no such directory")
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise DatasetFormatError(folder, "no class sub-folders (expected <class>/<image> files)")
    if len(classes) < 2:  # refused before anything is decoded or cached
        raise DatasetFormatError(
            folder, f"one class sub-folder ({classes[0]}): a classifier needs at least two "
            "(expected <class>/<image> files for every class)")
    files: list[str] = []
    labels: list[int] = []
    names: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    for label, cls in enumerate(classes):
        # scandir and plain strings: listing 270,000 files must take about a second
        with os.scandir(folder / cls) as it:
            found = sorted(
                (e for e in it
                 if e.name[0] != "." and os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS
                 and e.is_file()),
                key=lambda e: e.name,
            )
        if not found:
            raise DatasetFormatError(
                folder / cls, f"class folder holds no images ({', '.join(IMAGE_EXTENSIONS)})"
            )
        for entry in found:
            st = entry.stat()
            sizes.append(st.st_size)
            mtimes.append(st.st_mtime_ns)
        files += [e.path for e in found]
        names += [f"{cls}/{e.name}" for e in found]
        labels += [label] * len(found)
    return FolderListing(folder, tuple(classes), tuple(files), np.asarray(labels, np.int64),
                         tuple(names), np.asarray(sizes, np.int64), np.asarray(mtimes, np.int64))

def decode_images(
    files: Sequence[str | Path],
    mode: str,
    size: tuple[int, int] | None,
    out: np.ndarray | None = None,
    like: str | Path | None = None,
) -> np.ndarray:
    """Decode images into (N, C, H, W) uint8, into ``out`` when given (its shape then sets the
    size every image must have, ``like`` naming the image that size came from).

    Every image must have the size of the first unless ``size=(height, width)`` resizes them.
    """
    if out is None:
        first = _load(files[0], mode, size)
        out = np.empty((len(files), 1 if mode == "L" else 3, *first.shape[:2]), dtype=np.uint8)
        like = files[0]
    elif len(out) != len(files):
        raise ValueError(f"output array holds {len(out)} images, not {len(files)}")
    height, width = out.shape[2:]
    for i, f in enumerate(files):
        img = _load(f, mode, size)
        if img.shape[:2] != (height, width):
            raise MixedImageSizesError(
                f, f"image is {img.shape[1]}×{img.shape[0]} but {Path(like or files[0]).name} is "
                f"{width}×{height}")
        out[i] = img[None] if mode == "L" else img.transpose(2, 0, 1)
    return out


Size = tuple[int, int]
T = TypeVar("T")


def size_attempts(size: Size | None, resize_if_mixed: Size | None) -> list[Size | None]:
    """The (height, width) sizes to decode a folder at, in order: ``size`` alone when given
    (every image resized), else the images' own size and then, where they differ,
    ``resize_if_mixed``."""
    if size is not None or resize_if_mixed is None:
        return [size]
    return [None, resize_if_mixed]


def first_size_that_fits(sizes: Sequence[Size | None], decode: Callable[[Size | None], T]) -> T:
    """``decode(size)`` for the first of ``sizes`` whose decoding does not find images of
    different sizes (the last one's MixedImageSizesError is raised)."""
    for size in sizes[:-1]:
        try:
            return decode(size)
        except MixedImageSizesError:
            continue
    return decode(sizes[-1])


def first_image_shape(
    path: str | Path, mode: str, size: tuple[int, int] | None
) -> tuple[int, ...]:
    """(C, H, W) of one image as it will be stored."""
    img = _load(path, mode, size)
    return (1 if mode == "L" else 3, img.shape[0], img.shape[1])

def channel_stats(images: np.ndarray, chunk: int = 1024) -> tuple[tuple[float, ...], ...]:
    """Per-channel (mean, std) of uint8 (N, C, H, W) pixels scaled to [0, 1], computed in
    chunks with exact integer sums (so a memory map is read once and never held as floats).
    A constant channel gets std 1, which centres it instead of dividing by zero."""
    c = images.shape[1]
    total = np.zeros(c, dtype=np.float64)
    total_sq = np.zeros(c, dtype=np.float64)
    for start in range(0, len(images), chunk):
        block = np.asarray(images[start:start + chunk])
        total += block.sum(axis=(0, 2, 3), dtype=np.int64)
        total_sq += np.square(block, dtype=np.uint32).sum(axis=(0, 2, 3), dtype=np.int64)
    return stats_from_sums(total, total_sq, len(images) * images.shape[2] * images.shape[3])

def stats_from_sums(
    total: np.ndarray, total_sq: np.ndarray, count: int
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel (mean, std) of pixels scaled to [0, 1] from sums of raw pixel values and of
    their squares over ``count`` pixels per channel (std 1 for a constant channel)."""
    mean = total / count / 255.0
    var = np.maximum(total_sq / count / 255.0**2 - mean**2, 0.0)
    std = np.sqrt(var)
    return (tuple(float(m) for m in mean),
            tuple(float(s) if s > 0 else 1.0 for s in std))
