"""The unkind emulated board: a board state per run (speed, power, host), a sensor that averages
a window and lags, a power limit that is overshot, and time that is not monotone in the power
limit. A test per effect fails if the effect is removed; the kind board (the default, and
"emulated:<spec>" or "emulated:<spec>:kind") stays today's deterministic one."""

from __future__ import annotations

import math
import statistics

import pytest

from wattcap.devices import get_device, load_spec
from wattcap.devices.emulated import EmulatedDevice
from wattcap.devices.emulated_board import (
    HOST_SPREAD,
    POWER_SPREAD,
    SPEED_SPREAD,
    BoardState,
    draw_board_state,
)
from wattcap.devices.errors import DeviceNotFoundError
from wattcap.devices.workload import workload_for


def _cost(device: EmulatedDevice, model: str, batch_size: int):  # noqa: ANN202
    return workload_for(model).step_cost(batch_size, device.spec.allocator_overhead_factor)


def _step_s(device: EmulatedDevice, cost) -> float:  # noqa: ANN001
    return device.end_step(device.begin_step(cost))


def test_the_kind_board_is_todays_and_the_default() -> None:
    kind, default = EmulatedDevice("jetson-nano", board=BoardState()), EmulatedDevice()
    cost = _cost(kind, "digits32-cnn", 32)
    top = kind.frequencies_hz()[-1]
    assert kind.model_step(cost, top) == default.model_step(cost, top)
    assert [_step_s(kind, cost) for _ in range(5)] == [_step_s(default, cost) for _ in range(5)]
    assert kind.read_power_w() == default.read_power_w()
    assert BoardState().kind and not draw_board_state("jetson-nano", 0).kind
    assert get_device("emulated:jetson-nano:kind").board.kind
    assert get_device("emulated:jetson-nano").board.kind


def test_a_board_state_is_drawn_per_run_with_the_measured_spreads() -> None:
    draws = [draw_board_state("h100-sxm", seed) for seed in range(3000)]
    assert draw_board_state("h100-sxm", 7) == draws[7]  # a run replays its board
    assert draw_board_state("jetson-nano", 7) != draws[7]  # another board, another draw
    for values, spread in (([d.speed_factor for d in draws], SPEED_SPREAD),
                           ([d.power_factor for d in draws], POWER_SPREAD),
                           ([d.host_factor for d in draws], HOST_SPREAD)):
        logs = [math.log(v) for v in values]
        assert abs(statistics.fmean(logs)) < 0.1 * spread + 3 * spread / math.sqrt(3000)
        assert statistics.stdev(logs) == pytest.approx(spread, rel=0.06)
    slow = [d.slow_at_top_limit for d in draws]
    assert 0.13 < sum(s > 0.05 for s in slow) / len(slow) < 0.20  # about a sixth
    assert max(d.limit_overshoot for d in draws) <= 0.10


def test_the_board_state_moves_time_and_power() -> None:
    state = BoardState(speed_factor=0.9, power_factor=1.2, host_factor=1.5, label="test")
    kind, unkind = EmulatedDevice("jetson-nano"), EmulatedDevice("jetson-nano", board=state)
    top = kind.frequencies_hz()[-1]
    big = _cost(kind, "resnet18", 64)  # GPU-bound: time follows the speed factor
    (busy_kind, busy_unkind) = (d.phases(big, top)[1] for d in (kind, unkind))
    assert busy_unkind.duration_s == pytest.approx(busy_kind.duration_s / 0.9)
    gpu_kind = busy_kind.power_w - kind.idle_power_w(top)
    assert busy_unkind.power_w > busy_kind.power_w
    assert busy_unkind.power_w - busy_kind.power_w <= 0.2 * gpu_kind + 1e-9
    small = _cost(kind, "digits32-cnn", 4)  # host-bound: the host phase follows the host
    assert unkind.phases(small, top)[0].duration_s == pytest.approx(
        1.5 * kind.phases(small, top)[0].duration_s)


def test_a_lagging_windowed_sensor_reads_the_past() -> None:
    state = BoardState(sensor_window_periods=2.0, sensor_lag_periods=1.0, label="test")
    readings: dict[str, dict[float, float]] = {}
    for name, board in (("kind", None), ("lagging", state)):
        device = EmulatedDevice("jetson-nano", board=board)
        seen: dict[float, float] = {}

        def keep(reading, seen=seen) -> None:  # noqa: ANN001
            seen[round(reading.time_s, 3)] = reading.power_w

        with device.sensor_ticks(keep):
            device.idle(1.0)  # idle until 1.0 s, then short steps: the load starts at 1.0 s
            cost = _cost(device, "digits32-cnn", 32)
            while device.now_s() < 2.0:
                _step_s(device, cost)
        readings[name] = seen
    period_s = EmulatedDevice("jetson-nano").sensor_period_s
    idle_w, first = readings["kind"][1.0], round(1.0 + period_s, 3)
    # the first period of load: the kind sensor reads it, the lagging one still reads idle
    # (its window, two periods ending one period ago, holds none of it)
    assert readings["kind"][first] > idle_w + 0.5
    assert readings["lagging"][first] == pytest.approx(idle_w, abs=0.2)
    # a period later the lagging window is half load, half idle: between the two
    then = round(1.0 + 2 * period_s, 3)
    assert idle_w + 0.2 < readings["lagging"][then] < readings["kind"][then] - 0.2
    # under steady load both read the same level
    assert readings["lagging"][1.9] == pytest.approx(readings["kind"][1.9], abs=0.3)


