"""The Jetson power monitors: the INA3221 (and INA238) rails found in sysfs, and which of them
give the device power.

The rule, the same on every family:

1. the module's input rail where the board has one: ``VDD_IN`` (Xavier NX, TX2 NX, TX2, Orin
   Nano/NX), ``POM_5V_IN`` (Nano), or the INA238 on the module input of Jetson Thor;
2. else the sum of the module's rails, on the boards that have no input rail (AGX Xavier: GPU,
   CPU, SOC, CV, VDDRQ, SYS5V; AGX Orin: VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0), leaving out a
   rail NVIDIA documents as already inside another summed rail (AGX Orin's VDDQ_VDD2_1V8AO is
   part of VIN_SYS_5V0), and never counting a disconnected (``NC``) or disabled channel or the
   INA3221's sum-of-shunt-voltages channel.

``VIN_SYS_5V0`` is the AGX Orin's 5 V system rail, not its input: taken alone it would show
a fifth of the module's power. A power source is never quietly partial: when the input rail,
or a rail a sum needs, cannot be read, `PowerSource.missing` names it and the device refuses
to report a power (frequency control still works).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from wattcap.devices.sysfs_read import read_int, read_text

#: Rails that measure the whole module input, under the names the families use (Nano:
#: POM_5V_IN; TX2, TX2 NX, Xavier NX, Orin Nano/NX: VDD_IN). Matched without regard to case.
INPUT_RAIL_NAMES = ("VDD_IN", "POM_5V_IN")

#: Boards with no input rail, by family, with the rails whose sum is the module's power.
SUM_BOARDS: dict[str, tuple[str, ...]] = {
    "AGX Xavier": ("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"),
    "AGX Orin": ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"),
}

#: Rails measured inside another rail of the same board (rail -> the rail that contains it):
#: adding them to the sum would count their power twice. NVIDIA's Jetson Linux developer guide
#: (Orin power-monitor table): "VDDQ_VDD2_1V8AO power is also included in VIN_SYS_5V0 power".
NESTED_RAILS = {"VDDQ_VDD2_1V8AO": "VIN_SYS_5V0"}

RULE_INPUT = "input rail"
RULE_SUM = "sum of the module's rails"
RULE_NONE = "no power monitor"


@dataclass(frozen=True)
class Rail:
    """One power-monitor channel: where to read it and how."""

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


@dataclass(frozen=True)
class PowerSource:
    """Which rails give the device power, by which rule, and what is wrong with them."""

    rails: tuple[Rail, ...]
    #: the name profiles record as the sensor: the input rail's, or ``sum(A,B,...)``
    name: str
    #: RULE_INPUT, RULE_SUM or RULE_NONE
    rule: str
    reason: str
    #: rails the rule needs that cannot be read (or are absent): the power would read low
    missing: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for probes, notes and records: the rule, the rails, what is missing."""
        text = f"{self.rule}: {self.name} ({self.reason})"
        if self.missing:
            text += f"; UNREADABLE: {', '.join(self.missing)} (power not reported)"
        return text


def _i2c_devices(driver_dir: Path) -> list[Path]:
    # A driver directory also holds bind/unbind/uevent/module; devices are named <bus>-<addr>.
    if not driver_dir.is_dir():
        return []
    return sorted(p for p in driver_dir.iterdir() if re.fullmatch(r"\d+-[0-9a-fA-F]{4}", p.name))


def _not_a_rail(name: str) -> bool:
    # "NC" marks a channel that is not connected; an empty label, a channel with no rail.
    return not name or name.strip().upper() == "NC"


def _iio_rails(device_dir: Path) -> list[Rail]:
    rails = []
    for iio_dir in sorted(device_dir.glob("iio:device*")):
        for label in sorted(iio_dir.glob("rail_name_*")):
            channel = int(label.name.rsplit("_", 1)[1])
            name = read_text(label)
            if not _not_a_rail(name):
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
            # in7 is the sum of shunt voltages (no current of its own), not a rail.
            if channel == 7 or _not_a_rail(name):
                continue
            enable = hwmon_dir / f"in{channel}_enable"
            if enable.is_file() and read_text(enable) == "0":
                continue  # disabled in the device tree: the driver reads nothing there
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
    layouts, and the INA238 of newer modules; not-connected and disabled channels are not
    rails."""
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
    """The rails that can be read now, and a note for each that cannot."""
    kept, notes = [], []
    for rail in rails:
        try:
            rail.read_power_w()
        except (OSError, ValueError) as exc:
            notes.append(f"rail {rail.name} unreadable: {exc}")
            continue
        kept.append(rail)
    return kept, notes


def choose_power_source(rails: list[Rail], readable: list[Rail]) -> PowerSource:
    """Apply the rule (module docstring) to every rail found (`rails`), of which `readable`
    can be read now: a rail the rule needs and cannot read is named in `missing`, never
    dropped from a sum in silence."""
    unreadable = {rail.name for rail in rails} - {rail.name for rail in readable}
    by_name = {rail.name.strip().upper(): rail for rail in rails}
    for wanted in INPUT_RAIL_NAMES:
        rail = by_name.get(wanted)
        if rail is not None:
            return PowerSource((rail,), rail.name, RULE_INPUT,
                               f"{rail.name} measures the module's input",
                               tuple(sorted({rail.name} & unreadable)))
    ina238 = [rail for rail in rails if rail.layout == "ina238"]
    if len(ina238) == 1:
        return PowerSource((ina238[0],), ina238[0].name, RULE_INPUT,
                           "the module's INA238 measures its input (VIN)",
                           tuple(sorted({ina238[0].name} & unreadable)))
    if not rails:
        return PowerSource((), "none", RULE_NONE, "no power monitor found")
    summed = [rail for rail in rails
              if NESTED_RAILS.get(rail.name.strip().upper(), "") not in by_name]
    nested = [rail.name for rail in rails if rail not in summed]
    for board, needed in SUM_BOARDS.items():
        if not set(needed) & set(by_name):
            continue
        absent = [name for name in needed if name not in by_name]
        reason = f"{board} has no input rail: its module rails summed"
        if nested:
            reason += (f", leaving out {', '.join(nested)} (inside "
                       f"{', '.join(sorted({NESTED_RAILS[n.upper()] for n in nested}))})")
        break
    else:
        absent = []
        reason = ("no input rail known for this board: the sum of every rail, which misses "
                  "what no rail measures")
    missing = tuple(sorted(absent + [r.name for r in summed if r.name in unreadable]))
    return PowerSource(tuple(summed), "sum(" + ",".join(r.name for r in summed) + ")",
                       RULE_SUM, reason, missing)
