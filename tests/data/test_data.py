"""Tests for wattcap.data: bundled tasks, ArrayDataset operations, every on-disk reader.

Each reader test writes a few samples in the real on-disk format (as the official files lay
them out) into tmp_path, reads them back, and checks values — so a transposed axis, a swapped
channel or an off-by-one label mapping fails here.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image

from tests.data_files import py2_pickle as _py2_pickle
from wattcap.data import (
    BUNDLED_MEAN,
    BUNDLED_STD,
    VOCAB,
    VOCAB_SIZE,
    ArrayDataset,
    DatasetFormatError,
    UnsafePickleError,
    char_windows,
    decode,
    encode,
    filter_text,
    get_dataset,
    list_datasets,
    read_cifar10_binary,
    read_cifar10_python,
    read_cifar100_binary,
    read_cifar100_python,
    read_cinic10,
    read_fashion_mnist,
    read_idx,
    read_image_folder,
    read_mnist,
    read_stl10,
    read_svhn,
    read_text_corpus,
    safe_load,
)
from wattcap.data.cifar import CIFAR10_MEAN, CIFAR10_STD

IMAGE_TASKS = ["digits", "digits-0-4", "digits-5-9", "digits-rotated", "digits-noisy", "shapes"]


def _unnormalise(x: np.ndarray, mean, std) -> np.ndarray:
    """Back to pixel bytes 0..255 from a reader's normalised float output."""
    m = np.asarray(mean, dtype=np.float32).reshape(1, -1, 1, 1)
    s = np.asarray(std, dtype=np.float32).reshape(1, -1, 1, 1)
    return np.rint((x * s + m) * 255.0)


def _random_images(n: int, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


# --------------------------------------------------------------------------- bundled tasks


def test_registry_lists_every_task_and_its_32px_variant():
    expected = set(IMAGE_TASKS) | {f"{t}-32" for t in IMAGE_TASKS} | {"pydoc-text"}
    assert set(list_datasets()) == expected
    assert list_datasets() == sorted(list_datasets())


def test_unknown_dataset_raises_key_error_listing_names():
    with pytest.raises(KeyError) as info:
        get_dataset("cifar-11")
    assert "cifar-11" in str(info.value) and "digits-rotated" in str(info.value)


@pytest.mark.parametrize(
    "name, n, labels",
    [
        ("digits", 1797, range(10)),
        ("digits-0-4", 901, range(5)),
        ("digits-5-9", 896, range(5)),
        ("digits-rotated", 1797, range(10)),
        ("digits-noisy", 1797, range(10)),
        ("shapes", 1800, range(10)),
    ],
)
def test_bundled_image_tasks_have_expected_shapes_sizes_and_labels(name, n, labels):
    for side, key in ((8, name), (32, f"{name}-32")):
        ds = get_dataset(key)
        assert ds.name == key
        assert ds.task == "image-classification"
        assert len(ds) == n
        assert ds.x.shape == (n, 1, side, side) and ds.x.dtype == np.float32
        assert ds.y.shape == (n,) and ds.y.dtype == np.int64
        assert ds.input_shape == (1, side, side)
        assert ds.num_classes == 10  # one head serves every task
        assert set(np.unique(ds.y).tolist()) == set(labels)
        pixels = ds.x * BUNDLED_STD + BUNDLED_MEAN
        assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5
        assert np.isfinite(ds.x).all()


def test_the_digits_read_from_scikit_learns_file_are_its_loaders(monkeypatch):
    """The bundled digits come from scikit-learn's own file, read without importing it: the
    same pixels and labels as `load_digits`, and the loader itself where the file is not
    where it has always been."""
    from sklearn.datasets import load_digits

    from wattcap.data import bundled

    digits = load_digits()
    bundled._digits_raw.cache_clear()
    images, labels = bundled._digits_raw()
    assert np.array_equal(images, (digits.images / 16.0).astype(np.float32))
    assert np.array_equal(labels, digits.target) and labels.dtype == np.int64
    monkeypatch.setattr(bundled, "_DIGITS_FILE", ("datasets", "data", "moved.csv.gz"))
    assert bundled._digits_file_rows() is None
    bundled._digits_raw.cache_clear()
    try:
        fallback, fallback_labels = bundled._digits_raw()
        assert np.array_equal(fallback, images) and np.array_equal(fallback_labels, labels)
    finally:
        bundled._digits_raw.cache_clear()


def test_digits_are_normalised_to_zero_mean_unit_std():
    ds = get_dataset("digits")
    assert abs(float(ds.x.mean())) < 0.01
    assert abs(float(ds.x.std()) - 1.0) < 0.01


def test_class_subsets_partition_digits_and_remap_5_to_9():
    full, low, high = get_dataset("digits"), get_dataset("digits-0-4"), get_dataset("digits-5-9")
    assert len(low) + len(high) == len(full)
    assert np.array_equal(low.x, full.x[full.y <= 4])
    assert np.array_equal(high.x, full.x[full.y >= 5])
    assert np.array_equal(high.y, full.y[full.y >= 5] - 5)
    assert high.classes == ("5", "6", "7", "8", "9")


def test_32px_variants_upsample_the_8px_images():
    small, big = get_dataset("digits-rotated", seed=3), get_dataset("digits-rotated-32", seed=3)
    assert np.array_equal(small.y, big.y)
    # order-1 zoom maps corner pixels onto corner pixels exactly
    for i, j in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
        np.testing.assert_allclose(big.x[:, 0, i, j], small.x[:, 0, i, j], atol=1e-5)
    # and every pixel is the bilinear interpolation of the 8×8 grid at k·7/31
    coords = np.arange(32) * 7 / 31
    for i in (0, 100, 1796):
        img = small.x[i, 0]
        rows = np.stack([np.interp(coords, np.arange(8), r) for r in img])  # (8, 32)
        expected = np.stack([np.interp(coords, np.arange(8), c) for c in rows.T]).T
        np.testing.assert_allclose(big.x[i, 0], expected, atol=1e-4)


@pytest.mark.parametrize("name", ["digits-rotated", "digits-noisy", "shapes", "shapes-32"])
def test_random_tasks_are_deterministic_by_seed(name):
    a, b, c = get_dataset(name, seed=7), get_dataset(name, seed=7), get_dataset(name, seed=8)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.x, c.x)


