"""A clock someone else holds (an administrator's `nvidia-smi -lgc`, application clocks set
with `nvidia-smi -ac`) is seen before wattcap changes anything, and not replaced unless the user
says so: NVML cannot read a lock back, so a restore would silently remove it."""

from __future__ import annotations

import json

import pytest
from pynvml import NVML_ERROR_FUNCTION_NOT_FOUND

from tests.fakes.fake_cuda import FakeCuda
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from wattcap.devices.found_state import state_files
from wattcap.devices.nvml import NvmlDevice
from wattcap.devices.nvml_clock_hold import REPLACE_CLOCK_LOCK_ENV, ClockHeldError

MHZ = 1_000_000
LOCK_CALLS = ("nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks")


def open_device(gpu: FakeGpu) -> tuple[NvmlDevice, FakeNvml]:
    nvml = FakeNvml([gpu])
    return NvmlDevice(0, pynvml_module=nvml), nvml


def clock_setters(nvml: FakeNvml) -> list[str]:
    return [c for c in nvml.setter_calls if c in LOCK_CALLS]


def events(device: NvmlDevice) -> list[str]:
    """The run record's events but the idle-lock probe's (said where it could not run)."""
    return [e for e in device.events if not e.startswith("clock-lock probe")]


@pytest.fixture(autouse=True)
def _no_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REPLACE_CLOCK_LOCK_ENV, raising=False)


# a lock shown by the reasons bit (idle or under work), application clocks off their default
HELD_GPUS = {
    "reasons bit, idle": lambda: FakeGpu(admin_lock_mhz=1410),
    "reasons bit, under work": lambda: FakeGpu(admin_lock_mhz=1410, lock_reason_at_idle=False,
                                               busy=True),
    "application clocks": lambda: FakeGpu(applications_clock_mhz=1410,
                                          lock_reason_at_idle=False),
}
FOUND = {
    "reasons bit, idle": "the clock event reasons say a user-defined clock holds it",
    "reasons bit, under work": "the clock event reasons say a user-defined clock holds it",
    "application clocks": "application clocks 1410 MHz, default 1980 MHz",
}


@pytest.mark.parametrize("signal", sorted(HELD_GPUS))
def test_a_held_clock_is_refused_with_what_was_found_and_how_to_go_on(signal: str) -> None:
    gpu = HELD_GPUS[signal]()
    lock_before = gpu.locked_mhz
    device, nvml = open_device(gpu)
    with pytest.raises(ClockHeldError) as raised:
        device.set_frequency_hz(1500 * MHZ)
    err = raised.value
    assert FOUND[signal] in err.message and "does not change the clock" in err.message
    assert err.hint is not None
    assert "wattcap profile --knob power-limit" in err.hint  # leave it
    assert f"{REPLACE_CLOCK_LOCK_ENV}=1" in err.hint  # or replace it ...
    assert "sudo nvidia-smi -i 0 -lgc MIN,MAX" in err.hint  # ... and re-apply it after
    assert device.requested_frequency_hz() is None
    # nothing touched the clock, before or after the restore
    (state,) = state_files()
    assert json.loads(state.read_text())["settings"]["locked_clocks"].startswith("keep")
    device.restore()
    assert clock_setters(nvml) == [] and gpu.locked_mhz == lock_before
    assert state_files() == []


def test_the_power_limit_still_changes_under_a_held_clock() -> None:
    gpu = FakeGpu(admin_lock_mhz=1410, power_limit_mw=700_000)
    device, nvml = open_device(gpu)
    assert device.set_power_limit_w(300) == 300
    device.restore()
    assert gpu.power_limit_history == [300_000, 700_000]
    assert clock_setters(nvml) == [] and gpu.locked_mhz == (1410, 1410)


