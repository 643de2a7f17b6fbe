"""Reference profiles: every reference model profiled on a device, for the baselines' safe
frequency (DESIGN §1). On an emulated device they are computed (profiling is virtual, so cheap)
and cached on disk; on real hardware the user profiles the reference models once and passes the
folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from wattcap.devices.emulated import EmulatedDevice
from wattcap.profiling import Profiler, ProfileTable
from wattcap.schema import WattcapFileError


def cache_dir() -> Path:
    """Where computed files are cached (WATTCAP_CACHE_DIR, else ~/.cache/wattcap)."""
    root = os.environ.get("WATTCAP_CACHE_DIR") or Path.home() / ".cache" / "wattcap"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def emulated_reference_profiles(
    device_spec: str, power_mode: str | None = None, models: list[str] | None = None
) -> list[ProfileTable]:
    """Exhaustive profiles of the reference models on an emulated device (cached)."""
    from wattcap.models import reference_models

    profiles = []
    for model in models or reference_models():
        device = EmulatedDevice(device_spec, power_mode=power_mode)
        path = cache_dir() / f"reference-{device.name}-{device.power_mode}-{model}.json"
        profile = None
        if path.exists():
            try:
                profile = ProfileTable.load(path)
            except WattcapFileError:
                profile = None  # stale or corrupt cache entry: recompute
        if profile is None or profile.tool_version != _tool_version():
            profile = Profiler(device, model).run(exhaustive=True)
            profile.save(path)
        profiles.append(profile)
    return profiles


def load_reference_profiles(folder: str | Path, device: str) -> list[ProfileTable]:
    """Profiles of reference models for `device` found in a folder."""
    from wattcap.models import reference_models

    found = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            profile = ProfileTable.load(path)
        except WattcapFileError:
            continue
        if profile.device == device and profile.model in reference_models():
            found.append(profile)
    return found


def reference_profiles_for(
    profile: ProfileTable, folder: str | Path | None = None
) -> list[ProfileTable] | None:
    """Reference profiles matching a profile's device, or None when none can be had."""
    if folder is not None:
        return load_reference_profiles(folder, profile.device) or None
    if profile.device_kind == "emulated":
        return emulated_reference_profiles(profile.device, profile.power_mode)
    return None


def _tool_version() -> str:
    from wattcap import __version__

    return __version__
