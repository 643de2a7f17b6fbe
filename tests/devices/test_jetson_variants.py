"""Jetson as it really varies (issue 26 item 8): the input rail under every name boards use,
the INA238 of newer modules, unreadable rails, GPU devfreq nodes named by their own entry, and
what `devices --probe` says of the rail it took."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fake_pynvml import FakeNvml
from tests.fakes.sysfs import (
    add_ina238_hwmon,
    add_ina3221_hwmon,
    make_nano_2gb_no_sensor,
    make_orin_nano_l4t36,
)
from wattcap.devices.jetson import JetsonDevice, find_gpu_devfreq
from wattcap.devices.probe import probe


def test_vin_sys_5v0_is_taken_as_the_input_rail(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path, input_rail=False)  # no VDD_IN on the first monitor
    add_ina3221_hwmon(tmp_path, "1-0041", 4, [("vin_sys_5v0", 5_000, 2_000),
                                               ("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 1_800, 100)])
    device = JetsonDevice(board.root)
    assert device.sensor_rail == "vin_sys_5v0"
    assert "measures the module's input" in device.rail_reason
    assert device.read_power_w() == pytest.approx(10.0)


def test_the_ina238_of_newer_modules_is_read(tmp_path: Path) -> None:
    board = make_nano_2gb_no_sensor(tmp_path)  # no INA3221 at all
    add_ina238_hwmon(tmp_path, "2-0044", 2, power_uw=7_250_000)
    device = JetsonDevice(board.root)
    assert device.sensor_rail == "INA238 2-0044"
    assert "INA238" in device.rail_reason
    assert device.read_power_w() == pytest.approx(7.25)


def test_an_unreadable_rail_is_left_out_and_said(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    _, hwmon, channel = board.rail_files["VDD_IN"]
    (hwmon / f"curr{channel}_input").write_text("not a number\n")
    device = JetsonDevice(board.root)
    assert "VDD_IN" not in [r.name for r in device.rails]
    assert device.sensor_rail == "sum(VDD_CPU_GPU_CV,VDD_SOC)"
    assert "misses what no rail measures" in device.rail_reason
    assert any("VDD_IN unreadable, left out" in note for note in device.notes)
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert any("VDD_IN unreadable" in line for line in report.missing)
    assert any("device power = sum(VDD_CPU_GPU_CV,VDD_SOC) (no input rail" in line
               for line in report.found)


def test_the_probe_says_which_rail_is_the_device_power_and_why(tmp_path: Path) -> None:
    make_orin_nano_l4t36(tmp_path)
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert any("device power = VDD_IN (VDD_IN measures the module's input)" in line
               for line in report.found)


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