def test_a_kill_under_a_held_clock_leaves_the_clock_to_the_restore() -> None:
    gpu = FakeGpu(admin_lock_mhz=1410, power_limit_mw=700_000)
    nvml = FakeNvml([gpu])
    NvmlDevice(0, pynvml_module=nvml).set_power_limit_w(300)  # then killed: no restore
    (state,) = state_files()
    settings = json.loads(state.read_text())["settings"]
    NvmlDevice(0, pynvml_module=nvml).apply_found_settings(settings)  # `wattcap restore`
    assert gpu.power_limit_mw == 700_000 and gpu.locked_mhz == (1410, 1410)
    assert clock_setters(nvml) == []


def test_the_flag_replaces_the_lock_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REPLACE_CLOCK_LOCK_ENV, "1")
    gpu = FakeGpu(admin_lock_mhz=1410)
    device, nvml = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    assert gpu.locked_mhz == (1500, 1500)
    (event,) = events(device)
    assert "replaced the clock setting found" in event and REPLACE_CLOCK_LOCK_ENV in event
    assert "does not put that setting back" in event and "nvidia-smi -lgc" in event
    (state,) = state_files()
    assert json.loads(state.read_text())["settings"]["locked_clocks"].startswith("reset")
    device.set_frequency_hz(1200 * MHZ)  # the second change: no second event
    device.restore()
    assert gpu.locked_mhz is None  # the driver's default, as the flag said
    assert len(events(device)) == 1
    assert clock_setters(nvml) == ["nvmlDeviceSetGpuLockedClocks"] * 2 \
        + ["nvmlDeviceResetGpuLockedClocks"]


def test_wattcap_own_lock_is_not_taken_for_someone_elses() -> None:
    gpu = FakeGpu()  # the reasons show the bit once wattcap has locked, idle too
    device, nvml = open_device(gpu)
    device.set_frequency_hz(1500 * MHZ)
    device.set_frequency_hz(1200 * MHZ)  # the second change, over wattcap's own lock
    with device.claimed():  # phases of one profile: restored between, the claim kept
        device.set_frequency_hz(1500 * MHZ)
        device.restore()
        device.set_frequency_hz(1200 * MHZ)
    device.set_frequency_hz(1500 * MHZ)  # a new run after the restore
    device.restore()
    second = NvmlDevice(0, pynvml_module=nvml)  # another run, another object
    second.set_frequency_hz(1200 * MHZ)
    second.restore()
    assert events(device) == [] and events(second) == []
    assert gpu.locked_mhz is None and state_files() == []


def test_a_killed_wattcap_lock_is_not_taken_for_someone_elses() -> None:
    gpu = FakeGpu()
    nvml = FakeNvml([gpu])
    NvmlDevice(0, pynvml_module=nvml).set_frequency_hz(1500 * MHZ)  # killed: lock left
    device = NvmlDevice(0, pynvml_module=nvml)
    assert device.set_frequency_hz(1200 * MHZ) == 1200 * MHZ  # the stale lock reset first
    assert gpu.locked_mhz == (1200, 1200)
    assert any("put back the settings" in e for e in device.events)
    assert not any("replaced" in e for e in device.events)
    device.restore()


def test_a_gpu_without_application_clocks_skips_that_signal() -> None:
    gpu = FakeGpu(applications_clock_mhz=None, default_applications_clock_mhz=None)
    device, nvml = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    assert "nvmlDeviceGetApplicationsClock" in nvml.calls  # asked, answered NOT_SUPPORTED
    device.restore()
    # the other signal still holds on such a GPU
    held, _ = open_device(FakeGpu(applications_clock_mhz=None, admin_lock_mhz=1410))
    with pytest.raises(ClockHeldError, match="user-defined clock"):
        held.set_frequency_hz(1500 * MHZ)
    held.restore()


def test_a_driver_without_the_getter_skips_that_signal() -> None:
    # newer bindings on an older driver: the entry point is missing (FUNCTION_NOT_FOUND)
    gpu = FakeGpu(fail={"nvmlDeviceGetApplicationsClock": (0, NVML_ERROR_FUNCTION_NOT_FOUND)})
    device, _ = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    device.restore()


def test_a_dry_run_reads_no_hold_and_changes_nothing() -> None:
    gpu = FakeGpu(admin_lock_mhz=1410)
    nvml = FakeNvml([gpu])
    device = NvmlDevice(0, dry_run=True, pynvml_module=nvml)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ  # planned, never applied
    device.restore()
    assert nvml.setter_calls == [] and gpu.locked_mhz == (1410, 1410)


