"""Errors of the device layer."""

from __future__ import annotations

from wattcap.core.errors import WattcapError


class DeviceError(WattcapError, RuntimeError):
    """A device problem, with a hint telling the user how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        # the text carries the fix on its own line (as every device message always has)
        super().__init__(message if hint is None else f"{message}\n  fix: {hint}")
        self.message = message
        self.hint = hint

class DevicePermissionError(DeviceError):
    """Writing a setting (clocks, governor) needs privileges we do not have."""

class DeviceNotSupportedError(DeviceError):
    """The device does not offer what was asked (a reading, a setting)."""

class DeviceLostError(DeviceError):
    """The GPU fell off the bus, the driver went away or needs a reset: nothing more can be
    read or set until it is back."""

class SensorMissingError(DeviceError):
    """The device has no power sensor wattcap can read."""

class DeviceNotFoundError(DeviceError):
    """The requested device is not present on this machine."""

class DeviceOutOfMemoryError(DeviceError, MemoryError):
    """A batch does not fit in the device memory, as a real device would report."""

class FrequencyNotFollowedError(DeviceError):
    """The hardware did not apply the requested frequency (power-mode cap, thermal).

    The lock is written all the same; the board runs at `running_hz` for now, held there by
    its own limit. `cause` says which where the board tells it ("thermal", "power limit",
    "power mode"; "unknown" where it does not), `cause_detail` what it read (a temperature
    against its trip point, NVML's clock event reasons)."""

    def __init__(self, message: str, hint: str | None = None, *,
                 requested_hz: int | None = None, running_hz: int | None = None,
                 cause: str = "unknown", cause_detail: str = "") -> None:
        super().__init__(message, hint)
        self.requested_hz = requested_hz
        self.running_hz = running_hz
        self.cause = cause
        self.cause_detail = cause_detail

class WatchError(DeviceError):
    """The power watch stopped (a tick callback failed, the sensor died under a cap): the run
    must stop rather than go on with nobody keeping the cap."""
