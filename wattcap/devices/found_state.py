"""What a device's settings were before wattcap changed them, kept on disk until restored.

Before the first change to a device (a clock lock, a power limit), the backend's settings as
found are written to a state file, and a per-device lock is taken; both go when `restore()`
has put the settings back. A run killed with SIGKILL, an OOM kill or a power loss leaves the
file: `wattcap restore` puts those settings back, and the next run on that device does so
before it changes anything. The lock stops two runs from fighting over one GPU.

Files live in WATTCAP_STATE_DIR, else the `state` folder of wattcap's cache (see
`wattcap.core.cache`); under sudo that is root's. One file per device key
(`nvml-0000:3b:00.0`, `jetson-57000000.gpu`), written atomically.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from wattcap.core.cache import cache_dir
from wattcap.core.version import __version__
from wattcap.devices.errors import DeviceError

STATE_KIND = "wattcap.found-settings"
STATE_SCHEMA_VERSION = 1


def state_dir() -> Path:
    """Where state files and device locks live."""
    root = os.environ.get("WATTCAP_STATE_DIR")
    path = Path(root) if root else cache_dir() / "state"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unwritable(path, err) from None
    return path


def _slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key)


@dataclass(frozen=True)
class FoundSettings:
    """One device's settings as found, and who changed them."""

    device: str  # the name `wattcap.devices.get_device` opens it by ("jetson", "nvml:0")
    key: str
    settings: dict[str, Any]
    pid: int
    created_at: str
    tool_version: str = __version__

    def to_json(self) -> str:
        return json.dumps({"kind": STATE_KIND, "schema_version": STATE_SCHEMA_VERSION,
                           "device": self.device, "key": self.key, "settings": self.settings,
                           "pid": self.pid, "created_at": self.created_at,
                           "tool_version": self.tool_version}, indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> FoundSettings:
        """A state file, or DeviceError naming what is wrong with it."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise DeviceError(f"{path}: unreadable state file ({err})",
                              hint="restore the device's settings by hand, then delete it") \
                from None
        if data.get("kind") != STATE_KIND or data.get("schema_version") != STATE_SCHEMA_VERSION:
            raise DeviceError(f"{path}: not a wattcap state file of schema "
                              f"{STATE_SCHEMA_VERSION}",
                              hint="restore the device's settings by hand, then delete it")
        return cls(device=data["device"], key=data["key"], settings=data["settings"],
                   pid=data["pid"], created_at=data["created_at"],
                   tool_version=data.get("tool_version", "?"))


class DeviceClaim:
    """This process's claim on one device: the lock held and the state file written."""

    def __init__(self, key: str) -> None:
        self.key = key
        folder = state_dir()
        self.path = folder / f"{_slug(key)}.json"
        self._lock_path = folder / f"{_slug(key)}.lock"
        self._lock: IO[str] | None = None

    def acquire(self) -> None:
        """Take the device's lock, or DeviceError naming the run that holds it."""
        try:
            handle = open(self._lock_path, "a+")  # noqa: SIM115 - held until release()
        except OSError as err:
            raise _unwritable(self._lock_path, err) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            handle.close()
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = self.stale()
            who = f" (pid {holder.pid}, since {holder.created_at})" if holder else ""
            raise DeviceError(
                f"{self.key} is in use by another wattcap run{who}",
                hint="wait for it to end; two runs changing one GPU's clock would fight") \
                from None
        self._lock = handle

    def stale(self) -> FoundSettings | None:
        """The state file left by an earlier run, if any."""
        return FoundSettings.load(self.path) if self.path.exists() else None

    def write(self, found: FoundSettings) -> None:
        """Keep the settings as found (atomically, synced: it must survive a power loss)."""
        tmp = self.path.with_suffix(".json.tmp")
        try:
            with open(tmp, "w") as handle:
                handle.write(found.to_json())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except OSError as err:
            raise _unwritable(self.path, err) from None

    def release(self, restored: bool) -> None:
        """Drop the lock; the state file goes only once the settings were put back."""
        if restored:
            self.path.unlink(missing_ok=True)
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    @property
    def held(self) -> bool:
        return self._lock is not None


def _unwritable(path: Path, err: OSError) -> DeviceError:
    return DeviceError(
        f"cannot keep the device's settings as found in {path} ({err.strerror or err}): "
        "nothing was changed, since a killed run could not be undone",
        hint="set WATTCAP_STATE_DIR to a folder this user can write")


def now_text() -> str:
    """The time a state file is written."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def state_files() -> list[Path]:
    """Every state file left in the state folder."""
    return sorted(state_dir().glob("*.json"))
