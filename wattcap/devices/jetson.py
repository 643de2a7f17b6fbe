"""Jetson backend: GPU frequency through devfreq sysfs, power through the INA3221/INA238
monitors.

Everything is discovered under a sysfs root (``/`` on a real board, a temporary tree in tests):

* the GPU devfreq node: the entry of ``/sys/class/devfreq`` whose ``device/of_node`` (or its
  own name, ``17000000.ga10b``) is the GPU (``gpu`` on Nano/Orin, ``gp10b`` on TX2, ``gv11b``
  on Xavier, ``ga10b`` on some Orin trees, ``gb10b`` on Thor);
* power rails: INA3221 through the iio driver of L4T 32 (``ina3221x``, with a power file per
  rail) or the upstream hwmon driver of L4T 35+ (``ina3221``, voltage and current only:
  P = V * I), and the INA238 of newer modules (hwmon ``power1_input``); the device power
  follows the rule of `wattcap.devices.jetson_rails`: the module's input rail (VDD_IN,
  POM_5V_IN, Thor's INA238) where the board has one, else the sum of the module's rails (AGX
  Xavier, AGX Orin); a rail that rule needs and cannot read stops power readings with an error
  instead of a partial sum (`power_source` says what was taken and why);
* the nvpmodel power mode (``/etc/nvpmodel.conf`` and ``/var/lib/nvpmodel/status``), the board
  model (``/proc/device-tree/model``) and the memory size (``/proc/meminfo``).

All writes go through `write_sysfs`, the one function that touches the files we change; tests
replace it with a fake kernel that enforces the rules a real kernel enforces.
"""

from __future__ import annotations

import errno
import getpass
import re
import shutil
import subprocess
import time
from pathlib import Path

from wattcap.core.power_mode import list_power_modes
from wattcap.devices.base import Device, DeviceInfo
from wattcap.devices.cuda import own_cuda_memory_bytes
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotFoundError,
    DeviceNotSupportedError,
    DevicePermissionError,
    FrequencyNotFollowedError,
    SensorMissingError,
)
from wattcap.devices.jetson_nvpmodel import PowerMode, read_nvpmodel, require_active_mode
from wattcap.devices.jetson_rails import (
    PowerSource,
    choose_power_source,
    find_ina3221_rails,
    readable_rails,
)
from wattcap.devices.sysfs_read import read_int, read_text
from wattcap.devices.thermal_zones import hottest_zone

#: `device/of_node` names of Jetson GPUs (jetson-stats uses the same list), newest last; a
#: devfreq node named `<unit-address>.<one of these>` is the GPU too.
GPU_OF_NODE_NAMES = ("gpu", "gp10b", "gv11b", "ga10b", "gb10b")


# Why 50 ms: the INA3221 converts bus and shunt voltage of each of its 3 channels in turn, each
# conversion taking 140 us to 8.244 ms, and can average 1 to 1024 such rounds (TI INA3221
# datasheet, SBOS576, "Averaging and Conversion Time Considerations"). With the 1.1 ms
# conversion times the drivers commonly use and 4-8 averages, one fresh value per channel takes
# 3 * 2 * 1.1 ms * (4..8) = 26..53 ms. L4T does not document its averaging setting, so 50 ms is
# an estimate; where the hwmon driver exposes `update_interval` (ms) we use that instead.
INA3221_PERIOD_S = 0.05

# Memory the OS and the CUDA/PyTorch runtime keep for themselves in the LPDDR a Jetson shares
# between CPU and GPU: L4T with its desktop takes roughly 0.75 GiB, and the CUDA context with
# the cuDNN/cuBLAS/PyTorch libraries mapped into that same memory about 1 GiB. A modelling
# estimate (it leaves a 4 GB Nano about 2.1 GiB, close to the emulated spec's 2 GiB).
MEMORY_RESERVED_BYTES = 7 << 28  # 1.75 GiB
#: the CUDA context's share of that reserve (the rest is L4T's, already out of MemAvailable)
CUDA_CONTEXT_BYTES = 1 << 30

