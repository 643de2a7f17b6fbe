"""Profiles of one device agree (issue 28 item 11): the sensor's noise — and so the planner's
margin — is measured once per profile on the same window whatever the mode; the emulated
sensor draws its noise per point from (seed, point), so a point reads the same in every profile;
and the pruned search climbs each row only as far as the plan may go (the cap minus the
margin), so it measures the point that makes a cap feasible."""

from __future__ import annotations

import pytest

from wattcap.algorithms.planner import Replanner, plan
from wattcap.core.plan import InfeasibleCapError
from wattcap.core.profile import ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.measure.profiling import Profiler

DEVICE, MODEL = "jetson-nano", "digits-cnn"


def _profile(**options: object) -> ProfileTable:
    return Profiler(EmulatedDevice(DEVICE), MODEL).run(**options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def exhaustive() -> ProfileTable:
    return _profile(exhaustive=True)


def test_every_mode_measures_the_same_sensor_noise(exhaustive: ProfileTable) -> None:
    cap_w = Replanner(exhaustive).lowest_feasible_cap_w + 0.5
    pruned = _profile(power_cap_w=cap_w)
    # the noise window comes before any point, whatever the budget: the few-point profile
    # measures its initial design's 5 points and fits once (a budget of 8: 3 fits, 2 s more)
    few = _profile(power_cap_w=cap_w, mode="model", max_points=5)
    assert exhaustive.power_noise_w is not None and exhaustive.power_noise_w > 0
    assert pruned.power_noise_w == exhaustive.power_noise_w == few.power_noise_w
    # it is the emulated sensor's noise
    assert exhaustive.power_noise_w == pytest.approx(
        EmulatedDevice(DEVICE).spec.sensor_noise_w, rel=0.3)
    # another seed draws other noise: the agreement is not a constant
    other = Profiler(EmulatedDevice(DEVICE, seed=3), MODEL).run(power_cap_w=cap_w)
    assert other.power_noise_w != exhaustive.power_noise_w


def test_a_point_reads_the_same_in_every_profile(exhaustive: ProfileTable) -> None:
    pruned = _profile(power_cap_w=Replanner(exhaustive).lowest_feasible_cap_w + 0.3)
    noise_w = exhaustive.power_noise_w or 0.0
    shared = [(p, exhaustive.lookup(p.batch_size, p.knob_value)) for p in pruned.points]
    assert len(shared) >= 5
    for point, same in shared:
        assert same is not None
        # only where the sensor's windows fall on the steps differs (a small part of a sigma)
        assert abs(point.peak_power_w - same.peak_power_w) < noise_w / 2
        assert abs(point.avg_power_w - same.avg_power_w) < noise_w / 2


def test_pruned_profiles_plan_every_cap_the_exhaustive_one_plans(
    exhaustive: ProfileTable,
) -> None:
    """Feasibility agrees at every cap, down to the exhaustive profile's lowest feasible cap
    (before, the pruned search stopped at the raw cap and missed the point the margin needs).
    The choices agree at most caps; where they do not, a peak that is the maximum of a few
    noisy readings happened to be low at a point the pruned search had no reason to visit
    (see the README's note on peaks of noisy readings)."""
    lowest_w = Replanner(exhaustive).lowest_feasible_cap_w
    highest_w = max(p.peak_power_w for p in exhaustive.points)
    ratios = []
    for k in range(8):
        cap_w = lowest_w + (highest_w - lowest_w) * k / 7
        choice = plan(exhaustive, cap_w).choices["wattcap"]
        got = plan(_profile(power_cap_w=cap_w), cap_w).choices["wattcap"]  # never refused
        ratios.append(got.predicted_time_s / choice.predicted_time_s)
    assert sorted(ratios)[len(ratios) // 2] == pytest.approx(1.0)
    assert sum(r == pytest.approx(1.0) for r in ratios) >= 5
    with pytest.raises(InfeasibleCapError):
        plan(_profile(power_cap_w=lowest_w - 0.02), lowest_w - 0.02)


def _each_fit_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The few-point searches at several caps fit their device model to the same measured
    points again and again (the initial design's at every cap, then the points the searches
    share: 6 distinct fits of 14 at the four caps below). The fit is a deterministic function
    of the measured points and the profiler's workload and window: each distinct one is
    fitted once (by the real `fit_device_model`) and its model, read only from then on, is
    handed to the others."""
    from wattcap.measure import active_profiling

    real = active_profiling.fit_device_model
    fitted: dict[tuple, object] = {}

    def fit(profiler, measured, fits, frequencies, noise_w):  # fit_device_model's signature
        # everything the fit reads: the workload (frozen), the window, the points, the noise
        key = (profiler.workload, profiler.device.sensor_period_s, profiler.min_steps,
               profiler.min_readings, tuple(fits), tuple(frequencies), noise_w,
               tuple((p.batch_size, p.knob_value, p.seconds_per_sample, p.peak_power_w,
                      p.avg_power_w, p.readings) for p in measured))
        if key not in fitted:
            fitted[key] = real(profiler, measured, fits, frequencies, noise_w)
        return fitted[key]

    monkeypatch.setattr(active_profiling, "fit_device_model", fit)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_every_mode_agrees_on_which_caps_are_feasible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Around the exhaustive profile's lowest feasible cap, where one reading decides, the
    pruned and few-point profiles plan exactly the caps it plans (the TX2 NX here; both
    devices and three models in bench/profiling_cost.py). On the TX2 NX the lowest
    peaks of digits32-cnn lie at clocks above the lowest (3.66 W at 420 MHz against 3.85 W at
    114 MHz, b = 4: a window holds more readings at a low clock, so its maximum reads higher),
    and the few-point model predicts the decisive row's lowest clock within its uncertainty
    but not what one draw read: the plan takes no point below a lower clock's measured peak
    (planner.monotone_peaks), and the few-point search measures lowest clocks before it
    refuses a cap."""
    def profile(**options: object) -> ProfileTable:
        return Profiler(EmulatedDevice("jetson-tx2nx"), "digits32-cnn").run(
            **options)  # type: ignore[arg-type]

    def feasible(table: ProfileTable, cap_w: float) -> bool:
        try:
            plan(table, cap_w)
        except InfeasibleCapError:
            return False
        return True

    _each_fit_once(monkeypatch)
    exhaustive = profile(exhaustive=True)
    lowest_w = Replanner(exhaustive).lowest_feasible_cap_w
    noise_w = exhaustive.power_noise_w or 0.0
    measured_beyond = 0
    for offset in (-0.5, -0.1, 0.05, 0.5):
        cap_w = round(lowest_w + offset * noise_w, 4)
        expected = offset > 0
        assert feasible(exhaustive, cap_w) is expected
        assert feasible(profile(power_cap_w=cap_w), cap_w) is expected, ("pruned", cap_w)
        few = profile(power_cap_w=cap_w, mode="model")
        assert feasible(few, cap_w) is expected, ("few-point", cap_w)
        measured_beyond += few.model_fit["feasibility_points"]
        assert few.points_measured <= few.model_fit["max_points"] + (
            few.model_fit["feasibility_points"])
    # below the floor every row's lowest clock is measured before the cap is refused
    assert measured_beyond > 0
