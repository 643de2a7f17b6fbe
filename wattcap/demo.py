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
                "—" if method == "wattcap"
                else f"{c.predicted_time_s / main.predicted_time_s:.2f}x",
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
        for cap, result in zip(CAPS_W, plans[model], strict=True):
            name = f"heatmap-{model}-{_cap_label(cap).replace(' ', '')}.png"
            plot_profile(profile, out / name, power_cap_w=cap, plan=result)
    console.rule("[bold]2. Choices per method (r_b = 1: throughput only)")
    for model, model_plans in plans.items():
        console.print(side_by_side(model_plans, f"{model} on the emulated {DEVICE}"))
    return plans


DEMO_MODEL = "digits32-cnn"
PRETRAIN_DATA = "digits-0-4-32"
PROXY_DATA = "digits-rotated-32"
TARGET_DATA = "digits-5-9-32"
TARGET_ACCURACY = 0.9
PIPELINE_CAPS_W: tuple[float | None, ...] = (4.5, 5.5, None)


def run_pipeline(out: Path, console: Console, seeds: int = 1) -> list[tuple[Plan, dict]]:
    """Pre-train, estimate r_b on the proxy, profile, plan, and train on the target with
    wattcap's choice and baseline-1's at every cap. Returns (plan, {method: RunRecord})."""
    from wattcap.data import get_dataset
    from wattcap.devices.emulated import EmulatedDevice
    from wattcap.efficiency import estimate_efficiency
    from wattcap.profiling import Profiler
    from wattcap.training import TrainConfig, pretrain, train_to_accuracy

    console.rule(f"[bold]3. Pre-train {DEMO_MODEL} on {PRETRAIN_DATA}")
    weights = out / f"{DEMO_MODEL}-pretrained.safetensors"
    meta = pretrain(DEMO_MODEL, PRETRAIN_DATA, weights, epochs=2)
    console.print(f"test accuracy {float(meta['test_accuracy']):.1%} -> {weights}")

    console.rule(f"[bold]4. Batch-size efficiency r_b on the proxy {PROXY_DATA}")
    vector = estimate_efficiency(DEMO_MODEL, PROXY_DATA, TARGET_ACCURACY, weights=weights,
                                 seeds=seeds)
    vector.save(out / f"efficiency-{DEMO_MODEL}-{PROXY_DATA}.json")
    console.print("r_b: " + ", ".join(
        f"b={e.batch_size}: {e.ratio_mean:.2f}" if e.ratio_mean is not None
        else f"b={e.batch_size}: unreachable" for e in vector.entries))

    console.rule(f"[bold]5. Profile {DEMO_MODEL} on the emulated {DEVICE}, plan, train on "
                 f"{TARGET_DATA}")
    profile = Profiler(EmulatedDevice(DEVICE), DEMO_MODEL).run(exhaustive=True)
    profile.save(out / f"profile-{DEVICE}-{DEMO_MODEL}.json")
    references = emulated_reference_profiles(DEVICE)
    train, test = get_dataset(TARGET_DATA).split(0.2, seed=0)
    results = []
    for cap in PIPELINE_CAPS_W:
        result = plan(profile, cap, efficiency=vector, reference_profiles=references)
        plot_profile(profile, out / f"heatmap-{DEMO_MODEL}-{_cap_label(cap).replace(' ', '')}"
                     ".png", power_cap_w=cap, plan=result)
        runs: dict = {}
        for method in ("wattcap", "baseline-1"):
            choice = result.choices[method]
            same = next((r for r in runs.values() if (r.batch_size, r.frequency_hz)
                         == (choice.batch_size, choice.frequency_hz)), None)
            if same is not None:
                runs[method] = same
                continue
            config = TrainConfig(model=DEMO_MODEL, batch_size=choice.batch_size,
                                 target_accuracy=TARGET_ACCURACY)
            with EmulatedDevice(DEVICE) as device:
                device.set_frequency_hz(choice.frequency_hz)
                runs[method] = train_to_accuracy(config, train, test, device=device,
                                                 weights=weights, power_cap_w=cap,
                                                 method=method)
            runs[method].save(out / f"run-{_cap_label(cap).replace(' ', '')}-{method}.json")
        results.append((result, runs))
    console.print(measured_table(results))
    return results


def measured_table(results: list[tuple[Plan, dict]]) -> Table:
    """Measured time-to-accuracy and energy of wattcap and baseline-1 at every cap."""
    table = Table(title=f"Measured on the target {TARGET_DATA} ({DEMO_MODEL}, emulated {DEVICE},"
                        f" target {TARGET_ACCURACY:.0%})")
    for column in ("cap", "method", "batch", "MHz", "samples", "time-to-acc. (s)",
                   "energy (J)", "peak W", "wattcap speed-up", "energy saved"):
        table.add_column(column, justify="left" if column in ("cap", "method") else "right")
    for result, runs in results:
        ours = runs["wattcap"]
        for method, run in runs.items():
            tta = run.time_to_accuracy_s
            speedup = energy = "—"
            if method != "wattcap" and tta and ours.time_to_accuracy_s:
                speedup = f"{tta / ours.time_to_accuracy_s:.2f}x"
                energy = f"{1 - ours.energy_j / run.energy_j:.0%}"
            table.add_row(
                _cap_label(result.power_cap_w), method, str(run.batch_size),
                f"{run.frequency_hz / 1e6:.1f}", str(run.samples_to_target or "not reached"),
                f"{tta:.1f}" if tta else "—", f"{run.energy_j:.0f}",
                f"{run.peak_power_w:.2f}", speedup, energy,
            )
        table.add_section()
    return table


def run_demo(out: Path, console: Console | None = None, quick: bool = False) -> None:
    """Run the demo, writing files and plots into `out`."""
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    profile_and_plan(out, console)
    run_pipeline(out, console, seeds=1)
    console.print(f"\nfiles and plots written to {out}/")