# After a write to min_freq/max_freq devfreq re-evaluates the target synchronously, but the
# clock framework may take a moment to report it; poll cur_freq this long before giving up.
FREQUENCY_SETTLE_S = 0.05

# Board model substrings (lower case, most specific first) -> the short name used in profiles.
_MODEL_NAMES = (
    ("orin nano", "jetson-orin-nano"),
    ("orin nx", "jetson-orin-nx"),
    ("orin", "jetson-agx-orin"),
    ("xavier nx", "jetson-xavier-nx"),
    ("xavier", "jetson-agx-xavier"),
    ("tx2 nx", "jetson-tx2nx"),
    ("tx2", "jetson-tx2"),
    ("tx1", "jetson-tx1"),
    ("nano 2gb", "jetson-nano-2gb"),
    ("nano", "jetson-nano"),
)

_PERMISSION_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


def write_sysfs(path: Path, text: str) -> None:
    """Write `text` to a sysfs attribute in a single write (the kernel parses one write)."""
    with open(path, "w") as handle:
        handle.write(text)


def _user_name() -> str:
    # getpass fails in containers whose uid has no passwd entry; the hint still needs a name.
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "youruser"


def _mhz(frequency_hz: int) -> str:
    return f"{frequency_hz / 1e6:g} MHz"


def model_to_name(model: str) -> str:
    """Map a device-tree model string ("NVIDIA Jetson Nano Developer Kit") to a short name."""
    lowered = " ".join(model.lower().split())
    for needle, name in _MODEL_NAMES:
        if needle in lowered:
            return name
    return "jetson"


# -- devfreq ---------------------------------------------------------------------------------


def find_gpu_devfreq(sysfs_root: str | Path = "/") -> Path | None:
    """The resolved path of the GPU devfreq node under `sysfs_root`, or None when there is none.

    A node is the GPU when its ``device/of_node/name`` (or the basename of the resolved
    ``device/of_node`` without its ``@unit-address``) is one of `GPU_OF_NODE_NAMES`.
    """
    class_dir = Path(sysfs_root) / "sys" / "class" / "devfreq"
    if not class_dir.is_dir():
        return None
    for entry in sorted(class_dir.iterdir()):
        of_node = entry / "device" / "of_node"
        names = set()
        if (of_node / "name").is_file():
            names.add(read_text(of_node / "name"))
        if of_node.exists():
            names.add(of_node.resolve().name.split("@")[0])
        names.add(entry.name.split(".", 1)[-1])  # 17000000.ga10b
        if names & set(GPU_OF_NODE_NAMES):
            return entry.resolve()
    return None


#: how long `nvpmodel -m ID` may take before wattcap gives up on it
NVPMODEL_TIMEOUT_S = 30.0
#: where L4T installs nvpmodel (often not on a user's PATH: /usr/sbin)
NVPMODEL_PATH = "/usr/sbin/nvpmodel"


# -- the device ------------------------------------------------------------------------------


