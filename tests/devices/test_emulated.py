"""The emulated device (DESIGN §3): the qualitative facts of the reference paper's measurements,
the sensor, the virtual clock, drift, settings and the spec files."""

from __future__ import annotations

import json
import statistics
from importlib import resources
from itertools import pairwise

import pytest
from pydantic import ValidationError

from wattcap.devices import (
    DeviceError,
    DeviceOutOfMemoryError,
    DeviceSpec,
    Drift,
    EmulatedDevice,
    list_specs,
    load_spec,
)
from wattcap.devices.base import PowerReading
from wattcap.devices.workload import DEFAULT_BATCH_SIZES, workload_for
from wattcap.measure.profiling import Profiler

NANO = "jetson-nano"


def _quiet_nano() -> DeviceSpec:
    """The Nano spec with a noise-free sensor, for exact comparisons of measurements."""
    return load_spec(NANO).model_copy(update={"sensor_noise_w": 0.0})


def _cost(workload, batch_size: int, spec: DeviceSpec | None = None):
    spec = spec or load_spec(NANO)
    return workload.step_cost(batch_size, spec.allocator_overhead_factor)


def _fitting(workload, device: EmulatedDevice) -> list[int]:
    overhead = device.spec.allocator_overhead_factor
    return [
        b for b in DEFAULT_BATCH_SIZES
        if workload.memory_needed_bytes(b, overhead) <= device.memory_bytes()
    ]


# -- power and time over (b, f) -----------------------------------------------------------------
@pytest.mark.parametrize("model", ["resnet18", "mobilenetv2", "efficientvit"])
def test_power_grows_with_batch_size_and_frequency(model) -> None:
    """Noise-free model power (step average and busy phase) rises with b at every f, and with f
    at every b."""
    device = EmulatedDevice(NANO)
    workload = workload_for(model)
    batch_sizes = _fitting(workload, device)
    freqs = device.frequencies_hz()
    avg = {(b, f): device.model_step(_cost(workload, b), f)[1] for b in batch_sizes for f in freqs}
    busy = {
        (b, f): next(p.power_w for p in device.phases(_cost(workload, b), f) if p.name == "busy")
        for b in batch_sizes for f in freqs
    }
    for table in (avg, busy):
        for f in freqs:
            column = [table[b, f] for b in batch_sizes]
            assert column == sorted(column), f"power falls with b at {f / 1e6:.1f} MHz"
        for b in batch_sizes:
            row = [table[b, f] for f in freqs]
            assert row == sorted(row), f"power falls with f at b={b}"
            assert row[-1] > row[0]
    assert avg[batch_sizes[-1], freqs[-1]] > avg[batch_sizes[0], freqs[-1]] + 0.5


def test_measured_peak_power_rises_with_batch_size_and_frequency() -> None:
    """Through the profiler (noise-free sensor): peak power rises along every row and column,
    up to sensor-window effects of short high-power phases (≤ 0.2 W), and by several watts
    overall."""
    profile = Profiler(EmulatedDevice(_quiet_nano()), "resnet18").run(exhaustive=True)
    rows = profile.rows()
    tolerance_w = 0.2
    for b, row in rows.items():
        peaks = [p.peak_power_w for p in row]
        for lower, higher in pairwise(peaks):
            assert higher >= lower - tolerance_w, f"b={b}: {peaks}"
        assert peaks[-1] > peaks[0] + 1.0
    for index, f in enumerate(profile.knob_values):
        column = [rows[b][index].peak_power_w for b in sorted(rows)]
        for lower, higher in pairwise(column):
            assert higher >= lower - tolerance_w, f"{f / 1e6:.1f} MHz: {column}"
    f_max = profile.knob_values[-1]
    assert profile.lookup(128, f_max).peak_power_w > profile.lookup(4, f_max).peak_power_w + 3


def test_time_per_sample_falls_with_batch_size_and_frequency(nano_resnet18_profile) -> None:
    rows = nano_resnet18_profile.rows()
    for b, row in rows.items():
        times = [p.seconds_per_sample for p in row]
        assert all(later < earlier for earlier, later in pairwise(times)), f"b={b}"
    for index in range(len(nano_resnet18_profile.knob_values)):
        column = [rows[b][index].seconds_per_sample for b in sorted(rows)]
        assert all(later < earlier for earlier, later in pairwise(column))


