"""Small file-system helpers shared by the readers: locate a data set's folder, read bytes."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence
from pathlib import Path

from wattcap.data.base import DatasetFormatError


def locate(root: str | Path, wanted: Sequence[str], subdirs: Sequence[str] = ()) -> Path:
    """The folder holding any of ``wanted``: ``root`` itself or one of its ``subdirs``.

    Users point at either the folder they extracted into or the data set's own folder
    (``~/data`` vs ``~/data/cifar-10-batches-bin``), so both are accepted.
    """
    root = Path(root)
    if not root.exists():
        raise DatasetFormatError(root, "no such file or directory")
    for candidate in (root, *(root / s for s in subdirs)):
        if candidate.is_dir() and any((candidate / w).exists() for w in wanted):
            return candidate
    looked = ", ".join(str(root / s) for s in ("", *subdirs))
    raise DatasetFormatError(root, f"none of {list(wanted)} found (looked in {looked})")


def read_bytes(path: Path, allow_gzip: bool = False) -> bytes:
    """The file's bytes; transparently gunzipped when ``allow_gzip`` and it starts with 1f 8b."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if allow_gzip and raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DatasetFormatError(path, f"corrupt gzip data ({exc})") from None
    return raw


def read_names(path: Path) -> tuple[str, ...] | None:
    """Non-empty lines of a class-name file, or None when the file is absent."""
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return tuple(line.strip() for line in lines if line.strip())
