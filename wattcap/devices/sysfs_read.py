"""Reading sysfs and device-tree attributes as text or integers, and where sysfs is."""

from __future__ import annotations

import os
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


def resolve_sysfs_root(sysfs_root: str | Path | None = None) -> str:
    """The root the Jetson's sysfs is read under: `sysfs_root` when given, else the
    environment variable WATTCAP_SYSFS_ROOT, else "/" (a container that mounts the host's /sys
    elsewhere sets the variable; tests point it at a fake tree)."""
    if sysfs_root is not None:
        return str(sysfs_root)
    return os.environ.get("WATTCAP_SYSFS_ROOT") or "/"
