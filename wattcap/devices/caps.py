"""Power caps that change during a run (issue 19): where the cap comes from at each moment.

A `CapSource` answers one question, `cap_w(now_s)`: the power cap in watts at device time
`now_s` (None: no cap). `now_s` is always the *device* clock (the emulator's virtual clock, a
real device's monotonic clock), in seconds since the run started; never wall time. The
runtime asks once per sensor period through `read(now_s)`, which also says whether the cap
changed since the previous read and carries the warnings the source raised (a bad write of a
polled file, ...). Sources whose cap depends on what the device drew (the battery) are told the
energy with `record_energy(energy_j, now_s)`; the others ignore it.

Sources:

* `ConstantCap` — one value for the whole run (today's behaviour);
* `ScheduleCap` — a step schedule time → watts from a JSON or CSV file;
* `PolledFileCap` — a file another process rewrites (a site manager's budget), read at most
  once per period; a bad or half-written file keeps the last good value and is reported;
* `CallableCap` — any Python function of device time;
* `BatteryCap` — a battery drained by the energy the device draws, whose maximum discharge
  power falls as it empties (a model, for the emulated device);
* `SolarCap` — a solar panel over a day with seeded clouds, minus a base load (a model, for
  the emulated device);
* `LowestCap` — the lowest of several sources (a site budget and a battery, ...).

`parse_cap_source` builds one from a command-line string (`5`, `none`, `schedule:caps.csv`,
`file:/run/cap`, `battery:capacity_wh=20,max_w=9`, `solar:seed=3`).
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wattcap.core.errors import WattcapError


class CapSourceError(WattcapError, ValueError):
    """A cap source that cannot be built or read: a bad file, spec or value."""


@dataclass(frozen=True)
class CapReading:
    """What `CapSource.read` saw at one moment.

    `changed` is True on the first read and whenever the cap differs from the previous read;
    `previous_w` is the cap of the previous read (None also before the first read).
    `warnings` are problems the source survived since the last read (kept value, ...).
    """

    at_s: float
    cap_w: float | None
    previous_w: float | None
    changed: bool
    warnings: tuple[str, ...] = ()


def _check_watts(value: object, where: str) -> float | None:
    """A cap value: a finite number ≥ 0, or None for no cap."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CapSourceError(f"{where}: expected watts (a number ≥ 0) or none, got {value!r}")
    watts = float(value)
    if not math.isfinite(watts) or watts < 0:
        raise CapSourceError(f"{where}: expected watts (a number ≥ 0) or none, got {value!r}")
    return watts


def _parse_watts_text(text: str, where: str) -> float | None:
    """'5', '5.0', '5W' or 'none' (no cap)."""
    cleaned = text.strip()
    if cleaned.lower() in ("none", "null", "off"):
        return None
    if cleaned.lower().endswith("w"):
        cleaned = cleaned[:-1].strip()
    try:
        value = float(cleaned)
    except ValueError:
        raise CapSourceError(
            f"{where}: expected watts (a number ≥ 0, e.g. 4.5) or 'none', got {text.strip()!r}"
        ) from None
    return _check_watts(value, where)


