"""The time/energy Pareto front of a plan's feasible choices, with each method's point."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on devices or CI
import matplotlib.pyplot as plt  # noqa: E402

from wattcap.core.files import atomic_path
from wattcap.core.knob import format_knob
from wattcap.core.plan import Plan
from wattcap.experiments.plots import _MARKERS, _model_label  # noqa: E402

#: characters per line of the figure's title: at its font size, the 8-inch figure holds this
TITLE_WIDTH = 70


def pareto_title(plan: Plan) -> str:
    """The figure's title: the model (a user model by its file's name, as `plot-profile` names
    it), the device, the cap and the objective, wrapped to lines that fit the figure."""
    cap = "no cap" if plan.power_cap_w is None else f"cap {plan.power_cap_w:g} W"
    return textwrap.fill(f"{_model_label(plan.model)} on {plan.device}, {cap}, objective: "
                         f"{plan.objective.describe()}", TITLE_WIDTH)


def plot_pareto(plan: Plan, out: str | Path, mode_names: dict[int, str] | None = None) -> Path:
    """Write a PNG: predicted time to target against energy for the front (a staircase, each
    point labelled b and f; a power mode named by `mode_names`, id -> name, where given) and
    every method's choice. The oracle's point uses the target's r_b, the others the proxy's,
    as in the plan."""
    if not plan.pareto_front:
        raise ValueError("the plan has no Pareto front (no feasible choice) to plot")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5.5), constrained_layout=True)
    times = [p.predicted_time_s for p in plan.pareto_front]
    energies = [p.predicted_energy_j for p in plan.pareto_front]
    ax.step(times, energies, where="post", color="0.55", lw=1.2, zorder=1)
    ax.scatter(times, energies, color="0.35", s=22, zorder=2, label="Pareto front")
    for point in plan.pareto_front:
        knob = format_knob(plan.knob_kind, point.knob_value, mode_names)
        ax.annotate(f"b={point.batch_size}, {knob}",
                    (point.predicted_time_s, point.predicted_energy_j),
                    textcoords="offset points", xytext=(5, 4), fontsize=7, color="0.3")
    for method, choice in plan.choices.items():
        if choice.predicted_time_s is None or choice.predicted_energy_j is None:
            continue  # no r_b for its batch size: no point to draw
        marker, color = _MARKERS.get(method, ("x", "black"))
        where = "on the front" if choice.on_pareto_front else "off the front"
        ax.scatter([choice.predicted_time_s], [choice.predicted_energy_j], marker=marker,
                   s=260 if marker == "*" else 120, color=color, edgecolors="white",
                   linewidths=1.2, zorder=3,
                   label=f"{method}: b={choice.batch_size}, "
                         f"{format_knob(plan.knob_kind, choice.knob_value, mode_names)} "
                         f"({where})")
    ax.set_title(pareto_title(plan), fontsize=11)
    ax.set_xlabel("Predicted time to target (s)")
    ax.set_ylabel("Predicted energy to target (J)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, framealpha=0.85)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return out
