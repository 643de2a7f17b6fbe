"""Jetson as it really varies: the device power by one rule on every family (the module's input
rail where the board has one, else the sum of the module's rails, never a partial sum in
silence), the INA238 of newer modules, GPU devfreq nodes named by their own entry, and what
`devices --probe` says of the power it took."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.fake_pynvml import FakeNvml
from tests.fakes.sysfs import (
    AGX_ORIN_LOAD_MW,
    FakeBoard,
    add_ina238_hwmon,
    make_agx_orin_l4t36,
    make_agx_xavier_l4t32,
    make_nano_2gb_no_sensor,
    make_nano_l4t32,
    make_orin_nano_l4t36,
    make_thor_l4t38,
    make_tx2_l4t32,
    make_tx2nx_l4t32,
    make_xavier_nx_l4t35,
)
from wattcap.devices.errors import SensorMissingError
from wattcap.devices.jetson import JetsonDevice, find_gpu_devfreq
from wattcap.devices.jetson_rails import RULE_INPUT, RULE_SUM
from wattcap.devices.probe import probe


def _rail_w(board: FakeBoard, *names: str) -> float:
    return sum(board.rails[n][0] * board.rails[n][1] / 1e6 for n in names)


# family builder, the rule, the rails whose power is the device's (by the family's sources)
FAMILIES: list[tuple[Callable[[Path], FakeBoard], str, tuple[str, ...]]] = [
    (make_nano_l4t32, RULE_INPUT, ("POM_5V_IN",)),
    (make_tx2_l4t32, RULE_INPUT, ("VDD_IN",)),  # not VDD_MUX, the carrier board's input
    (make_tx2nx_l4t32, RULE_INPUT, ("VDD_IN",)),
    (make_xavier_nx_l4t35, RULE_INPUT, ("VDD_IN",)),
    (make_agx_xavier_l4t32, RULE_SUM, ("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V")),
    (make_orin_nano_l4t36, RULE_INPUT, ("VDD_IN",)),
    (make_agx_orin_l4t36, RULE_SUM, ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")),
]


@pytest.mark.parametrize(("make", "rule", "rails"), FAMILIES,
                         ids=[make.__name__ for make, _, _ in FAMILIES])
def test_every_family_takes_its_documented_rails(
    tmp_path: Path, make: Callable[[Path], FakeBoard], rule: str, rails: tuple[str, ...]
) -> None:
    board = make(tmp_path)
    device = JetsonDevice(board.root)
    source = device.power_source
    assert (source.rule, [r.name for r in source.rails], source.missing) == (rule, list(rails), ())
    assert device.sensor_rail == (rails[0] if rule == RULE_INPUT else f"sum({','.join(rails)})")
    assert device.read_power_w() == pytest.approx(_rail_w(board, *rails), rel=1e-3)


def test_the_agx_orin_reads_its_module_power_not_its_5v_rail(tmp_path: Path) -> None:
    make_agx_orin_l4t36(tmp_path)
    device = JetsonDevice(tmp_path)
    load = AGX_ORIN_LOAD_MW
    power_w = device.read_power_w()
    # VIN_SYS_5V0 alone (4.97 W) would be a fifth of the module; VDDQ_VDD2_1V8AO is inside
    # VIN_SYS_5V0 (NVIDIA's developer guide), so adding it would count 1.09 W twice.
    assert power_w == pytest.approx(
        (load["VDD_GPU_SOC"] + load["VDD_CPU_CV"] + load["VIN_SYS_5V0"]) / 1e3, abs=0.01)
    assert power_w == pytest.approx(22.43, abs=0.01)
    assert power_w > 4 * load["VIN_SYS_5V0"] / 1e3
    assert "VDDQ_VDD2_1V8AO" in [r.name for r in device.rails]  # found, but not summed
    assert "inside VIN_SYS_5V0" in device.power_source.reason


def test_thor_takes_its_ina238_on_vin_not_the_ina3221_rails(tmp_path: Path) -> None:
    make_thor_l4t38(tmp_path, vin_power_uw=41_000_000)
    device = JetsonDevice(tmp_path)
    assert (device.power_source.rule, device.sensor_rail) == (RULE_INPUT, "VIN")
    assert device.read_power_w() == pytest.approx(41.0)


def test_a_dead_rail_of_a_sum_board_stops_the_power_loudly(tmp_path: Path) -> None:
    board = make_agx_orin_l4t36(tmp_path)
    _, hwmon, channel = board.rail_files["VDD_CPU_CV"]
    (hwmon / f"curr{channel}_input").write_text("")  # the driver answers nothing
    device = JetsonDevice(board.root)
    assert device.power_source.missing == ("VDD_CPU_CV",)
    with pytest.raises(SensorMissingError, match="UNREADABLE: VDD_CPU_CV"):
        device.read_power_w()  # 8.1 W of 22.4 W would pass every cap check
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert any("device power unreadable" in line and "VDD_CPU_CV" in line
               for line in report.missing)


def test_a_missing_monitor_of_a_sum_board_is_named(tmp_path: Path) -> None:
    make_agx_xavier_l4t32(tmp_path)
    # the second monitor's driver did not bind: its three rails are absent, not zero
    (tmp_path / "sys" / "bus" / "i2c" / "drivers" / "ina3221x" / "1-0041").unlink()
    device = JetsonDevice(tmp_path)
    assert device.power_source.missing == ("CV", "SYS5V", "VDDRQ")
    with pytest.raises(SensorMissingError):
        device.read_power_w()


def test_a_dead_input_rail_is_never_replaced_by_the_other_rails(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    _, hwmon, channel = board.rail_files["VDD_IN"]
    (hwmon / f"curr{channel}_input").write_text("not a number\n")
    device = JetsonDevice(board.root)
    assert "VDD_IN" not in [r.name for r in device.rails]
    assert (device.sensor_rail, device.power_source.missing) == ("VDD_IN", ("VDD_IN",))
    assert any("VDD_IN unreadable" in note for note in device.notes)
    with pytest.raises(SensorMissingError, match="VDD_IN"):
        device.read_power_w()
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert any("VDD_IN unreadable" in line for line in report.missing)


def test_a_dead_side_rail_of_an_input_board_does_not_matter(tmp_path: Path) -> None:
    board = make_xavier_nx_l4t35(tmp_path)
    _, hwmon, channel = board.rail_files["VDD_SOC"]
    (hwmon / f"curr{channel}_input").write_text("")
    device = JetsonDevice(board.root)
    assert device.power_source.missing == ()
    assert device.read_power_w() == pytest.approx(_rail_w(board, "VDD_IN"))


def test_disconnected_and_sum_channels_are_not_rails(tmp_path: Path) -> None:
    make_agx_orin_l4t36(tmp_path)
    names = [r.name for r in JetsonDevice(tmp_path).rails]
    assert names == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]


def test_the_ina238_of_newer_modules_is_read(tmp_path: Path) -> None:
    board = make_nano_2gb_no_sensor(tmp_path)  # no INA3221 at all
    add_ina238_hwmon(tmp_path, "2-0044", 2, power_uw=7_250_000)
    device = JetsonDevice(board.root)
    assert device.sensor_rail == "INA238 2-0044"
    assert "INA238" in device.rail_reason
    assert device.read_power_w() == pytest.approx(7.25)


@pytest.mark.parametrize(("make", "expected"), [
    (make_orin_nano_l4t36, "device power = VDD_IN by the rule 'input rail' (VDD_IN measures "
                           "the module's input)"),
    (make_agx_orin_l4t36, "device power = sum(VDD_GPU_SOC,VDD_CPU_CV,VIN_SYS_5V0) by the rule "
                          "'sum of the module's rails' (AGX Orin has no input rail"),
])
def test_the_probe_says_which_rails_give_the_device_power_and_why(
    tmp_path: Path, make: Callable[[Path], FakeBoard], expected: str
) -> None:
    make(tmp_path)
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert any(expected in line for line in report.found), report.found


def test_a_devfreq_node_named_by_its_gpu_is_found(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    # an of_node that says nothing (name and path): the devfreq entry's own name does
    bland = tmp_path / "sys" / "firmware" / "devicetree" / "base" / "bus@0" / "dev@17000000"
    bland.mkdir(parents=True)
    (bland / "name").write_bytes(b"dev\x00")
    of_node = board.devfreq / "device" / "of_node"
    of_node.unlink()
    of_node.symlink_to(bland)
    assert (tmp_path / "sys" / "class" / "devfreq" / "17000000.gpu").exists()
    assert find_gpu_devfreq(tmp_path) == board.devfreq.resolve()


def test_a_profile_records_the_rule_beside_the_rails(tmp_path: Path) -> None:
    """A profile of a sum board says which rule took which rails (not only their names); a
    device with one sensor records no rule."""
    from wattcap.devices import EmulatedDevice
    from wattcap.measure.profiling import _sensor_rule

    make_agx_orin_l4t36(tmp_path)
    device = JetsonDevice(tmp_path)
    rule = _sensor_rule(device)
    assert rule is not None and rule.startswith(f"{RULE_SUM}: sum(")
    assert "VDD_GPU_SOC" in rule and "inside VIN_SYS_5V0" in rule
    assert _sensor_rule(EmulatedDevice("jetson-nano")) is None
