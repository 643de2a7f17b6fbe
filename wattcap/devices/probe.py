"""What hardware wattcap can use on this machine, and what is missing (with the fix).

`probe` only reads: it opens the Jetson backend and every NVML GPU in dry-run mode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from wattcap.core.power_mode import list_power_modes
from wattcap.devices.errors import DeviceError
from wattcap.devices.jetson import JetsonDevice, find_gpu_devfreq
from wattcap.devices.nvml import INSTALL_HINT, NvmlDevice, import_pynvml
from wattcap.devices.sysfs_read import resolve_sysfs_root


@dataclass
class ProbeReport:
    """Short human lines: what was found, and what is missing or unusable."""

    found: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """All lines, found ones marked "+" and missing ones "-"."""
        return [f"+ {line}" for line in self.found] + [f"- {line}" for line in self.missing]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _shown(path: Path, root: Path) -> str:
    # Show paths as they are on the board even when probing a tree mounted elsewhere.
    try:
        return "/" + str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _mhz_range(frequencies_hz: list[int]) -> str:
    return f"{frequencies_hz[0] / 1e6:g}-{frequencies_hz[-1] / 1e6:g} MHz"


def _probe_jetson(root: Path, report: ProbeReport) -> None:
    if find_gpu_devfreq(root) is None:
        report.missing.append("no Jetson GPU devfreq node under /sys/class/devfreq")
        return
    try:
        device = JetsonDevice(root, dry_run=True)
    except (DeviceError, OSError, ValueError) as exc:
        report.missing.append(f"Jetson GPU devfreq node found but unreadable: {exc}")
        return
    node = _shown(device.devfreq_path, root)
    report.found.append(f"Jetson {device.name} ({device.model or 'model unknown'})")
    frequencies_hz = device.frequencies_hz()
    report.found.append(
        f"GPU devfreq node {node}: {len(frequencies_hz)} frequencies "
        f"{_mhz_range(frequencies_hz)} (capped by the power mode)"
    )
    mode = device.power_mode
    if mode is None:
        report.missing.append(
            "power mode unknown: cannot read /etc/nvpmodel.conf and /var/lib/nvpmodel/status"
        )
    else:
        report.found.append(f"power mode {mode} (nvpmodel id {device.power_mode_id}; the "
                            f"board's modes: {list_power_modes(device.power_mode_names())})")
    report.missing += [note for note in device.notes if "unreadable" in note]
    source = device.power_source
    if device.rails or source.rails:
        layouts = sorted({rail.layout for rail in device.rails})
        report.found.append(
            f"power monitor rails ({'/'.join(layouts)}): "
            f"{', '.join(r.name for r in device.rails) or 'none readable'}; device power = "
            f"{source.name} by the rule '{source.rule}' ({source.reason})"
        )
    else:
        report.missing.append(
            "no readable INA3221 or INA238 power sensor under /sys/bus/i2c/drivers: power "
            "cannot be measured on this board (the Jetson Nano 2 GB has none)"
        )
    files = ["min_freq", "max_freq"]
    blocked = [f for f in files if not os.access(device.devfreq_path / f, os.W_OK)]
    if blocked:
        report.missing.append(
            f"GPU clock files not writable ({', '.join(blocked)} in {node}); fix: "
            + device.permission_hint()
        )
    else:
        report.found.append(f"GPU clock files writable ({', '.join(files)})")
    report.found += [f"note: {note}" for note in device.notes]


def _probe_nvml(pynvml_module: ModuleType | None, report: ProbeReport) -> None:
    try:
        nvml = pynvml_module if pynvml_module is not None else import_pynvml()
    except DeviceError:
        report.missing.append(f"NVML: pynvml not installed ({INSTALL_HINT})")
        return
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        if isinstance(exc, getattr(nvml, "NVMLError_LibraryNotFound", ())):
            report.missing.append("NVML: library not found (no NVIDIA driver)")
        elif isinstance(exc, getattr(nvml, "NVMLError_DriverNotLoaded", ())):
            report.missing.append("NVML: NVIDIA driver not loaded")
        else:
            report.missing.append(f"NVML: cannot initialise ({exc})")
        return
    try:
        count = int(nvml.nvmlDeviceGetCount())
        if count == 0:
            report.missing.append("NVML: no NVIDIA GPU found")
        for index in range(count):
            _probe_nvml_device(nvml, index, report)
    finally:
        nvml.nvmlShutdown()


def _probe_nvml_device(nvml: ModuleType, index: int, report: ProbeReport) -> None:
    try:
        device = NvmlDevice(index, dry_run=True, pynvml_module=nvml)
    except DeviceError as exc:
        report.missing.append(f"NVML nvml:{index}: {exc.message}")
        return
    try:
        frequencies_hz = device.frequencies_hz()
        limit_w = device.power_limit_w()
        parts = [
            f"{len(frequencies_hz)} graphics clocks {_mhz_range(frequencies_hz)}"
            if frequencies_hz
            else "no lockable clocks",
            "instant power" if device.sensor_period_s < 1.0 else "power as a 1 s average",
            "energy counter" if device.energy_counter_j() is not None else "no energy counter",
            f"power limit {limit_w:g} W" if limit_w is not None else "power limit unknown",
            f"{device.memory_bytes() / 2**30:.1f} GiB usable",
        ]
        report.found.append(f"NVML nvml:{index} {device.gpu_name}: " + ", ".join(parts))
        if not frequencies_hz:
            report.missing.append(
                f"NVML nvml:{index}: supported clocks not reported; the frequency cannot be set"
            )
    finally:
        device.close()


def probe(
    sysfs_root: str | Path | None = None, pynvml_module: ModuleType | None = None
) -> ProbeReport:
    """Look for a Jetson GPU (devfreq, INA3221, nvpmodel) and NVML GPUs; never writes.

    The Jetson's sysfs is read under `sysfs_root` (default: env WATTCAP_SYSFS_ROOT, else "/"),
    the root `get_device` reads it under."""
    report = ProbeReport()
    _probe_jetson(Path(resolve_sysfs_root(sysfs_root)), report)
    _probe_nvml(pynvml_module, report)
    return report
