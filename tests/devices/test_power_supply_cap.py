"""A real battery or supply as a cap source, on fake power-supply trees laid out as the kernel's
ABI documents them (tests/fakes/power_supply.py): a laptop pack with its adapter, a fuel gauge
that reports charge and current only, a USB-C PD source and a UPS; the policy (deadline,
reserve, ceiling, external power), the read period, a supply that stops reporting, a resume,
the spec parser, and a run that stops when the battery does."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.fakes.power_supply import (
    FakeGauge,
    FakeSupply,
    add_supply,
    class_root,
    fuel_gauge,
    laptop,
    ups,
    usb_pd,
)
from wattcap.devices import power_supply_cap
from wattcap.devices.caps import CapSourceError, PowerSupplyCap, parse_cap_source
from wattcap.devices.power_supply_cap import POWER_SUPPLY_ROOT_ENV

HOUR_S = 3600.0


@pytest.fixture
def gauge(monkeypatch: pytest.MonkeyPatch) -> FakeGauge:
    fake = FakeGauge()
    monkeypatch.setattr(power_supply_cap, "read_sysfs_text", fake.read)
    return fake


# -- a laptop: energy_now and power_now, BAT0 beside its AC adapter ------------------------------
def test_laptop_battery_spreads_the_energy_above_the_reserve_over_the_hours(
        tmp_path: Path) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=30.0, power_w=9.5)
    cap = PowerSupplyCap(hours=2, reserve_fraction=0.2, root=class_root(tmp_path))
    assert cap.name == "BAT0"  # the adapter (Mains) is not a battery
    # 30 Wh - 20 % of the 50 Wh full pack = 20 Wh over 2 h
    assert cap.cap_w(0.0) == pytest.approx(10.0)
    assert cap.supply_power_w == pytest.approx(9.5)
    # an hour later, with 15 Wh left: 5 Wh over the hour that remains
    battery.set(energy_now=15_000_000)
    assert cap.cap_w(HOUR_S) == pytest.approx(5.0)
    assert "BAT0" in cap.describe() and "finish by 2 h" in cap.describe()


def test_the_files_are_read_at_most_once_per_period(tmp_path: Path, gauge: FakeGauge) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=30.0)
    cap = PowerSupplyCap(hours=1, root=class_root(tmp_path), period_s=5.0)
    first = cap.cap_w(0.0)
    reads = gauge.reads
    battery.set(energy_now=20_000_000)
    assert cap.cap_w(4.9) == first and gauge.reads == reads  # within the period: no read
    assert cap.cap_w(5.0) == pytest.approx(20.0 * HOUR_S / (HOUR_S - 5.0))
    assert gauge.reads > reads


def test_the_rest_of_the_system_comes_out_of_the_budget(tmp_path: Path) -> None:
    laptop(tmp_path, energy_now_wh=30.0, power_w=9.5)
    cap = PowerSupplyCap(hours=1, root=class_root(tmp_path), period_s=5.0)
    assert cap.cap_w(0.0) == pytest.approx(30.0)  # nothing known yet of the rest
    cap.record_energy(4.0 * 5.0, 5.0)  # the module drew 4 W over the period
    # the supply draws 9.5 W: 5.5 W go to the board, display, ...
    assert cap.cap_w(5.0) == pytest.approx(30.0 * HOUR_S / (HOUR_S - 5.0) - 5.5)
    assert cap.estimated_base_w == pytest.approx(5.5)
    fixed = PowerSupplyCap(hours=1, base_load_w=2.0, root=class_root(tmp_path))
    assert fixed.cap_w(0.0) == pytest.approx(28.0)


def test_max_w_is_a_ceiling(tmp_path: Path) -> None:
    laptop(tmp_path, energy_now_wh=30.0)
    cap = PowerSupplyCap(hours=1, max_power_w=12.0, root=class_root(tmp_path))
    assert cap.cap_w(0.0) == 12.0


# -- a fuel gauge: charge_now, current_now, voltage_now only -------------------------------------
def test_fuel_gauge_energy_is_charge_times_voltage(tmp_path: Path) -> None:
    fuel_gauge(tmp_path, charge_now_mah=2000.0, current_ma=-1200.0, voltage_v=3.8)
    cap = PowerSupplyCap(hours=1, reserve_wh=1.6, root=class_root(tmp_path))
    # 2 Ah x 3.8 V = 7.6 Wh, less 1.6 Wh, over an hour
    assert cap.cap_w(0.0) == pytest.approx(6.0)
    # a negative (discharging) current is a draw of 1.2 A x 3.8 V
    assert cap.supply_power_w == pytest.approx(4.56)
    percent = PowerSupplyCap(reserve_fraction=0.6, root=class_root(tmp_path))
    assert percent.cap_w(0.0) == 0.0  # 7.6 Wh is under 60 % of 4 Ah x 3.8 V


# -- USB-C PD and a UPS ----------------------------------------------------------------------------
def test_usb_pd_supply_sets_no_energy_limit_and_reports_its_power(tmp_path: Path) -> None:
    supply = usb_pd(tmp_path, voltage_v=20.0, current_a=2.25)
    with pytest.raises(CapSourceError, match="no battery"):
        PowerSupplyCap(max_power_w=15.0, root=class_root(tmp_path))
    cap = PowerSupplyCap(supply.name, max_power_w=15.0, root=class_root(tmp_path))
    assert cap.cap_w(0.0) == 15.0
    assert cap.supply_power_w == pytest.approx(45.0)
    assert any("external power" in w for w in cap.read(0.0).warnings)


def test_a_usb_pd_contract_caps_the_module_at_what_the_supply_may_deliver(
        tmp_path: Path) -> None:
    supply = usb_pd(tmp_path)  # 20 V x 3 A contract (voltage_max, current_max): 60 W
    root = class_root(tmp_path)
    # with a ceiling above the contract, the contract less the rest of the system binds
    cap = PowerSupplyCap(supply.name, max_power_w=100.0, base_load_w=12.0, root=root)
    assert cap.cap_w(0.0) == pytest.approx(48.0)
    assert any("contract delivers (60 W) less the rest of the system (12 W)" in w
               for w in cap.read(0.0).warnings)
    # without base_w nothing is subtracted, and the warning says how to give it
    bare = PowerSupplyCap(supply.name, max_power_w=100.0, root=root)
    assert bare.cap_w(0.0) == pytest.approx(60.0)
    assert any("give base_w=" in w for w in bare.read(0.0).warnings)
    # a lower max_w still wins; a supply stating no contract is capped by max_w alone
    assert PowerSupplyCap(supply.name, max_power_w=15.0, root=root).cap_w(0.0) == 15.0
    supply.remove("current_max")
    assert PowerSupplyCap(supply.name, max_power_w=100.0, root=root).cap_w(0.0) == 100.0


def test_ups_with_capacity_only_keeps_a_reserve_in_percent(tmp_path: Path) -> None:
    supply = ups(tmp_path, capacity_percent=80)
    cap = PowerSupplyCap(supply.name, reserve_fraction=0.5, period_s=1.0,
                         root=class_root(tmp_path))
    assert cap.cap_w(0.0) is None  # above the reserve, no ceiling
    supply.set(capacity=40)
    assert cap.cap_w(1.0) == 0.0
    with pytest.raises(CapSourceError, match="neither energy_now nor charge_now"):
        PowerSupplyCap(supply.name, hours=2, root=class_root(tmp_path))


# -- charging, the reserve, the deadline -----------------------------------------------------------
@pytest.mark.parametrize("status", ["Charging", "Full", "Not charging"])
def test_a_battery_on_external_power_sets_no_energy_limit(tmp_path: Path, status: str) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=12.0, status=status)
    cap = PowerSupplyCap(hours=1, reserve_fraction=0.3, period_s=1.0, root=class_root(tmp_path))
    reading = cap.read(0.0)
    assert reading.cap_w is None  # even under the reserve: the adapter feeds the system
    assert any("external power" in w and "cap none" in w for w in reading.warnings)
    ceiling = PowerSupplyCap(hours=1, max_power_w=7.0, root=class_root(tmp_path))
    assert ceiling.cap_w(0.0) == 7.0
    battery.set(status="Discharging", energy_now=25_000_000)  # unplugged
    assert cap.read(1.0).cap_w == pytest.approx(10.0 * HOUR_S / (HOUR_S - 1.0))


def test_the_energy_left_is_what_is_above_the_reserve(tmp_path: Path) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=30.0)
    cap = PowerSupplyCap(reserve_fraction=0.2, period_s=1.0, root=class_root(tmp_path))
    assert cap.energy_left_j(3.0) == pytest.approx(20.0 * HOUR_S)  # 30 Wh - 20 % of 50 Wh
    assert PowerSupplyCap(reserve_wh=5.0, root=class_root(tmp_path)).energy_left_j() == \
        pytest.approx(25.0 * HOUR_S)
    battery.set(energy_now=8_000_000)  # under the reserve
    cap.cap_w(1.0)
    assert cap.energy_left_j() == 0.0
    battery.set(status="Charging")  # an adapter feeds the system: no energy limit
    cap.cap_w(2.0)
    assert cap.energy_left_j() is None
    supply = ups(tmp_path / "ups", capacity_percent=80)  # capacity % alone: no energy known
    assert PowerSupplyCap(supply.name, reserve_fraction=0.5,
                          root=class_root(tmp_path / "ups")).energy_left_j() is None


def test_at_or_under_the_reserve_the_cap_is_zero_and_may_rise_again(tmp_path: Path) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=10.0)
    cap = PowerSupplyCap(hours=3, reserve_fraction=0.2, period_s=1.0,
                         root=class_root(tmp_path))
    reading = cap.read(0.0)
    assert reading.cap_w == 0.0  # 10 Wh is 20 % of 50 Wh: training pauses
    assert any("reserve" in w for w in reading.warnings)
    assert cap.may_exceed(5.0, 0.0)  # a charger may lift it: the run waits, never ends itself
    battery.set(status="Charging")
    assert cap.cap_w(1.0) is None


def test_after_the_deadline_only_the_reserve_limits(tmp_path: Path) -> None:
    laptop(tmp_path, energy_now_wh=30.0)
    cap = PowerSupplyCap(hours=1, reserve_fraction=0.2, max_power_w=8.0, period_s=1.0,
                         root=class_root(tmp_path))
    assert cap.cap_w(0.0) == 8.0  # 20 Wh over one hour is above the ceiling
    reading = cap.read(HOUR_S + 1.0)
    assert reading.cap_w == 8.0
    assert any("deadline has passed" in w for w in reading.warnings)


# -- a battery that stops reporting --------------------------------------------------------------
def _break(kind: str, battery: FakeSupply, gauge: FakeGauge) -> None:
    if kind == "vanished":
        battery.vanish()
    elif kind == "EIO":
        gauge.fail(battery, "energy_now")
    elif kind == "empty":
        battery.set(energy_now="")
    elif kind == "nonsense":
        battery.set(energy_now="garbage")
    elif kind == "not present":
        battery.set(present=0)
    elif kind == "file gone":
        battery.remove("energy_now")


@pytest.mark.parametrize("kind", ["vanished", "EIO", "empty", "nonsense", "not present",
                                  "file gone"])
def test_a_battery_that_stops_reporting_keeps_its_last_value_then_stops(
        tmp_path: Path, gauge: FakeGauge, kind: str) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=30.0)
    cap = PowerSupplyCap(hours=1, period_s=2.0, stale_periods=3, root=class_root(tmp_path))
    good = cap.read(0.0).cap_w
    assert good == pytest.approx(30.0)
    _break(kind, battery, gauge)
    kept = cap.read(2.0)
    assert kept.cap_w == good
    assert len(kept.warnings) == 1 and "unreadable" in kept.warnings[0]
    assert "keeping the last good reading for up to 6 s" in kept.warnings[0]
    assert cap.read(6.0).warnings == ()  # said once
    with pytest.raises(CapSourceError, match="BAT0 stopped reporting.*run stops"):
        cap.cap_w(8.0)
    with pytest.raises(CapSourceError):  # and stays stopped
        cap.cap_w(8.5)


def test_a_battery_that_answers_again_in_time_carries_on(tmp_path: Path,
                                                        gauge: FakeGauge) -> None:
    battery, _ = laptop(tmp_path, energy_now_wh=30.0)
    cap = PowerSupplyCap(hours=1, period_s=2.0, root=class_root(tmp_path))
    cap.read(0.0)
    gauge.fail(battery, "energy_now")
    cap.read(2.0)
    gauge.heal()
    battery.set(energy_now=29_000_000)
    reading = cap.read(6.0)
    assert reading.cap_w == pytest.approx(29.0 * HOUR_S / (HOUR_S - 6.0))
    assert any("reads again" in w for w in reading.warnings)
    assert cap.cap_w(20.0) is not None  # the stale clock restarted at the good read


def test_eio_at_build_is_a_clear_error(tmp_path: Path, gauge: FakeGauge) -> None:
    battery, _ = laptop(tmp_path)
    gauge.fail(battery, "energy_now")
    with pytest.raises(CapSourceError, match="cannot read the power supply.*Input/output"):
        PowerSupplyCap(hours=1, root=class_root(tmp_path))
    assert gauge.error == errno.EIO


# -- finding the battery ---------------------------------------------------------------------------
def test_two_batteries_without_a_name_are_listed(tmp_path: Path) -> None:
    laptop(tmp_path)
    add_supply(tmp_path, "BAT1", "LNXSYSTM:00/LNXSYBUS:00/PNP0C0A:01", type="Battery",
               status="Discharging", present=1, energy_now=20_000_000, energy_full=40_000_000)
    with pytest.raises(CapSourceError) as err:
        PowerSupplyCap(hours=1, root=class_root(tmp_path))
    text = str(err.value)
    assert "2 batteries" in text and "BAT0 (Battery)" in text and "BAT1 (Battery)" in text
    assert "AC (Mains)" in text and "battery:sysfs:NAME" in text
    assert PowerSupplyCap("BAT1", hours=1, root=class_root(tmp_path)).cap_w(0.0) == \
        pytest.approx(20.0)


def test_no_battery_and_an_unknown_name_say_what_was_found(tmp_path: Path) -> None:
    fuel_gauge(tmp_path).set(present=0)
    with pytest.raises(CapSourceError, match=r"no battery .*bq27546-0 \(Battery, not present\)"):
        PowerSupplyCap(hours=1, root=class_root(tmp_path))
    with pytest.raises(CapSourceError, match="'BAT9' not found.*bq27546-0"):
        PowerSupplyCap("BAT9", hours=1, root=class_root(tmp_path))
    with pytest.raises(CapSourceError, match="no battery .*no power supplies"):
        PowerSupplyCap(hours=1, root=tmp_path / "nothing")


# -- a resumed run keeps the original deadline -----------------------------------------------------
def test_a_resume_keeps_the_original_deadline(tmp_path: Path) -> None:
    laptop(tmp_path, energy_now_wh=30.0)
    wall = [1000.0]
    cap = PowerSupplyCap(hours=2, reserve_fraction=0.2, root=class_root(tmp_path),
                         wall_clock=lambda: wall[0])
    cap.cap_w(0.0)
    wall[0] += 1800.0
    cap.cap_w(1800.0)
    state = cap.state_dict()
    wall[0] += 1800.0  # the process was down for half an hour
    resumed = PowerSupplyCap(hours=2, reserve_fraction=0.2, root=class_root(tmp_path),
                             wall_clock=lambda: wall[0])
    resumed.load_state_dict(state)
    # the run's clock resumes at 1800 s; one hour of the two is left, not an hour and a half
    assert resumed.cap_w(1800.0) == pytest.approx(20.0)
    # the deadline passed an hour later on the run's clock: only the reserve limits
    assert resumed.cap_w(1800.0 + HOUR_S) is None
    # a run that was not resumed would still spread the 20 Wh over 1.5 h
    assert cap.cap_w(1800.0) == pytest.approx(20.0 / 1.5)
    with pytest.raises(CapSourceError, match="followed power supply 'BAT1'"):
        resumed.load_state_dict({**state, "name": "BAT1"})


# -- the spec --------------------------------------------------------------------------------------
def test_specs_build_the_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    laptop(tmp_path)
    monkeypatch.setenv(POWER_SUPPLY_ROOT_ENV, str(class_root(tmp_path)))
    cap = parse_cap_source("battery:sysfs,hours=3,reserve=20%,max_w=9,period_s=2")
    assert isinstance(cap, PowerSupplyCap)
    assert (cap.name, cap.hours, cap.reserve_fraction, cap.max_power_w, cap.period_s) == (
        "BAT0", 3.0, 0.2, 9.0, 2.0)
    named = parse_cap_source("battery:sysfs:AC,max_w=20")
    assert isinstance(named, PowerSupplyCap) and named.cap_w(0.0) == 20.0
    wh = parse_cap_source("Battery:SYSFS:BAT0, reserve_wh=5 , base_w=3")
    assert isinstance(wh, PowerSupplyCap) and (wh.reserve_wh, wh.base_load_w) == (5.0, 3.0)


@pytest.mark.parametrize(("spec", "message"), [
    ("battery:sysfs", "no policy; give hours=H"),
    ("battery:sysfs,hours=3,watts=2", "unknown option 'watts=2'; expected battery:sysfs"),
    ("battery:sysfs,reserve=20", r"reserve is a percentage .*reserve=20%"),
    ("battery:sysfs,reserve=20%,reserve_wh=5", "not both"),
    ("battery:sysfs,hours=soon", "hours must be a number, got 'soon'"),
    ("battery:sysfs,hours=0", "hours must be > 0"),
    ("battery:sysfs,reserve=120%", r"reserve must be in \[0 %, 100 %\)"),
    ("battery:sysfs,max_w=-1", "max_w must be ≥ 0"),
    ("battery:sysfs:../BAT0,hours=1", "not a power-supply name"),
    ("battery:sysfs:BAT7,hours=1", "'BAT7' not found"),
    ("battery:sysfsx,hours=1", "expected battery:sysfs"),
    ("battery:hours=3", "unknown option 'hours=3'"),  # the simulated battery's options
])
def test_bad_specs_are_refused_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       spec: str, message: str) -> None:
    laptop(tmp_path)
    monkeypatch.setenv(POWER_SUPPLY_ROOT_ENV, str(class_root(tmp_path)))
    with pytest.raises(CapSourceError, match=message):
        parse_cap_source(spec)


# -- in a run --------------------------------------------------------------------------------------
def test_the_supply_draw_is_recorded_beside_the_module(tmp_path: Path) -> None:
    from wattcap.devices import EmulatedDevice, PowerReading
    from wattcap.runtime.cap_follower import CapFollower

    battery, _ = laptop(tmp_path, energy_now_wh=30.0, power_w=9.5)
    device = EmulatedDevice("jetson-nano")
    source = PowerSupplyCap(hours=1, period_s=0.5, root=class_root(tmp_path))
    follower = CapFollower(source, device, None, 32, device.current_frequency_hz())
    follower.begin()
    for i in range(10):
        follower(PowerReading(0.05 * (i + 1), 3.5, "test"))
    battery.set(power_now=11_500_000)
    for i in range(10, 20):
        follower(PowerReading(0.05 * (i + 1), 3.5, "test"))
    _, timeline = follower.finish()
    assert len(timeline.supply_power_w) == len(timeline.t_s) == len(timeline.power_w)
    assert timeline.supply_power_w[0] == pytest.approx(9.5)
    assert timeline.supply_power_w[-1] == pytest.approx(11.5)
    assert all(p == pytest.approx(3.5) for p in timeline.power_w)


def test_a_timeline_without_a_supply_keeps_no_column_and_old_states_load() -> None:
    from wattcap.core.cap_history import TimelineRecorder

    recorder = TimelineRecorder(0.05, max_points=4)
    for i in range(12):
        recorder.add(0.05 * (i + 1), 3.0, 4.0, 1, 32)
    state = recorder.state()
    state["pending"] = [p[:5] for p in state["pending"]]  # written before the column existed
    assert TimelineRecorder.from_state(state, 0.05, 4).finish().supply_power_w == []
    late = TimelineRecorder(0.05, max_points=4)
    for i in range(12):
        late.add(0.05 * (i + 1), 3.0, 4.0, 1, 32, None if i < 6 else 8.0)
    line = late.finish()
    assert len(line.supply_power_w) == len(line.t_s)
    assert line.supply_power_w[0] is None and line.supply_power_w[-1] == 8.0


@pytest.mark.slow  # about 10 s of end-to-end training: make test runs it, test-fast does not
def test_a_run_stops_with_its_record_when_the_battery_stops_reporting(
        tmp_path: Path, gauge: FakeGauge) -> None:
    from wattcap.core.run import TrainConfig
    from wattcap.data import get_dataset
    from wattcap.devices import EmulatedDevice
    from wattcap.train.loop import train_to_accuracy

    laptop(tmp_path, energy_now_wh=30.0)
    source = PowerSupplyCap(hours=1, max_power_w=5.0, period_s=0.05, root=class_root(tmp_path))
    gauge.fail_from_read = gauge.reads + 200  # about 15 reads in: every file answers EIO
    train, test = get_dataset("digits-32").split(0.2, seed=0)
    config = TrainConfig(model="digits32-cnn", batch_size=32, target_accuracy=0.99,
                         sample_budget=4096, eval_every_samples=128, max_eval_samples=200)
    device = EmulatedDevice("jetson-nano")
    lowest_hz = device.frequencies_hz()[0]
    record = train_to_accuracy(config, train, test, device=device, power_cap=source)
    # the run stops (no training under a cap nobody can know) and says why in its record
    assert record.stop_reason is not None
    assert "BAT0 stopped reporting" in record.stop_reason
    assert "Input/output error" in record.stop_reason
    assert not record.reached and record.samples_seen < config.sample_budget
    assert any("run stopped: the cap source stopped reporting" in e for e in record.events)
    last = record.segments[-1]
    assert last.paused and "stopped reporting" in last.reason
    # acted on at once: the step in flight finished at the lowest clock
    assert last.frequency_hz == lowest_hz
    # the report's plot shows the battery's own draw beside the module's
    import matplotlib.pyplot as plt

    from wattcap.experiments.cap_run import cap_run_figure

    figure = cap_run_figure(record)
    assert "supply draw" in figure.axes[0].get_legend_handles_labels()[1]
    plt.close(figure)
