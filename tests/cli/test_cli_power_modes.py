"""Power modes on the command line: `--power-mode` by name or id for profile and train, held
to the board's mode on a real Jetson (a fake L4T tree and the fake nvpmodel), a profile's mode
said by plan and held by train, power modes read with their names, and what the emulated
modes leave out said where a power-mode profile is measured."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.cli_run import flat, invoke
from tests.fakes.sysfs import FakeBoard, FakeDevfreqKernel, make_agx_orin_l4t36
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.devices.emulated import EMULATED_POWER_MODES_NOTE

FAKE_BIN = Path(__file__).resolve().parents[1] / "fakes" / "bin"
ORIN = "emulated:jetson-agx-orin"
TRAIN = ["train", "--model", "digits-cnn", "--data", "digits", "--power-cap", "60",
         "--target-accuracy", "0.5", "--dry-run"]


@pytest.fixture(scope="module")
def orin_15w(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile of the emulated AGX Orin in its 15 W mode, asked for by its short name."""
    out = tmp_path_factory.mktemp("orin") / "orin-15w.json"
    done = invoke("profile", "--device", ORIN, "--power-mode", "15w", "--model", "digits-cnn",
                  "--batch-sizes", "8", "--out", out)
    assert done.exit_code == 0, done.output
    assert EMULATED_POWER_MODES_NOTE not in flat(done.output)
    return out


def test_a_profile_says_its_mode_in_the_plan(orin_15w: Path) -> None:
    assert ProfileTable.load(orin_15w).power_mode == "MODE_15W"
    as_json = invoke("plan", "--profile", orin_15w, "--power-cap", "none", "--json")
    assert json.loads(as_json.output)["power_mode"] == "MODE_15W"
    table = invoke("plan", "--profile", orin_15w, "--power-cap", "none,60")
    assert "digits-cnn on jetson-agx-orin in power mode MODE_15W" in \
        flat(table.output)


def test_train_refuses_a_profile_of_another_mode_and_takes_its_mode_by_name_or_id(
        orin_15w: Path, tmp_path: Path) -> None:
    refused = invoke(*TRAIN, "--device", ORIN, "--profile", orin_15w)  # the device in MAXN
    text = flat(refused.output)
    assert refused.exit_code == 2, text
    assert "measured in power mode 'MODE_15W', but the device is in power mode 'MAXN'" in text
    assert "--power-mode MODE_15W" in text and "sudo nvpmodel -m 1" in text
    for mode in ("1", "MODE_15W", "mode_15w"):
        done = invoke(*TRAIN, "--device", ORIN, "--power-mode", mode, "--profile", orin_15w)
        assert done.exit_code == 0, done.output
    # a file written before the modes took their nvpmodel.conf names stored "15W"
    old = tmp_path / "old.json"
    old.write_text(orin_15w.read_text().replace('"power_mode": "MODE_15W"',
                                                '"power_mode": "15W"'))
    assert ProfileTable.load(old).power_mode == "15W"
    done = invoke(*TRAIN, "--device", ORIN, "--power-mode", "MODE_15W", "--profile", old)
    assert done.exit_code == 0, done.output
    unknown = invoke(*TRAIN, "--device", ORIN, "--power-mode", "60W", "--profile", old)
    assert unknown.exit_code == 2 and "unknown power mode '60W'" in \
        flat(unknown.output)


