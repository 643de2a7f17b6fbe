"""A cap from a real battery or supply: the operating system's power-supply class.

Linux reports every battery, charger and adapter under `/sys/class/power_supply/<NAME>/`
(Documentation/ABI/testing/sysfs-class-power). The kernel's units are micro-units: power in
µW, current in µA, voltage in µV, energy in µWh, charge in µAh; `capacity` is a percentage.
`PowerSupplyCap` reads, once per `period_s` device seconds:

* the supply's draw: `power_now` (µW), else `current_now` (µA) × `voltage_now` (µV) (the sign
  of the current differs between drivers, so its magnitude is used);
* the energy left: `energy_now`/`energy_full` (µWh), else `charge_now`/`charge_full` (µAh)
  × `voltage_now`, else `capacity` (%) alone (enough for a reserve in %, not for a deadline);
* `status` (Charging, Discharging, Full, Not charging, Unknown), `type` (Battery, UPS, Mains,
  USB, ...), `online` and `present`.

The cap follows a policy the user states (all optional, at least one of the first three):

* `hours=H`: finish by H hours after the run started. The cap is the energy above the reserve
  spread over the time left, `(energy_now − reserve) / time_left`, less what the rest of the
  system draws (see below). Once the deadline has passed only the reserve limits the cap;
* `reserve=P%` (of the full battery) or `reserve_wh=WH`: keep this much. At or under the
  reserve the cap is 0 W: training pauses (the device idles, below every configuration), and
  resumes if a charger lifts the battery above the reserve; `max_pause_s` bounds the wait;
* `max_w=W`: a ceiling at every moment;
* `base_w=W`: what the rest of the system draws from the supply (see below);
* `period_s=S` (default 5 s): how often the files are read.

**The supply feeds more than the module.** A battery's draw (`power_now`) is the whole
system's: carrier board, display, fans, radios, converter losses. The cap applies to the
module's rail, which the device's sensor measures and is less. To finish by the deadline the
rest must come out of the budget: it is `base_w` if given, else estimated at each read while
discharging as the supply's draw minus the module's mean draw since the previous read (told by
`record_energy`), never below 0 (0 until the first estimate).

**On external power** (status Charging, Full or Not charging: an adapter feeds the system;
or a Mains/USB supply named explicitly) the battery sets no energy limit: the cap is `max_w`,
or no cap without it. A Mains/USB supply that states what it may deliver (`voltage_max` x
`current_max`: a USB-PD contract, the kernel's sysfs-class-power ABI) caps the module at that
contract less the rest of the system's draw (`base_w`; nothing subtracted without it), or
`max_w` where that is lower. A warning says so when that starts and ends.

**A supply that stops reporting** (its folder or a file vanishes, a read error such as EIO,
an empty file, a value that is not a number or out of range, `present` 0) keeps the last good
reading, with one warning, for `stale_periods` periods (default 3); after that `cap_w` raises
`CapSourceError`: the run must not go on under a cap nobody can know.

The reading's time is the device clock `now_s` (seconds since the run started), as for every
cap source; only across a resume is the wall clock used, so that a resumed run keeps the
original deadline (the time the process was down counts against it).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wattcap.devices.cap_source import CapSource, CapSourceError

#: where Linux lists its power supplies
DEFAULT_POWER_SUPPLY_ROOT = "/sys/class/power_supply"
#: overrides the root (tests, a container with sysfs mounted elsewhere)
POWER_SUPPLY_ROOT_ENV = "WATTCAP_POWER_SUPPLY_ROOT"
#: statuses that mean an adapter feeds the system, so the battery sets no energy limit
EXTERNAL_POWER_STATUSES = ("Charging", "Full", "Not charging")
#: supply types that store energy (the others deliver power from outside)
ENERGY_STORE_TYPES = ("Battery", "UPS")

_MICRO = 1e-6
_PICO = 1e-12  # µA × µV = pW; µAh × µV = pWh


def power_supply_root(root: str | Path | None = None) -> Path:
    """The power-supply folder: `root`, else $WATTCAP_POWER_SUPPLY_ROOT, else the system's."""
    if root is not None:
        return Path(root)
    return Path(os.environ.get(POWER_SUPPLY_ROOT_ENV) or DEFAULT_POWER_SUPPLY_ROOT)


