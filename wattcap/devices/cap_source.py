"""What every cap source is: `CapSource`, read on the device clock, with what one read saw
(`CapReading`), its error, and the checks of a value in watts."""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from wattcap.core.errors import WattcapError
from wattcap.core.power_text import parse_power_w


class CapSourceError(WattcapError, ValueError):
    """A cap source that cannot be built or read: a bad file, spec or value."""


@dataclass(frozen=True)
class CapReading:
    """What `CapSource.read` saw at one moment.

    `changed` is True on the first read and whenever the cap differs from the previous read;
    `previous_w` is the cap of the previous read (None also before the first read).
    `warnings` are problems the source survived since the last read (kept value, ...).
    """

    at_s: float
    cap_w: float | None
    previous_w: float | None
    changed: bool
    warnings: tuple[str, ...] = ()


def check_watts(value: object, where: str) -> float | None:
    """A cap value: a finite number ≥ 0, or None for no cap."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CapSourceError(f"{where}: expected watts (a number ≥ 0) or none, got {value!r}")
    watts = float(value)
    if not math.isfinite(watts) or watts < 0:
        raise CapSourceError(f"{where}: expected watts (a number ≥ 0) or none, got {value!r}")
    return watts


def parse_watts_text(text: str, where: str) -> float | None:
    """A cap written as text ('5', '5W', '250 mW', '0.25kW', or 'none' for no cap), read as
    the command line reads it (`wattcap.core.power_text`), except that 0 W is a cap here (a
    cap below every configuration: training pauses) and an empty text is an error, not "no
    cap" (an empty cell of a schedule is a mistake)."""
    if not text.strip():
        raise CapSourceError(f"{where}: expected watts (a number ≥ 0, e.g. 4.5) or 'none', "
                             "got nothing")
    try:
        return parse_power_w(text, zero_ok=True)
    except ValueError as err:
        raise CapSourceError(f"{where}: {text.strip()!r} {err}" if str(err).startswith("must")
                             else f"{where}: {err}, got {text.strip()!r}") from None


class CapSource(ABC):
    """Where the power cap comes from, as a function of device time.

    Subclasses implement `cap_w` and `describe`; stateful ones also `record_energy`,
    `state_dict` and `load_state_dict` (so a run resumed from a checkpoint continues with the
    same battery charge or last good value).
    """

    def __init__(self) -> None:
        self._last_read_w: float | None = None
        self._has_read = False
        self._pending_warnings: list[str] = []

    @abstractmethod
    def cap_w(self, now_s: float) -> float | None:
        """The cap in watts at device time `now_s` (seconds since the run started); None: no
        cap."""

    @abstractmethod
    def describe(self) -> str:
        """One line for logs and run records."""

    def record_energy(self, energy_j: float, now_s: float) -> None:
        """The device drew `energy_j` joules up to `now_s` since the previous call. Only sources
        whose cap depends on it (the battery) use it."""
        return None

    def read(self, now_s: float) -> CapReading:
        """The cap at `now_s`, whether it changed since the previous read, and the warnings the
        source raised since then. Call once per sensor period."""
        cap = self.cap_w(now_s)
        changed = not self._has_read or cap != self._last_read_w
        reading = CapReading(
            at_s=now_s,
            cap_w=cap,
            previous_w=self._last_read_w,
            changed=changed,
            warnings=tuple(self._pending_warnings),
        )
        self._pending_warnings.clear()
        self._last_read_w = cap
        self._has_read = True
        return reading

    @property
    def supply_power_w(self) -> float | None:
        """The whole power supply's draw at the last read, W, for sources that read a real
        supply (a battery's fuel gauge: carrier board, display, ... included, so above the
        module's rail); None for the others. Recorded beside the module's power."""
        return None

    def energy_left_j(self, above_w: float = 0.0) -> float | None:
        """The energy, J, this source can still deliver to the device while its cap stays at or
        above `above_w` (the least power training needs: a battery whose deliverable power
        falls as it empties stops being of use before it is empty), as of its last read or
        drain: a finite store's usable charge. None for sources without one (a solar panel, a
        schedule, a polled file, a function, a supply on external power): their energy is not
        a limit they can state."""
        return None

    def may_exceed(self, watts: float, now_s: float) -> bool:
        """Whether the cap may still rise above `watts` after `now_s` (False: it never will,
        e.g. a battery that only drains). A paused run that can never resume stops on False;
        sources that cannot know (a polled file, a function) say True."""
        return True

    def state_dict(self) -> dict[str, Any]:
        """JSON-compatible state for a checkpoint."""
        return {"last_read_w": self._last_read_w, "has_read": self._has_read}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()`'s output."""
        self._last_read_w = state.get("last_read_w")
        self._has_read = bool(state.get("has_read", False))

    def _warn(self, message: str) -> None:
        self._pending_warnings.append(message)
