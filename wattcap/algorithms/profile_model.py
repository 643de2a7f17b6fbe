"""A device model fitted to a few measured (b, f) points, which predicts every other point of the
grid with an uncertainty.

The model is the physics of DESIGN §3 with unknown constants; the fit may only use what a real
device gives: the measured points (time per sample, peak and average power, the number of sensor
readings behind each), the frequency list, the sensor period, the spread of the raw readings and
the workload of the model (FLOPs per sample, DRAM bytes per step, optimizer bytes).

Time of one step at batch b and frequency f (x = f / f_max of the frequency list):

    step_s = t0 + max(h, busy_s),   busy_s = max(a · F · (b + b_half) / x,  g · bytes(b))

a roofline: compute at a peak proportional to f with an occupancy b / (b + b_half) that
saturates in b, or DRAM traffic at a bandwidth that does not scale with f; t0 is the per-step
overhead that does not depend on b or f (kernel launches from the CPU, the memory-bound
optimizer update); h the host's launch time that the GPU's work hides where it is longer.
A device that launches and works in turn (a Jetson) has h = 0 and t0 + busy_s; one whose
launches run ahead of the GPU (CUDA's asynchronous launches on a datacenter GPU) has a step
as long as the launches at high clocks, flat in f, and the compute below the clock where busy_s
passes h: max(launches, work). The additive form alone smeared that kink into a large t0 and
a small compute, and predicted the low clocks of an H100 up to 40 % fast (2026-11-28).
Parameters: t0, a (seconds per FLOP at f_max), b_half, g (seconds per GB), h (seconds).

Whatever the fit, a predicted step is held between the measured points of its row
(`clock_bounded_steps`): never faster than one measured at a higher clock nor slower than one
measured at a lower clock, and never slower than the clock ratio allows from one measured at
a higher clock nor faster than it allows from one at a lower clock (no part of a step slows by
more than the clock falls). So a prediction never contradicts a measurement of its row.

Power in the busy phase and in the overhead phase:

    P_busy = c0 + v2(x) · (S + D · x · act(b) · rho) + k · GB/s(busy)
    P_over = c0 + v2(x) · (S + D · x · eta)           + k · GB/s(overhead)

c0 is what does not depend on the GPU clock (board, CPU feeding the GPU); S · v2 the GPU's
leakage, which scales with V²; D · v2 · x the dynamic power C·V²·f at full activity; act(b) =
b / (b + b_act) the switching activity, rising with b; rho the compute-bound share of the busy
phase; k the DRAM energy per byte; eta the GPU activity of the overhead phase.

The voltage is unknown on real hardware, so v2(x) = (V(f) / V(f_max))² takes low-order forms
that can express V²·f, and the model is fitted with each:

    affine:  V(f) / V(f_max) = 1 - kappa · (1 - x)
    floor:   V(f) / V(f_max) = max(v_floor, 1 - kappa · (1 - x))

DVFS tables raise the voltage with the clock, about linearly over most of the range: an affine V
makes V²·f a cubic in f without constant term (v0²·f + 2·v0·v1·f² + v1²·f³), one parameter
where the fit has few points to spare. They also hold the rail at its minimum voltage below a
knee, where V²·f is linear in f: the floor form, one parameter more. From 5-7 points neither is
reliably better (on the bench's cases each fitted alone gave mean errors within 0.02 % of the
other, a quadratic V² was less stable), so a prediction is their mean and their disagreement
counts in its uncertainty.

What the sensor reports is modelled as the profiler sees it: the average power over a step,
and as peak the largest sensor window (one sensor period) over the step's two phases plus the
expected largest of n readings' noise (n: the readings a measurement window holds at that
point; the noise is estimated from successive differences of the raw readings).

Both fits are nonlinear least squares on relative residuals (scipy). A power prediction's
variance adds, per voltage form, the delta method over the parameter covariance (residual
variance × (JᵀJ)⁺) and the residual variance (what a fresh measurement would differ by), the
spread between the forms, and a jackknife over the measured points (the fit again without each
point): with nearly as many parameters as points the residuals are small whatever the error
away from the points, and the jackknife shows how far a prediction hangs on a single point.
Time predictions use the delta method (the roofline fits timing closely), then the bounds
above. The max() hides the compute wherever it is under h, so the time fit starts from a ladder
of occupancies (`HOST_BOUND_START_HALF_BATCHES`) as well as from the additive form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import norm

from wattcap.algorithms.drift import sigma_of_differences


class _StepCost(Protocol):
    dram_bytes: float
    optimizer_bytes: float


class Workload(Protocol):
    """What the fit reads of a model's step cost (wattcap.devices.workload.Workload has it)."""

    flops_per_sample: float

    def step_cost(self, batch_size: int) -> _StepCost: ...

