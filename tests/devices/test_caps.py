"""Cap sources (issue 19): schedules and polled files parse and refuse bad input clearly, the
polled file survives half-written files, the battery drains and its cap falls below the lowest
feasible cap, the solar trace is reproducible and varies with clouds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wattcap.algorithms.planner import Selector
from wattcap.devices.caps import (
    BatteryCap,
    BatteryCurve,
    CallableCap,
    CapSourceError,
    ConstantCap,
    LowestCap,
    PolledFileCap,
    ScheduleCap,
    SolarCap,
    clear_sky_ghi_w_m2,
    parse_cap_source,
)


# -- constant, callable, read() ------------------------------------------------------------------
def test_read_reports_changes_once() -> None:
    source = CallableCap(lambda t: 6.0 if t < 10 else (4.0 if t < 20 else None), name="steps")
    first = source.read(0.0)
    assert first.changed and first.cap_w == 6.0 and first.previous_w is None
    assert not source.read(5.0).changed
    drop = source.read(10.0)
    assert drop.changed and drop.cap_w == 4.0 and drop.previous_w == 6.0
    lifted = source.read(25.0)
    assert lifted.changed and lifted.cap_w is None
    assert ConstantCap(None).read(0).cap_w is None
    assert ConstantCap(5).cap_w(1e9) == 5.0


def test_callable_returning_nonsense_is_named() -> None:
    source = CallableCap(lambda t: "five", name="budget")
    with pytest.raises(CapSourceError) as info:
        source.cap_w(3.0)
    assert "budget(3)" in str(info.value) and "watts" in str(info.value)
    with pytest.raises(CapSourceError):
        CallableCap(lambda t: -1.0).cap_w(0.0)
    with pytest.raises(CapSourceError):
        ConstantCap(float("nan"))
    assert CallableCap(lambda t: np.float32(4.5)).cap_w(0.0) == 4.5  # numpy numbers are watts


# -- schedules ----------------------------------------------------------------------------------
def test_schedule_json_and_csv_agree(tmp_path) -> None:
    as_json = tmp_path / "caps.json"
    as_json.write_text('{"schedule": [{"time_s": 0, "cap_w": 6.5}, {"time_s": 30, "cap_w": 4},'
                       ' {"time_s": 90.5, "cap_w": null}]}')
    as_csv = tmp_path / "caps.csv"
    as_csv.write_text("time_s,cap_w\n0,6.5\n30,4 W\n\n90.5,none\n")
    for path in (as_json, as_csv):
        schedule = ScheduleCap.load(path)
        assert [schedule.cap_w(t) for t in (0.0, 29.99, 30.0, 90.0, 90.5, 1e6)] == [
            6.5, 6.5, 4.0, 4.0, None, None]
        assert schedule.next_change_s(0.0) == 30.0
        assert schedule.next_change_s(30.0) == 90.5
        assert schedule.next_change_s(100.0) is None
    bare_list = tmp_path / "list.json"
    bare_list.write_text('[{"time_s": 0, "cap_w": 3}]')
    assert ScheduleCap.load(bare_list).cap_w(50) == 3.0


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("a.csv", "time_s,cap_w\n0,5\n20,4\n10,3\n", "strictly increasing"),
    ("b.csv", "time_s,cap_w\n5,5\n", "first entry must be at time_s 0"),
    ("c.csv", "time_s,cap_w\n0,-2\n", "number ≥ 0"),
    ("d.csv", "time_s,cap_w\n0,lots\n", "line 2"),
    ("e.csv", "t,watts\n0,5\n", "header 'time_s,cap_w'"),
    ("f.csv", "time_s,cap_w\n0,5,7\n", "expected 2 values"),
    ("g.csv", "time_s,cap_w\nsoon,5\n", "not a number of seconds"),
    ("h.csv", "", "header 'time_s,cap_w'"),
    ("i.csv", "time_s,cap_w\n", "the schedule is empty"),
    ("j.json", '{"schedule": [{"time_s": 0, "cap_w": 5}', "not valid JSON"),
    ("k.json", '{"caps": []}', "no 'schedule' key"),
    ("l.json", '[{"time_s": 0, "watts": 5}]', "entry 1"),
    ("m.json", '[{"time_s": 0, "cap_w": "5"}]', "number ≥ 0"),
    ("n.json", '[{"time_s": -1, "cap_w": 5}]', "seconds ≥ 0"),
])
def test_bad_schedules_are_refused_clearly(tmp_path, name, text, expected) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(CapSourceError) as info:
        ScheduleCap.load(path)
    message = str(info.value)
    assert expected in message
    assert str(path) in message and "\n" not in message


def test_missing_schedule_file(tmp_path) -> None:
    with pytest.raises(CapSourceError) as info:
        ScheduleCap.load(tmp_path / "nope.csv")
    assert "no such schedule file" in str(info.value)


# -- polled file --------------------------------------------------------------------------------
def test_polled_file_reads_at_most_once_per_period(tmp_path) -> None:
    path = tmp_path / "cap"
    path.write_text("5\n")
    source = PolledFileCap(path, period_s=1.0)
    assert source.read(0.0).cap_w == 5.0
    path.write_text("4.0 W")
    assert source.read(0.5).cap_w == 5.0  # not polled yet
    reading = source.read(1.0)
    assert reading.cap_w == 4.0 and reading.changed and reading.previous_w == 5.0
    path.write_text('{"cap_w": null}')
    assert source.read(2.0).cap_w is None
    path.write_text("none")
    assert not source.read(3.0).changed


def test_polled_file_survives_half_written_files(tmp_path) -> None:
    path = tmp_path / "cap.json"
    path.write_text('{"cap_w": 4.5}')
    source = PolledFileCap(path, period_s=0.5)
    assert source.read(0.0).cap_w == 4.5
    complete = '{"cap_w": 3.25}'
    now = 0.0
    warnings = []
    for cut in range(len(complete)):  # every prefix a non-atomic writer can leave
        path.write_text(complete[:cut])
        now += 0.5
        reading = source.read(now)
        assert reading.cap_w == 4.5 and not reading.changed
        warnings.extend(reading.warnings)
    # one report for the whole bad stretch, naming the value kept
    assert len(warnings) == 1 and "keeping 4.50 W" in warnings[0]
    path.unlink()  # missing while the writer renames
    now += 0.5
    assert source.read(now).cap_w == 4.5
    path.write_text(complete)
    now += 0.5
    reading = source.read(now)
    assert reading.cap_w == 3.25 and reading.changed and reading.warnings == ()
    path.write_text("-3")  # a new bad stretch is reported again
    now += 0.5
    reading = source.read(now)
    assert reading.cap_w == 3.25 and len(reading.warnings) == 1 and "≥ 0" in reading.warnings[0]


def test_polled_file_needs_a_good_file_or_an_initial_value(tmp_path) -> None:
    path = tmp_path / "cap"
    with pytest.raises(CapSourceError) as info:
        PolledFileCap(path)
    assert "no such cap file" in str(info.value)
    path.write_text("")
    with pytest.raises(CapSourceError) as info:
        PolledFileCap(path)
    assert "empty" in str(info.value)
    source = PolledFileCap(path, initial_w=6.0)
    assert source.read(0.0).cap_w == 6.0
    with pytest.raises(CapSourceError):
        PolledFileCap(path, period_s=0, initial_w=6.0)


def test_polled_state_round_trip(tmp_path) -> None:
    path = tmp_path / "cap"
    path.write_text("5")
    source = PolledFileCap(path, period_s=10.0)
    source.read(0.0)
    path.write_text("4")
    source.read(10.0)
    resumed = PolledFileCap(path, period_s=10.0, initial_w=9.0)
    resumed.load_state_dict(source.state_dict())
    path.write_text("3")
    assert resumed.read(15.0).cap_w == 4.0 and not resumed.read(15.0).changed
    assert resumed.read(20.0).cap_w == 3.0


# -- battery ------------------------------------------------------------------------------------
def test_battery_curve_shape() -> None:
    curve = BatteryCurve()
    socs = [i / 200 for i in range(201)]
    powers = [curve.relative_power(s) for s in socs]
    assert powers[0] == 0.0 and powers[-1] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(powers, powers[1:], strict=False))
    # falls slowly on the plateau and steeply near empty
    assert powers[100] > 0.5 and powers[20] < 0.3


def test_battery_drains_by_energy_drawn() -> None:
    battery = BatteryCap(capacity_wh=1.0, max_power_w=8.0, converter_efficiency=0.9)
    assert battery.cap_w(0.0) == pytest.approx(8.0)
    battery.record_energy(0.45 * 3600, now_s=10.0)  # 0.45 Wh delivered = 0.5 Wh from the pack
    assert battery.state_of_charge == pytest.approx(0.5)
    assert battery.cap_w(10.0) == pytest.approx(8.0 * BatteryCurve().relative_power(0.5))
    resumed = BatteryCap(capacity_wh=1.0, max_power_w=8.0, converter_efficiency=0.9)
    resumed.load_state_dict(battery.state_dict())
    assert resumed.state_of_charge == pytest.approx(0.5)
    with pytest.raises(CapSourceError):
        battery.record_energy(-1.0, 11.0)
    with pytest.raises(CapSourceError):
        BatteryCap(capacity_wh=0, max_power_w=8.0)


def test_battery_empties_and_its_cap_falls_below_the_lowest_feasible_cap(
    nano_resnet18_profile,
) -> None:
    """Train on the battery at the fastest choice its cap allows, one sensor period at a time,
    feeding the energy drawn back: the cap only falls, and crosses below every configuration's
    peak power (the Session pauses there) before the charge is gone."""
    selector = Selector(nano_resnet18_profile)
    lowest_w = selector.lowest_feasible_cap_w()
    ratios = {b: 1.0 for b in nano_resnet18_profile.batch_sizes}
    battery = BatteryCap(capacity_wh=0.2, max_power_w=9.5)
    period_s, now_s = 0.05, 0.0
    caps = []
    while True:
        cap = battery.read(now_s).cap_w
        caps.append(cap)
        point = selector.select(cap, ratios)
        if point is None:
            break
        assert point.peak_power_w <= cap
        battery.record_energy(point.avg_power_w * period_s, now_s)
        now_s += period_s
        assert now_s < 3600, "the battery never emptied"
    assert caps[-1] < lowest_w
    assert all(a >= b for a, b in zip(caps, caps[1:], strict=False))
    assert 0.0 < battery.state_of_charge < 0.2
    # the idle device keeps draining it to empty: 0 W
    while not battery.empty:
        battery.record_energy(1.25 * period_s, now_s)
        now_s += period_s
    assert battery.cap_w(now_s) == 0.0


def test_battery_says_the_energy_it_can_still_deliver_above_a_power(tmp_path) -> None:
    """The energy left is what the pack delivers after the converter, down to the charge where
    its deliverable power falls to the power asked for (training pauses below it); sources
    without a store say None."""
    battery = BatteryCap(capacity_wh=1.0, max_power_w=8.0, converter_efficiency=0.9)
    assert battery.energy_left_j() == pytest.approx(0.9 * 3600)
    floor = battery.state_of_charge_at(4.0)
    assert 0.0 < floor < 1.0 and battery.power_at_w(floor) == pytest.approx(4.0, abs=1e-6)
    assert battery.energy_left_j(4.0) == pytest.approx((1.0 - floor) * 0.9 * 3600)
    battery.record_energy(0.45 * 3600, now_s=10.0)  # half the pack
    assert battery.energy_left_j() == pytest.approx(0.45 * 3600)
    assert battery.energy_left_j(4.0) == pytest.approx(max(0.5 - floor, 0.0) * 0.9 * 3600)
    assert battery.energy_left_j(9.0) == 0.0  # more than even a full pack delivers
    assert battery.state_of_charge_at(9.0) == 1.0 and battery.state_of_charge_at(0.0) == 0.0
    for source in (ConstantCap(5.0), SolarCap(seed=1), ScheduleCap([(0.0, 4.0)]),
                   CallableCap(lambda t: 3.0)):
        assert source.energy_left_j(1.0) is None
    small = BatteryCap(capacity_wh=0.1, max_power_w=8.0)
    assert LowestCap(ConstantCap(6.0), battery, small).energy_left_j(4.0) == \
        pytest.approx(small.energy_left_j(4.0))
    assert LowestCap(ConstantCap(6.0), SolarCap(seed=1)).energy_left_j() is None


# -- solar --------------------------------------------------------------------------------------
def test_solar_is_reproducible_for_a_seed() -> None:
    times = [i * 7.3 for i in range(600)]
    a = SolarCap(seed=3, day_length_s=1200.0)
    b = SolarCap(seed=3, day_length_s=1200.0)
    forward = [a.cap_w(t) for t in times]
    backward = [b.cap_w(t) for t in reversed(times)]  # another query order, same sky
    assert forward == backward[::-1]
    other = SolarCap(seed=4, day_length_s=1200.0)
    assert [other.cap_w(t) for t in times] != forward


def test_solar_clear_day_follows_the_sun() -> None:
    clear = SolarCap(seed=0, cloud_fraction=0.0, day_length_s=1000.0, start_fraction=0.0)
    noon = clear.cap_w(500.0)
    expected = clear_sky_ghi_w_m2(0.9) * 0.06 * 0.2 - 1.0
    assert noon == pytest.approx(expected)
    assert 9.0 < noon < 11.0  # a ~12 W panel minus the base load
    assert clear.cap_w(250.0) == pytest.approx(clear.cap_w(750.0))  # symmetric about noon
    assert clear.cap_w(100.0) < clear.cap_w(300.0) < noon
    assert clear.cap_w(1500.0) == 0.0  # night
    assert clear.cap_w(2500.0) == pytest.approx(noon)  # the next day
    with pytest.raises(CapSourceError):
        clear.cap_w(-1.0)


def test_solar_varies_with_clouds() -> None:
    day = 10_000.0
    kwargs = {"day_length_s": day, "start_fraction": 0.0, "mean_cloud_s": 20.0}
    clear = SolarCap(seed=1, cloud_fraction=0.0, **kwargs)
    cloudy = SolarCap(seed=1, cloud_fraction=0.4, **kwargs)
    times = [i * 1.0 for i in range(int(day))]
    factors = [cloudy.cloud_factor(t) for t in times]
    shaded = sum(f < 1.0 for f in factors) / len(factors)
    assert shaded == pytest.approx(0.4, abs=0.06)  # ~500 spells: the long-run share
    assert all(0.2 <= f <= 0.7 for f in factors if f < 1.0)
    dips = 0
    for t in times:
        assert cloudy.cap_w(t) <= clear.cap_w(t)
        dips += cloudy.cap_w(t) < clear.cap_w(t)
    assert dips > 0.3 * len(times)
    # clouds come and go: many separate shaded spells
    starts = sum(1 for a, b in zip(factors, factors[1:], strict=False) if a == 1.0 and b < 1.0)
    assert starts > 50


# -- combinations and specs ----------------------------------------------------------------------
def test_lowest_cap_and_energy_forwarding(tmp_path) -> None:
    battery = BatteryCap(capacity_wh=0.01, max_power_w=8.0)
    source = LowestCap(ConstantCap(6.0), battery)
    assert source.cap_w(0.0) == 6.0
    source.record_energy(0.01 * 3600 * 0.9, 1.0)
    assert battery.empty and source.cap_w(1.0) == 0.0
    assert LowestCap(ConstantCap(None)).cap_w(0.0) is None
    resumed = LowestCap(ConstantCap(6.0), BatteryCap(capacity_wh=0.01, max_power_w=8.0))
    resumed.load_state_dict(source.state_dict())
    assert resumed.cap_w(1.0) == 0.0


def test_parse_cap_source(tmp_path) -> None:
    schedule = tmp_path / "s.csv"
    schedule.write_text("time_s,cap_w\n0,5\n10,4\n")
    polled = tmp_path / "cap"
    polled.write_text("7")
    assert parse_cap_source("4.5").cap_w(0) == 4.5
    assert parse_cap_source("4.5W").cap_w(0) == 4.5
    assert parse_cap_source("none").cap_w(0) is None
    assert parse_cap_source(f"schedule:{schedule}").cap_w(12) == 4.0
    source = parse_cap_source(f"file:{polled},period_s=2")
    assert isinstance(source, PolledFileCap) and source.period_s == 2.0 and source.cap_w(0) == 7
    battery = parse_cap_source("battery:capacity_wh=20,max_w=9,soc=0.5")
    assert isinstance(battery, BatteryCap) and battery.state_of_charge == 0.5
    solar = parse_cap_source("solar:seed=3,day_s=600,clouds=0.2")
    assert isinstance(solar, SolarCap) and solar.seed == 3 and solar.day_length_s == 600
    for bad, expected in [
        ("bogus:1", "unknown kind"),
        ("lots", "expected watts"),
        ("battery:capacity_wh=x,max_w=3", "must be a number"),
        ("battery:max_w=3", "needs capacity_wh"),
        ("solar:seed=1.5", "integer"),
        ("solar:colour=blue", "unknown option"),
    ]:
        with pytest.raises(CapSourceError) as info:
            parse_cap_source(bad)
        assert expected in str(info.value)
    assert not math.isnan(parse_cap_source("solar:seed=1").cap_w(0))
