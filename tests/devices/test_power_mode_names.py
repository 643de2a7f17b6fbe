"""Power modes by name or nvpmodel id: a real Jetson runs only in the mode it is in (wattcap
never switches it to run in one), a GPU has none, the emulated boards take their modes' real
nvpmodel.conf names, ids and the old short names, and a profile holds for its own mode."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.fakes.sysfs import MHZ, FakeBoard, FakeDevfreqKernel, make_agx_orin_l4t36
from wattcap.core.knob import format_knob, knob_axis_label, knob_number
from wattcap.core.power_mode import find_power_mode, same_power_mode
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.schema import WattcapFileError
from wattcap.devices import DeviceError, EmulatedDevice, get_device
from wattcap.devices.emulated import EMULATED_POWER_MODES_NOTE
from wattcap.devices.errors import DeviceNotSupportedError

FAKE_BIN = Path(__file__).resolve().parents[1] / "fakes" / "bin"
DOCS = Path(__file__).resolve().parents[2] / "docs"
AGX_MODES = "0 (MAXN), 1 (MODE_15W), 2 (MODE_30W), 3 (MODE_50W)"


@pytest.fixture
def orin_30w(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBoard:
    """An AGX Orin in MODE_30W (id 2), the fake nvpmodel on PATH: a switch would show in its
    call log."""
    board = make_agx_orin_l4t36(tmp_path, mode_id=2)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVPMODEL_ROOT", str(board.root))
    FakeDevfreqKernel().install(monkeypatch)
    return board


def _untouched(board: FakeBoard) -> bool:
    """Nothing switched the board's mode: no nvpmodel call, the status as it was."""
    status = (board.root / "var" / "lib" / "nvpmodel" / "status").read_text()
    return not (board.root / "nvpmodel-calls.log").exists() and "pmode:0002" in status


@pytest.mark.parametrize("wanted", ["MODE_30W", "mode_30w", "2", "30W", "30w"])
def test_a_jetson_in_the_mode_asked_for_is_taken_by_name_id_or_short_name(
        orin_30w: FakeBoard, wanted: str) -> None:
    device = get_device("jetson", power_mode=wanted, sysfs_root=str(orin_30w.root))
    assert device.power_mode == "MODE_30W" and device.power_mode_names()[2] == "MODE_30W"
    # the mode's cap (624.75 MHz) holds the clocks
    assert device.frequencies_hz() == orin_30w.expected_hz
    assert max(device.frequencies_hz()) == 624_750_000
    assert _untouched(orin_30w)


@pytest.mark.parametrize("name", ["jetson", "auto"])
def test_a_jetson_in_another_mode_is_refused_with_how_to_switch_it(
        orin_30w: FakeBoard, name: str) -> None:
    with pytest.raises(DeviceError) as err:
        get_device(name, power_mode="MODE_15W", sysfs_root=str(orin_30w.root))
    assert "the board is in power mode 2 (MODE_30W), not in power mode 1 (MODE_15W)" in \
        err.value.message
    assert "sudo nvpmodel -m 1" in (err.value.hint or "")
    assert "--knob power-mode" in (err.value.hint or "")
    assert _untouched(orin_30w)  # refused, never switched


def test_an_unknown_mode_on_a_jetson_is_refused_with_the_boards_modes(
        orin_30w: FakeBoard) -> None:
    with pytest.raises(DeviceError, match="no power mode 'MODE_60W'") as err:
        get_device("jetson", power_mode="MODE_60W", sysfs_root=str(orin_30w.root))
    assert f"its modes (/etc/nvpmodel.conf): {AGX_MODES}" in err.value.message
    assert _untouched(orin_30w)


def test_a_jetson_without_nvpmodel_files_cannot_promise_a_mode(tmp_path: Path) -> None:
    board = make_agx_orin_l4t36(tmp_path)  # no /etc/nvpmodel.conf
    assert get_device("jetson", sysfs_root=str(board.root)).power_mode is None
    with pytest.raises(DeviceNotSupportedError, match="no readable /etc/nvpmodel.conf"):
        get_device("jetson", power_mode="MAXN", sysfs_root=str(board.root))


def test_a_gpu_refuses_a_power_mode_before_nvml_is_opened() -> None:
    # no NVML here at all: the refusal comes first, and says what the GPU's knob is
    with pytest.raises(DeviceNotSupportedError, match="nvml:0 has no nvpmodel power modes") \
            as err:
        get_device("nvml:0", power_mode="MAXN")
    assert "--knob power-limit" in (err.value.hint or "")


@pytest.mark.parametrize("wanted", ["MODE_15W", "mode_15w", "1", "15W", "15w"])
def test_the_emulated_agx_orin_takes_nvpmodel_names_ids_and_the_old_short_names(
        wanted: str) -> None:
    device = EmulatedDevice("jetson-agx-orin", power_mode=wanted)
    assert device.power_mode == "MODE_15W" and device.power_mode_id == 1
    assert device.frequencies_hz()[-1] == 408 * MHZ  # under the mode's 420.75 MHz cap
    device.require_power_mode(wanted)
    with pytest.raises(DeviceError, match="runs in power mode MODE_15W, not in MAXN"):
        device.require_power_mode("MAXN")


