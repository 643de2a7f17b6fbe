"""Read-only checks on a real NVIDIA GPU (`pytest -m gpu`; skipped where CUDA or NVML is
missing): NVML read, a few batch sizes profiled with the clock left alone by a device whose
every setter is refused, a few training steps with the model on the GPU timed by CUDA events.
Never changes a clock or a power limit. The same check runs without a GPU on the fakes."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.bench_scripts import load_bench_script


def _gpu_check() -> ModuleType:
    return load_bench_script("gpu_check")


@pytest.fixture(autouse=True)
def _heap_before_the_test_frozen() -> Iterator[None]:
    """The profiler frees a batch size's model with gc.collect() before building the next: a
    full collection scans every object the process holds, torch's and the suite's included
    (~0.5 s each, several per check). What a check frees it made itself, so what was there
    before it is frozen out of the scans for its length (gc.freeze: still alive and still
    holding what it references, only never scanned); its own objects are collected as
    before."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _has_gpu() -> bool:
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no driver, no library, no CUDA: no GPU
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs CUDA and NVML")
def test_on_the_gpu_read_only() -> None:
    lines: list[str] = []
    code = _gpu_check().check(lines, "resnet18", [8, 32], steps=5)
    report = "\n".join(lines)
    assert code == 0, report
    assert "setters refused: 0" in report and "on cuda" in report
    assert "watched run: mean" in report
    assert "on cuda:0 reached=True" in report and "the run stops rather than go on" in report


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs CUDA and NVML")
def test_the_clock_hold_probe_loads_the_gpu() -> None:
    """The spin kernel of the idle-lock probe must make the GPU leave idle, or the probe reads
    the idle reasons again and proves nothing. Reads only."""
    import torch

    from wattcap.devices.nvml import NvmlDevice
    from wattcap.devices.nvml_clock_hold import reasons_under_load

    device = NvmlDevice(0)
    try:
        under_load = reasons_under_load(torch.cuda, device.torch_device,
                                        device.clock_event_reasons)
    finally:
        device.close()
    assert under_load is not None and "GpuIdle" not in under_load, under_load


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_the_gpu_check_on_the_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.fake_cuda import FakeCuda
    from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
    from tests.runtime.test_session import TorchDeviceSpy

    # the fresh-profile run's sensor-noise window in real time on the fake's period: 10
    # readings (1 s), not 100 (10 s of the check's 15)
    monkeypatch.setattr("wattcap.measure.profiling.NOISE_READINGS", 10)
    gpu = FakeGpu()
    nvml = FakeNvml([gpu])
    FakeCuda({0: gpu}).install(monkeypatch)
    TorchDeviceSpy(monkeypatch)
    lines: list[str] = []
    code = _gpu_check().check(lines, "digits-cnn", [8], steps=3, pynvml_module=nvml,
                              cpu_step=True, watch_s=0.6)
    report = "\n".join(lines)
    assert code == 0, report
    assert "setters refused: 0" in report and "3 steps of b=8" in report
    assert "watched run:" in report and "by the counter" in report
    assert "training to 90 %" in report and "on cpu reached=True" in report
    assert "capped run (cap 30.5 W)" in report and "the run stops rather than go on" in report
    assert "fresh-profile run (informational): b=8" in report
    # the profiled point says what clock the board reported (the fake runs unlocked at 345)
    assert "ms/sample over" in report and "steps; clock 345 MHz" in report
    assert nvml.setter_calls == []


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_the_timing_modes_comparison_on_the_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/gpu_timing_modes.py runs each of its five ways on the fakes, sets nothing."""
    from tests.fakes.fake_cuda import FakeCuda
    from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
    from tests.runtime.test_session import TorchDeviceSpy

    # the profile's sensor-noise window in real time on the fake's period: 10 readings
    monkeypatch.setattr("wattcap.measure.profiling.NOISE_READINGS", 10)
    gpu = FakeGpu()
    nvml = FakeNvml([gpu])
    FakeCuda({0: gpu}).install(monkeypatch)
    TorchDeviceSpy(monkeypatch)
    lines: list[str] = []
    code = load_bench_script("gpu_timing_modes").compare(
        lines, "digits-cnn", [8], rounds=2, readings=2, train_s=0.6, window_s=1.5,
        pynvml_module=nvml, cpu_step=True)
    report = "\n".join(lines)
    assert code == 0, report
    rows = [line for line in lines if line.lstrip().startswith("8 ")]
    assert len(rows) == 5 and all(" ± " in row for row in rows), report
    assert "b=8 Session's wall time over a plain loop's, round by round: " in report
    assert "b=8 queued point's own time std" in report
    assert "b=8 queued points' clock, round by round: 345 MHz; 345 MHz" in report
    # every drift window of the steady run is reported, none re-planned
    assert "b=8 drift windows vs a point measured just before, time:" in report
    assert "b=8 drift called: 0 of" in report
    assert "setters refused: 0" in report and nvml.setter_calls == []


def test_the_gpu_check_without_a_gpu_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    if _has_gpu():
        pytest.skip("this machine has a GPU")
    assert _gpu_check().main([]) == 0
    assert "no NVIDIA GPU usable here" in capsys.readouterr().out