def read_sysfs_text(path: Path) -> str | None:
    """One attribute's text, stripped; None if the file does not exist. The one place this
    module reads the kernel (tests inject read errors here). Raises OSError on a read error
    (EIO from a fuel gauge that stopped answering, ENODEV, ...)."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class SupplyReading:
    """What one read of a supply's folder saw, in SI units (W, Wh, V; fractions in [0, 1])."""

    name: str
    type: str
    status: str | None
    online: bool | None
    present: bool | None
    #: the whole supply's draw (or charge) power, W; None when it reports none
    power_w: float | None
    energy_wh: float | None
    energy_full_wh: float | None
    #: `capacity` / 100
    capacity_fraction: float | None
    #: what the supply may deliver at most: `voltage_max` x `current_max` (a USB-PD contract,
    #: an adapter's rating); None where it reports no such limit
    contract_w: float | None = None

    @property
    def stores_energy(self) -> bool:
        """A battery or UPS (it can run out), not an adapter."""
        return self.type in ENERGY_STORE_TYPES

    @property
    def on_external_power(self) -> bool:
        """An adapter feeds the system: a battery charging, full or held, or an adapter."""
        if not self.stores_energy:
            return True
        return self.status in EXTERNAL_POWER_STATUSES


def _number(folder: Path, attribute: str, low: float = 0.0, high: float = math.inf,
            signed: bool = False) -> float | None:
    text = read_sysfs_text(folder / attribute)
    if text is None:
        return None
    try:
        value = float(int(text))
    except ValueError:
        raise CapSourceError(f"{folder / attribute}: expected an integer, got {text!r}") from None
    if signed:
        value = abs(value)
    if not low <= value <= high:
        raise CapSourceError(f"{folder / attribute}: {text} is out of range "
                             f"[{low:g}, {high:g}]")
    return value


def read_supply(folder: Path) -> SupplyReading:
    """Read one supply's folder (see the module docstring). Raises CapSourceError when the
    folder is gone, a file cannot be read, a value is nonsense, or `present` is 0."""
    if not folder.is_dir():
        raise CapSourceError(f"{folder}: the power supply is gone (no such folder)")
    try:
        kind = read_sysfs_text(folder / "type") or "Unknown"
        status = read_sysfs_text(folder / "status")
        if status == "":
            raise CapSourceError(f"{folder / 'status'}: empty")
        present = _number(folder, "present", high=1)
        online = _number(folder, "online", high=2)  # 2: a programmable USB supply online
        if present == 0:
            raise CapSourceError(f"{folder}: present is 0 (the battery was removed or its "
                                 "gauge stopped reporting)")
        voltage_uv = _number(folder, "voltage_now")
        power_uw = _number(folder, "power_now", signed=True)
        if power_uw is not None:
            power_w: float | None = power_uw * _MICRO
        else:
            current_ua = _number(folder, "current_now", signed=True)
            power_w = None if current_ua is None or voltage_uv is None else \
                current_ua * voltage_uv * _PICO
        energy_uwh = _number(folder, "energy_now")
        full_uwh = _number(folder, "energy_full")
        if energy_uwh is not None:
            energy_wh: float | None = energy_uwh * _MICRO
            full_wh = None if full_uwh is None else full_uwh * _MICRO
        else:
            charge_uah = _number(folder, "charge_now")
            full_uah = _number(folder, "charge_full")
            # charge × the present voltage: the energy the pack holds at this voltage
            energy_wh = None if charge_uah is None or voltage_uv is None else \
                charge_uah * voltage_uv * _PICO
            full_wh = None if full_uah is None or voltage_uv is None else \
                full_uah * voltage_uv * _PICO
        capacity = _number(folder, "capacity", high=100)
        voltage_max_uv = _number(folder, "voltage_max")
        current_max_ua = _number(folder, "current_max")
    except OSError as err:
        raise CapSourceError(f"{folder}: cannot read the power supply ({err})") from None
    if full_wh is not None and full_wh <= 0:
        full_wh = None  # a gauge that has not learnt its capacity yet reports 0
    return SupplyReading(
        name=folder.name, type=kind, status=status,
        online=None if online is None else online > 0,
        present=None if present is None else present > 0,
        power_w=power_w, energy_wh=energy_wh, energy_full_wh=full_wh,
        capacity_fraction=None if capacity is None else capacity / 100.0,
        contract_w=None if voltage_max_uv is None or current_max_ua is None or kind in
        ENERGY_STORE_TYPES else voltage_max_uv * current_max_ua * _PICO)


