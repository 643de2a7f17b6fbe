"""Fake Jetson sysfs trees, laid out as on real L4T, and a fake kernel for the write boundary.

The builders write plain files and the symlinks a real board has (``/sys/class/devfreq/<node>``
-> ``/sys/devices/.../devfreq/<node>``, ``device`` -> the platform device, ``of_node`` -> the
device-tree node, ``/proc/device-tree`` -> ``/sys/firmware/devicetree/base``), so the backend's
discovery runs unchanged against them.

Plain files do not react to writes the way sysfs does, so `FakeDevfreqKernel` stands in for the
kernel at the single write function of the backend (`wattcap.devices.jetson.write_sysfs`):
it refuses min_freq > max_freq with EINVAL as the L4T 32 devfreq code does, moves cur_freq as
devfreq would (to the top of [min, max], lowered by an optional thermal/power-mode cap), and can
refuse every write with EACCES/EROFS. That behaviour lives here, never in the backend.

Sources for the numbers: the Nano frequency list, power modes and rail names follow DESIGN.md
§3-§4 and the stock nvpmodel_t210_jetson-nano.conf; the TX2 (NX) GPU list is the one reported on
TX2-family boards (114.75 ... 1300.5 MHz). The power monitors' rail labels, channels, i2c
addresses and drivers follow the public sources each builder cites. Marked "illustrative" below:
TX2 NX mode names and the MAXQ cap, the Orin Nano frequency list and caps, the hwmon numbers and
bus numbers no source gives, rail readings and MemTotal values — plausible, not copied from a
real board.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from wattcap.devices import jetson

MHZ = 1_000_000

#: Jetson Nano GPU (gm20b), DESIGN.md §3.
NANO_FREQUENCIES_HZ = [
    76_800_000, 153_600_000, 230_400_000, 307_200_000, 384_000_000, 460_800_000,
    537_600_000, 614_400_000, 691_200_000, 768_000_000, 844_800_000, 921_600_000,
]  # fmt: skip

#: TX2-family GPU (gp10b), as listed by available_frequencies on TX2 boards.
TX2NX_FREQUENCIES_HZ = [
    114_750_000, 216_750_000, 318_750_000, 420_750_000, 522_750_000, 624_750_000,
    726_750_000, 828_750_000, 930_750_000, 1_032_750_000, 1_134_750_000, 1_236_750_000,
    1_300_500_000,
]  # fmt: skip

#: Orin Nano GPU (ga10b) — illustrative: 306-1020 MHz steps seen on Orin Nano, capped at
#: 624.75 MHz by the 15 W mode of JetPack 6.0.
ORIN_NANO_FREQUENCIES_HZ = [
    306_000_000, 408_000_000, 510_000_000, 612_000_000, 624_750_000, 714_000_000,
    816_000_000, 918_000_000, 1_020_000_000,
]  # fmt: skip


@dataclass
class FakeBoard:
    """A fake board tree and the facts a test checks the backend against."""

    root: Path
    #: resolved devfreq directory of the GPU (where min_freq etc. live)
    devfreq: Path
    name: str
    model: str
    available_hz: list[int]
    #: frequencies the backend should offer (available, capped by the power mode)
    expected_hz: list[int]
    power_mode: str | None
    #: rail name -> (voltage_mv, current_ma)
    rails: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: rail name -> directory and channel, to change readings in tests
    rail_files: dict[str, tuple[str, Path, int]] = field(default_factory=dict)

    def set_rail(self, name: str, voltage_mv: int, current_ma: int) -> None:
        """Change what the sensor reports for one rail."""
        layout, directory, channel = self.rail_files[name]
        self.rails[name] = (voltage_mv, current_ma)
        if layout == "iio":
            _put(directory / f"in_voltage{channel}_input", voltage_mv)
            _put(directory / f"in_current{channel}_input", current_ma)
            _put(directory / f"in_power{channel}_input", voltage_mv * current_ma // 1000)
        else:
            _put(directory / f"in{channel}_input", voltage_mv)
            _put(directory / f"curr{channel}_input", current_ma)

    def read(self, attribute: str) -> str:
        """Current content of a GPU devfreq attribute."""
        return (self.devfreq / attribute).read_text().strip()

    def snapshot(self) -> dict[str, str]:
        """Every regular file under the devfreq node, for "nothing was written" checks."""
        return {p.name: p.read_text() for p in self.devfreq.iterdir() if p.is_file()}


def _put(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def _link(link: Path, target: Path) -> None:
    # Relative links, as sysfs uses, so the tree stays valid wherever the temp dir is.
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def add_gpu_devfreq(
    root: Path,
    platform_device: str,
    of_node: str,
    of_name: str,
    available_hz: list[int],
    max_hz: int,
    governor: str,
) -> Path:
    """Add a devfreq node for `platform_device` (e.g. "sys/devices/57000000.gpu")."""
    device = root / platform_device
    node_name = device.name
    node = device / "devfreq" / node_name
    _put(node / "available_frequencies", " ".join(str(f) for f in available_hz))
    _put(node / "min_freq", available_hz[0])
    _put(node / "max_freq", max_hz)
    _put(node / "cur_freq", available_hz[0])
    _put(node / "governor", governor)
    _put(node / "available_governors", f"{governor} userspace performance simple_ondemand")
    _put(node / "polling_interval", 50)
    _link(node / "device", device)
    firmware_node = root / "sys" / "firmware" / "devicetree" / "base" / of_node
    firmware_node.mkdir(parents=True, exist_ok=True)
    # Device-tree strings are NUL-terminated.
    (firmware_node / "name").write_bytes(of_name.encode() + b"\x00")
    _link(device / "of_node", firmware_node)
    _link(root / "sys" / "class" / "devfreq" / node_name, node)
    return node


def add_ina3221_iio(
    root: Path, bus_addr: str, rails: dict[str, tuple[int, int]], board: FakeBoard | None = None,
    iio_index: int = 0,
) -> Path:
    """L4T 32 layout: ``/sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<N>`` (N counts
    the monitors of the board: 0-0041 is iio:device1 on the TX2 and AGX Xavier)."""
    bus = bus_addr.split("-")[0]
    device = root / "sys" / "devices" / "platform" / f"i2c-{bus}" / bus_addr
    iio = device / f"iio:device{iio_index}"
    _put(iio / "name", "ina3221x")
    for channel, (name, (voltage_mv, current_ma)) in enumerate(rails.items()):
        _put(iio / f"rail_name_{channel}", name)
        _put(iio / f"in_voltage{channel}_input", voltage_mv)
        _put(iio / f"in_current{channel}_input", current_ma)
        _put(iio / f"in_power{channel}_input", voltage_mv * current_ma // 1000)
        _put(iio / f"crit_current_limit_{channel}", 32760)
        if board is not None:
            board.rail_files[name] = ("iio", iio, channel)
    driver = root / "sys" / "bus" / "i2c" / "drivers" / "ina3221x"
    for entry in ("bind", "unbind", "uevent"):
        _put(driver / entry, "")
    _link(driver / bus_addr, device)
    return iio


def add_ina3221_hwmon(
    root: Path,
    bus_addr: str,
    hwmon_index: int,
    channels: list[tuple[str, int, int]],
    board: FakeBoard | None = None,
    update_interval_ms: int | None = None,
) -> Path:
    """L4T 35+ layout: ``/sys/bus/i2c/drivers/ina3221/<bus-addr>/hwmon/hwmon<N>``.

    `channels` are (label, voltage_mv, current_ma) for in1..in3; in4..in6 hold shunt voltages
    and in7 the "sum of shunt voltages" channel, as the upstream driver exposes them. A channel
    labelled "NC" is disabled (``in<N>_enable`` 0) and its current reads nothing, as the driver
    answers ENODATA for a disabled channel.
    """
    bus = bus_addr.split("-")[0]
    device = root / "sys" / "devices" / "platform" / "bus@0" / f"i2c-{bus}" / bus_addr
    hwmon = device / "hwmon" / f"hwmon{hwmon_index}"
    _put(hwmon / "name", "ina3221")
    if update_interval_ms is not None:
        _put(hwmon / "update_interval", update_interval_ms)
    for channel, (label, voltage_mv, current_ma) in enumerate(channels, start=1):
        _put(hwmon / f"in{channel}_label", label)
        _put(hwmon / f"in{channel}_enable", 0 if label == "NC" else 1)
        _put(hwmon / f"in{channel}_input", voltage_mv)
        _put(hwmon / f"curr{channel}_input", "" if label == "NC" else current_ma)
        _put(hwmon / f"curr{channel}_crit", 32760)
        _put(hwmon / f"in{channel + 3}_input", current_ma * 5)  # shunt uV across 5 mOhm
        if board is not None and label != "NC":
            board.rail_files[label] = ("hwmon", hwmon, channel)
    _put(hwmon / "in7_label", "sum of shunt voltages")
    _put(hwmon / "in7_input", sum(c[2] for c in channels) * 5)
    driver = root / "sys" / "bus" / "i2c" / "drivers" / "ina3221"
    for entry in ("bind", "unbind", "uevent"):
        _put(driver / entry, "")
    _link(driver / bus_addr, device)
    return hwmon


def add_ina238_hwmon(root: Path, bus_addr: str, hwmon_index: int, power_uw: int,
                     label: str | None = None) -> Path:
    """The INA238 of newer modules: ``/sys/bus/i2c/drivers/ina238/<bus-addr>/hwmon/hwmon<N>``
    with the upstream driver's bus voltage, current and ``power1_input`` (microwatts)."""
    bus = bus_addr.split("-")[0]
    device = root / "sys" / "devices" / "platform" / "bus@0" / f"i2c-{bus}" / bus_addr
    hwmon = device / "hwmon" / f"hwmon{hwmon_index}"
    _put(hwmon / "name", "ina238")
    if label is not None:
        _put(hwmon / "label", label)
    _put(hwmon / "in1_input", 19_000)  # bus mV
    _put(hwmon / "curr1_input", power_uw // 19_000)  # mA
    _put(hwmon / "power1_input", power_uw)
    driver = root / "sys" / "bus" / "i2c" / "drivers" / "ina238"
    for entry in ("bind", "unbind", "uevent"):
        _put(driver / entry, "")
    _link(driver / bus_addr, device)
    return hwmon


def write_nvpmodel(
    root: Path, conf_name: str, modes: list[tuple[int, str, int]], default_id: int, active_id: int,
    tpc_masks: dict[int, str] | None = None,
) -> None:
    """``/etc/nvpmodel.conf`` (a link, as on L4T) and ``/var/lib/nvpmodel/status``.

    `modes` are (id, name, GPU MAX_FREQ in Hz, -1 for uncapped); `tpc_masks` gives a mode a
    ``TPC_POWER_GATING TPC_PG_MASK`` line (switching between different masks needs a reboot).
    """
    lines = [
        "###########################",
        "# POWER_MODEL DEFINITIONS #",
        "###########################",
        "",
    ]
    for mode_id, name, gpu_max in modes:
        lines += [
            f"< POWER_MODEL ID={mode_id} NAME={name} >",
            "CPU_ONLINE CORE_0 1",
            "CPU_ONLINE CORE_1 1",
            "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on",
            "GPU MIN_FREQ 0",
            f"GPU MAX_FREQ {gpu_max}\t# Hz, -1: no cap",
            "GPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto",
            "EMC MAX_FREQ 0",
            *([f"TPC_POWER_GATING TPC_PG_MASK {tpc_masks[mode_id]}"]
              if tpc_masks and mode_id in tpc_masks else []),
            "",
        ]
    lines += [
        "# mandatory section to configure the default mode",
        f"< PM_CONFIG DEFAULT={default_id} >",
    ]
    conf = root / "etc" / "nvpmodel" / conf_name
    _put(conf, "\n".join(lines))
    _link(root / "etc" / "nvpmodel.conf", conf)
    _put(root / "var" / "lib" / "nvpmodel" / "status", f"pmode:{active_id:04d} fmode:quiet")


def write_board_files(root: Path, model: str, mem_total_kb: int) -> None:
    """``/proc/device-tree/model`` (through the firmware link) and ``/proc/meminfo``."""
    base = root / "sys" / "firmware" / "devicetree" / "base"
    base.mkdir(parents=True, exist_ok=True)
    (base / "model").write_bytes(model.encode() + b"\x00")
    _link(root / "proc" / "device-tree", base)
    _put(
        root / "proc" / "meminfo",
        f"MemTotal:       {mem_total_kb} kB\nMemFree:         {mem_total_kb // 2} kB\n"
        f"MemAvailable:    {mem_total_kb * 2 // 3} kB\n",
    )


def _cap(available_hz: list[int], cap_hz: int) -> list[int]:
    return [f for f in available_hz if f <= cap_hz]


def _nano_base(root: Path, model: str, mem_total_kb: int, mode_id: int) -> FakeBoard:
    modes = [(0, "MAXN", -1), (1, "5W", 640_000_000)]
    write_nvpmodel(root, "nvpmodel_t210_jetson-nano.conf", modes, default_id=0, active_id=mode_id)
    write_board_files(root, model, mem_total_kb)
    cap_hz = max(_cap(NANO_FREQUENCIES_HZ, 640_000_000 if mode_id == 1 else 921_600_000))
    node = add_gpu_devfreq(
        root, "sys/devices/57000000.gpu", "gpu@57000000", "gpu", NANO_FREQUENCIES_HZ, cap_hz,
        "nvhost_podgov",
    )  # fmt: skip
    return FakeBoard(
        root=root,
        devfreq=node,
        name="",
        model=model,
        available_hz=NANO_FREQUENCIES_HZ,
        expected_hz=_cap(NANO_FREQUENCIES_HZ, cap_hz),
        power_mode=modes[mode_id][1],
    )


def make_nano_l4t32(root: Path, mode_id: int = 0) -> FakeBoard:
    """Jetson Nano 4 GB on L4T 32: devfreq 57000000.gpu, INA3221 iio at 6-0040
    (iio:device0: POM_5V_IN, POM_5V_GPU, POM_5V_CPU; POM_5V_IN is the module input).

    Source: energymon's jetson/JetsonPowerRails.md (github.com/energymon/energymon: 0x40,
    names from the L4T device tree and real boards) and public Nano readers of
    /sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0/in_power0_input as the total.
    """
    board = _nano_base(root, "NVIDIA Jetson Nano Developer Kit", 4_059_712, mode_id)
    board.name = "jetson-nano"
    board.rails = {
        "POM_5V_IN": (5_096, 392),
        "POM_5V_GPU": (5_096, 40),
        "POM_5V_CPU": (5_096, 78),
    }  # illustrative idle readings
    add_ina3221_iio(root, "6-0040", board.rails, board)
    return board


def make_nano_2gb_no_sensor(root: Path) -> FakeBoard:
    """Jetson Nano 2 GB: same GPU, no INA3221 at all."""
    board = _nano_base(root, "NVIDIA Jetson Nano 2GB Developer Kit", 2_005_884, 0)
    board.name = "jetson-nano-2gb"
    return board


def make_tx2nx_l4t32(root: Path) -> FakeBoard:
    """Jetson TX2 NX on L4T 32: devfreq 17000000.gp10b, INA3221 iio at 7-0040 (VDD_IN,
    VDD_CPU_GPU, VDD_SOC: energymon's jetson/JetsonPowerRails.md gives these rails at 0x40;
    the bus number is illustrative)."""
    # Illustrative mode names and MAXQ cap (TX2-family naming); 854.25 MHz is not in the list,
    # so the kernel's cap lands on 828.75 MHz.
    modes = [(0, "MAXN", -1), (1, "MAXQ", 854_250_000)]
    write_nvpmodel(root, "nvpmodel_t186_p3636.conf", modes, default_id=0, active_id=0)
    model = "NVIDIA Jetson TX2 NX Developer Kit"
    write_board_files(root, model, 3_962_640)
    node = add_gpu_devfreq(
        root, "sys/devices/17000000.gp10b", "gp10b@17000000", "gp10b", TX2NX_FREQUENCIES_HZ,
        1_300_500_000, "nvhost_podgov",
    )  # fmt: skip
    board = FakeBoard(
        root=root,
        devfreq=node,
        name="jetson-tx2nx",
        model=model,
        available_hz=TX2NX_FREQUENCIES_HZ,
        expected_hz=list(TX2NX_FREQUENCIES_HZ),
        power_mode="MAXN",
        rails={"VDD_IN": (5_024, 760), "VDD_CPU_GPU": (5_024, 180), "VDD_SOC": (5_024, 150)},
    )
    add_ina3221_iio(root, "7-0040", board.rails, board)
    return board


def make_orin_nano_l4t36(
    root: Path, hwmon_index: int = 3, input_rail: bool = True, mode_id: int = 0
) -> FakeBoard:
    """Jetson Orin Nano on L4T 36: devfreq under bus@0, INA3221 hwmon at 1-0040 (in1 VDD_IN,
    in2 VDD_CPU_GPU_CV, in3 VDD_SOC, as the Jetson Linux developer guide's Orin Nano/NX power
    monitor table lists them; the hwmon number is illustrative).

    `input_rail=False` relabels in1 "NC" (not connected), leaving no VDD_IN, so the backend
    must fall back to the sum of the other rails.
    """
    modes = [(0, "15W", 624_750_000), (1, "7W", 408_000_000)]  # illustrative caps
    write_nvpmodel(root, "nvpmodel_p3767_0003.conf", modes, default_id=0, active_id=mode_id)
    model = "NVIDIA Jetson Orin Nano Developer Kit"
    write_board_files(root, model, 7_802_880)
    cap_hz = modes[mode_id][2]
    node = add_gpu_devfreq(
        root, "sys/devices/platform/bus@0/17000000.gpu", "bus@0/gpu@17000000", "gpu",
        ORIN_NANO_FREQUENCIES_HZ, cap_hz, "nvhost_podgov",
    )  # fmt: skip
    # Other devfreq nodes exist on Orin (video engines); discovery must skip them.
    add_gpu_devfreq(
        root, "sys/devices/platform/bus@0/15340000.vic", "bus@0/vic@15340000", "vic",
        [115_200_000, 729_600_000], 729_600_000, "nvhost_podgov",
    )  # fmt: skip
    board = FakeBoard(
        root=root,
        devfreq=node,
        name="jetson-orin-nano",
        model=model,
        available_hz=ORIN_NANO_FREQUENCIES_HZ,
        expected_hz=_cap(ORIN_NANO_FREQUENCIES_HZ, cap_hz),
        power_mode=modes[mode_id][1],
    )
    channels = [
        ("VDD_IN" if input_rail else "NC", 5_048, 1_052),
        ("VDD_CPU_GPU_CV", 5_032, 240),
        ("VDD_SOC", 5_032, 296),
    ]  # illustrative readings
    board.rails = {label: (mv, ma) for label, mv, ma in channels if label != "NC"}
    add_ina3221_hwmon(root, "1-0040", hwmon_index, channels, board)
    return board


class FakeDevfreqKernel:
    """The kernel side of ``write_sysfs`` for a fake devfreq node.

    Records every write as (attribute, value) in `writes`; enforces min_freq <= max_freq by
    raising EINVAL; sets cur_freq to min(max_freq, cap_hz) after each write (devfreq under load
    runs at the top of the allowed range; `cap_hz` plays a thermal or power-mode limit);
    raises `deny_errno` (EACCES, EROFS...) on every write when set.
    """

    def __init__(self, cap_hz: int | None = None, deny_errno: int | None = None) -> None:
        self.cap_hz = cap_hz
        self.deny_errno = deny_errno
        self.writes: list[tuple[str, int | str]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeDevfreqKernel:
        """Route the backend's writes through this kernel for the test's duration."""
        monkeypatch.setattr(jetson, "write_sysfs", self.write)
        return self

    def write(self, path: Path, text: str) -> None:
        """Apply one write as the kernel would, or raise the errno a kernel would."""
        if self.deny_errno is not None:
            raise OSError(self.deny_errno, os.strerror(self.deny_errno), str(path))
        node = path.parent
        attribute = path.name
        if attribute in ("min_freq", "max_freq"):
            value = int(text)
            min_hz = value if attribute == "min_freq" else int((node / "min_freq").read_text())
            max_hz = value if attribute == "max_freq" else int((node / "max_freq").read_text())
            if min_hz > max_hz:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), str(path))
            self.writes.append((attribute, value))
            _put(path, value)
            cur_hz = max_hz if self.cap_hz is None else min(max_hz, self.cap_hz)
            _put(node / "cur_freq", cur_hz)
        else:
            self.writes.append((attribute, text))
            _put(path, text)


