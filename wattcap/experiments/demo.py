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

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from wattcap.algorithms.planner import plan
from wattcap.core.files import write_file
from wattcap.core.metric import target_percent
from wattcap.core.plan import METHODS, Plan, format_known
from wattcap.experiments.plots import plot_profile
from wattcap.measure.references import emulated_reference_profiles

if TYPE_CHECKING:
    from wattcap.experiments.replay import BoardMode
    from wattcap.train.executors import Executor

DEVICE = "jetson-nano"
CAPS_W: tuple[float | None, ...] = (5.0, 6.5, None)

PIPELINE_CAPS_W: tuple[float | None, ...] = (4.5, 5.5, None)
SEEDS = 3
PRETRAIN_EPOCHS = 2


@dataclass(frozen=True)
class DemoTask:
    """The model and the bundled data sets of the pipeline part of the demo."""

    model: str
    pretrain: str
    proxy: str
    target: str
    target_accuracy: float


#: the demo's task: a CNN on the digits upsampled to 32x32 (thousands of samples to target)
TASK = DemoTask("digits32-cnn", "digits-0-4-32", "digits-rotated-32", "digits-5-9-32", 0.9)
#: `--quick` (the tests): the same pipeline on the 8x8 digits and a 10x cheaper CNN
QUICK_TASK = DemoTask("digits-cnn", "digits-0-4", "digits-rotated", "digits-5-9", 0.9)


def demo_executor() -> Executor:
    """The demo's trainings are independent: one worker process per core (two at most: the
    machine the demo targets has two), else one after another here."""
    from wattcap.train.executors import ProcessExecutor, SerialExecutor

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return ProcessExecutor(min(2, cores)) if cores > 1 else SerialExecutor()


def _cap_label(cap: float | None) -> str:
    return "no cap" if cap is None else f"{cap:g} W"


def side_by_side(plans: list[Plan], title: str) -> Table:
    """One row per (cap, method): the choice and wattcap's predicted speed-up over it."""
    table = Table(title=title)
    for column in ("cap", "method", "batch", "MHz", "peak W", "pred. time (s)",
                   "wattcap speed-up"):
        table.add_column(column, justify="left" if column in ("cap", "method") else "right")
    for result in plans:
        for method in METHODS:
            c = result.choices.get(method)
            if c is None:
                continue
            table.add_row(
                _cap_label(result.power_cap_w), method, str(c.batch_size),
                f"{c.knob_value / 1e6:.1f}", f"{c.peak_power_w:.2f}",
                format_known(c.predicted_time_s, ".1f"),
                "—" if method == "wattcap"
                else format_known(result.speedup(method), ".2f", suffix="x"),
            )
        table.add_section()
    return table


def profile_and_plan(out: Path, console: Console, plots: bool = True) -> dict[str, list[Plan]]:
    """Profile the reference models on the emulated Nano and plan at every demo cap (with a
    heatmap of each plan where `plots`)."""
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
        if plots:
            for cap, result in zip(CAPS_W, plans[model], strict=True):
                name = f"heatmap-{model}-{_cap_label(cap).replace(' ', '')}.png"
                plot_profile(profile, out / name, power_cap_w=cap, plan=result)
    console.rule("[bold]2. Choices per method (r_b = 1: throughput only)")
    for model, model_plans in plans.items():
        console.print(side_by_side(model_plans, f"{model} on the emulated {DEVICE}"))
    return plans