def list_supplies(root: Path) -> list[tuple[str, str, bool | None]]:
    """(name, type, present) of every supply under `root`, by name; unreadable ones are listed
    with type '?'."""
    if not root.is_dir():
        return []
    found: list[tuple[str, str, bool | None]] = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        try:
            kind = read_sysfs_text(folder / "type") or "Unknown"
            present_text = read_sysfs_text(folder / "present")
        except OSError:
            found.append((folder.name, "?", None))
            continue
        found.append((folder.name, kind, None if present_text is None else present_text == "1"))
    return found


def _found_text(found: list[tuple[str, str, bool | None]]) -> str:
    if not found:
        return "no power supplies"
    return ", ".join(f"{name} ({kind}{', not present' if present is False else ''})"
                     for name, kind, present in found)


def find_supply(root: Path, name: str | None) -> Path:
    """The folder of supply `name`, or without a name the one present battery; a clear error
    listing what was found when there is none or several."""
    found = list_supplies(root)
    if name is not None:
        folder = root / name
        if not folder.is_dir():
            raise CapSourceError(f"power supply {name!r} not found under {root}; found: "
                                 f"{_found_text(found)}")
        return folder
    batteries = [n for n, kind, present in found if kind == "Battery" and present is not False]
    if len(batteries) == 1:
        return root / batteries[0]
    which = "no battery" if not batteries else f"{len(batteries)} batteries"
    raise CapSourceError(
        f"{which} under {root} (found: {_found_text(found)}); name the supply: "
        f"battery:sysfs:NAME{',...' if batteries else ''}",
        hint=f"set ${POWER_SUPPLY_ROOT_ENV} to read another folder")


