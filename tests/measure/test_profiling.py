"""Profiler: exhaustive and cap-pruned searches on the emulated Jetson Nano."""

from __future__ import annotations

import pytest

from wattcap.core.profile import ProfileTable
from wattcap.core.progress import ProgressUpdate
from wattcap.devices import DeviceSpec, EmulatedDevice, load_spec
from wattcap.devices.base import PowerReading
from wattcap.devices.workload import workload_for
from wattcap.measure.profiling import PowerStats, Profiler

NANO = "jetson-nano"


def _quiet_nano() -> DeviceSpec:
    return load_spec(NANO).model_copy(update={"sensor_noise_w": 0.0})


# Sensor noise (std 0.05 W) and sensor-window alignment stay below this. Alignment: a point's
# readings are taken only from whole sensor periods of its own steps, and where one step spans
# several periods the windows fall at one alignment on its short, hotter optimizer phase
# (ResNet18: 20 ms at up to +0.7 W inside a 50 ms window), so a peak moves by up to ~0.3 W.
MARGIN_W = 0.3


def _decisive_rows(profile: ProfileTable, cap: float) -> list[int]:
    """Batch sizes whose every measured peak is more than MARGIN_W from the cap: their f*(b)
    does not depend on which side of the cap sensor noise puts a reading."""
    return [
        b for b, row in profile.rows().items()
        if all(abs(p.peak_power_w - cap) > MARGIN_W for p in row)
    ]


def _check_pruned_against_exhaustive(
    exhaustive: ProfileTable, spec: DeviceSpec | str, model: str
) -> None:
    """For caps every 0.1 W across the profile's power range: the pruned search measures fewer
    points and finds the exhaustive f*(b) on every decisive row."""
    peaks = [p.peak_power_w for p in exhaustive.points]
    compared_rows = whole_frontiers = 0
    cap = min(peaks) + 0.05
    while cap < max(peaks):
        pruned = Profiler(EmulatedDevice(spec), model).run(power_cap_w=cap)
        assert pruned.mode == "pruned" and pruned.power_cap_w == cap
        assert pruned.points_measured == len(pruned.points) < exhaustive.points_measured
        assert 0 < pruned.profiling_device_s < exhaustive.profiling_device_s
        expected = {b: p.knob_value for b, p in exhaustive.frontier(cap).items()}
        found = {b: p.knob_value for b, p in pruned.frontier(cap).items()}
        decisive = _decisive_rows(exhaustive, cap)
        for b in decisive:
            assert found.get(b) == expected.get(b), (cap, b)
        compared_rows += len(decisive)
        if len(decisive) == len(exhaustive.batch_sizes):
            assert found == expected
            whole_frontiers += 1
        cap = round(cap + 0.1, 3)
    assert compared_rows >= 30
    # ResNet18's peaks leave caps clear of every row; MobileNetV2's are too dense for that
    assert whole_frontiers >= (1 if model == "resnet18" else 0)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
@pytest.mark.parametrize("model", ["resnet18", "mobilenetv2"])
def test_pruned_finds_the_exhaustive_frontier_noise_free(model) -> None:
    spec = _quiet_nano()
    exhaustive = Profiler(EmulatedDevice(spec), model).run(exhaustive=True)
    _check_pruned_against_exhaustive(exhaustive, spec, model)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
@pytest.mark.parametrize("model", ["resnet18", "mobilenetv2"])
def test_pruned_finds_the_exhaustive_frontier_with_sensor_noise(
    model, nano_resnet18_profile, nano_reference_profiles
) -> None:
    exhaustive = (
        nano_resnet18_profile if model == "resnet18"
        else next(p for p in nano_reference_profiles if p.model == model)
    )
    _check_pruned_against_exhaustive(exhaustive, NANO, model)
    # pruned points agree with the exhaustive ones on time (the sensor adds no noise to time)
    pruned = Profiler(EmulatedDevice(NANO), model).run(power_cap_w=5.0)
    for point in pruned.points:
        same = exhaustive.lookup(point.batch_size, point.knob_value)
        assert point.seconds_per_sample == pytest.approx(same.seconds_per_sample, rel=1e-9)
        assert point.peak_power_w == pytest.approx(same.peak_power_w, abs=0.5)


def test_profiling_cost_and_measurement_windows(nano_resnet18_profile) -> None:
    profile = nano_resnet18_profile
    pruned = Profiler(EmulatedDevice(NANO), "resnet18").run(power_cap_w=5.0)
    assert 0 < pruned.profiling_device_s < profile.profiling_device_s
    assert profile.points_measured == len(profile.batch_sizes) * len(profile.knob_values)
    for table in (profile, pruned):
        for point in table.points:
            assert point.readings >= 5
            assert point.steps >= 1
            assert 0 < point.avg_power_w <= point.peak_power_w
            # the window held at least five sensor periods of work
            window_s = point.seconds_per_sample * point.batch_size * point.steps
            assert window_s >= 5 * table.sensor_period_s - 1e-9


