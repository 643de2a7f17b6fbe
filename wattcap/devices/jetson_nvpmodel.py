"""Jetson power modes: the modes nvpmodel defines in /etc/nvpmodel.conf and the active one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from wattcap.core.power_mode import find_power_mode, list_power_modes, power_mode_label
from wattcap.devices.errors import DeviceError, DeviceNotSupportedError
from wattcap.devices.sysfs_read import read_text


@dataclass(frozen=True)
class PowerMode:
    """One nvpmodel mode: id, name, the GPU frequency cap it sets (None: uncapped) and the GPU
    TPC power-gating mask it sets (None: the mode leaves it alone): nvpmodel needs a reboot to
    switch between modes whose masks differ."""

    mode_id: int
    name: str
    gpu_max_hz: int | None
    tpc_pg_mask: str | None = None


def read_nvpmodel(sysfs_root: str | Path = "/") -> tuple[dict[int, PowerMode], int | None]:
    """The modes of ``/etc/nvpmodel.conf`` and the id of the active one (None if unknown)."""
    root = Path(sysfs_root)
    modes: dict[int, PowerMode] = {}
    default_id: int | None = None
    conf = root / "etc" / "nvpmodel.conf"
    if conf.is_file():
        current: tuple[int, str] | None = None
        gpu_max_hz: int | None = None
        tpc_mask: str | None = None

        def close_block() -> None:
            if current is not None:
                modes[current[0]] = PowerMode(current[0], current[1], gpu_max_hz, tpc_mask)

        for raw in conf.read_text(errors="replace").splitlines():
            line = raw.split("#", 1)[0].strip()
            block = re.fullmatch(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=(\S+)\s*>", line)
            if block:
                close_block()
                current, gpu_max_hz = (int(block.group(1)), block.group(2)), None
                tpc_mask = None
                continue
            default = re.fullmatch(r"<\s*PM_CONFIG\s+DEFAULT=(\d+)\s*>", line)
            if default:
                close_block()
                current, default_id = None, int(default.group(1))
                continue
            if line.startswith("<"):
                close_block()
                current = None
                continue
            fields = line.split()
            if current is not None and fields[:2] == ["TPC_POWER_GATING", "TPC_PG_MASK"] \
                    and len(fields) >= 3:
                tpc_mask = fields[2]
                continue
            if current is not None and fields[:2] == ["GPU", "MAX_FREQ"] and len(fields) >= 3:
                try:
                    value = int(fields[2])
                except ValueError:
                    continue  # a hand-edited line we cannot read: treat the mode as uncapped
                # -1 (and 0) mean "no cap" in the stock configurations.
                gpu_max_hz = value if value > 0 else None
        close_block()
    active_id = default_id
    status = root / "var" / "lib" / "nvpmodel" / "status"
    if status.is_file():
        match = re.search(r"pmode:(\d+)", read_text(status))
        if match:
            active_id = int(match.group(1))
    return modes, active_id


def require_active_mode(board: str, modes: dict[int, PowerMode], active_id: int | None,
                        wanted: str) -> None:
    """Accept `wanted` (a mode's name, in any case, or its nvpmodel id; "15W" names MODE_15W,
    `wattcap.core.power_mode`) where it is the board's active mode; refuse it otherwise,
    saying which mode the board is in and how to switch it. wattcap never switches a board's
    mode to run in one (`--knob power-mode` switches, to profile them all)."""
    names = {mode.mode_id: mode.name for mode in modes.values()}
    if not names:
        raise DeviceNotSupportedError(
            f"{board}: no power modes to find {wanted!r} among (no readable /etc/nvpmodel.conf)",
            hint="check `nvpmodel -q`; leave out the power mode to run in the board's own")
    mode_id = find_power_mode(wanted, names)
    if mode_id is None:
        raise DeviceError(f"{board} has no power mode {wanted!r}; its modes (/etc/nvpmodel.conf):"
                          f" {list_power_modes(names)}",
                          hint="give one of them by name or by id (MAXN or 0)")
    if mode_id == active_id:
        return
    active = ("a mode that cannot be read (no /var/lib/nvpmodel/status)" if active_id is None
              else f"power mode {power_mode_label(active_id, names)}")
    raise DeviceError(
        f"the board is in {active}, not in power mode {power_mode_label(mode_id, names)}: "
        "wattcap does not switch the board's power mode to run in one",
        hint=f"switch it with `sudo nvpmodel -m {mode_id}` and run again; or measure every "
        "mode with --knob power-mode (it switches them and puts yours back)")
