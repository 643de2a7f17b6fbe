"""Device profiles: one measured (or predicted) point per batch size and knob value, and the
versioned table of them."""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from wattcap.core.knob import KnobKind, format_knob
from wattcap.core.observed_clock import ObservedFrequency
from wattcap.core.power_mode import find_power_mode, power_mode_label, same_power_mode
from wattcap.core.schema import (
    Migration,
    VersionedFile,
    WattcapFileError,
    rename_key,
    require_match,
)

#: how far below a point's clock the board's reported clock may fall before the point is said
#: not to have held it: a clock step or two (NVML's are ~15 MHz in ~1.5 GHz, a Jetson's ~5 %
#: apart, read back exactly when locked)
CLOCK_HELD_TOLERANCE = 0.02


class ProfilePoint(BaseModel):
    """Measurements at one (batch size, knob value); the knob's kind and unit are the table's
    (`ProfileTable.knob_kind`, `wattcap.core.knob`)."""

    model_config = ConfigDict(extra="forbid")
    batch_size: int
    #: in the unit of the table's knob kind: Hz (GPU clock), mW (power limit), id (power mode)
    knob_value: int
    peak_power_w: float
    avg_power_w: float
    seconds_per_sample: float
    steps: int
    readings: int
    #: True when the point was predicted by a device model fitted to measured points
    #: (`wattcap.measure.active_profiling`), not measured; steps and readings are then 0
    predicted: bool = False
    #: one standard deviation of a predicted value (what a measurement would differ by), of
    #: repeated imported rows, or, for the time of a point measured since 2026-11-26, the
    #: standard error of its window's time from the window's parts (0 where timing is
    #: noise-free, None with fewer than 3 parts); the powers' are None for measured points
    #: (the sensor's noise, stored once, sets their margin)
    seconds_per_sample_std: float | None = None
    peak_power_std_w: float | None = None
    avg_power_std_w: float | None = None
    #: the clock the board reported at the point's sensor readings (schema 6; None where it
    #: was not read: a predicted or imported point, a sensor without the clock, an earlier
    #: file): where the clock was left to the board (a power limit, a GPU profiled at the
    #: clock in effect) it is the clock the point ran at; where a clock was set, a mean
    #: below it says the board did not hold it (`ProfileTable.clock_not_held`)
    observed_frequency_hz: ObservedFrequency | None = None
    #: rounds the point was measured in (`wattcap profile --rounds`): with more than one, its
    #: time is the rounds' mean, its spread the larger of the windows' own error and the
    #: between-round standard deviation, its peak power the rounds' largest, its average
    #: power their mean, and `round_seconds_per_sample` holds each round's time
    rounds: int = 1
    round_seconds_per_sample: list[float] = []

    @model_validator(mode="after")
    def _physical(self) -> ProfilePoint:
        # a hand-edited or damaged file: a negative or non-finite power or time would plan
        # (a cap met by -5 W), so the point is refused, named by its batch size and knob value
        for field in _POINT_PHYSICAL_FIELDS:
            value = getattr(self, field)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"the point b={self.batch_size}, knob value {self.knob_value} has "
                    f"{field} = {value}: power and time must be finite and not negative")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict:
        # a point of one round is written as before rounds existed
        return _without_defaults(handler(self), self, _POINT_OPTIONAL_DEFAULTS)

    def time_for_samples_s(self, samples: float) -> float:
        """Device seconds to process `samples` samples at this point."""
        return self.seconds_per_sample * samples

#: a point's powers and times (and their spreads): finite and not negative, or refused
_POINT_PHYSICAL_FIELDS = ("peak_power_w", "avg_power_w", "seconds_per_sample",
                          "seconds_per_sample_std", "peak_power_std_w", "avg_power_std_w")

#: fields written out only when they differ from their default: a profile of one round
#: dumps (and compares) as it did before rounds existed
_POINT_OPTIONAL_DEFAULTS: dict[str, object] = {"rounds": 1, "round_seconds_per_sample": []}
_TABLE_OPTIONAL_DEFAULTS: dict[str, object] = {"rounds": 1}


