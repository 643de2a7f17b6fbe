"""Read-only probe of a real NVIDIA GPU through wattcap's NVML backend.

Lists the supported graphics clocks, reads power (instant and NVML's 1 s average) and the
energy counter, then runs wattcap's Profiler over a few batch sizes *at whatever clock the GPU
runs when left alone* (nothing locked: the driver picks the clock), printing the clock it
observed, peak and average power, time per sample and the energy the hardware counter
saw next to the energy the power readings integrate to.

It never changes a setting: the device is opened in dry-run mode, and the class below pins the
frequency list to one entry, the unlocked GPU (labelled with the top supported clock, which the
driver boosts toward under load; the live clock read at open is the idle clock and says nothing
of what a step runs at), and refuses any other, so no NVML setter
(nvmlDeviceSet*, nvmlDeviceReset*) can be reached. Without an NVIDIA driver or GPU it says so
and exits 0.

    python bench/nvml_probe.py                      # resnet18, batch sizes 4..64
    python bench/nvml_probe.py --model mobilenetv2 --batch-sizes 8,32
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from wattcap.devices.base import PowerReading
from wattcap.devices.errors import DeviceError, DeviceOutOfMemoryError
from wattcap.devices.nvml import NvmlDevice
from wattcap.measure.profiling import Profiler


class ReadOnlyNvmlDevice(NvmlDevice):
    """An NvmlDevice that only reads: its one "available" frequency stands for the unlocked GPU
    (the top supported clock, or the live clock where NVML lists none), and asking for any
    other raises instead of locking clocks."""

    def __init__(self, index: int = 0, pynvml_module: ModuleType | None = None) -> None:
        super().__init__(index, dry_run=True, pynvml_module=pynvml_module)
        self.supported_hz = super().frequencies_hz()
        self.pinned_hz = max(self.supported_hz) if self.supported_hz else \
            self.current_frequency_hz()
        #: --allow-cpu-step without CUDA in torch: the step runs on the CPU (tests only)
        self.cpu_step = False

    @property
    def torch_device(self) -> str:
        """The GPU's CUDA device, or the CPU for a test without CUDA."""
        return "cpu" if self.cpu_step else super().torch_device

    def frequencies_hz(self) -> list[int]:
        """Only the clock in effect: the profiler must not try others."""
        return [self.pinned_hz]

    def set_frequency_hz(self, frequency_hz: int) -> int:
        """Accept the pinned clock (changing nothing), refuse every other one."""
        if frequency_hz != self.pinned_hz:
            raise DeviceError(
                f"read-only probe: refusing to change the clock to {frequency_hz / 1e6:g} MHz",
                hint="this script never changes GPU settings; use `wattcap profile` for that",
            )
        return frequency_hz

    def restore(self) -> None:
        """Nothing was changed, so nothing to put back (and no NVML reset call)."""


