"""The NVML backend against a fake pynvml built from the real module's constants and types."""

from __future__ import annotations

import ctypes.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from wattcap.devices.errors import (
    DeviceError,
    DeviceLostError,
    DeviceNotFoundError,
    DeviceOutOfMemoryError,
    DevicePermissionError,
    FrequencyNotFollowedError,
)
from wattcap.devices.found_state import state_files
from wattcap.devices.nvml import (
    AVERAGE_PERIOD_S,
    CONTEXT_RESERVED_BYTES,
    INSTANT_FAILURES_BEFORE_AVERAGE,
    INSTANT_PERIOD_S,
    NvmlDevice,
    list_nvml_devices,
    slugify,
)
from wattcap.devices.nvml_errors import clock_reason_names
from wattcap.devices.probe import probe

MHZ = 1_000_000


def open_device(gpu: FakeGpu | None = None, **kwargs: object) -> tuple[NvmlDevice, FakeNvml]:
    nvml = FakeNvml([gpu or FakeGpu()])
    return NvmlDevice(0, pynvml_module=nvml, **kwargs), nvml


# -- identity and clocks ---------------------------------------------------------------------


def test_name_is_a_slug() -> None:
    device, _ = open_device()
    assert device.name == "nvidia-h100-80gb-hbm3"
    assert device.kind == "nvml"
    assert slugify("NVIDIA GeForce RTX 4090 (Laptop)") == "nvidia-geforce-rtx-4090-laptop"


def test_clocks_at_the_highest_memory_clock_ascending_in_hz() -> None:
    gpu = FakeGpu(graphics_clocks_mhz={2619: [1980, 1500, 1500, 345], 1593: [1234]})
    device, _ = open_device(gpu)
    assert device.frequencies_hz() == [345 * MHZ, 1500 * MHZ, 1980 * MHZ]


def test_construction_only_reads() -> None:
    for gpu in (FakeGpu(), FakeGpu(deny_set=True), FakeGpu(has_instant_power=False)):
        device, nvml = open_device(gpu)
        device.info()
        device.read_power_w()
        device.restore()
        assert nvml.setter_calls == []
        assert gpu.locked_mhz is None


def test_set_and_restore() -> None:
    gpu = FakeGpu()
    device, nvml = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    assert gpu.locked_mhz == (1500, 1500)
    # the live clock idles between steps; the requested clock is the one to reason with
    assert device.current_frequency_hz() == gpu.idle_clock_mhz * MHZ
    assert device.requested_frequency_hz() == device.run_frequency_hz() == 1500 * MHZ
    gpu.busy = True
    assert device.current_frequency_hz() == 1500 * MHZ  # under work the lock shows
    device.restore()
    assert gpu.locked_mhz is None
    assert device.requested_frequency_hz() is None
    assert device.run_frequency_hz() == max(device.frequencies_hz())
    device.restore()
    assert nvml.setter_calls == ["nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"]


def test_restore_without_lock_touches_nothing() -> None:
    gpu = FakeGpu(locked_mhz=(1200, 1200))  # locked by someone else: not ours to reset
    device, nvml = open_device(gpu)
    with device:
        pass
    assert nvml.setter_calls == []
    assert gpu.locked_mhz == (1200, 1200)


def test_dry_run_never_calls_a_setter() -> None:
    gpu = FakeGpu()
    device, nvml = open_device(gpu, dry_run=True)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    device.restore()
    device.close()
    assert nvml.setter_calls == []
    assert device.planned_locks_mhz == [1500]
    assert nvml.init_count == 0


def test_unsupported_clock_is_rejected() -> None:
    device, nvml = open_device()
    with pytest.raises(ValueError, match="not a supported graphics clock"):
        device.set_frequency_hz(1234 * MHZ)
    assert nvml.setter_calls == []