def test_tasks_are_genuinely_different():
    digits = get_dataset("digits").x
    rotated = get_dataset("digits-rotated").x
    noisy = get_dataset("digits-noisy").x
    # same samples, same labels, but visibly transformed pixels (normalised units)
    assert np.abs(digits - rotated).mean() > 0.3
    assert np.abs(digits - noisy).mean() > 0.2
    assert np.abs(rotated - noisy).mean() > 0.3
    # the shapes domain does not look like digits on average
    shapes = get_dataset("shapes").x
    assert np.abs(shapes.mean(axis=0) - digits.mean(axis=0)).mean() > 0.2


def test_every_rotation_is_between_15_and_30_degrees():
    from scipy import ndimage

    digits = get_dataset("digits").x[:20, 0] * BUNDLED_STD + BUNDLED_MEAN
    rotated = get_dataset("digits-rotated").x[:20, 0] * BUNDLED_STD + BUNDLED_MEAN
    candidates = np.concatenate([-np.arange(0, 46, 0.5), np.arange(0.5, 46, 0.5)])
    for orig, rot in zip(digits, rotated, strict=True):
        errors = [
            np.abs(ndimage.rotate(orig, a, reshape=False, order=1) - rot).sum() for a in candidates
        ]
        best = abs(candidates[int(np.argmin(errors))])
        assert 14.5 <= best <= 30.5


def test_shapes_are_balanced_and_learnable():
    ds = get_dataset("shapes")
    assert np.bincount(ds.y).tolist() == [180] * 10
    assert len(ds.classes) == 10 and "ring" in ds.classes
    assert np.array_equal(np.bincount(get_dataset("shapes", n_per_class=5).y), [5] * 10)
    train, test = ds.split(0.2, seed=0)
    flat = train.x.reshape(len(train), -1)
    centroids = np.stack([flat[train.y == c].mean(axis=0) for c in range(10)])
    dist = ((test.x.reshape(len(test), 1, -1) - centroids[None]) ** 2).sum(-1)
    accuracy = float((dist.argmin(axis=1) == test.y).mean())
    assert accuracy > 0.45  # chance is 0.10; a nearest-centroid model already sees the shapes
    assert accuracy < 0.95  # position, size and noise keep it from being trivial


def test_pydoc_text_windows():
    ds = get_dataset("pydoc-text")
    assert ds.task == "char-lm" and ds.num_classes == VOCAB_SIZE == 96
    assert ds.x.shape[1] == 64 and ds.y.shape == ds.x.shape and len(ds) > 5000
    assert ds.x.dtype == np.int64 and ds.x.min() >= 0 and ds.x.max() < 96
    assert np.array_equal(ds.y[:, :-1], ds.x[:, 1:])  # targets are the next character
    assert np.array_equal(ds.y[:-1, -1], ds.x[1:, 0])  # stride 64: windows abut
    assert "def" in decode(ds.x.reshape(-1)) and "\n" in decode(ds.x[:50].reshape(-1))
    overlapping = get_dataset("pydoc-text", stride=32)
    assert abs(len(overlapping) - 2 * len(ds)) <= 2
    assert np.array_equal(overlapping.x[1, :32], ds.x[0, 32:])