def _clock_list(frequencies_hz: list[int]) -> str:
    mhz = [f // 1_000_000 for f in frequencies_hz]
    if not mhz:
        return "none reported"
    if len(mhz) <= 8:
        return ", ".join(str(m) for m in mhz) + " MHz"
    return f"{len(mhz)} clocks, {mhz[0]} ... {mhz[-1]} MHz (e.g. {', '.join(map(str, mhz[-4:]))})"


def _print_readout(device: ReadOnlyNvmlDevice) -> None:
    nvml = device._nvml
    print(f"GPU {device.index}: {device.gpu_name}")
    print(f"  supported graphics clocks: {_clock_list(device.supported_hz)}")
    print(f"  live graphics clock now: {device.current_frequency_hz() / 1e6:g} MHz (no work "
          "running: the idle clock, or the last load's until the driver lowers it)")
    limit_w = device.power_limit_w()
    print(f"  power limit: {limit_w:g} W" if limit_w is not None else "  power limit: unknown")
    instant_mw = device._read_instant_power_mw()
    print(f"  instant power: {instant_mw / 1e3:.1f} W" if instant_mw is not None
          else "  instant power: not supported")
    try:
        print(f"  average power (1 s): {nvml.nvmlDeviceGetPowerUsage(device._handle) / 1e3:.1f} W")
    except nvml.NVMLError as err:
        print(f"  average power: unreadable ({err})")
    energy_j = device.energy_counter_j()
    print(f"  energy counter: {energy_j:.1f} J since the driver loaded" if energy_j is not None
          else "  energy counter: not supported")
    print(f"  sensor used by wattcap: {device.sensor_rail}, every "
          f"{device.sensor_period_s * 1e3:.0f} ms; memory usable "
          f"{device.memory_bytes() / 2**30:.1f} GiB")


def _profile(device: ReadOnlyNvmlDevice, model: str, batch_sizes: list[int],
             min_readings: int) -> None:
    clocks_seen: list[int] = []

    def watch_clock(reading: PowerReading) -> None:
        # Unlocked, the clock moves with load and temperature: report what it really was.
        if reading.clock_hz is not None:
            clocks_seen.append(reading.clock_hz)

    profiler = Profiler(device, model, batch_sizes=tuple(batch_sizes), min_readings=min_readings)
    print(f"\n{model} with the clock unlocked (the driver's choice, up to "
          f"{device.pinned_hz / 1e6:g} MHz; min-max observed during each window):")
    header = (f"{'batch':>5} {'clock MHz':>11} {'peak W':>7} {'avg W':>7} {'ms/sample':>10} "
              f"{'samples/s':>10} {'J/sample ctr':>12} {'J/sample avg':>12}")
    print(header)
    for b in batch_sizes:
        try:
            # A first window builds the step and warms it up (building, cuDNN autotuning and
            # the adaptive warm-up would dominate the counter); the second is the one shown.
            profiler.measure(b, device.pinned_hz)
            clocks_seen.clear()
            before_j = device.energy_counter_j()
            with device.sensor_ticks(watch_clock):
                point = profiler.measure(b, device.pinned_hz)
            after_j = device.energy_counter_j()
        except DeviceOutOfMemoryError:
            print(f"{b:>5} does not fit in GPU memory")
            continue
        clocks = (f"{min(clocks_seen) // 1_000_000}-{max(clocks_seen) // 1_000_000}"
                  if clocks_seen else "?")
        # The counter spans the window's measured steps and the host's gaps between them
        # (launches, the loop); readings × step time cover the steps alone: a counter well
        # above the readings says the gaps cost energy that time per sample does not show.
        samples = point.steps * b
        counter = (f"{(after_j - before_j) / samples:.4f}"
                   if before_j is not None and after_j is not None else "n/a")
        print(f"{b:>5} {clocks:>11} {point.peak_power_w:>7.1f} {point.avg_power_w:>7.1f} "
              f"{point.seconds_per_sample * 1e3:>10.3f} {1 / point.seconds_per_sample:>10.0f} "
              f"{counter:>12} {point.avg_power_w * point.seconds_per_sample:>12.4f}")


def main(argv: list[str] | None = None, pynvml_module: ModuleType | None = None) -> int:
    """Probe GPU `--index`; returns the exit status (0 also when there is no GPU)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=int, default=0, help="NVML index of the GPU")
    parser.add_argument("--model", default="resnet18", help="registered wattcap model")
    parser.add_argument("--batch-sizes", default="4,16,64", help="comma-separated")
    parser.add_argument("--min-readings", type=int, default=5,
                        help="sensor readings per measured point (profiler window)")
    parser.add_argument("--allow-cpu-step", action="store_true",
                        help=argparse.SUPPRESS)  # tests: run the step on CPU without CUDA
    args = parser.parse_args(argv)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]

    try:
        device = ReadOnlyNvmlDevice(args.index, pynvml_module=pynvml_module)
    except DeviceError as err:
        print(f"no NVIDIA GPU usable through NVML on this machine: {err.message}")
        if err.hint:
            print(f"  ({err.hint})")
        print("nothing to probe; wattcap's emulated devices work without one")
        return 0
    try:
        _print_readout(device)
        import torch

        if not torch.cuda.is_available() and not args.allow_cpu_step:
            print("\ntorch cannot use CUDA here (CPU-only build?): skipping the profile, "
                  "since it would time the CPU while reading the GPU's power")
            return 0
        device.cpu_step = not torch.cuda.is_available()
        _profile(device, args.model, batch_sizes, args.min_readings)
        print("\nno GPU setting was changed (read-only probe)")
    finally:
        device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
