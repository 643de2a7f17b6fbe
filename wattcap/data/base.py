"""The one container every data set in wattcap becomes: arrays in memory, plus a little metadata.

Everything we train on is small enough to hold in memory (the bundled tasks are a few
megabytes, CIFAR-10 as float32 is ~600 MB), so a data set is two numpy arrays rather than a
lazy pipeline. Splits and subsets are index operations on those arrays, which keeps them
seeded and reproducible without a sampler framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

TASKS = ("image-classification", "char-lm")


class DatasetFormatError(ValueError):
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
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
        n = len(self)
        n_test = int(round(n * test_fraction))
        if n_test == 0 or n_test == n:
            raise ValueError(
                f"cannot split {n} samples with test_fraction={test_fraction}: one side is empty"
            )
        rng = np.random.default_rng(seed)
        if self.task == "image-classification":
            test_idx = _stratified_pick(self.y, n_test, rng)
        else:
            test_idx = rng.permutation(n)[:n_test]
        mask = np.zeros(n, dtype=bool)
        mask[test_idx] = True
        return self.subset(~mask), self.subset(mask)

    def take(self, n: int, seed: int = 0) -> ArrayDataset:
        """A seeded random subset of ``n`` samples (without replacement, original order kept)."""
        if not 0 <= n <= len(self):
            raise ValueError(f"cannot take {n} samples from {self.name} with {len(self)}")
        idx = np.random.default_rng(seed).permutation(len(self))[:n]
        return self.subset(np.sort(idx))

    def to_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) as CPU tensors sharing memory with the arrays."""
        import torch  # deferred: reading data should not cost a torch import

        return (
            torch.from_numpy(np.ascontiguousarray(self.x)),
            torch.from_numpy(np.ascontiguousarray(self.y)),
        )


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
