"""Data specs: the text a user writes to name a data set, and the one loader behind them.

A spec is a bundled task name (``digits-5-9-32``, ``pydoc-text``...) or ``FORMAT:PATH`` for
data as users keep it on disk:

============== ====================================================================
cifar10:PATH   CIFAR-10, python or binary version: the five training batches
cifar100:PATH  CIFAR-100, python or binary version: the training file, 100 fine labels
svhn:PATH      SVHN cropped digits: ``train_32x32.mat`` (or the ``.mat`` file itself)
mnist:PATH     MNIST IDX files: ``train-images-idx3-ubyte[.gz]`` and the labels
fashion-mnist  FashionMNIST, same files as MNIST
stl10:PATH     STL-10 binary: ``train_X.bin``/``train_y.bin`` (5,000 labelled images)
imagefolder    ``PATH/<class>/<image>``, or ``PATH/train/<class>/<image>`` when PATH has a
               ``train`` folder (CINIC-10's layout: its 90,000 training images)
text:PATH      a text file, or a WikiText folder (``wiki.train.raw``/``.tokens``), char level
============== ====================================================================

Every format reads the data set's official **training** files only, and
:func:`load_splits` makes its own seeded train/test split from them (80/20 for images,
90/10 for text, by default): the official test files are left untouched for a final
evaluation of your own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np

from wattcap.core.errors import WattcapError
from wattcap.data.base import (
    ArrayDataset,
    Dataset,
    DatasetFormatError,
    UInt8ImageDataset,
    _stratified_pick,
)
from wattcap.data.transforms import ShapeConversionError, check_convertible, parse_image_shape

if TYPE_CHECKING:
    from wattcap.models.registry import ModelSpec

AnyDataset = Union[ArrayDataset, UInt8ImageDataset]  # noqa: UP007 - a runtime alias


class DataSpecError(WattcapError, ValueError):
    """A data spec that names no known data set or format."""


class DataMismatchError(WattcapError, ValueError):
    """Data that does not fit the model it is meant for (input shape, task, classes)."""


@dataclass(frozen=True)
class DataFormat:
    """One on-disk format: how to recognise it and what it is."""

    name: str
    description: str
    task: str
    #: files that identify the format, looked for in PATH and in its ``subdirs``
    markers: tuple[str, ...] = ()
    subdirs: tuple[str, ...] = ()
    #: whether PATH may be a single file of the format
    file_ok: bool = False


_IDX = ("train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "train-images.idx3-ubyte",
        "train-images.idx3-ubyte.gz")
FORMATS: dict[str, DataFormat] = {f.name: f for f in (
    DataFormat("cifar10", "CIFAR-10 (python or binary version): data_batch_1 ... data_batch_5",
               "image-classification",
               tuple(f"data_batch_{i}{ext}" for ext in ("", ".bin") for i in range(1, 6)),
               ("cifar-10-batches-py", "cifar-10-batches-bin"), file_ok=True),
    DataFormat("cifar100", "CIFAR-100 (python or binary version): the 'train' file, fine labels",
               "image-classification", ("train", "train.bin"),
               ("cifar-100-python", "cifar-100-binary"), file_ok=True),
    DataFormat("svhn", "SVHN cropped digits: train_32x32.mat", "image-classification",
               ("train_32x32.mat",), (), file_ok=True),
    DataFormat("mnist", "MNIST: train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz]",
               "image-classification", _IDX, ("MNIST/raw", "raw")),
    DataFormat("fashion-mnist", "FashionMNIST: the same IDX files as MNIST",
               "image-classification", _IDX, ("FashionMNIST/raw", "raw")),
    DataFormat("stl10", "STL-10 binary: train_X.bin and train_y.bin", "image-classification",
               ("train_X.bin",), ("stl10_binary",)),
    DataFormat("imagefolder", "an image folder: PATH/<class>/<image> or "
               "PATH/train/<class>/<image> (e.g. CINIC-10)", "image-classification"),
    DataFormat("text", "a text file (char level) or a WikiText folder (wiki.train.raw)",
               "char-lm", ("wiki.train.raw", "wiki.train.tokens"), (), file_ok=True),
)}

DEFAULT_TEST_FRACTION = {"image-classification": 0.2, "char-lm": 0.1}


@dataclass(frozen=True)
class DataSpec:
    """A parsed data spec: a bundled task (``format == "bundled"``) or a format and a path."""

    format: str
    name: str
    path: Path | None = None

    @property
    def text(self) -> str:
        """The spec as a user writes it (and as files record it)."""
        return self.name if self.path is None else f"{self.format}:{self.path}"

    def __str__(self) -> str:
        return self.text

    @property
    def task(self) -> str:
        """"image-classification" or "char-lm"."""
        if self.format == "bundled":
            return "char-lm" if self.name.endswith("-text") else "image-classification"
        return FORMATS[self.format].task

    @property
    def default_test_fraction(self) -> float:
        """0.2 for images, 0.1 for text read from disk (the paper's splits); 0.2 for every
        bundled task, as they have always been split."""
        if self.format == "bundled":
            return 0.2
        return DEFAULT_TEST_FRACTION[self.task]

    def check(self) -> None:
        """Cheap checks before any work starts: the path exists and holds this format's files.

        Raises DatasetFormatError that names what was expected (and which other format the
        files look like, when they look like one). Reading may still find a corrupt file.
        """
        if self.path is None:
            return
        path = self.path
        if not path.exists():
            raise DatasetFormatError(path, "no such file or directory")
        fmt = FORMATS[self.format]
        if self.format == "imagefolder":
            _check_image_folder(path)
            return
        if path.is_file():
            if fmt.file_ok:
                if self.format == "text":
                    _check_text(path)
                return
            raise DatasetFormatError(
                path, f"{self.format} expects a folder holding {fmt.description}, not a file"
            )
        if self.format == "text":
            found = _find_markers(path, fmt)
            if found is None:
                raise DatasetFormatError(path, f"text expects {fmt.description}" + _looks_like(
                    path, self.format))
            _check_text(found)
            return
        if _find_markers(path, fmt) is None:
            looked = ", ".join(str(p) for p in _folders(path, fmt))
            raise DatasetFormatError(
                path, f"not {self.format} data: expected {fmt.description} (looked in "
                f"{looked})" + _looks_like(path, self.format)
            )


def _folders(path: Path, fmt: DataFormat) -> list[Path]:
    return [path, *(path / s for s in fmt.subdirs)]


def _find_markers(path: Path, fmt: DataFormat) -> Path | None:
    """The first marker file of ``fmt`` found in ``path`` or its sub-folders."""
    for folder in _folders(path, fmt):
        for marker in fmt.markers:
            if (folder / marker).is_file():
                return folder / marker
    return None


def _looks_like(path: Path, expected: str) -> str:
    """"; it looks like X data (found F): use X:PATH" when another format's files are there."""
    if not path.is_dir():
        return ""
    for name, fmt in FORMATS.items():
        if name in (expected, "text", "imagefolder") or not fmt.markers:
            continue
        if expected in ("mnist", "fashion-mnist") and name in ("mnist", "fashion-mnist"):
            continue  # the same files: no way to tell them apart
        found = _find_markers(path, fmt)
        if found is not None:
            return f"; it looks like {name} data (found {found.name}): use {name}:{path}"
    if expected != "imagefolder" and any(
        d.is_dir() and not d.name.startswith(".") for d in path.iterdir()
    ) and _image_folder_root(path) is not None:
        return f"; it looks like an image folder: use imagefolder:{path}"
    return ""


def _image_folder_root(path: Path) -> Path | None:
    """PATH/train when it exists, else PATH, if it holds a non-hidden class folder with an
    image in it."""
    from wattcap.data.image_files import IMAGE_EXTENSIONS

    root = path / "train" if (path / "train").is_dir() else path
    for d in root.iterdir():
        if d.is_dir() and not d.name.startswith("."):
            if any(f.suffix.lower() in IMAGE_EXTENSIONS for f in d.iterdir() if f.is_file()):
                return root
    return None


def _check_image_folder(path: Path) -> None:
    from wattcap.data.image_files import IMAGE_EXTENSIONS

    if not path.is_dir():
        raise DatasetFormatError(path, "imagefolder expects a folder of <class>/<image> folders")
    root = path / "train" if (path / "train").is_dir() else path
    classes = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise DatasetFormatError(
            root, "no class sub-folders: imagefolder expects PATH/<class>/<image> or "
            "PATH/train/<class>/<image>" + _looks_like(path, "imagefolder")
        )
    for d in classes:
        if not any(f.suffix.lower() in IMAGE_EXTENSIONS and not f.name.startswith(".")
                   for f in d.iterdir() if f.is_file()):
            raise DatasetFormatError(
                d, f"class folder holds no images ({', '.join(IMAGE_EXTENSIONS)})"
            )


def _check_text(path: Path) -> None:
    from wattcap.data.text import read_text_corpus

    if not read_text_corpus(path):
        raise DatasetFormatError(
            path, "no character left after the vocabulary filter (English letters, digits, "
            "ASCII punctuation, spaces and newlines): not English text?"
        )


def list_formats() -> list[str]:
    """The on-disk formats a spec may name, as ``FORMAT:PATH``."""
    return list(FORMATS)


def parse_data_spec(spec: str | DataSpec) -> DataSpec:
    """Parse ``NAME`` (a bundled task) or ``FORMAT:PATH`` into a DataSpec.

    Nothing is read: call :meth:`DataSpec.check` for a cheap look at the path, or
    :func:`load_splits` to load. An unknown name or format raises DataSpecError listing the
    known ones.
    """
    if isinstance(spec, DataSpec):
        return spec
    from wattcap.data.bundled import list_datasets

    text = spec.strip()
    head, sep, rest = text.partition(":")
    if sep and head.lower() in FORMATS:
        if not rest:
            raise DataSpecError(f"data spec {text!r}: give a path after '{head}:'")
        return DataSpec(format=head.lower(), name=head.lower(), path=Path(rest).expanduser())
    if text in list_datasets():
        return DataSpec(format="bundled", name=text)
    formats = ", ".join(f"{f}:PATH" for f in FORMATS)
    if sep and len(head) > 1:
        raise DataSpecError(f"unknown data format {head!r} in {text!r}; formats: {formats}")
    raise DataSpecError(
        f"unknown dataset {text!r}{_path_without_format(text)}; bundled: "
        f"{', '.join(list_datasets())}; or a path as {formats}"
    )


def _path_without_format(text: str) -> str:
    """For a spec that is a path without its FORMAT: prefix, what it looks like:
    "; it is a folder: it looks like an image folder: use imagefolder:photos"."""
    path = Path(text).expanduser()
    if path.is_file():
        return f" (a file: text is read as text:{text})"
    if not path.is_dir():
        return ""
    found = _looks_like(path, expected="")
    return f" (a folder{found.replace(';', ':', 1)})" if found else \
        " (a folder: give its format, e.g. imagefolder:PATH)"


def load_dataset(
    spec: str | DataSpec,
    *,
    context: int = 64,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    resize_if_mixed: tuple[int, int] | None = None,
    write_cache: bool = True,
) -> AnyDataset:
    """The whole data set a spec names (official training files, see the module docstring).

    Images from disk come as :class:`UInt8ImageDataset` (uint8, normalised per batch with the
    data set's published statistics, or the folder's own for ``imagefolder``); bundled tasks
    and text as :class:`ArrayDataset`. ``context`` is the window length for text. ``cache``
    keeps an image folder's decoded pixels in a one-time ``.npy`` cache (see
    :mod:`wattcap.data.pixel_cache`), in ``cache_dir`` when given; ``write_cache=False``
    reads a current one but writes none. An image folder whose images differ in size is
    resized to ``resize_if_mixed`` (height, width) when given.
    """
    spec = parse_data_spec(spec)
    if spec.format == "bundled":
        from wattcap.data.bundled import get_dataset

        if spec.task == "char-lm":
            return get_dataset(spec.name, context=context, stride=context)
        return get_dataset(spec.name)
    spec.check()
    assert spec.path is not None
    path = spec.path
    ds: AnyDataset
    if spec.format == "cifar10":
        from wattcap.data.cifar import cifar10_pixels

        ds = cifar10_pixels(path)
    elif spec.format == "cifar100":
        from wattcap.data.cifar import cifar100_pixels

        ds = cifar100_pixels(path)
    elif spec.format == "svhn":
        from wattcap.data.svhn import svhn_pixels

        ds = svhn_pixels(path, split="train")
    elif spec.format == "mnist":
        from wattcap.data.mnist import mnist_pixels

        ds = mnist_pixels(path)
    elif spec.format == "fashion-mnist":
        from wattcap.data.mnist import fashion_mnist_pixels

        ds = fashion_mnist_pixels(path)
    elif spec.format == "stl10":
        from wattcap.data.stl10 import stl10_pixels

        ds = stl10_pixels(path, split="train")
    elif spec.format == "imagefolder":
        from wattcap.data.imagefolder import image_folder_pixels

        split = "train" if (path / "train").is_dir() else None
        ds = image_folder_pixels(path, split=split, cache=cache, cache_dir=cache_dir,
                                 resize_if_mixed=resize_if_mixed, write_cache=write_cache)
    elif spec.format == "text":
        from wattcap.data.text import read_text_windows

        file = path if path.is_file() else _find_markers(path, FORMATS["text"])
        assert file is not None  # check() found it
        ds = read_text_windows(file, context=context)
    else:  # pragma: no cover - FORMATS and this chain are kept in step
        raise DataSpecError(f"no loader for format {spec.format!r}")
    ds.name = spec.text
    ds.info["spec"] = spec.text
    return ds


def load_splits(
    spec: str | DataSpec,
    *,
    subset_fraction: float | None = None,
    seed: int = 0,
    test_fraction: float | None = None,
    input_shape: Sequence[int] | str | None = None,
    context: int = 64,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    write_cache: bool = True,
) -> tuple[AnyDataset, AnyDataset]:
    """Load a spec's data set and make the seeded (train, test) pair the paper uses.

    1. ``subset_fraction`` keeps a seeded share of the samples first (class proportions kept
       for images), e.g. 0.25 for the paper's quarter of SVHN and CINIC-10;
    2. a seeded split, stratified for images: ``test_fraction`` (default 0.2 for images, 0.1
       for text files, 0.2 for bundled tasks) goes to the test side;
    3. ``input_shape`` converts images to the model's (C, H, W) — 1 ↔ 3 channels and any size
       (MNIST 1×28×28 → 3×32×32, STL-10 96 → 32) — batch by batch for uint8 data; an image
       folder whose images differ in size is decoded at the shape's height × width. For text
       it is ``(context,)`` and sets the window length instead of ``context``.

    ``cache``, ``cache_dir`` and ``write_cache`` are :func:`load_dataset`'s (an image folder's
    pixel cache; ``write_cache=False`` for a run that must write no file).

    The same arguments always give the same samples. Raises DataSpecError, DatasetFormatError
    or DataMismatchError with a one-line message for bad input.
    """
    spec = parse_data_spec(spec)
    shape = None
    if input_shape is not None:
        if spec.task == "char-lm":
            context = _text_context(input_shape)
        else:
            try:
                shape = parse_image_shape(input_shape)
            except ShapeConversionError as err:
                raise DataMismatchError(str(err)) from None
    if test_fraction is None:
        test_fraction = spec.default_test_fraction
    if not 0.0 < test_fraction < 1.0:
        raise DataMismatchError(f"test fraction must be in (0, 1), got {test_fraction}")
    if subset_fraction is not None and not 0.0 < subset_fraction <= 1.0:
        raise DataMismatchError(f"subset fraction must be in (0, 1], got {subset_fraction}")
    data = load_dataset(spec, context=context, cache=cache, cache_dir=cache_dir,
                        resize_if_mixed=None if shape is None else (shape[1], shape[2]),
                        write_cache=write_cache)
    if subset_fraction is not None and subset_fraction < 1.0:
        data = seeded_subset(data, subset_fraction, seed)
    try:
        train, test = data.split(test_fraction, seed=seed)
    except ValueError as err:
        raise DataMismatchError(f"{spec.text}: {err}") from None
    if shape is not None:
        try:
            check_convertible(data.input_shape, shape)
        except ShapeConversionError as err:
            raise DataMismatchError(f"{spec.text}: {err}") from None
        train, test = train.converted(shape), test.converted(shape)
    return train, test


def _text_context(input_shape: Sequence[int] | str) -> int:
    if isinstance(input_shape, str):
        values = input_shape.replace(",", "x").split("x")
    else:
        values = [str(v) for v in input_shape]
    if len(values) != 1 or not values[0].strip().isdigit() or int(values[0]) < 1:
        raise DataMismatchError(
            f"a text input shape is one positive integer, the context length (e.g. 64), got "
            f"{input_shape!r}"
        )
    return int(values[0])


def seeded_subset(data: AnyDataset, fraction: float, seed: int) -> AnyDataset:
    """``round(len * fraction)`` samples picked with ``seed`` (each class keeps its share for
    images), in their original order."""
    n = int(round(len(data) * fraction))
    if n < 2:
        raise DataMismatchError(
            f"{data.name}: a subset fraction of {fraction} keeps {n} of {len(data)} samples"
        )
    rng = np.random.default_rng((seed, 1))
    if data.task == "image-classification":
        idx = _stratified_pick(data.y, n, rng)
    else:
        idx = rng.permutation(len(data))[:n]
    return data.subset(np.sort(idx))


def check_batch_fits_split(data: Dataset, batch_size: int) -> None:
    """Refuse a batch size larger than the training split: every batch would repeat samples."""
    if batch_size > len(data):
        raise DataMismatchError(
            f"batch size {batch_size} is larger than the training split of {data.name} "
            f"({len(data)} samples): every batch would repeat samples; use a smaller batch "
            "size or more data")


def check_data_fits_model(data: Dataset, model: ModelSpec) -> None:
    """Refuse data the model cannot train on: another task or another input shape.

    Raises DataMismatchError saying what the model expects and how to convert the data.
    """
    kinds = {"image-classification": "images", "char-lm": "text (char level)"}
    if data.task != model.task:
        raise DataMismatchError(
            f"data {data.name} is {kinds.get(data.task, data.task)} but model {model.name} "
            f"takes {kinds.get(model.task, model.task)}"
        )
    have, want = tuple(data.input_shape), tuple(model.input_shape)
    if have == want:
        return
    shown_have, shown_want = "x".join(map(str, have)), "x".join(map(str, want))
    if data.task == "char-lm":
        hint = f"; read it with context {want[0]}"
    else:
        try:
            check_convertible(have, want)
            hint = (f"; convert it with input shape {shown_want} (input_shape= in Python, "
                    f"--input-shape {shown_want} on the command line)")
        except ShapeConversionError:
            hint = ""
    raise DataMismatchError(
        f"data {data.name} has input shape {shown_have} but model {model.name} expects "
        f"{shown_want}{hint}"
    )
