"""`make demo`: the main job on the embedded default (emulated Jetson Nano, bundled data).

1. Profile the reference models on the emulated Nano and show each method's choice at a few
   caps (throughput only: r_b = 1).
2. Pre-train a small CNN, estimate r_b on a proxy task with its own target accuracy (several
   seeds, the large-batch fit), profile the CNN on the Nano.
3. On the target task, for every cap: wattcap, baseline-1, baseline-2 and the fastest
   configuration (brute force over measured target runs), each measured over several seeds
   with the comparison harness (`wattcap.experiments.compare`): mean ± std of time-to-accuracy
   and energy, wattcap against each other method, and "within noise" where the seeds do not
   separate two methods.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from wattcap.experiments.plots import plot_profile
from wattcap.planner import METHODS, Plan, plan
from wattcap.references import emulated_reference_profiles

DEVICE = "jetson-nano"
CAPS_W: tuple[float | None, ...] = (5.0, 6.5, None)

DEMO_MODEL = "digits32-cnn"
PRETRAIN_DATA = "digits-0-4-32"
PROXY_DATA = "digits-rotated-32"
TARGET_DATA = "digits-5-9-32"
TARGET_ACCURACY = 0.9
PIPELINE_CAPS_W: tuple[float | None, ...] = (4.5, 5.5, None)
SEEDS = 3
PRETRAIN_EPOCHS = 2


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


def run_pipeline(out: Path, console: Console, seeds: int = SEEDS,
                 batch_sizes: tuple[int, ...] | None = None, sample_budget: int = 20_000):
    """Pre-train, estimate r_b on the proxy, profile, and measure every method on the target
    at every cap over `seeds` seeds. Returns the Comparison."""
    from wattcap.efficiency import estimate_efficiency
    from wattcap.experiments.compare import Scenario, load_or_profile, run_comparison
    from wattcap.experiments.tables import efficiency_table
    from wattcap.progress import make_progress
    from wattcap.training import pretrain
    from wattcap.workload import DEFAULT_BATCH_SIZES

    sizes = tuple(batch_sizes or DEFAULT_BATCH_SIZES)
    console.rule(f"[bold]3. Pre-train {DEMO_MODEL} on {PRETRAIN_DATA}")
    weights = out / f"{DEMO_MODEL}-pretrained.safetensors"
    meta = pretrain(DEMO_MODEL, PRETRAIN_DATA, weights, epochs=PRETRAIN_EPOCHS)
    console.print(f"test accuracy {float(meta['test_accuracy']):.1%} -> {weights}")

    console.rule(f"[bold]4. Batch-size efficiency r_b on the proxy {PROXY_DATA} "
                 f"({seeds} seeds, the proxy's own target)")
    runs = len(sizes) * seeds
    with make_progress(console, f"estimating r_b on {PROXY_DATA}", runs, "runs") as report:
        vector = estimate_efficiency(
            DEMO_MODEL, PROXY_DATA, "auto", weights=weights, batch_sizes=sizes, seeds=seeds,
            sample_budget=sample_budget,
            progress=lambda done, total, label: report.update(done, label, total=total))
    vector.save(out / f"efficiency-{DEMO_MODEL}-{PROXY_DATA}.json")
    console.print(efficiency_table(vector))
    for note in vector.ratio_notes():
        console.print(f"  [dim]{note}[/]")

    console.rule(f"[bold]5. Profile {DEMO_MODEL} on the emulated {DEVICE}; train on "
                 f"{TARGET_DATA} to {TARGET_ACCURACY:.0%} ({seeds} seeds per batch size)")
    profile = load_or_profile(out, DEVICE, DEMO_MODEL, sizes)
    references = emulated_reference_profiles(DEVICE)
    runs = len(sizes) * seeds
    with make_progress(console, f"training on {TARGET_DATA}", runs, "runs") as report:
        comparison = run_comparison(
            out, DEMO_MODEL, weights, vector, [TARGET_DATA],
            [Scenario(DEVICE, list(PIPELINE_CAPS_W))], seeds, TARGET_ACCURACY, sizes,
            sample_budget=sample_budget,
            on_run=lambda record: report.advance(detail=f"b={record.batch_size}"))
    for cap in PIPELINE_CAPS_W:
        result = plan(profile, cap, efficiency=vector, reference_profiles=references)
        plot_profile(profile, out / f"heatmap-{DEMO_MODEL}-{_cap_label(cap).replace(' ', '')}"
                     ".png", power_cap_w=cap, plan=result)
    console.print(measured_table(comparison))
    console.print(
        "[dim]time-to-accuracy is device seconds on the emulated Nano from the start of "
        "fine-tuning to the interpolated crossing of the target; 'vs wattcap' is the method's "
        "mean time over wattcap's (Welch's t-test on log times over the seeds, 5 %); "
        "'fastest' is the brute force over the measured target runs[/]")
    return comparison


def measured_table(comparison) -> Table:  # noqa: ANN001 - a Comparison
    """Measured time-to-accuracy and energy of every method at every cap, mean ± std over the
    seeds, against wattcap and the fastest configuration."""
    from wattcap.experiments.significance import compare_times, mean_std_label

    table = Table(title=f"Measured on the target {TARGET_DATA} ({comparison.model}, emulated "
                        f"{DEVICE}, target {comparison.target_accuracy:.0%}, "
                        f"{comparison.seeds} seeds)")
    for column in ("cap", "method", "batch", "MHz", "time-to-acc. (s)", "energy (J)",
                   "vs wattcap", "over fastest"):
        table.add_column(column, justify="left" if column in ("cap", "method") else "right")
    caps = list(dict.fromkeys(r.power_cap_w for r in comparison.results))
    for cap in caps:
        ours = comparison.get(DEVICE, cap, TARGET_DATA, "wattcap")
        for method in METHODS:
            r = comparison.get(DEVICE, cap, TARGET_DATA, method)
            if r is None:
                continue
            times = [t for t in r.time_s if t is not None]
            energies = [e for e in r.energy_j if e is not None]
            reached = len(times) == len(r.time_s)
            versus = "—"
            if method != "wattcap" and ours is not None and reached:
                our_times = [t for t in ours.time_s if t is not None]
                if our_times and len(our_times) == len(ours.time_s):
                    versus = compare_times(times, our_times).label
            over = comparison.over_fastest_pct(r)
            table.add_row(
                _cap_label(cap), method, str(r.batch_size), f"{r.frequency_hz / 1e6:.1f}",
                mean_std_label(times) if reached else
                f"not reached in {len(r.time_s) - len(times)} of {len(r.time_s)} seeds",
                mean_std_label(energies, digits=0) if reached else "—", versus,
                "—" if over is None or method == "fastest" else f"{over:+.1f} %",
            )
        table.add_section()
    return table


def run_demo(out: Path, console: Console | None = None, quick: bool = False) -> None:
    """Run the demo, writing files and plots into `out` (`quick`: 2 seeds, 3 batch sizes and
    a smaller budget, for the tests)."""
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    profile_and_plan(out, console)
    if quick:
        run_pipeline(out, console, seeds=2, batch_sizes=(8, 32, 128), sample_budget=12_000)
    else:
        run_pipeline(out, console)
    console.print(f"\nfiles and plots written to {out}/")