def test_no_permission_gives_the_fix() -> None:
    gpu = FakeGpu(deny_set=True)
    device, nvml = open_device(gpu)
    with pytest.raises(DevicePermissionError) as raised:
        device.set_frequency_hz(1500 * MHZ)
    message = str(raised.value)
    assert "root" in message and "sudo nvidia-smi -lgc 1500,1500" in message
    assert "--dry-run" in message
    assert isinstance(raised.value.__cause__, pynvml.NVMLError_NoPermission)
    device.restore()  # nothing was locked, so nothing to reset
    assert nvml.setter_calls == ["nvmlDeviceSetGpuLockedClocks"]


def test_locking_not_supported_is_a_clear_error() -> None:
    device, _ = open_device(FakeGpu(locking_supported=False))
    with pytest.raises(DeviceError, match="does not support locking") as raised:
        device.set_frequency_hz(1500 * MHZ)
    assert not isinstance(raised.value, DevicePermissionError)


def test_power_cap_makes_the_lock_fail_and_restore_resets() -> None:
    gpu = FakeGpu(cap_mhz=1200, busy=True)  # working under a power limit below the lock
    device, nvml = open_device(gpu)
    with pytest.raises(FrequencyNotFollowedError) as raised:
        device.set_frequency_hz(1500 * MHZ)
    message = str(raised.value)
    assert "requested 1500 MHz" in message and "1200 MHz" in message
    assert "SwPowerCap" in message
    err = raised.value
    assert (err.requested_hz, err.running_hz, err.cause) == (1500 * MHZ, 1200 * MHZ,
                                                             "power limit")
    device.restore()
    assert gpu.locked_mhz is None
    assert nvml.setter_calls[-1] == "nvmlDeviceResetGpuLockedClocks"


def test_idle_gpu_after_lock_is_not_an_error() -> None:
    device, _ = open_device(FakeGpu())  # no work runs: the live clock reads the idle clock
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    assert "GpuIdle" in device.clock_event_reasons()


def test_clock_reasons_fall_back_to_the_throttle_api() -> None:
    reasons = pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwThermalSlowdown
    nvml = FakeNvml([FakeGpu(clock_reasons=reasons, busy=True)], event_reasons_api=False)
    device = NvmlDevice(0, pynvml_module=nvml)
    assert device.clock_event_reasons() == ["SwPowerCap", "HwThermalSlowdown"]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in nvml.calls


def test_reason_names_come_from_the_real_module() -> None:
    mask = pynvml.nvmlClocksEventReasonGpuIdle | pynvml.nvmlClocksEventReasonSwThermalSlowdown
    assert clock_reason_names(pynvml, mask) == ["GpuIdle", "SwThermalSlowdown"]
    assert clock_reason_names(pynvml, 0) == []


# -- power, energy, memory -------------------------------------------------------------------


