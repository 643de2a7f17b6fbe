"""Unpickling restricted to numpy arrays and plain containers.

CIFAR's "python version" batches are pickles, and a general unpickle runs whatever callable the
file names (``os.system``, ``builtins.eval``...). Every callable or class a pickle uses has to
be looked up through ``Unpickler.find_class`` — including for the INST/OBJ/EXT opcodes — so
refusing all but a short allow-list there blocks code execution while still reading arrays.
Lists, dicts, tuples, ints, floats, bytes and strings need no lookup at all.
"""

from __future__ import annotations

import _compat_pickle
import codecs
import importlib
import io
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from wattcap.data.base import DatasetFormatError


class UnsafePickleError(DatasetFormatError, pickle.UnpicklingError):
    """A pickle asked for something other than what numpy arrays need; nothing was run."""


def _numpy_core(submodule: str) -> Any:
    # numpy 2 renamed numpy.core to numpy._core and left a shim that warns on import; resolve
    # the real module once so old (numpy.core) and new (numpy._core) pickles both load quietly.
    try:
        return importlib.import_module(f"numpy._core.{submodule}")
    except ImportError:  # numpy < 1.26 has only numpy.core
        return importlib.import_module(f"numpy.core.{submodule}")


def _latin1_encode(obj: str, encoding: str = "latin1", errors: str = "strict") -> bytes:
    # Python 3 writes bytes at pickle protocol 2 as _codecs.encode(text, "latin1"). Any other
    # codec name would turn this into a general codec call, so only latin-1 is honoured.
    if codecs.lookup(encoding).name != "iso8859-1" or not isinstance(obj, str):
        raise UnsafePickleError(None, f"refusing to unpickle codecs.encode with {encoding!r}")
    return obj.encode("latin-1", errors)


_multiarray = _numpy_core("multiarray")
_numeric = _numpy_core("numeric")

ALLOWED: dict[tuple[str, str], Callable[..., Any] | type] = {
    ("numpy.core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): _multiarray.scalar,
    ("numpy._core.multiarray", "scalar"): _multiarray.scalar,
    # pickle protocol 5 rebuilds arrays from a buffer instead of _reconstruct
    ("numpy.core.numeric", "_frombuffer"): _numeric._frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _numeric._frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
    ("codecs", "encode"): _latin1_encode,
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals in :data:`ALLOWED` and refuses the rest."""

    def find_class(self, module: str, name: str) -> Any:
        # Protocol 0-2 pickles may name Python 2 modules (__builtin__, commands...); translate
        # as the stock unpickler would, so the allow-list and the error speak Python 3 names.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        try:
            return ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                None,
                f"refusing to unpickle {module}.{name}: only numpy arrays, lists, dicts, "
                "bytes and strings are allowed",
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(None, "refusing to unpickle a persistent id")


def safe_load(source: str | Path | bytes | BinaryIO, encoding: str = "bytes") -> Any:
    """Unpickle ``source`` (a path, bytes or binary file) allowing only numpy arrays and
    plain containers.

    ``encoding="bytes"`` reads Python 2 pickles (such as the official CIFAR batches) with their
    ``str`` values and dict keys as ``bytes``. A refused global raises
    :class:`UnsafePickleError`; a truncated or corrupt pickle raises
    :class:`DatasetFormatError`. Both name the file when given a path.
    """
    path: Path | None = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DatasetFormatError(path, f"cannot read: {exc.strerror or exc}") from None
        stream: BinaryIO = io.BytesIO(data)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        stream = io.BytesIO(bytes(source))
    else:
        stream = source
    try:
        return RestrictedUnpickler(stream, encoding=encoding).load()
    except UnsafePickleError as exc:
        raise UnsafePickleError(path, exc.problem) from None
    except DatasetFormatError:
        raise
    except Exception as exc:  # truncated data raises EOFError, bad opcodes UnpicklingError...
        raise DatasetFormatError(
            path, f"not a readable pickle ({type(exc).__name__}: {exc})"
        ) from None
