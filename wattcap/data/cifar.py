"""CIFAR-10 and CIFAR-100, in both official on-disk versions (binary and python pickles).

Binary version: each record is the label byte(s) then 3,072 pixel bytes (1,024 red, 1,024
green, 1,024 blue, each 32×32 row-major). CIFAR-10 files are ``data_batch_1.bin`` ...
``data_batch_5.bin`` and ``test_batch.bin`` with 1 label byte; CIFAR-100 files are
``train.bin``/``test.bin`` with a coarse then a fine label byte.

Python version: each file is a pickled dict (written by Python 2, so keys are byte strings)
with ``data`` (N, 3072) uint8 in the same pixel order and ``labels`` (CIFAR-10) or
``fine_labels``/``coarse_labels`` (CIFAR-100). They are read through the restricted unpickler.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wattcap.data._files import locate, read_bytes, read_names
from wattcap.data.base import ArrayDataset, DatasetFormatError, UInt8ImageDataset
from wattcap.data.safe_pickle import safe_load

# Commonly used per-channel statistics of the training splits (pixels scaled to [0, 1]).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)

CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)

_PIXELS = 3 * 32 * 32
_TRAIN10 = [f"data_batch_{i}" for i in range(1, 6)]


def _finish(
    name: str,
    pixels: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    classes: Sequence[str] | None,
    mean: Sequence[float],
    std: Sequence[float],
    files: list[Path],
) -> UInt8ImageDataset:
    if classes is not None and len(classes) != num_classes:
        classes = None  # a stray meta file should not break loading; numbers still work
    return UInt8ImageDataset(
        name=name,
        images=pixels.reshape(-1, 3, 32, 32),
        labels=labels.astype(np.int64),
        num_classes=num_classes,
        mean=tuple(mean),
        std=tuple(std),
        classes=None if classes is None else tuple(classes),
        info={"files": [str(f) for f in files]},
    )


def _pick_files(path: str | Path, names: list[str], subdirs: Sequence[str]) -> list[Path]:
    """Explicit file -> [it]; folder -> those of ``names`` present (at least one)."""
    p = Path(path)
    if p.is_file():
        return [p]
    folder = locate(p, names, subdirs)
    return [folder / n for n in names if (folder / n).is_file()]


def _binary_records(path: Path, label_bytes: int) -> np.ndarray:
    record = label_bytes + _PIXELS
    raw = read_bytes(path)
    if len(raw) == 0 or len(raw) % record:
        raise DatasetFormatError(
            path,
            f"size {len(raw)} bytes is not a positive multiple of the {record}-byte record "
            f"({label_bytes} label byte(s) + {_PIXELS} pixels): truncated, or the other CIFAR",
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, record)


def _check_range(path: Path, labels: np.ndarray, limit: int, what: str) -> None:
    if labels.size and int(labels.max()) >= limit:
        bad = int(np.argmax(labels >= limit))
        raise DatasetFormatError(
            path, f"{what} {int(labels[bad])} at record {bad} is outside 0..{limit - 1}"
        )


def read_cifar10_binary(
    path: str | Path, train: bool = True, normalize: bool = True
) -> ArrayDataset:
    """CIFAR-10 binary version from its folder (or one ``.bin`` file).

    Train reads whichever of ``data_batch_1.bin`` ... ``data_batch_5.bin`` exist (listed in
    ``info["files"]``); test reads ``test_batch.bin``.
    """
    return cifar10_binary_pixels(path, train).to_array_dataset(normalize)


def cifar10_binary_pixels(path: str | Path, train: bool = True) -> UInt8ImageDataset:
    """CIFAR-10 binary version as uint8 images (see :func:`read_cifar10_binary`)."""
    names = [f"{n}.bin" for n in _TRAIN10] if train else ["test_batch.bin"]
    files = _pick_files(path, names, ["cifar-10-batches-bin"])
    pixels, labels = [], []
    for f in files:
        rec = _binary_records(f, 1)
        _check_range(f, rec[:, 0], 10, "label")
        labels.append(rec[:, 0])
        pixels.append(rec[:, 1:])
    classes = read_names(files[0].parent / "batches.meta.txt") or CIFAR10_CLASSES
    return _finish(
        "cifar10", np.concatenate(pixels), np.concatenate(labels), 10, classes,
        CIFAR10_MEAN, CIFAR10_STD, files,
    )


def read_cifar100_binary(
    path: str | Path, train: bool = True, label_type: str = "fine", normalize: bool = True
) -> ArrayDataset:
    """CIFAR-100 binary version (``train.bin``/``test.bin``) with fine (100) or coarse (20)
    labels."""
    return cifar100_binary_pixels(path, train, label_type).to_array_dataset(normalize)


def cifar100_binary_pixels(
    path: str | Path, train: bool = True, label_type: str = "fine"
) -> UInt8ImageDataset:
    """CIFAR-100 binary version as uint8 images (see :func:`read_cifar100_binary`)."""
    if label_type not in ("fine", "coarse"):
        raise ValueError(f"label_type must be 'fine' or 'coarse', got {label_type!r}")
    files = _pick_files(path, ["train.bin" if train else "test.bin"], ["cifar-100-binary"])
    rec = _binary_records(files[0], 2)
    _check_range(files[0], rec[:, 0], 20, "coarse label")
    _check_range(files[0], rec[:, 1], 100, "fine label")
    labels = rec[:, 1] if label_type == "fine" else rec[:, 0]
    num_classes = 100 if label_type == "fine" else 20
    classes = read_names(files[0].parent / f"{label_type}_label_names.txt")
    return _finish(
        f"cifar100-{label_type}", rec[:, 2:], labels, num_classes, classes,
        CIFAR100_MEAN, CIFAR100_STD, files,
    )


def _str_keys(obj: Any, path: Path) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise DatasetFormatError(path, f"expected a pickled dict, found {type(obj).__name__}")
    return {k.decode("latin-1") if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def _names(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, (list, tuple)):
        return None
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value)


def _python_batch(path: Path, label_key: str, limit: int) -> tuple[np.ndarray, np.ndarray]:
    batch = _str_keys(safe_load(path), path)
    for key in ("data", label_key):
        if key not in batch:
            raise DatasetFormatError(
                path, f"no {key!r} entry (found {sorted(batch)}); is this the other CIFAR?"
            )
    data = batch["data"]
    if not isinstance(data, np.ndarray):
        raise DatasetFormatError(path, f"'data' must be an array, found {type(data).__name__}")
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _PIXELS:
        raise DatasetFormatError(
            path, f"'data' must be uint8 (N, {_PIXELS}), found {data.dtype} {data.shape}"
        )
    try:
        labels = np.asarray(batch[label_key], dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise DatasetFormatError(path, f"{label_key!r} is not a list of integers") from None
    if len(labels) != len(data):
        raise DatasetFormatError(
            path, f"{len(data)} images but {len(labels)} entries in {label_key!r}"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= limit):
        raise DatasetFormatError(path, f"{label_key!r} values must lie in 0..{limit - 1}")
    return data, labels


def read_cifar10_python(
    path: str | Path, train: bool = True, normalize: bool = True
) -> ArrayDataset:
    """CIFAR-10 python version from its folder (or one batch file), via a restricted unpickler.

    Train reads whichever of ``data_batch_1`` ... ``data_batch_5`` exist; test reads
    ``test_batch``. Class names come from ``batches.meta`` when present.
    """
    return cifar10_python_pixels(path, train).to_array_dataset(normalize)


def cifar10_python_pixels(path: str | Path, train: bool = True) -> UInt8ImageDataset:
    """CIFAR-10 python version as uint8 images (see :func:`read_cifar10_python`)."""
    files = _pick_files(path, _TRAIN10 if train else ["test_batch"], ["cifar-10-batches-py"])
    parts = [_python_batch(f, "labels", 10) for f in files]
    classes: tuple[str, ...] | None = CIFAR10_CLASSES
    meta = files[0].parent / "batches.meta"
    if meta.is_file():
        classes = _names(_str_keys(safe_load(meta), meta).get("label_names")) or classes
    return _finish(
        "cifar10", np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
        10, classes, CIFAR10_MEAN, CIFAR10_STD, files,
    )


def read_cifar100_python(
    path: str | Path, train: bool = True, label_type: str = "fine", normalize: bool = True
) -> ArrayDataset:
    """CIFAR-100 python version (``train``/``test`` pickles) with fine or coarse labels."""
    return cifar100_python_pixels(path, train, label_type).to_array_dataset(normalize)


def cifar100_python_pixels(
    path: str | Path, train: bool = True, label_type: str = "fine"
) -> UInt8ImageDataset:
    """CIFAR-100 python version as uint8 images (see :func:`read_cifar100_python`)."""
    if label_type not in ("fine", "coarse"):
        raise ValueError(f"label_type must be 'fine' or 'coarse', got {label_type!r}")
    files = _pick_files(path, ["train" if train else "test"], ["cifar-100-python"])
    num_classes = 100 if label_type == "fine" else 20
    data, labels = _python_batch(files[0], f"{label_type}_labels", num_classes)
    classes = None
    meta = files[0].parent / "meta"
    if meta.is_file():
        classes = _names(_str_keys(safe_load(meta), meta).get(f"{label_type}_label_names"))
    return _finish(
        f"cifar100-{label_type}", data, labels, num_classes, classes,
        CIFAR100_MEAN, CIFAR100_STD, files,
    )


def _has_any(folder: Path, names: Sequence[str]) -> bool:
    return folder.is_dir() and any((folder / n).is_file() for n in names)


def cifar10_pixels(path: str | Path, train: bool = True) -> UInt8ImageDataset:
    """CIFAR-10 in either official version, told apart by the file names: ``*.bin`` files
    (binary version, also inside ``cifar-10-batches-bin``) or pickles (python version, also
    inside ``cifar-10-batches-py``). Train reads the ``data_batch_1`` ... ``_5`` present."""
    p = Path(path)
    binary_names = [f"{n}.bin" for n in (*_TRAIN10, "test_batch")]
    if p.is_file():
        binary = p.suffix == ".bin"
    else:
        binary = any(_has_any(f, binary_names) for f in (p, p / "cifar-10-batches-bin"))
    return cifar10_binary_pixels(p, train) if binary else cifar10_python_pixels(p, train)


def cifar100_pixels(
    path: str | Path, train: bool = True, label_type: str = "fine"
) -> UInt8ImageDataset:
    """CIFAR-100 in either official version: ``train.bin``/``test.bin`` (binary, also inside
    ``cifar-100-binary``) or ``train``/``test`` pickles (python, also in ``cifar-100-python``)."""
    p = Path(path)
    binary_names = ["train.bin", "test.bin"]
    if p.is_file():
        binary = p.suffix == ".bin"
    else:
        binary = any(_has_any(f, binary_names) for f in (p, p / "cifar-100-binary"))
    if binary:
        return cifar100_binary_pixels(p, train, label_type)
    return cifar100_python_pixels(p, train, label_type)