def test_tight_cap_favours_a_smaller_batch_at_a_higher_frequency(nano_resnet18_profile) -> None:
    """At 5 W the largest batch only runs at a low frequency, and a smaller batch at a higher
    frequency processes samples faster (the paper's central observation)."""
    cap = 5.0
    frontier = nano_resnet18_profile.frontier(cap)
    b_max = max(frontier)
    f_max = nano_resnet18_profile.knob_values[-1]
    largest = frontier[b_max]
    assert largest.knob_value <= f_max / 2
    faster = [
        p for b, p in frontier.items()
        if b < b_max and p.knob_value > largest.knob_value
        and p.seconds_per_sample < largest.seconds_per_sample
    ]
    assert faster, "no smaller batch beats the largest one under a tight cap"


def test_mobilenetv2_draws_less_power_than_resnet18(resnet18_workload, mobilenetv2_workload):
    device = EmulatedDevice(_quiet_nano())
    for b in (4, 16, 32, 64):
        for f in device.frequencies_hz():
            resnet = device.model_step(_cost(resnet18_workload, b), f)
            mobile = device.model_step(_cost(mobilenetv2_workload, b), f)
            # average power strictly lower; the highest phase is never higher (at low f and
            # small b both peak in the same DRAM-bound optimizer phase)
            assert mobile[1] < resnet[1], (b, f)
            assert mobile[2] <= resnet[2], (b, f)
        f_max = device.frequencies_hz()[-1]
        if b >= 16:  # busy phase above the optimizer phase: the peaks differ
            assert device.model_step(_cost(mobilenetv2_workload, b), f_max)[2] < (
                device.model_step(_cost(resnet18_workload, b), f_max)[2]
            )
    # and the measured peak at the top of the grid, through the sensor
    f_max = device.frequencies_hz()[-1]
    r = Profiler(EmulatedDevice(_quiet_nano()), "resnet18", batch_sizes=(64,)).measure(64, f_max)
    m = Profiler(EmulatedDevice(_quiet_nano()), "mobilenetv2", batch_sizes=(64,)).measure(64, f_max)
    assert m.peak_power_w < r.peak_power_w - 1.0


def test_mobilenetv2_parallelises_better(
    nano_reference_profiles, nano_resnet18_profile
) -> None:
    """Relative drop of time per sample from b=4 to the model's largest batch, at f_max."""
    mobilenet = next(p for p in nano_reference_profiles if p.model == "mobilenetv2")

    def drop(profile) -> float:
        f_max = profile.knob_values[-1]
        small = profile.lookup(4, f_max).seconds_per_sample
        large = profile.lookup(profile.max_batch_size, f_max).seconds_per_sample
        return 1.0 - large / small

    assert drop(mobilenet) > drop(nano_resnet18_profile)
    assert 0.0 < drop(nano_resnet18_profile) < 1.0


def test_nano_memory_fits_resnet18_at_128_but_not_the_others(
    resnet18_workload, mobilenetv2_workload, efficientvit_workload
) -> None:
    device = EmulatedDevice(NANO)
    overhead = device.spec.allocator_overhead_factor
    memory = device.memory_bytes()
    assert resnet18_workload.max_batch_size(memory, overhead) == 128
    device.execute(None, _cost(resnet18_workload, 128))  # does not raise
    for workload in (mobilenetv2_workload, efficientvit_workload):
        assert workload.max_batch_size(memory, overhead) == 64
        clock = device.now_s()
        with pytest.raises(DeviceOutOfMemoryError) as info:
            device.execute(None, _cost(workload, 128))
        assert "128" in str(info.value)
        assert isinstance(info.value, MemoryError)
        assert device.now_s() == clock  # nothing ran
        device.execute(None, _cost(workload, 64))


def test_resnet18_at_128_and_fmax_is_close_to_the_maxn_envelope(nano_resnet18_profile) -> None:
    spec = load_spec(NANO)
    budget = spec.power_modes["MAXN"].budget_w
    point = nano_resnet18_profile.lookup(128, spec.f_max_hz)
    assert 8.5 <= point.peak_power_w <= 10.5
    true_peak = EmulatedDevice(NANO).model_step(
        _cost(workload_for("resnet18"), 128), spec.f_max_hz
    )[2]
    assert 8.5 <= true_peak <= budget
    assert point.avg_power_w <= budget


