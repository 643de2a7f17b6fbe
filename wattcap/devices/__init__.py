"""Device layer: one interface, several backends. `get_device` picks one by name."""

from __future__ import annotations

import os

from wattcap.devices.base import Device, PowerReading
from wattcap.devices.emulated import Drift, EmulatedDevice
from wattcap.devices.emulated_board import BoardState, draw_board_state
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotFoundError,
    DeviceOutOfMemoryError,
    DevicePermissionError,
    FrequencyNotFollowedError,
    SensorMissingError,
)
from wattcap.devices.spec import DeviceSpec, list_specs, load_spec

__all__ = [
    "Device", "DeviceError", "DeviceNotFoundError", "DeviceOutOfMemoryError",
    "DevicePermissionError", "DeviceSpec", "Drift", "EmulatedDevice",
    "FrequencyNotFollowedError", "PowerReading", "SensorMissingError", "get_device",
    "list_specs", "load_spec",
]


def get_device(
    name: str = "auto",
    *,
    power_mode: str | None = None,
    dry_run: bool = False,
    seed: int = 0,
    drift: Drift | None = None,
    sysfs_root: str | None = None,
) -> Device:
    """A device by name: "emulated:<spec>", "jetson", "nvml:<index>", or "auto".

    "auto" picks a Jetson if its devfreq GPU node exists, else the first NVML GPU, else the
    emulated Jetson Nano (and says so in the device's notes). The Jetson's sysfs is read under
    `sysfs_root` (default: env WATTCAP_SYSFS_ROOT, else "/": for containers that mount the
    host's /sys elsewhere, and for tests on fake trees).
    """
    if sysfs_root is None:
        sysfs_root = os.environ.get("WATTCAP_SYSFS_ROOT") or "/"
    if name.startswith("emulated"):
        _, _, spec = name.partition(":")
        spec, _, board = spec.partition(":")
        return EmulatedDevice(spec or "jetson-nano", power_mode=power_mode, seed=seed, drift=drift,
                              board=_board_state(spec or "jetson-nano", board, seed))
    if name == "jetson":
        from wattcap.devices.jetson import JetsonDevice

        return JetsonDevice(sysfs_root=sysfs_root, dry_run=dry_run)
    if name.startswith("nvml"):
        from wattcap.devices.nvml import NvmlDevice

        _, _, index = name.partition(":")
        return NvmlDevice(int(index or 0), dry_run=dry_run)
    if name == "auto":
        from wattcap.devices.jetson import discover_jetson
        from wattcap.devices.nvml import list_nvml_devices

        jetson = discover_jetson(sysfs_root, dry_run=dry_run)
        if jetson is not None:
            return jetson
        if list_nvml_devices():
            from wattcap.devices.nvml import NvmlDevice

            return NvmlDevice(0, dry_run=dry_run)
        return EmulatedDevice("jetson-nano", power_mode=power_mode, seed=seed, drift=drift)
    raise DeviceNotFoundError(
        f"unknown device {name!r}",
        hint="use auto, jetson, nvml:<index> or emulated:<"
        + "|".join(list_specs())
        + ">",
    )


def _board_state(spec: str, board: str, seed: int) -> BoardState | None:
    """The board of "emulated:<spec>:kind" (or nothing after the spec: today's deterministic
    board) or "emulated:<spec>:unkind[=SEED]" (a board state drawn for the run: SEED, else the
    run's seed; see `wattcap.devices.emulated_board`)."""
    kind, _, drawn = board.partition("=")
    if kind in ("", "kind") and not drawn:
        return None
    if kind == "unkind":
        try:
            return draw_board_state(spec, int(drawn) if drawn else seed)
        except ValueError:
            pass
    raise DeviceNotFoundError(
        f"unknown board {board!r} for emulated:{spec}",
        hint=f"use emulated:{spec} (a kind board), emulated:{spec}:unkind (a board state drawn "
        f"for the run) or emulated:{spec}:unkind=SEED")
