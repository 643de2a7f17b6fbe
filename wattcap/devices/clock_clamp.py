"""One way to change the GPU clock while a run goes on, whatever the board does: a clock the
board does not follow (a thermal limit, a power mode's clamp, the power limit) is recorded with
its cause and the run goes on at the highest clock of the table at or under the one the board
runs — that clock is the ceiling the caller plans under from then on. Every runtime path that
moves the clock (the plan at start, the watchdog, the drift re-plan, a moving cap, a
noise-scale re-plan, a resume) goes through `lock_clock_within`."""

from __future__ import annotations

from wattcap.core.events import ClockClamp
from wattcap.devices.base import Device
from wattcap.devices.errors import FrequencyNotFollowedError


def ceiling_under_hz(frequencies_hz: list[int], running_hz: int) -> int:
    """The highest table clock at or under `running_hz` (a reading a few kHz off a table entry,
    as a Jetson's clock divider reports, counts as that entry); the lowest where none is."""
    nearest_hz = min(frequencies_hz, key=lambda f: abs(f - running_hz))
    if abs(nearest_hz - running_hz) <= max(nearest_hz, 1) * 1e-3:
        return nearest_hz
    under = [f for f in frequencies_hz if f <= running_hz]
    return max(under) if under else min(frequencies_hz)


def record_clamp(device: Device, err: FrequencyNotFollowedError, requested_hz: int,
                 ceiling_hz: int, running_hz: int, by: str) -> None:
    """Append to `device.clock_clamps` what the board did not follow and why (`err`)."""
    device.clock_clamps.append(ClockClamp(
        time_s=device.now_s(), requested_hz=requested_hz, running_hz=running_hz,
        ceiling_hz=ceiling_hz, cause=err.cause, detail=err.cause_detail, by=by))


def lock_clock_within(device: Device, frequency_hz: int, by: str, record: bool = True) -> int:
    """Lock the clock at `frequency_hz`; where the board runs lower, lock its ceiling instead
    (so that the clock wattcap states is the one that runs), append a `ClockClamp` to
    `device.clock_clamps` (unless `record` is False: a probe of a clamp already recorded) and
    return the clock locked. Other device errors (no permission, a clock the table lacks)
    propagate: they are not the board's state but a refusal."""
    with device.clock_lock:
        try:
            return device.set_frequency_hz(frequency_hz)
        except FrequencyNotFollowedError as err:
            running_hz = err.running_hz if err.running_hz is not None \
                else device.current_frequency_hz()
            ceiling_hz = min(ceiling_under_hz(device.frequencies_hz(), running_hz), frequency_hz)
            if ceiling_hz != frequency_hz:
                try:
                    device.set_frequency_hz(ceiling_hz)
                except FrequencyNotFollowedError:
                    pass  # still falling: the lock stands, the next change records it again
            if record:
                record_clamp(device, err, frequency_hz, ceiling_hz, running_hz, by)
            return ceiling_hz


def describe_clamp(clamp: ClockClamp) -> str:
    """One line for a run's events: what was asked, what the board ran, why, what follows."""
    why = clamp.cause + (f": {clamp.detail}" if clamp.detail else "")
    return (f"{clamp.by}: asked for {clamp.requested_hz / 1e6:.1f} MHz, the board runs "
            f"{clamp.running_hz / 1e6:.1f} MHz, held there by the board ({why}); the run "
            f"goes on at {clamp.ceiling_hz / 1e6:.1f} MHz, the ceiling of what follows")


__all__ = ["ceiling_under_hz", "describe_clamp", "lock_clock_within", "record_clamp"]
