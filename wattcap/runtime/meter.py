"""Power accounting of a run: peak, mean and energy from the sensor readings, and the clock
the hardware reported beside them (observed, next to the requested clock)."""

from __future__ import annotations

import math
import threading

from pydantic import BaseModel, ConfigDict

from wattcap.devices.base import PowerReading


class PowerMeter:
    """Running peak, mean and energy of sensor readings (a sensor-tick callback)."""

    def __init__(self, period_s: float) -> None:
        """An empty meter for a sensor of period `period_s` (a checkpoint's sums: `resume`)."""
        self.period_s = period_s
        self.peak_w: float | None = None
        #: sum of the readings that came one sensor period after the one before (energy)
        self.total_w = 0.0
        #: sum of every reading (the mean): a polling thread's readings come a period apart
        #: give or take its jitter, so on real hardware nearly every reading is "off period"
        #: and `total_w` alone would hold almost none of them
        self.sum_w = 0.0
        self.readings = 0
        #: energy of readings that did not come one sensor period after the one before
        #: (a stalled poll, a sensor that changed period): power x the real time between them
        self.off_period_j = 0.0
        self.last: PowerReading | None = None
        #: device time up to which the sums hold the run's energy: the last reading's time, or
        #: where the watch started (`start`; a resumed run: `resume`). None before either: the
        #: first reading then stands for one whole period
        self.covered_s: float | None = None
        #: a checkpoint's last reading's power: it stands for the time a resumed run ends
        #: with when no reading came after the resume
        self._resumed_w: float | None = None
        #: a checkpoint's time not measured yet, which the first reading after it measures
        self._carried_s = 0.0
        self.clock = ObservedClock()
        #: the thread that delivered the last reading (a sensor thread, or the thread that
        #: advances an emulated clock): a check on another thread can yield to it
        self.last_thread_id: int | None = None
        self._arrived = threading.Condition()

    def __call__(self, reading: PowerReading) -> None:
        with self._arrived:
            self._add(reading)
            self.last_thread_id = threading.get_ident()
            self._arrived.notify_all()

    def wait_for_reading(self, after_s: float, timeout_s: float) -> PowerReading | None:
        """Block (releasing the GIL) until a reading taken at or after device time `after_s`
        has arrived, for at most `timeout_s` wall seconds; that reading, or None."""
        with self._arrived:
            self._arrived.wait_for(
                lambda: self.last is not None and self.last.time_s >= after_s, timeout_s)
            return self.last if self.last is not None and self.last.time_s >= after_s else None

    def start(self, now_s: float) -> None:
        """The watch starts at device time `now_s`: the first reading stands for the time
        since then (a whole period when the sensor's phase starts there), and for the time a
        resumed checkpoint had not had measured."""
        with self._arrived:
            self.covered_s = now_s - self._carried_s

    def _add(self, reading: PowerReading) -> None:
        self.readings += 1
        self.sum_w += reading.power_w
        self.last = reading
        since_s, self.covered_s = self.covered_s, reading.time_s
        between_s = None if since_s is None else reading.time_s - since_s
        if between_s is None or math.isclose(between_s, self.period_s, rel_tol=1e-6):
            self.total_w += reading.power_w  # stands for one sensor period
        else:
            self.off_period_j += reading.power_w * max(0.0, between_s)
        if self.peak_w is None or reading.power_w > self.peak_w:
            self.peak_w = reading.power_w
        if reading.clock_hz is not None:
            self.clock.add(reading.clock_hz)

    @property
    def energy_j(self) -> float:
        """Power integrated over time up to the last reading: a reading stands for the time
        since the one before (one sensor period when the sensor kept its pace); the first for
        the time since `start`, or for one period without it."""
        return self.total_w * self.period_s + self.off_period_j

    @property
    def measured_energy_j(self) -> float | None:
        """`energy_j`, or None before any reading: a run shorter than the sensor's period has
        no measured energy, not 0 J. (Without `start`, the first reading stands for a whole
        period although a run starts between readings: over a uniform phase that is right on
        average, and `energy_to_j` covers the end.)"""
        return None if self.readings == 0 else self.energy_j

    def uncovered_s(self, now_s: float) -> float:
        """Device seconds from the last reading (or the start) to `now_s` that no reading has
        measured yet (0 before `start` and any reading)."""
        return 0.0 if self.covered_s is None else max(0.0, now_s - self.covered_s)

    def energy_to_j(self, now_s: float) -> float:
        """`energy_j` up to device time `now_s` (a run's end): the time since the last reading
        at that reading's power. The reading that would have measured it never comes for a
        run that ends between two, and leaving it out would lose up to a period of energy."""
        power_w = self.last.power_w if self.last is not None else self._resumed_w
        return self.energy_j + (0.0 if power_w is None else power_w * self.uncovered_s(now_s))

    def measured_energy_to_j(self, now_s: float) -> float | None:
        """`energy_to_j(now_s)`, or None before any reading (as `measured_energy_j`)."""
        return None if self.readings == 0 else self.energy_to_j(now_s)

    @property
    def average_w(self) -> float | None:
        """Mean of the readings so far (every one of them, on the sensor's pace or not)."""
        return self.sum_w / self.readings if self.readings else None

    def state(self, now_s: float | None = None) -> MeterState:
        """What a checkpoint written at device time `now_s` keeps of the meter: the sums, and
        the time since the last reading, which the first reading after a resume measures."""
        last_w = self.last.power_w if self.last is not None else self._resumed_w
        return MeterState(peak_w=self.peak_w, total_w=self.total_w, sum_w=self.sum_w,
                          readings=self.readings,
                          off_period_j=self.off_period_j, clock_readings=self.clock.readings,
                          clock_total_hz=self.clock.total_hz, clock_min_hz=self.clock.min_hz,
                          clock_max_hz=self.clock.max_hz,
                          uncovered_s=0.0 if now_s is None else self.uncovered_s(now_s),
                          last_power_w=last_w)

    def resume(self, state: MeterState, now_s: float | None = None) -> None:
        """Go on from a checkpoint's sums at device time `now_s` (where the checkpoint's run
        goes on): the first reading from here stands for the time since then and for the time
        the checkpoint's run had not had measured (a resumed device's sensor starts a new
        phase: without it, each resume would lose up to a period of energy)."""
        self.peak_w, self.total_w = state.peak_w, state.total_w
        self.sum_w = state.total_w if state.sum_w is None else state.sum_w
        self.readings, self.off_period_j = state.readings, state.off_period_j
        self._resumed_w, self._carried_s = state.last_power_w, state.uncovered_s
        if now_s is not None:
            self.covered_s = now_s - state.uncovered_s
        self.clock.readings, self.clock.total_hz = state.clock_readings, state.clock_total_hz
        self.clock.min_hz, self.clock.max_hz = state.clock_min_hz, state.clock_max_hz