def test_5w_power_mode_caps_frequencies() -> None:
    full = EmulatedDevice(NANO)
    low = EmulatedDevice(NANO, power_mode="5W")
    assert max(low.frequencies_hz()) <= 640e6
    assert low.current_frequency_hz() == max(low.frequencies_hz())
    assert set(low.frequencies_hz()) < set(full.frequencies_hz())
    with pytest.raises(DeviceError):
        low.set_frequency_hz(max(full.frequencies_hz()))
    with pytest.raises(DeviceError) as info:
        EmulatedDevice(NANO, power_mode="TURBO")
    assert "MAXN" in str(info.value)


# -- sensor --------------------------------------------------------------------------------------
def test_one_reading_per_sensor_period_of_device_time(resnet18_workload) -> None:
    device = EmulatedDevice(NANO)
    period = device.sensor_period_s
    readings: list[PowerReading] = []
    start = device.now_s()
    with device.sensor_ticks(readings.append):
        for _ in range(3):
            device.execute(None, _cost(resnet18_workload, 32))
    elapsed = device.now_s() - start
    assert len(readings) == int(elapsed / period) or len(readings) == int(elapsed / period) + 1
    assert len(readings) > 10
    gaps = [b.time_s - a.time_s for a, b in pairwise(readings)]
    assert all(gap == pytest.approx(period) for gap in gaps)
    assert all(start < r.time_s <= device.now_s() + 1e-9 for r in readings)
    assert all(r.rail == device.sensor_rail == "POM_5V_IN" for r in readings)
    # outside the block no callback fires, but the sensor keeps its latest value
    device.execute(None, _cost(resnet18_workload, 32))
    assert readings[-1].time_s <= start + elapsed + 1e-9
    assert device.read_power_w() > 0


def test_sensor_noise_has_about_the_spec_std(resnet18_workload) -> None:
    """A long busy phase at constant power: readings scatter around it with the spec's std."""
    device = EmulatedDevice(NANO, seed=3)
    f_low = device.frequencies_hz()[0]
    device.set_frequency_hz(f_low)
    cost = _cost(resnet18_workload, 128)
    busy = next(p for p in device.phases(cost, f_low) if p.name == "busy")
    assert busy.duration_s > 100 * device.sensor_period_s
    readings: list[PowerReading] = []
    with device.sensor_ticks(readings.append):
        device.execute(None, cost)
    # readings whose window lies inside the busy phase (skip the first and last two)
    inner = [r.power_w for r in readings[2:-2]]
    assert len(inner) > 100
    sigma = device.spec.sensor_noise_w
    assert statistics.fmean(inner) == pytest.approx(busy.power_w, abs=3 * sigma)
    assert 0.6 * sigma < statistics.stdev(inner) < 1.5 * sigma


def test_sensor_averages_over_its_period() -> None:
    """A step shorter than the sensor period is averaged with the idle time around it: the
    sensor reads less than the step's busy-phase power."""
    spec = _quiet_nano()
    device = EmulatedDevice(spec)
    cost = workload_for("digits32-cnn").step_cost(4, spec.allocator_overhead_factor)
    f_max = device.frequencies_hz()[-1]
    phases = device.phases(cost, f_max)
    step_s = sum(p.duration_s for p in phases)
    busy_w = max(p.power_w for p in phases)
    assert step_s < spec.sensor_period_s
    readings: list[PowerReading] = []
    with device.sensor_ticks(readings.append):
        device.idle(spec.sensor_period_s * 1.5)
        device.execute(None, cost)
        device.idle(spec.sensor_period_s * 3)
    assert max(r.power_w for r in readings) < busy_w - 0.1
    assert max(r.power_w for r in readings) > device.idle_power_w(f_max)
    # a long run of the same steps is seen at its time-averaged power
    long_readings: list[PowerReading] = []
    with device.sensor_ticks(long_readings.append):
        for _ in range(200):
            device.execute(None, cost)
    average_w = device.model_step(cost, f_max)[1]
    inner = [r.power_w for r in long_readings[1:]]
    assert statistics.fmean(inner) == pytest.approx(average_w, rel=0.03)


# -- clock, frequency changes, drift, restore ---------------------------------------------------
def test_virtual_clock_advances_by_the_step_time(resnet18_workload) -> None:
    device = EmulatedDevice(NANO)
    cost = _cost(resnet18_workload, 16)
    for f in (device.frequencies_hz()[0], device.frequencies_hz()[-1]):
        device.set_frequency_hz(f)
        before = device.now_s()
        took = device.execute(None, cost)
        assert device.now_s() - before == pytest.approx(took)
        assert took == pytest.approx(device.model_step(cost, f)[0])
    before = device.now_s()
    device.idle(1.25)
    assert device.now_s() - before == pytest.approx(1.25)


