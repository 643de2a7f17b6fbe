"""Rich tables shared by the command line and the demo."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from wattcap.core.efficiency import EfficiencyVector


def efficiency_table(vector: EfficiencyVector) -> Table:
    """An efficiency vector: samples per seed, E(b) used, r_b with its interval and source."""
    if vector.noise_scale is not None:
        return _gns_table(vector)
    how = "given" if vector.target_accuracy_source == "given" else vector.target_accuracy_rule
    metric = vector.target_metric
    target = (f"{vector.target_accuracy:.2%}" if metric.is_accuracy
              else metric.describe(vector.target_accuracy))
    table = Table(title=f"r_b of {vector.model} on {vector.dataset} (proxy target {target}, "
                        f"{how}; {vector.runs_label()})")
    for column in ("batch", "samples to target per run", "E(b) used", "r_b", "95% interval",
                   "from"):
        table.add_column(column, justify="right")
    for e in vector.entries:
        per_seed = ", ".join("missed" if v is None else f"{v:.0f}" for v in e.samples_per_seed)
        interval = ("" if e.ratio_low is None or e.ratio_high is None
                    else f"{e.ratio_low:.2f}-{e.ratio_high:.2f}")
        table.add_row(str(e.batch_size), per_seed, f"{e.samples:.0f}", f"{e.ratio:.3f}",
                      interval, e.source)
    return table


def _gns_table(vector: EfficiencyVector) -> Table:
    """A vector from the gradient noise scale: r_b with its interval per batch size (no
    samples to target: GNS measures none)."""
    reached = vector.target_accuracy_source == "reached"
    table = Table(title=f"r_b of {vector.model} on {vector.dataset} from the gradient noise "
                        f"scale (test accuracy {vector.target_accuracy:.2%} "
                        f"{'reached' if reached else 'target'}; {vector.training_samples} "
                        "samples trained)")
    for column in ("batch", "r_b", "95% interval", "from"):
        table.add_column(column, justify="right")
    for e in vector.entries:
        interval = ("" if e.ratio_low is None or e.ratio_high is None
                    else f"{e.ratio_low:.2f}-{e.ratio_high:.2f}")
        table.add_row(str(e.batch_size), f"{e.ratio:.3f}", interval, e.source)
    return table
