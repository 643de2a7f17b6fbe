"""Data sets: bundled offline tasks, readers for users' data on disk, char-level text.

A data spec names a data set (``digits-5-9-32``, ``cifar10:PATH``, ``imagefolder:PATH``...,
see :mod:`wattcap.data.specs`) and :func:`load_splits` loads it as a seeded (train, test)
pair. Small sets become an :class:`ArrayDataset` (float arrays in memory); images read from
disk a :class:`UInt8ImageDataset` (uint8, possibly memory-mapped, normalised per batch);
both give batches through ``batch(indices)`` and :mod:`wattcap.data.loader`. Nothing here
downloads: bundled tasks are built from scikit-learn's digits, drawn shapes and Python's own
documentation; readers parse the official file formats with numpy, scipy and Pillow (no
torchvision), and pickles go through an unpickler restricted to arrays.
"""

from wattcap.data.base import (
    ArrayDataset,
    Dataset,
    DatasetFormatError,
    UInt8ImageDataset,
    images_to_float,
)
from wattcap.data.bundled import (
    BUNDLED_MEAN,
    BUNDLED_STD,
    SHAPE_CLASSES,
    get_dataset,
    list_datasets,
)
from wattcap.data.cifar import (
    cifar10_pixels,
    cifar100_pixels,
    read_cifar10_binary,
    read_cifar10_python,
    read_cifar100_binary,
    read_cifar100_python,
)
from wattcap.data.imagefolder import image_folder_pixels, read_cinic10, read_image_folder
from wattcap.data.mnist import (
    fashion_mnist_pixels,
    mnist_pixels,
    read_fashion_mnist,
    read_idx,
    read_mnist,
)
from wattcap.data.safe_pickle import RestrictedUnpickler, UnsafePickleError, safe_load
from wattcap.data.specs import (
    DataMismatchError,
    DataSpec,
    DataSpecError,
    check_data_fits_model,
    list_formats,
    load_dataset,
    load_splits,
    parse_data_spec,
)
from wattcap.data.stl10 import read_stl10, stl10_pixels
from wattcap.data.svhn import read_svhn, svhn_pixels
from wattcap.data.text import (
    VOCAB,
    VOCAB_SIZE,
    char_windows,
    decode,
    encode,
    filter_text,
    read_text_corpus,
    read_text_windows,
)
from wattcap.data.transforms import ShapeConversionError, convert_images, parse_image_shape

__all__ = [
    "BUNDLED_MEAN",
    "BUNDLED_STD",
    "SHAPE_CLASSES",
    "VOCAB",
    "VOCAB_SIZE",
    "ArrayDataset",
    "DataMismatchError",
    "DataSpec",
    "DataSpecError",
    "Dataset",
    "DatasetFormatError",
    "RestrictedUnpickler",
    "ShapeConversionError",
    "UInt8ImageDataset",
    "UnsafePickleError",
    "char_windows",
    "check_data_fits_model",
    "cifar100_pixels",
    "cifar10_pixels",
    "convert_images",
    "decode",
    "encode",
    "fashion_mnist_pixels",
    "filter_text",
    "get_dataset",
    "image_folder_pixels",
    "images_to_float",
    "list_datasets",
    "list_formats",
    "load_dataset",
    "load_splits",
    "mnist_pixels",
    "parse_data_spec",
    "parse_image_shape",
    "read_cifar10_binary",
    "read_cifar10_python",
    "read_cifar100_binary",
    "read_cifar100_python",
    "read_cinic10",
    "read_fashion_mnist",
    "read_idx",
    "read_image_folder",
    "read_mnist",
    "read_stl10",
    "read_svhn",
    "read_text_corpus",
    "read_text_windows",
    "safe_load",
    "stl10_pixels",
    "svhn_pixels",
]
