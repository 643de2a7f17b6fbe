"""Character-level text: the fixed vocabulary, its filter, and next-character windows.

The reference setup pre-trains a character transformer on WikiText-2, uses tiny-shakespeare as
the proxy and Austen/Dickens novels as targets, keeping only English letters, digits,
punctuation, spaces and newlines. A single fixed vocabulary for every corpus is what lets one
pre-trained embedding table and output head serve all of them.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import numpy as np

from wattcap.data.base import ArrayDataset, DatasetFormatError

# Newline first, then printable ASCII in code-point order: 1 + 95 = 96 symbols. Index order is
# part of the model's contract (embedding rows), so never reorder it.
VOCAB: str = "\n" + "".join(chr(c) for c in range(32, 127))
VOCAB_SIZE: int = len(VOCAB)
assert VOCAB_SIZE == 96
assert set(VOCAB) == set(string.ascii_letters + string.digits + string.punctuation + " \n")

# The vocabulary is exactly newline plus the printable ASCII range space..tilde.
_DROP = re.compile(r"[^\n -~]")
# 0xFF marks characters outside the vocabulary in the byte lookup table below.
_LOOKUP = np.full(256, 0xFF, dtype=np.uint8)
for _i, _ch in enumerate(VOCAB):
    _LOOKUP[ord(_ch)] = _i


def filter_text(text: str) -> str:
    """Keep English letters, digits, ASCII punctuation, spaces and newlines; drop the rest.

    Tabs, carriage returns, accented letters and typographic quotes are dropped, not mapped,
    as in the reference preprocessing.
    """
    return _DROP.sub("", text)


def encode(text: str) -> np.ndarray:
    """Vocabulary indices (int64) of ``text``; raises ValueError on characters outside it."""
    if not text.isascii():
        pos = next(i for i, ch in enumerate(text) if not ch.isascii())
        raise ValueError(f"character {text[pos]!r} at {pos} is outside the vocabulary")
    ids = _LOOKUP[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    bad = np.flatnonzero(ids == 0xFF)
    if bad.size:
        pos = int(bad[0])
        raise ValueError(f"character {text[pos]!r} at {pos} is outside the vocabulary")
    return ids.astype(np.int64)


def decode(ids: np.ndarray | list[int]) -> str:
    """Text for vocabulary indices (inverse of :func:`encode`)."""
    arr = np.asarray(ids, dtype=np.int64).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= VOCAB_SIZE):
        raise ValueError(f"indices must be in [0, {VOCAB_SIZE}), got [{arr.min()}, {arr.max()}]")
    return "".join(VOCAB[i] for i in arr.tolist())


def read_text_corpus(path: str | Path, encoding: str = "utf-8") -> str:
    """Read a plain-text corpus and apply the vocabulary filter.

    Line endings are normalised to newlines first (so Windows files keep their line breaks).
    A file that is not text in ``encoding``, or holds NUL bytes (a binary file given by
    mistake), raises :class:`DatasetFormatError`.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetFormatError(path, "no such text file")
    raw = path.read_bytes()
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise DatasetFormatError(path, f"holds a NUL byte at offset {nul}: a binary file, not text")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DatasetFormatError(
            path, f"not valid {encoding} at byte {exc.start}; pass encoding= (e.g. 'latin-1')"
        ) from None
    except LookupError:
        raise ValueError(f"unknown text encoding {encoding!r}") from None
    return filter_text(text.replace("\r\n", "\n").replace("\r", "\n"))


def char_windows(
    text: str, context: int = 64, stride: int = 64, name: str = "text"
) -> ArrayDataset:
    """Cut text into (N, context) input windows with (N, context) next-character targets.

    Window i starts at ``i * stride``; its targets are the same span shifted by one character.
    The vocabulary filter is applied first, so raw text may be passed.
    """
    if context < 1 or stride < 1:
        raise ValueError(f"context and stride must be positive, got {context} and {stride}")
    ids = encode(filter_text(text))
    if len(ids) < context + 1:
        raise ValueError(
            f"{name}: {len(ids)} characters after filtering; need at least {context + 1} "
            f"for one window of context {context}"
        )
    n = (len(ids) - context - 1) // stride + 1
    starts = np.arange(n, dtype=np.int64)[:, None] * stride
    offsets = np.arange(context, dtype=np.int64)[None, :]
    x = ids[starts + offsets]
    y = ids[starts + offsets + 1]
    return ArrayDataset(
        name=name,
        x=x,
        y=y,
        num_classes=VOCAB_SIZE,
        task="char-lm",
        info={"vocab": VOCAB, "context": context, "stride": stride, "characters": len(ids)},
    )


def read_text_windows(
    path: str | Path, context: int = 64, encoding: str = "utf-8", name: str | None = None
) -> ArrayDataset:
    """A text file, filtered to the vocabulary and cut into non-overlapping windows of
    ``context`` characters (stride = context), with next-character targets.

    Raises :class:`DatasetFormatError` naming the file when nothing (or too little for one
    window) is left after the vocabulary filter.
    """
    path = Path(path)
    text = read_text_corpus(path, encoding=encoding)
    if not text:
        raise DatasetFormatError(
            path, "no character left after the vocabulary filter (English letters, digits, "
            "ASCII punctuation, spaces and newlines): not English text?"
        )
    if len(text) < context + 1:
        raise DatasetFormatError(
            path, f"only {len(text)} characters left after the vocabulary filter; one window "
            f"of context {context} needs {context + 1}"
        )
    ds = char_windows(text, context=context, stride=context, name=name or path.name)
    ds.info["files"] = [str(path)]
    return ds