def test_the_ground_truth_is_the_power_of_each_period_without_lag_or_noise() -> None:
    """`true_period_w` (the benches' ground truth) reads the load from its first period, where
    the lagging sensor still reads idle, and equals a noise-free kind sensor's readings."""
    state = BoardState(sensor_window_periods=2.0, sensor_lag_periods=1.0, label="test")
    quiet = load_spec("jetson-nano").model_copy(update={"sensor_noise_w": 0.0})
    truths: dict[str, list[tuple[float, float]]] = {}
    kind_readings: dict[float, float] = {}
    # a sensor whose window is shorter than its period keeps less of the past than the truth
    short = BoardState(sensor_window_periods=0.5, sensor_lag_periods=0.0, label="short")
    for name, board in (("kind", None), ("lagging", state), ("short", short)):
        device = EmulatedDevice(quiet, board=board)
        device.true_period_w = []
        def keep(reading, record=board is None) -> None:  # noqa: ANN001
            if record:
                kind_readings[round(reading.time_s, 3)] = reading.power_w

        with device.sensor_ticks(keep):
            device.idle(1.0)
            cost = _cost(device, "digits32-cnn", 32)
            while device.now_s() < 2.0:
                _step_s(device, cost)
        truths[name] = device.true_period_w
    assert truths["kind"] and len(truths["kind"]) == len(kind_readings)
    for tick_s, power_w in truths["kind"]:
        assert power_w == pytest.approx(kind_readings[round(tick_s, 3)], rel=1e-9)
    # the truth does not lag: the first period of load reads as load on the lagging board too
    period_s = EmulatedDevice("jetson-nano").sensor_period_s
    lagging = {round(t, 3): w for t, w in truths["lagging"]}
    first = round(1.0 + period_s, 3)
    assert lagging[first] == pytest.approx(kind_readings[first], rel=0.05)
    assert lagging[first] > kind_readings[1.0] + 0.5
    # the sensor's window changes the readings, never the truth
    assert [w for _, w in truths["short"]] == pytest.approx([w for _, w in truths["kind"]])
    # nothing is recorded unless asked for
    assert EmulatedDevice("jetson-nano").true_period_w is None


def test_a_power_limit_is_overshot_by_an_unkind_board() -> None:
    kind = EmulatedDevice("h100-sxm")
    cost = _cost(kind, "resnet18", 256)
    top = kind.frequencies_hz()[-1]
    limit_w = kind.model_step(cost, top)[1] / 1.05  # the top clock draws 5 % over it
    times = {}
    for overshoot in (0.0, 0.10):
        device = EmulatedDevice("h100-sxm", board=BoardState(limit_overshoot=overshoot,
                                                             label="test"))
        device.set_power_limit_w(limit_w)
        times[overshoot] = _step_s(device, cost)
    # the kind board holds the limit with a lower clock; the unkind one runs the top clock
    assert times[0.10] == pytest.approx(kind.model_step(cost, top)[0])
    assert times[0.0] > times[0.10]


def test_time_need_not_fall_as_the_power_limit_rises() -> None:
    state = BoardState(slow_at_top_limit=0.08, label="test")
    low_w, high_w = EmulatedDevice("h100-sxm").power_limit_range_w()
    cost = _cost(EmulatedDevice("h100-sxm"), "resnet18", 256)  # GPU-bound, about 500 W
    times = {}
    for board in (None, state):
        for limit_w in (high_w - 0.2 * (high_w - low_w), high_w):
            device = EmulatedDevice("h100-sxm", board=board)
            device.set_power_limit_w(limit_w)
            times[(board is None, limit_w)] = _step_s(device, cost)
    below_top, top = high_w - 0.2 * (high_w - low_w), high_w
    assert times[(True, top)] == pytest.approx(times[(True, below_top)])  # kind: the same
    assert times[(False, top)] > 1.05 * times[(False, below_top)]  # unkind: slower at the top


def test_board_names_are_parsed_and_bad_ones_refused() -> None:
    drawn = get_device("emulated:jetson-nano:unkind=3")
    assert drawn.board == draw_board_state("jetson-nano", 3)
    assert get_device("emulated:jetson-nano:unkind", seed=5).board == \
        draw_board_state("jetson-nano", 5)
    assert "unkind (seed 3)" in drawn.board.describe()
    for bad in ("emulated:jetson-nano:weird", "emulated:jetson-nano:unkind=x"):
        with pytest.raises(DeviceNotFoundError, match="unknown board"):
            get_device(bad)
