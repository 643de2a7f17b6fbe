"""Profile heatmaps: peak power and time per sample over (batch size, frequency), with the cap
frontier and each method's choice marked."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on devices or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm, Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from wattcap.algorithms.planner import Replanner
from wattcap.core.files import atomic_path
from wattcap.core.knob import knob_number, knob_unit
from wattcap.core.plan import Plan
from wattcap.core.profile import ProfileTable, portable_model_name

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
    """Write a two-panel heatmap PNG; unmeasured points are blank. A plan made without an
    efficiency vector is drawn with its assumption (r_b = 1) in the figure's title."""
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


def profile_figure(
    profile: ProfileTable,
    power_cap_w: float | None = None,
    plan: Plan | None = None,
) -> Figure:
    """The two heatmaps: peak power (linear colours) and time per sample (log colours), with
    the cap frontier and each method's choice; the caller saves and closes it."""
    power = _grid(profile, "peak_power_w")
    time_ms = _grid(profile, "seconds_per_sample") * 1e3
    unit = knob_unit(profile.knob_kind)
    ticks = [knob_number(profile.knob_kind, v) for v in profile.knob_values]
    # each batch size's best feasible knob value f*(b) as the planner sees it: its margin
    # below the cap and the peaks held at a lower value's (what the stars were chosen from)
    frontier = None if power_cap_w is None else \
        Replanner(profile).selector.frontier(power_cap_w)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    panels = [
        (axes[0], power, "Peak power (W)", "viridis", None),
        (axes[1], time_ms, "Time per sample (ms, log scale)", "magma_r", _log_norm(time_ms)),
    ]
    for (ax, grid, label, cmap, norm), line in zip(panels, ("w--", "k--"), strict=True):
        image = ax.imshow(grid, aspect="auto", origin="lower", cmap=cmap, norm=norm)
        fig.colorbar(image, ax=ax, label=label)
        ax.set_xticks(range(len(ticks)), ticks, rotation=60)
        ax.set_yticks(range(len(profile.batch_sizes)), [str(b) for b in profile.batch_sizes])
        ax.set_xlabel(f"{unit.label} ({unit.shown_unit})")
        ax.set_ylabel("Batch size (samples)")
        ax.set_title(f"{label}: {_model_label(profile.model)} on {profile.device}")
        if frontier is not None:
            xs = [profile.knob_values.index(p.knob_value) for p in frontier.values()]
            ys = [profile.batch_sizes.index(b) for b in frontier]
            ax.plot(xs, ys, line, lw=1.5,
                    label=f"cap frontier ({power_cap_w:g} W, with the planner's margin)")
        if plan is not None:
            for i, (method, choice) in enumerate(plan.choices.items()):
                marker, color = _MARKERS.get(method, ("x", "black"))
                # Small offsets keep methods that chose the same point visible side by side.
                offset = (i - (len(plan.choices) - 1) / 2) * 0.18
                ax.scatter(
                    [profile.knob_values.index(choice.knob_value) + offset],
                    [profile.batch_sizes.index(choice.batch_size)],
                    marker=marker, s=260 if marker == "*" else 150, color=color,
                    edgecolors="white", linewidths=1.2, label=method, zorder=3,
                )
        if power_cap_w is not None or plan is not None:
            ax.legend(loc="upper left", fontsize=8, framealpha=0.85)
    if plan is not None:
        # The choices rest on r_b: a figure passed around without its console output must
        # still say which r_b its marks assumed, or it reads as the plan made with one.
        fig.suptitle(ASSUMED_NO_EFFICIENCY if plan.efficiency_source is None
                     else f"Choices use r_b estimated on {plan.efficiency_source}",
                     fontsize=10, color="tab:red" if plan.efficiency_source is None else None)
    return fig
