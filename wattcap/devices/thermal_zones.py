"""What the kernel's thermal zones say (`/sys/class/thermal/thermal_zone*`): the zone
closest to its first throttling trip point, so that a clock the board does not follow can be
blamed on heat where the board says so (Linux: Documentation/driver-api/thermal/sysfs-api.rst;
`temp` and `trip_point_N_temp` in millidegrees Celsius, `trip_point_N_type` one of
`active`, `passive`, `hot`, `critical`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: trip types at which the kernel slows the clocks down (an `active` trip starts a fan)
THROTTLING_TRIPS = ("passive", "hot")


@dataclass(frozen=True)
class ZoneHeat:
    """One zone's temperature against its lowest throttling trip point (°C)."""

    zone: str
    temperature_c: float
    trip_c: float

    @property
    def throttling(self) -> bool:
        """At or above the trip point: the kernel lowers the clocks."""
        return self.temperature_c >= self.trip_c

    def describe(self) -> str:
        """'GPU-therm 87.5 °C, throttles at 85.0 °C'."""
        return f"{self.zone} {self.temperature_c:.1f} °C, throttles at {self.trip_c:.1f} °C"


def _millidegrees(path: Path) -> float | None:
    try:
        return int(path.read_text().strip()) / 1000.0
    except (OSError, ValueError):
        return None  # a zone that cannot be read says nothing (disabled, permission)


def hottest_zone(sysfs_root: str | Path = "/") -> ZoneHeat | None:
    """The zone nearest (or furthest past) its lowest throttling trip point, or None where
    no zone with such a trip point can be read."""
    best: ZoneHeat | None = None
    for zone_dir in sorted((Path(sysfs_root) / "sys" / "class" / "thermal").glob("thermal_zone*")):
        temperature_c = _millidegrees(zone_dir / "temp")
        if temperature_c is None:
            continue
        trips = []
        for type_file in zone_dir.glob("trip_point_*_type"):
            try:
                kind = type_file.read_text().strip()
            except OSError:
                continue
            if kind in THROTTLING_TRIPS:
                trip_c = _millidegrees(type_file.with_name(
                    type_file.name.replace("_type", "_temp")))
                if trip_c is not None and trip_c > 0:
                    trips.append(trip_c)
        if not trips:
            continue
        try:
            name = (zone_dir / "type").read_text().strip()
        except OSError:
            name = zone_dir.name
        heat = ZoneHeat(name, temperature_c, min(trips))
        if best is None or heat.temperature_c - heat.trip_c > best.temperature_c - best.trip_c:
            best = heat
    return best


__all__ = ["THROTTLING_TRIPS", "ZoneHeat", "hottest_zone"]
