"""What a federation did: time and energy to the target per method over
seeds (mean ± std), each client's share of the energy, and a per-client timeline plot."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on devices or CI
import matplotlib.pyplot as plt  # noqa: E402

from wattcap.core.files import atomic_path  # noqa: E402
from wattcap.core.knob import format_knob  # noqa: E402
from wattcap.experiments.federation import FleetRun  # noqa: E402

#: colours of a client's round in the timeline
STATUS_COLOURS = {"aggregated": "tab:blue", "straggler": "tab:orange", "dropped": "tab:red"}


@dataclass(frozen=True)
class MethodSummary:
    """One method over its seeds."""

    method: str
    runs: int
    reached: int
    time_s: tuple[float, float]
    energy_j: tuple[float, float]
    rounds: tuple[float, float]

    @staticmethod
    def text(pair: tuple[float, float], digits: int = 1) -> str:
        """"mean ± std" (std 0 with one seed)."""
        return f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(runs: Sequence[FleetRun]) -> list[MethodSummary]:
    """Per method: runs, how many reached the target, time, energy and rounds (mean ± std over
    the runs that reached it; over all where none did)."""
    out = []
    for method in dict.fromkeys(r.method for r in runs):
        mine = [r for r in runs if r.method == method]
        counted = [r for r in mine if r.reached] or mine
        out.append(MethodSummary(method, len(mine), sum(r.reached for r in mine),
                                 _mean_std([r.time_s for r in counted]),
                                 _mean_std([r.energy_j for r in counted]),
                                 _mean_std([float(len(r.rounds)) for r in counted])))
    return out


def plot_timeline(run: FleetRun, out: str | Path) -> Path:
    """Each client's rounds on the fleet's time axis: busy (training and link, coloured by how
    the server counted it), waiting (grey), sitting out (hatched), with its batch size; the
    global accuracy above."""
    names = list(dict.fromkeys(c.name for r in run.rounds for c in r.clients))
    fig, (acc_ax, ax) = plt.subplots(2, 1, figsize=(10, 1.2 + 0.6 * len(names) + 2),
                                     sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    acc_ax.plot([r.start_s + r.round_s for r in run.rounds], [r.accuracy for r in run.rounds],
                marker="o")
    acc_ax.axhline(run.target_accuracy, color="grey", linestyle="--", linewidth=1)
    acc_ax.set_ylabel("global accuracy")
    for row, name in enumerate(names):
        for r in run.rounds:
            c = next((c for c in r.clients if c.name == name), None)
            if c is None:
                continue
            if c.status == "sat out":
                ax.barh(row, r.round_s, left=r.start_s, color="none", edgecolor="grey",
                        hatch="//")
                continue
            if c.busy_s > 0:  # still on its previous round's late update
                ax.barh(row, min(c.busy_s, r.round_s), left=r.start_s,
                        color=STATUS_COLOURS["straggler"], alpha=0.4)
            busy = max(0.0, min(c.compute_s + c.comm_s, r.round_s - c.busy_s))
            ax.barh(row, busy, left=r.start_s + c.busy_s, color=STATUS_COLOURS[c.status])
            ax.barh(row, c.waiting_s, left=r.start_s + c.busy_s + busy, color="lightgrey")
            if c.batch_size is not None and busy > 0.3 * run.time_s / max(len(run.rounds), 1):
                label = f"{c.batch_size}" + ("" if c.knob_value is None else
                                             f" · {format_knob(c.knob_kind, c.knob_value)}")
                label += "" if c.cap_w is None else f" · ≤{c.cap_w:g} W"
                ax.text(r.start_s + c.busy_s + busy / 2, row, label, ha="center",
                        va="center", fontsize=6, color="white")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("fleet time (s, emulated devices)")
    ax.set_title("busy (blue: aggregated, orange: straggler, red: dropped), waiting (grey), "
                 "sitting out (hatched); labels: batch size · knob · cap", fontsize=8)
    fig.suptitle(f"{run.model}, {run.method}, seed {run.seed}: "
                 + (f"target reached in {run.time_s:.1f} s" if run.reached
                    else "target not reached"))
    out = Path(out)
    fig.tight_layout()
    with atomic_path(out) as tmp:  # the user's file: atomic, with the umask's mode
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return out


__all__ = ["MethodSummary", "plot_timeline", "summarize"]