def test_measured_time_is_the_modelled_step_time(nano_resnet18_profile) -> None:
    device = EmulatedDevice(NANO)
    workload = workload_for("resnet18")
    for point in nano_resnet18_profile.points:
        cost = workload.step_cost(point.batch_size, device.spec.allocator_overhead_factor)
        step_s = device.model_step(cost, point.knob_value)[0]
        assert point.seconds_per_sample == pytest.approx(step_s / point.batch_size, rel=1e-9)


def test_profile_metadata(nano_resnet18_profile) -> None:
    profile = nano_resnet18_profile
    assert (profile.device, profile.device_kind, profile.model) == (NANO, "emulated", "resnet18")
    assert profile.power_mode == "MAXN"
    assert profile.sensor_rail == "POM_5V_IN"
    assert profile.input_shape == [3, 32, 32]
    assert profile.mode == "exhaustive" and profile.power_cap_w is None
    assert profile.max_batch_size == 128 and profile.oom_batch_sizes == []
    assert profile.knob_values == EmulatedDevice(NANO).frequencies_hz()
    assert profile.workload["flops_per_sample"] == workload_for("resnet18").flops_per_sample


def test_out_of_memory_batch_sizes_are_listed(nano_reference_profiles) -> None:
    for model in ("mobilenetv2", "efficientvit"):
        profile = next(p for p in nano_reference_profiles if p.model == model)
        assert profile.oom_batch_sizes == [128]
        assert 128 not in profile.batch_sizes
        assert profile.max_batch_size == 64
        assert all(p.batch_size != 128 for p in profile.points)
    pruned = Profiler(EmulatedDevice(NANO), "mobilenetv2").run(power_cap_w=4.0)
    assert pruned.oom_batch_sizes == [128] and pruned.max_batch_size == 64


def test_5w_mode_profile_stays_under_its_frequency_ceiling() -> None:
    device = EmulatedDevice(NANO, power_mode="5W")
    profile = Profiler(device, "digits32-cnn", batch_sizes=(8, 32)).run(exhaustive=True)
    assert profile.power_mode == "5W"
    assert max(p.knob_value for p in profile.points) <= 640e6
    assert profile.knob_values == device.frequencies_hz()


def test_profiler_restores_the_device_frequency() -> None:
    device = EmulatedDevice(NANO)
    initial = device.current_frequency_hz()
    # a low cap leaves the search at a low frequency: the profiler must put it back
    Profiler(device, "resnet18").run(power_cap_w=3.5)
    assert device.current_frequency_hz() == initial
    assert any(f != initial for _, f in device.frequency_log)

    def interrupt(update: ProgressUpdate) -> None:
        point = update.item
        if point is not None and point.knob_value > device.frequencies_hz()[2]:
            raise KeyboardInterrupt

    device = EmulatedDevice(NANO)
    with pytest.raises(KeyboardInterrupt):
        Profiler(device, "resnet18", progress=interrupt).run(exhaustive=True)
    assert device.current_frequency_hz() == initial


def test_progress_callback_once_per_point() -> None:
    seen: list[ProgressUpdate] = []
    device = EmulatedDevice(NANO)
    profiler = Profiler(device, "digits32-cnn", progress=seen.append)
    grid = len(profiler.batch_sizes) * len(device.frequencies_hz())
    for kwargs in ({"exhaustive": True}, {"power_cap_w": 4.0}):
        seen.clear()
        profile = profiler.run(**kwargs)
        assert len(seen) == profile.points_measured
        assert [u.item for u in seen] == profile.points
        assert all(f"b={u.item.batch_size}" in u.detail for u in seen)
        # each run counts its own points, of at most the grid
        assert [u.done for u in seen] == list(range(1, len(seen) + 1))
        assert {(u.total, u.unit) for u in seen} == {(grid, "points")}


def test_exhaustive_flag_wins_over_a_cap() -> None:
    profile = Profiler(EmulatedDevice(NANO), "digits32-cnn", batch_sizes=(16, 64)).run(
        power_cap_w=4.0, exhaustive=True
    )
    assert profile.mode == "exhaustive" and profile.power_cap_w is None
    assert profile.points_measured == 2 * len(profile.knob_values)


def test_power_stats() -> None:
    stats = PowerStats()
    for i, watts in enumerate((2.0, 5.0, 3.0, 4.0)):
        stats(PowerReading(0.05 * (i + 1), watts, "VDD_IN"))
    assert stats.peak_w == 5.0
    assert stats.average_w == pytest.approx(3.5)
    assert stats.energy_j(0.05) == pytest.approx(14.0 * 0.05)


def test_frontier_and_rows(nano_resnet18_profile) -> None:
    profile = nano_resnet18_profile
    rows = profile.rows()
    assert sorted(rows) == profile.batch_sizes
    for row in rows.values():
        assert [p.knob_value for p in row] == profile.knob_values
    assert {b: p.knob_value for b, p in profile.frontier(None).items()} == {
        b: profile.knob_values[-1] for b in profile.batch_sizes
    }
    for cap in (4.0, 6.5):
        for b, point in profile.frontier(cap).items():
            assert point.peak_power_w <= cap
            higher = [p for p in rows[b] if p.knob_value > point.knob_value]
            assert all(p.peak_power_w > cap for p in higher)
    assert profile.frontier(0.1) == {}
