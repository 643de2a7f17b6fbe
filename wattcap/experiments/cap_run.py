"""The report of a run under a moving cap: power against the cap, the GPU frequency and the
batch size over the run's time, with the pauses shaded (from the run record's timeline and
segments)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on devices or CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from wattcap.core.files import atomic_path
from wattcap.core.run import RunRecord


def plot_cap_run(record: RunRecord, out: str | Path, title: str | None = None) -> Path:
    """Write a PNG of three panels sharing the run's time axis: measured power (mean and
    peak per bin; the power supply's own draw where the cap source reads one, a battery's)
    with the cap as a step line; the frequency in MHz; the batch size. Paused
    stretches are shaded. Raises ValueError for a record without a timeline (a run under a
    constant cap)."""
    out = Path(out)
    fig = cap_run_figure(record, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return out


def cap_run_figure(record: RunRecord, title: str | None = None) -> Figure:
    """The figure `plot_cap_run` writes (the caller closes it)."""
    line = record.timeline
    if line is None or not line.t_s:
        raise ValueError("the run record has no cap timeline: plot_cap_run is for runs under a "
                         "moving cap (power_cap=a cap source)")
    fig, (ax_power, ax_freq, ax_batch) = plt.subplots(
        3, 1, figsize=(9, 6.5), sharex=True, constrained_layout=True,
        gridspec_kw={"height_ratios": [2.2, 1, 1]})
    t = line.t_s
    ax_power.plot(t, line.peak_power_w, color="tab:orange", lw=0.6, alpha=0.6,
                  label="peak reading")
    ax_power.plot(t, line.power_w, color="tab:red", lw=1.0, label="power (mean)")
    if any(v is not None for v in line.supply_power_w):  # a battery's own draw, the whole system
        ax_power.plot(t, [float("nan") if v is None else v for v in line.supply_power_w],
                      color="tab:gray", lw=1.0, ls=":", label="supply draw")
    caps = [c if c is not None else float("nan") for c in line.cap_w]
    ax_power.step(t, caps, where="pre", color="black", lw=1.4, label="cap")
    ax_power.set_ylabel("W")
    ax_freq.step(t, [f / 1e6 for f in line.frequency_hz], where="pre", color="tab:blue")
    ax_freq.set_ylabel("GPU MHz")
    ax_batch.step(t, line.batch_size, where="pre", color="tab:green")
    ax_batch.set_yscale("log", base=2)
    ax_batch.set_ylabel("batch size")
    ax_batch.set_xlabel("run time (device seconds, pauses included)")
    for index, segment in enumerate(s for s in record.segments if s.paused):
        for ax in (ax_power, ax_freq, ax_batch):
            ax.axvspan(segment.start_s, segment.end_s, color="0.85", zorder=0,
                       label="paused" if ax is ax_power and index == 0 else None)
    reached = record.time_to_accuracy_s
    if reached is not None:
        for ax in (ax_power, ax_freq, ax_batch):
            ax.axvline(reached, color="tab:purple", ls="--", lw=1,
                       label="target reached" if ax is ax_power else None)
    for ax in (ax_power, ax_freq, ax_batch):
        ax.grid(alpha=0.3)
    ax_power.legend(fontsize=8, ncol=5, loc="lower left", bbox_to_anchor=(0.0, 1.0),
                    frameon=False)
    outcome = (f"target reached in {reached:.1f} s" if reached is not None
               else "target not reached")
    fig.suptitle(textwrap.fill(title or f"{record.model} on {record.device}, "
                               f"{record.cap_source or 'moving cap'}: {outcome}", 100),
                 fontsize=10)
    return fig


__all__ = ["cap_run_figure", "plot_cap_run"]
