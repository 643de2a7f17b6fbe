"""A Session refuses a profile measured in another power mode than the one its device is in,
with the command line's error (`ProfileTable.check_matches`), for a device given as an object
or by name; in the profile's own mode it plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.schema import WattcapFileError
from wattcap.devices import EmulatedDevice
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import DeviceHandling, PlanSettings

ORIN = "jetson-agx-orin"
#: a clock the AGX Orin has in MODE_15W (its top there) and in MAXN
CLOCK_HZ = 408_000_000


def orin_profile(power_mode: str) -> ProfileTable:
    """A one-point clock profile of the emulated AGX Orin, as measured in `power_mode`."""
    point = ProfilePoint(batch_size=8, knob_value=CLOCK_HZ, peak_power_w=12.0,
                         avg_power_w=10.0, seconds_per_sample=1e-3, steps=5, readings=10)
    return ProfileTable(device=ORIN, device_kind="emulated", power_mode=power_mode,
                        sensor_rail="VDD_GPU_SOC", sensor_period_s=0.05, model="digits-cnn",
                        input_shape=[1, 8, 8], batch_sizes=[8], knob_values=[CLOCK_HZ],
                        max_batch_size=8, mode="exhaustive", points=[point],
                        points_measured=1, profiling_device_s=1.0)


def session_on(device: EmulatedDevice | str, profile: ProfileTable | Path) -> Session:
    return Session(device, model="digits-cnn", planning=PlanSettings(profile=profile),
                   device_handling=DeviceHandling(handle_signals=False))


def cli_error(table: ProfileTable, device: EmulatedDevice, source: str) -> WattcapFileError:
    """What `wattcap train` says for this profile on this device (its check, called as the
    command calls it)."""
    with pytest.raises(WattcapFileError) as err:
        table.check_matches(device=device.name, source=source, power_mode=device.power_mode,
                            power_modes=device.power_mode_names())
    return err.value


def test_a_device_in_another_mode_is_refused_with_the_command_lines_error() -> None:
    table = orin_profile("MODE_15W")
    device = EmulatedDevice(ORIN)  # in MAXN
    with pytest.raises(WattcapFileError) as refused:
        session_on(device, table)
    said = refused.value
    assert "measured in power mode 'MODE_15W', but the device is in power mode 'MAXN'" in \
        said.message
    assert said.hint is not None and "sudo nvpmodel -m 1" in said.hint \
        and "--power-mode MODE_15W" in said.hint \
        and "EmulatedDevice(..., power_mode='MODE_15W')" in said.hint  # the Python user's way
    expected = cli_error(table, device, "profile")
    assert (said.message, said.hint) == (expected.message, expected.hint)


def test_a_device_opened_by_name_in_another_mode_is_refused_when_the_session_opens(
        tmp_path: Path) -> None:
    path = tmp_path / "orin-15w.json"
    orin_profile("MODE_15W").save(path)
    session = session_on(f"emulated:{ORIN}", path)  # built: no device opened yet
    with pytest.raises(WattcapFileError) as refused:
        session.start()
    expected = cli_error(ProfileTable.load(path), EmulatedDevice(ORIN), str(path))
    assert refused.value.message == expected.message
    assert refused.value.message.startswith(f"{path}: the profile was measured in power mode")
    assert not session._open  # nothing left running


@pytest.mark.parametrize("mode", ["MODE_15W", "15W", "1"])
def test_a_device_in_the_profiles_mode_plans_from_it(mode: str) -> None:
    device = EmulatedDevice(ORIN, power_mode=mode)
    with session_on(device, orin_profile("MODE_15W")) as session:
        assert session.batch_size == 8 and session.frequency_hz == CLOCK_HZ
    # a profile written when the modes had short names ("15W") is the same mode
    with session_on(EmulatedDevice(ORIN, power_mode=mode), orin_profile("15W")) as session:
        assert session.frequency_hz == CLOCK_HZ
