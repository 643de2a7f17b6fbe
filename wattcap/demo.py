"""`make demo`: the main job on the embedded default (emulated Jetson Nano, bundled data)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from wattcap.experiments.plots import plot_profile
from wattcap.planner import METHODS, Plan, plan
from wattcap.references import emulated_reference_profiles

DEVICE = "jetson-nano"
CAPS_W: tuple[float | None, ...] = (5.0, 6.5, None)


def _cap_label(cap: float | None) -> str:
    return "no cap" if cap is None else f"{cap:g} W"


def side_by_side(plans: list[Plan], title: str) -> Table:
    """One row per (cap, method): the choice and wattcap's predicted speed-up over it."""
    table = Table(title=title)
    for column in ("cap", "method", "batch", "MHz", "peak W", "pred. time (s)",
                   "wattcap speed-up"):
        table.add_column(column, justify="left" if column in ("cap", "method") else "right")
    for result in plans:
        main = result.choices["wattcap"]
        for method in METHODS:
            c = result.choices.get(method)
            if c is None:
                continue
            table.add_row(
                _cap_label(result.power_cap_w), method, str(c.batch_size),
                f"{c.frequency_hz / 1e6:.1f}", f"{c.peak_power_w:.2f}",
                f"{c.predicted_time_s:.1f}",
                "—" if method == "wattcap" else f"{c.predicted_time_s / main.predicted_time_s:.2f}x",
            )
        table.add_section()
    return table


def profile_and_plan(out: Path, console: Console) -> dict[str, list[Plan]]:
    """Profile the reference models on the emulated Nano and plan at every demo cap."""
    console.rule("[bold]1. Profile the emulated Jetson Nano (exhaustive, virtual device time)")
    references = emulated_reference_profiles(DEVICE)
    by_model = {p.model: p for p in references}
    plans: dict[str, list[Plan]] = {}
    for model in ("resnet18", "mobilenetv2"):
        profile = by_model[model]
        profile.save(out / f"profile-{DEVICE}-{model}.json")
        console.print(
            f"{model}: {profile.points_measured} points, max batch size {profile.max_batch_size}"
            f" (out of memory: {profile.oom_batch_sizes or 'none'}), "
            f"{profile.profiling_device_s:.0f} s of device time"
        )
        plans[model] = [plan(profile, cap, reference_profiles=references) for cap in CAPS_W]
        for cap, result in zip(CAPS_W, plans[model]):
            name = f"heatmap-{model}-{_cap_label(cap).replace(' ', '')}.png"
            plot_profile(profile, out / name, power_cap_w=cap, plan=result)
    console.rule("[bold]2. Choices per method (r_b = 1: throughput only)")
    for model, model_plans in plans.items():
        console.print(side_by_side(model_plans, f"{model} on the emulated {DEVICE}"))
    return plans


def run_demo(out: Path, console: Console | None = None, quick: bool = False) -> None:
    """Run the demo, writing files and plots into `out`."""
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    profile_and_plan(out, console)
    console.print(f"\nfiles and heatmaps written to {out}/")
