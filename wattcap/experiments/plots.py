"""Profile heatmaps: peak power and time per sample over (batch size, frequency), with the cap
frontier and each method's choice marked."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on devices or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import LogNorm, Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.patheffects import Normal, Stroke  # noqa: E402
from matplotlib.transforms import offset_copy  # noqa: E402

from wattcap.algorithms.planner import Replanner
from wattcap.core.files import atomic_path
from wattcap.core.knob import knob_axis_label, knob_number
from wattcap.core.plan import Plan
from wattcap.core.profile import ProfilePoint, ProfileTable, portable_model_name

_MARKERS = {
    "wattcap": ("*", "tab:green"),
    "baseline-1": ("s", "tab:red"),
    "baseline-2": ("D", "tab:orange"),
    "fastest": ("o", "tab:blue"),
}


#: what a figure of a plan made without an efficiency vector says on its face
ASSUMED_NO_EFFICIENCY = ("r_b = 1 assumed (no efficiency given): the choices take every batch "
                         "size to need as many samples as the largest")


def _grid(profile: ProfileTable, field: str) -> np.ndarray:
    grid = np.full((len(profile.batch_sizes), len(profile.knob_values)), np.nan)
    b_index = {b: i for i, b in enumerate(profile.batch_sizes)}
    f_index = {f: j for j, f in enumerate(profile.knob_values)}
    for p in profile.points:
        if p.batch_size in b_index and p.knob_value in f_index:
            grid[b_index[p.batch_size], f_index[p.knob_value]] = getattr(p, field)
    return grid


def _log_norm(grid: np.ndarray) -> Normalize | None:
    """A log colour scale over the measured values: time per sample spans orders of magnitude
    (small batches at low clocks are many times slower), and on a linear scale that one
    corner washes every other point into the same colour. None (linear) if nothing positive."""
    values = grid[np.isfinite(grid) & (grid > 0)]
    if values.size == 0:
        return None
    low, high = float(values.min()), float(values.max())
    return LogNorm(vmin=low, vmax=high if high > low else low * 1.01)


def plot_profile(
    profile: ProfileTable,
    out: str | Path,
    power_cap_w: float | None = None,
    plan: Plan | None = None,
) -> Path:
    """Write a two-panel heatmap PNG; unmeasured points are hatched. A plan made without an
    efficiency vector is drawn with its assumption (r_b = 1) over the legend of its marks."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = profile_figure(profile, power_cap_w, plan)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return out


def _model_label(model: str, limit: int = 40) -> str:
    """A title's model name: a user model without its folders, cut to `limit` characters."""
    label = portable_model_name(model) or model
    return label if len(label) <= limit else label[:limit - 1] + "…"


#: at most this many clock (knob) tick labels: a datacenter GPU has ~110 clocks, and a label
#: per clock overlapped into one smear; a Jetson's ~12 all fit
MAX_KNOB_TICKS = 12


def knob_tick_indices(count: int, keep: Iterable[int] = (), limit: int = MAX_KNOB_TICKS,
                      ) -> list[int]:
    """Which of `count` knob values get a tick label: every one when they fit, else the two
    ends, then the `keep` ones (the chosen values), then evenly spaced ones, each taken only
    if at least ceil(count / limit) columns from every one taken before. That spacing bounds
    the result to `limit` labels and keeps neighbouring labels from overlapping, so a chosen
    value next to an end or another choice goes unlabelled rather than smeared."""
    if count <= limit:
        return list(range(count))
    gap = math.ceil(count / limit)
    taken: list[int] = []
    for i in [0, count - 1, *sorted(set(keep)), *range(gap, count - 1, gap)]:
        if 0 <= i < count and all(abs(i - j) >= gap for j in taken):
            taken.append(i)
    return sorted(taken)


def _figure_size(knobs: int, batch_sizes: int, legend: bool) -> tuple[float, float]:
    """Wider for more knob values (cells stay wide enough to tell apart, up to a screen's
    width), taller for more batch sizes, and room below for a legend when there is one."""
    width = min(18.0, 11.0 + 0.06 * knobs)
    height = min(8.0, 3.8 + 0.2 * batch_sizes) + (1.1 if legend else 0.0)
    return width, height


def _mark_unmeasured(ax: Axes, grid: np.ndarray, pruned: bool) -> None:
    """Hatch the cells the profile has no point for, behind the image (NaN is transparent):
    a pruned profile measures only the points its cap needs, and white cells read as a
    drawing fault rather than as 'not measured'."""
    if not np.isnan(grid).any():
        return
    rows, columns = grid.shape
    why = "not measured (pruned for the profile's cap)" if pruned else "not measured"
    ax.add_patch(Rectangle((-0.5, -0.5), columns, rows, facecolor="0.93", edgecolor="0.7",
                           hatch="///", linewidth=0, zorder=-1, label=why))


def _draw_choices(fig: Figure, ax: Axes, profile: ProfileTable, plan: Plan) -> None:
    """Each method's choice, side by side where several chose one point: offset in points,
    not cells, since a cell of a 110-clock profile is narrower than the marker."""
    for i, (method, choice) in enumerate(plan.choices.items()):
        marker, color = _MARKERS.get(method, ("x", "black"))
        shift = offset_copy(ax.transData, fig=fig,
                            x=(i - (len(plan.choices) - 1) / 2) * 9, units="points")
        ax.scatter(
            [profile.knob_values.index(choice.knob_value)],
            [profile.batch_sizes.index(choice.batch_size)],
            marker=marker, s=260 if marker == "*" else 150, color=color, transform=shift,
            edgecolors="white", linewidths=1.2, label=method,
            zorder=4 if method == "wattcap" else 3,  # wattcap's star on top of the rest
        )


