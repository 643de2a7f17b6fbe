"""A reading taken while the board's power limit acts (NVML's "SwPowerCap" clock event reason)
says the board draws at least that limit. Where the limit is the cap (a Session's hardware
backstop), a reading over the cap then is not the sensor's noise, however small the excess: the
watchdog answers it at once instead of waiting for a second reading, which a lagging sensor
would leave a period longer over the cap. The emulator and the fake NVML report the reason as
the hardware does; the rule is tested on scripted readings and on an unkind emulated A100."""

from __future__ import annotations

import time

import pytest

from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from wattcap.devices import EmulatedDevice, PowerReading
from wattcap.devices.emulated_board import draw_board_state
from wattcap.devices.nvml import NvmlDevice
from wattcap.devices.workload import workload_for
from wattcap.experiments.replay import PROFILE_BOARD_SEED
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings
from wattcap.runtime.watchdog import CapWatchdog

A100 = "a100-sxm4"
NOISE_W = 2.6  # one standard deviation of the emulated A100's sensor


def _readings_while_stepping(device: EmulatedDevice, steps: int = 20) -> list[PowerReading]:
    cost = workload_for("resnet18").step_cost(256, device.spec.allocator_overhead_factor)
    readings: list[PowerReading] = []
    with device.sensor_ticks(readings.append):
        for _ in range(steps):
            device.end_step(device.begin_step(cost))
    return readings


def test_the_emulator_says_when_its_power_limit_acts() -> None:
    device = EmulatedDevice(A100)
    unheld = _readings_while_stepping(device)
    assert unheld and all(r.power_limited is False for r in unheld)
    device.set_power_limit_w(0.8 * max(r.power_w for r in unheld))  # under what it draws
    held = _readings_while_stepping(device)
    assert held and all(r.power_limited is True for r in held)
    # a board without a power limit cannot say
    nano = EmulatedDevice("jetson-nano")
    cost = workload_for("digits32-cnn").step_cost(32, nano.spec.allocator_overhead_factor)
    readings: list[PowerReading] = []
    with nano.sensor_ticks(readings.append):
        for _ in range(200):
            nano.end_step(nano.begin_step(cost))
    assert readings and all(r.power_limited is None for r in readings)


def test_nvml_readings_carry_the_sw_power_cap_reason() -> None:
    gpu = FakeGpu(busy=True, busy_draw_mw=400_000)
    device = NvmlDevice(0, pynvml_module=FakeNvml([gpu]))

    def readings() -> list[PowerReading]:
        seen: list[PowerReading] = []
        with device.sensor_ticks(seen.append):
            time.sleep(0.25)
        return seen

    assert (free := readings()) and all(r.power_limited is False for r in free)
    device.set_power_limit_w(300.0)  # the driver now holds the 400 W draw at 300 W
    held = readings()
    assert held and all(r.power_limited is True for r in held)
    assert held[-1].power_w == pytest.approx(300.0)
    # a limit enforced out of band under the cap (a BMC at 290 W), the one set at 700 W: the
    # board is held under the cap, so a reading over it is the sensor's noise and waits
    device.set_power_limit_w(700.0)
    gpu.enforced_limit_mw = 290_000
    guard = CapWatchdog(device, power_cap_w=300.0, sensor_noise_w=NOISE_W)
    assert device.power_limit_w() == 700.0 and device.enforced_power_limit_w() == 290.0
    guard(PowerReading(0.1, 300.5, "test", power_limited=True))
    assert guard.steps == []
    gpu.enforced_limit_mw = None
    # the reasons cannot be read: the reading stands, it says nothing of the limit
    gpu.fail["nvmlDeviceGetCurrentClocksEventReasons"] = (0, "raw")
    unread = readings()
    assert unread and all(r.power_limited is None for r in unread)
    device.close()


def _guard(limit_w: float | None) -> tuple[CapWatchdog, EmulatedDevice]:
    device = EmulatedDevice(A100)
    if limit_w is not None:
        device.set_power_limit_w(limit_w)
    return CapWatchdog(device, power_cap_w=300.0, sensor_noise_w=NOISE_W), device


def _feed(guard: CapWatchdog, readings: list[tuple[float, bool | None]]) -> None:
    for index, (power_w, limited) in enumerate(readings, start=1):
        guard(PowerReading(0.1 * index, power_w, "test", power_limited=limited))