#: relative timing jitter assumed at least, so that a noise-free fit never claims zero spread
MIN_TIME_REL_STD = 0.002
#: occupancy constants (b_half) the host-bound starts of the time fit try
HOST_BOUND_START_HALF_BATCHES = (0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4)
#: points from which the power fit is also jackknifed for its uncertainty
JACKKNIFE_MIN_POINTS = 4


@dataclass(frozen=True)
class MeasurementWindow:
    """How long the profiler measures one point: at least `min_steps` steps and
    `min_readings` readings whose whole sensor period lies in the point's own work
    (`Profiler.measure`): the first, partial period is dropped, so the window holds between
    `min_readings` and `min_readings + 1` periods of work, as the ticks fall."""

    sensor_period_s: float
    min_steps: int = 1
    min_readings: int = 5

    def steps_for(self, step_s: float) -> int:
        """Steps a measurement runs at this step time (for the ticks' average alignment: one
        step more or fewer as they fall)."""
        needed_s = (self.min_readings + 0.5) * self.sensor_period_s
        return max(self.min_steps, math.ceil(needed_s / max(step_s, 1e-12) - 1e-9))

    def readings_for(self, step_s: float) -> int:
        """Sensor readings a measurement keeps at this step time."""
        window_s = self.steps_for(step_s) * step_s
        return max(self.min_readings, int(window_s / self.sensor_period_s) - 1)

    def cost_s(self, step_s: float, extra_steps: int = 0) -> float:
        """Device seconds to measure a point, with `extra_steps` steps before the window
        (warm-up of a new batch size, lead-in)."""
        return (self.steps_for(step_s) + extra_steps) * step_s


@lru_cache(maxsize=4096)
def normal_max_moments(n: int) -> tuple[float, float]:
    """Mean and standard deviation of the largest of n standard normal draws."""
    if n <= 1:
        return 0.0, 1.0
    z = np.linspace(-4.0, 8.0, 2401)
    density = n * norm.pdf(z) * norm.cdf(z) ** (n - 1)
    density /= np.trapezoid(density, z)
    mean = float(np.trapezoid(z * density, z))
    var = float(np.trapezoid((z - mean) ** 2 * density, z))
    return mean, math.sqrt(max(var, 0.0))


def reading_noise_w(series: Sequence[Sequence[float]]) -> float:
    """Sensor noise (one standard deviation, W) from raw reading series: successive
    differences cancel the power level, and their median absolute value ignores the few jumps
    between phases. Returns 0.0 when there are fewer than 3 differences."""
    diffs = [b - a for readings in series for a, b in zip(readings, readings[1:], strict=False)]
    return sigma_of_differences(diffs) if len(diffs) >= 3 else 0.0


@dataclass(frozen=True)
class Observation:
    """One measured point, as the fit sees it."""

    batch_size: int
    frequency_hz: int
    seconds_per_sample: float
    peak_power_w: float
    avg_power_w: float
    readings: int


