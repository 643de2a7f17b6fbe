"""What a device's settings were before wattcap changed them, kept on disk until restored.

Before the first change to a device (a clock lock, a power limit), the backend's settings as
found are written to a state file, and a per-device lock is taken; both go when `restore()`
has put the settings back. A run killed with SIGKILL, an OOM kill or a power loss leaves the
file: `wattcap restore` puts those settings back, and the next run on that device does so
before it changes anything. The lock stops two runs from fighting over one GPU.

Files live in one folder for every user of the machine, /run/wattcap (WATTCAP_STATE_DIR
overrides it), so that a run under sudo and one as a user the udev rule lets write the clocks
take the same lock, and `wattcap restore` finds every run's file. /run empties at boot, as the
clocks and power limits it records are reset then. Where that folder cannot be made (a user's
first run since boot, with /run writable by root only) the files go to the `state` folder of
the user's wattcap cache, said once on stderr. One file per device key
(`nvml-0000:3b:00.0`, `jetson-57000000.gpu`), written atomically.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from wattcap.core.cache import cache_dir
from wattcap.core.version import __version__
from wattcap.devices.errors import DeviceError

STATE_KIND = "wattcap.found-settings"
STATE_SCHEMA_VERSION = 1


#: The folder every user's runs share. Mode 1777 (sticky, world-writable, as /tmp and
#: /run/lock): a run as a user of the udev rule's group and one under sudo must both create
#: their lock files in it, the group is whatever the rule names (and NVML runs need none), and
#: the sticky bit stops one user's run from deleting or replacing another's live state file.
SHARED_STATE_DIR = Path("/run/wattcap")
SHARED_STATE_MODE = 0o1777
#: Lock and state files are readable by all: flock needs only a read-only descriptor, and
#: `wattcap restore` (any user) must read every run's settings.
_FILE_MODE = 0o644
_fallback_noted: set[Path] = set()


def state_dir() -> Path:
    """Where state files and device locks live: WATTCAP_STATE_DIR, else the shared folder,
    else (it cannot be made) the user's own, with a one-line note."""
    root = os.environ.get("WATTCAP_STATE_DIR")
    if root:  # asked for by name: an unusable folder is an error, not a silent fallback
        path = Path(root)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise _unwritable(path, err) from None
        return path
    shared = _shared_dir(SHARED_STATE_DIR)
    if shared is not None:
        return shared
    path = cache_dir() / "state"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unwritable(path, err) from None
    if SHARED_STATE_DIR not in _fallback_noted:
        _fallback_noted.add(SHARED_STATE_DIR)
        print(f"wattcap: note: cannot use {SHARED_STATE_DIR}, so device locks and settings "
              f"found are kept in {path}, which runs as other users (sudo) do not see; "
              f"`sudo install -d -m 1777 {SHARED_STATE_DIR}` makes it", file=sys.stderr)
    return path


def _shared_dir(path: Path) -> Path | None:
    """`path`, made with SHARED_STATE_MODE if missing; None where it cannot be made or
    written."""
    try:
        path.mkdir()
        os.chmod(path, SHARED_STATE_MODE)  # mkdir's mode goes through the umask
    except FileExistsError:
        pass
    except OSError:
        return None
    return path if path.is_dir() and os.access(path, os.W_OK | os.X_OK) else None


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
        self._lock: IO[bytes] | None = None

    def acquire(self) -> None:
        """Take the device's lock, or DeviceError naming the run that holds it."""
        try:
            # a file object, not a bare descriptor: a claim dropped unreleased (a run "killed"
            # in a test) lets go of its lock when collected, as a dead process does
            handle = os.fdopen(_open_lock_file(self._lock_path), "rb", buffering=0)
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
        # A temporary name of this process's own: in the shared sticky folder another user's
        # leftover could be neither opened nor replaced.
        handle, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f"{self.path.stem}.",
                                       suffix=".tmp")
        try:
            os.fchmod(handle, _FILE_MODE)
            os.write(handle, found.to_json().encode())
            os.fsync(handle)
            os.close(handle)
            handle = -1
            os.replace(tmp, self.path)
        except OSError as err:
            if handle >= 0:
                os.close(handle)
            Path(tmp).unlink(missing_ok=True)
            if isinstance(err, PermissionError) and self.path.exists():
                raise _not_ours(self.path) from None
            raise _unwritable(self.path, err) from None

    def release(self, restored: bool) -> None:
        """Drop the lock; the state file goes only once the settings were put back
        (DeviceError, the lock dropped all the same, where the file is another user's)."""
        try:
            if restored:
                self.path.unlink(missing_ok=True)
        except PermissionError:
            raise _not_ours(self.path) from None
        finally:
            if self._lock is not None:
                fcntl.flock(self._lock, fcntl.LOCK_UN)
                self._lock.close()
                self._lock = None

    @property
    def held(self) -> bool:
        return self._lock is not None


def _open_lock_file(path: Path) -> int:
    """A read-only descriptor of the lock file, made (mode 0644) if missing. An existing one is
    opened without O_CREAT: in a sticky world-writable folder the kernel (fs.protected_regular)
    refuses O_CREAT on another user's file, even to root."""
    while True:
        try:
            return os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            pass
        try:
            handle = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        except FileExistsError:
            continue  # another run made it in between: open that one
        os.fchmod(handle, _FILE_MODE)  # the umask may have taken the others' read access
        return handle


def _not_ours(path: Path) -> DeviceError:
    return DeviceError(
        f"{path} was left by another user's run, and only that user or root may replace it",
        hint="`sudo wattcap restore` puts its settings back and removes it")


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