class JetsonDevice(Device):
    """A Jetson board: GPU frequency through devfreq, power through INA3221.

    With ``dry_run=True`` every file is read but none is written: `set_frequency_hz` records
    the writes it would make in `planned_writes` and returns the requested frequency.
    """

    kind = "jetson"
    persists_settings = True
    open_name = "jetson"

    def __init__(self, sysfs_root: str | Path = "/", dry_run: bool = False) -> None:
        super().__init__()
        self.sysfs_root = Path(sysfs_root)
        self.dry_run = dry_run
        node = find_gpu_devfreq(self.sysfs_root)
        if node is None:
            raise DeviceNotFoundError(
                "no Jetson GPU devfreq node under /sys/class/devfreq",
                hint="run on a Jetson with L4T (this looks like another machine); "
                "use 'emulated:jetson-nano' to work without one",
            )
        self.devfreq_path = node
        self.notes: list[str] = []
        self.planned_writes: list[tuple[Path, int]] = []
        #: the commands a dry run would have run (`nvpmodel -m ID`)
        self.planned_commands: list[list[str]] = []
        #: the power mode found, once wattcap switched it (restore puts it back)
        self._found_mode_id: int | None = None
        self._saved: tuple[int, int, str] | None = None
        # True once a write went through: a lock refused at its first write changed nothing,
        # and restore() must not then fail a second time on the same missing permission.
        self._dirty = False

        model_file = self.sysfs_root / "proc" / "device-tree" / "model"
        self.model = read_text(model_file) if model_file.exists() else ""
        self.name = model_to_name(self.model)

        self._modes, self._mode_id = read_nvpmodel(self.sysfs_root)
        try:
            self._available_hz = sorted(
                {int(v) for v in read_text(node / "available_frequencies").split()}
            )
            self._cap_hz = self._read_node("max_freq")
        except (OSError, ValueError) as exc:
            raise DeviceError(
                f"cannot read the GPU devfreq node {node}: {exc}",
                hint="this L4T release may lay devfreq out differently; please report it",
            ) from exc
        if not self._available_hz:
            raise DeviceError(f"{node}/available_frequencies lists no frequency")
        mode = self._modes.get(self._mode_id) if self._mode_id is not None else None
        mode_cap_hz = self._mode_cap_hz(mode) if mode else None
        # min == max at start looks like a lock left by an earlier run, not the power mode's
        # cap: trust nvpmodel for the cap then, or the list would shrink to one frequency.
        if (
            mode is not None
            and mode_cap_hz is not None
            and self._read_node("min_freq") == self._cap_hz
            and mode_cap_hz > self._cap_hz
        ):
            self.notes.append(
                f"GPU clock was locked at {_mhz(self._cap_hz)} when wattcap started (left by "
                f"an earlier run?); using the {mode.name} power-mode cap {_mhz(mode_cap_hz)}; "
                "restore() puts that lock back"
            )
            self._cap_hz = mode_cap_hz

        found = find_ina3221_rails(self.sysfs_root)
        self.rails, unreadable = readable_rails(found)
        self.notes += unreadable
        self.power_source: PowerSource = choose_power_source(found, self.rails)
        self.rail_reason = self.power_source.reason
        self._power_rails = list(self.power_source.rails)
        self._rail_name = self.power_source.name
        # device events go into every run record: the rule and the rails stay with the run
        self.events.append(f"power sensor: {self.power_source.describe()}")
        if self.power_source.missing:
            self.notes.append(
                f"device power unreadable: {self.power_source.rule} {self._rail_name} needs "
                f"{', '.join(self.power_source.missing)}, which cannot be read; power is not "
                "reported rather than read low"
            )
        self._period_s = self._find_sensor_period_s()

    # -- power modes ---------------------------------------------------------------------------
    def power_mode_ids(self) -> list[int]:
        """The modes of /etc/nvpmodel.conf, by id."""
        return sorted(self._modes)

    def power_mode_names(self) -> dict[int, str]:
        """The modes of /etc/nvpmodel.conf: id -> name."""
        return {mode_id: self._modes[mode_id].name for mode_id in sorted(self._modes)}

    def require_power_mode(self, wanted: str) -> None:
        """Accept the active nvpmodel mode only, by name or id (`require_active_mode`)."""
        require_active_mode(self.name, self._modes, self._mode_id, wanted)

    @property
    def power_mode_id(self) -> int | None:
        """The active nvpmodel mode's id (None when it cannot be read)."""
        return self._mode_id

    def _mode_cap_hz(self, mode: PowerMode) -> int:
        """The highest available GPU frequency a mode allows."""
        cap = mode.gpu_max_hz or self._available_hz[-1]
        return max([f for f in self._available_hz if f <= cap] or self._available_hz[:1])

    def set_power_mode(self, mode_id: int) -> int:
        """Switch the board to nvpmodel mode `mode_id` (`nvpmodel -m ID`, as root) and read
        it back; the GPU clocks are then those the mode allows. A mode that needs a reboot
        (its GPU TPC mask differs from the active mode's, or nvpmodel asks for one) is refused:
        wattcap never reboots a board. `restore` puts the mode found back, before the clocks."""
        if mode_id not in self._modes:
            raise ValueError(f"{self.name} has no power mode {mode_id}; its modes: "
                             + list_power_modes(self.power_mode_names()))
        if mode_id == self._mode_id:
            return mode_id
        if self._mode_id is None:
            raise DeviceError("the active power mode cannot be read (no /var/lib/nvpmodel/status)"
                              ": wattcap would not know which mode to put back",
                              hint="check `sudo nvpmodel -q`")
        self._refuse_reboot(mode_id)
        if self.dry_run:
            self.planned_commands.append([self._nvpmodel(), "-m", str(mode_id)])
            return mode_id
        with self.clock_lock:
            self.claim_before_change()
            if self._found_mode_id is None:
                self._found_mode_id = self._mode_id
            if self._saved is None:  # the clocks as found, before the mode moves them
                self._saved = (self._read_node("min_freq"), self._read_node("max_freq"),
                               read_text(self.devfreq_path / "governor"))
            self._switch_mode(mode_id)
        return mode_id

    def _refuse_reboot(self, mode_id: int) -> None:
        current = self._modes.get(self._mode_id) if self._mode_id is not None else None
        target = self._modes[mode_id]
        if current is not None and current.tpc_pg_mask != target.tpc_pg_mask:
            raise DeviceNotSupportedError(
                f"power mode {mode_id} ({target.name}) powers other GPU TPCs than "
                f"{current.name} (TPC_PG_MASK {target.tpc_pg_mask} vs {current.tpc_pg_mask}): "
                "nvpmodel needs a reboot to switch, and wattcap never reboots a board",
                hint=f"switch with `sudo nvpmodel -m {mode_id}`, reboot, and run wattcap in it")

    @staticmethod
    def _nvpmodel() -> str:
        return shutil.which("nvpmodel") or NVPMODEL_PATH

    def _switch_mode(self, mode_id: int) -> None:
        """Run `nvpmodel -m ID`, answering no to a reboot prompt, and read the mode back."""
        command = [self._nvpmodel(), "-m", str(mode_id)]
        try:
            done = subprocess.run(command, input="NO\n", capture_output=True, text=True,
                                  timeout=NVPMODEL_TIMEOUT_S, check=False)
        except FileNotFoundError as exc:
            raise DeviceNotSupportedError(
                "nvpmodel is not installed (not on PATH, not at /usr/sbin/nvpmodel)",
                hint="power modes need L4T's nvpmodel; run on a Jetson") from exc
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DeviceError(f"{' '.join(command)} did not complete: {exc}") from exc
        output = (done.stdout + done.stderr).strip()
        last = output.splitlines()[-1] if output else f"exit status {done.returncode}"
        if done.returncode != 0:
            if "permission" in output.lower() or "root" in output.lower():
                raise DevicePermissionError(f"nvpmodel could not switch to mode {mode_id}: {last}",
                                            hint="run wattcap with sudo (nvpmodel needs root)")
            raise DeviceError(f"{' '.join(command)} failed: {last}")
        self._modes, self._mode_id = read_nvpmodel(self.sysfs_root)
        if "reboot" in output.lower() or self._mode_id != mode_id:
            raise DeviceNotSupportedError(
                f"power mode {mode_id} did not take effect"
                + (" (nvpmodel asked for a reboot, which wattcap never does)"
                   if "reboot" in output.lower() else f": the board reports mode {self._mode_id}"),
                hint=f"switch with `sudo nvpmodel -m {mode_id}`, reboot, and run wattcap in it")
        self._cap_hz = self._mode_cap_hz(self._modes[mode_id])
        self._dirty = True

    # -- helpers -------------------------------------------------------------------------------
    def _read_node(self, attribute: str) -> int:
        return read_int(self.devfreq_path / attribute)

    def permission_hint(self) -> str:
        """How to get write access to the GPU clock files (sudo, udev rule, sudoers, dry run)."""
        node = self.devfreq_path.name
        files = " ".join(f"/sys%p/{a}" for a in ("min_freq", "max_freq", "governor"))
        wattcap = shutil.which("wattcap") or "/path/to/.venv/bin/wattcap"
        return (
            "run with sudo; or let your user write the GPU clock files with a udev rule, e.g. "
            "/etc/udev/rules.d/99-wattcap-gpufreq.rules containing\n"
            f'    SUBSYSTEM=="devfreq", KERNEL=="{node}", '
            f'RUN+="/bin/chgrp video {files}", RUN+="/bin/chmod g+w {files}"\n'
            "  then `sudo udevadm control --reload && sudo udevadm trigger` and add yourself to "
            "the video group; or allow sudo without a password for wattcap with a sudoers line "
            "(sudo visudo -f /etc/sudoers.d/wattcap)\n"
            f"    {_user_name()} ALL=(root) NOPASSWD: {wattcap}\n"
            "  or use --dry-run to plan without changing clocks"
        )

    def _permission_error(self, path: Path, exc: OSError) -> DevicePermissionError:
        return DevicePermissionError(
            f"cannot write {path}: {exc.strerror or exc}", hint=self.permission_hint()
        )

    def _write(self, attribute: str, value: int | str) -> None:
        path = self.devfreq_path / attribute
        try:
            write_sysfs(path, str(value))
            self._dirty = True
        except OSError as exc:
            if isinstance(exc, PermissionError) or exc.errno in _PERMISSION_ERRNOS:
                raise self._permission_error(path, exc) from exc
            raise DeviceError(
                f"the kernel refused {value} for {path}: {exc.strerror or exc}",
                hint="the value must be one of available_frequencies and keep min_freq <= max_freq",
            ) from exc

    def _range_writes(self, min_hz: int, max_hz: int) -> list[tuple[str, int]]:
        # The devfreq kernel of L4T 32 rejects min_freq > max_freq with EINVAL, so each write
        # must keep min <= max: raise max first when going up, lower min first when going down.
        if min_hz > self._read_node("max_freq"):
            return [("max_freq", max_hz), ("min_freq", min_hz)]
        return [("min_freq", min_hz), ("max_freq", max_hz)]

    def _write_range(self, min_hz: int, max_hz: int) -> None:
        for attribute, value in self._range_writes(min_hz, max_hz):
            self._write(attribute, value)

    def _find_sensor_period_s(self) -> float:
        intervals_s = []
        for rail in self._power_rails:
            interval = rail.directory / "update_interval"
            if rail.layout == "hwmon" and interval.is_file():
                intervals_s.append(read_int(interval) / 1e3)
        return max([INA3221_PERIOD_S, *intervals_s])

    # -- frequencies ---------------------------------------------------------------------------
    def frequencies_hz(self) -> list[int]:
        """Available GPU frequencies up to the cap of the power mode active at discovery."""
        return [f for f in self._available_hz if f <= self._cap_hz]

    def current_frequency_hz(self) -> int:
        """The frequency devfreq reports now (``cur_freq``)."""
        return self._read_node("cur_freq")

    @property
    def torch_device(self) -> str:
        """The integrated GPU: CUDA device 0."""
        return "cuda"

    def _apply_frequency_hz(self, frequency_hz: int) -> int:
        """Lock the GPU at `frequency_hz` (min_freq = max_freq) and check that it followed."""
        allowed = self.frequencies_hz()
        if frequency_hz not in allowed:
            raise ValueError(
                f"{_mhz(frequency_hz)} is not an available GPU frequency of {self.name}; "
                f"choose one of {[_mhz(f) for f in allowed]}"
            )
        if self.dry_run:
            writes = self._range_writes(frequency_hz, frequency_hz)
            self.planned_writes += [(self.devfreq_path / a, value) for a, value in writes]
            return frequency_hz
        if self._saved is None:
            self._saved = (
                self._read_node("min_freq"),
                self._read_node("max_freq"),
                read_text(self.devfreq_path / "governor"),
            )
        self._write_range(frequency_hz, frequency_hz)
        return self._check_followed(frequency_hz, allowed)

    def _check_followed(self, frequency_hz: int, allowed: list[int]) -> int:
        deadline_s = time.monotonic() + FREQUENCY_SETTLE_S
        while True:
            actual_hz = self.current_frequency_hz()
            # Clock dividers may report a value a few kHz off the table entry: accept any
            # reading whose nearest table entry is the requested one.
            nearest_hz = min(self._available_hz, key=lambda f: abs(f - actual_hz))
            if nearest_hz == frequency_hz:
                return actual_hz
            if time.monotonic() >= deadline_s:
                break
            time.sleep(0.005)
        mode = self.power_mode
        heat = hottest_zone(self.sysfs_root)
        if heat is not None and heat.throttling:
            cause, detail = "thermal", heat.describe()
        elif mode is not None:
            cause, detail = "power mode", f"nvpmodel mode {mode}"
        else:
            cause, detail = "unknown", ""
        raise FrequencyNotFollowedError(
            f"requested {_mhz(frequency_hz)} but the GPU runs at {_mhz(actual_hz)} "
            f"(cur_freq of {self.devfreq_path}); "
            + (f"the board is hot ({detail})" if cause == "thermal" else
               "likely causes: the nvpmodel power mode "
               f"({mode or 'unknown'}) caps the GPU below the request, or thermal throttling"),
            hint="check `sudo nvpmodel -q` and the temperature (tegrastats); choose a "
            f"frequency at or below {_mhz(max(allowed))} or let the board cool down",
            requested_hz=frequency_hz, running_hz=actual_hz, cause=cause, cause_detail=detail,
        )

    # -- power ---------------------------------------------------------------------------------
    @property
    def sensor_period_s(self) -> float:
        """INA3221 refresh period (see INA3221_PERIOD_S: an estimate unless hwmon reports it)."""
        return self._period_s

    @property
    def sensor_rail(self) -> str:
        """The input rail (VDD_IN / POM_5V_IN / the INA238), ``sum(...)`` of the module's
        rails, or ``none``."""
        return self._rail_name

    def read_power_w(self) -> float:
        """Device power now: the input rail, else the sum of the module's rails; an error,
        never a partial sum, when a rail of the rule cannot be read."""
        if self.power_source.missing:
            raise SensorMissingError(
                f"{self.name}: the device power is {self.power_source.describe()}; without "
                "those rails it would read low and every cap would be exceeded",
                hint="check the INA3221 drivers and channels (ls /sys/bus/i2c/drivers/ina3221*"
                " and `wattcap devices --probe`); frequency control still works",
            )
        if not self._power_rails:
            raise SensorMissingError(
                f"{self.name} has no INA3221 power sensor (nothing under "
                "/sys/bus/i2c/drivers/ina3221x or /sys/bus/i2c/drivers/ina3221; the Jetson "
                "Nano 2 GB has no on-board power monitor); frequency control still works",
                hint="measure with an external USB power meter, or profile the power on the "
                "emulated device (e.g. 'emulated:jetson-nano')",
            )
        try:
            return sum(rail.read_power_w() for rail in self._power_rails)
        except (OSError, ValueError) as exc:
            raise DeviceError(
                f"cannot read the power rail {self._rail_name}: {exc}",
                hint="check that the INA3221 driver is loaded (ls /sys/bus/i2c/drivers)",
            ) from exc

    # -- memory, time, work --------------------------------------------------------------------
    def memory_bytes(self) -> int:
        """MemTotal of /proc/meminfo (shared with the CPU) minus `MEMORY_RESERVED_BYTES`."""
        meminfo = self.sysfs_root / "proc" / "meminfo"
        match = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo.read_text(), re.MULTILINE)
        if match is None:
            raise DeviceError(f"no MemTotal line in {meminfo}")
        return max(0, int(match.group(1)) * 1024 - MEMORY_RESERVED_BYTES)

    def free_memory_bytes(self) -> int:
        """MemAvailable of /proc/meminfo: what the CPU side (other processes, a resident
        model) leaves of the memory the GPU shares."""
        meminfo = self.sysfs_root / "proc" / "meminfo"
        match = re.search(r"^MemAvailable:\s+(\d+)\s*kB", meminfo.read_text(), re.MULTILINE)
        if match is None:
            raise DeviceError(f"no MemAvailable line in {meminfo}")
        available = int(match.group(1)) * 1024
        # Like NVML's free on a GPU: this process's allocator pool counts as free (it is given
        # back before the next batch size is built); a CUDA context not yet created is not.
        own = own_cuda_memory_bytes(self.torch_device)
        return max(0, available - CUDA_CONTEXT_BYTES if own is None else available + own)

    def now_s(self) -> float:
        """Wall clock (monotonic) seconds."""
        return time.monotonic()

    # -- power mode, settings ------------------------------------------------------------------
    @property
    def power_mode(self) -> str | None:
        """Name of the active nvpmodel mode ("MAXN", "5W", ...), None when it cannot be read."""
        mode = self._modes.get(self._mode_id) if self._mode_id is not None else None
        return mode.name if mode else None

    def device_key(self) -> str:
        """The GPU's devfreq node: one per board."""
        return f"jetson-{self.devfreq_path.name}"

    def found_settings(self) -> dict[str, object]:
        """devfreq min_freq, max_freq and governor as they are now, and the nvpmodel mode's id
        where it can be read."""
        found: dict[str, object] = {
            "min_freq": self._read_node("min_freq"), "max_freq": self._read_node("max_freq"),
            "governor": read_text(self.devfreq_path / "governor")}
        if self._mode_id is not None:
            found["power_mode_id"] = self._mode_id
        return found

    def apply_found_settings(self, settings: dict[str, object]) -> None:
        """Put a state file's power mode back (first: a mode resets the clocks), then its
        devfreq range and governor."""
        mode = settings.get("power_mode_id")
        if mode is not None and int(str(mode)) != self._mode_id:
            self._switch_mode(int(str(mode)))
        self._write_range(int(str(settings["min_freq"])), int(str(settings["max_freq"])))
        governor = str(settings["governor"])
        if read_text(self.devfreq_path / "governor") != governor:
            self._write("governor", governor)

    def _restore_settings(self) -> None:
        """Put the power mode found back (a mode resets the clocks, so first), then write the
        original min_freq, max_freq and governor back. Idempotent."""
        mode_error: DeviceError | None = None
        if self._found_mode_id is not None:
            if self._mode_id != self._found_mode_id:
                try:
                    self._switch_mode(self._found_mode_id)
                except DeviceError as err:
                    mode_error = err  # the clocks are still put back, then this is raised
            self._found_mode_id = None
        self._restore_devfreq()
        if mode_error is not None:
            raise mode_error

    def _restore_devfreq(self) -> None:
        if self._saved is None or not self._dirty:
            self._saved = None
            return
        min_hz, max_hz, governor = self._saved
        self._write_range(min_hz, max_hz)
        if read_text(self.devfreq_path / "governor") != governor:
            self._write("governor", governor)
        self._saved = None
        self._dirty = False

    def info(self) -> DeviceInfo:
        """Description with power mode, rails and notes."""
        info = super().info()
        info.notes = [
            f"devfreq node {self.devfreq_path}",
            f"rails: {', '.join(r.name for r in self.rails) or 'none'}",
            f"device power: {self.power_source.describe()}",
            *self.notes,
        ]
        return info


def discover_jetson(sysfs_root: str | Path = "/", dry_run: bool = False) -> JetsonDevice | None:
    """A JetsonDevice when `sysfs_root` has a GPU devfreq node, else None."""
    if find_gpu_devfreq(sysfs_root) is None:
        return None
    return JetsonDevice(sysfs_root, dry_run=dry_run)