class PowerSupplyCap(CapSource):
    """A cap from a real battery or supply, read from the power-supply class (see the module
    docstring for the files, units and policy).

    Args: `name` of the supply folder (None: the one present battery); `hours` to finish by
    after the run started; `reserve_fraction` (0.2 for 20 %) or `reserve_wh` to keep;
    `max_power_w` ceiling; `base_load_w` the rest of the system's draw (None: estimated);
    `period_s` between reads; `stale_periods` a reading is kept when the supply stops
    reporting; `root` of the power-supply class (None: $WATTCAP_POWER_SUPPLY_ROOT or
    /sys/class/power_supply); `wall_clock` (seconds) bridges a resume.
    """

    def __init__(self, name: str | None = None, *, hours: float | None = None,
                 reserve_fraction: float | None = None, reserve_wh: float | None = None,
                 max_power_w: float | None = None, base_load_w: float | None = None,
                 period_s: float = 5.0, stale_periods: int = 3, root: str | Path | None = None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        where = "battery:sysfs"
        for label, value, zero_ok in (("hours", hours, False), ("period_s", period_s, False),
                                      ("reserve_wh", reserve_wh, True),
                                      ("max_w", max_power_w, True), ("base_w", base_load_w, True)):
            if value is not None and not (math.isfinite(value) and (
                    value > 0 or (zero_ok and value == 0))):
                raise CapSourceError(f"{where}: {label} must be {'≥' if zero_ok else '>'} 0, "
                                     f"got {value:g}")
        if reserve_fraction is not None and not 0.0 <= reserve_fraction < 1.0:
            raise CapSourceError(f"{where}: reserve must be in [0 %, 100 %), got "
                                 f"{100 * reserve_fraction:g} %")
        if reserve_fraction is not None and reserve_wh is not None:
            raise CapSourceError(f"{where}: give reserve=P% or reserve_wh=WH, not both")
        if hours is None and reserve_fraction is None and reserve_wh is None \
                and max_power_w is None:
            raise CapSourceError(f"{where}: no policy; give hours=H (finish by), reserve=P% or "
                                 "reserve_wh=WH (keep), and/or max_w=W")
        if stale_periods < 1:
            raise CapSourceError(f"{where}: stale_periods must be ≥ 1, got {stale_periods}")
        self.root = power_supply_root(root)
        self.folder = find_supply(self.root, name)
        self.name = self.folder.name
        self.hours = hours
        self.reserve_fraction = reserve_fraction
        self.reserve_wh = reserve_wh
        self.max_power_w = max_power_w
        self.base_load_w = base_load_w
        self.period_s = float(period_s)
        self.stale_s = stale_periods * self.period_s
        self.wall_clock = wall_clock
        #: the last good reading (the supply's power is `supply_power_w`)
        self.last_good: SupplyReading = read_supply(self.folder)
        self._check_policy(self.last_good)
        self._last_good_s: float | None = None
        self._last_poll_s: float | None = None
        self._deadline_s: float | None = None
        self._failing = False
        self._dead: CapSourceError | None = None
        self._mode = ""
        #: the rest of the system's draw estimated from the last reads (W)
        self.estimated_base_w = 0.0
        self._module_j = 0.0
        self._last_now_s = 0.0
        #: a resume's wall-clock bridge: (run seconds, wall seconds) when the state was saved
        self._resumed_from: tuple[float, float] | None = None
        self._cap: float | None = None
        self._cap_known = False

    def _check_policy(self, reading: SupplyReading) -> None:
        if not reading.stores_energy:
            return  # an adapter: no energy to spread
        if (self.hours is not None or self.reserve_wh is not None) and reading.energy_wh is None:
            raise CapSourceError(
                f"{self.folder}: reports neither energy_now nor charge_now with voltage_now, so "
                "hours= and reserve_wh= cannot be computed; use reserve=P% (from capacity)")
        if self.reserve_fraction is not None and reading.capacity_fraction is None and (
                reading.energy_wh is None or reading.energy_full_wh is None):
            raise CapSourceError(f"{self.folder}: reports neither capacity nor a full energy "
                                 "or charge, so reserve=P% cannot be computed; use reserve_wh=")

    # -- reading ---------------------------------------------------------------------------------
    @property
    def supply_power_w(self) -> float | None:
        """The whole supply's power at the last good read, W (carrier board, display, ...
        included; the module's rail is less). None if the supply reports no power."""
        return self.last_good.power_w

    def record_energy(self, energy_j: float, now_s: float) -> None:
        if math.isfinite(energy_j) and energy_j >= 0:
            self._module_j += energy_j

    def energy_left_j(self, above_w: float = 0.0) -> float | None:
        """The energy above the reserve at the last good read, J (0 at or under it); None on
        external power (no energy limit) or where the supply reports no energy (`capacity` %
        alone). `above_w` is not used: this cap does not fall with the charge (only the
        `hours=` budget spreads it). The energy is the whole system's: what the rest of the
        system draws comes out of it too, and is not subtracted here."""
        reading = self.last_good
        if reading.on_external_power:
            return None
        left_wh = self._reserve_left_wh(reading)
        return None if left_wh is None else max(left_wh, 0.0) * 3600.0

    def cap_w(self, now_s: float) -> float | None:
        if self._dead is not None:
            raise self._dead
        self._last_now_s = now_s
        if self._resumed_from is not None:
            saved_run_s, saved_wall_s = self._resumed_from
            self._resumed_from = None
            if self._deadline_s is not None:
                # the wall time the run's clock did not count (the process was down)
                gap_s = (self.wall_clock() - saved_wall_s) - max(now_s - saved_run_s, 0.0)
                self._deadline_s -= max(gap_s, 0.0)
        if self._deadline_s is None and self.hours is not None:
            self._deadline_s = now_s + self.hours * 3600.0
        last = self._last_poll_s
        # a clock behind the last poll (a run resumed on a fresh device clock) polls at once
        if last is None or now_s - last >= self.period_s or now_s < last:
            if self._poll(now_s, last):
                self._cap_known = False  # a failed read keeps the last good cap as it was
        if not self._cap_known:
            # held between reads: the cap moves once per period, not at every sensor tick
            self._cap = self._policy_cap_w(self.last_good, now_s)
            self._cap_known = True
        return self._cap

    def _poll(self, now_s: float, last_poll_s: float | None) -> bool:
        """Read the supply; False when the read failed (and the last good one is kept)."""
        self._last_poll_s = now_s
        try:
            reading = read_supply(self.folder)
            if reading.stores_energy and (self.hours is not None or self.reserve_wh is not None) \
                    and reading.energy_wh is None:
                raise CapSourceError(f"{self.folder}: energy_now/charge_now no longer reported")
        except CapSourceError as err:
            good_s = self._last_good_s if self._last_good_s is not None else now_s
            if self._last_good_s is None:
                self._last_good_s = now_s  # the reading taken when the source was built
            if now_s - good_s > self.stale_s:
                self._dead = CapSourceError(
                    f"power supply {self.name} stopped reporting: no good reading for "
                    f"{now_s - good_s:.3g} s (a reading is kept for {self.stale_s:g} s); the "
                    f"cap cannot be known, so the run stops. Last error: {err}",
                    hint=f"check {self.folder} (cat its files); a battery that is only slow "
                    "to answer may need a longer period_s=")
                raise self._dead from None
            if not self._failing:
                self._warn(f"power supply {self.name} unreadable at {now_s:.1f} s, keeping the "
                           f"last good reading for up to {self.stale_s:g} s: {err}")
            self._failing = True
            return False
        if self._failing:
            self._warn(f"power supply {self.name} reads again at {now_s:.1f} s")
        self._failing = False
        self._estimate_base(reading, now_s, last_poll_s)
        self.last_good = reading
        self._last_good_s = now_s
        return True

    def _estimate_base(self, reading: SupplyReading, now_s: float,
                       last_poll_s: float | None) -> None:
        """The rest of the system's draw: the supply's draw minus the module's mean draw over
        the period (only while discharging: a charging battery's power is the charge rate)."""
        module_j, self._module_j = self._module_j, 0.0
        if self.base_load_w is not None or reading.on_external_power or reading.power_w is None:
            return
        if last_poll_s is None or now_s <= last_poll_s or module_j <= 0:
            return
        self.estimated_base_w = max(reading.power_w - module_j / (now_s - last_poll_s), 0.0)

    # -- the policy ------------------------------------------------------------------------------
    def _reserve_left_wh(self, reading: SupplyReading) -> float | None:
        """Energy above the reserve, Wh (None: the supply reports no energy)."""
        if reading.energy_wh is None:
            return None
        if self.reserve_wh is not None:
            return reading.energy_wh - self.reserve_wh
        if self.reserve_fraction is None:
            return reading.energy_wh
        full = reading.energy_full_wh
        if full is None and reading.capacity_fraction:
            full = reading.energy_wh / reading.capacity_fraction
        return reading.energy_wh - self.reserve_fraction * (full or 0.0)

    def _at_reserve(self, reading: SupplyReading) -> bool:
        left = self._reserve_left_wh(reading)
        if left is not None:
            return left <= 0
        # no energy reported: only reserve=P% can apply (checked when built), from capacity
        return reading.capacity_fraction is not None and self.reserve_fraction is not None \
            and reading.capacity_fraction <= self.reserve_fraction

    def _policy_cap_w(self, reading: SupplyReading, now_s: float) -> float | None:
        ceiling = self.max_power_w
        if reading.on_external_power:
            why = reading.status or reading.type
            contract = self._contract_cap_w(reading)
            if contract is not None and (ceiling is None or contract < ceiling):
                self._enter("external", f"{self.name} is on external power ({why}): no energy "
                            f"limit, cap {contract:g} W: what its contract delivers "
                            f"({reading.contract_w:g} W)" + (
                                f" less the rest of the system ({self.base_load_w:g} W)"
                                if self.base_load_w else
                                " (give base_w= for the rest of the system's draw)"))
                return contract
            self._enter("external", f"{self.name} is on external power ({why}): no energy "
                        f"limit, cap {'none' if ceiling is None else f'{ceiling:g} W (max_w)'}")
            return ceiling
        if self._at_reserve(reading):
            self._enter("reserve", f"{self.name} is at or under its reserve: cap 0 W, training "
                        "pauses until a charger lifts it")
            return 0.0
        left_wh = self._reserve_left_wh(reading)
        if self._deadline_s is None or left_wh is None:
            self._enter("battery", f"{self.name} on battery: cap "
                        f"{'none' if ceiling is None else f'{ceiling:g} W'} above the reserve")
            return ceiling
        time_left_s = self._deadline_s - now_s
        if time_left_s <= 0:
            self._enter("late", f"the {self.hours:g} h deadline has passed: only the reserve "
                        f"limits the cap now ({'none' if ceiling is None else f'{ceiling:g} W'})")
            return ceiling
        self._enter("budget", f"{self.name} on battery: cap from {left_wh:.2f} Wh above the "
                    f"reserve over {time_left_s / 3600:.2f} h")
        base_w = self.base_load_w if self.base_load_w is not None else self.estimated_base_w
        budget_w = max(left_wh * 3600.0 / time_left_s - base_w, 0.0)
        return budget_w if ceiling is None else min(budget_w, ceiling)

    def _contract_cap_w(self, reading: SupplyReading) -> float | None:
        """What a supply with a power contract (USB-PD, an adapter's rating) leaves the module:
        the contract less the rest of the system's draw (`base_w`; nothing subtracted without
        it); None without a contract."""
        if reading.contract_w is None:
            return None
        return max(reading.contract_w - (self.base_load_w or 0.0), 0.0)

    def _enter(self, mode: str, message: str) -> None:
        """Say once when the policy's case changes (not every period)."""
        if mode != self._mode:
            self._warn(message)
            self._mode = mode

    def describe(self) -> str:
        parts = [f"{self.last_good.type.lower()} {self.name} ({self.folder}, read every "
                 f"{self.period_s:g} s)"]
        if self.hours is not None:
            parts.append(f"finish by {self.hours:g} h")
        if self.reserve_fraction is not None:
            parts.append(f"reserve {100 * self.reserve_fraction:g} %")
        if self.reserve_wh is not None:
            parts.append(f"reserve {self.reserve_wh:g} Wh")
        if self.max_power_w is not None:
            parts.append(f"max {self.max_power_w:g} W")
        if self.supply_power_w is not None:
            parts.append(f"supply drawing {self.supply_power_w:.2f} W (whole system)")
        return ", ".join(parts)

    # -- checkpoints -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "name": self.name, "deadline_s": self._deadline_s,
                "saved_run_s": self._last_now_s, "saved_wall_s": self.wall_clock(),
                "last_good": asdict(self.last_good), "last_poll_s": self._last_poll_s,
                "last_good_s": self._last_good_s, "estimated_base_w": self.estimated_base_w,
                "mode": self._mode}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if state.get("name", self.name) != self.name:
            raise CapSourceError(f"the checkpoint followed power supply {state['name']!r}, "
                                 f"this run reads {self.name!r}")
        self._deadline_s = state.get("deadline_s")
        self._last_poll_s = state.get("last_poll_s")
        self._last_good_s = state.get("last_good_s")
        self.estimated_base_w = float(state.get("estimated_base_w", 0.0))
        self._mode = state.get("mode", "")
        if state.get("last_good"):
            self.last_good = SupplyReading(**state["last_good"])
        self._cap_known = False
        if "saved_wall_s" in state:
            self._resumed_from = (float(state.get("saved_run_s", 0.0)),
                                  float(state["saved_wall_s"]))


