"""Offline tasks that ship with the code: no download, deterministic given a seed.

Images come from scikit-learn's ``load_digits`` (1,797 8×8 handwritten digits, bundled with
scikit-learn) or are drawn by code; text comes from ``pydoc_data.topics`` (bundled with every
CPython). Together they give a pre-training task, proxy tasks and target tasks that differ in
ways fine-tuning notices — class subsets, rotation, noise, a different image domain — so the
efficiency-vector machinery has something real to measure on any laptop.

Every image task also exists at 1×32×32 (suffix ``-32``): the 8×8 image upsampled with linear
interpolation, for the heavier 32×32 models. All image tasks share one normalisation (the
digits' pixel mean and std), so one model sees inputs on the same scale whichever task it is
fine-tuned on, and all keep ``num_classes=10`` so one classifier head serves every task.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import ndimage

from wattcap.data.base import ArrayDataset, images_to_float
from wattcap.data.text import char_windows

# Pixel mean and std of load_digits scaled to [0, 1] (0.30526, 0.37605), rounded.
BUNDLED_MEAN = 0.3053
BUNDLED_STD = 0.3760

DIGIT_CLASSES = tuple(str(d) for d in range(10))
SHAPE_CLASSES = (
    "circle", "square", "triangle", "cross", "horizontal-bar",
    "vertical-bar", "diagonal", "ring", "L-shape", "T-shape",
)

_Builder = Callable[..., tuple[np.ndarray, np.ndarray, tuple[str, ...]]]
_REGISTRY: dict[str, Callable[..., ArrayDataset]] = {}


#: where scikit-learn keeps the digits, inside its package
_DIGITS_FILE = ("datasets", "data", "digits.csv.gz")
_DIGITS_COUNT = 1797


def _digits_file_rows() -> np.ndarray | None:
    """The digits as scikit-learn ships them (one row per image: 64 pixels, then the label),
    read from its package folder without importing scikit-learn (its import, with what it
    pulls in, took ~1.8 s of every command that trains on bundled data); None where the file
    is not where it has always been or not as expected."""
    spec = importlib.util.find_spec("sklearn")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder).joinpath(*_DIGITS_FILE)
        if path.is_file():
            with gzip.open(path, "rt") as rows:
                data = np.loadtxt(rows, delimiter=",")
            if data.shape == (_DIGITS_COUNT, 65):
                return data
    return None


@functools.lru_cache(maxsize=1)
def _digits_raw() -> tuple[np.ndarray, np.ndarray]:
    data = _digits_file_rows()
    if data is None:
        from sklearn.datasets import load_digits  # deferred: see _digits_file_rows

        d = load_digits()
        pixels, target = d.images, d.target
    else:
        pixels, target = data[:, :-1].reshape(-1, 8, 8), data[:, -1]
    images = (pixels / 16.0).astype(np.float32)  # pixel values are 0..16
    labels = target.astype(np.int64)
    images.flags.writeable = False  # cached and shared: builders must copy, never mutate
    labels.flags.writeable = False
    return images, labels


# Each builder returns images in [0, 1] as (N, 8, 8), labels (N,), and class names.


def _digits(seed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """All 1,797 digits as scikit-learn ships them (``seed`` is accepted for uniformity only)."""
    images, labels = _digits_raw()
    return images.copy(), labels.copy(), DIGIT_CLASSES


def _digits_range(lo: int, hi: int) -> _Builder:
    def build(seed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        images, labels = _digits_raw()
        keep = (labels >= lo) & (labels <= hi)
        # Remapped to 0..k so that a task's labels always start at 0, whichever digits it holds.
        return images[keep].copy(), labels[keep] - lo, DIGIT_CLASSES[lo:hi + 1]

    build.__doc__ = f"Digits {lo}..{hi} only, labels remapped to 0..{hi - lo}."
    return build


def _digits_rotated(seed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Every digit rotated by a random angle of 15..30 degrees, clockwise or counter-clockwise."""
    images, labels = _digits_raw()
    rng = np.random.default_rng(seed)
    angles = rng.uniform(15.0, 30.0, len(images)) * rng.choice([-1.0, 1.0], len(images))
    out = np.stack([
        ndimage.rotate(img, angle, reshape=False, order=1, mode="constant", cval=0.0)
        for img, angle in zip(images, angles, strict=True)
    ])
    return np.clip(out, 0.0, 1.0), labels.copy(), DIGIT_CLASSES