def _without_defaults(data: dict, model: BaseModel, defaults: dict[str, object]) -> dict:
    """`data` (a model's dump) without the keys of `defaults` that hold their default."""
    for key, default in defaults.items():
        if key in data and getattr(model, key) == default:
            del data[key]
    return data


def _knob_of_frequency(raw: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 -> 5: a profile before knobs varied the GPU clock, in Hz."""
    raw["knob_kind"] = "gpu_clock"
    rename_key([raw], "frequencies_hz", "knob_values")
    rename_key(raw.get("points"), "frequency_hz", "knob_value")
    return raw


class ProfileTable(VersionedFile):
    """The two lookup tables of a device for one model and input shape."""

    FILE_KIND = "wattcap.profile"
    #: 2: points may be predicted (ProfilePoint.predicted and the *_std fields), mode "model";
    #: 3: architecture_fingerprint, device_spec; 4: imported tables (mode "imported",
    #: imported_from, peak_power_source); 5: knobs (knob_kind; frequency_hz and frequencies_hz
    #: became knob_value and knob_values; max_power_limit_w); 6: each measured point's
    #: observed clock (ProfilePoint.observed_frequency_hz); 7: sensor_rule, and profiles
    #: measured in rounds (rounds, round_seconds_per_sample: written only when more than one);
    #: 8: power_modes (the device's modes by id, as read where the profile was measured)
    SCHEMA_VERSION = 8
    #: every field added since version 1 is optional and absent means "not recorded": an
    #: earlier file loads as it is (nothing is invented for it)
    MIGRATIONS: ClassVar[dict[int, Migration]] = {
        1: lambda raw: raw,  # 2 added the predicted points of few-point profiles
        2: lambda raw: raw,  # 3 added architecture_fingerprint, device_spec, power_noise_w
        3: lambda raw: raw,  # 4 added imported_from, peak_power_source ("measured") and
        #                      power_window_s
        4: _knob_of_frequency,
        5: lambda raw: raw,  # 6 added the points' observed clock
        6: lambda raw: raw,  # 7 added sensor_rule and the rounds of a profile
        7: lambda raw: raw,  # 8 added power_modes
    }

    device: str
    device_kind: str
    power_mode: str | None = None
    #: the device's power modes, nvpmodel id -> name, as read where the profile was measured
    #: (a real Jetson's /etc/nvpmodel.conf, an emulated spec); None: not recorded, or a
    #: device without power modes
    power_modes: dict[int, str] | None = None
    sensor_rail: str
    #: how the rail(s) were chosen where the device has a rule (a Jetson: its input rail, else
    #: the sum of the module's rails, with the reason); None where there is one sensor
    sensor_rule: str | None = None
    sensor_period_s: float
    model: str
    input_shape: list[int]
    batch_sizes: list[int]
    #: what the profile varies beside the batch size, and the unit of `knob_values` and of
    #: every point's `knob_value` (wattcap.core.knob)
    knob_kind: KnobKind = "gpu_clock"
    knob_values: list[int]
    max_batch_size: int | None
    oom_batch_sizes: list[int] = []
    mode: Literal["exhaustive", "pruned", "refresh", "model", "imported"]
    power_cap_w: float | None = None
    points: list[ProfilePoint]
    points_measured: int
    profiling_device_s: float
    workload: dict = {}
    #: mode "model": the fitted device model's parameters and the search's settings
    model_fit: dict = {}
    #: the sensor's noise (one standard deviation, W) seen while profiling: the planner keeps
    #: a margin of a few of these below the cap
    power_noise_w: float | None = None
    #: the model's architecture (wattcap.models.architecture_fingerprint); None: not recorded
    architecture_fingerprint: str | None = None
    #: an emulated device's whole DeviceSpec, so the device (and its reference profiles) can
    #: be rebuilt from the file alone, also when it came from a user's spec file
    device_spec: dict | None = None
    #: "measured": peak_power_w is the peak of instant readings; "averaged": the peak of
    #: readings averaged over `power_window_s` (nvidia-smi's power.draw, an energy counter),
    #: which hides instant peaks (the planner's margin grows for it); "average": the table had
    #: no peak power, and peak_power_w holds the average power (a cap then applies to it)
    peak_power_source: Literal["measured", "averaged", "average"] = "measured"
    #: the averaging window of an "averaged" peak, in seconds
    power_window_s: float | None = None
    #: the board's largest power limit (W, NVML's constraint) where the device has one: the
    #: cost objective's default P_max (Zeus's); None: not recorded, or no power limit
    max_power_limit_w: float | None = None
    #: an imported table (`wattcap import profile`): its file (name, sha256), the column
    #: mapping and how its power was measured; None for a profile wattcap measured
    imported_from: dict | None = None
    #: rounds every point was measured in, apart in time (`wattcap.measure.profile_rounds`);
    #: a point's own `rounds` may be fewer where a round could not measure it
    rounds: int = 1

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict:
        return _without_defaults(handler(self), self, _TABLE_OPTIONAL_DEFAULTS)

    @property
    def points_predicted(self) -> int:
        """Points that were predicted, not measured."""
        return sum(1 for p in self.points if p.predicted)

    def lookup(self, batch_size: int, knob_value: int) -> ProfilePoint | None:
        """The point (measured or predicted), or None if the profile does not have it."""
        for point in self.points:
            if point.batch_size == batch_size and point.knob_value == knob_value:
                return point
        return None

    def up_to(self, knob_value: int) -> ProfileTable:
        """The profile of a board held at or under `knob_value` (a clock a hot board caps): its
        points and knob values there; the same profile where nothing lies above."""
        if all(v <= knob_value for v in self.knob_values):
            return self
        return self.model_copy(update={
            "points": [p for p in self.points if p.knob_value <= knob_value],
            "knob_values": [v for v in self.knob_values if v <= knob_value]})

    def on_board(self, time_factor: float, power_factor: float) -> ProfileTable:
        """This profile as a board that reads `time_factor` x its time per sample and
        `power_factor` x its power would have measured it (a board's level, from a run's first
        windows): the same points, scaled."""
        return self.model_copy(update={"points": [p.model_copy(update={
            "seconds_per_sample": p.seconds_per_sample * time_factor,
            "seconds_per_sample_std": None if p.seconds_per_sample_std is None
            else p.seconds_per_sample_std * time_factor,
            "peak_power_w": p.peak_power_w * power_factor,
            "avg_power_w": p.avg_power_w * power_factor}) for p in self.points]})

    def clock_not_held(self, tolerance: float = CLOCK_HELD_TOLERANCE) -> list[ProfilePoint]:
        """Points of a clock profile whose board reported a mean clock more than `tolerance`
        below the point's own over its window (throttling, a clock the board did not take): their
        time and power were measured at a lower clock than their label."""
        if self.knob_kind != "gpu_clock":
            return []  # a power limit or a mode leaves the clock to the board
        return [p for p in self.points if p.observed_frequency_hz is not None
                and p.observed_frequency_hz.below_hz(p.knob_value, tolerance)]

    def clock_not_held_note(self, chosen: tuple[int, int] | None = None,
                            chosen_by: str = "") -> str | None:
        """Which measured points the board did not hold the clock of (None where it held every
        one), and whether `chosen` (batch size, knob value), `chosen_by`'s, is among them."""
        slipped = self.clock_not_held()
        if not slipped:
            return None
        first = slipped[0]
        seen = first.observed_frequency_hz
        assert seen is not None
        chosen_too = any((p.batch_size, p.knob_value) == chosen for p in slipped)
        return (f"the board did not hold the clock of {len(slipped)} measured point(s) "
                f"(b={first.batch_size} at {self.describe_knob(first.knob_value)} read "
                f"{seen.describe()})"
                + (f"; {chosen_by}'s choice is one of them" if chosen_too else "")
                + ": their time and power are of a lower clock (throttling); re-profile with "
                "the board cooler or its power limit higher")

    def rows(self) -> dict[int, list[ProfilePoint]]:
        """Measured points per batch size, ascending in knob value."""
        rows: dict[int, list[ProfilePoint]] = {}
        for point in sorted(self.points, key=lambda p: (p.batch_size, p.knob_value)):
            rows.setdefault(point.batch_size, []).append(point)
        return rows

    def describe_knob(self, value: int) -> str:
        """One of this profile's knob values with its unit ('614.4 MHz', 'power limit 150 W',
        'power mode 2 (MODE_30W)' where the profile knows the mode's name)."""
        return format_knob(self.knob_kind, value, self.power_mode_names())

    def power_mode_names(self) -> dict[int, str]:
        """The device's power modes by nvpmodel id, where the profile knows them: as recorded
        when it was measured (`power_modes`), else as an emulated device's spec lists them in
        id order. Empty otherwise (a file from before version 8 of a real board, an imported
        table): labels then show the id alone."""
        if self.power_modes:
            return dict(self.power_modes)
        modes = (self.device_spec or {}).get("power_modes") or {}
        return {mode_id: str(name) for mode_id, name in enumerate(modes)}

    def frontier(self, power_cap_w: float | None) -> dict[int, ProfilePoint]:
        """For each batch size, its best point with peak ≤ cap (`Staircase`)."""
        result: dict[int, ProfilePoint] = {}
        for b, row in self.rows().items():
            point = Staircase.of(row, tie_headroom(self.knob_kind)).best_under(power_cap_w)
            if point is not None:
                result[b] = point
        return result

    def check_matches(
        self,
        device: str | None = None,
        model: str | None = None,
        input_shape: tuple[int, ...] | list[int] | None = None,
        source: str = "profile",
        architecture_fingerprint: str | None = None,
        power_mode: str | None = None,
        power_modes: Mapping[int, str] | None = None,
    ) -> None:
        """Refuse a profile made for another device, model, input shape, architecture
        (fingerprints are compared when both are known) or power mode (`power_mode`, the
        device's; `check_power_mode`)."""
        if device is not None:
            require_match("the profile", "device", device, self.device, source,
                          instead=self._emulated_device_option())
        self.check_power_mode(power_mode, power_modes, source)
        same_architecture = (architecture_fingerprint is not None
                             and architecture_fingerprint == self.architecture_fingerprint)
        if model is not None and not (same_architecture and portable_model_name(model)
                                      == portable_model_name(self.model) is not None):
            # a user model's file may move (a copied project, a profile carried from the
            # server): its file name, factory and options and its architecture identify it
            require_match("the profile", "model", model, self.model, source,
                          other_architecture=not same_architecture and None not in (
                              architecture_fingerprint, self.architecture_fingerprint))
        if input_shape is not None:
            require_match("the profile", "input shape", list(input_shape), self.input_shape, source)
        if architecture_fingerprint is not None and self.architecture_fingerprint is not None:
            require_match("the profile", "architecture fingerprint", architecture_fingerprint,
                          self.architecture_fingerprint, source)

    def _emulated_device_option(self) -> str | None:
        """For a profile of a bundled emulated device: the --device that opens it again
        ("pass --device emulated:jetson-agx-orin"); None for a real board, or for a spec file's
        device (its name alone opens nothing)."""
        if self.device_kind != "emulated" or not _is_bundled_spec(self.device):
            return None
        return f"pass --device emulated:{self.device}"

    def check_power_mode(self, power_mode: str | None,
                         power_modes: Mapping[int, str] | None = None,
                         source: str = "profile") -> None:
        """Refuse to use this profile on a device in another power mode than the one it was
        measured in (`power_mode`, the device's; the names match as `same_power_mode` says:
        "15W" is MODE_15W): its times and powers are that mode's. Nothing to check where
        either mode is unknown, or where the profile varies the mode itself (its knob).
        `power_modes` (the device's, id -> name) lets the fix name the mode's id."""
        if (power_mode is None or self.power_mode is None or self.knob_kind == "power_mode"
                or same_power_mode(power_mode, self.power_mode)):
            return
        mode_id = find_power_mode(self.power_mode, power_modes or {})
        on_jetson = (f"`sudo nvpmodel -m {mode_id}`" if mode_id is not None
                     else "`sudo nvpmodel -m ID` (`nvpmodel -p --verbose` lists the ids)")
        label = self.power_mode if mode_id is None else power_mode_label(mode_id, power_modes)
        raise WattcapFileError(
            f"{source}: the profile was measured in power mode {self.power_mode!r}, but the "
            f"device is in power mode {power_mode!r}: the profile's times and powers are "
            "those of its own mode, not of this one",
            hint=f"put the device in power mode {label} (a Jetson: {on_jetson}; an emulated "
            f"device: --power-mode {self.power_mode} on the command line, "
            f"EmulatedDevice(..., power_mode={self.power_mode!r}) from Python) and run again, "
            f"or profile the model in {power_mode}")

    def remeasured(self, points: list[ProfilePoint]) -> ProfileTable:
        """This profile with re-measured `points` replacing the same (b, knob value), and the
        other points of each re-measured row brought along: scaled by the change measured on
        that row (geometric mean of new over old at the re-measured values: time per sample,
        peak and average power) and marked predicted, with the size of the change as their
        uncertainty (the planner's margin grows with it). A derated device leaves no stale
        point that looks faster or cooler than the device now is. Rows with no earlier
        point at a re-measured value are merged as they are."""
        fresh = {(p.batch_size, p.knob_value) for p in points}
        changes: dict[int, list[tuple[float, float, float]]] = {}
        for new in points:
            old = self.lookup(new.batch_size, new.knob_value)
            if old is not None:
                changes.setdefault(new.batch_size, []).append((
                    new.seconds_per_sample / old.seconds_per_sample,
                    new.peak_power_w / old.peak_power_w, new.avg_power_w / old.avg_power_w))
        kept = []
        for point in self.points:
            row = changes.get(point.batch_size)
            if row is None or (point.batch_size, point.knob_value) in fresh:
                kept.append(point)
                continue
            time_r, peak_r, avg_r = (math.exp(statistics.fmean(math.log(c[i]) for c in row))
                                     for i in range(3))
            kept.append(point.model_copy(update={
                "seconds_per_sample": point.seconds_per_sample * time_r,
                "peak_power_w": point.peak_power_w * peak_r,
                "avg_power_w": point.avg_power_w * avg_r,
                "predicted": True, "steps": 0, "readings": 0,
                "seconds_per_sample_std": _grown_std(point.seconds_per_sample_std,
                                                     point.seconds_per_sample, time_r),
                "peak_power_std_w": _grown_std(point.peak_power_std_w, point.peak_power_w,
                                               peak_r),
                "avg_power_std_w": _grown_std(point.avg_power_std_w, point.avg_power_w, avg_r),
            }))
        return self.model_copy(update={"points": kept}).merged(
            self.model_copy(update={"points": points}))

    def merged(self, newer: ProfileTable) -> ProfileTable:
        """This profile with `newer`'s points replacing the same (b, f)."""
        if (newer.device, newer.model, newer.input_shape) != (
            self.device, self.model, self.input_shape
        ):
            raise WattcapFileError("cannot merge profiles of different devices or models")
        keep = {(p.batch_size, p.knob_value): p for p in self.points}
        keep.update({(p.batch_size, p.knob_value): p for p in newer.points})
        return self.model_copy(update={"points": list(keep.values())})


def _grown_std(std: float | None, value: float, ratio: float) -> float:
    """A scaled value's uncertainty: its own (scaled), and the scaling's size |ratio - 1|."""
    return math.hypot((std or 0.0) * ratio, value * ratio * abs(ratio - 1.0))


def _is_bundled_spec(name: str) -> bool:
    """Whether `name` is one of the emulated device specs wattcap ships (its data file, read
    without importing the device layer, which sits above this one)."""
    if not name or "/" in name or "\\" in name:
        return False
    return (resources.files("wattcap") / "devices" / "specs" / f"{name}.json").is_file()


def portable_model_name(name: str) -> str | None:
    """A user model's spec (`/abs/dir/net.py:make…`) without its file's folder
    (`net.py:make…`); None for a registered model's name."""
    head, sep, rest = name.partition(".py:")
    if not sep:
        return None
    return head.replace("\\", "/").rsplit("/", 1)[-1] + sep + rest


#: significant digits two predicted times are compared to: times that differ only in float
#: rounding (a host-bound row's equal times, computed through different clocks) are equal
TIME_DIGITS = 9


def tie_headroom(knob_kind: str) -> float:
    """How far above the knee of a row's equally fast points `Staircase` takes its point: a
    clock or a power limit `HOST_BOUND_HEADROOM` above the lowest one as fast; a power mode's
    ids have no such order (0)."""
    from wattcap.core.defaults import HOST_BOUND_HEADROOM

    return 0.0 if knob_kind == "power_mode" else HOST_BOUND_HEADROOM


def moves_off_the_knee(best: ProfilePoint, knee: ProfilePoint, tied: ProfilePoint,
                       headroom: float) -> bool:
    """Whether a walk over a row's equally fast points in order of peak power takes `tied`
    over `best`, the point it holds: while `best` is under `headroom` above the `knee` (the
    lowest-power point of that time), each tied point further up is one step further from it.
    The one rule `Staircase` and the planner's candidate set share."""
    return (tied.knob_value > best.knob_value
            and best.knob_value < knee.knob_value * (1.0 + headroom))


def time_key(seconds: float) -> float:
    """`seconds` rounded to TIME_DIGITS significant digits, for comparing predicted times."""
    return float(f"{seconds:.{TIME_DIGITS}g}")


@dataclass
class Staircase:
    """One row reduced to the points no other beats: the best feasible point of the row under
    a cap is `best_under(cap)`, a binary search. The best is the fastest point whose peak
    power is under the cap, whatever the knob (time need not be monotone in a power limit or
    a power mode); for the GPU clock, where time falls as the clock rises, it is Algorithm 1's
    f*(b), the highest clock under the cap. Of equally fast points (`time_key`) the one of
    lowest peak power is taken (then the lowest value), whatever the knob: a clock that buys no
    time on a host-bound row, or a limit that does not bind, only spends power and headroom.
    With a `headroom` (`tie_headroom`), not the lowest of them but the first at least that
    fraction above it: the lowest is the knee where the GPU's work just hides under the host's,
    and a host a little faster on the day (another board, another round) makes the GPU the
    bottleneck there, so the knee is the one tied point that is not robustly as fast.
    This is the one place f*(b) is computed (ProfileTable.frontier and the
    planner's Selector both use it)."""

    powers_w: list[float]  # ascending
    points: list[ProfilePoint]  # same order: the best point at or under each power

    @classmethod
    def of(cls, row: list[ProfilePoint], headroom: float = 0.0) -> Staircase:
        # ascending power, each entry the best of every point up to its power
        powers_w: list[float] = []
        kept: list[ProfilePoint] = []
        best: ProfilePoint | None = None
        knee: ProfilePoint | None = None  # the lowest-power point of the best time
        for point in sorted(row, key=lambda p: (p.peak_power_w, p.knob_value)):
            # strictly faster only: of equal times the one met first, the lowest power
            if best is None or time_key(point.seconds_per_sample) < time_key(
                    best.seconds_per_sample):
                best = knee = point
            elif (knee is not None and moves_off_the_knee(best, knee, point, headroom)
                  and time_key(point.seconds_per_sample) == time_key(best.seconds_per_sample)):
                best = point  # as fast, one step further from the knee
            powers_w.append(point.peak_power_w)
            kept.append(best)
        return cls(powers_w, kept)

    def best_under(self, cap_w: float | None) -> ProfilePoint | None:
        """The row's best point with peak power at or under the cap (None: no cap)."""
        if cap_w is None:
            return self.points[-1] if self.points else None
        index = bisect.bisect_right(self.powers_w, cap_w) - 1
        return self.points[index] if index >= 0 else None
