"""Data sets: bundled offline tasks, readers for users' data on disk, char-level text.

Everything becomes an :class:`ArrayDataset` (arrays in memory, seeded splits and subsets).
Nothing here downloads: bundled tasks are built from scikit-learn's digits, drawn shapes and
Python's own documentation; readers parse the official file formats with numpy, scipy and
Pillow (no torchvision), and pickles go through an unpickler restricted to arrays.
"""

from wattcap.data.base import ArrayDataset, DatasetFormatError, images_to_float
from wattcap.data.bundled import (
    BUNDLED_MEAN,
    BUNDLED_STD,
    SHAPE_CLASSES,
    get_dataset,
    list_datasets,
)
from wattcap.data.cifar import (
    read_cifar10_binary,
    read_cifar10_python,
    read_cifar100_binary,
    read_cifar100_python,
)
from wattcap.data.imagefolder import read_cinic10, read_image_folder
from wattcap.data.mnist import read_fashion_mnist, read_idx, read_mnist
from wattcap.data.safe_pickle import RestrictedUnpickler, UnsafePickleError, safe_load
from wattcap.data.stl10 import read_stl10
from wattcap.data.svhn import read_svhn
from wattcap.data.text import (
    VOCAB,
    VOCAB_SIZE,
    char_windows,
    decode,
    encode,
    filter_text,
    read_text_corpus,
)

__all__ = [
    "BUNDLED_MEAN",
    "BUNDLED_STD",
    "SHAPE_CLASSES",
    "VOCAB",
    "VOCAB_SIZE",
    "ArrayDataset",
    "DatasetFormatError",
    "RestrictedUnpickler",
    "UnsafePickleError",
    "char_windows",
    "decode",
    "encode",
    "filter_text",
    "get_dataset",
    "images_to_float",
    "list_datasets",
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
    "safe_load",
]
