"""How wattcap writes every file: atomically, durably, and as the user's.

* Atomic: the bytes go to a temporary file in the same folder, which replaces the target in one
  rename, so a kill at any moment leaves the old file or the new one, never half of one.
* Durable: the file is fsynced before the rename and its folder after it (a power loss on a
  battery-powered device must not undo a profile that took hours).
* The user's: the file gets the mode the process's umask gives a new file (a temporary file
  would otherwise keep its private 0600, so a profile written with sudo was unreadable to the
  user); under sudo (root with SUDO_UID set) the files and folders wattcap creates are handed
  to SUDO_UID:SUDO_GID.

`write_file` writes bytes or text; `atomic_path` yields a temporary path for writers that want
a file name (matplotlib, safetensors, numpy) and does the rest when the block ends.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def umask_mode(base: int = 0o666) -> int:
    """The mode a new file gets under the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


def sudo_owner() -> tuple[int, int] | None:
    """(uid, gid) of the user who ran sudo, when this process is root under sudo."""
    if os.geteuid() != 0:
        return None
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if not uid or not uid.isdigit():
        return None
    return int(uid), int(gid) if gid and gid.isdigit() else int(uid)


def hand_to_user(path: Path) -> None:
    """Give a file or folder wattcap created to the sudo user (no-op otherwise)."""
    owner = sudo_owner()
    if owner is not None:
        os.chown(path, *owner)


def make_dir(path: str | Path) -> Path:
    """`mkdir -p`, the folders it creates handed to the sudo user."""
    path = Path(path)
    missing = []
    for parent in [path, *path.parents]:
        if parent.exists():
            break
        missing.append(parent)
    path.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        hand_to_user(created)
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # a folder that cannot be opened (some network file systems): nothing to sync
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to; on success it is synced, given the umask's
    mode and the sudo user, and renamed over `path` (and the folder synced). On failure it is
    removed and `path` is untouched."""
    path = Path(path)
    make_dir(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, umask_mode())
        hand_to_user(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_file(path: str | Path, data: bytes | str) -> Path:
    """Write `data` to `path` atomically and durably, as the user's file."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return path
