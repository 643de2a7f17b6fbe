"""The time/energy Pareto front of a plan's feasible choices, with each method's point."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on devices or CI
import matplotlib.pyplot as plt  # noqa: E402

from wattcap.core.files import atomic_path
from wattcap.core.plan import Plan
from wattcap.experiments.plots import _MARKERS  # noqa: E402


def plot_pareto(plan: Plan, out: str | Path) -> Path:
    """Write a PNG: predicted time to target against energy for the front (a staircase, each
    point labelled b and f) and every method's choice. The oracle's point uses the target's
    r_b, the others the proxy's, as in the plan."""
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
        ax.annotate(f"b={point.batch_size}, {plan.describe_knob(point.knob_value)}",
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
                         f"{plan.describe_knob(choice.knob_value)} ({where})")
    cap = "no cap" if plan.power_cap_w is None else f"cap {plan.power_cap_w:g} W"
    ax.set_title(f"{plan.model} on {plan.device}, {cap}, objective: {plan.objective.describe()}")
    ax.set_xlabel("Predicted time to target (s)")
    ax.set_ylabel("Predicted energy to target (J)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, framealpha=0.85)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return out
