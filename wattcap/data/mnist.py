"""MNIST and FashionMNIST from their IDX files (optionally gzipped).

IDX format: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D
float32, 0x0E float64), the number of dimensions, then one big-endian uint32 per dimension and
the data, big-endian, row-major. Image files are ``0x00000803`` (uint8, 3 dims: N, 28, 28),
label files ``0x00000801`` (uint8, 1 dim: N).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wattcap.data._files import locate, read_bytes
from wattcap.data.base import ArrayDataset, DatasetFormatError, UInt8ImageDataset

_IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

# Commonly used training-split statistics (pixels scaled to [0, 1]).
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
FASHION_MNIST_MEAN, FASHION_MNIST_STD = (0.2860,), (0.3530,)

FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)


def read_idx(path: str | Path, expect_magic: int | None = None) -> np.ndarray:
    """Parse one IDX file (gzipped or not) into an array of its declared type and shape.

    ``expect_magic`` (e.g. ``0x803`` for image files) is checked against the header.
    """
    path = Path(path)
    raw = read_bytes(path, allow_gzip=True)
    if len(raw) < 4:
        raise DatasetFormatError(path, f"only {len(raw)} bytes: too short for an IDX header")
    magic = int.from_bytes(raw[:4], "big")
    zeros, type_code, ndim = raw[:2], raw[2], raw[3]
    if zeros != b"\x00\x00" or type_code not in _IDX_TYPES or ndim == 0:
        raise DatasetFormatError(path, f"bad IDX magic number 0x{magic:08x}: not an IDX file")
    if expect_magic is not None and magic != expect_magic:
        raise DatasetFormatError(
            path, f"IDX magic number 0x{magic:08x}, expected 0x{expect_magic:08x}"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetFormatError(path, f"truncated IDX header ({len(raw)} bytes, need {header})")
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = _IDX_TYPES[type_code]
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise DatasetFormatError(
            path,
            f"{len(raw)} bytes but the header {shape} of {dtype.name} needs {expected}: "
            + ("truncated" if len(raw) < expected else "trailing data"),
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))  # native order and writable, as torch needs


def _find(folder: Path, stem: str) -> Path:
    # Official names, the gzipped download, and the dotted variant some mirrors use.
    dotted = stem.replace("-idx", ".idx")
    for name in (stem, f"{stem}.gz", dotted, f"{dotted}.gz"):
        if (folder / name).is_file():
            return folder / name
    raise DatasetFormatError(folder, f"no {stem}[.gz] here")


def _read_pair(
    root: str | Path, train: bool, name: str, subdirs: list[str],
    mean: tuple[float, ...], std: tuple[float, ...], classes: tuple[str, ...] | None,
) -> UInt8ImageDataset:
    prefix = "train" if train else "t10k"
    img_stem, lbl_stem = f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"
    wanted = [img_stem, f"{img_stem}.gz", img_stem.replace("-idx", ".idx")]
    folder = locate(root, wanted, subdirs)
    img_path, lbl_path = _find(folder, img_stem), _find(folder, lbl_stem)
    images = read_idx(img_path, expect_magic=0x00000803)
    labels = read_idx(lbl_path, expect_magic=0x00000801)
    if len(images) != len(labels):
        raise DatasetFormatError(
            lbl_path, f"{len(labels)} labels but {img_path.name} holds {len(images)} images"
        )
    if labels.size and labels.max() > 9:
        raise DatasetFormatError(lbl_path, f"label {int(labels.max())} is outside 0..9")
    if images.dtype != np.uint8 or images.ndim != 3:
        raise DatasetFormatError(
            img_path, f"expected uint8 images (N, H, W), found {images.dtype} {images.shape}"
        )
    return UInt8ImageDataset(
        name=name,
        images=images[:, None],
        labels=labels.astype(np.int64),
        num_classes=10,
        mean=mean,
        std=std,
        classes=classes,
        info={"files": [str(img_path), str(lbl_path)]},
    )


def mnist_pixels(root: str | Path, train: bool = True) -> UInt8ImageDataset:
    """MNIST as uint8 1×28×28 images (see :func:`read_mnist`)."""
    return _read_pair(
        root, train, "mnist", ["MNIST/raw", "raw"], MNIST_MEAN, MNIST_STD,
        tuple(str(d) for d in range(10)),
    )


def fashion_mnist_pixels(root: str | Path, train: bool = True) -> UInt8ImageDataset:
    """FashionMNIST as uint8 1×28×28 images (see :func:`read_fashion_mnist`)."""
    return _read_pair(
        root, train, "fashion-mnist", ["FashionMNIST/raw", "raw"],
        FASHION_MNIST_MEAN, FASHION_MNIST_STD, FASHION_MNIST_CLASSES,
    )


def read_mnist(root: str | Path, train: bool = True, normalize: bool = True) -> ArrayDataset:
    """MNIST from a folder of IDX files (``train-images-idx3-ubyte[.gz]`` etc.), as 1×28×28."""
    return mnist_pixels(root, train).to_array_dataset(normalize)


def read_fashion_mnist(
    root: str | Path, train: bool = True, normalize: bool = True
) -> ArrayDataset:
    """FashionMNIST from a folder of IDX files (same names and format as MNIST), as 1×28×28."""
    return fashion_mnist_pixels(root, train).to_array_dataset(normalize)
