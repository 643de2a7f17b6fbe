"""The containers every data set in wattcap becomes: arrays plus a little metadata.

Two kinds, with the same interface (``len``, ``subset``, ``split``, ``take``, ``batch``,
``to_tensors``):

* :class:`ArrayDataset`: float32 images or int64 text windows in memory, already normalised.
  Right for the bundled tasks and other small sets.
* :class:`UInt8ImageDataset`: images kept as uint8 (in memory or a read-only memory map of a
  ``.npy`` cache), normalised and converted to the model's input shape one batch at a time.
  CINIC-10's 270,000 images are 830 MB as uint8 but 3.3 GB as float32, so large image sets
  stay uint8 until a batch is drawn.

Splits and subsets are index operations, which keeps them seeded and reproducible without a
sampler framework; a subset of a UInt8ImageDataset is an index into the same array, not a
copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from wattcap.core.errors import WattcapError
from wattcap.data.transforms import check_convertible, convert_images, convert_stats

if TYPE_CHECKING:
    import torch

TASKS = ("image-classification", "char-lm")


class DatasetFormatError(WattcapError, ValueError):
    """A data file is missing, truncated, corrupt or not in the format its reader expects."""

    def __init__(self, path: str | Path | None, problem: str) -> None:
        self.path = None if path is None else Path(path)
        self.problem = problem
        where = f"{self.path}: " if self.path is not None else ""
        super().__init__(f"{where}{problem}")

    def __reduce__(self) -> tuple[type, tuple[Path | None, str]]:
        # The default reduce replays args=(message,), which this __init__ cannot take; worker
        # processes (e.g. a DataLoader's) pickle exceptions to send them back.
        return (type(self), (self.path, self.problem))


@dataclass(eq=False)  # element-wise array comparison makes a generated __eq__ meaningless
class ArrayDataset:
    """An in-memory data set.

    ``x`` holds float32 images (N, C, H, W), scaled to [0, 1] and then normalised per channel,
    or int64 token windows (N, T). ``y`` holds int64 labels (N,) or next-token targets (N, T).
    ``num_classes`` is the number of classes, or the vocabulary size for text. ``classes``
    optionally names the classes; ``info`` carries provenance (files read, normalisation
    constants, vocabulary) that travels with subsets and splits. ``classes[i]`` names label
    ``i``; it may be shorter than ``num_classes`` when a task uses part of a shared head.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    num_classes: int
    task: str
    classes: tuple[str, ...] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        want_x = np.float32 if self.task == "image-classification" else np.int64
        self.x = np.asarray(self.x, dtype=want_x)
        self.y = np.asarray(self.y, dtype=np.int64)
        if len(self.x) != len(self.y):
            raise ValueError(f"{self.name}: {len(self.x)} inputs but {len(self.y)} targets")
        if self.task == "image-classification":
            if self.x.ndim != 4 or self.y.ndim != 1:
                raise ValueError(
                    f"{self.name}: images must be (N, C, H, W) with labels (N,), got "
                    f"x{self.x.shape} y{self.y.shape}"
                )
        elif self.x.ndim != 2 or self.x.shape != self.y.shape:
            raise ValueError(
                f"{self.name}: text windows must be (N, T) with targets (N, T), got "
                f"x{self.x.shape} y{self.y.shape}"
            )
        if self.num_classes < 1:
            raise ValueError(f"{self.name}: num_classes must be positive, got {self.num_classes}")
        if self.y.size and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            raise ValueError(
                f"{self.name}: targets span [{self.y.min()}, {self.y.max()}] but num_classes is "
                f"{self.num_classes}"
            )
        if self.classes is not None:
            self.classes = tuple(self.classes)

    def __len__(self) -> int:
        return len(self.x)

    def __repr__(self) -> str:
        # The default repr would print every array element.
        return (
            f"ArrayDataset(name={self.name!r}, task={self.task!r}, n={len(self)}, "
            f"input_shape={self.input_shape}, num_classes={self.num_classes})"
        )

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. (1, 8, 8) for digits or (64,) for text windows."""
        return tuple(int(d) for d in self.x.shape[1:])

    def subset(self, indices: Sequence[int] | np.ndarray) -> ArrayDataset:
        """A new data set holding the samples at ``indices`` (or where a boolean mask is true)."""
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"boolean mask of shape {idx.shape} for {len(self)} samples")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"index out of range for {self.name} with {len(self)} samples")
        return ArrayDataset(
            name=self.name,
            x=self.x[idx],
            y=self.y[idx],
            num_classes=self.num_classes,
            task=self.task,
            classes=self.classes,
            info=dict(self.info),
        )

    def split(
        self, test_fraction: float = 0.2, seed: int = 0
    ) -> tuple[ArrayDataset, ArrayDataset]:
        """Seeded (train, test) split; classification splits keep each class's proportion.

        The test side holds exactly ``round(len * test_fraction)`` samples; for classification
        each class contributes its share, rounded by largest remainder. Text windows are split
        at random; if they overlap (stride < context) neighbouring windows share characters
        across the split, so split the text itself when that matters.
        """
        n = len(self)
        test_idx = _split_test_indices(
            self.y, test_fraction, seed, stratified=self.task == "image-classification"
        )
        mask = np.zeros(n, dtype=bool)
        mask[test_idx] = True
        return self.subset(~mask), self.subset(mask)

    def take(self, n: int, seed: int = 0) -> ArrayDataset:
        """A seeded random subset of ``n`` samples (without replacement, original order kept)."""
        if not 0 <= n <= len(self):
            raise ValueError(f"cannot take {n} samples from {self.name} with {len(self)}")
        idx = np.random.default_rng(seed).permutation(len(self))[:n]
        return self.subset(np.sort(idx))

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets) of the samples at ``indices``: float32 images (or int64 windows)
        and int64 targets, fresh arrays the caller may keep."""
        idx = np.asarray(indices, dtype=np.int64)
        return self.x[idx], self.y[idx]

    def to_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) as CPU tensors sharing memory with the arrays."""
        import torch  # deferred: reading data should not cost a torch import

        return (
            torch.from_numpy(np.ascontiguousarray(self.x)),
            torch.from_numpy(np.ascontiguousarray(self.y)),
        )

    def converted(self, input_shape: Sequence[int]) -> ArrayDataset:
        """Images converted to ``input_shape`` (C, H, W): channels and size, see
        :func:`wattcap.data.transforms.convert_images`. Normalised values convert as pixels
        do (both steps are linear), so the result stays normalised."""
        if self.task != "image-classification":
            raise ValueError(f"{self.name}: only images can be converted to an input shape")
        shape = tuple(int(s) for s in input_shape)
        if shape == self.input_shape:
            return self
        channels = self.input_shape[0]
        info = dict(self.info, converted_from=list(self.input_shape))
        for key in ("mean", "std"):
            if info.get(key) is not None:
                info[key] = convert_stats(info[key], channels, shape[0])
        return ArrayDataset(
            name=self.name, x=convert_images(self.x, shape), y=self.y,
            num_classes=self.num_classes, task=self.task, classes=self.classes, info=info,
        )


@runtime_checkable
class Dataset(Protocol):
    """What the training loop and the loader need from a data set."""

    name: str
    num_classes: int
    task: str

    def __len__(self) -> int: ...

    @property
    def input_shape(self) -> tuple[int, ...]: ...

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


#: samples a data fingerprint reads (evenly spaced, the first and last included)
FINGERPRINT_SAMPLES = 64


def data_fingerprint(data: Dataset) -> str:
    """A digest of a data set by content, cheap at any size: its name, size, shape and classes,
    and the bytes of `FINGERPRINT_SAMPLES` evenly spaced samples and their labels (another
    subset, another split or other files give another digest)."""
    import hashlib

    count = len(data)
    digest = hashlib.sha256(
        f"{data.name}|{count}|{tuple(data.input_shape)}|{data.num_classes}|{data.task}".encode())
    if count:
        picks = np.unique(np.linspace(0, count - 1, min(count, FINGERPRINT_SAMPLES))
                          .astype(np.int64))
        x, y = data.batch(picks)
        digest.update(np.ascontiguousarray(x).tobytes())
        digest.update(np.ascontiguousarray(y).tobytes())
    return digest.hexdigest()[:16]


def _reopen_npy(path: str) -> np.ndarray:
    return np.load(path, mmap_mode="r")


@dataclass(eq=False)
class UInt8ImageDataset:
    """Images kept as uint8 and normalised per batch, for data sets too large as float32.

    ``images`` is (M, C, H, W) uint8, an array in memory or a read-only ``np.memmap`` of a
    ``.npy`` file; ``labels`` is (M,) int64. ``rows`` selects the samples this data set holds
    (None: all M, in order), so subsets and splits share the arrays instead of copying them.
    ``mean``/``std`` are per-channel statistics of the stored pixels scaled to [0, 1] (None:
    the images are only scaled). ``output_shape`` (C', H', W') converts every batch to the
    model's input shape (channels and size, see :mod:`wattcap.data.transforms`).

    A memory-mapped data set pickles as its file name (for DataLoader workers started with
    spawn) and is mapped again on the other side.
    """

    name: str
    images: np.ndarray
    labels: np.ndarray
    num_classes: int
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    classes: tuple[str, ...] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    rows: np.ndarray | None = None
    output_shape: tuple[int, ...] | None = None

    task = "image-classification"

    def __post_init__(self) -> None:
        if self.images.dtype != np.uint8 or self.images.ndim != 4:
            raise ValueError(
                f"{self.name}: images must be uint8 (N, C, H, W), got {self.images.dtype} "
                f"{self.images.shape}"
            )
        self.labels = np.asarray(self.labels, dtype=np.int64)
        if self.labels.shape != (len(self.images),):
            raise ValueError(
                f"{self.name}: {len(self.images)} images but labels of shape {self.labels.shape}"
            )
        if self.num_classes < 1:
            raise ValueError(f"{self.name}: num_classes must be positive, got {self.num_classes}")
        if self.labels.size and (self.labels.min() < 0 or self.labels.max() >= self.num_classes):
            raise ValueError(
                f"{self.name}: labels span [{self.labels.min()}, {self.labels.max()}] but "
                f"num_classes is {self.num_classes}"
            )
        channels = self.images.shape[1]
        for key in ("mean", "std"):
            value = getattr(self, key)
            if value is not None:
                value = tuple(float(v) for v in value)
                if len(value) not in (1, channels):
                    raise ValueError(f"{self.name}: {key} needs 1 or {channels} values")
                setattr(self, key, value)
        if (self.mean is None) != (self.std is None):
            raise ValueError(f"{self.name}: give both mean and std, or neither")
        if self.std is not None and min(self.std) <= 0:
            raise ValueError(f"{self.name}: std must be positive, got {self.std}")
        if self.rows is not None:
            self.rows = np.asarray(self.rows, dtype=np.int64)
        if self.output_shape is not None:
            self.output_shape = shape = tuple(int(s) for s in self.output_shape)
            check_convertible(self.images.shape[1:], shape)
        if self.classes is not None:
            self.classes = tuple(self.classes)

    def __len__(self) -> int:
        return len(self.images) if self.rows is None else len(self.rows)

    def __repr__(self) -> str:
        return (
            f"UInt8ImageDataset(name={self.name!r}, n={len(self)}, "
            f"input_shape={self.input_shape}, num_classes={self.num_classes}, "
            f"memory_mapped={isinstance(self.images, np.memmap)})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        filename = getattr(self.images, "filename", None)
        if isinstance(self.images, np.memmap) and filename is not None:
            state["images"] = ("npy-memmap", str(filename))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        images = state["images"]
        if isinstance(images, tuple) and images[0] == "npy-memmap":
            state["images"] = _reopen_npy(images[1])
        self.__dict__.update(state)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample as batches deliver it (after conversion)."""
        if self.output_shape is not None:
            return tuple(self.output_shape)
        return tuple(int(d) for d in self.images.shape[1:])

    @property
    def y(self) -> np.ndarray:
        """Labels of the samples this data set holds."""
        return self.labels if self.rows is None else self.labels[self.rows]

    def _rows(self, indices: np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"index out of range for {self.name} with {len(self)} samples")
        return idx if self.rows is None else self.rows[idx]

    def subset(self, indices: Sequence[int] | np.ndarray) -> UInt8ImageDataset:
        """The samples at ``indices`` (or where a boolean mask is true), sharing the arrays."""
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"boolean mask of shape {idx.shape} for {len(self)} samples")
            idx = np.flatnonzero(idx)
        return replace(self, rows=self._rows(idx), info=dict(self.info))

    def split(
        self, test_fraction: float = 0.2, seed: int = 0
    ) -> tuple[UInt8ImageDataset, UInt8ImageDataset]:
        """Seeded, stratified (train, test) split: the same samples as ArrayDataset.split picks
        for the same labels and seed."""
        test_idx = _split_test_indices(self.y, test_fraction, seed, stratified=True)
        mask = np.zeros(len(self), dtype=bool)
        mask[test_idx] = True
        return self.subset(~mask), self.subset(mask)

    def take(self, n: int, seed: int = 0) -> UInt8ImageDataset:
        """A seeded random subset of ``n`` samples (without replacement, original order kept)."""
        if not 0 <= n <= len(self):
            raise ValueError(f"cannot take {n} samples from {self.name} with {len(self)}")
        idx = np.random.default_rng(seed).permutation(len(self))[:n]
        return self.subset(np.sort(idx))

    def converted(self, input_shape: Sequence[int]) -> UInt8ImageDataset:
        """The same samples, delivered at ``input_shape`` (C, H, W)."""
        shape = tuple(int(s) for s in input_shape)
        stored = tuple(int(d) for d in self.images.shape[1:])
        return replace(self, output_shape=None if shape == stored else shape,
                       info=dict(self.info))

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(float32 images normalised and converted to ``input_shape``, int64 labels) of the
        samples at ``indices``. Only this batch is read from the memory map."""
        rows = self._rows(indices)
        pixels = self.images[rows]
        labels = self.labels[rows]
        if self.output_shape is None:
            return images_to_float(pixels, self.mean, self.std), labels
        channels = pixels.shape[1]
        x = convert_images(images_to_float(pixels, None, None), self.output_shape)
        mean = convert_stats(self.mean, channels, self.output_shape[0])
        std = convert_stats(self.std, channels, self.output_shape[0])
        if mean is not None and std is not None:
            x -= np.asarray(mean, dtype=np.float32).reshape(1, -1, 1, 1)
            x /= np.asarray(std, dtype=np.float32).reshape(1, -1, 1, 1)
        return x, labels

    def to_array_dataset(self, normalize: bool = True, chunk: int = 4096) -> ArrayDataset:
        """Every sample as float32 in memory (a small set's way into code that wants arrays).

        ``normalize=False`` only scales pixels to [0, 1]. Built in chunks, so the only large
        allocation is the result itself.
        """
        src = self if normalize else replace(self, mean=None, std=None)
        n = len(self)
        x = np.empty((n, *self.input_shape), dtype=np.float32)
        for start in range(0, n, chunk):
            x[start:start + chunk] = src.batch(np.arange(start, min(n, start + chunk)))[0]
        channels = self.input_shape[0]
        mean = convert_stats(self.mean, self.images.shape[1], channels) if normalize else None
        std = convert_stats(self.std, self.images.shape[1], channels) if normalize else None
        return ArrayDataset(
            name=self.name, x=x, y=self.y.copy(), num_classes=self.num_classes,
            task="image-classification", classes=self.classes,
            info=dict(self.info, mean=mean, std=std),
        )

    def to_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) of every sample as CPU tensors: float32 in memory, so only for
        sets that fit (use :func:`wattcap.data.loader.batch_loader` for large ones)."""
        return self.to_array_dataset().to_tensors()


def _split_test_indices(
    labels: np.ndarray, test_fraction: float, seed: int, stratified: bool
) -> np.ndarray:
    """Indices of the test side of a seeded split (see ArrayDataset.split)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n = len(labels)
    n_test = int(round(n * test_fraction))
    if n_test == 0 or n_test == n:
        raise ValueError(
            f"cannot split {n} samples with test_fraction={test_fraction}: one side is empty"
        )
    rng = np.random.default_rng(seed)
    if stratified:
        return _stratified_pick(labels, n_test, rng)
    return rng.permutation(n)[:n_test]


def _stratified_pick(labels: np.ndarray, n_pick: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n_pick`` samples drawn so that every class keeps its share."""
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * (n_pick / len(labels))
    take = np.floor(quota).astype(np.int64)
    # Largest remainder makes the total exact; random tie-breaks keep it unbiased across classes.
    short = n_pick - int(take.sum())
    order = np.lexsort((rng.random(len(classes)), -(quota - take)))
    take[order[:short]] += 1
    picked = [
        rng.permutation(np.flatnonzero(labels == c))[:k]
        for c, k in zip(classes, take, strict=True)
    ]
    return np.concatenate(picked)


def images_to_float(
    images: np.ndarray,
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
    scale: float = 255.0,
) -> np.ndarray:
    """uint8-like (N, C, H, W) images -> float32 in [0, 1], then ``(x - mean) / std`` per channel.

    With ``mean``/``std`` None the images are only scaled. Works in float32 throughout so
    that a 50,000-image set does not pass through a float64 copy.
    """
    out = np.array(images, dtype=np.float32, order="C")  # C order even from transposed views
    out /= np.float32(scale)
    if mean is None and std is None:
        return out
    if mean is None or std is None:
        raise ValueError("give both mean and std, or neither")
    c = out.shape[1]
    m = np.asarray(mean, dtype=np.float32).reshape(-1)
    s = np.asarray(std, dtype=np.float32).reshape(-1)
    if m.size not in (1, c) or s.size not in (1, c):
        raise ValueError(f"mean/std need 1 or {c} values, got {m.size} and {s.size}")
    if np.any(s <= 0):
        raise ValueError(f"std must be positive, got {s.tolist()}")
    out -= m.reshape(1, -1, 1, 1)
    out /= s.reshape(1, -1, 1, 1)
    return out
