"""Profiles from few points: measure a small design, fit a device model (`profile_model`) and
measure next where the cap's feasible frontier is least certain, until every batch size's
highest feasible frequency f*(b) is decided beyond the uncertainty or a point budget is spent.
The result is an ordinary ProfileTable (mode "model") whose unmeasured points are predictions,
marked `predicted` and carrying their standard deviations, so the planner uses it unchanged.

A frontier decision for batch size b is settled when the point at f*(b) is measured or predicted
`z` standard deviations under the cap, and the next frequency up is measured or predicted `z`
deviations over it; "the cap" here is the line a measured peak must stay under in the plan
(the cap minus the planner's margin, as in the pruned search), and a point is over it when a
lower clock of its row measured over it (`planner.monotone_peaks`). Whether the cap can be met
at all is decided on measurements: before the search ends with no measured point under the
line, it measures the rows' lowest clocks (beyond the point budget if need be), so a cap is
never refused on predictions alone and every profile mode plans the same caps.

Among the points that are not settled, the next measurement is the one most likely to be on
the other side of the cap (normal tail beyond the cap) per second of device time it costs: at
low frequencies a large batch takes seconds per step, and the cheapest informative point is
usually at a high frequency.

With points of the budget left once the frontier is settled, it measures each row's chosen
point (what the planner takes for the row under the line) where that choice hinges on
predicted times: on a host-bound row (time flat over the upper clocks, the chosen point its
lowest-power one) where the predicted plateau ends decides it. Where time falls clearly with
the clock the choice hinges on power, which the search already decided.

Guarantees: no predicted time contradicts a measured point of its row (never faster than one
at a higher clock, never slower than one at a lower clock: `profile_model.clock_bounded_steps`);
a row's chosen point is measured where the budget allows and the choice hinges on time. A
predicted time is not otherwise bounded: where only one batch size's steps were measured off a
host-bound plateau, another's occupancy is a guess (emulated H100, digits32-cnn: up to 21 % at
the lowest clock, 2026-11-28).

The fit uses only what a real device gives (`wattcap.algorithms.profile_model`): measured points,
their raw readings, the frequency list, the sensor period and the model's workload. On the
emulated Nano and TX2 NX (bench/profiling_cost.py) a predicted point under the cap was, in the
exhaustive profile, at most 1.1 of its standard deviations over the cap; the tests hold it to 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scipy.stats import norm

from wattcap.algorithms.profile_model import (
    DeviceModel,
    MeasurementWindow,
    Observation,
    Prediction,
    reading_noise_w,
)
from wattcap.core.profile import (
    ProfilePoint,
    ProfileTable,
    Staircase,
    tie_headroom,
    time_key,
)
from wattcap.devices.base import Device, PowerReading
from wattcap.devices.errors import DeviceOutOfMemoryError

#: share of the grid measured at most by default (a few-point profile is meant to cost at most a
#: tenth of the exhaustive one)
DEFAULT_BUDGET_SHARE = 0.10
#: a frontier decision is settled when the cap is this many standard deviations away
DEFAULT_Z = 2.0


def initial_design(batch_sizes: Sequence[int], frequencies_hz: Sequence[int]) -> list[
        tuple[int, int]]:
    """The first points: the largest batch at f_max (hottest point, where a DRAM-bound step
    would show), the smallest batch at f_max and at f_min (launch overhead, occupancy, the
    low end of V(f)), a middle batch at a middle frequency and the largest batch at a quarter
    of the frequency range (the shape of V²·f at low clocks, where the dynamic power of a
    large batch shows it best; lower still costs seconds per step). Ordered by
    batch size and, within one, by falling frequency: the warm-up step of a new batch size
    then runs at its fastest frequency."""
    bs = sorted(batch_sizes)
    fs = sorted(frequencies_hz)
    n = len(fs)
    wanted = [
        (bs[-1], fs[-1]), (bs[0], fs[-1]), (bs[0], fs[0]),
        (bs[len(bs) // 2], fs[n // 2]), (bs[-1], fs[n // 4]),
    ]
    unique = list(dict.fromkeys(wanted))
    return sorted(unique, key=lambda p: (p[0], -p[1]))


def default_budget(batch_sizes: Sequence[int], frequencies_hz: Sequence[int]) -> int:
    """10 % of the grid, but never fewer than the initial design."""
    grid = len(batch_sizes) * len(frequencies_hz)
    return max(math.floor(DEFAULT_BUDGET_SHARE * grid + 1e-9),
               len(initial_design(batch_sizes, frequencies_hz)))


@dataclass
class FrontierState:
    """Where each row's f*(b) stands under the cap, from measured and predicted points."""

    frontier_hz: dict[int, int | None]
    #: (b, f) of unmeasured points whose side of the cap is not yet settled
    undecided: list[tuple[int, int]]