def test_the_emulated_boards_name_their_modes_as_their_nvpmodel_conf_does() -> None:
    assert EmulatedDevice("jetson-agx-orin").power_mode_names() == {
        0: "MAXN", 1: "MODE_15W", 2: "MODE_30W", 3: "MODE_50W"}
    assert EmulatedDevice("jetson-tx2nx", power_mode="10w").power_mode == "MODE_10W"
    assert EmulatedDevice("jetson-orin-nano", power_mode="1").power_mode == "7W"
    assert EmulatedDevice("jetson-nano", power_mode="maxn").power_mode == "MAXN"
    with pytest.raises(DeviceError, match="unknown power mode '60W'") as err:
        EmulatedDevice("jetson-agx-orin", power_mode="60W")
    assert AGX_MODES in (err.value.hint or "")
    with pytest.raises(DeviceNotSupportedError, match=re.escape(f"its power modes: {AGX_MODES}")):
        EmulatedDevice("jetson-agx-orin").check_knob("power_mode", 7)


def test_a_name_matches_one_mode_only() -> None:
    modes = {0: "MAXN", 1: "MODE_15W", 2: "15W"}  # a hand-made conf with both spellings
    assert find_power_mode("15W", modes) == 2 and find_power_mode("MODE_15W", modes) == 1
    assert find_power_mode("15w", {0: "MODE_15W", 1: "15W"}) == 1  # its own name first
    assert find_power_mode("9", modes) is None and find_power_mode("", modes) is None
    assert same_power_mode("15W", "mode_15w") and not same_power_mode("15W", "150W")


def test_a_power_mode_reads_with_its_name_where_known() -> None:
    names = {0: "MAXN", 2: "MODE_30W"}
    assert format_knob("power_mode", 2, names) == "power mode 2 (MODE_30W)"
    assert knob_number("power_mode", 2, names) == "2 (MODE_30W)"
    assert format_knob("power_mode", 1, names) == "power mode 1"  # no name known: the id
    assert format_knob("gpu_clock", 614_400_000, names) == "614.4 MHz"
    assert knob_axis_label("power_mode", named=True) == "power mode (nvpmodel id and name)"
    assert knob_axis_label("power_mode") == "power mode (nvpmodel id)"


def _table(power_mode: str | None, knob_kind: str = "gpu_clock") -> ProfileTable:
    point = ProfilePoint(batch_size=8, knob_value=1, peak_power_w=5.0, avg_power_w=4.0,
                         seconds_per_sample=1e-3, steps=5, readings=10)
    return ProfileTable(device="jetson-agx-orin", device_kind="jetson", power_mode=power_mode,
                        sensor_rail="VDD_IN", sensor_period_s=0.05, model="digits-cnn",
                        input_shape=[1, 8, 8], batch_sizes=[8], knob_kind=knob_kind,
                        knob_values=[1], max_batch_size=8, mode="exhaustive", points=[point],
                        points_measured=1, profiling_device_s=1.0)


def test_a_profile_holds_for_its_own_mode_and_an_old_short_name_still_matches() -> None:
    names = EmulatedDevice("jetson-agx-orin").power_mode_names()
    old = _table("15W")  # made before the emulated modes took their nvpmodel.conf names
    old.check_matches(device="jetson-agx-orin", power_mode="MODE_15W", power_modes=names)
    with pytest.raises(WattcapFileError, match="measured in power mode '15W', but the device is "
                       "in power mode 'MAXN'") as err:
        old.check_matches(power_mode="MAXN", power_modes=names, source="old.json")
    assert "times and powers are those of its own mode" in err.value.message
    assert "sudo nvpmodel -m 1" in (err.value.hint or "")
    assert "--power-mode 15W" in (err.value.hint or "")
    _table(None).check_power_mode("MAXN")  # a mode not recorded: nothing to hold it to
    _table("MAXN", "power_mode").check_power_mode("MODE_15W")  # the mode is its knob


def test_the_emulated_power_mode_note_is_in_the_hardware_docs() -> None:
    docs = " ".join((DOCS / "hardware.md").read_text().split())
    sentence = EMULATED_POWER_MODES_NOTE
    assert sentence[0].upper() + sentence[1:] in docs


def test_a_run_says_the_mode_it_applied_by_name() -> None:
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import DeviceHandling, PlanSettings

    device = EmulatedDevice("jetson-nano")
    points = [ProfilePoint(batch_size=8, knob_value=mode, peak_power_w=peak, avg_power_w=peak,
                           seconds_per_sample=spp, steps=5, readings=10)
              for mode, peak, spp in ((0, 9.0, 1.0e-3), (1, 6.0, 1.6e-3))]
    table = _table("MAXN", "power_mode").model_copy(update={
        "device": device.name, "device_kind": "emulated", "points": points,
        "knob_values": [0, 1], "points_measured": 2, "power_noise_w": 0.0})
    session = Session(device, planning=PlanSettings(profile=table, margin_sigmas=0), cap=7.0,
                      device_handling=DeviceHandling(handle_signals=False))
    session.start()
    try:
        assert device.power_mode == "5W"
        assert any(str(e).startswith("plan: power mode 1 (5W) applied") for e in session.events)
    finally:
        session.close()
    assert device.power_mode == "MAXN"


def test_a_server_finds_a_profile_stored_under_the_old_short_name(tmp_path: Path) -> None:
    from wattcap.server.store import Store

    store = Store(tmp_path / "db.sqlite3")
    old = _table("15W")
    info, _ = store.add_profile(old, old.to_json(), "0" * 64)
    for asked in ("MODE_15W", "mode_15w", "15W"):
        assert [p.id for p in store.list_profiles(power_mode=asked)] == [info.id], asked
    assert store.list_profiles(power_mode="MODE_30W") == []
    assert [p.id for p in store.list_profiles(device="jetson-agx-orin")] == [info.id]
    store.close()