# -- the spec -----------------------------------------------------------------------------------
POWER_SUPPLY_SPEC_HELP = (
    "battery:sysfs[:NAME][,hours=H][,reserve=P%|reserve_wh=WH][,max_w=W][,base_w=W]"
    "[,period_s=S]"
)
_NUMBER_OPTIONS = {"hours": "hours", "reserve_wh": "reserve_wh", "max_w": "max_power_w",
                   "base_w": "base_load_w", "period_s": "period_s"}


def parse_power_supply_spec(rest: str, spec: str, root: str | Path | None = None
                            ) -> PowerSupplyCap:
    """`PowerSupplyCap` from what follows `battery:` in a spec (`sysfs[:NAME][,options]`)."""
    head, _, text = rest.partition(",")
    source, _, name = head.partition(":")
    if source.strip().lower() != "sysfs":
        raise CapSourceError(f"cap source {spec!r}: expected {POWER_SUPPLY_SPEC_HELP}")
    name = name.strip()
    if ":" in name or "/" in name or name in (".", ".."):
        raise CapSourceError(f"cap source {spec!r}: {name!r} is not a power-supply name "
                             "(a folder of /sys/class/power_supply, e.g. BAT0)")
    options: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or key not in (*_NUMBER_OPTIONS, "reserve"):
            raise CapSourceError(f"cap source {spec!r}: unknown option {part!r}; expected "
                                 f"{POWER_SUPPLY_SPEC_HELP}")
        if key == "reserve":
            if not value.endswith("%"):
                raise CapSourceError(f"cap source {spec!r}: reserve is a percentage of the "
                                     f"full battery, e.g. reserve=20% (or reserve_wh=WH), got "
                                     f"{value!r}")
            key, value = "reserve_fraction", value[:-1]
        try:
            number = float(value)
        except ValueError:
            raise CapSourceError(f"cap source {spec!r}: {key} must be a number, got "
                                 f"{value!r}") from None
        if key == "reserve_fraction":
            number /= 100.0
        options[_NUMBER_OPTIONS.get(key, key)] = number
    return PowerSupplyCap(name or None, root=root, **options)


__all__ = [
    "DEFAULT_POWER_SUPPLY_ROOT",
    "POWER_SUPPLY_ROOT_ENV",
    "POWER_SUPPLY_SPEC_HELP",
    "PowerSupplyCap",
    "SupplyReading",
    "find_supply",
    "list_supplies",
    "parse_power_supply_spec",
    "power_supply_root",
    "read_supply",
    "read_sysfs_text",
]