def test_energy_accounting_matches_the_phases(resnet18_workload) -> None:
    device = EmulatedDevice(NANO)
    cost = _cost(resnet18_workload, 32)
    took = device.execute(None, cost)
    step_s, average_w, _ = device.model_step(cost, device.current_frequency_hz())
    assert device.true_energy_j == pytest.approx(took * average_w)


def test_frequency_change_mid_step_changes_the_remaining_time(resnet18_workload) -> None:
    device = EmulatedDevice(NANO)
    cost = _cost(resnet18_workload, 128)
    f_low, f_max = device.frequencies_hz()[0], device.frequencies_hz()[-1]
    fast_s = device.model_step(cost, f_max)[0]
    slow_s = device.model_step(cost, f_low)[0]

    def throttle(reading: PowerReading) -> None:
        if device.current_frequency_hz() != f_low:
            device.set_frequency_hz(f_low)

    with device.sensor_ticks(throttle):
        took = device.execute(None, cost)
    assert fast_s < took < slow_s
    # the first tick came one sensor period in: the rest of the step ran at f_low
    expected = device.sensor_period_s + (1 - device.sensor_period_s / fast_s) * slow_s
    assert took == pytest.approx(expected, rel=0.05)
    assert device.frequency_log == [(pytest.approx(device.sensor_period_s), f_low)]


def test_drift_changes_time_and_power(resnet18_workload) -> None:
    drift = Drift(after_s=10.0, speed_factor=0.8, power_factor=1.2)
    device = EmulatedDevice(NANO, drift=drift)
    cost = _cost(resnet18_workload, 64)
    f_max = device.frequencies_hz()[-1]
    before_s, before_w, _ = device.model_step(cost, f_max)
    assert device.execute(None, cost) == pytest.approx(before_s)
    device.idle(drift.after_s)
    after_s, after_w, _ = device.model_step(cost, f_max)
    assert after_s > before_s * 1.1
    assert after_w > before_w
    assert device.execute(None, cost) == pytest.approx(after_s)
    undrifted = EmulatedDevice(NANO)
    undrifted.idle(drift.after_s)
    assert undrifted.model_step(cost, f_max)[0] == pytest.approx(before_s)


@pytest.mark.parametrize("mode", ["MAXN", "5W"])
def test_restore_brings_back_the_initial_frequency(mode) -> None:
    device = EmulatedDevice(NANO, power_mode=mode)
    initial = device.current_frequency_hz()
    device.set_frequency_hz(device.frequencies_hz()[0])
    assert device.current_frequency_hz() != initial
    device.restore()
    assert device.current_frequency_hz() == initial
    device.restore()  # idempotent
    assert device.current_frequency_hz() == initial
    with device:
        device.set_frequency_hz(device.frequencies_hz()[1])
    assert device.current_frequency_hz() == initial


def test_invalid_frequency_lists_the_choices() -> None:
    device = EmulatedDevice(NANO)
    with pytest.raises(DeviceError) as info:
        device.set_frequency_hz(500_000_000)
    message = str(info.value)
    assert "500.0 MHz" in message
    for f in device.frequencies_hz():
        assert f"{f / 1e6:.1f}" in message
    assert device.current_frequency_hz() == device.frequencies_hz()[-1]


# -- spec files ----------------------------------------------------------------------------------
NOT_CONSTANTS = {"name", "description", "sources", "default_power_mode", "sensor_rail"}


def test_bundled_specs_cite_a_source_for_every_constant() -> None:
    assert {"jetson-nano", "jetson-tx2nx"} <= set(list_specs())
    for name in list_specs():
        spec = load_spec(name)
        # an optional constant a spec leaves out keeps its default and needs no source
        constants = (set(DeviceSpec.model_fields) & spec.model_fields_set) - NOT_CONSTANTS
        assert constants <= set(spec.sources), name
        assert all(text.strip() for text in spec.sources.values())
        assert len(spec.voltage_curve.volts) == len(spec.voltage_curve.frequencies_hz)
        assert spec.memory_usable_bytes < spec.memory_total_bytes
        for mode in spec.power_modes.values():
            assert mode.gpu_max_hz <= spec.f_max_hz