class ManualClock:
    """The time the fake GPU's sensors sample at, moved by the test."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_instant_power_follows_the_draw_within_its_refresh() -> None:
    clock = ManualClock()
    gpu = FakeGpu(busy_draw_mw=312_400, idle_draw_mw=250_000, clock=clock)
    device, nvml = open_device(gpu)
    assert device.read_power_w() == pytest.approx(250.0)  # idle
    clock.now_s = 100.51
    gpu.busy = True  # work starts
    assert device.read_power_w() == pytest.approx(250.0)  # not refreshed yet
    clock.now_s = 100.535
    assert device.read_power_w() == pytest.approx(312.4)
    assert device.sensor_period_s == INSTANT_PERIOD_S
    assert device.sensor_rail == "board-instant"
    assert "nvmlDeviceGetPowerUsage" not in nvml.calls


def test_the_averaged_power_lags_a_change_by_its_window() -> None:
    clock = ManualClock()
    gpu = FakeGpu(busy_draw_mw=312_400, idle_draw_mw=250_000, has_instant_power=False,
                  clock=clock)
    device, _ = open_device(gpu)
    assert device.sensor_period_s == AVERAGE_PERIOD_S
    assert device.sensor_rail == "board-average"
    clock.now_s = 101.0
    gpu.busy = True
    clock.now_s = 101.05
    assert device.read_power_w() == pytest.approx(250.0)  # the window is all idle
    clock.now_s = 101.55
    assert device.read_power_w() == pytest.approx(0.5 * 250.0 + 0.5 * 312.4)  # half of it
    clock.now_s = 102.05
    assert device.read_power_w() == pytest.approx(312.4)  # a second later, all busy


def test_the_energy_counter_integrates_the_draw() -> None:
    clock = ManualClock()
    gpu = FakeGpu(busy_draw_mw=300_000, idle_draw_mw=60_000, energy_at_start_mj=5_000_000,
                  clock=clock)
    device, _ = open_device(gpu)
    assert device.energy_counter_j() == pytest.approx(5_000.0)
    clock.now_s += 2.0  # 2 s idle
    gpu.busy = True
    clock.now_s += 1.5  # 1.5 s of work
    assert device.energy_counter_j() == pytest.approx(5_000.0 + 2 * 60.0 + 1.5 * 300.0)
    old, _ = open_device(FakeGpu(has_energy_counter=False))
    assert old.energy_counter_j() is None


def test_memory() -> None:
    device, _ = open_device(FakeGpu(memory_total=16 << 30, memory_free=10 << 30))
    assert device.memory_bytes() == (16 << 30) - CONTEXT_RESERVED_BYTES
    # no CUDA context in this process yet: the one it will create comes out of the free memory
    assert device.free_memory_bytes() == (10 << 30) - CONTEXT_RESERVED_BYTES


def test_free_memory_counts_this_process_pool_and_its_context_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With CUDA up in this process, NVML's free already lacks its context (not taken again)
    and its allocator pool, which is given back before the next batch size: that counts as
    free."""
    import torch

    device, _ = open_device(FakeGpu(memory_total=16 << 30, memory_free=10 << 30))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 1 << 30)
    assert device.free_memory_bytes() == 11 << 30


def test_power_limit_is_read_for_diagnostics() -> None:
    device, nvml = open_device(FakeGpu(power_limit_mw=350_000))
    assert device.power_limit_w() == pytest.approx(350.0)
    assert any("power limit 350 W" in note for note in device.info().notes)
    assert nvml.setter_calls == []


def test_execute_maps_out_of_memory() -> None:
    device, _ = open_device()

    def step() -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(DeviceOutOfMemoryError, match="batch size 128"):
        device.execute(step, SimpleNamespace(batch_size=128))


# -- library presence ------------------------------------------------------------------------


def test_missing_pynvml_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(DeviceNotFoundError) as raised:
        NvmlDevice()
    assert "pip install 'wattcap[nvml]'" in str(raised.value)
    assert list_nvml_devices() == []


def test_missing_driver() -> None:
    nvml = FakeNvml(library_missing=True)
    with pytest.raises(DeviceNotFoundError, match="cannot initialise"):
        NvmlDevice(pynvml_module=nvml)
    assert list_nvml_devices(nvml) == []


def test_bad_index_releases_nvml() -> None:
    nvml = FakeNvml([FakeGpu()])
    with pytest.raises(DeviceNotFoundError, match="no GPU at index 3"):
        NvmlDevice(3, pynvml_module=nvml)
    assert nvml.init_count == 0


def test_list_devices_and_close() -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu(name="NVIDIA A100-SXM4-40GB")])
    assert list_nvml_devices(nvml) == ["nvml:0", "nvml:1"]
    device = NvmlDevice(1, pynvml_module=nvml)
    assert device.name == "nvidia-a100-sxm4-40gb"
    device.close()
    assert nvml.init_count == 0


def test_real_pynvml_without_driver_lists_nothing() -> None:
    devices = list_nvml_devices()  # the installed nvidia-ml-py, for real
    assert isinstance(devices, list)
    if ctypes.util.find_library("nvidia-ml") is None:
        assert devices == []


# -- probe -----------------------------------------------------------------------------------


