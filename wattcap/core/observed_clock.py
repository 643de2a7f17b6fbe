"""The clock the hardware reported while something ran (a training run, a profile point's
window), beside the clock that was asked for: the truth behind a point labelled with a clock
that the board may not have held (throttling, a clock left to the board, a boost ramp)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict


class ObservedFrequency(BaseModel):
    """The clock the hardware reported during a run or a window: mean, range and how many
    readings reported one."""

    model_config = ConfigDict(extra="forbid")
    mean_hz: float
    min_hz: int
    max_hz: int
    readings: int

    @classmethod
    def of(cls, clocks_hz: Iterable[int | None]) -> ObservedFrequency | None:
        """What the readings' clocks say (a reading without one is skipped); None when no
        reading reported a clock (a sensor that cannot read it, an imported table)."""
        seen = [c for c in clocks_hz if c is not None]
        if not seen:
            return None
        return cls(mean_hz=round(sum(seen) / len(seen)), min_hz=min(seen), max_hz=max(seen),
                   readings=len(seen))

    def describe(self) -> str:
        """'1755-1980 MHz (mean 1962)', or '1980 MHz' where every reading agreed."""
        if self.min_hz == self.max_hz:
            return f"{self.min_hz / 1e6:g} MHz"
        return (f"{self.min_hz / 1e6:g}-{self.max_hz / 1e6:g} MHz "
                f"(mean {self.mean_hz / 1e6:.0f})")

    def below_hz(self, asked_hz: int, tolerance: float) -> bool:
        """True when the mean clock lies more than `tolerance` (a fraction) below `asked_hz`:
        the work ran slower than its label says. The mean, not the minimum: a throttle over
        part of the window counts by how much of it it took, a lone low reading little."""
        return self.mean_hz < asked_hz * (1.0 - tolerance)
