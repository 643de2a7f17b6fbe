"""`wattcap devices --probe`, `wattcap profile --dry-run`, and the read-only NVML bench script,
on this machine (no Jetson, no NVIDIA GPU), on a fake Jetson Nano tree and on a fake NVML GPU."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from tests.bench_scripts import load_bench_script
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from tests.fakes.sysfs import make_nano_l4t32
from wattcap.cli import app
from wattcap.devices import DeviceError, get_device, list_specs
from wattcap.devices import probe as probe_module
from wattcap.devices.nvml import list_nvml_devices

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def use_nvml(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> None:
    """Make the probe see `module` as pynvml."""
    monkeypatch.setattr(probe_module, "import_pynvml", lambda: module)


def probe_output(sysfs_root: Path) -> str:
    result = runner.invoke(app, ["devices", "--probe", "--sysfs-root", str(sysfs_root)])
    assert result.exit_code == 0, result.output
    return result.output


# -- devices --probe -----------------------------------------------------------------------------


def test_probe_without_hardware_says_so_and_lists_emulated_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_nvml(monkeypatch, FakeNvml(library_missing=True))
    output = probe_output(tmp_path)
    assert "no Jetson or NVIDIA GPU is present on this machine" in output
    assert "no Jetson GPU devfreq node" in output
    assert "NVML: library not found (no NVIDIA driver)" in output
    for name in list_specs():
        assert f"emulated:{name}" in output


@pytest.mark.skipif(bool(list_nvml_devices()), reason="this machine has an NVIDIA GPU")
def test_probe_on_this_machine(tmp_path: Path) -> None:
    """The real pynvml (or its absence) on this machine, which has no Jetson and no GPU."""
    output = probe_output(tmp_path)
    assert "no Jetson" in output
    assert "NVIDIA" in output
    assert "emulated:jetson-nano" in output


def test_probe_reports_a_jetson_nano(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_nano_l4t32(tmp_path)
    use_nvml(monkeypatch, FakeNvml(library_missing=True))
    output = probe_output(tmp_path)
    assert "Jetson jetson-nano" in output
    assert "GPU devfreq node /sys/devices/57000000.gpu/devfreq/57000000.gpu" in output
    assert "12 frequencies" in output
    assert "power mode MAXN" in output
    assert "POM_5V_IN, POM_5V_GPU, POM_5V_CPU" in output
    assert "no Jetson or NVIDIA GPU is present" not in output


def test_probe_reads_the_tree_under_wattcap_sysfs_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --sysfs-root: the probe reads under WATTCAP_SYSFS_ROOT, as `--device jetson` does."""
    board = make_nano_l4t32(tmp_path / "host")
    use_nvml(monkeypatch, FakeNvml(library_missing=True))
    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(board.root))
    result = runner.invoke(app, ["devices", "--probe"])
    assert result.exit_code == 0, result.output
    assert "Jetson jetson-nano" in result.output
    assert "GPU devfreq node /sys/devices/57000000.gpu/devfreq/57000000.gpu" in result.output
    assert "no Jetson GPU devfreq node" not in result.output
    assert get_device("jetson", dry_run=True).name == "jetson-nano"  # the same root, same board


def test_probe_sysfs_root_option_beats_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_nano_l4t32(tmp_path / "host")
    use_nvml(monkeypatch, FakeNvml(library_missing=True))
    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(tmp_path / "host"))
    (tmp_path / "empty").mkdir()
    output = probe_output(tmp_path / "empty")
    assert "no Jetson GPU devfreq node" in output
    assert "Jetson jetson-nano" not in output


def test_probe_reports_an_nvidia_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([FakeGpu()])
    use_nvml(monkeypatch, fake)
    output = probe_output(tmp_path)
    assert "nvml:0 NVIDIA H100 80GB HBM3" in output
    assert "energy counter" in output
    assert "no Jetson or NVIDIA GPU is present" not in output
    assert fake.setter_calls == []  # the probe only reads