class PointMeasurer(Protocol):
    """What the few-point search needs of a profiler (wattcap.measure.profiling.Profiler is
    one); a protocol, so the profiler can hand itself to this module without an import cycle."""

    device: Device
    workload: Any
    model: str
    lead_in_steps: int
    warmup_steps: int
    min_steps: int
    min_readings: int

    @property
    def margin_w(self) -> float: ...

    def fitting_batch_sizes(self) -> tuple[list[int], list[int]]: ...

    def measure_with_readings(self, batch_size: int, frequency_hz: int) -> tuple[
            ProfilePoint, list[PowerReading]]: ...

    def table(self, points: list[ProfilePoint], mode: Any, power_cap_w: float | None,
              start_s: float, fits: list[int], oom: list[int], model_fit: Any = None
              ) -> ProfileTable: ...


@dataclass
class ActiveProfiler:
    """Few-point profiling with active measurement near the cap's frontier."""

    profiler: PointMeasurer
    max_points: int | None = None
    z: float = DEFAULT_Z
    design: list[tuple[int, int]] | None = None
    _measured: dict[tuple[int, int], ProfilePoint] = field(default_factory=dict, init=False)
    _readings: list[list[float]] = field(default_factory=list, init=False)

    def run(self, power_cap_w: float | None) -> ProfileTable:
        """Measure, fit and predict; returns a ProfileTable of mode "model"."""
        profiler = self.profiler
        device = profiler.device
        assert profiler.workload is not None
        start_s = device.now_s()
        frequencies = device.frequencies_hz()
        fits, oom = profiler.fitting_batch_sizes()
        if not fits:
            raise ValueError(f"{profiler.model}: no batch size fits in the device's memory")
        budget = self.max_points or default_budget(fits, frequencies)
        design = self.design or initial_design(fits, frequencies)
        order: list[tuple[int, int]] = []
        # the plan holds a measured peak `margin_w` below the cap: decide each row's frontier
        # against that line, as the pruned search does (None: no cap)
        line_w = None if power_cap_w is None else power_cap_w - profiler.margin_w
        # Points are visited out of order: each gets a lead-in step at its own (b, f), so that
        # its first reading does not average the previous point's power.
        lead_in = profiler.lead_in_steps
        profiler.lead_in_steps = max(lead_in, 1)
        try:
            for b, f in design:
                if b in oom:
                    continue
                if self._measure(b, f, oom):
                    order.append((b, f))
            fits = [b for b in fits if b not in oom]
            # `_search` and `_measure_chosen_points` drop from `fits` the rows found too big
            model, predictions, state = self._search(fits, frequencies, line_w, budget, oom,
                                                     order)
            chosen = self._measure_chosen_points(predictions, fits, frequencies, line_w, budget,
                                                 oom, order)
            if chosen:
                model = self._fit(fits, frequencies)
                predictions = self._predictions(model, fits, frequencies)
                state = frontier_state(self._measured, predictions, fits, frequencies, line_w,
                                       self.z)
            settling = 0 if line_w is None else self._settle_feasibility(
                predictions, fits, frequencies, line_w, oom, order)
            if settling:
                fits = [b for b in fits if b not in oom]
                model = self._fit(fits, frequencies)
        finally:
            profiler.lead_in_steps = lead_in
            device.restore()
        predictions = self._predictions(model, fits, frequencies)
        points = [self._measured.get(key) or _predicted_point(p)
                  for key, p in sorted(predictions.items())]
        model_fit = {
            "parameters": model.parameters(),
            "z": self.z,
            "max_points": budget,
            # measured beyond the search to decide whether the cap can be met at all
            "feasibility_points": settling,
            # measured within the budget where a row's chosen point was predicted
            "chosen_points": chosen,
            "measured_order": [list(p) for p in order],
            "settled": not state.undecided,
            "undecided_batch_sizes": sorted({b for b, _ in state.undecided}),
        }
        return profiler.table(points, "model", power_cap_w, start_s, fits, oom, model_fit)

    # -- steps ---------------------------------------------------------------------------------
    def _search(
        self, fits: list[int], frequencies: list[int], line_w: float | None, budget: int,
        oom: list[int], order: list[tuple[int, int]],
    ) -> tuple[DeviceModel, dict[tuple[int, int], Prediction], FrontierState]:
        """Fit, predict and measure the next unsettled point until every frontier decision is
        settled or the budget is spent; returns the last fit, its predictions and state."""
        while True:
            model = self._fit(fits, frequencies)
            predictions = self._predictions(model, fits, frequencies)
            state = frontier_state(self._measured, predictions, fits, frequencies, line_w,
                                   self.z)
            if len(self._measured) >= budget:
                return model, predictions, state
            target = self._next_point(model, state, predictions, line_w)
            if target is None:
                return model, predictions, state
            if self._measure(*target, oom):
                order.append(target)
            fits[:] = [b for b in fits if b not in oom]

    def _measure_chosen_points(
        self, predictions: dict[tuple[int, int], Prediction], fits: list[int],
        frequencies: list[int], line_w: float | None, budget: int, oom: list[int],
        order: list[tuple[int, int]],
    ) -> int:
        """With points of the budget left once the frontier is settled, measure each row's
        chosen point (the one the planner takes for the row under the line: the fastest under
        it, of equal times the lowest power, `Staircase`) where it is predicted and the choice
        hinges on its predicted time (`_time_hinges`), cheapest first, refitting after each:
        on a row whose time is flat over the upper clocks (a host-bound step) the chosen point
        is where the predicted time stops falling, which the power decisions never measure.
        Returns the points it measured."""
        count = 0
        while len(self._measured) < budget:
            pending = [point for b in fits if b not in oom and (
                point := self._chosen_point(predictions, b, frequencies, line_w)) is not None
                and (b, point.knob_value) not in self._measured
                and self._time_hinges(predictions, point, frequencies)]
            if not pending:
                break
            target = min(pending, key=lambda p: p.seconds_per_sample * p.batch_size)
            if self._measure(target.batch_size, target.knob_value, oom):
                order.append((target.batch_size, target.knob_value))
                count += 1
            fits[:] = [b for b in fits if b not in oom]
            predictions = self._predictions(self._fit(fits, frequencies), fits, frequencies)
        return count

    def _time_hinges(
        self, predictions: dict[tuple[int, int], Prediction], point: ProfilePoint,
        frequencies: list[int],
    ) -> bool:
        """Whether the choice of the row hinges on predicted times: the next higher clock is
        no faster than the chosen point (it sits on a host-bound plateau, chosen as its
        lowest-power point, so where the plateau ends decides), or the next lower clock is
        within `z` deviations as fast (a near tie). Where time falls clearly with the clock
        the choice hinges on power, which the search decided; measuring there would only
        spend the budget it may still need."""
        index = frequencies.index(point.knob_value)
        if index + 1 < len(frequencies):
            key = (point.batch_size, frequencies[index + 1])
            above = self._measured.get(key) or _predicted_point(predictions[key])
            if time_key(above.seconds_per_sample) >= time_key(point.seconds_per_sample):
                return True
        if index == 0:
            return False
        key = (point.batch_size, frequencies[index - 1])
        below = self._measured.get(key) or _predicted_point(predictions[key])
        spread = math.hypot(point.seconds_per_sample_std or 0.0,
                            below.seconds_per_sample_std or 0.0)
        return below.seconds_per_sample - point.seconds_per_sample <= self.z * spread

    def _chosen_point(
        self, predictions: dict[tuple[int, int], Prediction], b: int, frequencies: list[int],
        line_w: float | None,
    ) -> ProfilePoint | None:
        """The point the planner would take for row `b` under the line (None: none under it),
        from measured points where there are and predictions elsewhere; a clock above the
        row's first measured point over the line is over it (`first_measured_over`)."""
        cut = len(frequencies) if line_w is None else first_measured_over(
            self._measured, b, frequencies, line_w)
        row = [self._measured.get((b, f)) or _predicted_point(predictions[(b, f)])
               for f in frequencies[:cut]]
        return Staircase.of(row, tie_headroom("gpu_clock")).best_under(line_w) if row else None

    def _settle_feasibility(
        self, predictions: dict[tuple[int, int], Prediction], fits: list[int],
        frequencies: list[int], line_w: float, oom: list[int], order: list[tuple[int, int]],
    ) -> int:
        """Whether the cap can be met at all is decided on measurements, as the pruned search
        and an exhaustive profile decide it: until a measured point is under `line_w` (with
        no measured point of its row at a lower clock over it, `planner.monotone_peaks`),
        measure the lowest clock of the row predicted lowest there, beyond the point budget
        if need be. With every row's lowest clock measured over the line, no point of the
        profile is under it: the cap is refused on measurements, never on predictions, so
        every profile mode agrees on which caps are feasible. Returns the points it measured."""
        lowest_hz = min(frequencies)
        count = 0
        while not self._measured_under(line_w, frequencies):
            rows = [b for b in fits if b not in oom and (b, lowest_hz) not in self._measured]
            if not rows:
                break
            b = min(rows, key=lambda b: predictions[(b, lowest_hz)].peak_power_w)
            if self._measure(b, lowest_hz, oom):
                order.append((b, lowest_hz))
                count += 1
        return count

    def _measured_under(self, line_w: float, frequencies: list[int]) -> bool:
        """Some measured point is under the line below its row's first measured point over
        it (`first_measured_over`)."""
        return any(point.peak_power_w <= line_w and frequencies.index(f) < first_measured_over(
            self._measured, b, frequencies, line_w) for (b, f), point in self._measured.items())

    def _measure(self, b: int, f: int, oom: list[int]) -> bool:
        try:
            point, readings = self.profiler.measure_with_readings(b, f)
        except DeviceOutOfMemoryError:
            oom.append(b)
            return False
        self._measured[(b, f)] = point
        self._readings.append([r.power_w for r in readings])
        return True

    def _fit(self, fits: list[int], frequencies: list[int]) -> DeviceModel:
        return fit_device_model(self.profiler, list(self._measured.values()), fits,
                                frequencies, reading_noise_w(self._readings))

    @staticmethod
    def _predictions(
        model: DeviceModel, fits: list[int], frequencies: list[int]
    ) -> dict[tuple[int, int], Prediction]:
        grid = [(b, f) for b in fits for f in frequencies]
        found = model.predict([b for b, _ in grid], [f for _, f in grid])
        return {(p.batch_size, p.frequency_hz): p for p in found}

    def _next_point(
        self,
        model: DeviceModel,
        state: FrontierState,
        predictions: dict[tuple[int, int], Prediction],
        cap_w: float | None,
    ) -> tuple[int, int] | None:
        """The unsettled point most likely on the other side of the cap per second of device
        time; without a cap, the point with the largest relative power uncertainty."""
        warmed = {b for b, _ in self._measured}
        candidates = state.undecided if cap_w is not None else [
            key for key in predictions if key not in self._measured]
        best, best_score = None, -1.0
        for key in candidates:
            p = predictions[key]
            extra = self.profiler.lead_in_steps if key[0] in warmed else (
                self.profiler.warmup_steps)
            cost_s = model.window.cost_s(p.step_s, max(extra, 1))
            if cap_w is None:
                score = p.peak_power_std_w / p.peak_power_w / cost_s
            else:
                score = norm.sf(abs(p.peak_power_w - cap_w) / max(p.peak_power_std_w, 1e-9))
                score /= cost_s
            if score > best_score:
                best, best_score = key, score
        return best