def _digits_noisy(
    seed: int = 0, sigma: float = 0.15, dropout: float = 0.1
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Every digit with gaussian pixel noise (``sigma``) and a ``dropout`` share of pixels
    zeroed."""
    images, labels = _digits_raw()
    rng = np.random.default_rng(seed)
    out = images + rng.normal(0.0, sigma, images.shape).astype(np.float32)
    out[rng.random(images.shape) < dropout] = 0.0
    return np.clip(out, 0.0, 1.0), labels.copy(), DIGIT_CLASSES


def _shapes(
    seed: int = 0, n_per_class: int = 180
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Procedurally drawn 8×8 shapes (see ``SHAPE_CLASSES``) at random positions, sizes, stroke
    widths and brightness, with gaussian noise; ``n_per_class`` of each, shuffled."""
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be positive, got {n_per_class}")
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(10, dtype=np.int64), n_per_class))
    n = len(labels)
    # Drawn on a 4× finer grid, then averaged down: edges get partial coverage (anti-aliasing),
    # so sub-pixel position and size changes show up in the 8×8 image.
    ss = 4
    grid = (np.arange(8 * ss, dtype=np.float32) + 0.5) / ss
    r = rng.uniform(2.3, 3.5, n).astype(np.float32)  # half-extent, pixels
    t = rng.uniform(0.9, 1.5, n).astype(np.float32)  # stroke width, pixels
    cx = rng.uniform(r - 0.3, 8.0 - r + 0.3).astype(np.float32)
    cy = rng.uniform(r - 0.3, 8.0 - r + 0.3).astype(np.float32)
    slope = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), n)  # "\" or "/" diagonals
    dx = grid[None, None, :] - cx[:, None, None]
    dy = grid[None, :, None] - cy[:, None, None]
    R, T, S = r[:, None, None], t[:, None, None], slope[:, None, None]
    ax, ay, dist = np.abs(dx), np.abs(dy), np.hypot(dx, dy)
    masks = [
        dist <= R,  # circle
        np.maximum(ax, ay) <= 0.8 * R,  # square
        (dy <= 0.8 * R) & (ax <= 0.55 * (dy + R)),  # triangle, apex up
        ((ax <= T / 2) & (ay <= R)) | ((ay <= T / 2) & (ax <= R)),  # cross
        (ay <= T / 2) & (ax <= R),  # horizontal bar
        (ax <= T / 2) & (ay <= R),  # vertical bar
        (np.abs(dx - S * dy) <= T / np.sqrt(2.0)) & (np.maximum(ax, ay) <= 0.9 * R),  # diagonal
        (dist <= R) & (dist >= R - T),  # ring
        ((dx <= -R + T) & (dx >= -R) & (ay <= R)) | ((dy >= R - T) & (dy <= R) & (ax <= R)),
        ((dy <= -R + T) & (dy >= -R) & (ax <= R)) | ((ax <= T / 2) & (ay <= R)),  # T
    ]
    fine = np.zeros((n, 8 * ss, 8 * ss), dtype=np.float32)
    for c, mask in enumerate(masks):
        fine[labels == c] = mask[labels == c]
    coverage = fine.reshape(n, 8, ss, 8, ss).mean(axis=(2, 4))
    brightness = rng.uniform(0.6, 1.0, n).astype(np.float32)[:, None, None]
    noise = rng.normal(0.0, 0.08, coverage.shape).astype(np.float32)
    return np.clip(coverage * brightness + noise, 0.0, 1.0), labels, SHAPE_CLASSES


def _finish(
    name: str, images01: np.ndarray, labels: np.ndarray, classes: tuple[str, ...], side: int
) -> ArrayDataset:
    if side != 8:
        # Linear interpolation (order 1) commutes with the affine normalisation below, so
        # upsampling before or after it gives the same result; before keeps values in [0, 1].
        images01 = ndimage.zoom(images01, (1, side / 8, side / 8), order=1)
    return ArrayDataset(
        name=name,
        x=images_to_float(images01[:, None], (BUNDLED_MEAN,), (BUNDLED_STD,), scale=1.0),
        y=labels,
        num_classes=10,
        task="image-classification",
        classes=classes,
        info={"mean": (BUNDLED_MEAN,), "std": (BUNDLED_STD,), "bundled": True},
    )


def _image_loader(name: str, builder: _Builder, side: int) -> Callable[..., ArrayDataset]:
    def load(**kwargs: object) -> ArrayDataset:
        images, labels, classes = builder(**kwargs)
        return _finish(name, images, labels, classes, side)

    load.__doc__ = f"{builder.__doc__} As 1×{side}×{side}."
    load.__signature__ = inspect.signature(builder)  # type: ignore[attr-defined]
    return load


def _register_image_task(name: str, builder: _Builder) -> None:
    _REGISTRY[name] = _image_loader(name, builder, 8)
    _REGISTRY[f"{name}-32"] = _image_loader(f"{name}-32", builder, 32)


def _pydoc_text(context: int = 64, stride: int = 64) -> ArrayDataset:
    """Python's bundled documentation topics as a character corpus, cut into next-character
    windows. The text comes with the interpreter, so it varies slightly between versions."""
    from pydoc_data.topics import topics

    corpus = "\n\n".join(topics[key] for key in sorted(topics))
    ds = char_windows(corpus, context=context, stride=stride, name="pydoc-text")
    ds.info["source"] = "pydoc_data.topics"
    return ds


_register_image_task("digits", _digits)
_register_image_task("digits-0-4", _digits_range(0, 4))
_register_image_task("digits-5-9", _digits_range(5, 9))
_register_image_task("digits-rotated", _digits_rotated)
_register_image_task("digits-noisy", _digits_noisy)
_register_image_task("shapes", _shapes)
_REGISTRY["pydoc-text"] = _pydoc_text


def list_datasets() -> list[str]:
    """Names of the bundled offline tasks, sorted."""
    return sorted(_REGISTRY)


def get_dataset(name: str, **kwargs: object) -> ArrayDataset:
    """Build a bundled task by name, e.g. ``get_dataset("digits-rotated", seed=1)``.

    Image tasks take ``seed`` (and ``shapes`` also ``n_per_class``; ``digits-noisy`` also
    ``sigma`` and ``dropout``); ``pydoc-text`` takes ``context`` and ``stride``. An unknown
    name raises KeyError listing the available ones.
    """
    try:
        builder = _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown dataset {name!r}; available: {', '.join(list_datasets())}"
        ) from None
    return builder(**kwargs)
