"""Power caps that change during a run: where the cap comes from at each moment.

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
* `PowerSupplyCap` — a real battery or supply read from Linux's power-supply class
  (`/sys/class/power_supply`; `$WATTCAP_POWER_SUPPLY_ROOT` overrides it): the energy above a
  reserve spread over the hours left, 0 W at the reserve, no energy limit on external power;
* `SolarCap` — a solar panel over a day with seeded clouds, minus a base load (a model, for
  the emulated device);
* `LowestCap` — the lowest of several sources (a site budget and a battery, ...).

`parse_cap_source` builds one from a command-line string (`5`, `none`, `schedule:caps.csv`,
`file:/run/cap`, `battery:capacity_wh=20,max_w=9`, `solar:seed=3`, and for a real battery
`battery:sysfs[:NAME][,hours=H][,reserve=P%|reserve_wh=WH][,max_w=W][,base_w=W][,period_s=S]`,
e.g. `battery:sysfs,hours=3,reserve=20%`: without NAME the one present battery; watts are the
whole system's, so the module's cap is the budget less the rest of the system's draw). A source
with a finite store (the simulated battery, a real one above its reserve) also says the energy
it has left (`CapSource.energy_left_j`): the time objective keeps the rest of the run within it
(`wattcap.runtime.config_chooser`). The base
class is defined in `cap_source`, the simulated battery and the sun in `energy_caps`, the real
supply in `power_supply_cap`; this module is where the spec parser finds them all.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import math
import numbers
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from wattcap.devices.cap_source import (
    CapReading,
    CapSource,
    CapSourceError,
    check_watts,
    parse_watts_text,
)
from wattcap.devices.energy_caps import BatteryCap, BatteryCurve, SolarCap, clear_sky_ghi_w_m2
from wattcap.devices.power_supply_cap import (
    POWER_SUPPLY_SPEC_HELP,
    PowerSupplyCap,
    parse_power_supply_spec,
)


# -- constant, callable, lowest-of ------------------------------------------------------------
class ConstantCap(CapSource):
    """The same cap for the whole run (None: no cap)."""

    def __init__(self, watts: float | None) -> None:
        super().__init__()
        self.watts = check_watts(watts, "constant cap")

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
        return check_watts(self.function(now_s), f"cap function {self.name}({now_s:g})")

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

    @property
    def supply_power_w(self) -> float | None:
        """The first source's supply draw that reads one."""
        return next((s.supply_power_w for s in self.sources if s.supply_power_w is not None),
                    None)

    def may_exceed(self, watts: float, now_s: float) -> bool:
        return all(source.may_exceed(watts, now_s) for source in self.sources)

    def energy_left_j(self, above_w: float = 0.0) -> float | None:
        """The least energy any of the sources has left (None: none has a store)."""
        known = [e for s in self.sources if (e := s.energy_left_j(above_w)) is not None]
        return min(known) if known else None

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
            watts.append(check_watts(cap, where))
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
        entries.append((time_s, parse_watts_text(row[1], f"{source}: line {line}")))
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
            self.last_good_w: float | None = check_watts(initial_w, f"{self.path}: initial_w")
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
            return check_watts(raw["cap_w"], str(self.path))
        if not stripped:
            raise CapSourceError(f"{self.path}: the cap file is empty; expected watts or 'none'")
        return parse_watts_text(stripped, str(self.path))

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


# -- command-line specs -------------------------------------------------------------------------
_SPEC_HELP = (
    "expected watts (e.g. 4.5), 'none', 'schedule:FILE.csv|json', 'file:PATH[,period_s=1]', "
    "'battery:capacity_wh=WH,max_w=W[,soc=1]', '" + POWER_SUPPLY_SPEC_HELP + "' or "
    "'solar:seed=N[,day_s=..,start=..,clouds=..,area_m2=..,base_w=..]'"
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
        return ConstantCap(parse_watts_text(spec, f"cap {spec!r} ({_SPEC_HELP})"))
    if kind == "schedule":
        return ScheduleCap.load(rest)
    if kind == "file":
        path, _, opts = rest.partition(",")
        return PolledFileCap(path, **_options(opts, spec, {"period_s": "period_s"}))
    if kind == "battery" and rest.strip().lower().startswith("sysfs"):
        return parse_power_supply_spec(rest.strip(), spec)
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
    "PowerSupplyCap",
    "ScheduleCap",
    "SolarCap",
    "clear_sky_ghi_w_m2",
    "parse_cap_source",
]