def test_nano_spec_matches_the_design_facts() -> None:
    spec = load_spec(NANO)
    assert [round(f / 1e5) / 10 for f in spec.frequencies_hz] == [
        76.8, 153.6, 230.4, 307.2, 384.0, 460.8, 537.6, 614.4, 691.2, 768.0, 844.8, 921.6
    ]
    assert spec.peak_flops_at_fmax == pytest.approx(236e9)
    assert spec.memory_bandwidth_bytes_per_s == pytest.approx(25.6e9)
    assert spec.power_modes["MAXN"].budget_w == 10.0
    assert spec.power_modes["5W"].budget_w == 5.0


def test_spec_without_a_source_is_rejected() -> None:
    shipped = resources.files("wattcap.devices") / "specs" / "jetson-nano.json"
    raw = json.loads(shipped.read_text())
    DeviceSpec.model_validate(raw)  # the file as shipped is valid
    for dropped in ("gpu_dyn_max_w", "sensor_noise_w", "frequencies_hz"):
        broken = json.loads(json.dumps(raw))
        del broken["sources"][dropped]
        with pytest.raises(ValidationError) as info:
            DeviceSpec.model_validate(broken)
        assert dropped in str(info.value)


def test_spec_with_unsorted_frequencies_or_unknown_mode_is_rejected() -> None:
    raw = load_spec(NANO).model_dump()
    unsorted = dict(raw, frequencies_hz=list(reversed(raw["frequencies_hz"])))
    with pytest.raises(ValidationError):
        DeviceSpec.model_validate(unsorted)
    with pytest.raises(ValidationError):
        DeviceSpec.model_validate(dict(raw, default_power_mode="TURBO"))


def test_spec_file_by_path_and_unknown_name(tmp_path) -> None:
    path = tmp_path / "my-board.json"
    spec = load_spec(NANO).model_copy(update={"name": "my-board"})
    path.write_text(spec.model_dump_json())
    assert load_spec(path).name == "my-board"
    assert EmulatedDevice(load_spec(path)).name == "my-board"
    with pytest.raises(KeyError) as info:
        load_spec("jetson-nope")
    assert "jetson-nano" in str(info.value)


@pytest.mark.parametrize(("name", "guess"), [
    ("emulated-h100-sxm", "did you mean emulated:h100-sxm?"),
    ("emulated_h100", "did you mean emulated:h100-sxm?"),
    ("h100-sxm", "did you mean emulated:h100-sxm?"),
    ("emulated:", "use auto, jetson, nvml:<index> or emulated:<"),
    ("nvml:x", "use nvml:0 (the first GPU)"),
])
def test_a_mistyped_device_is_refused_never_read_as_the_nano(name: str, guess: str) -> None:
    from wattcap.devices import DeviceNotFoundError, get_device

    with pytest.raises(DeviceNotFoundError, match="unknown device") as refused:
        get_device(name)
    assert guess in (refused.value.hint or "")


def test_auto_without_a_gpu_says_it_uses_the_emulated_nano(monkeypatch, tmp_path) -> None:
    import wattcap.devices.nvml as nvml
    from wattcap.devices import get_device

    monkeypatch.setattr(nvml, "list_nvml_devices", lambda: [])
    with pytest.warns(UserWarning, match="no Jetson and no NVIDIA GPU here: using the emulated"):
        device = get_device("auto", sysfs_root=str(tmp_path))
    assert device.name == "jetson-nano"
    assert get_device("emulated").name == "jetson-nano"  # the documented short form


def test_remembered_phases_follow_a_drift_and_a_changed_spec(resnet18_workload) -> None:
    """The phases a device remembers are those of its state now: a drift that starts, or a
    spec swapped in, gives new ones; a caller changing the list it got changes nothing."""
    device = EmulatedDevice(NANO, drift=Drift(after_s=1.0, speed_factor=0.5, power_factor=1.2))
    cost, f = _cost(resnet18_workload, 32), device.spec.f_max_hz
    before = device.phases(cost, f)
    before.clear()
    assert device.phases(cost, f) == EmulatedDevice(NANO).phases(cost, f)
    device.idle(1.5)  # the drift has started
    drifted = device.phases(cost, f)
    assert drifted[1].duration_s > EmulatedDevice(NANO).phases(cost, f)[1].duration_s * 1.9
    assert drifted[1].power_w > EmulatedDevice(NANO).phases(cost, f)[1].power_w
    device.spec = device.spec.model_copy(update={"launch_overhead_s":
                                                 2 * device.spec.launch_overhead_s})
    assert device.phases(cost, f)[0].duration_s == pytest.approx(2 * drifted[0].duration_s)