class MeterState(BaseModel):
    """The power meter's running sums, as a checkpoint keeps them."""

    model_config = ConfigDict(extra="forbid")
    peak_w: float | None = None
    total_w: float = 0.0
    #: every reading's sum (None in checkpoints written before it was kept: `total_w` then)
    sum_w: float | None = None
    readings: int = 0
    off_period_j: float = 0.0
    #: the observed clock's running sums (a resumed run's record covers the whole run)
    clock_readings: int = 0
    clock_total_hz: float = 0.0
    clock_min_hz: int | None = None
    clock_max_hz: int | None = None
    #: device seconds between the last reading and the checkpoint, not measured yet: the
    #: first reading after a resume measures them (0 in checkpoints written before it was kept)
    uncovered_s: float = 0.0
    #: the last reading's power (W), for a resumed run that ends before its first reading
    last_power_w: float | None = None


class ObservedClock:
    """Running mean, min and max of the clock the hardware reported."""

    def __init__(self) -> None:
        self.readings = 0
        self.total_hz = 0.0
        self.min_hz: int | None = None
        self.max_hz: int | None = None

    def add(self, clock_hz: int) -> None:
        """One observation."""
        self.readings += 1
        self.total_hz += clock_hz
        self.min_hz = clock_hz if self.min_hz is None else min(self.min_hz, clock_hz)
        self.max_hz = clock_hz if self.max_hz is None else max(self.max_hz, clock_hz)

    @property
    def mean_hz(self) -> float | None:
        """The mean observed clock (None before the first observation)."""
        return self.total_hz / self.readings if self.readings else None