# -- the power monitors of every family ---------------------------------------------------------
# Each builder below lays out the monitors as the family's board does: rail labels per channel,
# i2c addresses, the iio (L4T 32) or hwmon (L4T 35+) driver, hwmon numbering, disconnected
# channels. The GPU part is only what discovery needs (readings, voltages and GPU lists are
# not the point here and are illustrative where not said otherwise).


def _gpu_only_board(root: Path, name: str, model: str, platform_device: str, of_node: str,
                    of_name: str, available_hz: list[int]) -> FakeBoard:
    write_board_files(root, model, 7_802_880)
    node = add_gpu_devfreq(root, platform_device, of_node, of_name, available_hz,
                           available_hz[-1], "nvhost_podgov")
    return FakeBoard(root=root, devfreq=node, name=name, model=model, available_hz=available_hz,
                     expected_hz=list(available_hz), power_mode=None)


def make_tx2_l4t32(root: Path) -> FakeBoard:
    """Jetson TX2 on L4T 32: module monitors at 0-0040 (VDD_SYS_GPU, VDD_SYS_SOC, VDD_4V0_WIFI)
    and 0-0041 (VDD_IN, VDD_SYS_CPU, VDD_SYS_DDR), the carrier board's at 0-0042 (VDD_MUX,
    VDD_5V0_IO_SYS, VDD_3V3_SYS), iio:device0..2.

    Source: energymon (github.com/energymon/energymon, jetson/JetsonPowerRails.md, after the
    L4T 32.6.1 developer guide and device trees); VDD_IN supplies the module, VDD_MUX the
    carrier board, in parallel: the device power is VDD_IN alone.
    """
    board = _gpu_only_board(root, "jetson-tx2", "quill", "sys/devices/17000000.gp10b",
                            "gp10b@17000000", "gp10b", TX2NX_FREQUENCIES_HZ)
    module_a = {"VDD_SYS_GPU": (19_000, 100), "VDD_SYS_SOC": (19_000, 80),
                "VDD_4V0_WIFI": (19_000, 10)}
    module_b = {"VDD_IN": (19_000, 400), "VDD_SYS_CPU": (19_000, 60),
                "VDD_SYS_DDR": (19_000, 50)}
    carrier = {"VDD_MUX": (19_000, 300), "VDD_5V0_IO_SYS": (5_000, 200),
               "VDD_3V3_SYS": (3_300, 100)}
    for index, (addr, rails) in enumerate((("0-0040", module_a), ("0-0041", module_b),
                                           ("0-0042", carrier))):
        board.rails.update(rails)
        add_ina3221_iio(root, addr, rails, board, iio_index=index)
    return board


