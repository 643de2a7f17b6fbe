"""`wattcap devices`: the emulated devices, and real hardware when present."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from wattcap.cli.common import console, say
from wattcap.cli.errors import print_error


def devices(
    probe: bool = typer.Option(False, "--probe", help="Look for real hardware (Jetson devfreq "
                               "and INA3221, NVIDIA GPUs through NVML) and report it; only "
                               "reads, never changes a setting."),
    sysfs_root: str | None = typer.Option(None, hidden=True, help="Root of sysfs (for tests; "
                                          "default: env WATTCAP_SYSFS_ROOT, else /)."),
) -> None:
    """List emulated devices, and real hardware when present."""
    from wattcap.devices import list_specs
    from wattcap.devices.spec import load_spec

    table = Table(title="Emulated devices (use --device emulated:<name>)")
    for column in ("name", "GPU frequencies (MHz)", "memory usable", "power modes or limit",
                   "sensor"):
        table.add_column(column)
    for name in list_specs():
        spec = load_spec(name)
        freqs = [f / 1e6 for f in spec.frequencies_hz]
        table.add_row(
            name,
            f"{len(freqs)}: {freqs[0]:.1f} … {freqs[-1]:.1f}",
            f"{spec.memory_usable_bytes / 2**30:.1f} GiB",
            # a datacenter GPU has no nvpmodel modes: its power limit is the knob it has
            f"power limit {spec.power_limit_range_w[0]:g}-{spec.power_limit_range_w[1]:g} W"
            if spec.power_limit_range_w is not None
            # by nvpmodel id and name: --power-mode takes either
            else ", ".join(f"{i} {m} ({p.budget_w:g} W)"
                           for i, (m, p) in enumerate(spec.power_modes.items())),
            f"{spec.sensor_rail} every {spec.sensor_period_s * 1e3:.0f} ms",
        )
    console.print(table)
    if probe:
        from wattcap.devices.probe import probe as run_probe

        report = run_probe(sysfs_root=sysfs_root)
        console.print("[bold]Real hardware probe[/] (read only: nothing is changed)")
        for line in report.found:
            console.print(f"  [green]found[/]   {escape(line)}", highlight=False)
        for line in report.missing:
            console.print(f"  [yellow]missing[/] {escape(line)}", highlight=False)
        emulated = ", ".join("emulated:" + n for n in list_specs())
        if not report.found:
            console.print(
                "[bold]Result:[/] no Jetson or NVIDIA GPU is present on this machine; wattcap "
                f"can use the emulated devices instead: {emulated}."
            )


def restore() -> None:
    """Put back the GPU settings a run left changed when it could not restore them itself
    (SIGKILL, an OOM kill, a power loss): the state files written before each first change.

    NVML has no getter for locked clocks: those are reset to the driver's default (as
    `nvidia-smi -rgc`); the power limit and Jetson's devfreq range and governor go back to the
    values found. A device a live run holds is left alone."""
    from wattcap.devices.restore import restore_left_settings

    results = restore_left_settings()
    if not results:
        say("nothing to restore: no run left a device's settings changed")
        return
    failed = 0
    for result in results:
        if result.done:
            say(f"restored {result.key}: {result.settings} ({result.message})")
        else:
            failed += 1
            print_error(f"not restored {result.key}: {result.message}")
    if failed:
        raise typer.Exit(1)
