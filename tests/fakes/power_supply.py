"""Fake Linux power-supply trees (`/sys/class/power_supply`), and a fake gauge for read errors.

Layout and units follow the kernel's documented ABI, Documentation/ABI/testing/sysfs-class-power
(and include/linux/power_supply.h: "All voltages, currents, charges, energies, time and
temperatures in µV, µA, µAh, µWh, seconds"): one folder per supply holding one value per file,
`type` (Battery, UPS, Mains, USB), `status` (Unknown, Charging, Discharging, Not charging,
Full), `present`, `online` (0/1, 2 for a programmable USB supply), `capacity` (0-100 %),
`voltage_now` (µV), `current_now` (µA; its sign differs between drivers), `power_now` (µW),
`energy_now`/`energy_full`/`energy_full_design` (µWh), `charge_now`/`charge_full`/
`charge_full_design` (µAh), `current_max`/`voltage_max` and `usb_type` for USB supplies. As on
a real system, `class/power_supply/<NAME>` is a symlink to the device's folder under
`devices/`, so a supply that goes away (a battery pulled, a driver unbound) leaves nothing
behind the class entry.

Plain files cannot fail the way a fuel gauge that stopped answering does (EIO on read), so
`FakeGauge` (installed with pytest's monkeypatch) stands in for the kernel at the module's one
read function (`wattcap.devices.power_supply_cap.read_sysfs_text`). The readings are
illustrative: plausible for a laptop pack, a phone-size Li-ion cell, a USB-C PD charger and a
UPS, not copied from one.
"""

from __future__ import annotations

import errno
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class FakeSupply:
    """One supply's folder; `set` changes what the kernel would report."""

    link: Path
    folder: Path

    @property
    def name(self) -> str:
        return self.link.name

    def set(self, **attributes: int | str) -> None:
        """Write attributes (integers in the kernel's micro-units, or text)."""
        for attribute, value in attributes.items():
            (self.folder / attribute).write_text(f"{value}\n")

    def remove(self, attribute: str) -> None:
        """The driver stops exposing one attribute."""
        (self.folder / attribute).unlink()

    def vanish(self) -> None:
        """The device goes away (its class entry dangles, as after a driver unbind)."""
        shutil.rmtree(self.folder)


def add_supply(sys_root: Path, name: str, device_path: str, **attributes: int | str
               ) -> FakeSupply:
    """A supply at `<sys_root>/devices/<device_path>/power_supply/<name>`, linked from
    `<sys_root>/class/power_supply/<name>`."""
    folder = sys_root / "devices" / device_path / "power_supply" / name
    folder.mkdir(parents=True)
    link = sys_root / "class" / "power_supply" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(folder, target_is_directory=True)
    supply = FakeSupply(link, folder)
    supply.set(**attributes)
    return supply


def class_root(sys_root: Path) -> Path:
    """The folder to give as the power-supply root."""
    return sys_root / "class" / "power_supply"


def laptop(sys_root: Path, energy_now_wh: float = 30.0, power_w: float = 9.5,
           status: str = "Discharging", name: str = "BAT0") -> tuple[FakeSupply, FakeSupply]:
    """An ACPI laptop battery reporting energy and power (µWh, µW) and its AC adapter (Mains):
    a 57 Wh pack that has worn to 50 Wh."""
    battery = add_supply(
        sys_root, name, f"LNXSYSTM:00/LNXSYBUS:00/PNP0C0A:0{name[-1]}",
        type="Battery", status=status, present=1, technology="Li-ion", cycle_count=212,
        voltage_min_design=11_400_000, voltage_now=12_100_000, power_now=round(power_w * 1e6),
        energy_full_design=57_000_000, energy_full=50_000_000,
        energy_now=round(energy_now_wh * 1e6), capacity=round(100 * energy_now_wh / 50),
        capacity_level="Normal", model_name="5B10W13930", manufacturer="SMP")
    adapter = add_supply(sys_root, "AC", "LNXSYSTM:00/LNXSYBUS:00/ACPI0003:00", type="Mains",
                         online=1 if status in ("Charging", "Full") else 0)
    return battery, adapter


def fuel_gauge(sys_root: Path, charge_now_mah: float = 2000.0, current_ma: float = -1200.0,
               voltage_v: float = 3.8, status: str = "Discharging") -> FakeSupply:
    """A fuel gauge (bq27xxx-style, on phones and single-board computers) reporting charge,
    current and voltage only (µAh, µA, µV): no energy_now, no power_now; the current is
    negative while discharging, as these drivers report it. A 4000 mAh cell."""
    return add_supply(
        sys_root, "bq27546-0", "platform/soc/78b6000.i2c/i2c-1/1-0055",
        type="Battery", status=status, present=1, technology="Li-ion",
        voltage_now=round(voltage_v * 1e6), current_now=round(current_ma * 1e3),
        charge_full_design=4_200_000, charge_full=4_000_000,
        charge_now=round(charge_now_mah * 1e3), capacity=round(100 * charge_now_mah / 4000),
        health="Good")


def usb_pd(sys_root: Path, voltage_v: float = 20.0, current_a: float = 2.25) -> FakeSupply:
    """A USB-C PD source feeding the board (a UCSI port partner): type USB, online, its
    negotiated voltage and current (µV, µA) and contract maximum."""
    return add_supply(
        sys_root, "ucsi-source-psy-USBC000:001", "platform/USBC000:00/typec/port0",
        type="USB", online=1, usb_type="C [PD] PD_PPS", scope="System",
        voltage_min=5_000_000, voltage_max=20_000_000, voltage_now=round(voltage_v * 1e6),
        current_max=3_000_000, current_now=round(current_a * 1e6))


def ups(sys_root: Path, capacity_percent: int = 80, status: str = "Discharging") -> FakeSupply:
    """An uninterruptible supply reporting its charge as a percentage only (type UPS)."""
    return add_supply(sys_root, "ups0", "platform/ups0", type="UPS", status=status, present=1,
                      capacity=capacity_percent)


@dataclass
class FakeGauge:
    """The kernel's side of a read: attributes under `failing` raise `error` (EIO: the gauge
    stopped answering on its bus) when read."""

    failing: set[Path] = field(default_factory=set)
    error: int = errno.EIO
    reads: int = 0
    #: from this many reads on, every read fails (a gauge that stops answering mid-run)
    fail_from_read: int | None = None

    def fail(self, supply: FakeSupply, *attributes: str) -> None:
        for attribute in attributes:
            self.failing.add(supply.folder / attribute)

    def heal(self) -> None:
        self.failing.clear()

    def read(self, path: Path) -> str | None:
        self.reads += 1
        dead = self.fail_from_read is not None and self.reads >= self.fail_from_read
        if dead or path.resolve() in {p.resolve() for p in self.failing}:
            raise OSError(self.error, "Input/output error", str(path))
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            return None