def run_pipeline(out: Path, console: Console, seeds: int = SEEDS,
                 batch_sizes: tuple[int, ...] | None = None, sample_budget: int = 20_000,
                 task: DemoTask = TASK, executor: Executor | None = None,
                 board: BoardMode = "unkind", plots: bool = True):
    """Pre-train, estimate r_b on the proxy, profile, and measure every method on the target
    at every cap over `seeds` seeds (the trainings on `executor`, default: one worker process
    per core; `board`: each seed's runs replayed on a board state of its own and the profile
    measured on another, or the one deterministic board; `plots`: a heatmap of each cap's
    plan). Returns the Comparison."""
    from wattcap.core.progress import make_progress
    from wattcap.devices.workload import DEFAULT_BATCH_SIZES
    from wattcap.experiments.compare import Scenario, load_or_profile, run_comparison
    from wattcap.experiments.tables import efficiency_table
    from wattcap.train.efficiency import estimate_efficiency
    from wattcap.train.loop import pretrain

    sizes = tuple(batch_sizes or DEFAULT_BATCH_SIZES)
    console.rule(f"[bold]3. Pre-train {task.model} on {task.pretrain}")
    weights = out / f"{task.model}-pretrained.safetensors"
    meta = pretrain(task.model, task.pretrain, weights, epochs=PRETRAIN_EPOCHS)
    console.print(f"test accuracy {float(meta['test_accuracy']):.1%} -> {weights}")

    with executor or demo_executor() as where:
        console.rule(f"[bold]4. Batch-size efficiency r_b on the proxy {task.proxy} "
                     f"({seeds} seeds, the proxy's own target; trainings: "
                     f"{where.describe()})")
        runs = len(sizes) * seeds
        with make_progress(console, f"estimating r_b on {task.proxy}", runs,
                           "runs") as report:
            vector = estimate_efficiency(
                task.model, task.proxy, "auto", weights=weights, batch_sizes=sizes,
                seeds=seeds, sample_budget=sample_budget, executor=where,
                progress=report.show)
        vector.save(out / f"efficiency-{task.model}-{task.proxy}.json")
        console.print(efficiency_table(vector))
        for note in vector.ratio_notes():
            console.print(f"  [dim]{note}[/]")

        console.rule(f"[bold]5. Profile {task.model} on the emulated {DEVICE}; train on "
                     f"{task.target} to {target_percent(task.target_accuracy)} ({seeds} seeds "
                     "per batch size)")
        profile = load_or_profile(out, DEVICE, task.model, sizes, board)
        references = emulated_reference_profiles(DEVICE)
        with make_progress(console, f"training on {task.target}", runs, "runs") as report:
            comparison = run_comparison(
                out, task.model, weights, vector, [task.target],
                [Scenario(DEVICE, list(PIPELINE_CAPS_W))], seeds, task.target_accuracy,
                sizes, sample_budget=sample_budget, executor=where,
                progress=report.show, board=board)
    if plots:
        for cap in PIPELINE_CAPS_W:
            result = plan(profile, cap, efficiency=vector, reference_profiles=references)
            plot_profile(profile, out / f"heatmap-{task.model}-"
                         f"{_cap_label(cap).replace(' ', '')}.png", power_cap_w=cap, plan=result)
    console.print(measured_table(comparison))
    for r in comparison.results:
        replanned = r.board_replan_label(lambda hz: f"{hz / 1e6:.1f} MHz")
        if replanned:
            console.print(f"  wattcap at {_cap_label(r.power_cap_w)}: {replanned}")
    console.print(
        "[dim]time-to-accuracy is device seconds on the emulated Nano from the start of "
        "fine-tuning to the interpolated crossing of the target; 'vs wattcap' is the method's "
        "mean time over wattcap's (Welch's t-test on log times over the seeds, 5 %); "
        "'fastest' is the brute force over the measured target runs"
        + ("; unkind boards: each seed's runs replayed on a Nano drawn for that seed (speed, "
           "power, host speed, a lagging sensor), the profile measured on one of its own, "
           "wattcap's runs in a Session that may re-plan once for its board, the fastest found "
           "by replaying" if board == "unkind" else "") + "[/]")
    return comparison


def measured_table(comparison) -> Table:  # noqa: ANN001 - a Comparison
    """Measured time-to-accuracy and energy of every method at every cap, mean ± std over the
    seeds, against wattcap and the fastest configuration."""
    from wattcap.experiments.significance import mean_std_label, signed_pct

    target = comparison.targets[0]
    table = Table(title=f"Measured on the target {target} ({comparison.model}, emulated "
                        f"{DEVICE}, target {target_percent(comparison.target_accuracy)}, "
                        f"{comparison.seeds} seeds)")
    for column in ("cap", "method", "batch", "MHz", "time-to-acc. (s)", "energy (J)",
                   "vs wattcap", "over fastest", "peak (W)"):
        table.add_column(column, justify="left" if column in ("cap", "method") else "right")
    caps = list(dict.fromkeys(r.power_cap_w for r in comparison.results))
    for cap in caps:
        for method in METHODS:
            r = comparison.get(DEVICE, cap, target, method)
            if r is None:
                continue
            times = [t for t in r.time_s if t is not None]
            energies = [e for e in r.energy_j if e is not None]
            reached = len(times) == len(r.time_s)
            versus = comparison.versus_wattcap(r)
            over = comparison.over_fastest_pct(r)
            table.add_row(
                _cap_label(cap), method, str(r.batch_size), f"{r.knob_value / 1e6:.1f}",
                mean_std_label(times) if reached else r.missed_label(digits=1),
                mean_std_label(energies, digits=0) if reached else "—",
                "—" if versus is None else versus.label,
                "—" if over is None or method == "fastest" else f"{signed_pct(over)} %",
                f"{r.peak_power_w:.2f}" + (f" ⚠ {r.cap_violations} violation"
                                           + ("s" if r.cap_violations > 1 else "")
                                           if r.cap_violations else ""),
            )
        table.add_section()
    return table