# -- profile --dry-run ---------------------------------------------------------------------------


def test_profile_dry_run_reads_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = runner.invoke(app, ["profile", "--model", "digits32-cnn", "--power-cap", "6",
                                 "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "12 GPU frequencies" in result.output
    assert "batch sizes that fit [4, 8, 16, 32, 64, 128]" in result.output
    assert "dry run: no setting changed, no file written" in result.output
    assert "rounds" not in result.output  # one round on an emulated device
    assert not out.exists()
    rounds = runner.invoke(app, ["profile", "--model", "digits32-cnn", "--power-cap", "6",
                                 "--rounds", "2", "--out", str(out), "--dry-run"],
                           env={"COLUMNS": "200"})
    assert rounds.exit_code == 0, rounds.output
    assert "in 2 rounds" in " ".join(rounds.output.split())
    assert not out.exists()


def test_profile_needs_out_unless_refreshing_or_dry_run() -> None:
    result = runner.invoke(app, ["profile", "--model", "digits-cnn"])
    assert result.exit_code == 2
    assert "--out is required" in result.output


def test_drift_is_refused_for_real_devices(tmp_path: Path) -> None:
    result = runner.invoke(app, ["profile", "--device", "jetson", "--drift", "0,0.8,1.15",
                                 "--out", str(tmp_path / "p.json")])
    assert result.exit_code == 2
    assert "--drift only applies to emulated devices" in result.output


# -- bench/nvml_probe.py -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvml_probe() -> ModuleType:
    return load_bench_script("nvml_probe")


def test_bench_probe_without_a_driver_exits_cleanly(
    nvml_probe: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert nvml_probe.main([], pynvml_module=FakeNvml(library_missing=True)) == 0
    assert "no NVIDIA GPU usable through NVML on this machine" in capsys.readouterr().out


@pytest.mark.skipif(bool(list_nvml_devices()), reason="this machine has an NVIDIA GPU")
def test_bench_probe_runs_here(nvml_probe: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert nvml_probe.main([]) == 0
    assert "no NVIDIA GPU" in capsys.readouterr().out


def test_bench_probe_profiles_unlocked_without_setting_anything(
    nvml_probe: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNvml([FakeGpu(clock_mhz=1755)])  # idle now: the live clock reads 345 MHz
    code = nvml_probe.main(["--model", "digits-cnn", "--batch-sizes", "8", "--min-readings", "2",
                            "--allow-cpu-step"], pynvml_module=fake)
    out = capsys.readouterr().out
    assert code == 0, out
    assert fake.setter_calls == []
    assert "110 clocks, 345 ... 1980 MHz" in out
    # the GPU idles at 61 W: both sensors say so; the energy counter runs on from its start
    assert "instant power: 61.0 W" in out and "average power (1 s): 61.0 W" in out
    energy_j = float(out.split("energy counter: ")[1].split(" J")[0])
    assert 123_456.7 < energy_j < 123_456.8 + 61.0 * 60
    assert "live graphics clock now: 345 MHz" in out and "up to 1980 MHz" in out
    row = next(line for line in out.splitlines() if line.split()[:1] == ["8"])
    # the step ran on the CPU (no CUDA here): the GPU idled, and the observed clock says so
    assert row.split()[1] == "345-345"
    assert fake.init_count == 0  # NVML shut down again


def test_read_only_device_refuses_any_other_clock(nvml_probe: ModuleType) -> None:
    fake = FakeNvml([FakeGpu(clock_mhz=1755)])
    device = nvml_probe.ReadOnlyNvmlDevice(0, pynvml_module=fake)
    try:
        # never the idle clock read at open: the unlocked GPU, labelled with its top clock
        assert device.frequencies_hz() == [1_980_000_000]
        assert device.set_frequency_hz(1_980_000_000) == 1_980_000_000
        with pytest.raises(DeviceError, match="read-only probe"):
            device.set_frequency_hz(1_755_000_000)
        device.restore()
    finally:
        device.close()
    assert fake.setter_calls == []
