"""Device layer: one interface, several backends. `get_device` picks one by name."""

from __future__ import annotations

import difflib
import warnings

from wattcap.devices.base import Device, PowerReading
from wattcap.devices.emulated import Drift, EmulatedDevice
from wattcap.devices.emulated_board import BoardState, draw_board_state
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotFoundError,
    DeviceNotSupportedError,
    DeviceOutOfMemoryError,
    DevicePermissionError,
    FrequencyNotFollowedError,
    SensorMissingError,
)
from wattcap.devices.spec import DeviceSpec, list_specs, load_spec
from wattcap.devices.sysfs_read import resolve_sysfs_root

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

    `power_mode` (a name in any case, or an nvpmodel id) is the mode to run in: an emulated
    device is made in it; a Jetson must already be in it, and is refused otherwise (wattcap
    never switches a board's mode for this; `Device.require_power_mode`); a GPU, which has no
    power modes, refuses any.
    """
    sysfs_root = resolve_sysfs_root(sysfs_root)
    if name == "emulated" or name.startswith("emulated:"):
        _, _, spec = name.partition(":")
        spec, _, board = spec.partition(":")
        if name != "emulated" and not spec:
            raise _unknown(name)
        spec = spec or "jetson-nano"
        return EmulatedDevice(spec, power_mode=power_mode, seed=seed, drift=drift,
                              board=_board_state(spec, board, seed))
    if name == "jetson":
        from wattcap.devices.jetson import JetsonDevice

        return _in_power_mode(JetsonDevice(sysfs_root=sysfs_root, dry_run=dry_run), power_mode)
    if name == "nvml" or name.startswith("nvml:"):
        _no_power_modes(name, power_mode)
        from wattcap.devices.nvml import NvmlDevice

        return NvmlDevice(_nvml_index(name), dry_run=dry_run)
    if name == "auto":
        from wattcap.devices.jetson import discover_jetson
        from wattcap.devices.nvml import list_nvml_devices

        jetson = discover_jetson(sysfs_root, dry_run=dry_run)
        if jetson is not None:
            return _in_power_mode(jetson, power_mode)
        if list_nvml_devices():
            from wattcap.devices.nvml import NvmlDevice

            _no_power_modes("the NVIDIA GPU --device auto found (nvml:0)", power_mode)
            return NvmlDevice(0, dry_run=dry_run)
        # said out loud: a plan for an emulated Nano is no plan for the machine in front of you
        warnings.warn("--device auto found no Jetson and no NVIDIA GPU here: using the "
                      "emulated Jetson Nano (emulated:jetson-nano)", stacklevel=2)
        return EmulatedDevice("jetson-nano", power_mode=power_mode, seed=seed, drift=drift)
    raise _unknown(name)


def _in_power_mode(device: Device, power_mode: str | None) -> Device:
    """`device`, where it runs in `power_mode` (None: whichever it is in); else the refusal."""
    if power_mode is not None:
        device.require_power_mode(power_mode)
    return device


def _no_power_modes(name: str, power_mode: str | None) -> None:
    """Refuse a power mode for a GPU, before anything is opened: it has none (NVML)."""
    if power_mode is not None:
        raise DeviceNotSupportedError(
            f"{name} has no nvpmodel power modes, so power mode {power_mode!r} cannot be run "
            "in: power modes are a Jetson's",
            hint="leave out the power mode; a GPU's knob is its power limit (profile it with "
            "--knob power-limit)")


def _nvml_index(name: str) -> int:
    """The GPU index of "nvml" or "nvml:<index>"."""
    _, _, index = name.partition(":")
    try:
        value = int(index or 0)
    except ValueError:
        value = -1
    if value < 0:
        raise DeviceNotFoundError(f"unknown device {name!r}: the GPU index after nvml: is a "
                                  "number", hint="use nvml:0 (the first GPU), nvml:1, ...")
    return value


def _unknown(name: str) -> DeviceNotFoundError:
    """An unknown device name, with the closest known one where a typo is likely (a bare
    emulated spec, 'emulated-h100-sxm')."""
    specs = list_specs()
    known = {"auto": "auto", "jetson": "jetson", "nvml": "nvml:0"}
    known |= {f"emulated:{spec}": f"emulated:{spec}" for spec in specs}
    known |= {spec: f"emulated:{spec}" for spec in specs}
    close = difflib.get_close_matches(name.lower(), list(known), n=1, cutoff=0.6)
    guess = f"did you mean {known[close[0]]}? " if close else ""
    return DeviceNotFoundError(
        f"unknown device {name!r}",
        hint=f"{guess}use auto, jetson, nvml:<index> or emulated:<{'|'.join(specs)}>")


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
