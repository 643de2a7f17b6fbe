"""Data specs, the uint8/memory-mapped data sets, the pixel cache and the batch loader.

Every spec is loaded from small files the test writes in the official format (tests/
data_files.py), and values are checked against the pixels written, so a transposed axis, a
lost label mapping or a wrong normalisation fails here.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.data_files import (
    class_images,
    english_text,
    random_images,
    write_cifar10_binary,
    write_cifar10_python,
    write_cifar100_python,
    write_image_folder,
    write_mnist,
    write_stl10,
    write_svhn,
)
from wattcap.data import (
    VOCAB_SIZE,
    ArrayDataset,
    DataMismatchError,
    DatasetFormatError,
    DataSpecError,
    UInt8ImageDataset,
    check_data_fits_model,
    get_dataset,
    load_dataset,
    load_splits,
    parse_data_spec,
)
from wattcap.data.cifar import CIFAR10_MEAN, CIFAR10_STD
from wattcap.data.loader import StreamBatches, batch_loader, iterate_batches
from wattcap.data.mnist import MNIST_MEAN, MNIST_STD
from wattcap.data.svhn import SVHN_MEAN, SVHN_STD
from wattcap.models import get_model_spec
from wattcap.train.loop import BatchStream, TrainConfig, train_to_accuracy

CLASSES = ("airplane", "bird", "cat")


def _normalised(pixels: np.ndarray, mean, std) -> np.ndarray:
    m = np.asarray(mean, np.float32).reshape(1, -1, 1, 1)
    s = np.asarray(std, np.float32).reshape(1, -1, 1, 1)
    return (pixels.astype(np.float32) / np.float32(255) - m) / s


def _all(ds) -> tuple[np.ndarray, np.ndarray]:
    return ds.batch(np.arange(len(ds)))


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("fmt", ["cifar10", "cifar100", "svhn", "mnist", "fashion-mnist",
                                 "stl10", "imagefolder", "text"])
def test_every_format_parses_with_its_path(fmt):
    spec = parse_data_spec(f"{fmt}:/data/some where")
    assert spec.format == fmt and spec.path == Path("/data/some where")
    assert spec.text == f"{fmt}:/data/some where"
    assert spec.default_test_fraction == (0.1 if fmt == "text" else 0.2)


def test_bundled_names_and_unknown_specs():
    spec = parse_data_spec("digits-5-9-32")
    assert spec.format == "bundled" and spec.path is None and spec.task == "image-classification"
    assert parse_data_spec("pydoc-text").task == "char-lm"
    assert parse_data_spec("pydoc-text").default_test_fraction == 0.2  # as bundled tasks were
    with pytest.raises(DataSpecError,
                       match="unknown dataset 'digits-7'.*digits-5-9.*cifar10:PATH"):
        parse_data_spec("digits-7")
    with pytest.raises(DataSpecError, match="unknown data format 'cifar11'"):
        parse_data_spec("cifar11:/x")
    with pytest.raises(DataSpecError, match="give a path after 'svhn:'"):
        parse_data_spec("svhn:")


def test_a_path_given_without_its_format_is_told_which_format(tmp_path):
    images, labels = class_images(6, (3, 8, 8), num_classes=2, seed=3)
    folder = write_image_folder(tmp_path / "photos", images, labels, CLASSES[:2])
    with pytest.raises(DataSpecError, match=f"use imagefolder:{folder}"):
        parse_data_spec(str(folder))
    (tmp_path / "notes.txt").write_text("some text")
    with pytest.raises(DataSpecError, match="a file: text is read as text:"):
        parse_data_spec(str(tmp_path / "notes.txt"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataSpecError, match="a folder: give its format"):
        parse_data_spec(str(tmp_path / "empty"))


# --------------------------------------------------------------------------- each format


def test_cifar10_python_spec_reads_py2_batches_through_the_restricted_unpickler(
    tmp_path, monkeypatch
):
    import wattcap.data.safe_pickle as safe_pickle

    images, labels = class_images(50, (3, 32, 32), seed=1)
    write_cifar10_python(tmp_path, images, labels)
    asked: list[tuple[str, str]] = []
    original = safe_pickle.RestrictedUnpickler.find_class

    def spy(self, module, name):
        asked.append((module, name))
        return original(self, module, name)

    monkeypatch.setattr(safe_pickle.RestrictedUnpickler, "find_class", spy)
    ds = load_dataset(f"cifar10:{tmp_path}")
    # the Python 2 batches name numpy.core's array reconstructor: resolved by the allow-list
    assert ("numpy.core.multiarray", "_reconstruct") in asked
    assert isinstance(ds, UInt8ImageDataset) and ds.name == f"cifar10:{tmp_path}"
    assert len(ds) == 50 and ds.input_shape == (3, 32, 32) and ds.classes[0] == "airplane"
    x, y = _all(ds)
    assert y.tolist() == labels.tolist()  # all five training batches, in order; no test batch
    assert np.allclose(x, _normalised(images, CIFAR10_MEAN, CIFAR10_STD), atol=1e-6)


def test_cifar10_binary_and_cifar100_specs(tmp_path):
    images, labels = class_images(25, (3, 32, 32), seed=2)
    write_cifar10_binary(tmp_path / "c10", images, labels)
    ds = load_dataset(f"cifar10:{tmp_path / 'c10'}")
    assert _all(ds)[1].tolist() == labels.tolist()
    assert np.allclose(_all(ds)[0], _normalised(images, CIFAR10_MEAN, CIFAR10_STD), atol=1e-6)

    fine = np.arange(25) * 4 % 100
    write_cifar100_python(tmp_path / "c100", images, fine)
    ds100 = load_dataset(f"cifar100:{tmp_path / 'c100'}")
    assert ds100.num_classes == 100 and _all(ds100)[1].tolist() == fine.tolist()
    assert ds100.classes[99] == "fine99"


def test_svhn_spec_maps_label_10_to_digit_0(tmp_path):
    images, labels = class_images(20, (3, 32, 32), seed=3)
    write_svhn(tmp_path, images, labels)
    for path in (tmp_path, tmp_path / "train_32x32.mat"):
        x, y = _all(load_dataset(f"svhn:{path}"))
        assert y.tolist() == labels.tolist()
        assert np.allclose(x, _normalised(images, SVHN_MEAN, SVHN_STD), atol=1e-6)


def test_mnist_converted_to_3x32x32_and_fashion_mnist(tmp_path):
    images = random_images(12, (28, 28), seed=4)
    labels = np.arange(12) % 10
    write_mnist(tmp_path, images, labels)
    train, test = load_splits(f"mnist:{tmp_path}", input_shape="3x32x32", test_fraction=0.25)
    assert train.input_shape == (3, 32, 32) and len(train) == 9 and len(test) == 3
    x, _ = _all(train)
    assert x.shape == (9, 3, 32, 32)
    assert np.array_equal(x[:, 0], x[:, 1]) and np.array_equal(x[:, 0], x[:, 2])
    # resizing is linear, so it commutes with the normalisation
    raw = torch.from_numpy(images[train.rows][:, None].astype(np.float32) / 255)
    resized = torch.nn.functional.interpolate(raw, size=(32, 32), mode="bilinear",
                                              align_corners=False).numpy()
    expected = (resized - MNIST_MEAN[0]) / MNIST_STD[0]
    assert np.allclose(x[:, :1], expected, atol=1e-5)
    fashion = load_dataset(f"fashion-mnist:{tmp_path}")
    assert fashion.classes[9] == "Ankle boot" and _all(fashion)[1].tolist() == labels.tolist()


def test_stl10_downsized_from_96_to_32_without_aliasing(tmp_path):
    images = np.zeros((4, 3, 96, 96), np.uint8)
    images[:, :, :, ::2] = 255  # one-pixel stripes: aliasing would turn them into bands
    images[1] = 100
    write_stl10(tmp_path, images, np.array([0, 1, 9, 3]))
    ds = load_dataset(f"stl10:{tmp_path}").converted((3, 32, 32))
    x, y = _all(ds)
    assert y.tolist() == [0, 1, 9, 3] and x.shape == (4, 3, 32, 32)
    plain = UInt8ImageDataset("s", images, np.zeros(4, np.int64), 10, None, None,
                              output_shape=(3, 32, 32))
    px, _ = _all(plain)
    # stripes average to grey (plain bilinear sampling would give 0s and 1s)
    assert np.abs(px[0] - 0.5).max() < 0.1
    assert np.allclose(px[1], 100 / 255, atol=1e-5)


def test_imagefolder_spec_reads_the_train_split_of_a_cinic_layout(tmp_path):
    images, labels = class_images(18, (3, 32, 32), num_classes=3, seed=5)
    write_image_folder(tmp_path, images, labels, CLASSES, split="train")
    write_image_folder(tmp_path, images[:3], labels[:3], CLASSES, split="valid")
    ds = load_dataset(f"imagefolder:{tmp_path}", cache=False)
    assert len(ds) == 18 and ds.classes == CLASSES
    x, y = _all(ds)
    order = np.argsort(labels, kind="stable")  # files are read class by class
    assert y.tolist() == labels[order].tolist()
    # normalised with the folder's own statistics
    assert np.allclose(x.mean(axis=(0, 2, 3)), 0, atol=1e-4)
    assert np.allclose(x.std(axis=(0, 2, 3)), 1, atol=1e-3)
    assert np.allclose(x * np.asarray(ds.std).reshape(1, 3, 1, 1)
                       + np.asarray(ds.mean).reshape(1, 3, 1, 1),
                       images[order] / 255.0, atol=1e-5)


def test_text_spec_filters_and_cuts_windows(tmp_path):
    path = tmp_path / "austen.txt"
    text = english_text(5000, seed=6)
    path.write_text(text, encoding="utf-8")
    train, test = load_splits(f"text:{path}", context=32, seed=1)
    assert train.task == "char-lm" and train.input_shape == (32,)
    assert train.num_classes == VOCAB_SIZE
    assert len(test) == round((len(train) + len(test)) * 0.1)  # 90/10
    x, y = train.batch(np.arange(3))
    assert np.array_equal(x[:, 1:], y[:, :-1])  # targets are the next characters
    folder = tmp_path / "wikitext-2-raw"
    folder.mkdir()
    (folder / "wiki.train.raw").write_text(text)
    (folder / "wiki.test.raw").write_text("not read")
    wiki = load_dataset(f"text:{folder}", context=64)
    assert wiki.info["files"] == [str(folder / "wiki.train.raw")]
    assert load_splits(f"text:{path}", input_shape="16")[0].input_shape == (16,)


def test_bundled_specs_load_as_before():
    train, test = load_splits("digits-5-9")
    ref_train, ref_test = get_dataset("digits-5-9").split(0.2, seed=0)
    assert isinstance(train, ArrayDataset)
    assert np.array_equal(train.x, ref_train.x) and np.array_equal(test.y, ref_test.y)
    big, _ = load_splits("digits-5-9", input_shape=(3, 32, 32))
    assert big.input_shape == (3, 32, 32) and np.array_equal(big.x[:, 0], big.x[:, 2])


# --------------------------------------------------------------------------- subsets, splits


def test_subset_then_split_is_seeded_stratified_and_sized(tmp_path):
    images, labels = class_images(400, (3, 8, 8), num_classes=4, seed=7)
    write_svhn(tmp_path, np.pad(images, ((0, 0), (0, 0), (12, 12), (12, 12))), labels)
    spec = f"svhn:{tmp_path}"
    train, test = load_splits(spec, subset_fraction=0.25, seed=3)
    assert len(train) == 80 and len(test) == 20  # a quarter, then 80/20
    assert np.bincount(_all(train)[1]).tolist() == [20] * 4
    assert np.bincount(_all(test)[1]).tolist() == [5] * 4
    assert not set(train.rows) & set(test.rows)
    again, _ = load_splits(spec, subset_fraction=0.25, seed=3)
    other, _ = load_splits(spec, subset_fraction=0.25, seed=4)
    assert np.array_equal(again.rows, train.rows) and not np.array_equal(other.rows, train.rows)
    with pytest.raises(DataMismatchError, match="subset fraction"):
        load_splits(spec, subset_fraction=1.5)
    with pytest.raises(DataMismatchError, match="keeps 0 of 400"):
        load_splits(spec, subset_fraction=0.001)


def test_uint8_and_float_sets_split_and_batch_identically():
    images = random_images(60, (3, 4, 4), seed=8)
    labels = np.arange(60) % 3
    pixels = UInt8ImageDataset("p", images, labels, 3, CIFAR10_MEAN, CIFAR10_STD)
    floats = pixels.to_array_dataset()
    for (a, b) in zip(pixels.split(0.3, seed=5), floats.split(0.3, seed=5), strict=True):
        xa, ya = _all(a)
        assert np.array_equal(xa, b.x) and np.array_equal(ya, b.y)
    idx = np.array([59, 0, 17, 17])
    assert np.array_equal(pixels.batch(idx)[0], floats.x[idx])
    taken = pixels.take(10, seed=2)
    assert np.array_equal(_all(taken)[0], floats.take(10, seed=2).x)
    x_tensor, y_tensor = pixels.subset([1, 2]).to_tensors()
    assert x_tensor.dtype == torch.float32 and y_tensor.tolist() == [1, 2]


# --------------------------------------------------------------------------- pixel cache


def test_second_load_reads_the_memmap_cache_not_the_pngs(tmp_path, monkeypatch):
    import wattcap.data.image_files as imagefolder

    images, labels = class_images(12, (3, 16, 16), num_classes=3, seed=9)
    write_image_folder(tmp_path, images, labels, CLASSES)
    opened: list[str] = []
    real_open = imagefolder.Image.open

    def spy(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(imagefolder.Image, "open", spy)
    first = load_dataset(f"imagefolder:{tmp_path}")
    assert len(opened) >= 12
    cache = tmp_path / "train" / ".wattcap-cache"
    assert len(list(cache.glob("pixels-*.npy"))) == 1  # beside the data, hidden from classes
    opened.clear()
    second = load_dataset(f"imagefolder:{tmp_path}")
    assert opened == []  # no image decoded: the cache was read
    assert isinstance(second.images, np.memmap)
    assert second.classes == CLASSES and second.mean == pytest.approx(first.mean)
    assert np.array_equal(_all(second)[0], _all(first)[0])
    assert np.array_equal(_all(second)[1], _all(first)[1])

    # a new image invalidates the cache; the stale one is removed
    some_png = next((tmp_path / "train" / "airplane").glob("*.png"))
    (some_png.parent / "extra.png").write_bytes(some_png.read_bytes())
    third = load_dataset(f"imagefolder:{tmp_path}")
    assert len(third) == 13 and len(opened) >= 13
    assert len(list(cache.glob("pixels-*.npy"))) == 1


def test_cache_falls_back_to_the_cache_dir_when_beside_the_data_is_unwritable(
    tmp_path, monkeypatch
):
    data = tmp_path / "data"
    images, labels = class_images(6, (3, 8, 8), num_classes=3, seed=10)
    write_image_folder(data, images, labels, CLASSES, split=None)
    (data / ".wattcap-cache").write_text("a file where the cache folder would go")
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path / "global"))
    ds = load_dataset(f"imagefolder:{data}")
    assert isinstance(ds.images, np.memmap)
    assert len(list((tmp_path / "global" / "datasets").glob("pixels-*.npy"))) == 1
    explicit = load_dataset(f"imagefolder:{data}", cache_dir=tmp_path / "mine")
    assert len(list((tmp_path / "mine").glob("pixels-*.npy"))) == 1
    assert np.array_equal(_all(explicit)[0], _all(ds)[0])


def test_a_load_that_may_not_write_reads_the_cache_but_writes_none(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path / "global"))
    images, labels = class_images(12, (3, 8, 8), num_classes=3, seed=12)
    folder = write_image_folder(tmp_path / "data", images, labels, CLASSES)
    dry, _ = load_splits(f"imagefolder:{tmp_path / 'data'}", write_cache=False)
    assert not (folder / ".wattcap-cache").exists()
    assert not (tmp_path / "global" / "datasets").exists()
    written, _ = load_splits(f"imagefolder:{tmp_path / 'data'}")
    assert np.array_equal(_all(dry)[0], _all(written)[0])
    again = load_dataset(f"imagefolder:{tmp_path / 'data'}", write_cache=False)
    assert isinstance(again.images, np.memmap)  # the cache written since is read


def _mixed_folder(root: Path) -> Path:
    for i, (height, width) in enumerate([(12, 10), (12, 11), (10, 12), (11, 12)]):
        path = root / CLASSES[i % 2] / f"{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((height, width, 3), 40 * i, np.uint8)).save(path)
    return root


@pytest.mark.parametrize("cache", [True, False])
def test_images_of_mixed_sizes_are_resized_to_the_input_shape(tmp_path, cache):
    from wattcap.data.image_files import MixedImageSizesError

    folder = _mixed_folder(tmp_path / "mixed")
    spec = f"imagefolder:{folder}"
    with pytest.raises(MixedImageSizesError, match="is 12×10 but 0.png is 10×12; pass size="):
        load_dataset(spec, cache=cache)
    assert not (folder / ".wattcap-cache").exists()  # the failed cache left no empty folder
    train, test = load_splits(spec, input_shape=(1, 8, 8), test_fraction=0.5, cache=cache)
    assert train.input_shape == (1, 8, 8) and len(train) + len(test) == 4
    # decoded at 8x8 (not converted from one of the sizes), the colours kept per image
    whole = load_dataset(spec, cache=cache, resize_if_mixed=(8, 8))
    assert whole.images.shape == (4, 3, 8, 8)
    assert sorted(int(v) for v in whole.images[:, 0, 4, 4]) == [0, 40, 80, 120]
    assert (folder / ".wattcap-cache").exists() == cache


def test_memmapped_set_pickles_as_its_file_name(tmp_path):
    images, labels = class_images(30, (3, 16, 16), num_classes=3, seed=11)
    write_image_folder(tmp_path, images, labels, CLASSES)
    train, _ = load_splits(f"imagefolder:{tmp_path}")
    blob = pickle.dumps(train)
    assert len(blob) < images.nbytes / 4  # the pixels did not travel
    clone = pickle.loads(blob)
    assert isinstance(clone.images, np.memmap)
    assert np.array_equal(_all(clone)[0], _all(train)[0])


# --------------------------------------------------------------------------- loader


def test_loader_with_two_workers_gives_what_zero_workers_give(tmp_path):
    images, labels = class_images(64, (3, 16, 16), num_classes=4, seed=12)
    write_image_folder(tmp_path, images, labels, ("a", "b", "c", "d"))
    train, _ = load_splits(f"imagefolder:{tmp_path}", input_shape="3x32x32")
    assert isinstance(train.images, np.memmap)
    batches = StreamBatches(BatchStream(len(train), seed=0), start=0, batch_size=8, count=10)
    serial = list(iterate_batches(train, batches, num_workers=0))
    parallel = list(iterate_batches(train, batches, num_workers=2))
    assert len(serial) == len(parallel) == 10  # crosses an epoch boundary (51 samples)
    for (xs, ys), (xp, yp), idx in zip(serial, parallel, batches, strict=True):
        assert xs.shape == (8, 3, 32, 32) and xs.dtype == torch.float32
        assert torch.equal(xs, xp) and torch.equal(ys, yp)
        x_direct, y_direct = train.batch(idx)
        assert np.array_equal(xs.numpy(), x_direct) and ys.tolist() == y_direct.tolist()


def test_loader_pins_memory_only_for_cuda_targets():
    ds = get_dataset("digits")
    batches = [np.arange(4), np.arange(4, 8)]
    assert batch_loader(ds, batches).pin_memory is False
    cuda = torch.cuda.is_available()  # pinning needs CUDA in torch
    assert batch_loader(ds, batches, torch_device="cuda").pin_memory is cuda
    assert batch_loader(ds, batches, torch_device="cuda", pin_memory=False).pin_memory is False
    x, y = next(iter(batch_loader(ds, batches)))
    assert torch.equal(x, torch.from_numpy(ds.x[:4])) and y.tolist() == ds.y[:4].tolist()
    with pytest.raises(ValueError, match="num_workers"):
        batch_loader(ds, batches, num_workers=-1)


# --------------------------------------------------------------------------- bad input


def test_missing_path_and_wrong_format_name_what_was_expected(tmp_path):
    with pytest.raises(DatasetFormatError, match="nowhere: no such file or directory"):
        load_splits(f"cifar10:{tmp_path / 'nowhere'}")
    write_mnist(tmp_path / "m", random_images(3, (28, 28)), np.arange(3))
    with pytest.raises(DatasetFormatError) as info:
        parse_data_spec(f"cifar10:{tmp_path / 'm'}").check()
    message = str(info.value)
    assert "not cifar10 data: expected CIFAR-10" in message and "data_batch_1" in message
    assert f"looks like mnist data (found train-images-idx3-ubyte): use mnist:{tmp_path / 'm'}" \
        in message
    images, labels = class_images(3, (3, 8, 8), num_classes=3)
    write_image_folder(tmp_path / "f", images, labels, CLASSES)
    with pytest.raises(DatasetFormatError, match="looks like an image folder: use imagefolder:"):
        load_splits(f"svhn:{tmp_path / 'f'}")
    with pytest.raises(DatasetFormatError, match="stl10 expects a folder"):
        parse_data_spec(f"stl10:{tmp_path / 'm' / 'train-labels-idx1-ubyte'}").check()


def test_empty_class_and_text_with_nothing_left(tmp_path):
    images, labels = class_images(4, (3, 8, 8), num_classes=2)
    write_image_folder(tmp_path / "img", images, labels, ("cat", "dog"))
    (tmp_path / "img" / "train" / "emu").mkdir()
    with pytest.raises(DatasetFormatError, match="emu: class folder holds no images"):
        load_splits(f"imagefolder:{tmp_path / 'img'}")
    greek = tmp_path / "greek.txt"
    greek.write_text("αβγδεζηθ\t«»" * 20, encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="greek.txt: no character left after the "
                       "vocabulary filter"):
        load_splits(f"text:{greek}")
    short = tmp_path / "short.txt"
    short.write_text("Hello there.")
    with pytest.raises(DatasetFormatError, match="only 12 characters left"):
        load_splits(f"text:{short}")
    with pytest.raises(DatasetFormatError, match="text expects a text file"):
        load_splits(f"text:{tmp_path / 'img'}")


def test_shapes_that_do_not_fit_the_model_are_refused():
    digits8 = get_dataset("digits-5-9")
    with pytest.raises(DataMismatchError, match="data digits-5-9 has input shape 1x8x8 but "
                       "model digits32-cnn expects 1x32x32; convert it with input shape 1x32x32 "
                       r"\(input_shape= in Python, --input-shape 1x32x32"):
        check_data_fits_model(digits8, get_model_spec("digits32-cnn"))
    check_data_fits_model(digits8.converted((1, 32, 32)), get_model_spec("digits32-cnn"))
    train, test = digits8.split(0.2, seed=0)
    config = TrainConfig(model="digits32-cnn", batch_size=8, target_accuracy=0.5,
                         sample_budget=32, eval_every_samples=32)
    with pytest.raises(DataMismatchError, match="has input shape 1x8x8"):
        train_to_accuracy(config, train, test)  # refused before any step
    with pytest.raises(DataMismatchError, match="is text .* takes images"):
        check_data_fits_model(get_dataset("pydoc-text"), get_model_spec("resnet18"))
    with pytest.raises(DataMismatchError, match="cannot convert 1-channel images to 2 channels"):
        load_splits("digits", input_shape="2x8x8")
    with pytest.raises(DataMismatchError, match="3 positive integers"):
        load_splits("digits", input_shape="32x32")


def test_training_with_loader_workers_gives_the_same_run(tmp_path):
    images, labels = class_images(80, (3, 8, 8), num_classes=4, seed=13)
    write_image_folder(tmp_path, images, labels, ("a", "b", "c", "d"))
    train, test = load_splits(f"imagefolder:{tmp_path}", input_shape="1x8x8")
    config = TrainConfig(model="digits-cnn", batch_size=8, target_accuracy=0.99,
                         sample_budget=96, eval_every_samples=32)
    serial = train_to_accuracy(config, train, test)
    parallel = train_to_accuracy(config, train, test, num_workers=2)
    assert serial.samples_seen == parallel.samples_seen > 0
    assert [p.accuracy for p in serial.curve] == [p.accuracy for p in parallel.curve]