def make_xavier_nx_l4t35(root: Path) -> FakeBoard:
    """Jetson Xavier NX on L4T 35: one INA3221 at 7-0040, hwmon6: in1 VDD_IN, in2
    VDD_CPU_GPU_CV, in3 VDD_SOC, in7 the sum of shunt voltages.

    Source: Alumet's Jetson plugin (github.com/alumet-dev/alumet,
    plugins/nvidia-jetson/README.md: the Xavier NX Developer Kit's monitor at
    /sys/bus/i2c/drivers/ina3221/7-0040/hwmon/hwmon6) and energymon's
    jetson/JetsonPowerRails.md (0x40: VDD_IN, VDD_CPU_GPU_CV, VDD_SOC).
    """
    board = _gpu_only_board(root, "jetson-xavier-nx", "NVIDIA Jetson Xavier NX Developer Kit",
                            "sys/devices/17000000.gv11b", "gv11b@17000000", "gv11b",
                            TX2NX_FREQUENCIES_HZ)
    channels = [("VDD_IN", 5_000, 1_400), ("VDD_CPU_GPU_CV", 5_000, 500),
                ("VDD_SOC", 5_000, 300)]
    board.rails = {label: (mv, ma) for label, mv, ma in channels}
    add_ina3221_hwmon(root, "7-0040", 6, channels, board)
    return board


