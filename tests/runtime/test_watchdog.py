"""The power-cap watchdog (scripted readings, and during training on the emulated Nano) and the
run's power accounting (energy from a hardware counter where the device has one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wattcap.core.profile import ProfileTable
from wattcap.data import ArrayDataset, get_dataset
from wattcap.devices import DeviceError, EmulatedDevice, PowerReading, load_spec
from wattcap.measure.profiling import Profiler
from wattcap.runtime.watchdog import SETTLE_READINGS, SINGLE_READING_SIGMAS, CapWatchdog
from wattcap.train.loop import TrainConfig, train_to_accuracy


def recording_fstar(frequency_hz: int) -> tuple[list[float], Callable[[float], int]]:
    """An f*(b) for the watchdog that answers `frequency_hz` for any cap and records the caps
    it was asked for."""
    asked: list[float] = []

    def fstar(cap_w: float) -> int:
        asked.append(cap_w)
        return frequency_hz

    return asked, fstar


MODEL = "digits32-cnn"
B = 32
EPS = 1e-9


def quiet_nano(noise_w: float = 0.01) -> EmulatedDevice:
    """The emulated Nano with a quieter sensor, so which reading crosses a cap is decided by
    the physics, not by the noise draw."""
    spec = load_spec("jetson-nano").model_copy(update={"sensor_noise_w": noise_w})
    return EmulatedDevice(spec)


@pytest.fixture(scope="module")
def digits32() -> tuple[ArrayDataset, ArrayDataset]:
    return get_dataset("digits-32").split(0.2, seed=0)


@pytest.fixture(scope="module")
def row_profile() -> ProfileTable:
    """Exhaustive profile of one batch size on the quiet Nano."""
    return Profiler(quiet_nano(), MODEL, batch_sizes=(B,)).run(exhaustive=True)


def config(**update: object) -> TrainConfig:
    base = dict(model=MODEL, batch_size=B, target_accuracy=0.8, sample_budget=4096,
                eval_every_samples=256, max_eval_samples=200)
    return TrainConfig(**(base | update))


# -- scripted readings ---------------------------------------------------------------------------


class Sensor:
    """Scripted readings one sensor period apart, delivered to a watchdog."""

    def __init__(self, guard: CapWatchdog, period_s: float) -> None:
        self.guard = guard
        self.period_s = period_s
        self.time_s = 0.0

    def __call__(self, powers_w: list[float]) -> None:
        for power_w in powers_w:
            self.time_s += self.period_s
            self.guard(PowerReading(self.time_s, power_w, "test"))


def test_one_reading_over_the_cap_is_recorded_but_not_acted_on() -> None:
    device = EmulatedDevice("jetson-nano")
    f_max = device.current_frequency_hz()
    guard = CapWatchdog(device, power_cap_w=5.0)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.0, 5.3, 4.1])
    assert device.current_frequency_hz() == f_max
    assert guard.steps == []
    (violation,) = guard.violations
    assert violation.readings == 1 and violation.duration_s == 0.0
    assert violation.max_power_w == 5.3


def test_two_consecutive_readings_make_one_decision_each() -> None:
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    period_s = device.sensor_period_s
    guard = CapWatchdog(device, power_cap_w=5.0)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.0, 5.5, 5.6])
    # Above the cap for longer than one sensor period: one level down, at the second reading.
    assert [(s.from_hz, s.to_hz) for s in guard.steps] == [(freqs[-1], freqs[-2])]
    assert guard.steps[0].time_s == pytest.approx(3 * period_s)
    assert "above the cap" in guard.steps[0].reason
    # the first reading after the step still shows the power from before it (any sensor that
    # reports late): recorded, never a confirmation
    sensor([5.2])
    assert device.current_frequency_hz() == freqs[-2] and len(guard.steps) == 1
    sensor([5.3])  # one new reading at the new level: not yet confirmed
    assert device.current_frequency_hz() == freqs[-2] and len(guard.steps) == 1
    sensor([5.3])  # two in a row at the new level: one more decision
    assert device.current_frequency_hz() == freqs[-3] and len(guard.steps) == 2
    assert guard.violations == []  # still open
    sensor([4.9])
    (violation,) = guard.violations
    assert violation.readings == 5
    assert violation.duration_s == pytest.approx(4 * period_s)
    assert violation.max_power_w == 5.6


def test_one_reading_beyond_the_sensors_noise_is_decided_at_once() -> None:
    """A reading over the cap by more than SINGLE_READING_SIGMAS of the sensor's noise is not
    noise: waiting for a second reading (which a lagging sensor fills with the old power) would
    leave the board over the cap a period longer. Within the noise, the second still decides."""
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    noise_w = 0.05
    guard = CapWatchdog(device, power_cap_w=5.0, sensor_noise_w=noise_w)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.0, 5.0 + 0.9 * SINGLE_READING_SIGMAS * noise_w])  # within the noise: waits
    assert guard.steps == [] and device.run_frequency_hz() == freqs[-1]
    sensor([4.0, 5.0 + 1.1 * SINGLE_READING_SIGMAS * noise_w])  # beyond it: at once
    assert [(s.from_hz, s.to_hz) for s in guard.steps] == [(freqs[-1], freqs[-2])]
    # the readings right after the step may still carry the old power: the first never counts,
    # the next do not decide alone (no second step from a stale reading), two in a row do
    sensor([5.3, 5.3])
    assert len(guard.steps) == 1
    sensor([5.3])
    assert [(s.from_hz, s.to_hz) for s in guard.steps][-1] == (freqs[-2], freqs[-3])
    assert "standard deviations of the sensor's noise" in guard.steps[0].reason
    assert "for more than one sensor period" in guard.steps[1].reason
    # the SETTLE_READINGS-th reading after a step may still be stale: alone it waits ...
    sensor([4.0] * (SETTLE_READINGS - 1) + [5.3])
    assert len(guard.steps) == 2
    # ... the one after it decides alone again
    settled = CapWatchdog(EmulatedDevice("jetson-nano"), power_cap_w=5.0,
                          sensor_noise_w=noise_w)
    Sensor(settled, device.sensor_period_s)([4.0, 5.3] + [4.0] * SETTLE_READINGS + [5.3])
    assert [(s.from_hz, s.to_hz) for s in settled.steps] == [(freqs[-1], freqs[-2]),
                                                             (freqs[-2], freqs[-3])]
    # without the sensor's noise every violation waits for its second reading, as before
    quiet = CapWatchdog(EmulatedDevice("jetson-nano"), power_cap_w=5.0)
    Sensor(quiet, device.sensor_period_s)([4.0, 6.0])
    assert quiet.steps == []


def test_a_one_reading_decision_scales_the_cap_once_that_reading_has_settled() -> None:
    """The board/profile ratio needs the readings a decision used to come after the settle
    wait: one reading beyond the noise, SETTLE_READINGS + 1 readings after a drop, has."""
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    asked, fstar = recording_fstar(freqs[-3])

    guard = CapWatchdog(device, power_cap_w=5.0, frequency_for_cap=fstar, sensor_noise_w=0.05,
                        profile_power_at={freqs[-2]: 4.0, freqs[-3]: 3.5}.get)
    device.set_frequency_hz(freqs[-1])
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.0])
    device.set_frequency_hz(freqs[-2])  # a drop (the plan's, a re-plan's)
    sensor([4.0] * SETTLE_READINGS + [5.5])
    assert asked == [pytest.approx(5.0 * 4.0 / 5.5)]


def test_after_a_knob_move_a_stale_reading_does_not_decide_alone() -> None:
    """A power limit or power mode moved for the cap changes no clock the readings report: the
    readings right after it may still carry the old power all the same."""
    device = EmulatedDevice("jetson-nano")
    moves: list[float] = []

    def knob_for_cap(cap_w: float) -> str:
        moves.append(cap_w)
        return f"power limit {cap_w:.2f} W"

    guard = CapWatchdog(device, power_cap_w=5.0, knob_for_cap=knob_for_cap, sensor_noise_w=0.05)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.0, 5.5])  # beyond the noise: the knob moves at once
    assert len(moves) == 1
    sensor([5.5, 5.5])  # stale: the first never counts, the second waits for another
    assert len(moves) == 1
    sensor([5.5])
    assert len(moves) == 2


def test_a_confirmed_violation_goes_straight_to_the_profiles_fstar() -> None:
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    asked, fstar = recording_fstar(freqs[2])  # the profile's highest clock under this cap

    guard = CapWatchdog(device, power_cap_w=5.0, frequency_for_cap=fstar)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([5.5, 5.6])
    assert [(s.from_hz, s.to_hz) for s in guard.steps] == [(freqs[-1], freqs[2])]
    # asked for the cap less what both confirming readings were over by (5.5 - 5.0)
    assert asked == [pytest.approx(4.5)] and "straight to the plan's clock" in \
        guard.steps[0].reason
    # still over at f*(b) (the device drifted): one level down, as without a profile (the
    # first reading after the step is the old clock's power and never counts)
    sensor([5.5, 5.5, 5.6])
    assert [s.to_hz for s in guard.steps] == [freqs[2], freqs[1]]
    assert "straight" not in guard.steps[1].reason


def test_a_board_drawing_more_than_the_profile_asks_for_the_cap_scaled_to_it() -> None:
    """Where the profile knows the point, the watchdog asks f*(b) for the cap scaled by what
    this board draws against the profile there: a board 15 % over the profile's 4.8 W gets
    the clock whose profiled peak is 15 % under the cap (one step, not one level per two
    readings); the cap less the excess where that is lower, without the point, or where the
    readings may still carry power from before the last clock change."""
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    asked, fstar = recording_fstar(freqs[2])

    known = {freqs[-1]: 4.8, freqs[2]: 3.0}
    guard = CapWatchdog(device, power_cap_w=5.0, frequency_for_cap=fstar,
                        profile_power_at=known.get)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.9] * SETTLE_READINGS)  # the clock has been where it is for a while
    sensor([5.52, 5.6])  # 15 % over the profile's 4.8 W at this clock: 4.35 W for the profile
    assert asked == [pytest.approx(5.0 * 4.8 / 5.52)]
    assert [(s.from_hz, s.to_hz) for s in guard.steps] == [(freqs[-1], freqs[2])]
    # right after the step the readings may still show the old clock's power (a sensor that
    # averages and reports late): the first never counts; no ratio from the next, the cap less
    # the excess
    sensor([5.5, 5.5, 5.6])
    assert asked[1] == pytest.approx(4.5)
    # a board close to the profile: the cap less the excess is the lower (the margin decides)
    device.set_frequency_hz(freqs[-1])
    guard.set_cap(5.0, ceiling_hz=freqs[-1])
    known[freqs[-1]] = 4.98
    sensor([4.9] * SETTLE_READINGS + [5.5, 5.6])
    assert asked[2] == pytest.approx(4.5)
    # at a clock the profile has no point for: the cap less the excess, as without a profile
    device.set_frequency_hz(freqs[-2])
    guard.set_cap(5.0, ceiling_hz=freqs[-2])
    sensor([4.9] * SETTLE_READINGS + [5.3, 5.4])
    assert asked[3] == pytest.approx(4.7)


def test_the_ratio_waits_for_the_readings_after_a_drop_or_a_new_plan() -> None:
    """After the clock went down (or a new plan began) the next readings may carry the power
    from before: the ratio to the profile is taken only from violations whose two readings both
    came after `SETTLE_READINGS` more; until then the cap less the excess."""
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    asked, fstar = recording_fstar(freqs[-2])

    guard = CapWatchdog(device, power_cap_w=5.0, frequency_for_cap=fstar,
                        profile_power_at={freqs[-1]: 4.8, freqs[-2]: 4.0}.get)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([5.52, 5.6])  # at the start: nothing dropped, the ratio
    assert asked == [pytest.approx(5.0 * 4.8 / 5.52)] and device.run_frequency_hz() == freqs[-2]
    # the drop to freqs[-2]: its first readings may be stale; a violation within them is
    # answered by the cap less the excess ...
    sensor([4.9] * (SETTLE_READINGS - 1) + [5.5, 5.6])
    assert asked[1] == pytest.approx(4.5)
    # ... and one whose readings both come after them by the ratio
    device.set_frequency_hz(freqs[-2])
    guard.set_cap(5.0, ceiling_hz=freqs[-2])
    sensor([4.9] * (SETTLE_READINGS + 2) + [5.5, 5.6])
    assert asked[2] == pytest.approx(5.0 * 4.0 / 5.5)
    # a new plan (a re-plan for the board) starts the wait again, whatever its clock
    device.set_frequency_hz(freqs[-2])
    guard.restart(5.0, ceiling_hz=freqs[-2])
    sensor([5.5, 5.5, 5.6])
    assert asked[3] == pytest.approx(4.5)


def test_open_violation_is_closed_by_finish() -> None:
    device = EmulatedDevice("jetson-nano")
    guard = CapWatchdog(device, power_cap_w=3.0)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([3.5, 3.6])
    assert guard.violations == []
    guard.finish()
    assert len(guard.violations) == 1 and guard.violations[0].readings == 2


def test_at_the_lowest_frequency_the_watchdog_says_so_once() -> None:
    device = EmulatedDevice("jetson-nano")
    device.set_frequency_hz(device.frequencies_hz()[0])
    guard = CapWatchdog(device, power_cap_w=1.0)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([2.0] * 6)
    guard.finish()
    assert guard.steps == []
    assert len(guard.notes) == 1 and "lowest frequency" in guard.notes[0]
    assert guard.violations[0].readings == 6
    # nothing is left to step down to: the run must stop (the Session raises it)
    assert guard.unmet is not None and "cannot be met by the frequency alone" in \
        guard.unmet.message and "smaller batch size" in (guard.unmet.hint or "")


def test_under_a_moving_cap_the_floor_is_left_to_the_follower() -> None:
    """A moving cap that falls below every configuration pauses the run (the follower):
    the watchdog says so but does not stop the run at the floor."""
    device = EmulatedDevice("jetson-nano")
    device.set_frequency_hz(device.frequencies_hz()[0])
    guard = CapWatchdog(device, power_cap_w=1.0, stop_at_floor=False)
    Sensor(guard, device.sensor_period_s)([2.0] * 4)
    assert len(guard.notes) == 1 and guard.unmet is None


class RefusingDevice(EmulatedDevice):
    def set_frequency_hz(self, frequency_hz: int) -> int:
        raise DeviceError("the kernel refused it", hint="none")


def test_a_refused_step_is_noted_not_swallowed() -> None:
    device = RefusingDevice("jetson-nano")
    guard = CapWatchdog(device, power_cap_w=1.0)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([2.0, 2.0, 2.0])
    assert guard.steps == []
    assert len(guard.notes) == 1 and "the kernel refused it" in guard.notes[0]
    assert guard.unmet is not None and "the kernel refused it" in guard.unmet.message
    assert guard.unmet.hint == "none"  # the device's own fix


def test_a_step_the_board_undercuts_is_a_step_not_a_stop() -> None:
    """The lock went in but a hot board runs lower still, held by its own thermal limit: the
    power falls all the same, so that is a step down to the board's ceiling (the clamp and its
    cause recorded), not a reason to stop the run."""
    from wattcap.devices.emulated_thermal import ThermalModel

    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=10.0, time_constant_s=600.0, start_c=95.0, step_interval_s=0.05))
    freqs = device.frequencies_hz()
    device.idle(3 * device.sensor_period_s)  # hot: the governor pulled three levels meanwhile
    assert device.current_frequency_hz() == freqs[-4] and device.run_frequency_hz() == freqs[-1]
    guard = CapWatchdog(device, power_cap_w=1.0)
    Sensor(guard, device.sensor_period_s)([2.0, 2.0])
    assert guard.unmet is None and len(guard.steps) == 1
    # asked one level down; the board runs three down: the lock follows the board
    assert guard.steps[0].to_hz == freqs[-4] == device.run_frequency_hz()
    (clamp,) = device.clock_clamps
    assert (clamp.requested_hz, clamp.ceiling_hz, clamp.cause, clamp.by) == (
        freqs[-2], freqs[-4], "thermal", "watchdog")
    assert "°C" in clamp.detail


def test_a_cap_the_lowest_clock_breaks_stops_the_run_and_restores_the_clock(
    digits32: tuple[ArrayDataset, ArrayDataset], tmp_path: Path,
) -> None:
    """Training at the lowest clock under a cap below what it draws: the violation cannot be
    answered by the clock, so the run stops at the next step boundary with a checkpoint, and
    the device gets the clock it was found at."""
    from wattcap.devices.errors import WatchError

    device = quiet_nano()
    found_hz = device.run_frequency_hz()
    device.set_frequency_hz(device.frequencies_hz()[0])  # the run trains at the lowest clock
    train, test = digits32
    with pytest.raises(WatchError, match="cannot be met by the frequency alone") as raised:
        train_to_accuracy(config(sample_budget=100_000), train, test, device=device,
                          power_cap_w=1.0, checkpoint_dir=tmp_path)
    assert "the run stops rather than go on over the cap" in raised.value.message
    assert any(tmp_path.iterdir())  # a checkpoint: the run resumes from it
    assert device.run_frequency_hz() == found_hz


def test_no_cap_means_no_watchdog_action() -> None:
    device = EmulatedDevice("jetson-nano")
    guard = CapWatchdog(device, power_cap_w=None)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([50.0] * 4)
    guard.finish()
    assert guard.steps == [] and guard.violations == []


# -- during training -----------------------------------------------------------------------------


def test_training_above_the_frontier_steps_down_and_keeps_training(
    digits32: tuple[ArrayDataset, ArrayDataset], row_profile: ProfileTable
) -> None:
    freqs = row_profile.knob_values
    f_star, f_above = freqs[-3], freqs[-2]
    # A cap between the profile's peak at f* and the average at the level above it: f* is the
    # frontier, and a run started one level above it crosses the cap.
    peak_star = row_profile.lookup(B, f_star).peak_power_w
    avg_above = row_profile.lookup(B, f_above).avg_power_w
    cap_w = (peak_star + avg_above) / 2
    assert peak_star < cap_w < avg_above
    assert row_profile.frontier(cap_w)[B].knob_value == f_star

    device = quiet_nano()
    device.set_frequency_hz(f_above)
    train, test = digits32
    record = train_to_accuracy(config(), train, test, device=device, power_cap_w=cap_w)

    assert record.frequency_steps, "the watchdog never acted"
    first = record.frequency_steps[0]
    assert (first.from_hz, first.to_hz) == (f_above, f_star)
    assert record.frequency_hz == f_star  # one level was enough and it stayed there
    period_s = device.sensor_period_s
    assert record.cap_violations
    assert all(v.duration_s <= period_s + EPS for v in record.cap_violations)
    # It kept training after the step, on the device clock, and reached the target.
    assert record.reached
    assert record.curve[-1].device_time_s > first.time_s
    assert any(e.startswith("cap exceeded") for e in record.events)


def test_training_under_the_cap_never_steps(
    digits32: tuple[ArrayDataset, ArrayDataset], row_profile: ProfileTable
) -> None:
    f_star = row_profile.knob_values[-3]
    cap_w = row_profile.lookup(B, f_star).peak_power_w + 0.1
    device = quiet_nano()
    device.set_frequency_hz(f_star)
    train, test = digits32
    record = train_to_accuracy(config(target_accuracy=0.3), train, test, device=device,
                               power_cap_w=cap_w)
    assert record.frequency_steps == [] and record.cap_violations == []
    assert record.peak_power_w is not None and record.peak_power_w <= cap_w


# -- energy --------------------------------------------------------------------------------------


class CountingNano(EmulatedDevice):
    """An emulated device with an energy counter, like NVML's total-energy counter."""

    def energy_counter_j(self) -> float | None:
        return 1_000.0 + self.true_energy_j  # counters do not start at zero


