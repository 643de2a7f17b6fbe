"""A one-time uint8 cache of an image folder's decoded pixels, memory-mapped on later runs.

CINIC-10 is 270,000 small PNGs: decoding them takes minutes and, as float32, 3.3 GB. The
first load decodes every image once into a ``.npy`` file (uint8, 830 MB for CINIC-10,
written a chunk at a time so it never sits in RAM as a whole) and records the per-channel
statistics beside it; later loads list the folder, find the cache and map it, so
training starts in seconds and reads only the pages its batches touch.

Where it goes: ``<image folder>/.wattcap-cache/`` (the folder that holds the class folders;
hidden, so it is never taken for a class). If that folder cannot be written (read-only
data), ``$WATTCAP_CACHE_DIR/datasets/`` (default ``~/.cache/wattcap/datasets/``). An explicit
``cache_dir`` replaces both. How to clear it: delete that ``.wattcap-cache`` folder (or the
``datasets`` folder); it is rebuilt on the next load.

When it is rebuilt: the cache key hashes the class names and every file's relative path,
size and modification time, plus the colour mode and resize, so adding, removing, renaming
or re-saving an image makes a new cache (the stale one of the same folder is deleted).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from wattcap.core.files import atomic_path, write_file
from wattcap.data.base import DatasetFormatError
from wattcap.data.image_files import (
    FolderListing,
    Size,
    channel_stats,
    decode_images,
    first_image_shape,
    first_size_that_fits,
    size_attempts,
)
from wattcap.data.image_files import stats_from_sums as _stats

CACHE_FOLDER = ".wattcap-cache"
CACHE_KIND = "wattcap.pixel-cache"
CACHE_VERSION = 1

Stats = tuple[tuple[float, ...], tuple[float, ...]]


def cache_key(listing: FolderListing, mode: str, size: tuple[int, int] | None) -> str:
    """Hex digest identifying these files decoded this way."""
    digest = hashlib.sha256(json.dumps(
        [CACHE_VERSION, mode, list(size) if size else None, list(listing.classes)]
    ).encode())
    digest.update("\0".join(listing.names).encode())
    digest.update(listing.sizes.astype("<i8").tobytes())
    digest.update(listing.mtimes_ns.astype("<i8").tobytes())
    return digest.hexdigest()


def cache_locations(folder: Path, cache_dir: str | Path | None = None) -> list[Path]:
    """Folders to look in (and write to, first writable wins), in order."""
    if cache_dir is not None:
        return [Path(cache_dir)]
    from wattcap.core.cache import cache_dir as global_cache_dir

    return [folder / CACHE_FOLDER, global_cache_dir() / "datasets"]


def _paths(location: Path, key: str) -> tuple[Path, Path]:
    stem = f"pixels-{key[:24]}"
    return location / f"{stem}.npy", location / f"{stem}.json"


def _read_meta(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("kind") == CACHE_KIND else None


def _open(location: Path, key: str, n: int) -> tuple[np.ndarray, Stats] | None:
    npy, meta_path = _paths(location, key)
    meta = _read_meta(meta_path)
    if meta is None or meta.get("key") != key or meta.get("version") != CACHE_VERSION:
        return None
    try:
        images = np.load(npy, mmap_mode="r")
    except (OSError, ValueError):
        return None  # deleted or truncated behind our back: rebuild
    if images.dtype != np.uint8 or images.ndim != 4 or len(images) != n:
        return None
    return images, (tuple(meta["mean"]), tuple(meta["std"]))


def _writable(location: Path) -> bool:
    existed = location.exists()
    try:
        location.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=location)
    except OSError:
        if not existed:
            _remove_if_empty(location)
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def _remove_if_empty(location: Path) -> None:
    """Remove a cache folder this load created and left empty (a decode that failed)."""
    try:
        location.rmdir()  # only an empty folder goes
    except OSError:
        pass


def _remove_stale(location: Path, folder: Path, key: str) -> None:
    """Delete older caches of the same folder in ``location``."""
    for meta_path in location.glob("pixels-*.json"):
        meta = _read_meta(meta_path)
        if meta is None or meta.get("folder") != str(folder) or meta.get("key") == key:
            continue
        for path in (meta_path.with_suffix(".npy"), meta_path):
            path.unlink(missing_ok=True)


def _build(
    location: Path, key: str, listing: FolderListing, mode: str, size: tuple[int, int] | None,
    chunk: int = 1024,
) -> tuple[np.ndarray, Stats]:
    npy, meta_path = _paths(location, key)
    shape = (len(listing.files), *first_image_shape(listing.files[0], mode, size))
    c = shape[1]
    total = np.zeros(c, dtype=np.float64)
    total_sq = np.zeros(c, dtype=np.float64)
    buffer = np.empty((chunk, *shape[1:]), dtype=np.uint8)
    # closed before atomic_path syncs and renames it (the inner block ends first)
    with atomic_path(npy) as tmp, open(tmp, "wb") as handle:
        # Written chunk by chunk with plain writes: only one chunk of pixels is ever in RAM
        # (the page cache holds the rest, and the kernel may drop it).
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "|u1", "fortran_order": False, "shape": shape}
        )
        for start in range(0, shape[0], chunk):
            files = listing.files[start:start + chunk]
            block = decode_images(files, mode, size, out=buffer[:len(files)],
                                  like=listing.files[0])
            total += block.sum(axis=(0, 2, 3), dtype=np.int64)
            total_sq += np.square(block, dtype=np.uint32).sum(axis=(0, 2, 3), dtype=np.int64)
            handle.write(block.tobytes())
    mean, std = _stats(total, total_sq, shape[0] * shape[2] * shape[3])
    meta = {
        "kind": CACHE_KIND, "version": CACHE_VERSION, "key": key, "folder": str(listing.folder),
        "shape": list(shape), "mode": mode, "mean": list(mean), "std": list(std),
        "classes": list(listing.classes),
    }
    # The metadata is written last: a cache without it is incomplete and ignored.
    write_file(meta_path, json.dumps(meta))
    _remove_stale(location, listing.folder, key)
    return np.load(npy, mmap_mode="r"), (mean, std)


def _build_first_that_fits(location: Path, listing: FolderListing, mode: str,
                           sizes: list[Size | None]) -> tuple[np.ndarray, Stats]:
    def build(size: Size | None) -> tuple[np.ndarray, Stats]:
        return _build(location, cache_key(listing, mode, size), listing, mode, size)

    return first_size_that_fits(sizes, build)


def cached_pixels(
    listing: FolderListing,
    mode: str,
    size: Size | None,
    cache_dir: str | Path | None = None,
    *,
    resize_if_mixed: Size | None = None,
    write: bool = True,
) -> tuple[np.ndarray, Stats]:
    """The folder's images as a read-only uint8 memory map, and their per-channel (mean, std):
    from the cache when it is current, else decoded once into a new cache.

    ``resize_if_mixed`` is the (height, width) a folder whose images differ in size is
    decoded at (see :func:`wattcap.data.image_files.size_attempts`). Without ``write`` a
    current cache is read but none is written (a dry run): the images are decoded in memory.
    A cache folder this call created is removed again when the decoding fails.
    """
    sizes = size_attempts(size, resize_if_mixed)
    locations = cache_locations(listing.folder, cache_dir)
    for each in sizes:
        key = cache_key(listing, mode, each)
        for location in locations:
            found = _open(location, key, len(listing.files))
            if found is not None:
                return found
    if not write:
        images = first_size_that_fits(sizes, lambda s: decode_images(listing.files, mode, s))
        mean, std = channel_stats(images)
        return images, (mean, std)
    for location in locations:
        existed = location.exists()
        if not _writable(location):
            continue
        try:
            return _build_first_that_fits(location, listing, mode, sizes)
        except BaseException:
            if not existed:
                _remove_if_empty(location)
            raise
    raise DatasetFormatError(
        listing.folder,
        "cannot write the pixel cache to any of: " + ", ".join(str(p) for p in locations),
    )
