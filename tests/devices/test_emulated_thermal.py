"""The emulated board's heat: sustained load warms it, past its trip point the clock is pulled
a level per sensor period, a clock above the clamp is refused as a real board refuses it
(FrequencyNotFollowedError with the clock it runs and the cause), and it cools back."""

from __future__ import annotations

import pytest

from wattcap.devices import EmulatedDevice
from wattcap.devices.clock_clamp import ceiling_under_hz, lock_clock_within
from wattcap.devices.emulated_thermal import BoardHeat, ThermalModel
from wattcap.devices.errors import FrequencyNotFollowedError
from wattcap.devices.workload import workload_for

MODEL = "digits32-cnn"


def test_the_temperature_follows_the_lumped_model_exactly() -> None:
    heat = BoardHeat(ThermalModel(resistance_c_per_w=5.0, time_constant_s=10.0), levels=4)
    heat.heat(10.0, 8.0)  # one time constant at 8 W: 63 % of the way to 25 + 40 °C
    assert heat.temperature_c == pytest.approx(65.0 - 40.0 * 0.36787944, rel=1e-9)
    heat.heat(1e6, 0.0)
    assert heat.temperature_c == pytest.approx(25.0)


def test_the_clamp_steps_a_level_per_period_and_lifts_below_the_release() -> None:
    heat = BoardHeat(ThermalModel(resistance_c_per_w=1.0, start_c=90.0), levels=5)
    heat.on_period(0.0)
    heat.on_period(0.5)  # within the governor's 1 s polling interval: no second step
    assert heat.clamp_index == 3
    heat.on_period(1.0)
    assert heat.clamp_index == 2 and heat.throttling
    heat.temperature_c = 82.0  # between release (80) and trip (85): the clamp holds
    heat.on_period(2.0)
    assert heat.clamp_index == 2
    heat.temperature_c = 79.0
    heat.on_period(3.0)
    assert heat.clamp_index == 3


def test_a_bad_model_is_refused() -> None:
    with pytest.raises(ValueError, match="release"):
        ThermalModel(resistance_c_per_w=1.0, release_c=90.0)
    with pytest.raises(ValueError, match="resistance"):
        ThermalModel(resistance_c_per_w=0.0)


def _sustained(device: EmulatedDevice, seconds: float) -> None:
    cost = workload_for(MODEL).step_cost(64, device.spec.allocator_overhead_factor)
    start = device.now_s()
    while device.now_s() - start < seconds:
        device.execute(None, cost)


def test_sustained_load_throttles_and_the_board_says_why() -> None:
    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=15.0, time_constant_s=5.0))
    freqs = device.frequencies_hz()
    top_hz = freqs[-1]
    assert device.current_frequency_hz() == top_hz
    _sustained(device, 30.0)
    assert device.heat is not None and device.heat.throttling
    running_hz = device.current_frequency_hz()
    assert running_hz < top_hz and device.run_frequency_hz() == top_hz  # the lock stays
    # the readings carry the clock the board runs
    with pytest.raises(FrequencyNotFollowedError) as raised:
        device.set_frequency_hz(top_hz)
    err = raised.value
    assert (err.requested_hz, err.running_hz, err.cause) == (top_hz, running_hz, "thermal")
    assert "°C" in err.cause_detail
    # under the clamp a clock is followed
    assert device.set_frequency_hz(freqs[0]) == freqs[0]


def test_without_a_thermal_model_nothing_throttles() -> None:
    device = EmulatedDevice("jetson-nano")
    _sustained(device, 30.0)
    assert device.current_frequency_hz() == device.frequencies_hz()[-1]
    assert device.set_frequency_hz(device.frequencies_hz()[-1]) == device.frequencies_hz()[-1]


def test_a_cooled_board_follows_the_clock_again() -> None:
    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=15.0, time_constant_s=5.0))
    _sustained(device, 30.0)
    top_hz = device.frequencies_hz()[-1]
    assert device.current_frequency_hz() < top_hz
    device.idle(120.0)
    assert device.current_frequency_hz() == top_hz


def test_lock_clock_within_locks_the_boards_ceiling_and_records_the_clamp() -> None:
    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=10.0, time_constant_s=600.0, start_c=95.0, step_interval_s=0.05))
    freqs = device.frequencies_hz()
    device.idle(4 * device.sensor_period_s)
    assert device.current_frequency_hz() == freqs[-5]
    assert lock_clock_within(device, freqs[-1], "plan") == freqs[-5]
    assert device.run_frequency_hz() == freqs[-5]  # the clock wattcap states is the one run
    (clamp,) = device.clock_clamps
    assert (clamp.requested_hz, clamp.running_hz, clamp.ceiling_hz, clamp.by) == (
        freqs[-1], freqs[-5], freqs[-5], "plan")
    # a clock under the clamp records nothing
    assert lock_clock_within(device, freqs[0], "plan") == freqs[0]
    assert len(device.clock_clamps) == 1


def test_the_ceiling_of_a_reading_a_few_khz_off_is_its_table_entry() -> None:
    table = [76_800_000, 153_600_000, 230_400_000]
    assert ceiling_under_hz(table, 153_599_000) == 153_600_000
    assert ceiling_under_hz(table, 200_000_000) == 153_600_000
    assert ceiling_under_hz(table, 1_000) == 76_800_000