def test_one_reading_over_the_cap_while_the_limit_at_the_cap_acts_is_answered_at_once() -> None:
    slightly_over = 300.0 + 0.3 * NOISE_W  # well within the sensor's noise
    guard, device = _guard(limit_w=300.0)
    top_hz = device.run_frequency_hz()
    _feed(guard, [(290.0, False), (slightly_over, True)])
    (step,) = guard.steps
    assert step.from_hz == top_hz and step.to_hz < top_hz
    assert "power limit (300 W) was acting" in step.reason
    # the same reading without the reason waits for a second one, as before
    guard, _ = _guard(limit_w=300.0)
    _feed(guard, [(290.0, False), (slightly_over, False)])
    assert guard.steps == []
    _feed(guard, [(slightly_over, False)])
    assert len(guard.steps) == 1 and "for more than one sensor period" in guard.steps[0].reason
    # a limit acting under the cap says the board draws that limit, not the cap: it waits
    guard, _ = _guard(limit_w=250.0)
    _feed(guard, [(290.0, True), (slightly_over, True)])
    assert guard.steps == []


def test_a_limit_dithering_the_clock_does_not_hold_the_decision_back() -> None:
    """NVIDIA's limit moves the clock it holds step by step: those drops are the limit at
    work, not a change whose old power lingers, so they do not restart the settle wait (which
    would keep every one-reading decision waiting). A limit above the cap decides too."""
    mhz = 1_000_000
    for limit_w in (300.0, 400.0):
        guard, device = _guard(limit_w)
        top = device.run_frequency_hz()
        readings = [(290.0, 1245 * mhz), (300.5, 1230 * mhz)]
        for index, (power_w, clock_hz) in enumerate(readings, start=1):
            guard(PowerReading(0.1 * index, power_w, "test", clock_hz=clock_hz,
                               power_limited=True))
        (step,) = guard.steps
        assert step.from_hz == top and f"power limit ({limit_w:g} W) was acting" in step.reason
    # a drop the limit did not make (a thermal clamp) still waits out its stale readings
    guard, _ = _guard(300.0)
    for index, (power_w, clock_hz) in enumerate([(290.0, 1245 * mhz), (300.5, 1230 * mhz)], 1):
        guard(PowerReading(0.1 * index, power_w, "test", clock_hz=clock_hz,
                           power_limited=False))
    assert guard.steps == []


def test_right_after_a_step_the_reason_does_not_decide_alone() -> None:
    """Readings right after a drop may carry the power from before it: the reason does not
    make one of them a decision (one step per violation, as for the noise rule)."""
    guard, _ = _guard(limit_w=300.0)
    _feed(guard, [(290.0, False), (300.5, True)])
    assert len(guard.steps) == 1
    _feed(guard, [(300.5, True), (300.5, True)])  # stale: first never counts, second waits
    assert len(guard.steps) == 1


def test_an_unkind_a100_under_its_backstop_is_over_the_cap_two_periods_at_most() -> None:
    """The unkind A100 board of seed 2 draws 9 % more GPU power than the profile's and its
    limit lets average power pass 300 W by 2.6 %: at the run's start its board is over the
    cap by less than the sensor's noise. With the reason, the watchdog answers at the first
    reading over the cap (two periods really over it, by the emulator's ground truth); by the
    noise alone, at the second (three)."""
    profile = Profiler(EmulatedDevice(A100, board=draw_board_state(A100, PROFILE_BOARD_SEED)),
                       "resnet18", batch_sizes=(256,)).run(exhaustive=True)
    device = EmulatedDevice(A100, seed=2, board=draw_board_state(A100, 2))
    device.true_period_w = []
    with Session(device, model="resnet18",
                 planning=PlanSettings(profile=profile, batch_size=256),
                 cap=CapSettings(power_cap=300.0),
                 device_handling=DeviceHandling(handle_signals=False)) as session:
        while device.now_s() < 3.0:
            with session.step():
                pass
    record = session.record
    assert record is not None
    assert any("hardware backstop: power limit 300 W" in e for e in record.events)
    first = record.frequency_steps[0]
    assert "power limit (300 W) was acting" in first.reason
    over = [t for t, power_w in device.true_period_w if power_w > 300.0]
    assert over and len(over) <= 2, device.true_period_w[:6]
    assert first.time_s <= over[-1] + 1e-9