def make_agx_xavier_l4t32(root: Path) -> FakeBoard:
    """Jetson AGX Xavier on L4T 32: INA3221 iio at 1-0040 (iio:device0: GPU, CPU, SOC) and
    1-0041 (iio:device1: CV, VDDRQ, SYS5V); no rail measures the module input.

    Sources: energymon's jetson/JetsonPowerRails.md and jetson/README.md (default rails GPU,
    CPU, SOC, CV, VDDRQ, SYS5V, summed); the Jetson AGX Xavier Series product design guide
    §5.6.2 (top monitor 0x40 GPU/CPU/SOC, bottom 0x41 CV/VDDRQ/SYS_VIN_MV); a public power
    loop (github.com/oscarferraz/ICASSP23) reading 1-0040/iio:device0 and 1-0041/iio:device1.
    """
    board = _gpu_only_board(root, "jetson-agx-xavier", "Jetson-AGX",
                            "sys/devices/17000000.gv11b", "gv11b@17000000", "gv11b",
                            TX2NX_FREQUENCIES_HZ)
    top = {"GPU": (19_000, 300), "CPU": (19_000, 200), "SOC": (19_000, 100)}
    bottom = {"CV": (19_000, 50), "VDDRQ": (19_000, 60), "SYS5V": (5_000, 400)}
    board.rails = {**top, **bottom}
    add_ina3221_iio(root, "1-0040", top, board, iio_index=0)
    add_ina3221_iio(root, "1-0041", bottom, board, iio_index=1)
    return board