def test_probe_reports_nvml_devices(tmp_path: Path) -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu(name="Tesla P100", has_instant_power=False,
                                        has_energy_counter=False)])
    report = probe(tmp_path, pynvml_module=nvml)
    h100, p100 = (line for line in report.found if line.startswith("NVML"))
    assert h100.startswith("NVML nvml:0 NVIDIA H100 80GB HBM3: 110 graphics clocks 345-1980 MHz")
    assert "instant power" in h100 and "energy counter" in h100 and "power limit 700 W" in h100
    assert "power as a 1 s average" in p100 and "no energy counter" in p100
    assert "no Jetson GPU devfreq node under /sys/class/devfreq" in report.missing
    assert nvml.setter_calls == []
    assert nvml.init_count == 0


def test_probe_without_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert "NVML: library not found (no NVIDIA driver)" in report.missing
    assert "- NVML: library not found (no NVIDIA driver)" in str(report)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    report = probe(tmp_path)
    assert any("pynvml not installed" in line for line in report.missing)
    assert report.found == []


def test_the_power_limit_range_is_read_from_the_board() -> None:
    device, nvml = open_device(FakeGpu(power_limit_constraints_mw=(150_000, 400_000)))
    assert device.power_limit_range_w() == (150.0, 400.0)
    assert nvml.setter_calls == []  # reading it changes nothing
    # a board that does not report it (NotSupported) has no range, and says so by None
    unsupported, _ = open_device(FakeGpu(fail={
        "nvmlDeviceGetPowerManagementLimitConstraints": (0, pynvml.NVML_ERROR_NOT_SUPPORTED)}))
    assert unsupported.power_limit_range_w() is None


# -- what real boards do -----------------------------------------------------------------------


def test_a_transient_instant_power_error_keeps_the_instant_sensor() -> None:
    """A busy driver answers the instant field with an error now and then: that reading falls
    back to the average, the next asks the instant field again; only a run of failures makes
    the average the sensor, and the record says so."""
    clock = ManualClock()
    gpu = FakeGpu(busy_draw_mw=300_000, idle_draw_mw=100_000, clock=clock, busy=True,
                  instant_field_errors=[pynvml.NVML_ERROR_UNKNOWN])
    device, _ = open_device(gpu)
    clock.now_s += 1.5  # a full averaging window of work
    assert device.read_power_w() == pytest.approx(300.0)  # this one from the average
    assert (device.sensor_period_s, device.sensor_rail) == (INSTANT_PERIOD_S, "board-instant")
    gpu.busy = False
    clock.now_s += 0.05
    assert device.read_power_w() == pytest.approx(100.0)  # the instant field again, not lagging
    assert device.sensor_changes == []
    # errors that do not stop: the sensor becomes the average after a run of them, for good
    gpu.instant_field_errors = [pynvml.NVML_ERROR_UNKNOWN] * INSTANT_FAILURES_BEFORE_AVERAGE
    for _ in range(INSTANT_FAILURES_BEFORE_AVERAGE - 1):
        device.read_power_w()
        assert device.sensor_rail == "board-instant"
    device.read_power_w()
    assert (device.sensor_period_s, device.sensor_rail) == (AVERAGE_PERIOD_S, "board-average")
    (change,) = device.sensor_changes
    assert f"{INSTANT_FAILURES_BEFORE_AVERAGE} readings in a row" in change
    assert "1 s average" in change


def test_a_change_is_refused_when_the_power_limit_cannot_be_recorded() -> None:
    """The state file written before the first change must hold the power limit, or a restore
    after a kill could not put it back: no limit read, no change."""
    gpu = FakeGpu(fail={"nvmlDeviceGetPowerManagementLimit": (0, pynvml.NVML_ERROR_UNKNOWN)})
    device, nvml = open_device(gpu)
    with pytest.raises(DeviceError, match="cannot read the power limit") as raised:
        device.set_frequency_hz(1500 * MHZ)
    assert "fix:" in str(raised.value)
    with pytest.raises(DeviceError, match="cannot read the power limit"):
        device.set_power_limit_w(300.0)
    assert nvml.setter_calls == [] and state_files() == []
    device.close()
    # a board without a power limit (NOT_SUPPORTED) has none to lose: its clock may be locked
    no_limit = FakeGpu(fail={"nvmlDeviceGetPowerManagementLimit":
                             (0, pynvml.NVML_ERROR_NOT_SUPPORTED)})
    device, _ = open_device(no_limit)
    device.set_frequency_hz(1500 * MHZ)
    (state,) = state_files()
    assert json.loads(state.read_text())["settings"]["power_limit_mw"] is None
    device.close()
    assert state_files() == []


