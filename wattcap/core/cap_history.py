"""What a run under a moving cap leaves in its record: the segments of constant plan, and a
compact time series of power, cap, frequency and batch size for the report's plot.

Light on purpose (pydantic only): the run record and the reports read these without torch.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Segment(BaseModel):
    """A stretch of a run with one plan: the cap moved (or the run started) and the selection
    chose (b, f), or the cap fell below every configuration and training paused.

    Times are seconds on the run's clock (device seconds since the run started, pauses
    included). A step is counted in the segment in which it ends: the step in flight when the
    cap moved finishes with its batch, at the frequency lowered for the new cap. `cap_w` is the
    cap that started the segment; a battery's cap moves a little every period, so the segment
    also keeps the lowest and highest cap it saw (None: no cap).
    """

    model_config = ConfigDict(extra="forbid")
    start_s: float
    end_s: float
    cap_w: float | None
    lowest_cap_w: float | None = None
    highest_cap_w: float | None = None
    batch_size: int
    frequency_hz: int
    paused: bool = False
    samples: int = 0
    steps: int = 0
    #: device seconds of the segment's steps (training), or of idling (a pause)
    device_time_s: float = 0.0
    #: sensor readings x the sensor period, over the segment
    energy_j: float = 0.0
    peak_power_w: float | None = None
    #: readings above the cap (while paused: the device's idle power is above the cap, which
    #: no setting can meet)
    readings_over_cap: int = 0
    reason: str = ""

    def see(self, power_w: float, cap_w: float | None, period_s: float) -> None:
        """Account one sensor reading taken in this segment."""
        self.energy_j += power_w * period_s
        if self.peak_power_w is None or power_w > self.peak_power_w:
            self.peak_power_w = power_w
        if cap_w is not None:
            self.lowest_cap_w = cap_w if self.lowest_cap_w is None else min(self.lowest_cap_w,
                                                                            cap_w)
            self.highest_cap_w = cap_w if self.highest_cap_w is None else max(
                self.highest_cap_w, cap_w)
            if power_w > cap_w:
                self.readings_over_cap += 1


class CapTimeline(BaseModel):
    """Power, cap, frequency and batch size over a run, one point per `bin_s` seconds of the
    run's clock (columns of equal length; `t_s` is the end of each bin). Power is the bin's
    mean and peak reading, the cap the lowest in the bin, frequency and batch size those at
    the bin's end. Bins start at one sensor period and double whenever the series would pass
    its point limit, so a long run keeps a small file."""

    model_config = ConfigDict(extra="forbid")
    bin_s: float
    t_s: list[float] = []
    power_w: list[float] = []
    peak_power_w: list[float] = []
    cap_w: list[float | None] = []
    frequency_hz: list[int] = []
    batch_size: list[int] = []
    #: the whole supply's draw (a real battery or adapter read by the cap source: carrier
    #: board, display, ... included, so above `power_w`), the bin's mean; empty when the cap
    #: source reads no supply, else as long as the other columns (None: not known in a bin)
    supply_power_w: list[float | None] = []


class TimelineRecorder:
    """Builds a `CapTimeline` from sensor readings, merging bins to stay under `max_points`."""

    def __init__(self, period_s: float, max_points: int = 800,
                 timeline: CapTimeline | None = None) -> None:
        if max_points < 2:
            raise ValueError("a timeline needs at least 2 points")
        self.period_s = period_s
        self.max_points = max_points
        self.timeline = timeline if timeline is not None else CapTimeline(bin_s=period_s)
        self._pending: list[tuple[float, float, float | None, int, int, float | None]] = []

    def add(self, t_s: float, power_w: float, cap_w: float | None, frequency_hz: int,
            batch_size: int, supply_power_w: float | None = None) -> None:
        """One sensor reading at run time `t_s` (and the supply's draw, if the cap source
        reads one)."""
        self._pending.append((t_s, power_w, cap_w, frequency_hz, batch_size, supply_power_w))
        per_bin = max(1, round(self.timeline.bin_s / self.period_s))
        if len(self._pending) >= per_bin:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        line = self.timeline
        powers = [p[1] for p in self._pending]
        caps = [p[2] for p in self._pending if p[2] is not None]
        supplies = [p[5] for p in self._pending if p[5] is not None]
        t_s, _, _, frequency_hz, batch_size, _ = self._pending[-1]
        if supplies and not line.supply_power_w:
            line.supply_power_w = [None] * len(line.t_s)  # the column starts: earlier bins
        if supplies or line.supply_power_w:
            line.supply_power_w.append(round(sum(supplies) / len(supplies), 4) if supplies
                                       else None)
        line.t_s.append(round(t_s, 4))
        line.power_w.append(round(sum(powers) / len(powers), 4))
        line.peak_power_w.append(round(max(powers), 4))
        line.cap_w.append(round(min(caps), 4) if caps else None)
        line.frequency_hz.append(frequency_hz)
        line.batch_size.append(batch_size)
        self._pending = []
        if len(line.t_s) > self.max_points:
            self._halve()

    def _halve(self) -> None:
        """Merge neighbouring bins pairwise (the bin width doubles)."""
        line = self.timeline
        merged = CapTimeline(bin_s=line.bin_s * 2)
        for i in range(0, len(line.t_s) - 1, 2):
            j = i + 1
            merged.t_s.append(line.t_s[j])
            merged.power_w.append(round((line.power_w[i] + line.power_w[j]) / 2, 4))
            merged.peak_power_w.append(max(line.peak_power_w[i], line.peak_power_w[j]))
            caps = [c for c in (line.cap_w[i], line.cap_w[j]) if c is not None]
            merged.cap_w.append(min(caps) if caps else None)
            merged.frequency_hz.append(line.frequency_hz[j])
            merged.batch_size.append(line.batch_size[j])
            if line.supply_power_w:
                known = [v for v in line.supply_power_w[i:j + 1] if v is not None]
                merged.supply_power_w.append(round(sum(known) / len(known), 4) if known
                                             else None)
        if len(line.t_s) % 2:
            # an odd last bin is kept as it is: one narrower bin
            last = len(line.t_s) - 1
            merged.t_s.append(line.t_s[last])
            merged.power_w.append(line.power_w[last])
            merged.peak_power_w.append(line.peak_power_w[last])
            merged.cap_w.append(line.cap_w[last])
            merged.frequency_hz.append(line.frequency_hz[last])
            merged.batch_size.append(line.batch_size[last])
            if line.supply_power_w:
                merged.supply_power_w.append(line.supply_power_w[last])
        self.timeline = merged

    def state(self) -> dict:
        """JSON-compatible state for a checkpoint (the series and the open bin's readings)."""
        return {"timeline": self.timeline.model_dump(), "pending": [list(p) for p in
                                                                    self._pending]}

    @classmethod
    def from_state(cls, state: dict, period_s: float, max_points: int = 800
                   ) -> TimelineRecorder:
        """Continue from `state()`'s output."""
        recorder = cls(period_s, max_points, CapTimeline.model_validate(state["timeline"]))
        # a checkpoint written before the supply column has 5 values per reading
        recorder._pending = [(*p, None)[:6] for p in state.get("pending", [])]
        return recorder

    def finish(self) -> CapTimeline:
        """The series with the readings of the last, partial bin."""
        self._flush()
        return self.timeline


__all__ = ["CapTimeline", "Segment", "TimelineRecorder"]
