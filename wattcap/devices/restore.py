"""`wattcap restore`: put back the settings runs left changed (killed, OOM, power loss)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from wattcap.devices import get_device
from wattcap.devices.errors import DeviceError
from wattcap.devices.found_state import DeviceClaim, FoundSettings, state_files


@dataclass(frozen=True)
class Restored:
    """One state file handled: the device, its settings, and what happened."""

    key: str
    settings: dict[str, object]
    done: bool
    message: str


def _owner_uid(path: Path) -> int:
    try:
        return path.stat().st_uid
    except OSError:
        return os.geteuid()  # gone or unreadable: FoundSettings.load says what is wrong


def restore_left_settings(sysfs_root: str | None = None) -> list[Restored]:
    """Every state file in the state folder: the device opened, its lock taken (a live run
    keeps its device), the settings found put back, the file removed."""
    return [_restore_one(path, sysfs_root) for path in state_files()]


def _restore_one(path: Path, sysfs_root: str | None) -> Restored:
    # The state folder is writable by every user (so that every run can leave its state):
    # a file neither root's nor ours could have been planted there to make this restore,
    # perhaps run as root, set what it says. It is named, never applied.
    owner = _owner_uid(path)
    if owner not in (0, os.geteuid()):
        return Restored(path.stem, {}, False,
                        f"{path} belongs to uid {owner}, neither root nor you: not applied "
                        "(run `wattcap restore` as that user, or check the file and delete it)")
    try:
        found = FoundSettings.load(path)
    except DeviceError as err:
        return Restored(path.stem, {}, False, err.message)
    try:
        device = get_device(found.device, sysfs_root=sysfs_root)
    except (DeviceError, KeyError, ValueError) as err:
        return Restored(found.key, found.settings, False, f"cannot open {found.device}: {err}")
    try:
        if device.device_key() != found.key:
            return Restored(found.key, found.settings, False,
                            f"{found.device} is now {device.device_key()}, not {found.key}: "
                            "not touched (set CUDA_VISIBLE_DEVICES as the run had it?)")
        claim = DeviceClaim(found.key)
        try:
            claim.acquire()
        except DeviceError as err:
            return Restored(found.key, found.settings, False, err.message)
        try:
            device.apply_found_settings(found.settings)
        except DeviceError as err:
            claim.release(restored=False)
            return Restored(found.key, found.settings, False, err.message)
        done = f"put back what pid {found.pid} changed on {found.created_at}"
        try:
            claim.release(restored=True)
        except DeviceError as err:  # put back, but the file is another user's to remove
            return Restored(found.key, found.settings, True, f"{done}; {err.message}")
        return Restored(found.key, found.settings, True, done)
    finally:
        close = getattr(device, "close", None)
        if callable(close):
            close()
