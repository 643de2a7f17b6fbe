"""The Jetson backend against fake L4T sysfs trees (fakes only at the file boundary)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.fakes.sysfs import (
    MHZ,
    NANO_FREQUENCIES_HZ,
    FakeBoard,
    FakeDevfreqKernel,
    add_ina3221_hwmon,
    make_nano_2gb_no_sensor,
    make_nano_l4t32,
    make_orin_nano_l4t36,
    make_tx2nx_l4t32,
)
from wattcap.devices import jetson
from wattcap.devices.base import PowerReading
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotFoundError,
    DeviceOutOfMemoryError,
    DevicePermissionError,
    FrequencyNotFollowedError,
    SensorMissingError,
)
from wattcap.devices.jetson import (
    INA3221_PERIOD_S,
    MEMORY_RESERVED_BYTES,
    JetsonDevice,
    discover_jetson,
    model_to_name,
    read_nvpmodel,
)
from wattcap.devices.probe import probe

BUILDERS = {
    "nano-l4t32": make_nano_l4t32,
    "tx2nx-l4t32": make_tx2nx_l4t32,
    "orin-nano-l4t36": make_orin_nano_l4t36,
    "nano-2gb": make_nano_2gb_no_sensor,
}


@pytest.fixture(params=sorted(BUILDERS))
def board(request: pytest.FixtureRequest, tmp_path: Path) -> FakeBoard:
    return BUILDERS[request.param](tmp_path)


@pytest.fixture
def nano(tmp_path: Path) -> FakeBoard:
    return make_nano_l4t32(tmp_path)


# -- discovery -------------------------------------------------------------------------------


def test_discovery_on_every_layout(board: FakeBoard) -> None:
    device = discover_jetson(board.root)
    assert device is not None
    # Found through /sys/class/devfreq/<node>, a symlink, and resolved to the real node.
    assert (board.root / "sys/class/devfreq" / board.devfreq.name).is_symlink()
    assert device.devfreq_path == board.devfreq
    assert device.name == board.name
    assert device.model == board.model
    assert device.power_mode == board.power_mode
    assert device.frequencies_hz() == board.expected_hz
    assert device.frequencies_hz() == sorted(device.frequencies_hz())


def test_orin_discovery_skips_other_devfreq_nodes(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    # 15340000.vic sorts before 17000000.gpu, so taking the first node would be wrong.
    assert sorted(p.name for p in (tmp_path / "sys/class/devfreq").iterdir())[0] == "15340000.vic"
    device = JetsonDevice(tmp_path)
    assert device.devfreq_path.name == "17000000.gpu"
    assert device.devfreq_path == board.devfreq


def test_discovery_falls_back_to_of_node_basename(tmp_path: Path) -> None:
    board = make_tx2nx_l4t32(tmp_path)
    (tmp_path / "sys/firmware/devicetree/base/gp10b@17000000/name").unlink()
    device = JetsonDevice(tmp_path)
    assert device.devfreq_path == board.devfreq


def test_no_gpu_node_means_not_found(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    (tmp_path / "sys/class/devfreq" / board.devfreq.name).unlink()  # only the vic node is left
    assert discover_jetson(tmp_path) is None
    with pytest.raises(DeviceNotFoundError, match="no Jetson GPU devfreq node"):
        JetsonDevice(tmp_path)
    assert discover_jetson(tmp_path / "nowhere") is None


@pytest.mark.parametrize("hwmon_index", [0, 3, 7])
def test_hwmon_index_varies(tmp_path: Path, hwmon_index: int) -> None:
    make_orin_nano_l4t36(tmp_path, hwmon_index=hwmon_index)
    device = JetsonDevice(tmp_path)
    assert [rail.name for rail in device.rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert device.rails[0].directory.name == f"hwmon{hwmon_index}"
    assert device.read_power_w() == pytest.approx(5.048 * 1.052)


def test_power_mode_caps_the_frequency_list(tmp_path: Path) -> None:
    nano_5w = make_nano_l4t32(tmp_path / "nano", mode_id=1)
    device = JetsonDevice(nano_5w.root)
    assert device.power_mode == "5W"
    # nvpmodel's 640 MHz is not in the table; the kernel capped max_freq at 614.4 MHz.
    assert device.frequencies_hz()[-1] == 614_400_000
    assert len(device.frequencies_hz()) == 8
    orin_7w = make_orin_nano_l4t36(tmp_path / "orin", mode_id=1)
    assert JetsonDevice(orin_7w.root).frequencies_hz() == [306 * MHZ, 408 * MHZ]


def test_leftover_lock_does_not_shrink_the_list(nano: FakeBoard) -> None:
    for attribute in ("min_freq", "max_freq"):
        (nano.devfreq / attribute).write_text("230400000\n")
    device = JetsonDevice(nano.root)
    assert device.frequencies_hz() == NANO_FREQUENCIES_HZ
    assert any("locked at 230.4 MHz" in note for note in device.notes)


# -- nvpmodel, board files -------------------------------------------------------------------


def test_nvpmodel_status_and_default(nano: FakeBoard) -> None:
    modes, active = read_nvpmodel(nano.root)
    assert {m.name for m in modes.values()} == {"MAXN", "5W"}
    assert modes[0].gpu_max_hz is None  # -1: no cap
    assert modes[1].gpu_max_hz == 640_000_000
    assert active == 0
    (nano.root / "var/lib/nvpmodel/status").write_text("pmode:0001 fmode:quiet\n")
    assert JetsonDevice(nano.root).power_mode == "5W"
    # Without a status file the mode is the configured default.
    (nano.root / "var/lib/nvpmodel/status").unlink()
    assert read_nvpmodel(nano.root)[1] == 0
    (nano.root / "etc/nvpmodel.conf").unlink()
    assert JetsonDevice(nano.root).power_mode is None


def test_unreadable_nvpmodel_line_means_uncapped(nano: FakeBoard) -> None:
    conf = nano.root / "etc/nvpmodel.conf"
    conf.write_text(conf.read_text().replace("GPU MAX_FREQ 640000000", "GPU MAX_FREQ fast"))
    modes, _ = read_nvpmodel(nano.root)
    assert modes[1].name == "5W" and modes[1].gpu_max_hz is None


def test_devfreq_node_without_frequency_table(nano: FakeBoard) -> None:
    (nano.devfreq / "available_frequencies").unlink()
    with pytest.raises(DeviceError, match="cannot read the GPU devfreq node"):
        JetsonDevice(nano.root)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("NVIDIA Jetson Nano Developer Kit", "jetson-nano"),
        ("NVIDIA Jetson Nano 2GB Developer Kit", "jetson-nano-2gb"),
        ("NVIDIA Jetson TX2 NX Developer Kit", "jetson-tx2nx"),
        ("quill", "jetson"),
        ("NVIDIA Jetson Xavier NX Developer Kit", "jetson-xavier-nx"),
        ("NVIDIA Jetson Orin Nano Developer Kit", "jetson-orin-nano"),
        ("NVIDIA Jetson AGX Orin Developer Kit", "jetson-agx-orin"),
    ],
)
def test_model_names(model: str, name: str) -> None:
    assert model_to_name(model) == name


def test_memory_is_memtotal_minus_reservation(nano: FakeBoard) -> None:
    assert JetsonDevice(nano.root).memory_bytes() == 4_059_712 * 1024 - MEMORY_RESERVED_BYTES


def test_free_memory_is_memavailable_less_the_context_to_come(nano: FakeBoard) -> None:
    from wattcap.devices.jetson import CUDA_CONTEXT_BYTES

    # the fake's MemAvailable is two thirds of MemTotal; no CUDA context in this process yet
    assert (JetsonDevice(nano.root).free_memory_bytes()
            == 4_059_712 * 2 // 3 * 1024 - CUDA_CONTEXT_BYTES)


# -- frequency control -----------------------------------------------------------------------


def test_going_down_writes_min_first_and_up_writes_max_first(
    nano: FakeBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(nano.root)
    assert device.set_frequency_hz(153_600_000) == 153_600_000
    assert kernel.writes == [("min_freq", 153_600_000), ("max_freq", 153_600_000)]
    kernel.writes.clear()
    assert device.set_frequency_hz(768_000_000) == 768_000_000
    assert kernel.writes == [("max_freq", 768_000_000), ("min_freq", 768_000_000)]
    assert nano.read("min_freq") == nano.read("max_freq") == "768000000"
    assert device.current_frequency_hz() == 768_000_000


def test_any_sweep_keeps_min_below_max(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(nano.root)
    order = [921_600_000, 76_800_000, 614_400_000, 307_200_000, 844_800_000, 76_800_000]
    for frequency_hz in order:
        # The fake kernel raises EINVAL on a write that makes min > max.
        assert device.set_frequency_hz(frequency_hz) == frequency_hz
    assert len(kernel.writes) == 2 * len(order)


def test_fake_kernel_rejects_min_above_max(nano: FakeBoard) -> None:
    kernel = FakeDevfreqKernel()
    kernel.write(nano.devfreq / "max_freq", "230400000")
    with pytest.raises(OSError) as raised:
        kernel.write(nano.devfreq / "min_freq", "460800000")
    assert raised.value.errno == errno.EINVAL


def test_kernel_refusal_is_a_device_error(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDevfreqKernel(deny_errno=errno.EINVAL).install(monkeypatch)
    with pytest.raises(DeviceError, match="refused") as raised:
        JetsonDevice(nano.root).set_frequency_hz(460_800_000)
    assert not isinstance(raised.value, DevicePermissionError)


def test_readback_mismatch_raises(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDevfreqKernel(cap_hz=614_400_000).install(monkeypatch)  # thermal cap
    device = JetsonDevice(nano.root)
    assert device.set_frequency_hz(537_600_000) == 537_600_000
    with pytest.raises(FrequencyNotFollowedError) as raised:
        device.set_frequency_hz(921_600_000)
    message = str(raised.value)
    assert "requested 921.6 MHz" in message and "614.4 MHz" in message
    assert "nvpmodel" in message and "thermal" in message


def test_unknown_frequency_is_rejected(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeDevfreqKernel().install(monkeypatch)
    with pytest.raises(ValueError, match="not an available GPU frequency"):
        JetsonDevice(nano.root).set_frequency_hz(500_000_000)
    assert kernel.writes == []


def test_restore_puts_originals_back(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(nano.root)
    device.set_frequency_hz(230_400_000)
    device.set_frequency_hz(691_200_000)
    (nano.devfreq / "governor").write_text("userspace\n")  # changed behind our back
    kernel.writes.clear()
    device.restore()
    assert nano.read("min_freq") == "76800000"
    assert nano.read("max_freq") == "921600000"
    assert nano.read("governor") == "nvhost_podgov"
    # From a lock at 691.2 MHz: lower min first, then raise max (both keep min <= max).
    assert kernel.writes == [
        ("min_freq", 76_800_000),
        ("max_freq", 921_600_000),
        ("governor", "nvhost_podgov"),
    ]
    kernel.writes.clear()
    device.restore()
    assert kernel.writes == []


def test_context_manager_restores(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDevfreqKernel().install(monkeypatch)
    with JetsonDevice(nano.root) as device:
        device.set_frequency_hz(384_000_000)
        assert nano.read("max_freq") == "384000000"
    assert (nano.read("min_freq"), nano.read("max_freq")) == ("76800000", "921600000")


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS])
def test_permission_denied_explains_the_fix(
    nano: FakeBoard, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    kernel = FakeDevfreqKernel(deny_errno=code).install(monkeypatch)
    with pytest.raises(DevicePermissionError) as raised:
        with JetsonDevice(nano.root) as device:
            device.set_frequency_hz(460_800_000)
    message = str(raised.value)
    assert "sudo" in message
    assert 'SUBSYSTEM=="devfreq", KERNEL=="57000000.gpu"' in message
    assert "NOPASSWD" in message and "--dry-run" in message
    assert kernel.writes == []


def _write_as_nobody(root: Path) -> str:
    """Try the clock write in a forked child that dropped root for "nobody"; what it got."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe and never return into pytest
        outcome = "crashed"
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            # nobody's own state folder (as its ~/.cache would be), not root's test folder
            os.environ["WATTCAP_STATE_DIR"] = tempfile.mkdtemp(prefix="wattcap-nobody-")
            try:
                JetsonDevice(root).set_frequency_hz(460_800_000)
                outcome = "written"
            except DevicePermissionError as err:
                outcome = f"refused: {err} {err.hint}"
        except BaseException as err:  # noqa: BLE001 - reported to the parent, which asserts
            outcome = f"crashed: {type(err).__name__}: {err}"
        finally:
            os.write(write_end, outcome.encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    return outcome


def test_read_only_files_without_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        nano = make_nano_l4t32(tmp_path)
        for attribute in ("min_freq", "max_freq", "governor"):
            (nano.devfreq / attribute).chmod(0o444)
        with pytest.raises(DevicePermissionError, match="udev"):
            JetsonDevice(nano.root).set_frequency_hz(460_800_000)
        return
    # Root ignores file modes: the same write, made by a child that became "nobody", on a tree
    # it can read but not write (pytest's tmp_path is private to root, hence mkdtemp + 0o755).
    root = Path(tempfile.mkdtemp(prefix="wattcap-ro-"))
    try:
        nano = make_nano_l4t32(root)
        for path in [root, *root.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
            elif path.is_file() and not path.is_symlink():
                path.chmod(0o444)
        before = nano.snapshot()
        outcome = _write_as_nobody(nano.root)
        assert outcome.startswith("refused:"), outcome
        assert "udev" in outcome and "sudo" in outcome
        assert nano.snapshot() == before
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_dry_run_writes_nothing(nano: FakeBoard, monkeypatch: pytest.MonkeyPatch) -> None:
    before = nano.snapshot()
    device = JetsonDevice(nano.root, dry_run=True)
    assert device.set_frequency_hz(153_600_000) == 153_600_000
    assert device.set_frequency_hz(921_600_000) == 921_600_000
    device.restore()
    assert nano.snapshot() == before
    assert device.planned_writes[:2] == [
        (nano.devfreq / "min_freq", 153_600_000),
        (nano.devfreq / "max_freq", 153_600_000),
    ]
    kernel = FakeDevfreqKernel().install(monkeypatch)
    JetsonDevice(nano.root, dry_run=True).set_frequency_hz(460_800_000)
    assert kernel.writes == []


# -- power -----------------------------------------------------------------------------------


def test_iio_input_rail_is_device_power(nano: FakeBoard) -> None:
    device = JetsonDevice(nano.root)
    assert device.sensor_rail == "POM_5V_IN"
    assert [r.name for r in device.rails] == ["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"]
    assert device.read_power_w() == pytest.approx(1.997)  # in_power0_input, mW
    nano.set_rail("POM_5V_IN", 5_000, 1_800)
    assert device.read_power_w() == pytest.approx(9.0)
    assert device.sensor_period_s == INA3221_PERIOD_S


def test_tx2nx_uses_vdd_in(tmp_path: Path) -> None:
    board = make_tx2nx_l4t32(tmp_path)
    device = JetsonDevice(tmp_path)
    assert device.sensor_rail == "VDD_IN"
    mv, ma = board.rails["VDD_IN"]
    assert device.read_power_w() == pytest.approx(mv * ma // 1000 / 1000)


def test_hwmon_power_is_voltage_times_current(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    device = JetsonDevice(tmp_path)
    assert device.sensor_rail == "VDD_IN"
    assert not list(device.rails[0].directory.glob("*power*"))  # no power file on hwmon
    board.set_rail("VDD_IN", 5_000, 2_000)
    assert device.read_power_w() == pytest.approx(10.0)
    board.set_rail("VDD_IN", 4_800, 2_000)  # only the voltage moved
    assert device.read_power_w() == pytest.approx(9.6)


def test_without_input_rail_power_is_the_sum_and_nc_is_skipped(tmp_path: Path) -> None:
    make_orin_nano_l4t36(tmp_path, input_rail=False)
    device = JetsonDevice(tmp_path)
    assert "NC" not in [r.name for r in device.rails]
    assert device.sensor_rail == "sum(VDD_CPU_GPU_CV,VDD_SOC)"
    assert device.read_power_w() == pytest.approx(5.032 * 0.240 + 5.032 * 0.296)


def test_sum_channel_in7_is_never_a_rail(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    hwmon = board.rail_files["VDD_IN"][1]
    (hwmon / "curr7_input").write_text("1588\n")  # even if a driver exposed a current for it
    names = [r.name for r in JetsonDevice(tmp_path).rails]
    assert names == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]


def test_second_sensor_rails_are_found(tmp_path: Path) -> None:
    make_orin_nano_l4t36(tmp_path, input_rail=False)
    add_ina3221_hwmon(
        tmp_path, "1-0041", 4, [("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 5_000, 100), ("NC", 0, 0)]
    )
    device = JetsonDevice(tmp_path)
    assert [r.name for r in device.rails] == [
        "VDD_CPU_GPU_CV",
        "VDD_SOC",
        "VDDQ_VDD2_1V8AO",
    ]
    assert device.sensor_rail == "sum(VDD_CPU_GPU_CV,VDD_SOC,VDDQ_VDD2_1V8AO)"


def test_hwmon_update_interval_sets_the_period(tmp_path: Path) -> None:
    board = make_orin_nano_l4t36(tmp_path)
    (board.rail_files["VDD_IN"][1] / "update_interval").write_text("140\n")
    assert JetsonDevice(tmp_path).sensor_period_s == pytest.approx(0.140)


def test_no_sensor_is_said_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_nano_2gb_no_sensor(tmp_path)
    device = JetsonDevice(tmp_path)
    assert device.sensor_rail == "none"
    with pytest.raises(SensorMissingError) as raised:
        device.read_power_w()
    message = str(raised.value)
    assert "no INA3221 power sensor" in message and "Nano 2 GB" in message
    assert "frequency control still works" in message
    FakeDevfreqKernel().install(monkeypatch)
    assert device.set_frequency_hz(307_200_000) == 307_200_000


def test_sensor_ticks_poll_the_rail(nano: FakeBoard) -> None:
    device = JetsonDevice(nano.root)
    readings: list[PowerReading] = []
    with device.sensor_ticks(readings.append):
        time.sleep(0.16)
    assert len(readings) >= 2
    assert all(r.rail == "POM_5V_IN" and r.power_w == pytest.approx(1.997) for r in readings)
    assert [r.time_s for r in readings] == sorted(r.time_s for r in readings)


# -- time and work ---------------------------------------------------------------------------


def test_execute_times_the_real_step(nano: FakeBoard) -> None:
    device = JetsonDevice(nano.root)
    calls = []

    def step() -> None:
        calls.append(torch.ones(8).sum().item())
        time.sleep(0.02)

    elapsed_s = device.execute(step, SimpleNamespace(batch_size=8))
    assert calls == [8.0]
    assert 0.02 <= elapsed_s < 1.0
    assert device.now_s() > 0


@pytest.mark.parametrize(
    "error",
    [torch.cuda.OutOfMemoryError("CUDA out of memory."), RuntimeError("NVML: out of memory")],
)
def test_execute_maps_out_of_memory(nano: FakeBoard, error: Exception) -> None:
    def step() -> None:
        raise error

    with pytest.raises(DeviceOutOfMemoryError, match="batch size 64"):
        JetsonDevice(nano.root).execute(step, SimpleNamespace(batch_size=64))


def test_execute_lets_other_errors_through(nano: FakeBoard) -> None:
    def step() -> None:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch") as raised:
        JetsonDevice(nano.root).execute(step, SimpleNamespace(batch_size=4))
    assert not isinstance(raised.value, DeviceError)


def test_info_names_mode_and_rails(nano: FakeBoard) -> None:
    info = JetsonDevice(nano.root).info()
    assert info.kind == "jetson" and info.name == "jetson-nano"
    assert info.power_mode == "MAXN"
    assert info.sensor_rail == "POM_5V_IN"
    assert any("POM_5V_GPU" in note for note in info.notes)


# -- probe -----------------------------------------------------------------------------------


def test_probe_reports_jetson_findings(nano: FakeBoard) -> None:
    from tests.fakes.fake_pynvml import FakeNvml

    report = probe(nano.root, pynvml_module=FakeNvml(library_missing=True))
    found = "\n".join(report.found)
    assert "/sys/devices/57000000.gpu/devfreq/57000000.gpu: 12 frequencies 76.8-921.6" in found
    assert "power mode MAXN" in found
    assert "device power = POM_5V_IN" in found
    assert "GPU clock files writable" in found
    assert "NVML: library not found (no NVIDIA driver)" in report.missing


def test_probe_reports_missing_sensor_and_write_access(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.fake_pynvml import FakeNvml

    board = make_nano_2gb_no_sensor(tmp_path)
    real_access = os.access

    def access(path: object, mode: int) -> bool:
        # Tests run as root, where os.access always grants writes: play an unprivileged user.
        if mode == os.W_OK and Path(str(path)).parent == board.devfreq:
            return False
        return real_access(path, mode)

    monkeypatch.setattr(os, "access", access)
    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    missing = "\n".join(report.missing)
    assert "no readable INA3221 or INA238 power sensor" in missing
    assert "GPU clock files not writable (min_freq, max_freq" in missing
    assert "udev" in missing
    assert str(report).startswith("+ Jetson jetson-nano-2gb")


def test_probe_without_jetson(tmp_path: Path) -> None:
    from tests.fakes.fake_pynvml import FakeNvml

    report = probe(tmp_path, pynvml_module=FakeNvml(library_missing=True))
    assert report.found == []
    assert "no Jetson GPU devfreq node under /sys/class/devfreq" in report.missing


def test_write_sysfs_is_the_only_writer(nano: FakeBoard) -> None:
    # The real writer, used when no fake kernel is installed, writes one value in place.
    jetson.write_sysfs(nano.devfreq / "max_freq", "844800000")
    assert nano.read("max_freq") == "844800000"


def test_a_point_whose_board_throttles_mid_window_is_named(
    nano: FakeBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A locked Jetson clock reads back at the set, then a thermal limit pulls devfreq's
    cur_freq down under load: the point's readings report it, and the profile names the point
    (its time and power are of a lower clock than its label)."""
    from wattcap.core.profile import ProfileTable
    from wattcap.measure.profiling import Profiler

    FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(nano.root)
    top_hz, throttled_hz = NANO_FREQUENCIES_HZ[-1], NANO_FREQUENCIES_HZ[-4]
    throttle_at_s = [float("inf")]

    def step() -> None:
        if time.monotonic() >= throttle_at_s[0]:
            throttle_at_s[0] = float("inf")
            # the thermal limit, written whole (a sysfs read never sees half a write)
            staged = nano.devfreq / "cur_freq.new"
            staged.write_text(str(throttled_hz))
            os.replace(staged, nano.devfreq / "cur_freq")
        time.sleep(0.002)

    profiler = Profiler(device, "digits-cnn", batch_sizes=(4,), min_readings=8,
                        step_factory=lambda b, d: step)
    held = profiler.measure(4, top_hz)
    throttle_at_s[0] = time.monotonic() + 0.15  # 0.05 s sensor: 2-3 readings held, then not
    slipped = profiler.measure(4, top_hz)
    assert held.observed_frequency_hz is not None and slipped.observed_frequency_hz is not None
    assert held.observed_frequency_hz.min_hz == top_hz == held.observed_frequency_hz.max_hz
    assert slipped.observed_frequency_hz.min_hz == throttled_hz
    assert slipped.observed_frequency_hz.readings == slipped.readings >= 8
    table = ProfileTable(device=device.name, device_kind="jetson", sensor_rail="POM_5V_IN",
                         sensor_period_s=device.sensor_period_s, model="digits-cnn",
                         input_shape=[1, 8, 8], batch_sizes=[4], knob_values=[top_hz],
                         max_batch_size=4, mode="exhaustive", points=[slipped],
                         points_measured=1, profiling_device_s=1.0)
    assert table.clock_not_held() == [slipped]
    note = table.clock_not_held_note(chosen=(4, top_hz), chosen_by="wattcap")
    assert note is not None and f"b=4 at {top_hz / MHZ:g} MHz read" in note
    assert "wattcap's choice is one of them" in note
    assert table.model_copy(update={"points": [held]}).clock_not_held_note() is None


def test_a_hot_thermal_zone_is_named_as_the_cause(nano: FakeBoard,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A board whose GPU zone sits past its passive trip point: the clock it does not follow
    is blamed on heat, with the zone's own numbers (the kernel's thermal sysfs ABI)."""
    zone = nano.root / "sys" / "class" / "thermal" / "thermal_zone1"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("GPU-therm\n")
    (zone / "temp").write_text("88500\n")
    (zone / "trip_point_0_type").write_text("active\n")  # a fan: not a throttling trip
    (zone / "trip_point_0_temp").write_text("50000\n")
    (zone / "trip_point_1_type").write_text("passive\n")
    (zone / "trip_point_1_temp").write_text("85000\n")
    FakeDevfreqKernel(cap_hz=614_400_000).install(monkeypatch)
    device = JetsonDevice(nano.root)
    with pytest.raises(FrequencyNotFollowedError) as raised:
        device.set_frequency_hz(921_600_000)
    err = raised.value
    assert err.cause == "thermal" and err.running_hz == 614_400_000
    assert err.cause_detail == "GPU-therm 88.5 °C, throttles at 85.0 °C"
    (zone / "temp").write_text("60000\n")  # cool: the power mode is the likely cause
    with pytest.raises(FrequencyNotFollowedError) as raised:
        device.set_frequency_hz(921_600_000)
    assert raised.value.cause in ("power mode", "unknown")
    device.restore()