def test_a_stock_application_clock_below_the_top_is_not_taken_for_a_lock() -> None:
    """A V100's driver default application clock (1312 of 1530 MHz) sets the reason bit under
    load by itself: with the application clocks at that default, the bit proves no lock, and
    the clock is locked as on any GPU."""
    import pynvml

    gpu = FakeGpu(applications_clock_mhz=1410, default_applications_clock_mhz=1410,
                  clock_reasons=pynvml.nvmlClocksEventReasonApplicationsClocksSetting)
    device, nvml = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    assert "nvmlDeviceSetGpuLockedClocks" in nvml.setter_calls
    device.restore()
    # the same bit where the default is the top clock: someone's lock
    held, _ = open_device(FakeGpu(
        clock_reasons=pynvml.nvmlClocksEventReasonApplicationsClocksSetting))
    with pytest.raises(ClockHeldError):
        held.set_frequency_hz(1500 * MHZ)


def test_an_idle_gpu_s_lock_is_seen_under_a_short_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle GPU may report only GpuIdle over a lock: with torch's CUDA there, the reasons
    are read again while a spin kernel keeps the GPU busy, and the lock shows."""
    gpu = FakeGpu(admin_lock_mhz=1410, lock_reason_at_idle=False, applications_clock_mhz=None,
                  default_applications_clock_mhz=None)
    cuda = FakeCuda({0: gpu}).install(monkeypatch)
    device, nvml = open_device(gpu)
    with pytest.raises(ClockHeldError, match="user-defined clock"):
        device.set_frequency_hz(1500 * MHZ)
    assert ("spin", 0) in cuda.calls  # the probe ran on this GPU ...
    assert not gpu.busy  # ... and was waited for: no work left running
    device.restore()
    assert clock_setters(nvml) == [] and gpu.locked_mhz == (1410, 1410)


def test_the_probe_finds_no_lock_where_none_is(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(lock_reason_at_idle=False)
    cuda = FakeCuda({0: gpu}).install(monkeypatch)
    device, _ = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    assert ("spin", 0) in cuda.calls
    device.restore()
    assert gpu.locked_mhz is None


def test_without_cuda_an_idle_gpu_s_lock_stays_unseen_and_the_record_says_so() -> None:
    """The limit of what NVML alone can tell: no CUDA, no probe, said in the run record."""
    gpu = FakeGpu(admin_lock_mhz=1410, lock_reason_at_idle=False, applications_clock_mhz=None,
                  default_applications_clock_mhz=None)
    device, _ = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ
    (said,) = [e for e in device.events if e.startswith("clock-lock probe")]
    assert "no CUDA device" in said and "could go unseen" in said
    device.restore()


def test_a_probe_that_fails_or_sees_nothing_says_so_and_the_run_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    gpu = FakeGpu(lock_reason_at_idle=False)
    cuda = FakeCuda({0: gpu}).install(monkeypatch)

    def failing_spin(cycles: int) -> None:
        cuda.calls.append(("spin", cuda.current))
        gpu.busy = True
        raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")

    monkeypatch.setattr(torch.cuda, "_sleep", failing_spin)
    device, _ = open_device(gpu)
    assert device.set_frequency_hz(1500 * MHZ) == 1500 * MHZ  # the change still happens
    (said,) = [e for e in device.events if e.startswith("clock-lock probe")]
    assert "failed on cuda:0" in said and "busy or unavailable" in said
    assert not gpu.busy  # the kernels were waited for after the error
    device.restore()
    # a GPU that reads idle under the spin kernel too: the probe proved nothing, said so
    idle = FakeGpu(lock_reason_at_idle=False)
    FakeCuda({0: idle}).install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)  # no work reaches it
    other, _ = open_device(idle)
    other.set_frequency_hz(1500 * MHZ)
    assert any("still read idle under the spin kernel" in e for e in other.events)
    other.restore()
