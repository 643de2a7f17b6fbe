"""Do two methods' measured times differ beyond the noise of their seeds?

Training outcomes are noisy: the samples a run needs to reach the target vary from seed to
seed by more than the difference between two neighbouring batch sizes. A table that ranks
methods by their means must say where the means do not separate. The test is Welch's t-test on
the logarithm of the times (times are positive and their spread grows with their size, so a
ratio is what is compared), two-sided at `alpha`; with a single seed per method nothing can be
said about noise, and the comparison says so rather than pretending.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

#: two-sided level of the test
ALPHA = 0.05


@dataclass(frozen=True)
class TimeComparison:
    """`a` against `b`: the ratio of mean times and whether the seeds separate them."""

    ratio: float
    seeds_a: int
    seeds_b: int
    p_value: float | None
    #: True: the difference is beyond noise; False: within noise; None: too few seeds to say
    separated: bool | None

    @property
    def label(self) -> str:
        """'1.42x', '1.05x (within noise)' or '1.05x (1 seed: no spread)'."""
        return self.ratio_label()

    def ratio_label(self, digits: int = 2) -> str:
        """`label` with the ratio to `digits` decimals: 3 ('1.004x (within noise)') where a
        difference of 0.4 % must not read as none."""
        text = f"{self.ratio:.{digits}f}x"
        if self.separated is None:
            return f"{text} (1 seed: no spread)"
        return text if self.separated else f"{text} (within noise)"


def compare_times(a: list[float], b: list[float], alpha: float = ALPHA) -> TimeComparison:
    """Mean of `a` over mean of `b`, and whether the difference is beyond the seeds' noise."""
    if not a or not b:
        raise ValueError("each side needs at least one measured time")
    if min(a + b) <= 0:
        raise ValueError("times must be positive")
    ratio = statistics.fmean(a) / statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:
        return TimeComparison(ratio, len(a), len(b), None, None)
    log_a, log_b = [math.log(t) for t in a], [math.log(t) for t in b]
    if statistics.pstdev(log_a) == 0 and statistics.pstdev(log_b) == 0:
        # identical runs on both sides (the same configuration): equal means are within noise,
        # different ones are exactly different
        same = statistics.fmean(log_a) == statistics.fmean(log_b)
        return TimeComparison(ratio, len(a), len(b), 1.0 if same else 0.0, not same)
    from scipy.stats import ttest_ind

    p_value = float(ttest_ind(log_a, log_b, equal_var=False).pvalue)
    return TimeComparison(ratio, len(a), len(b), p_value, p_value < alpha)


def mean_std_label(values: list[float], digits: int = 1, seeds: bool = True) -> str:
    """'12.3 ± 0.4 (3 seeds)', or '12.3 (1 seed)': one seed shows no spread, not a false
    zero (`seeds=False`: without the count, for a table that states it once)."""
    if not values:
        return "—"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}" + (" (1 seed)" if seeds else "")
    spread = f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}"
    return spread + (f" ({len(values)} seeds)" if seeds else "")


def signed_pct(value: float) -> str:
    """'+6.5', '-3.1' or '+0.0': a percentage to one decimal with its sign, never '-0.0' (a
    ratio of 0.9999 is no loss)."""
    shown = round(value, 1)
    return f"{0.0 if shown == 0 else shown:+.1f}"