def test_a_power_mode_profile_names_its_modes_and_says_what_the_emulation_leaves_out(
        tmp_path: Path) -> None:
    out = tmp_path / "modes.json"
    done = invoke("profile", "--device", ORIN, "--model", "digits-cnn", "--knob", "power-mode",
                  "--batch-sizes", "8", "--out", out)
    assert done.exit_code == 0, done.output
    assert EMULATED_POWER_MODES_NOTE in flat(done.output)
    table = ProfileTable.load(out)
    assert table.power_mode_names() == {0: "MAXN", 1: "MODE_15W", 2: "MODE_30W", 3: "MODE_50W"}
    assert table.describe_knob(2) == "power mode 2 (MODE_30W)"
    planned = invoke("plan", "--profile", out, "--power-cap", "none")
    assert "0 (MAXN)" in planned.output  # the fastest mode
    as_json = json.loads(invoke("plan", "--profile", out, "--power-cap", "none",
                                "--json").output)
    assert "power_mode" not in as_json  # the mode is the knob: the choice's knob_value
    trained = invoke(*TRAIN, "--device", ORIN, "--profile", out)
    assert "at power mode 0 (MAXN)" in flat(trained.output)

    from wattcap.experiments.plots import profile_figure

    figure = profile_figure(table)
    ticks = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert ticks == ["0 (MAXN)", "1 (MODE_15W)", "2 (MODE_30W)", "3 (MODE_50W)"]
    assert figure.axes[0].get_xlabel() == "power mode (nvpmodel id and name)"


@pytest.fixture
def orin_30w(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBoard:
    """A real AGX Orin (a fake L4T 36 tree) in MODE_30W, the fake nvpmodel on PATH."""
    board = make_agx_orin_l4t36(tmp_path / "board", mode_id=2)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVPMODEL_ROOT", str(board.root))
    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(board.root))
    FakeDevfreqKernel().install(monkeypatch)
    return board


def _jetson_profile(path: Path, power_mode: str) -> Path:
    """A clock profile of the AGX Orin, as measured in `power_mode`."""
    point = ProfilePoint(batch_size=8, knob_value=612_000_000, peak_power_w=20.0,
                         avg_power_w=15.0, seconds_per_sample=1e-3, steps=5, readings=10)
    ProfileTable(device="jetson-agx-orin", device_kind="jetson", power_mode=power_mode,
                 sensor_rail="VDD_GPU_SOC", sensor_period_s=0.05, model="digits-cnn",
                 input_shape=[1, 8, 8], batch_sizes=[8], knob_values=[612_000_000],
                 max_batch_size=8, mode="exhaustive", points=[point], points_measured=1,
                 profiling_device_s=1.0).save(path)
    return path


def test_a_real_jetson_profiles_and_trains_only_in_the_mode_it_is_in(
        orin_30w: FakeBoard, tmp_path: Path) -> None:
    profile = ["profile", "--device", "jetson", "--model", "digits-cnn", "--batch-sizes", "8",
               "--dry-run"]
    refused = invoke(*profile, "--power-mode", "MODE_15W")
    text = flat(refused.output)
    assert refused.exit_code == 2, text
    assert "the board is in power mode 2 (MODE_30W), not in power mode 1 (MODE_15W)" in text
    assert "sudo nvpmodel -m 1" in text and "--knob power-mode" in text
    unknown = flat(invoke(*profile, "--power-mode", "9W").output)
    assert "no power mode '9W'" in unknown and "2 (MODE_30W)" in unknown
    done = invoke(*profile, "--power-mode", "2")
    assert done.exit_code == 0, done.output
    assert "power mode MODE_30W" in done.output
    in_30w = _jetson_profile(tmp_path / "30w.json", "MODE_30W")
    assert invoke(*TRAIN, "--device", "jetson", "--power-mode", "mode_15w", "--profile",
                  in_30w).exit_code == 2
    done = invoke(*TRAIN, "--device", "jetson", "--power-mode", "30W", "--profile", in_30w)
    assert done.exit_code == 0, done.output
    # a profile of another mode than the board's: refused, the fix names the mode's id
    in_15w = _jetson_profile(tmp_path / "15w.json", "MODE_15W")
    refused = invoke(*TRAIN, "--device", "jetson", "--profile", in_15w)
    text = flat(refused.output)
    assert refused.exit_code == 2 and "sudo nvpmodel -m 1" in text, text
    assert not (orin_30w.root / "nvpmodel-calls.log").exists()  # nothing switched the mode