def test_energy_comes_from_the_hardware_counter_when_there_is_one(
    digits32: tuple[ArrayDataset, ArrayDataset],
) -> None:
    train, test = digits32
    # The accounting is the same at any length of run: one evaluation's worth of steps (eight
    # sensor readings; the integral comes 0.24 % off the true energy, well inside the 5 %).
    short = config(sample_budget=256)
    device = CountingNano("jetson-nano")
    start_j = device.true_energy_j
    record = train_to_accuracy(short, train, test, device=device)
    assert record.energy_source == "counter"
    assert record.energy_j == pytest.approx(device.true_energy_j - start_j)

    plain = EmulatedDevice("jetson-nano")
    sampled = train_to_accuracy(short, train, test, device=plain)
    assert sampled.energy_source == "sensor"
    # The sensor integral estimates the same physics: close, but not the counter's value.
    assert sampled.energy_j == pytest.approx(plain.true_energy_j, rel=0.05)
    assert sampled.energy_j != pytest.approx(plain.true_energy_j, rel=1e-9)


# -- hysteresis ----------------------------------------------------------------------------------


def test_a_transient_step_down_is_undone_after_headroom() -> None:
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    device.set_frequency_hz(freqs[-2])
    guard = CapWatchdog(device, power_cap_w=5.0, recovery_readings=10)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.5, 4.55, 4.45, 4.5, 4.52] * 4)  # the plan's level runs well under the cap
    sensor([5.3, 5.4])  # a transient: two readings over the cap
    assert device.current_frequency_hz() == freqs[-3]
    sensor([4.1] * 9)
    assert device.current_frequency_hz() == freqs[-3]  # not yet: 9 of 10 readings
    sensor([4.1])
    assert device.current_frequency_hz() == freqs[-2]  # back at the plan's frequency
    assert [s.to_hz for s in guard.steps] == [freqs[-3], freqs[-2]]
    assert guard.steps[-1].reason.startswith("headroom")
    assert guard.lowest_infeasible_hz() is None  # it was regained
    sensor([4.1] * 30)
    assert device.current_frequency_hz() == freqs[-2]  # never above the plan's frequency
    sensor([5.3, 5.4])  # left again after it was regained: infeasible again
    assert device.current_frequency_hz() == freqs[-3]
    assert guard.lowest_infeasible_hz() == freqs[-2]


def test_a_level_that_really_breaks_the_cap_is_not_retried() -> None:
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    device.set_frequency_hz(freqs[-2])
    guard = CapWatchdog(device, power_cap_w=5.0, recovery_readings=10)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([5.2, 5.3])  # the level itself is over the cap, not a spike
    sensor([4.6] * 50)
    assert device.current_frequency_hz() == freqs[-3]
    assert len(guard.steps) == 1
    assert guard.lowest_infeasible_hz() == freqs[-2]


def test_a_level_that_fails_again_waits_twice_as_long() -> None:
    device = EmulatedDevice("jetson-nano")
    freqs = device.frequencies_hz()
    device.set_frequency_hz(freqs[-2])
    guard = CapWatchdog(device, power_cap_w=5.0, recovery_readings=10)
    sensor = Sensor(guard, device.sensor_period_s)
    sensor([4.5] * 10 + [5.3, 5.4] + [4.1] * 10)  # transient, then back up after 10
    assert device.current_frequency_hz() == freqs[-2]
    sensor([5.3, 5.4])  # it fails again at once
    sensor([4.1] * 19)
    assert device.current_frequency_hz() == freqs[-3]  # now it waits 20 readings
    sensor([4.1])
    assert device.current_frequency_hz() == freqs[-2]
