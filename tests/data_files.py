"""Writers of small data sets in the official on-disk formats, for tests.

Each writes files laid out exactly as the official downloads are (CIFAR python batches as
Python 2 pickles, SVHN MATLAB v5 files, MNIST IDX, STL-10 column-major binaries, image
folders of PNGs, plain text), so the readers are tested against the real formats. The
images come from :func:`class_images`: each class has its own pattern plus noise, so a small
model can learn them (the CLI tests train on them).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image


def random_images(n: int, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Uniform random uint8 images."""
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


def class_images(
    n: int, shape: tuple[int, int, int], num_classes: int = 10, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uint8 images (N, C, H, W) and balanced labels: class k is a bright band at a
    class-specific position and orientation over a noisy background — learnable by a tiny
    CNN in a few hundred samples, and not by a constant."""
    c, h, w = shape
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % num_classes).astype(np.int64)
    images = rng.integers(0, 90, (n, c, h, w)).astype(np.int64)
    for i, k in enumerate(labels):
        horizontal = k % 2 == 0
        extent = h if horizontal else w
        band = max(1, extent // (num_classes + 1))
        start = (k // 2 * 2 + 1) * extent // (num_classes + 2)
        if horizontal:
            images[i, :, start:start + band, :] += 150
        else:
            images[i, :, :, start:start + band] += 150
    return np.clip(images, 0, 255).astype(np.uint8), labels


def py2_pickle(obj: object) -> bytes:
    """Serialise dicts, lists, ints, byte strings and uint8 arrays exactly as Python 2's cPickle
    (protocol 2) with numpy 1.x did when the official CIFAR batches were made: ``str`` as
    SHORT_BINSTRING/BINSTRING, arrays via numpy.core.multiarray._reconstruct."""
    out = bytearray(b"\x80\x02")  # PROTO 2

    def string(b: bytes) -> None:
        if len(b) < 256:
            out.extend(b"U" + bytes([len(b)]) + b)
        else:
            out.extend(b"T" + struct.pack("<I", len(b)) + b)

    def integer(i: int) -> None:
        out.extend(b"K" + bytes([i]) if 0 <= i < 256 else b"J" + struct.pack("<i", i))

    def write(o: object) -> None:
        if isinstance(o, dict):
            out.extend(b"}(")  # EMPTY_DICT MARK
            for k, v in o.items():
                write(k)
                write(v)
            out.extend(b"u")  # SETITEMS
        elif isinstance(o, list):
            out.extend(b"](")  # EMPTY_LIST MARK
            for v in o:
                write(v)
            out.extend(b"e")  # APPENDS
        elif isinstance(o, (int, np.integer)):
            integer(int(o))
        elif isinstance(o, bytes):
            string(o)
        elif isinstance(o, np.ndarray):
            assert o.dtype == np.uint8
            out.extend(b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n")
            out.extend(b"K\x00\x85")  # (0,)
            string(b"b")
            out.extend(b"\x87R(")  # TUPLE3 REDUCE, then MARK for the state tuple
            integer(1)
            out.extend(b"(")
            for d in o.shape:
                integer(d)
            out.extend(b"t")  # shape tuple
            out.extend(b"cnumpy\ndtype\n")
            string(b"u1")
            out.extend(b"K\x00K\x01\x87R(K\x03")  # dtype('u1', 0, 1), state (3, '|', ...)
            string(b"|")
            out.extend(b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb")
            out.extend(b"\x89")  # NEWFALSE: C order
            string(np.ascontiguousarray(o).tobytes())
            out.extend(b"tb")  # state tuple, BUILD
        else:
            raise TypeError(type(o))

    write(obj)
    out.extend(b".")
    return bytes(out)


def write_cifar10_python(
    root: Path, images: np.ndarray, labels: np.ndarray, batches: int = 5
) -> Path:
    """``root/cifar-10-batches-py/data_batch_1..batches`` (the images split evenly),
    ``test_batch`` (the first 10) and ``batches.meta``; returns the batches folder."""
    folder = Path(root) / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    for i, idx in enumerate(np.array_split(np.arange(len(images)), batches), start=1):
        batch = {b"batch_label": f"training batch {i} of {batches}".encode(),
                 b"labels": [int(v) for v in labels[idx]],
                 b"data": images[idx].reshape(len(idx), -1),
                 b"filenames": [f"{j}.png".encode() for j in idx]}
        (folder / f"data_batch_{i}").write_bytes(py2_pickle(batch))
    test = {b"labels": [int(v) for v in labels[:10]], b"data": images[:10].reshape(10, -1)}
    (folder / "test_batch").write_bytes(py2_pickle(test))
    names = [n.encode() for n in ("airplane", "automobile", "bird", "cat", "deer", "dog",
                                  "frog", "horse", "ship", "truck")]
    (folder / "batches.meta").write_bytes(py2_pickle({b"label_names": names}))
    return folder


def write_cifar10_binary(root: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """``root/cifar-10-batches-bin/data_batch_1..5.bin`` and ``test_batch.bin``."""
    folder = Path(root) / "cifar-10-batches-bin"
    folder.mkdir(parents=True, exist_ok=True)
    for i, idx in enumerate(np.array_split(np.arange(len(images)), 5), start=1):
        records = np.concatenate(
            [labels[idx].astype(np.uint8)[:, None], images[idx].reshape(len(idx), -1)], axis=1
        )
        (folder / f"data_batch_{i}.bin").write_bytes(records.tobytes())
    (folder / "test_batch.bin").write_bytes(
        np.concatenate([labels[:4].astype(np.uint8)[:, None], images[:4].reshape(4, -1)], 1)
        .tobytes()
    )
    return folder


def write_cifar100_python(
    root: Path, images: np.ndarray, fine: np.ndarray, coarse: np.ndarray | None = None
) -> Path:
    """``root/cifar-100-python/train``, ``test`` and ``meta`` (Python 2 pickles)."""
    folder = Path(root) / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    coarse = fine % 20 if coarse is None else coarse
    for name, idx in (("train", np.arange(len(images))), ("test", np.arange(min(10, len(images))))):
        (folder / name).write_bytes(py2_pickle({
            b"data": images[idx].reshape(len(idx), -1),
            b"fine_labels": [int(v) for v in fine[idx]],
            b"coarse_labels": [int(v) for v in coarse[idx]],
        }))
    (folder / "meta").write_bytes(py2_pickle({
        b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
        b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)],
    }))
    return folder


def write_svhn(root: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """``root/train_32x32.mat``: X (32, 32, 3, N), y (N, 1) with 10 for the digit 0."""
    Path(root).mkdir(parents=True, exist_ok=True)
    y = np.where(labels == 0, 10, labels).astype(np.uint8).reshape(-1, 1)
    path = Path(root) / "train_32x32.mat"
    scipy.io.savemat(path, {"X": images.transpose(2, 3, 1, 0), "y": y})
    return path


def idx_bytes(arr: np.ndarray) -> bytes:
    """An IDX file of a uint8 array."""
    assert arr.dtype == np.uint8
    header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return header + arr.tobytes()


def write_mnist(root: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """``root/train-images-idx3-ubyte`` and ``root/train-labels-idx1-ubyte`` (images (N, H, W)
    or (N, 1, H, W))."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    images = images.reshape(len(images), images.shape[-2], images.shape[-1])
    (root / "train-images-idx3-ubyte").write_bytes(idx_bytes(images))
    (root / "train-labels-idx1-ubyte").write_bytes(idx_bytes(labels.astype(np.uint8)))
    return root


def write_stl10(root: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """``root/stl10_binary/train_X.bin`` (each channel column-major) and ``train_y.bin``
    (labels 1..10)."""
    folder = Path(root) / "stl10_binary"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train_X.bin").write_bytes(images.transpose(0, 1, 3, 2).tobytes())
    (folder / "train_y.bin").write_bytes((labels + 1).astype(np.uint8).tobytes())
    return folder


def write_image_folder(
    root: Path, images: np.ndarray, labels: np.ndarray, classes: Sequence[str],
    split: str | None = "train",
) -> Path:
    """PNGs at ``root/<split>/<class>/<i>.png`` (images (N, C, H, W), C = 1 or 3)."""
    folder = Path(root) / split if split else Path(root)
    for i, (img, label) in enumerate(zip(images, labels, strict=True)):
        path = folder / classes[int(label)] / f"{i:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        array = img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0)
        Image.fromarray(np.ascontiguousarray(array)).save(path)
    return folder


def english_text(n_chars: int, seed: int = 0) -> str:
    """Repetitive English-like text with a little non-vocabulary noise (tabs, accents)."""
    rng = np.random.default_rng(seed)
    words = ["the", "power", "cap", "holds", "while", "training", "runs", "fast", "and",
             "small", "batches", "win", "often", "Jane", "said", "to", "Mr.", "Darcy"]
    out: list[str] = []
    size = 0
    while size < n_chars:
        sentence = " ".join(words[i] for i in rng.integers(0, len(words), 8))
        sentence = sentence.capitalize() + (".\n" if rng.random() < 0.3 else ", ")
        if rng.random() < 0.05:
            sentence += "\té "  # dropped by the vocabulary filter
        out.append(sentence)
        size += len(sentence)
    return "".join(out)