def frontier_state(
    measured: dict[tuple[int, int], ProfilePoint],
    predictions: dict[tuple[int, int], Prediction],
    batch_sizes: Sequence[int],
    frequencies_hz: Sequence[int],
    cap_w: float | None,
    z: float,
) -> FrontierState:
    """f*(b) for every row from measured peaks where there are, predictions elsewhere, and the
    unmeasured points next to it whose side of the cap (`cap_w`: the line a measured peak must
    stay under) is within `z` deviations. As in the plan (`planner.monotone_peaks`), a point is
    over the cap when a point of its row at a lower clock measured over it."""
    frontier: dict[int, int | None] = {}
    undecided: list[tuple[int, int]] = []
    if cap_w is None:
        return FrontierState({b: max(frequencies_hz) for b in batch_sizes}, [])
    for b in batch_sizes:
        cut = first_measured_over(measured, b, frequencies_hz, cap_w)
        feasible: list[int] = []
        for f in frequencies_hz[:cut]:
            point = measured.get((b, f))
            peak = point.peak_power_w if point is not None else predictions[(b, f)].peak_power_w
            if peak <= cap_w:
                feasible.append(f)
        top = max(feasible) if feasible else None
        frontier[b] = top
        index = list(frequencies_hz).index(top) if top is not None else -1
        # the point at f*(b) must be under the cap, the next one up over it (a point above the
        # row's first measured point over the cap is decided: over it)
        for i in (index, index + 1):
            if 0 <= i <= cut and i < len(frequencies_hz) and (
                    b, frequencies_hz[i]) not in measured:
                p = predictions[(b, frequencies_hz[i])]
                if abs(p.peak_power_w - cap_w) < z * p.peak_power_std_w:
                    undecided.append((b, frequencies_hz[i]))
    return FrontierState(frontier, undecided)