@pytest.mark.parametrize(("step", "code", "error", "words"), [
    ("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED, DeviceNotFoundError, "modprobe nvidia"),
    ("nvmlInit", pynvml.NVML_ERROR_NO_PERMISSION, DevicePermissionError, "/dev/nvidia"),
    ("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_NO_PERMISSION, DevicePermissionError,
     "/dev/nvidia"),
    ("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_GPU_IS_LOST, DeviceLostError, "dmesg"),
    ("nvmlDeviceGetName", 123_456, DeviceError, "nvidia-smi"),
    ("nvmlDeviceGetSupportedGraphicsClocks", pynvml.NVML_ERROR_NO_PERMISSION,
     DevicePermissionError, "/dev/nvidia"),
])
def test_opening_a_gpu_turns_every_nvml_error_into_one_with_the_fix(
    step: str, code: int, error: type[DeviceError], words: str,
) -> None:
    nvml = FakeNvml([FakeGpu()])
    real_call = getattr(nvml, step)

    def failing(*args: object) -> object:
        if step != "nvmlInit":
            real_call(*args)  # bookkeeping (the call list, the init count)
        raise pynvml.NVMLError(code)

    setattr(nvml, step, failing)
    with pytest.raises(error) as raised:
        NvmlDevice(0, pynvml_module=nvml)
    assert type(raised.value) is error and "fix:" in str(raised.value)
    assert words in str(raised.value) and "index 0" in str(raised.value)
    assert isinstance(raised.value.__cause__, pynvml.NVMLError)
    assert nvml.init_count == 0  # NVML released whatever failed


def test_the_fake_board_draws_less_at_a_lower_lock_and_never_above_its_limit() -> None:
    """The setters are tested for their effect: a lower locked clock lowers the measured
    power, a power limit caps it."""
    clock = ManualClock()
    gpu = FakeGpu(busy_draw_mw=650_000, idle_draw_mw=100_000, clock=clock, busy=True,
                  power_limit_constraints_mw=(200_000, 700_000))
    device, _ = open_device(gpu)
    clock.now_s += 0.05
    unlocked_w = device.read_power_w()
    assert unlocked_w == pytest.approx(650.0)  # boost clock
    device.set_frequency_hz(990 * MHZ)  # half the 1980 MHz boost clock
    clock.now_s += 0.05
    locked_w = device.read_power_w()
    assert locked_w < unlocked_w
    assert locked_w == pytest.approx(100.0 + 550.0 * 0.5**2)
    device.restore()
    clock.now_s += 0.05
    assert device.read_power_w() == pytest.approx(650.0)  # the lock is gone: boost again
    assert device.set_power_limit_w(300.0) == 300.0
    clock.now_s += 1.5  # a full window under the limit
    assert device.read_power_w() <= 300.0
    assert gpu.average_reading_mw() <= 300_000  # the limit holds the average too
    device.close()
    clock.now_s += 0.05
    assert gpu.instant_reading_mw() == 650_000  # the limit found is back


def test_a_thermal_slowdown_is_named_as_the_cause() -> None:
    gpu = FakeGpu(cap_mhz=1100, busy=True,
                  cap_reason=pynvml.nvmlClocksEventReasonSwThermalSlowdown)
    device, _ = open_device(gpu)
    with pytest.raises(FrequencyNotFollowedError) as raised:
        device.set_frequency_hz(1500 * MHZ)
    assert raised.value.cause == "thermal" and "Thermal" in raised.value.cause_detail
    assert raised.value.running_hz == 1100 * MHZ