def _draw_frontier(ax: Axes, profile: ProfileTable, frontier: dict[int, ProfilePoint],
                   power_cap_w: float) -> None:
    """Each batch size's best point under the cap (f*(b)) in white dashes with a black outline,
    seen on both colour maps, one legend entry. The dashes join neighbouring rows only: a row
    with no point under the cap breaks the line (a line across it would draw a frontier
    through a batch size that has none), and a row whose neighbours have none is marked by a
    ring (a line of one point draws nothing). Where one batch size alone has a point under the
    cap, the legend says only that batch size fits. Nothing is drawn, and the legend has no
    entry, where no batch size fits."""
    if not frontier:
        return
    cells = sorted((profile.batch_sizes.index(b), profile.knob_values.index(p.knob_value))
                   for b, p in frontier.items())
    runs: list[list[tuple[int, int]]] = []
    for row, column in cells:
        if runs and runs[-1][-1][0] == row - 1:
            runs[-1].append((row, column))
        else:
            runs.append([(row, column)])
    outline = [Stroke(linewidth=3.5, foreground="k"), Normal()]
    label = f"cap frontier ({power_cap_w:g} W, with the planner's margin)"
    if len(frontier) == 1:
        label += f": only b={next(iter(frontier))} fits"
    # the legend's entry is a line where the frontier has one, else a ring
    labelled = next((i for i, run in enumerate(runs) if len(run) > 1), 0)
    for i, run in enumerate(runs):
        ys, xs = zip(*run, strict=True)
        name = label if i == labelled else "_nolegend_"
        if len(run) > 1:
            ax.plot(xs, ys, "w--", lw=2, path_effects=outline, label=name)
        else:
            ax.plot(xs, ys, linestyle="none", marker="o", markersize=20,
                    markerfacecolor="none", markeredgecolor="w", markeredgewidth=2,
                    path_effects=outline, zorder=5, label=name)


def _knob_axis(ax: Axes, profile: ProfileTable, chosen: set[int]) -> None:
    """A thinned set of knob tick labels (see knob_tick_indices) that names the chosen ones."""
    picked = knob_tick_indices(len(profile.knob_values), chosen)
    names = profile.power_mode_names()  # a power mode's tick reads '2 (MODE_30W)' where known
    ax.set_xticks(picked, [knob_number(profile.knob_kind, profile.knob_values[i], names)
                           for i in picked], rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlabel(knob_axis_label(profile.knob_kind, named=bool(names)))


def _legend(fig: Figure, axes: Sequence[Axes], plan: Plan | None) -> None:
    """One legend for both panels, below them: inside an axes it hid the top row, where the
    largest batch size and most choices lie. A plan made without an efficiency vector says so
    in the legend's title, in red, next to the marks that rest on it."""
    entries: dict[str, Artist] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if not entries:
        return
    title = None
    if plan is not None:
        title = (ASSUMED_NO_EFFICIENCY if plan.efficiency_source is None
                 else f"Choices use r_b estimated on {plan.efficiency_source}")
    legend = fig.legend(list(entries.values()), list(entries), loc="outside lower center",
                        ncols=min(len(entries), 4), fontsize=9, title=title,
                        title_fontsize=9, framealpha=1.0)
    if plan is not None and plan.efficiency_source is None:
        legend.get_title().set_color("tab:red")


def profile_figure(
    profile: ProfileTable,
    power_cap_w: float | None = None,
    plan: Plan | None = None,
) -> Figure:
    """The two heatmaps: peak power (linear colours) and time per sample (log colours), with
    the cap frontier and each method's choice; the caller saves and closes it."""
    power = _grid(profile, "peak_power_w")
    time_ms = _grid(profile, "seconds_per_sample") * 1e3
    # each batch size's best feasible knob value f*(b) as the planner sees it: its margin
    # below the cap and the peaks held at a lower value's (what the stars were chosen from)
    frontier = None if power_cap_w is None else \
        Replanner(profile).selector.frontier(power_cap_w)
    chosen = set() if plan is None else {profile.knob_values.index(c.knob_value)
                                         for c in plan.choices.values()}
    legend = frontier is not None or plan is not None or bool(np.isnan(power).any())
    fig, axes = plt.subplots(1, 2, layout="constrained", figsize=_figure_size(
        len(profile.knob_values), len(profile.batch_sizes), legend))
    panels = [(axes[0], power, "Peak power (W)", "viridis", None),
              (axes[1], time_ms, "Time per sample (ms, log scale)", "magma_r",
               _log_norm(time_ms))]
    for ax, grid, label, cmap, norm in panels:
        image = ax.imshow(grid, aspect="auto", origin="lower", cmap=cmap, norm=norm)
        fig.colorbar(image, ax=ax, label=label)
        _mark_unmeasured(ax, grid, profile.mode == "pruned")
        _knob_axis(ax, profile, chosen)
        ax.set_yticks(range(len(profile.batch_sizes)), [str(b) for b in profile.batch_sizes])
        ax.set_ylabel("Batch size (samples)")
        # the quantity only: with the model and device in each, the two titles ran together
        ax.set_title(label, fontsize=11)
        if frontier is not None and power_cap_w is not None:
            _draw_frontier(ax, profile, frontier, power_cap_w)
        if plan is not None:
            _draw_choices(fig, ax, profile, plan)
    fig.suptitle(f"{_model_label(profile.model)} on {profile.device}"
                 f" ({profile.mode} profile, {len(profile.points)} points)", fontsize=12)
    _legend(fig, axes, plan)
    return fig
