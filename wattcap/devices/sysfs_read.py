"""Reading sysfs and device-tree attributes as text or integers."""

from __future__ import annotations

from pathlib import Path


def read_text(path: Path) -> str:
    """An attribute's text, without the NUL bytes that end device-tree strings and the newline
    that ends sysfs values."""
    return path.read_text(errors="replace").replace("\x00", "").strip()


def read_int(path: Path) -> int:
    """An attribute's first integer; ValueError when it holds none (an empty read)."""
    words = read_text(path).split()
    if not words:
        raise ValueError(f"{path} is empty")
    return int(words[0])
