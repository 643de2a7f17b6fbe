"""The Jetson power monitors: the INA3221 (and INA238) rails found in sysfs, which of them
can be read, and which give the device power (the module input where there is one)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from wattcap.devices.sysfs_read import read_int, read_text

#: Rails that measure the whole module input, under the names the families use (Nano/TX2:
#: POM_5V_IN; Orin Nano/NX: VDD_IN; Xavier NX, TX2 NX, AGX Orin: VIN_SYS_5V0); where one
#: exists it is the device power. Matched without regard to case.
INPUT_RAIL_NAMES = ("POM_5V_IN", "VDD_IN", "VIN_SYS_5V0")


@dataclass(frozen=True)
class Rail:
    """One INA3221 channel: where to read it and how."""

    name: str
    #: "iio" (L4T 32 ina3221x), "hwmon" (L4T 35+ ina3221) or "ina238" (its hwmon power)
    layout: str
    directory: Path
    channel: int

    def read_power_w(self) -> float:
        """Power on this rail now, in watts."""
        if self.layout == "iio":
            return read_int(self.directory / f"in_power{self.channel}_input") / 1e3
        if self.layout == "ina238":  # hwmon power in microwatts
            return read_int(self.directory / f"power{self.channel}_input") / 1e6
        voltage_mv = read_int(self.directory / f"in{self.channel}_input")
        current_ma = read_int(self.directory / f"curr{self.channel}_input")
        return voltage_mv * current_ma / 1e6


def _i2c_devices(driver_dir: Path) -> list[Path]:
    # A driver directory also holds bind/unbind/uevent/module; devices are named <bus>-<addr>.
    if not driver_dir.is_dir():
        return []
    return sorted(p for p in driver_dir.iterdir() if re.fullmatch(r"\d+-[0-9a-fA-F]{4}", p.name))


def _iio_rails(device_dir: Path) -> list[Rail]:
    rails = []
    for iio_dir in sorted(device_dir.glob("iio:device*")):
        for label in sorted(iio_dir.glob("rail_name_*")):
            channel = int(label.name.rsplit("_", 1)[1])
            name = read_text(label)
            if name and (iio_dir / f"in_power{channel}_input").exists():
                rails.append(Rail(name, "iio", iio_dir, channel))
    return rails


def _hwmon_rails(device_dir: Path) -> list[Rail]:
    rails = []
    for hwmon_dir in sorted((device_dir / "hwmon").glob("hwmon*")):
        for label in sorted(hwmon_dir.glob("in*_label")):
            match = re.fullmatch(r"in(\d+)_label", label.name)
            if match is None:
                continue
            channel = int(match.group(1))
            name = read_text(label)
            # in7 is the sum of shunt voltages (no current of its own) and "NC" marks a channel
            # that is not connected: neither is a rail.
            if channel == 7 or name == "NC" or not name:
                continue
            if (hwmon_dir / f"curr{channel}_input").exists():
                rails.append(Rail(name, "hwmon", hwmon_dir, channel))
    return rails


def _ina238_rails(device_dir: Path) -> list[Rail]:
    rails = []
    for hwmon_dir in sorted((device_dir / "hwmon").glob("hwmon*")):
        if (hwmon_dir / "power1_input").exists():
            label = hwmon_dir / "label"
            name = read_text(label) if label.is_file() else f"INA238 {device_dir.name}"
            rails.append(Rail(name, "ina238", hwmon_dir, 1))
    return rails


def find_ina3221_rails(sysfs_root: str | Path = "/") -> list[Rail]:
    """All power-monitor rails under `sysfs_root`: INA3221 in both the L4T 32 and the L4T 35+
    layouts, and the INA238 of newer modules."""
    drivers = Path(sysfs_root) / "sys" / "bus" / "i2c" / "drivers"
    rails: list[Rail] = []
    for device_dir in _i2c_devices(drivers / "ina3221x"):
        rails += _iio_rails(device_dir)
    for device_dir in _i2c_devices(drivers / "ina3221"):
        rails += _hwmon_rails(device_dir)
    for device_dir in _i2c_devices(drivers / "ina238"):
        rails += _ina238_rails(device_dir)
    return rails


def readable_rails(rails: list[Rail]) -> tuple[list[Rail], list[str]]:
    """The rails that can be read now, and a note for each that cannot (left out)."""
    kept, notes = [], []
    for rail in rails:
        try:
            rail.read_power_w()
        except (OSError, ValueError) as exc:
            notes.append(f"rail {rail.name} unreadable, left out: {exc}")
            continue
        kept.append(rail)
    return kept, notes


def choose_power_rails(rails: list[Rail]) -> tuple[list[Rail], str, str]:
    """The rails whose sum is the device power, the name to record for them, and why."""
    for wanted in INPUT_RAIL_NAMES:
        for rail in rails:
            if rail.name.strip().upper() == wanted:
                return [rail], rail.name, f"{rail.name} measures the module's input"
    ina238 = [rail for rail in rails if rail.layout == "ina238"]
    if len(ina238) == 1:
        return ina238, ina238[0].name, "the module's INA238 measures its input"
    if not rails:
        return [], "none", "no readable power monitor"
    return (list(rails), "sum(" + ",".join(rail.name for rail in rails) + ")",
            f"no input rail ({', '.join(INPUT_RAIL_NAMES)}): the sum of every rail, which "
            "misses what no rail measures")