# --------------------------------------------------------------------------- ArrayDataset


def _indexed(n: int = 200, classes: int = 4) -> ArrayDataset:
    """A data set whose every image holds its own index, so samples can be traced."""
    x = np.arange(n, dtype=np.float32).reshape(n, 1, 1, 1)
    y = np.repeat(np.arange(classes), n // classes)
    return ArrayDataset("indexed", x, y, num_classes=classes, task="image-classification")


def test_split_is_80_20_disjoint_and_covering():
    ds = get_dataset("digits")
    train, test = ds.split(0.2, seed=0)
    assert len(test) == round(0.2 * len(ds)) and len(train) + len(test) == len(ds)
    ids = _indexed(1000, 10)
    tr, te = ids.split(0.2, seed=1)
    a, b = set(tr.x.ravel().tolist()), set(te.x.ravel().tolist())
    assert not a & b and a | b == set(range(1000))
    assert len(te) == 200


def test_split_is_stratified():
    ds = get_dataset("digits")
    train, test = ds.split(0.2, seed=3)
    full_counts = np.bincount(ds.y, minlength=10)
    test_counts = np.bincount(test.y, minlength=10)
    assert np.all(np.abs(test_counts - 0.2 * full_counts) <= 1)
    # an unbalanced set keeps its imbalance on both sides
    y = np.array([0] * 90 + [1] * 10)
    skewed = ArrayDataset("s", np.zeros((100, 1, 1, 1)), y, 2, "image-classification")
    tr, te = skewed.split(0.2, seed=0)
    assert np.bincount(te.y).tolist() == [18, 2] and np.bincount(tr.y).tolist() == [72, 8]


def test_split_and_take_are_seeded():
    ds = _indexed()
    assert np.array_equal(ds.split(seed=4)[1].x, ds.split(seed=4)[1].x)
    assert not np.array_equal(ds.split(seed=4)[1].x, ds.split(seed=5)[1].x)
    t1, t2, t3 = ds.take(30, seed=2), ds.take(30, seed=2), ds.take(30, seed=9)
    assert len(t1) == 30 and np.array_equal(t1.x, t2.x) and not np.array_equal(t1.x, t3.x)
    assert len(set(t1.x.ravel().tolist())) == 30  # without replacement
    with pytest.raises(ValueError):
        ds.take(len(ds) + 1)


def test_text_split_is_random_and_sized():
    ds = char_windows("abcdefghij" * 100, context=8, stride=8)
    train, test = ds.split(0.25, seed=0)
    assert len(test) == round(0.25 * len(ds)) and len(train) + len(test) == len(ds)
    assert test.task == "char-lm" and test.input_shape == (8,)


def test_subset_mask_and_metadata_survive():
    ds = get_dataset("digits-5-9")
    sub = ds.subset(ds.y == 2)
    assert len(sub) == int((ds.y == 2).sum()) and set(sub.y.tolist()) == {2}
    assert sub.classes == ds.classes and sub.num_classes == 10 and sub.info == ds.info
    sub.info["changed"] = True
    assert "changed" not in ds.info


def test_to_tensors_dtypes_and_shared_memory():
    ds = _indexed(8, 2)
    x, y = ds.to_tensors()
    assert x.dtype == torch.float32 and y.dtype == torch.int64 and x.shape == (8, 1, 1, 1)
    x[0, 0, 0, 0] = 123.0
    assert ds.x[0, 0, 0, 0] == 123.0
    tx, ty = get_dataset("pydoc-text").take(4).to_tensors()
    assert tx.dtype == torch.int64 and ty.shape == (4, 64)


def test_array_dataset_validates_its_arrays():
    with pytest.raises(ValueError, match="inputs but"):
        ArrayDataset("bad", np.zeros((3, 1, 2, 2)), np.zeros(4), 2, "image-classification")
    with pytest.raises(ValueError, match="num_classes"):
        ArrayDataset("bad", np.zeros((2, 1, 2, 2)), np.array([0, 5]), 5, "image-classification")
    with pytest.raises(ValueError, match="task"):
        ArrayDataset("bad", np.zeros((2, 1, 2, 2)), np.zeros(2), 2, "regression")
    with pytest.raises(ValueError):
        _indexed().split(1.0)
    assert "n=200" in repr(_indexed())


# --------------------------------------------------------------------------- text


def test_vocabulary_is_96_fixed_symbols():
    assert len(VOCAB) == 96 and len(set(VOCAB)) == 96
    assert VOCAB[0] == "\n" and VOCAB[1] == " " and VOCAB[-1] == "~"


def test_vocabulary_filter_keeps_and_drops_the_right_characters():
    kept = "Hello, World! 42\n(a+b)*c=[d]; {e}|f~g`h'i\"j\\k^_@#$%&<>?/:."
    assert filter_text(kept) == kept
    assert filter_text("caf\u00e9 na\u00efve") == "caf nave"  # accented letters dropped
    assert filter_text("\u201cquoted\u201d \u2014 dash\u2026") == "quoted  dash"
    assert filter_text("tab\there\rCR\x00nul\x0bvt") == "tabhereCRnulvt"
    assert filter_text("\u4e2d\u6587 \U0001f600 ok") == "  ok"


def test_encode_decode_round_trip_and_rejects_oov():
    text = "The quick brown fox\njumps over 13 lazy dogs!"
    ids = encode(text)
    assert ids.dtype == np.int64 and decode(ids) == text
    assert ids[text.index("\n")] == 0 and ids[text.index(" ")] == 1
    with pytest.raises(ValueError, match="outside the vocabulary"):
        encode("tab\there")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        encode("caf\u00e9")


def test_read_text_corpus_filters_and_normalises_newlines(tmp_path):
    path = tmp_path / "austen.txt"
    path.write_bytes("It is a truth\r\nuniversally\tacknowledged \u2014 \u00e9t\u00e9\r".encode())
    assert read_text_corpus(path) == "It is a truth\nuniversallyacknowledged  t\n"
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("na\u00efve text".encode("latin-1"))
    with pytest.raises(DatasetFormatError, match="latin1.txt.*not valid utf-8"):
        read_text_corpus(latin)
    assert read_text_corpus(latin, encoding="latin-1") == "nave text"


def test_read_text_corpus_refuses_binary_and_missing(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"abc\x00\x01\x02")
    with pytest.raises(DatasetFormatError, match="model.bin.*NUL"):
        read_text_corpus(binary)
    with pytest.raises(DatasetFormatError, match="missing.txt"):
        read_text_corpus(tmp_path / "missing.txt")


def test_char_windows_from_a_corpus_file(tmp_path):
    path = tmp_path / "shakespeare.txt"
    path.write_text("To be, or not to be: that is the question.\n" * 10)
    text = read_text_corpus(path)
    ds = char_windows(text, context=16, stride=10, name="tiny")
    assert ds.name == "tiny" and ds.x.shape == ((len(text) - 17) // 10 + 1, 16)
    assert decode(ds.x[0]) == text[:16] and decode(ds.y[0]) == text[1:17]
    assert decode(ds.x[3]) == text[30:46]
    assert ds.info["vocab"] == VOCAB
    with pytest.raises(ValueError, match="need at least"):
        char_windows("short", context=64)


# --------------------------------------------------------------------------- CIFAR binary


def test_cifar10_binary_round_trip(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    batches = []
    for i in range(1, 6):
        images = _random_images(3, (3, 32, 32), seed=i)
        labels = np.array([i, (i + 3) % 10, 9], dtype=np.uint8)
        records = np.concatenate([labels[:, None], images.reshape(3, -1)], axis=1)
        (folder / f"data_batch_{i}.bin").write_bytes(records.tobytes())
        batches.append((images, labels))
    test_images = _random_images(2, (3, 32, 32), seed=99)
    test_images[0] = 0
    test_images[0, 0, 4, 7] = 255  # red channel, row 4, column 7
    records = np.concatenate([np.array([[0], [1]], np.uint8), test_images.reshape(2, -1)], 1)
    (folder / "test_batch.bin").write_bytes(records.tobytes())

    train = read_cifar10_binary(tmp_path)  # finds the cifar-10-batches-bin folder itself
    assert train.x.shape == (15, 3, 32, 32) and train.num_classes == 10
    assert np.array_equal(train.y, np.concatenate([b[1] for b in batches]))
    raw = _unnormalise(train.x, CIFAR10_MEAN, CIFAR10_STD)
    assert np.array_equal(raw, np.concatenate([b[0] for b in batches]).astype(np.float32))
    assert train.classes[0] == "airplane" and len(train.info["files"]) == 5

    test = read_cifar10_binary(folder, train=False, normalize=False)
    assert test.y.tolist() == [0, 1]
    assert test.x[0, 0, 4, 7] == 1.0 and test.x[0].sum() == 1.0  # [0, 1] scale, right axis


def test_cifar100_binary_round_trip(tmp_path):
    images = _random_images(4, (3, 32, 32))
    coarse = np.array([0, 19, 5, 7], np.uint8)
    fine = np.array([99, 0, 42, 7], np.uint8)
    body = np.concatenate([coarse[:, None], fine[:, None], images.reshape(4, -1)], axis=1)
    (tmp_path / "train.bin").write_bytes(body.tobytes())
    (tmp_path / "fine_label_names.txt").write_text("\n".join(f"f{i}" for i in range(100)))
    ds = read_cifar100_binary(tmp_path)
    assert ds.y.tolist() == fine.tolist() and ds.num_classes == 100 and ds.classes[99] == "f99"
    coarse_ds = read_cifar100_binary(tmp_path, label_type="coarse", normalize=False)
    assert coarse_ds.y.tolist() == coarse.tolist() and coarse_ds.num_classes == 20
    assert np.array_equal(np.rint(coarse_ds.x * 255), images.astype(np.float32))


def test_cifar_binary_truncated_or_mismatched_files_raise(tmp_path):
    record = np.zeros(3073, np.uint8)
    (tmp_path / "data_batch_1.bin").write_bytes(np.tile(record, 2).tobytes()[:-100])
    with pytest.raises(DatasetFormatError, match="data_batch_1.bin.*3073-byte record"):
        read_cifar10_binary(tmp_path)
    bad_label = record.copy()
    bad_label[0] = 37  # a CIFAR-100 fine label in a CIFAR-10 file
    (tmp_path / "data_batch_1.bin").write_bytes(bad_label.tobytes())
    with pytest.raises(DatasetFormatError, match="label 37 at record 0"):
        read_cifar10_binary(tmp_path)
    (tmp_path / "train.bin").write_bytes(np.zeros(3073 * 2, np.uint8).tobytes())  # 2 × 3074 ≠
    with pytest.raises(DatasetFormatError, match="3074-byte record"):
        read_cifar100_binary(tmp_path)
    with pytest.raises(DatasetFormatError, match="test_batch.bin"):
        read_cifar10_binary(tmp_path, train=False)


# --------------------------------------------------------------------------- CIFAR python


def test_py2_pickle_helper_matches_a_real_unpickle():
    # Guards the test helper itself: plain pickle (trusted input, written by us) agrees.
    arr = _random_images(2, (5,))
    loaded = pickle.loads(_py2_pickle({b"data": arr, b"labels": [1, 300]}), encoding="bytes")
    assert np.array_equal(loaded[b"data"], arr) and loaded[b"labels"] == [1, 300]


def test_cifar10_python_reads_python2_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    images = _random_images(4, (3, 32, 32), seed=1)
    labels = [3, 1, 4, 1]
    batch = {
        b"batch_label": b"training batch 1 of 5",
        b"labels": labels,
        b"data": images.reshape(4, -1),
        b"filenames": [b"a.png", b"b.png", b"c.png", b"d.png"],
    }
    (folder / "data_batch_1").write_bytes(_py2_pickle(batch))
    names = [b"plane", b"car", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship",
             b"truck"]
    (folder / "batches.meta").write_bytes(
        _py2_pickle({b"label_names": names, b"num_cases_per_batch": 10000})
    )
    ds = read_cifar10_python(tmp_path)
    assert ds.y.tolist() == labels and ds.classes[0] == "plane"
    assert np.array_equal(_unnormalise(ds.x, CIFAR10_MEAN, CIFAR10_STD), images.astype(np.float32))


@pytest.mark.parametrize("protocol", [2, 5])
def test_cifar_python_reads_python3_pickles(tmp_path, protocol):
    images = _random_images(3, (3, 32, 32), seed=protocol)
    with open(tmp_path / "test_batch", "wb") as f:  # a user's own re-save under numpy 2
        pickle.dump({"data": images.reshape(3, -1), "labels": [9, 0, 5]}, f, protocol=protocol)
    ds = read_cifar10_python(tmp_path, train=False, normalize=False)
    assert ds.y.tolist() == [9, 0, 5]
    assert np.array_equal(np.rint(ds.x * 255), images.astype(np.float32))


def test_cifar100_python_round_trip(tmp_path):
    images = _random_images(3, (3, 32, 32), seed=5)
    train = {b"data": images.reshape(3, -1), b"fine_labels": [99, 0, 50],
             b"coarse_labels": [19, 4, 0], b"filenames": [b"x", b"y", b"z"]}
    (tmp_path / "train").write_bytes(_py2_pickle(train))
    meta = {b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
            b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]}
    (tmp_path / "meta").write_bytes(_py2_pickle(meta))
    fine = read_cifar100_python(tmp_path)
    coarse = read_cifar100_python(tmp_path, label_type="coarse")
    assert fine.y.tolist() == [99, 0, 50] and fine.classes[50] == "fine50"
    assert coarse.y.tolist() == [19, 4, 0] and coarse.num_classes == 20
    assert coarse.classes[19] == "coarse19"
    assert fine.x.shape == (3, 3, 32, 32)


class _Evil:
    """Pickles to a call of ``func(*args)``: what an attacker's "CIFAR batch" would contain."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path, protocol):
    marker = tmp_path / "pwned"
    payload = {b"data": _Evil(os.system, f"touch {marker}"), b"labels": []}
    (tmp_path / "data_batch_1").write_bytes(pickle.dumps(payload, protocol=protocol))
    refused = r"refusing to unpickle (posix|nt|os)\.system"
    with pytest.raises(UnsafePickleError, match=refused) as info:
        read_cifar10_python(tmp_path)
    assert "data_batch_1" in str(info.value)
    assert isinstance(info.value, DatasetFormatError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, pickle.UnpicklingError)
    assert str(pickle.loads(pickle.dumps(info.value))) == str(info.value)  # crosses processes
    assert not marker.exists()


@pytest.mark.parametrize(
    "func, args, name",
    [
        (eval, ("__import__('os').getcwd()",), "builtins.eval"),
        (getattr, ("", "join"), "builtins.getattr"),
        (__import__("subprocess").call, (["true"],), "subprocess.call"),
        (__import__("shutil").rmtree, ("never-there",), "shutil.rmtree"),
    ],
)
@pytest.mark.parametrize("protocol", [2, 4])
def test_other_dangerous_globals_are_refused(func, args, name, protocol):
    data = pickle.dumps(_Evil(func, *args), protocol=protocol)
    with pytest.raises(UnsafePickleError, match=f"refusing to unpickle {name}"):
        safe_load(data)


def test_codecs_encode_is_limited_to_latin1():
    # protocol 2 writes bytes as _codecs.encode(text, "latin1"); another codec is refused
    assert safe_load(pickle.dumps(b"\x00\xff", protocol=2)) == b"\x00\xff"
    forged = b"\x80\x02c_codecs\nencode\nX\x03\x00\x00\x00abcX\x06\x00\x00\x00rot_13\x86R."
    with pytest.raises(UnsafePickleError, match="refusing to unpickle codecs.encode"):
        safe_load(forged)


def test_truncated_or_wrong_pickles_raise_format_errors(tmp_path):
    good = _py2_pickle({b"data": _random_images(2, (3072,)), b"labels": [1, 2]})
    (tmp_path / "data_batch_1").write_bytes(good[: len(good) // 2])
    with pytest.raises(DatasetFormatError, match="data_batch_1.*not a readable pickle"):
        read_cifar10_python(tmp_path)
    (tmp_path / "data_batch_1").write_bytes(_py2_pickle({b"data": _random_images(2, (3072,)),
                                                         b"labels": [1]}))
    with pytest.raises(DatasetFormatError, match="2 images but 1 entries"):
        read_cifar10_python(tmp_path)
    (tmp_path / "data_batch_1").write_bytes(_py2_pickle({b"data": _random_images(2, (100,)),
                                                         b"labels": [1, 2]}))
    with pytest.raises(DatasetFormatError, match=r"uint8 \(N, 3072\)"):
        read_cifar10_python(tmp_path)
    (tmp_path / "data_batch_1").write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(DatasetFormatError, match="expected a pickled dict"):
        read_cifar10_python(tmp_path)
    (tmp_path / "train").write_bytes(good)  # a CIFAR-10 batch where CIFAR-100 is expected
    with pytest.raises(DatasetFormatError, match="no 'fine_labels' entry"):
        read_cifar100_python(tmp_path)


# --------------------------------------------------------------------------- SVHN


def test_svhn_mat_round_trip(tmp_path):
    n = 5
    hwcn = np.zeros((32, 32, 3, n), dtype=np.uint8)
    hwcn[1, 2, 0, 0] = 200  # sample 0: red channel, row 1, column 2
    hwcn[30, 5, 2, 4] = 77  # sample 4: blue channel, row 30, column 5
    y = np.array([[10], [1], [9], [5], [10]], dtype=np.uint8)
    scipy.io.savemat(tmp_path / "train_32x32.mat", {"X": hwcn, "y": y})
    ds = read_svhn(tmp_path, normalize=False)
    assert ds.y.tolist() == [0, 1, 9, 5, 0]  # label 10 means digit 0
    assert ds.x.shape == (5, 3, 32, 32)
    assert np.isclose(ds.x[0, 0, 1, 2], 200 / 255) and ds.x[0].sum() == pytest.approx(200 / 255)
    assert np.isclose(ds.x[4, 2, 30, 5], 77 / 255)
    normed = read_svhn(tmp_path / "train_32x32.mat")
    assert normed.x[1].mean() < -1.0  # black image, normalised


def test_svhn_corrupt_or_mismatched_files_raise(tmp_path):
    (tmp_path / "test_32x32.mat").write_bytes(b"MATLAB 5.0 MAT-file" + b"\x00" * 20)
    with pytest.raises(DatasetFormatError, match="test_32x32.mat"):
        read_svhn(tmp_path, split="test")
    scipy.io.savemat(tmp_path / "x.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8)})
    with pytest.raises(DatasetFormatError, match="x.mat.*'X' and 'y'"):
        read_svhn(tmp_path / "x.mat")
    scipy.io.savemat(
        tmp_path / "n.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.ones((3, 1))}
    )
    with pytest.raises(DatasetFormatError, match="2 images in 'X' but 3 labels"):
        read_svhn(tmp_path / "n.mat")
    with pytest.raises(DatasetFormatError, match="extra_32x32.mat"):
        read_svhn(tmp_path, split="extra")


# --------------------------------------------------------------------------- MNIST / IDX


def _idx_bytes(arr: np.ndarray) -> bytes:
    assert arr.dtype == np.uint8
    header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return header + arr.tobytes()


def test_mnist_idx_round_trip_plain_and_gzip(tmp_path):
    images = _random_images(6, (28, 28), seed=2)
    labels = np.array([0, 9, 3, 3, 7, 1], np.uint8)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(_idx_bytes(images))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(labels))
    raw = tmp_path / "MNIST" / "raw"  # torchvision's layout, gzipped test files
    raw.mkdir(parents=True)
    (raw / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx_bytes(images[:2])))
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx_bytes(labels[:2])))

    train = read_mnist(tmp_path, normalize=False)
    assert train.x.shape == (6, 1, 28, 28) and train.y.tolist() == labels.tolist()
    assert np.array_equal(np.rint(train.x[:, 0] * 255), images.astype(np.float32))
    test = read_mnist(tmp_path / "MNIST" / "raw", train=False)
    assert len(test) == 2 and test.y.tolist() == [0, 9]
    assert np.allclose(_unnormalise(test.x, (0.1307,), (0.3081,))[:, 0], images[:2])


def test_fashion_mnist_idx_round_trip(tmp_path):
    images = _random_images(3, (28, 28), seed=4)
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(_idx_bytes(images))
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(np.array([9, 0, 8], np.uint8)))
    ds = read_fashion_mnist(tmp_path, train=False)
    assert ds.y.tolist() == [9, 0, 8] and ds.classes[9] == "Ankle boot"
    assert np.allclose(_unnormalise(ds.x, (0.2860,), (0.3530,))[:, 0], images)


def test_read_idx_parses_big_endian_types(tmp_path):
    values = np.array([[1, -2, 300], [70000, 0, -1]], dtype=">i4")
    header = bytes([0, 0, 0x0C, 2]) + struct.pack(">II", 2, 3)
    (tmp_path / "ints.idx").write_bytes(header + values.tobytes())
    out = read_idx(tmp_path / "ints.idx")
    assert out.tolist() == values.tolist() and out.dtype == np.int32


def test_idx_magic_and_truncation_are_checked(tmp_path):
    images = _random_images(4, (28, 28))
    labels = np.array([1, 2, 3, 4], np.uint8)
    # labels where the images belong: magic 0x801 instead of 0x803
    (tmp_path / "train-images-idx3-ubyte").write_bytes(_idx_bytes(labels))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(labels))
    with pytest.raises(DatasetFormatError, match="images-idx3-ubyte.*0x00000801.*0x00000803"):
        read_mnist(tmp_path)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(_idx_bytes(images)[:-10])
    with pytest.raises(DatasetFormatError, match="truncated"):
        read_mnist(tmp_path)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(_idx_bytes(images[:3]))
    with pytest.raises(DatasetFormatError, match="4 labels but .* holds 3 images"):
        read_mnist(tmp_path)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)
    with pytest.raises(DatasetFormatError, match="not an IDX file"):
        read_mnist(tmp_path)
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b" + b"garbage")
    with pytest.raises(DatasetFormatError, match="bad.gz.*gzip"):
        read_idx(tmp_path / "bad.gz")


# --------------------------------------------------------------------------- STL-10


def test_stl10_binary_round_trip(tmp_path):
    folder = tmp_path / "stl10_binary"
    folder.mkdir()
    images = np.zeros((2, 3, 96, 96), dtype=np.uint8)  # (N, C, H, W) as we want them
    images[0, 1, 5, 70] = 255  # green, row 5, column 70: asymmetric, catches a transpose
    images[1] = _random_images(1, (3, 96, 96), seed=8)[0]
    # the official files store each channel column-major
    (folder / "train_X.bin").write_bytes(images.transpose(0, 1, 3, 2).tobytes())
    (folder / "train_y.bin").write_bytes(bytes([10, 1]))
    ds = read_stl10(tmp_path, normalize=False)
    assert ds.y.tolist() == [9, 0] and ds.classes[9] == "truck"
    assert ds.x.shape == (2, 3, 96, 96)
    assert ds.x[0, 1, 5, 70] == 1.0 and ds.x[0].sum() == 1.0
    assert np.array_equal(np.rint(ds.x * 255), images.astype(np.float32))


def test_stl10_corrupt_files_raise(tmp_path):
    image = np.zeros(3 * 96 * 96, np.uint8).tobytes()
    (tmp_path / "test_X.bin").write_bytes(image * 2 + b"\x00" * 5)
    (tmp_path / "test_y.bin").write_bytes(bytes([1, 2]))
    with pytest.raises(DatasetFormatError, match="test_X.bin.*truncated"):
        read_stl10(tmp_path, split="test")
    (tmp_path / "test_X.bin").write_bytes(image * 2)
    (tmp_path / "test_y.bin").write_bytes(bytes([0, 2]))  # labels are 1..10
    with pytest.raises(DatasetFormatError, match="test_y.bin.*1..10"):
        read_stl10(tmp_path, split="test")
    (tmp_path / "test_y.bin").write_bytes(bytes([1, 2, 3]))
    with pytest.raises(DatasetFormatError, match="3 labels for 2 images"):
        read_stl10(tmp_path, split="test")


# --------------------------------------------------------------------------- image folders


def _write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def test_image_folder_round_trip_sorted_classes(tmp_path):
    rng = np.random.default_rng(0)
    written = {}
    for cls in ("truck", "airplane", "cat"):  # created out of order on purpose
        for k in range(2):
            img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            _write_png(tmp_path / "train" / cls / f"{k}.png", img)
            written[(cls, k)] = img
    (tmp_path / "train" / "cat" / ".DS_Store").write_bytes(b"junk")
    (tmp_path / "train" / "cat" / "notes.txt").write_text("not an image")
    ds = read_image_folder(tmp_path, split="train", normalize=False)
    assert ds.classes == ("airplane", "cat", "truck") and ds.num_classes == 3
    assert ds.y.tolist() == [0, 0, 1, 1, 2, 2] and ds.x.shape == (6, 3, 32, 32)
    expected = np.stack([written[(c, k)] for c in ds.classes for k in range(2)])
    assert np.array_equal(np.rint(ds.x * 255), expected.transpose(0, 3, 1, 2).astype(np.float32))

    normed = read_image_folder(tmp_path / "train")
    assert np.allclose(normed.x.mean(axis=(0, 2, 3)), 0, atol=1e-4)
    assert np.allclose(normed.x.std(axis=(0, 2, 3)), 1, atol=1e-3)
    again = read_image_folder(tmp_path / "train", mean=normed.info["mean"], std=normed.info["std"])
    assert np.allclose(again.x, normed.x)


def test_image_folder_grayscale_and_resize(tmp_path):
    _write_png(tmp_path / "a" / "0.png", np.full((10, 12, 3), 255, np.uint8))
    _write_png(tmp_path / "b" / "0.png", np.zeros((20, 20, 3), np.uint8))
    with pytest.raises(DatasetFormatError, match="0.png.*pass size"):
        read_image_folder(tmp_path)
    ds = read_image_folder(tmp_path, mode="L", size=(16, 16), normalize=False)
    assert ds.x.shape == (2, 1, 16, 16)
    assert ds.x[0].min() == 1.0 and ds.x[1].max() == 0.0


def test_cinic10_split_layout(tmp_path):
    for split in ("train", "valid"):
        for cls in ("bird", "airplane"):
            _write_png(tmp_path / split / cls / "x.png", np.full((32, 32, 3), 128, np.uint8))
    ds = read_cinic10(tmp_path, split="valid")
    assert ds.name == "cinic10" and ds.classes == ("airplane", "bird") and len(ds) == 2
    assert np.isclose(ds.x[0, 0, 0, 0], (128 / 255 - 0.47889522) / 0.24205776, atol=1e-5)


def test_image_folder_corrupt_or_empty_raise(tmp_path):
    _write_png(tmp_path / "a" / "0.png", np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "b").mkdir()
    with pytest.raises(DatasetFormatError, match="b.*holds no images"):
        read_image_folder(tmp_path)
    (tmp_path / "b" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage")
    with pytest.raises(DatasetFormatError, match="broken.png.*not a readable image"):
        read_image_folder(tmp_path)
    with pytest.raises(DatasetFormatError, match="no class sub-folders"):
        read_image_folder(tmp_path / "a")


def test_missing_folders_name_the_path(tmp_path):
    for reader in (read_cifar10_binary, read_cifar10_python, read_mnist, read_stl10):
        with pytest.raises(DatasetFormatError, match="nowhere"):
            reader(tmp_path / "nowhere")
    with pytest.raises(DatasetFormatError, match="no such directory"):
        read_cinic10(tmp_path, split="test")