@dataclass(frozen=True)
class Prediction:
    """The model's values at one (b, f) and one standard deviation of each (the spread a
    fresh measurement would show around the value)."""

    batch_size: int
    frequency_hz: int
    seconds_per_sample: float
    seconds_per_sample_std: float
    peak_power_w: float
    peak_power_std_w: float
    avg_power_w: float
    avg_power_std_w: float
    step_s: float
    readings: int


_TIME_NAMES = ("log_t0_s", "log_s_per_flop_at_fmax", "log_occupancy_half_batch", "s_per_gb",
               "host_launch_s")
_POWER_NAMES = (
    "c0_w", "static_w", "dynamic_w", "log_activity_half_batch", "dram_w_per_gb_s",
    "overhead_activity", "voltage_slope", "voltage_floor",
)
#: voltage forms: name -> number of voltage parameters (slope, then floor)
VOLTAGE_FORMS = {"affine": 1, "floor": 2}


def voltage_squared(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """(V(f) / V(f_max))² for the voltage parameters: [slope] (affine) or [slope, floor]."""
    v = 1.0 - params[0] * (1.0 - x)
    if len(params) > 1:
        v = np.maximum(params[1], v)
    return v ** 2


class DeviceModel:
    """Time and power of one model's training step on one device, fitted to measured points."""

    def __init__(
        self,
        workload: Workload,
        frequencies_hz: Sequence[int],
        window: MeasurementWindow,
        noise_w: float,
        voltage_forms: Sequence[str] = tuple(VOLTAGE_FORMS),
    ) -> None:
        unknown = [form for form in voltage_forms if form not in VOLTAGE_FORMS]
        if unknown or not voltage_forms:
            raise ValueError(f"voltage forms must be among {list(VOLTAGE_FORMS)}, got "
                             f"{list(voltage_forms)}")
        self.workload = workload
        self.frequencies_hz = sorted(int(f) for f in frequencies_hz)
        self.f_max_hz = self.frequencies_hz[-1]
        self.window = window
        self.noise_w = noise_w
        self.time_params = np.zeros(len(_TIME_NAMES))
        self.time_cov = np.zeros((len(_TIME_NAMES),) * 2)
        self.time_rel_std = MIN_TIME_REL_STD
        self.voltage_forms = tuple(voltage_forms)
        self.power_fits: list[PowerFit] = []
        self.jackknife_fits: list[list[PowerFit]] = []
        self.observations: list[Observation] = []

    # -- features ------------------------------------------------------------------------------
    def _features(
        self, b: np.ndarray, f: np.ndarray, readings: np.ndarray
    ) -> dict[str, np.ndarray]:
        """What the model is evaluated on: the workload's costs at each point and the expected
        noise on the largest of the point's readings."""
        w = self.workload
        costs = {int(bs): w.step_cost(int(bs)) for bs in set(b.tolist())}
        return {
            "b": b.astype(float),
            "x": f.astype(float) / self.f_max_hz,
            "flops": np.full(len(b), w.flops_per_sample),
            "dram_gb": np.array([costs[int(bs)].dram_bytes for bs in b]) / 1e9,
            "optimizer_gb": np.array([costs[int(bs)].optimizer_bytes for bs in b]) / 1e9,
            "noise_max_w": self.noise_w * np.array(
                [normal_max_moments(int(n))[0] for n in readings]),
        }

    # -- time ------------------------------------------------------------------------------------
    @staticmethod
    def _time(theta: np.ndarray, feats: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """(overhead_s, busy_s, compute share of busy_s): the overhead phase holds t0 and the
        host's launch time that the GPU's work does not cover, max(0, h - busy_s)."""
        t0 = np.exp(theta[0])
        compute_s = np.exp(theta[1]) * feats["flops"] * (feats["b"] + np.exp(theta[2])) / feats["x"]
        memory_s = theta[3] * feats["dram_gb"]
        busy_s = np.maximum(compute_s, memory_s)
        return t0 + np.maximum(0.0, theta[4] - busy_s), busy_s, compute_s / busy_s

    # -- power -----------------------------------------------------------------------------------
    def _power(
        self, phi: np.ndarray, theta: np.ndarray, feats: dict[str, np.ndarray],
        times: tuple[np.ndarray, ...] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(peak, average) power at the points of `feats` (`times`: `_time(theta, feats)`,
        where the caller has it already)."""
        c0, static, dynamic, log_act, dram, eta = phi[:6]
        overhead_s, busy_s, rho = times if times is not None else self._time(theta, feats)
        x = feats["x"]
        v2 = voltage_squared(x, phi[6:])
        activity = feats["b"] / (feats["b"] + np.exp(log_act))
        p_busy = (c0 + v2 * (static + dynamic * x * activity * rho)
                  + dram * feats["dram_gb"] / busy_s)
        p_over = (c0 + v2 * (static + dynamic * x * eta)
                  + dram * feats["optimizer_gb"] / overhead_s)
        step_s = overhead_s + busy_s
        avg = (overhead_s * p_over + busy_s * p_busy) / step_s
        peak = _largest_window(self.window.sensor_period_s, step_s, avg, busy_s, p_busy,
                               overhead_s, p_over)
        return peak + feats["noise_max_w"], avg

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, observations: Sequence[Observation]) -> DeviceModel:
        """Fit time, then power, to the observations (at least 3 points; 5 or more with
        distinct batch sizes and frequencies for a meaningful power fit)."""
        if len(observations) < 3:
            raise ValueError(f"the fit needs at least 3 measured points, got {len(observations)}")
        self.observations = list(observations)
        b = np.array([o.batch_size for o in observations])
        f = np.array([o.frequency_hz for o in observations])
        readings = np.array([o.readings for o in observations])
        feats = self._features(b, f, readings)
        step_obs = np.array([o.seconds_per_sample * o.batch_size for o in observations])
        self._fit_time(feats, step_obs)
        peak = np.array([o.peak_power_w for o in observations])
        avg = np.array([o.avg_power_w for o in observations])
        self._fit_power(feats, peak, avg, readings)
        return self

    def _fit_time(self, feats: dict[str, np.ndarray], step_obs: np.ndarray) -> None:
        def residuals(theta: np.ndarray) -> np.ndarray:
            overhead_s, busy_s, _ = self._time(theta, feats)
            return np.log((overhead_s + busy_s) / step_obs)

        # Starts: compute-bound at the fastest point at f_max with no overhead and no hidden
        # host time (a device that runs launches and work in turn), from no DRAM bound and from
        # one at the cheapest point; or host-bound (launches overlapping the work), the host
        # taking the fastest step and the compute at each of a ladder of occupancies as fast
        # as the points allow (under every measured step, at one of them equal). The max()
        # hides the compute wherever it is under the host time, so a start must already put
        # the compute-bound points' compute near their steps: from a start with too small an
        # occupancy constant the fit gives up on them and keeps the host-bound plateau.
        flop_s = step_obs * feats["x"] / feats["flops"]
        s_per_flop = float(np.min(flop_s / feats["b"]))
        fastest_s = float(np.min(step_obs))
        lower = [math.log(1e-7), math.log(s_per_flop) - 12, math.log(1e-3), 0.0, 0.0]
        upper = [math.log(float(np.max(step_obs))), math.log(s_per_flop) + 3, math.log(1e5),
                 float(np.max(step_obs / feats["dram_gb"])) * 2, float(np.max(step_obs))]
        starts = [[math.log(fastest_s * 0.1), math.log(s_per_flop * 0.5), math.log(8.0),
                   min(memory, upper[3]), 0.0]
                  for memory in (0.0, float(np.min(step_obs / feats["dram_gb"])))]
        for half_batch in HOST_BOUND_START_HALF_BATCHES:
            s_per_flop_at = float(np.min(flop_s / (feats["b"] + half_batch)))
            starts.append([math.log(fastest_s * 0.01), math.log(s_per_flop_at),
                           math.log(half_batch), 0.0, 0.99 * fastest_s])
        best = None
        for raw_start in starts:
            start = np.clip(raw_start, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
            result = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac")
            if best is None or result.cost < best.cost:
                best = result
        assert best is not None
        self.time_params = best.x
        rss = float(np.sum(best.fun ** 2))
        dof = max(len(step_obs) - len(_TIME_NAMES), 1)
        self.time_rel_std = max(math.sqrt(rss / dof), MIN_TIME_REL_STD)
        self.time_cov = _covariance(best.jac, self.time_rel_std)

    def _fit_power(
        self,
        feats: dict[str, np.ndarray],
        peak: np.ndarray,
        avg: np.ndarray,
        readings: np.ndarray,
    ) -> None:
        # Never claim less spread than the sensor's own noise on the largest reading.
        noise_rel = self.noise_w * normal_max_moments(int(np.median(readings)))[1] / float(
            np.mean(peak))
        self.power_fits = []
        for form in self.voltage_forms:
            self.power_fits.append(self._fit_form(form, feats, peak, avg, noise_rel))
        # Jackknife: the fit again without each point in turn, for the spread of predictions
        # that residuals of 5-7 points, nearly as many as parameters, cannot show.
        self.jackknife_fits = []
        if len(peak) >= JACKKNIFE_MIN_POINTS:
            for i in range(len(peak)):
                keep = np.arange(len(peak)) != i
                part = {k: v[keep] for k, v in feats.items()}
                self.jackknife_fits.append([
                    self._fit_form(fit.form, part, peak[keep], avg[keep], noise_rel,
                                   start=fit.params, quick=True)
                    for fit in self.power_fits
                ])

    def _fit_form(
        self,
        form: str,
        feats: dict[str, np.ndarray],
        peak: np.ndarray,
        avg: np.ndarray,
        noise_rel: float,
        start: np.ndarray | None = None,
        quick: bool = False,
    ) -> PowerFit:
        """Least squares of the power model with one voltage form (relative residuals of peak
        and average power). `quick`: looser tolerances, for jackknife refits that start from
        the full fit's solution and only need its neighbourhood."""
        theta = self.time_params
        times = self._time(theta, feats)  # the time fit is done: the same at every phi

        def residuals(phi: np.ndarray) -> np.ndarray:
            p, a = self._power(phi, theta, feats, times)
            return np.concatenate([(p - peak) / peak, (a - avg) / avg])

        size = 6 + VOLTAGE_FORMS[form]
        lower = np.array([0.0, 0.0, 0.0, math.log(0.1), 0.0, 0.0, 0.0, 0.0])[:size]
        upper = np.array([np.inf, np.inf, np.inf, math.log(1e5), np.inf, 1.0, 0.999,
                          0.999])[:size]
        if start is None:
            low_w = float(np.min(avg))
            span_w = float(np.max(peak) - low_w)
            # the floor starts where it holds the lower 40 % of the range at a constant voltage
            start = np.array([0.8 * low_w, 0.1 * low_w, span_w, math.log(16.0), 0.0, 0.1, 0.3,
                              1.0 - 0.3 * 0.6])[:size]
        start = np.clip(start, lower + 1e-9, np.minimum(upper - 1e-9, 1e12))
        tolerances = {"ftol": 1e-4, "xtol": 1e-4, "gtol": 1e-4, "max_nfev": 20} if quick else {}
        result = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac",
                               **tolerances)
        rss = float(np.sum(result.fun ** 2))
        dof = max(2 * len(peak) - size, 1)
        rel_std = max(math.sqrt(rss / dof), noise_rel)
        return PowerFit(form, result.x, _covariance(result.jac, rel_std), rel_std)

    # -- predicting ------------------------------------------------------------------------------
    def predict(
        self, batch_sizes: Sequence[int], frequencies_hz: Sequence[int]
    ) -> list[Prediction]:
        """Predictions at the points (batch_sizes[i], frequencies_hz[i]). Power is the mean
        over the voltage forms; its variance adds their spread to each form's own."""
        b = np.asarray(batch_sizes)
        f = np.asarray(frequencies_hz)
        overhead_s, busy_s, _ = self._time(self.time_params,
                                           self._features(b, f, np.zeros(len(b))))
        step_s = clock_bounded_steps(b, f, overhead_s + busy_s, self.observations)
        readings = np.array([self.window.readings_for(s) for s in step_s])
        feats = self._features(b, f, readings)

        def log_step(theta: np.ndarray) -> np.ndarray:
            o, bs, _ = self._time(theta, feats)
            return np.log(o + bs)

        g_time = _jacobian(log_step, self.time_params)
        time_rel = np.sqrt(_quadratic(g_time, self.time_cov) + self.time_rel_std ** 2)
        peaks, avgs, peak_vars, avg_vars = [], [], [], []
        for fit in self.power_fits:
            peak, avg = self._power(fit.params, self.time_params, feats)
            g_peak = _jacobian(lambda p: self._power(p, self.time_params, feats)[0], fit.params)
            g_avg = _jacobian(lambda p: self._power(p, self.time_params, feats)[1], fit.params)
            peaks.append(peak)
            avgs.append(avg)
            peak_vars.append(_quadratic(g_peak, fit.cov) + (fit.rel_std * peak) ** 2)
            avg_vars.append(_quadratic(g_avg, fit.cov) + (fit.rel_std * avg) ** 2)
        peak = np.mean(peaks, axis=0)
        avg = np.mean(avgs, axis=0)
        peak_var = np.mean(peak_vars, axis=0) + np.var(peaks, axis=0)
        avg_var = np.mean(avg_vars, axis=0) + np.var(avgs, axis=0)
        if self.jackknife_fits:
            # jackknife variance of the form-averaged prediction, (n-1)/n Σ (p_i - p̄)²
            loo = np.array([
                np.mean([self._power(fit.params, self.time_params, feats) for fit in fits],
                        axis=0)
                for fits in self.jackknife_fits
            ])  # (n, 2, points)
            n = len(self.jackknife_fits)
            jack = (n - 1) / n * np.sum((loo - loo.mean(axis=0)) ** 2, axis=0)
            peak_var = peak_var + jack[0]
            avg_var = avg_var + jack[1]
        peak_std = np.sqrt(peak_var)
        avg_std = np.sqrt(avg_var)
        return [
            Prediction(
                batch_size=int(b[i]),
                frequency_hz=int(f[i]),
                seconds_per_sample=float(step_s[i] / b[i]),
                seconds_per_sample_std=float(step_s[i] / b[i] * time_rel[i]),
                peak_power_w=float(peak[i]),
                peak_power_std_w=float(peak_std[i]),
                avg_power_w=float(avg[i]),
                avg_power_std_w=float(avg_std[i]),
                step_s=float(step_s[i]),
                readings=int(readings[i]),
            )
            for i in range(len(b))
        ]

    def parameters(self) -> dict[str, object]:
        """The fitted parameters by name (for the profile file), with the noise and spreads."""
        named: dict[str, object] = {
            k: float(v) for k, v in zip(_TIME_NAMES, self.time_params.tolist(), strict=True)}
        named.update(reading_noise_w=self.noise_w, time_rel_std=self.time_rel_std)
        for fit in self.power_fits:
            values = {k: float(v) for k, v in zip(_POWER_NAMES, fit.params.tolist(),
                                                  strict=False)}
            values["rel_std"] = fit.rel_std
            named[f"power_{fit.form}"] = values
        return named


def clock_bounded_steps(
    b: np.ndarray, f: np.ndarray, step_s: np.ndarray, observations: Sequence[Observation]
) -> np.ndarray:
    """Predicted step times held within what the measured points of their row allow, whatever
    the fit: a step is never faster than one measured at a higher clock nor slower than one
    measured at a lower clock (time does not rise with the clock), and never more than the
    clock ratio slower than one measured at a higher clock nor faster than one measured at a
    lower clock scaled by the ratio (no part of a step, compute, memory or host, slows by
    more than the clock falls). Measured points keep their own value."""
    rows: dict[int, list[tuple[int, float]]] = {}
    for o in observations:
        rows.setdefault(o.batch_size, []).append((o.frequency_hz, o.seconds_per_sample
                                                  * o.batch_size))
    bounded = np.array(step_s, dtype=float)
    for i, (batch, clock) in enumerate(zip(b.tolist(), f.tolist(), strict=True)):
        low, high = 0.0, math.inf
        for measured_hz, measured_s in rows.get(int(batch), ()):
            if measured_hz > clock:
                low = max(low, measured_s)
                high = min(high, measured_s * measured_hz / clock)
            elif measured_hz < clock:
                high = min(high, measured_s)
                low = max(low, measured_s * measured_hz / clock)
            else:
                low = high = measured_s
        # bounds from noisy measurements may cross (a later clock measured a little slower):
        # the nearer measurements decide, through the midpoint
        bounded[i] = (low + high) / 2 if low > high else min(max(bounded[i], low), high)
    return bounded


@dataclass(frozen=True)
class PowerFit:
    """The power model fitted with one voltage form."""

    form: str
    params: np.ndarray
    cov: np.ndarray
    rel_std: float


def _quadratic(g: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Row-wise g · cov · gᵀ: the delta-method variance of each output."""
    return np.einsum("ij,jk,ik->i", g, cov, g)


def _largest_window(
    window_s: float,
    step_s: np.ndarray,
    avg_w: np.ndarray,
    busy_s: np.ndarray,
    busy_w: np.ndarray,
    overhead_s: np.ndarray,
    overhead_w: np.ndarray,
) -> np.ndarray:
    """Largest average over a window of `window_s` sliding along the periodic two-phase power
    of repeated steps: whole steps it holds count at the step average, the rest of the window
    sits on the hotter phase as far as it lasts."""
    whole = np.floor(window_s / step_s)
    rest_s = window_s - whole * step_s
    busy_hotter = busy_w >= overhead_w
    hot_w = np.where(busy_hotter, busy_w, overhead_w)
    cool_w = np.where(busy_hotter, overhead_w, busy_w)
    hot_s = np.where(busy_hotter, busy_s, overhead_s)
    energy = (whole * step_s * avg_w + np.minimum(rest_s, hot_s) * hot_w
              + np.maximum(0.0, rest_s - hot_s) * cool_w)
    return energy / window_s


def _covariance(jac: np.ndarray, rel_std: float) -> np.ndarray:
    """Parameter covariance of a least-squares fit: σ² (JᵀJ)⁺ (pseudo-inverse: parameters the
    points do not constrain, e.g. a bandwidth never reached, get no spread instead of inf)."""
    return rel_std ** 2 * np.linalg.pinv(jac.T @ jac, rcond=1e-10)


def _jacobian(fn, params: np.ndarray) -> np.ndarray:  # noqa: ANN001 - array -> array
    """Forward-difference Jacobian of fn at params (rows: outputs)."""
    base = np.asarray(fn(params), dtype=float)
    jac = np.zeros((base.size, params.size))
    for j in range(params.size):
        step = 1e-6 * max(1.0, abs(float(params[j])))
        shifted = params.copy()
        shifted[j] += step
        jac[:, j] = (np.asarray(fn(shifted), dtype=float) - base) / step
    return jac