def _choice_cell(r, with_choice: bool = True) -> str:  # noqa: ANN001 - a MethodResult
    from wattcap.experiments.significance import mean_std_label

    times = [t for t in r.time_s if t is not None]
    if r.missed:
        shown = r.missed_label(digits=1)
    else:
        shown = f"{mean_std_label(times, seeds=False)} s"
    if not with_choice:
        return shown
    replanned = r.board_replan_label(lambda hz: f"{hz / 1e6:.1f} MHz")
    return f"{r.batch_size}, {r.knob_value / 1e6:.1f}" + (
        f" ({replanned})" if replanned else "") + f": {shown}" + r.violations_label()


def _versus_text(versus) -> str:  # noqa: ANN001 - a TimeComparison
    noise = {None: ", 1 seed: no spread", False: ", within noise", True: ""}[versus.separated]
    return f"{versus.ratio:.2f}x wattcap's time{noise}"


def markdown_table(comparison) -> str:  # noqa: ANN001 - a Comparison
    """The results page's demo table from the demo's comparison, so that the page shows the
    demo's output and nothing else: per cap, wattcap's choice and time (mean ± std over the
    seeds), each baseline's mean time over wattcap's (within noise where Welch's test on the
    seeds does not separate them), and the brute-force fastest configuration."""
    target = comparison.targets[0]
    lines = ["| cap | wattcap (b, MHz): time | baseline-1 | baseline-2 | fastest (b, MHz): time |",
             "|---|---|---|---|---|"]
    for cap in dict.fromkeys(r.power_cap_w for r in comparison.results):
        ours = comparison.get(DEVICE, cap, target, "wattcap")
        if ours is None:
            continue
        cells = [_cap_label(cap), _choice_cell(ours)]
        for method in ("baseline-1", "baseline-2", "fastest"):
            r = comparison.get(DEVICE, cap, target, method)
            same = r is not None and (r.batch_size, r.knob_value) == \
                (ours.batch_size, ours.knob_value)
            versus = None if r is None else comparison.versus_wattcap(r)
            if r is None:
                cells.append("—")
            elif same:
                cells.append("same choice")
            elif method == "fastest":
                cells.append(_choice_cell(r) + ("" if versus is None else
                                                f" ({_versus_text(versus)})"))
            else:
                cells.append("—" if versus is None else _versus_text(versus))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run_demo(out: Path, console: Console | None = None, quick: bool = False,
             board: BoardMode = "unkind", plots: bool = True) -> None:
    """Run the demo, writing files and plots into `out` (`quick`: the same pipeline on the 8x8
    digits with a 10x cheaper CNN, 2 seeds and 3 batch sizes, for the tests; `board`: the
    boards the measured part runs on, see `run_pipeline`; `plots`: the heatmaps, about 2 s
    each, or files only)."""
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    profile_and_plan(out, console, plots)
    if quick:
        comparison = run_pipeline(out, console, seeds=2, batch_sizes=(8, 32, 128),
                                  sample_budget=8192, task=QUICK_TASK, board=board, plots=plots)
    else:
        comparison = run_pipeline(out, console, board=board, plots=plots)
    # the results page's table (docs/results.md) is this file, pasted by bench/readme_demo_table.py
    write_file(out / "table.md", markdown_table(comparison))
    console.print(f"\nfiles{' and plots' if plots else ''} written to {out}/ "
                  f"(the results page's table: {out}/table.md)")
