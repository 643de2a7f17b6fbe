"""Reference profiles: every reference model profiled on a device, for the baselines' safe
frequency (DESIGN §1). On an emulated device they are computed (profiling is virtual, so cheap)
and cached on disk; on real hardware the user profiles the reference models once and passes the
folder.

An emulated device is rebuilt from the spec its profile carries (``ProfileTable.device_spec``),
so a profile made with ``--device emulated:my-device.json`` plans anywhere, without the file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from wattcap.core.cache import cache_dir
from wattcap.core.defaults import REFERENCE_MODELS
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import WattcapFileError
from wattcap.devices.emulated import EmulatedDevice
from wattcap.devices.spec import DeviceSpec, list_specs
from wattcap.measure.profiling import Profiler


def spec_digest(spec: DeviceSpec) -> str:
    """12 hex digits identifying a device spec's contents (cache keys)."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:12]


def emulated_reference_profiles(
    device_spec: str | DeviceSpec, power_mode: str | None = None,
    models: list[str] | None = None,
) -> list[ProfileTable]:
    """Exhaustive profiles of the reference models on an emulated device (cached).

    ``device_spec`` is a bundled spec's name, a spec file's path, or a DeviceSpec. The cache
    is keyed by the spec's contents, so two specs of the same name never share entries.
    """
    profiles = []
    for model in models or REFERENCE_MODELS:
        device = EmulatedDevice(device_spec, power_mode=power_mode)
        path = cache_dir() / (f"reference-{device.name}-{device.power_mode}-"
                              f"{spec_digest(device.spec)}-{model}.json")
        profile = None
        if path.exists():
            try:
                profile = ProfileTable.load(path)
            except WattcapFileError:
                profile = None  # stale or corrupt cache entry: recompute
        # another wattcap, or a file of an earlier schema (profiled by earlier code), is
        # measured again: a cached profile must be what this wattcap would measure
        if profile is None or profile.tool_version != _tool_version() or \
                profile.migrated_from is not None:
            profile = Profiler(device, model).run(exhaustive=True)
            profile.save(path)
        profiles.append(profile)
    return profiles


def load_reference_profiles(folder: str | Path, device: str) -> list[ProfileTable]:
    """Profiles of reference models for `device` found in a folder."""
    found = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            profile = ProfileTable.load(path)
        except WattcapFileError:
            continue
        if profile.device == device and profile.model in REFERENCE_MODELS:
            found.append(profile)
    return found


def reference_profiles_for(
    profile: ProfileTable, folder: str | Path | None = None
) -> list[ProfileTable] | None:
    """Reference profiles matching a profile's device, or None when none can be had.

    An emulated device is rebuilt from the spec the profile carries; a profile written before
    profiles carried it is matched to a bundled spec by name, and gets None when its device
    is not bundled (the plan then says it has no reference profiles), and so does a profile
    of another knob than the clock.
    """
    if profile.knob_kind != "gpu_clock":
        return None  # reference models are profiled over clocks: the baselines use this one
    if folder is not None:
        return load_reference_profiles(folder, profile.device) or None
    if profile.device_kind == "emulated":
        if profile.device_spec is not None:
            try:
                spec = DeviceSpec.model_validate(profile.device_spec)
            except ValueError:
                return None
            return emulated_reference_profiles(spec, profile.power_mode)
        if profile.device in list_specs():
            return emulated_reference_profiles(profile.device, profile.power_mode)
    return None


def _tool_version() -> str:
    from wattcap.core.version import __version__

    return __version__


__all__ = [
    "cache_dir", "emulated_reference_profiles", "load_reference_profiles",
    "reference_profiles_for", "spec_digest",
]