#: The AGX Orin under load, as one tegrastats line reads it (mW): VDD_GPU_SOC 3150mW
#: VDD_CPU_CV 14312mW VIN_SYS_5V0 4968mW VDDQ_VDD2_1V8AO 1091mW (the split into volts and
#: amperes below is illustrative; the products are these powers).
AGX_ORIN_LOAD_MW = {"VDD_GPU_SOC": 3_150, "VDD_CPU_CV": 14_312, "VIN_SYS_5V0": 4_968,
                    "VDDQ_VDD2_1V8AO": 1_091}


#: the AGX Orin 64GB's nvpmodel modes (id, name as its nvpmodel.conf names them, GPU cap in
#: Hz): the Jetson Linux developer guide (r36), "Supported Modes and Power Efficiency"; the
#: names as public parsers of the board's nvpmodel.conf read them (MODE_ prefix, unlike MAXN)
AGX_ORIN_MODES = [(0, "MAXN", -1), (1, "MODE_15W", 420_750_000), (2, "MODE_30W", 624_750_000),
                  (3, "MODE_50W", 828_750_000)]


def make_agx_orin_l4t36(root: Path, mode_id: int | None = None) -> FakeBoard:
    """Jetson AGX Orin on L4T 36: INA3221 hwmon at 1-0040 (hwmon1: in1 VDD_GPU_SOC, in2
    VDD_CPU_CV, in3 VIN_SYS_5V0) and 1-0041 (hwmon2: in1 NC, in2 VDDQ_VDD2_1V8AO, in3 NC);
    VIN_SYS_5V0 is the 5 V system rail, and no rail measures the module input. With `mode_id`,
    the board's nvpmodel.conf (`AGX_ORIN_MODES`) in that mode, its GPU capped by it; without,
    no nvpmodel files.

    Sources: the Jetson Linux developer guide (r36.4.3), "Jetson Orin Nano Series, Jetson
    Orin NX Series and Jetson AGX Orin Series", software-based power consumption modeling:
    the rails and that VDDQ_VDD2_1V8AO's power is included in VIN_SYS_5V0's (as quoted with
    that link by public AGX Orin readers, whose paths are 1-0040/hwmon/hwmon1 and
    1-0041/hwmon/hwmon2); the readings are the tegrastats line of `AGX_ORIN_LOAD_MW`.
    """
    board = _gpu_only_board(root, "jetson-agx-orin", "Jetson AGX Orin Developer Kit",
                            "sys/devices/platform/bus@0/17000000.gpu", "bus@0/gpu@17000000",
                            "gpu", ORIN_NANO_FREQUENCIES_HZ)
    load = AGX_ORIN_LOAD_MW
    first = [("VDD_GPU_SOC", 5_040, load["VDD_GPU_SOC"] * 1000 // 5_040),
             ("VDD_CPU_CV", 7_156, load["VDD_CPU_CV"] * 1000 // 7_156),
             ("VIN_SYS_5V0", 4_968, load["VIN_SYS_5V0"] * 1000 // 4_968)]
    second = [("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 4_364, load["VDDQ_VDD2_1V8AO"] * 1000 // 4_364),
              ("NC", 0, 0)]
    board.rails = {label: (mv, ma) for label, mv, ma in first + second if label != "NC"}
    add_ina3221_hwmon(root, "1-0040", 1, first, board)
    add_ina3221_hwmon(root, "1-0041", 2, second, board)
    if mode_id is not None:
        write_nvpmodel(root, "nvpmodel_p3701_0005.conf", AGX_ORIN_MODES, default_id=0,
                       active_id=mode_id)
        cap_hz = AGX_ORIN_MODES[mode_id][2]
        board.expected_hz = _cap(board.available_hz, cap_hz) if cap_hz > 0 \
            else list(board.available_hz)
        for attribute in ("max_freq", "cur_freq"):
            _put(board.devfreq / attribute, board.expected_hz[-1])
        board.power_mode = AGX_ORIN_MODES[mode_id][1]
    return board


def make_thor_l4t38(root: Path, vin_power_uw: int = 41_000_000) -> FakeBoard:
    """Jetson AGX Thor on L4T 38: an INA238 on the module input (VIN) beside INA3221s that
    measure rails inside it.

    Source: NVIDIA's answer in the developer forum ("Question about power monitor with
    additional load on Jetson Thor": the INA238 measures the total VIN power; the INA3221s
    remain), pointing to the Jetson Thor page of the Jetson Linux developer guide. The INA238's
    address, hwmon numbers and the INA3221 labels here are illustrative.
    """
    board = _gpu_only_board(root, "jetson-thor", "NVIDIA Jetson AGX Thor Developer Kit",
                            "sys/devices/platform/bus@0/17000000.gb10b", "bus@0/gpu@17000000",
                            "gb10b", ORIN_NANO_FREQUENCIES_HZ)
    channels = [("VDD_GPU", 19_000, 800), ("VDD_CPU_SOC_MSS", 19_000, 600),
                ("VIN_SYS_5V0", 5_000, 900)]
    board.rails = {label: (mv, ma) for label, mv, ma in channels}
    add_ina3221_hwmon(root, "1-0040", 1, channels, board)
    add_ina238_hwmon(root, "2-0044", 3, power_uw=vin_power_uw, label="VIN")
    return board
