"""The sensor's liveness is judged by the readings it delivers: a training thread that keeps the
sensor thread from running (work holding the GIL) does not stop a healthy run, and a sensor
that really stops stops the run once it has been silent for 3 of its periods."""

from __future__ import annotations

import ctypes
import time

import pytest

from tests.devices.test_hardware_truth import _gpu_and_device
from wattcap.devices import EmulatedDevice
from wattcap.devices.errors import WatchError
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import DeviceHandling, PlanSettings

MODEL = "digits-cnn"
#: the promise, written out (not imported, so that changing the code's bound fails here)
DEAD_AFTER_PERIODS = 3

pytestmark = pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")

#: libc called with the GIL held (a PyDLL call does not release it): a C extension busy for
#: a while, or a long pure-Python stretch between the interpreter's thread switches
_GIL_HOLDING = ctypes.PyDLL(None)


def _hold_the_gil_s(seconds: float) -> None:
    _GIL_HOLDING.usleep(int(seconds * 1e6))


class _SensorThatStops(EmulatedDevice):
    """An emulated board whose power sensor produces no value after device time `stop_at_s`
    (the clock and the work go on): a dead sensor, at the hardware boundary."""

    def __init__(self, stop_at_s: float) -> None:
        super().__init__("jetson-nano")
        self.stop_at_s = stop_at_s

    def _tick(self) -> None:
        if self._next_tick_s <= self.stop_at_s:
            super()._tick()
        else:
            self._next_tick_s += self.spec.sensor_period_s  # the slot passes, nothing read


def _session(device: object) -> Session:
    return Session(device, model=MODEL, planning=PlanSettings(batch_size=32),
                   device_handling=DeviceHandling(handle_signals=False))


def test_a_sensor_that_stops_stops_the_run_after_3_periods_of_device_time() -> None:
    """On the emulated clock: the run goes on while the silence is at most 3 periods, and stops
    at the first step boundary after (each step is far shorter than a period)."""
    device = _SensorThatStops(stop_at_s=5.0)
    period_s = device.sensor_period_s
    session = _session(device)
    boundaries_s: list[float] = []  # device time at each step boundary passed
    with pytest.raises(WatchError, match="no power reading for") as raised, session:
        for _ in range(100_000):
            with session.step(samples=8):
                pass
            boundaries_s.append(device.now_s())
    stopped_at_s = device.now_s()  # the boundary that stopped the run (nothing ran after)
    last = session._meter.last
    assert last is not None and last.time_s <= 5.0
    step_s = stopped_at_s - boundaries_s[-1]
    assert step_s < period_s / 2  # the boundaries resolve the bound to half a period
    silent_s = stopped_at_s - last.time_s
    # stopped at the first boundary past the bound: neither before it, nor later
    assert DEAD_AFTER_PERIODS * period_s < silent_s <= DEAD_AFTER_PERIODS * period_s + step_s
    assert boundaries_s[-1] - last.time_s <= DEAD_AFTER_PERIODS * period_s
    assert f"no power reading for {silent_s:.2f} s" in str(raised.value)
    assert any(e.startswith("stopped: no power reading") for e in session.events)


def test_a_training_thread_holding_the_gil_does_not_stop_a_healthy_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NVML reads release the GIL (ctypes); the training thread then holds it for 1 s, ten
    sensor periods in which the sensor thread cannot record a reading. At the step boundary
    the sensor reads again as soon as it can run: the run goes on."""
    nvml, _, device = _gpu_and_device(monkeypatch)
    read = nvml.nvmlDeviceGetFieldValues

    def driver_read(*args: object) -> object:
        # in the driver, the GIL released: when the training thread lets go of the GIL,
        # the sensor thread reads, and the training thread runs on to its step boundary
        # before the reading is back
        time.sleep(0.02)
        return read(*args)

    monkeypatch.setattr(nvml, "nvmlDeviceGetFieldValues", driver_read)
    period_s = device.sensor_period_s
    session = _session(device)
    with session:
        for _ in range(3):
            with session.step():
                time.sleep(period_s)
        before = session._meter.readings
        with session.step():
            _hold_the_gil_s(10 * period_s)
        for _ in range(3):
            with session.step():
                time.sleep(period_s)
    assert session._meter.readings > before  # the sensor went on after the stretch
    assert not any(e.startswith("stopped") for e in session.events)
    assert nvml.gpus[0].locked_mhz is None


def test_a_hung_sensor_thread_stops_the_run_even_when_the_training_thread_yields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check yields to the sensor thread, but one blocked in the driver delivers nothing:
    the run stops, with the silence it measured (more than 3 periods)."""
    nvml, _, device = _gpu_and_device(monkeypatch, hang={"nvmlDeviceGetFieldValues": 2})
    period_s = device.sensor_period_s
    session = _session(device)
    try:
        with pytest.raises(WatchError, match="no power reading for") as raised, session:
            for _ in range(50):
                with session.step():
                    time.sleep(period_s)
    finally:
        nvml.hung.set()  # let the blocked poll thread finish
    message = str(raised.value)
    silent_s = float(message.split("no power reading for ")[1].split(" s")[0])
    assert silent_s > DEAD_AFTER_PERIODS * period_s
    assert nvml.gpus[0].locked_mhz is None