def first_measured_over(measured: dict[tuple[int, int], ProfilePoint], batch_size: int,
                        frequencies_hz: Sequence[int], line_w: float) -> int:
    """Index of the lowest clock at which row `batch_size` measured over the line (the number
    of clocks when none did): as in the plan (`planner.monotone_peaks`), every clock above it
    is over the line too."""
    return next((i for i, f in enumerate(frequencies_hz)
                 if (point := measured.get((batch_size, f))) is not None
                 and point.peak_power_w > line_w), len(frequencies_hz))


def fit_device_model(profiler: PointMeasurer, measured: list[ProfilePoint], fits: list[int],
                     frequencies: list[int], noise_w: float) -> DeviceModel:
    """The device model fitted to the measured points of the batch sizes in `fits` (`noise_w`:
    one reading's noise)."""
    assert profiler.workload is not None
    window = MeasurementWindow(profiler.device.sensor_period_s, profiler.min_steps,
                               profiler.min_readings)
    observations = [
        Observation(p.batch_size, p.knob_value, p.seconds_per_sample, p.peak_power_w,
                    p.avg_power_w, p.readings)
        for p in measured if p.batch_size in fits
    ]
    return DeviceModel(profiler.workload, frequencies, window, noise_w).fit(observations)


def refit_predictions(profiler: PointMeasurer, table: ProfileTable) -> ProfileTable:
    """A few-point profile whose measured points changed (merged over rounds) with its
    predicted points made again: the device model fitted anew to the measured points as they
    are now (with the first fit's reading noise; the profile's sensor noise where the file has
    none), every predicted point replaced, the fit's parameters and whether each row's frontier
    is settled (against the cap less the profiler's margin) updated."""
    fits, frequencies = list(table.batch_sizes), list(table.knob_values)
    measured = {(p.batch_size, p.knob_value): p for p in table.points if not p.predicted}
    fit = dict(table.model_fit or {})
    first_noise_w = (fit.get("parameters") or {}).get("reading_noise_w")
    noise_w = float(first_noise_w) if first_noise_w is not None else table.power_noise_w or 0.0
    model = fit_device_model(profiler, list(measured.values()), fits, frequencies, noise_w)
    predictions = ActiveProfiler._predictions(model, fits, frequencies)
    points = [measured.get(key) or _predicted_point(p) for key, p in sorted(predictions.items())]
    line_w = None if table.power_cap_w is None else table.power_cap_w - profiler.margin_w
    state = frontier_state(measured, predictions, fits, frequencies, line_w,
                           float(fit.get("z", DEFAULT_Z)))
    fit.update(parameters=model.parameters(), settled=not state.undecided,
               undecided_batch_sizes=sorted({b for b, _ in state.undecided}))
    return table.model_copy(update={"points": points, "model_fit": fit})


def _predicted_point(p: Prediction) -> ProfilePoint:
    return ProfilePoint(
        batch_size=p.batch_size,
        knob_value=p.frequency_hz,
        peak_power_w=round(p.peak_power_w, 4),
        avg_power_w=round(p.avg_power_w, 4),
        seconds_per_sample=p.seconds_per_sample,
        steps=0,
        readings=0,
        predicted=True,
        seconds_per_sample_std=p.seconds_per_sample_std,
        peak_power_std_w=round(p.peak_power_std_w, 4),
        avg_power_std_w=round(p.avg_power_std_w, 4),
    )
