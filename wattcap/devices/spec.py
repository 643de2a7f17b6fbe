"""Device specs as data: the constants of the emulated physics, each with its public source."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

#: optional constants written out only when a spec sets them: a spec without them (the
#: Jetsons') dumps, digests and compares as it did before they existed
_OPTIONAL_DEFAULTS: dict[str, object] = {"power_limit_range_w": None, "host_overlaps_gpu": False}


class VoltageCurve(BaseModel):
    """Piecewise-linear V(f)."""

    model_config = ConfigDict(extra="forbid")
    frequencies_hz: list[float]
    volts: list[float]

    def at(self, frequency_hz: float) -> float:
        """Voltage at a frequency (linear interpolation, clamped)."""
        return float(np.interp(frequency_hz, self.frequencies_hz, self.volts))


class PowerMode(BaseModel):
    """An nvpmodel mode: its GPU frequency ceiling and nominal budget."""

    model_config = ConfigDict(extra="forbid")
    gpu_max_hz: int
    budget_w: float


class DeviceSpec(BaseModel):
    """Everything the emulator needs about one device model (DESIGN §3)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    frequencies_hz: list[int]
    voltage_curve: VoltageCurve
    peak_flops_at_fmax: float
    compute_efficiency: float
    fill_flops_per_kernel: float
    power_activity_batch_factor: float
    memory_bandwidth_bytes_per_s: float
    memory_bandwidth_efficiency: float
    memory_total_bytes: int
    memory_usable_bytes: int
    allocator_overhead_factor: float
    idle_w: float
    cpu_feed_w: float
    dram_max_w: float
    gpu_static_max_w: float
    gpu_dyn_max_w: float
    host_phase_activity: float
    optimizer_phase_activity: float
    launch_overhead_s: float
    sensor_period_s: float
    sensor_noise_w: float
    sensor_rail: str
    default_power_mode: str
    power_modes: dict[str, PowerMode]
    #: the board's own power limit, [low, high] W as NVML accepts it (a datacenter GPU); the
    #: emulated board then holds one, at `high` until set. None: none (a Jetson)
    power_limit_range_w: tuple[float, float] | None = None
    #: kernel launches are asynchronous: the host's launch time overlaps the GPU's work, and
    #: a step is host-bound only for the part the GPU's work does not cover. False: the
    #: phases run one after the other
    host_overlaps_gpu: bool = False
    sources: dict[str, str]

    @model_validator(mode="after")
    def _check(self) -> DeviceSpec:
        if self.frequencies_hz != sorted(self.frequencies_hz):
            raise ValueError("frequencies_hz must be ascending")
        if self.default_power_mode not in self.power_modes:
            raise ValueError(f"default_power_mode {self.default_power_mode!r} not in power_modes")
        if self.power_limit_range_w is not None:
            low_w, high_w = self.power_limit_range_w
            if not 0 < low_w < high_w:
                raise ValueError("power_limit_range_w must be [low, high] with 0 < low < high")
        # an optional constant left out keeps its default and needs no source
        constants = (set(type(self).model_fields) & self.model_fields_set) - {
            "name", "description", "sources", "default_power_mode", "sensor_rail"}
        missing = sorted(c for c in constants if c not in self.sources)
        if missing:
            raise ValueError(f"constants without a cited source or estimate note: {missing}")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict:
        data = handler(self)
        for key, default in _OPTIONAL_DEFAULTS.items():
            if key in data and getattr(self, key) == default:
                del data[key]
        return data

    @property
    def f_max_hz(self) -> int:
        """Highest frequency of the GPU."""
        return self.frequencies_hz[-1]


def list_specs() -> list[str]:
    """Names of the bundled device specs."""
    folder = resources.files("wattcap.devices") / "specs"
    return sorted(
        p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json")
    )


def load_spec(name_or_path: str | Path) -> DeviceSpec:
    """A bundled spec by name, or a spec file by path (a name ending in .json or holding a
    path separator). An unknown name or missing file raises KeyError, a file that is not a
    valid spec ValueError, each with one line that names it."""
    path = Path(name_or_path)
    if path.suffix == ".json" or "/" in str(name_or_path):
        if not path.is_file():
            raise KeyError(f"device spec file {str(path)!r}: no such file")
        try:
            raw = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"device spec file {path}: not readable JSON ({err})") from None
        try:
            return DeviceSpec.model_validate(raw)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'spec'}: {e['msg']}"
                for e in err.errors()[:3]
            )
            raise ValueError(f"device spec file {path}: not a valid device spec: "
                             f"{problems}") from None
    names = list_specs()
    if str(name_or_path) not in names:
        raise KeyError(f"unknown device spec {str(name_or_path)!r}; known: {', '.join(names)}")
    text = (resources.files("wattcap.devices") / "specs" / f"{name_or_path}.json").read_text()
    return DeviceSpec.model_validate(json.loads(text))