class CapSource(ABC):
    """Where the power cap comes from, as a function of device time.

    Subclasses implement `cap_w` and `describe`; stateful ones also `record_energy`,
    `state_dict` and `load_state_dict` (so a run resumed from a checkpoint continues with the
    same battery charge or last good value).
    """

    def __init__(self) -> None:
        self._last_read_w: float | None = None
        self._has_read = False
        self._pending_warnings: list[str] = []

    @abstractmethod
    def cap_w(self, now_s: float) -> float | None:
        """The cap in watts at device time `now_s` (seconds since the run started); None: no
        cap."""

    @abstractmethod
    def describe(self) -> str:
        """One line for logs and run records."""

    def record_energy(self, energy_j: float, now_s: float) -> None:
        """The device drew `energy_j` joules up to `now_s` since the previous call. Only sources
        whose cap depends on it (the battery) use it."""
        return None

    def read(self, now_s: float) -> CapReading:
        """The cap at `now_s`, whether it changed since the previous read, and the warnings the
        source raised since then. Call once per sensor period."""
        cap = self.cap_w(now_s)
        changed = not self._has_read or cap != self._last_read_w
        reading = CapReading(
            at_s=now_s,
            cap_w=cap,
            previous_w=self._last_read_w,
            changed=changed,
            warnings=tuple(self._pending_warnings),
        )
        self._pending_warnings.clear()
        self._last_read_w = cap
        self._has_read = True
        return reading

    def may_exceed(self, watts: float, now_s: float) -> bool:
        """Whether the cap may still rise above `watts` after `now_s` (False: it never will,
        e.g. a battery that only drains). A paused run that can never resume stops on False;
        sources that cannot know (a polled file, a function) say True."""
        return True

    def state_dict(self) -> dict[str, Any]:
        """JSON-compatible state for a checkpoint."""
        return {"last_read_w": self._last_read_w, "has_read": self._has_read}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()`'s output."""
        self._last_read_w = state.get("last_read_w")
        self._has_read = bool(state.get("has_read", False))

    def _warn(self, message: str) -> None:
        self._pending_warnings.append(message)


# -- constant, callable, lowest-of ------------------------------------------------------------
class ConstantCap(CapSource):
    """The same cap for the whole run (None: no cap)."""

    def __init__(self, watts: float | None) -> None:
        super().__init__()
        self.watts = _check_watts(watts, "constant cap")

    def cap_w(self, now_s: float) -> float | None:
        return self.watts

    def may_exceed(self, watts: float, now_s: float) -> bool:
        return self.watts is None or self.watts > watts

    def describe(self) -> str:
        return "no cap" if self.watts is None else f"constant {self.watts:.2f} W"


class CallableCap(CapSource):
    """A cap computed by a Python function of device seconds (None: no cap). A value that is not
    watts is an error naming the function: it is the caller's bug, not a transient fault."""

    def __init__(self, function: Callable[[float], float | None], name: str | None = None) -> None:
        super().__init__()
        self.function = function
        self.name = name or getattr(function, "__name__", repr(function))

    def cap_w(self, now_s: float) -> float | None:
        return _check_watts(self.function(now_s), f"cap function {self.name}({now_s:g})")

    def describe(self) -> str:
        return f"function {self.name}"


class LowestCap(CapSource):
    """The lowest cap of several sources at each moment (no cap only if none caps)."""

    def __init__(self, *sources: CapSource) -> None:
        super().__init__()
        if not sources:
            raise CapSourceError("LowestCap needs at least one source")
        self.sources = sources

    def cap_w(self, now_s: float) -> float | None:
        caps = [s.cap_w(now_s) for s in self.sources]
        for source in self.sources:
            self._pending_warnings.extend(source._pending_warnings)
            source._pending_warnings.clear()
        known = [c for c in caps if c is not None]
        return min(known) if known else None

    def record_energy(self, energy_j: float, now_s: float) -> None:
        for source in self.sources:
            source.record_energy(energy_j, now_s)

    def may_exceed(self, watts: float, now_s: float) -> bool:
        return all(source.may_exceed(watts, now_s) for source in self.sources)

    def describe(self) -> str:
        return "lowest of: " + "; ".join(s.describe() for s in self.sources)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "sources": [s.state_dict() for s in self.sources]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        for source, sub in zip(self.sources, state.get("sources", []), strict=False):
            source.load_state_dict(sub)


# -- schedule file ------------------------------------------------------------------------------
class ScheduleCap(CapSource):
    """A step schedule: from each entry's time until the next one, the cap is its watts.

    Times are device seconds since the run started, strictly increasing, the first at 0 (the
    cap before the first entry would otherwise be undefined); watts ≥ 0 or none (no cap).
    """

    def __init__(self, entries: Sequence[tuple[float, float | None]], source: str = "schedule"):
        super().__init__()
        self.source = source
        if not entries:
            raise CapSourceError(f"{source}: the schedule is empty; expected at least one entry "
                                 "(time_s 0 and its cap_w)")
        times: list[float] = []
        watts: list[float | None] = []
        for index, (time_s, cap) in enumerate(entries):
            where = f"{source}: entry {index + 1}"
            if isinstance(time_s, bool) or not isinstance(time_s, numbers.Real) or not (
                math.isfinite(time_s) and time_s >= 0
            ):
                raise CapSourceError(f"{where}: expected time_s, seconds ≥ 0, got {time_s!r}")
            if times and time_s <= times[-1]:
                raise CapSourceError(
                    f"{where}: times must be strictly increasing, but {time_s:g} s follows "
                    f"{times[-1]:g} s"
                )
            times.append(float(time_s))
            watts.append(_check_watts(cap, where))
        if times[0] != 0:
            raise CapSourceError(
                f"{source}: the first entry must be at time_s 0 (the cap at the start of the "
                f"run), found {times[0]:g} s"
            )
        self.times_s = times
        self.watts = watts

    def cap_w(self, now_s: float) -> float | None:
        index = bisect.bisect_right(self.times_s, now_s) - 1
        return self.watts[max(index, 0)]

    def next_change_s(self, now_s: float) -> float | None:
        """Device time of the next entry after `now_s`, None after the last one."""
        index = bisect.bisect_right(self.times_s, now_s)
        return self.times_s[index] if index < len(self.times_s) else None

    def may_exceed(self, watts: float, now_s: float) -> bool:
        index = max(bisect.bisect_right(self.times_s, now_s) - 1, 0)
        return any(cap is None or cap > watts for cap in self.watts[index:])

    def describe(self) -> str:
        return f"schedule {self.source} ({len(self.times_s)} entries)"

    @classmethod
    def load(cls, path: str | Path) -> ScheduleCap:
        """Read a schedule from JSON or CSV (by extension; `.json`, else CSV).

        JSON: a list of `{"time_s": 0, "cap_w": 5.0}` objects, or an object with that list
        under `"schedule"`. CSV: a header `time_s,cap_w`, then one row per entry. `cap_w` may be
        null / `none` for no cap.
        """
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise CapSourceError(f"{path}: no such schedule file") from None
        except (UnicodeDecodeError, IsADirectoryError):
            raise CapSourceError(f"{path}: not a text file; expected a JSON or CSV "
                                 "schedule") from None
        if path.suffix.lower() == ".json":
            return cls(_schedule_from_json(text, str(path)), source=str(path))
        return cls(_schedule_from_csv(text, str(path)), source=str(path))


_SCHEDULE_HELP = 'expected a list of {"time_s": seconds, "cap_w": watts or null}'


def _schedule_from_json(text: str, source: str) -> list[tuple[float, float | None]]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise CapSourceError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if isinstance(raw, dict):
        if "schedule" not in raw:
            raise CapSourceError(f"{source}: no 'schedule' key; {_SCHEDULE_HELP}")
        raw = raw["schedule"]
    if not isinstance(raw, list):
        raise CapSourceError(f"{source}: {_SCHEDULE_HELP}, got {type(raw).__name__}")
    entries = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != {"time_s", "cap_w"}:
            raise CapSourceError(f"{source}: entry {index + 1} is {item!r}; {_SCHEDULE_HELP}")
        entries.append((item["time_s"], item["cap_w"]))
    return entries


def _schedule_from_csv(text: str, source: str) -> list[tuple[float, float | None]]:
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows or [cell.strip() for cell in rows[0]] != ["time_s", "cap_w"]:
        found = ",".join(rows[0]) if rows else "an empty file"
        raise CapSourceError(
            f"{source}: expected a CSV header 'time_s,cap_w' on the first line, found {found!r}"
        )
    entries: list[tuple[float, float | None]] = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != 2:
            raise CapSourceError(f"{source}: line {line}: expected 2 values (time_s,cap_w), "
                                 f"got {len(row)}")
        try:
            time_s = float(row[0])
        except ValueError:
            raise CapSourceError(f"{source}: line {line}: time_s {row[0].strip()!r} is not a "
                                 "number of seconds") from None
        entries.append((time_s, _parse_watts_text(row[1], f"{source}: line {line}")))
    return entries


# -- polled file --------------------------------------------------------------------------------
class PolledFileCap(CapSource):
    """A file another process rewrites with the current cap, read at most once per `period_s`
    device seconds.

    The file holds watts (`4.5`, `4.5 W`), `none` (no cap), or JSON `{"cap_w": 4.5}`. A read
    that fails (missing, empty, half-written, not a number, negative) keeps the last good value
    and is reported once in the next `read()`'s warnings, until a good read. Writers should
    write a temporary file and rename it over this one (atomic); a non-atomic writer is
    survived, but a truncated number ("4" of "45") cannot be told from a good one.

    Without `initial_w` the file must hold a good value when the source is built.
    """

    def __init__(self, path: str | Path, period_s: float = 1.0,
                 initial_w: float | None = None) -> None:
        super().__init__()
        if not (math.isfinite(period_s) and period_s > 0):
            raise CapSourceError(f"polled cap file: period_s must be > 0 seconds, got {period_s}")
        self.path = Path(path)
        self.period_s = float(period_s)
        self._last_poll_s: float | None = None
        self._failing = False
        if initial_w is not None:
            self.last_good_w: float | None = _check_watts(initial_w, f"{self.path}: initial_w")
        else:
            self.last_good_w = self._parse_file()

    def _parse_file(self) -> float | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            raise CapSourceError(f"{self.path}: no such cap file") from None
        except (OSError, UnicodeDecodeError) as err:
            raise CapSourceError(f"{self.path}: cannot read the cap file ({err})") from None
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                raw = json.loads(stripped)
            except json.JSONDecodeError as err:
                raise CapSourceError(f"{self.path}: not valid JSON ({err.msg}); expected "
                                     '{"cap_w": watts}') from None
            if not isinstance(raw, dict) or "cap_w" not in raw:
                raise CapSourceError(f'{self.path}: expected {{"cap_w": watts}}, got {stripped!r}')
            return _check_watts(raw["cap_w"], str(self.path))
        if not stripped:
            raise CapSourceError(f"{self.path}: the cap file is empty; expected watts or 'none'")
        return _parse_watts_text(stripped, str(self.path))

    def cap_w(self, now_s: float) -> float | None:
        last = self._last_poll_s
        # a clock behind the last poll (a run resumed on a fresh device clock) polls at once
        if last is None or now_s - last >= self.period_s or now_s < last:
            self._last_poll_s = now_s
            try:
                value = self._parse_file()
            except CapSourceError as err:
                if not self._failing:
                    kept = "no cap" if self.last_good_w is None else f"{self.last_good_w:.2f} W"
                    self._warn(f"cap file unreadable at {now_s:.2f} s, keeping {kept}: {err}")
                self._failing = True
            else:
                self._failing = False
                self.last_good_w = value
        return self.last_good_w

    def describe(self) -> str:
        return f"file {self.path} (polled every {self.period_s:g} s)"

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "last_good_w": self.last_good_w,
                "last_poll_s": self._last_poll_s}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.last_good_w = state.get("last_good_w", self.last_good_w)
        self._last_poll_s = state.get("last_poll_s")


# -- battery ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatteryCurve:
    """How a Li-ion pack's deliverable power falls as it empties.

    The discharge power capability is the HPPC formula of the USABC/FreedomCAR battery test
    manuals (INL, DOE/ID-11069): P = V_min · (OCV(soc) − V_min) / R(soc), the power at which
    the terminal voltage sags to the minimum allowed voltage. Relative to a full pack:

        P(soc) / P(1) = [(OCV(soc) − V_min) / (OCV(1) − V_min)] · [R(1) / R(soc)]
        R(soc) / R(1) = 1 + resistance_rise · (1 − soc) ** resistance_exponent

    so P falls slowly on the OCV plateau, then steeply near empty, and is 0 at soc = 0 where
    the open-circuit voltage reaches the cutoff. Per-cell values (a pack of n cells in series
    scales OCV, V_min and R by n, which cancels in the ratio).
    """

    #: modelling estimate: the shape of typical NMC/graphite cell OCV-SoC curves (4.2 V full,
    #: a plateau around 3.6-3.8 V, a steep knee below ~10 %); not a specific cell's datasheet
    ocv_soc: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    ocv_v: tuple[float, ...] = (3.0, 3.3, 3.45, 3.55, 3.62, 3.68, 3.74, 3.82, 3.9, 3.98, 4.07,
                                4.2)
    #: modelling estimate: a conservative BMS cutoff per cell (cell datasheets allow 2.5-3.0 V)
    cutoff_v: float = 3.0
    #: modelling estimate: internal resistance about doubles from full to empty, rising
    #: mostly below ~30 % charge, as HPPC resistance measurements of Li-ion cells show in shape
    resistance_rise: float = 1.0
    resistance_exponent: float = 3.0

    def relative_power(self, soc: float) -> float:
        """P(soc) / P(full), in [0, 1], non-decreasing in soc."""
        soc = min(max(soc, 0.0), 1.0)
        ocv = float(np.interp(soc, self.ocv_soc, self.ocv_v))
        headroom = max(ocv - self.cutoff_v, 0.0) / (self.ocv_v[-1] - self.cutoff_v)
        resistance = 1.0 + self.resistance_rise * (1.0 - soc) ** self.resistance_exponent
        return headroom / resistance


class BatteryCap(CapSource):
    """A battery feeding the device: the cap is its maximum discharge power, which falls as it
    empties (`BatteryCurve`); the charge is drained by the energy the device draws, told with
    `record_energy`. A simulation for the emulated device (on real hardware the charge would be
    read from the fuel gauge instead).

    `max_power_w` is the power the pack can deliver to the device when full (after the
    converter); `converter_efficiency` (modelling estimate 0.9, a typical buck converter at
    these loads) makes the pack lose energy_j / efficiency for energy_j delivered.
    """

    def __init__(
        self,
        capacity_wh: float,
        max_power_w: float,
        state_of_charge: float = 1.0,
        converter_efficiency: float = 0.9,
        curve: BatteryCurve | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("capacity_wh", capacity_wh), ("max_power_w", max_power_w)):
            if not (math.isfinite(value) and value > 0):
                raise CapSourceError(f"battery: {name} must be > 0, got {value}")
        if not 0.0 <= state_of_charge <= 1.0:
            raise CapSourceError(
                f"battery: state_of_charge must be in [0, 1], got {state_of_charge}"
            )
        if not 0.0 < converter_efficiency <= 1.0:
            raise CapSourceError(
                f"battery: converter_efficiency must be in (0, 1], got {converter_efficiency}"
            )
        self.capacity_wh = float(capacity_wh)
        self.max_power_w = float(max_power_w)
        self.converter_efficiency = float(converter_efficiency)
        self.curve = curve or BatteryCurve()
        self.initial_state_of_charge = float(state_of_charge)
        self.drawn_j = 0.0  # from the pack, converter losses included

    @property
    def state_of_charge(self) -> float:
        """Remaining charge as a share of capacity, in [0, 1]."""
        used = self.drawn_j / (self.capacity_wh * 3600.0)
        return max(self.initial_state_of_charge - used, 0.0)

    @property
    def empty(self) -> bool:
        """No charge left: the cap is 0 W."""
        return self.state_of_charge <= 0.0

    def power_at_w(self, state_of_charge: float) -> float:
        """Maximum power delivered to the device at a state of charge."""
        return self.max_power_w * self.curve.relative_power(state_of_charge)

    def cap_w(self, now_s: float) -> float:
        return self.power_at_w(self.state_of_charge)

    def record_energy(self, energy_j: float, now_s: float) -> None:
        if not (math.isfinite(energy_j) and energy_j >= 0):
            raise CapSourceError(f"battery: energy drawn must be ≥ 0 J, got {energy_j}")
        self.drawn_j += energy_j / self.converter_efficiency

    def may_exceed(self, watts: float, now_s: float) -> bool:
        # the model has no charging: the cap only falls from here
        return self.cap_w(now_s) > watts

    def describe(self) -> str:
        return (f"battery {self.capacity_wh:g} Wh, {100 * self.state_of_charge:.0f} % charged, "
                f"{self.max_power_w:g} W when full")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "drawn_j": self.drawn_j}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.drawn_j = float(state.get("drawn_j", self.drawn_j))


# -- solar --------------------------------------------------------------------------------------
#: Haurwitz (1945) clear-sky global horizontal irradiance, GHI = A · cos z · exp(−B / cos z)
#: W/m² (as in pvlib.clearsky.haurwitz)
HAURWITZ_A_W_M2 = 1098.0
HAURWITZ_B = 0.057


def clear_sky_ghi_w_m2(cos_zenith: float) -> float:
    """Haurwitz clear-sky irradiance on a horizontal surface; 0 with the sun below the
    horizon."""
    if cos_zenith <= 0:
        return 0.0
    return HAURWITZ_A_W_M2 * cos_zenith * math.exp(-HAURWITZ_B / cos_zenith)


class SolarCap(CapSource):
    """A solar panel feeding the device: cap = irradiance · area · efficiency − base load,
    never below 0. A modelling estimate for the emulated device, seeded and reproducible.

    * Day: daylight lasts `day_length_s` device seconds (compress a 12 h day into minutes for
      an emulated run), then night for `night_length_s`, repeating. `start_fraction` is where in
      the daylight the run starts (0 sunrise, 0.5 noon). The sun's path is approximated by
      cos z(t) = cos_zenith_noon · sin(π · x), x the elapsed share of daylight (modelling
      estimate; cos_zenith_noon 0.9 ≈ a noon sun 26° from zenith).
    * Clear sky: Haurwitz's model (above), ≈ 930 W/m² at that noon.
    * Clouds: an alternating renewal process — clear and cloudy spells of exponential length
      (cloudy spells average `mean_cloud_s`, clear ones chosen so that `cloud_fraction` of the
      time is cloudy), each cloud passing a uniform share `cloud_transmittance` of the light
      (modelling estimate: clear-sky indices under broken cloud are commonly 0.2-0.7).
    * Panel: `panel_efficiency` 0.2 (modelling estimate: typical monocrystalline-silicon module
      at standard test conditions, 19-22 %), `panel_area_m2` 0.06 (≈ a 12 W panel), horizontal;
      `base_load_w` 1.0 W for the rest of the system (modelling estimate).
    """

    def __init__(
        self,
        seed: int = 0,
        panel_area_m2: float = 0.06,
        panel_efficiency: float = 0.2,
        base_load_w: float = 1.0,
        day_length_s: float = 12 * 3600.0,
        night_length_s: float | None = None,
        start_fraction: float = 0.25,
        cos_zenith_noon: float = 0.9,
        cloud_fraction: float = 0.3,
        mean_cloud_s: float | None = None,
        cloud_transmittance: tuple[float, float] = (0.2, 0.7),
    ) -> None:
        super().__init__()
        checks = (
            ("panel_area_m2", panel_area_m2, panel_area_m2 > 0),
            ("panel_efficiency", panel_efficiency, 0 < panel_efficiency <= 1),
            ("base_load_w", base_load_w, base_load_w >= 0),
            ("day_length_s", day_length_s, day_length_s > 0),
            ("start_fraction", start_fraction, 0 <= start_fraction <= 1),
            ("cos_zenith_noon", cos_zenith_noon, 0 < cos_zenith_noon <= 1),
            ("cloud_fraction", cloud_fraction, 0 <= cloud_fraction < 1),
        )
        for name, value, ok in checks:
            if not (math.isfinite(value) and ok):
                raise CapSourceError(f"solar: {name} out of range: {value}")
        low, high = cloud_transmittance
        if not 0 <= low <= high <= 1:
            raise CapSourceError(
                f"solar: cloud_transmittance must be 0 ≤ low ≤ high ≤ 1, got {cloud_transmittance}"
            )
        self.seed = seed
        self.panel_area_m2 = panel_area_m2
        self.panel_efficiency = panel_efficiency
        self.base_load_w = base_load_w
        self.day_length_s = day_length_s
        self.night_length_s = day_length_s if night_length_s is None else night_length_s
        self.start_fraction = start_fraction
        self.cos_zenith_noon = cos_zenith_noon
        self.cloud_fraction = cloud_fraction
        self.mean_cloud_s = day_length_s / 48 if mean_cloud_s is None else mean_cloud_s
        if not self.mean_cloud_s > 0 or self.night_length_s < 0:
            raise CapSourceError("solar: mean_cloud_s must be > 0 and night_length_s ≥ 0")
        self.cloud_transmittance = (low, high)
        # Cloud spells, drawn lazily in time order from one generator: the same seed gives the
        # same sky whatever order or cadence the trace is queried in.
        self._rng = np.random.default_rng(seed)
        self._spell_ends_s: list[float] = []
        self._spell_transmittance: list[float] = []
        self._cloudy = cloud_fraction > 0 and bool(self._rng.random() < cloud_fraction)

    def _extend_spells(self, until_s: float) -> None:
        if self.cloud_fraction == 0:
            return
        mean_clear_s = self.mean_cloud_s * (1 - self.cloud_fraction) / self.cloud_fraction
        end_s = self._spell_ends_s[-1] if self._spell_ends_s else 0.0
        while end_s <= until_s:
            if self._cloudy:
                end_s += float(self._rng.exponential(self.mean_cloud_s))
                transmittance = float(self._rng.uniform(*self.cloud_transmittance))
            else:
                end_s += float(self._rng.exponential(mean_clear_s))
                transmittance = 1.0
            self._spell_ends_s.append(end_s)
            self._spell_transmittance.append(transmittance)
            self._cloudy = not self._cloudy

    def cloud_factor(self, now_s: float) -> float:
        """Share of clear-sky light reaching the panel at `now_s` (1: no cloud)."""
        if self.cloud_fraction == 0:
            return 1.0
        self._extend_spells(now_s)
        index = bisect.bisect_right(self._spell_ends_s, now_s)
        return self._spell_transmittance[index]

    def cos_zenith(self, now_s: float) -> float:
        """cos z of the sun at `now_s` (≤ 0 at night)."""
        period_s = self.day_length_s + self.night_length_s
        since_sunrise_s = (self.start_fraction * self.day_length_s + now_s) % period_s
        if since_sunrise_s >= self.day_length_s:
            return 0.0
        return self.cos_zenith_noon * math.sin(math.pi * since_sunrise_s / self.day_length_s)

    def panel_power_w(self, now_s: float) -> float:
        """Electrical power of the panel at `now_s`, clouds included."""
        ghi = clear_sky_ghi_w_m2(self.cos_zenith(now_s))
        return ghi * self.cloud_factor(now_s) * self.panel_area_m2 * self.panel_efficiency

    def cap_w(self, now_s: float) -> float:
        if now_s < 0:
            raise CapSourceError(f"solar: device time must be ≥ 0 s, got {now_s}")
        return max(self.panel_power_w(now_s) - self.base_load_w, 0.0)

    def may_exceed(self, watts: float, now_s: float) -> bool:
        # tomorrow's clear noon is the most the panel ever gives
        noon_w = clear_sky_ghi_w_m2(self.cos_zenith_noon) * self.panel_area_m2 \
            * self.panel_efficiency
        return noon_w - self.base_load_w > watts

    def describe(self) -> str:
        return (f"solar seed {self.seed}: {self.panel_area_m2:g} m² at "
                f"{100 * self.panel_efficiency:.0f} %, {self.day_length_s:g} s daylight, "
                f"{100 * self.cloud_fraction:.0f} % cloud, {self.base_load_w:g} W base load")


# -- command-line specs -------------------------------------------------------------------------
_SPEC_HELP = (
    "expected watts (e.g. 4.5), 'none', 'schedule:FILE.csv|json', 'file:PATH[,period_s=1]', "
    "'battery:capacity_wh=WH,max_w=W[,soc=1]' or 'solar:seed=N[,day_s=..,start=..,clouds=..,"
    "area_m2=..,base_w=..]'"
)


def _options(text: str, spec: str, allowed: dict[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in allowed:
            raise CapSourceError(
                f"cap source {spec!r}: unknown option {part!r}; options: {', '.join(allowed)}"
            )
        try:
            options[allowed[key]] = float(value)
        except ValueError:
            raise CapSourceError(f"cap source {spec!r}: {key} must be a number, "
                                 f"got {value!r}") from None
    return options


def parse_cap_source(spec: str) -> CapSource:
    """A cap source from a command-line string (see the module docstring)."""
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    if not sep:
        return ConstantCap(_parse_watts_text(spec, f"cap {spec!r} ({_SPEC_HELP})"))
    if kind == "schedule":
        return ScheduleCap.load(rest)
    if kind == "file":
        path, _, opts = rest.partition(",")
        return PolledFileCap(path, **_options(opts, spec, {"period_s": "period_s"}))
    if kind == "battery":
        options = _options(rest, spec, {"capacity_wh": "capacity_wh", "max_w": "max_power_w",
                                        "soc": "state_of_charge"})
        missing = {"capacity_wh", "max_power_w"} - set(options)
        if missing:
            raise CapSourceError(f"cap source {spec!r}: battery needs capacity_wh=WH and max_w=W")
        return BatteryCap(**options)
    if kind == "solar":
        options = _options(rest, spec, {
            "seed": "seed", "day_s": "day_length_s", "start": "start_fraction",
            "clouds": "cloud_fraction", "area_m2": "panel_area_m2", "base_w": "base_load_w",
        })
        if "seed" in options:
            seed = options.pop("seed")
            if seed != int(seed):
                raise CapSourceError(f"cap source {spec!r}: seed must be an integer")
            return SolarCap(seed=int(seed), **options)
        return SolarCap(**options)
    raise CapSourceError(f"cap source {spec!r}: unknown kind {kind!r}; {_SPEC_HELP}")


__all__ = [
    "BatteryCap",
    "BatteryCurve",
    "CallableCap",
    "CapReading",
    "CapSource",
    "CapSourceError",
    "ConstantCap",
    "LowestCap",
    "PolledFileCap",
    "ScheduleCap",
    "SolarCap",
    "clear_sky_ghi_w_m2",
    "parse_cap_source",
]
