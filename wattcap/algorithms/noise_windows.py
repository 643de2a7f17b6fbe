"""B_simple window by window over doublings of a run's samples: the form in which a proxy's
noise scale is kept as a reference and a target's is compared with it, both measured the same
way (wattcap.algorithms.noise_correction). No torch.

A measured step belongs to the window that holds the samples trained at its end; windows are
(S/2, S] for S a power of two, the first (0, `FIRST_WINDOW_END_SAMPLES`], so two runs'
windows line up whatever their batch sizes (a run at b = 48 fills them unevenly, never
differently). B_simple grows as training goes on, so a window is short early and long late:
each holds as much of the run as the run has trained before it. The window's B_simple is the
ratio of its sums of tr(Σ) and |G|²; its interval is a delete-one-block jackknife of log B
over contiguous blocks of its steps (t with blocks - 1 degrees of freedom). The jackknife
leaves one block out at a time, so it stays defined where a single block's |G|² is not
resolved (common with noisy labels, where a block's B of its own would be undefined); a window
with fewer than `MIN_WINDOW_STEPS` measured steps states its B_simple without one.
"""

from __future__ import annotations

import math
import statistics

from scipy import stats

from wattcap.algorithms.noise_scale import GNS_CONFIDENCE, ratio_of_sums
from wattcap.core.noise_scale import NoiseScaleTrajectory, NoiseScaleWindow

#: the end of the first window, (0, FIRST_WINDOW_END_SAMPLES]: a few dozen steps at the
#: small batch sizes, enough for an interval
FIRST_WINDOW_END_SAMPLES = 512

#: blocks of a window's measured steps for its interval (t with 7 degrees of freedom: 4
#: blocks, as for a whole run, leave a window's interval too wide to tell a factor of 3)
WINDOW_BLOCKS = 8

#: measured steps a window needs for an interval (blocks of 2 at the least)
MIN_WINDOW_STEPS = 16


def window_end(samples: int) -> int:
    """The end of the window holding a step that ends at `samples` trained."""
    if samples < 1:
        raise ValueError(f"samples trained must be positive, got {samples}")
    end = FIRST_WINDOW_END_SAMPLES
    while end < samples:
        end *= 2
    return end


class NoiseScaleWindows:
    """Collects measured steps' (|G|², tr(Σ)) terms (each scale-free, as NoiseScaleTracker
    keeps them) into windows and closes each when the run has trained past its end."""

    def __init__(self, confidence: float = GNS_CONFIDENCE, blocks: int = WINDOW_BLOCKS,
                 min_steps: int = MIN_WINDOW_STEPS) -> None:
        if min_steps < 2 * blocks:
            raise ValueError(f"a window needs at least two steps per block: min_steps "
                             f"{min_steps} < 2 x {blocks} blocks")
        self.confidence = confidence
        self.blocks = blocks
        self.min_steps = min_steps
        self.windows: list[NoiseScaleWindow] = []
        self._end: int | None = None
        self._terms: list[tuple[float, float]] = []

    def observe(self, samples_after: int, gradient_sq_rel: float, trace_sigma_rel: float
                ) -> None:
        """One measured step that ended at `samples_after` trained; call `advance` after it."""
        end = window_end(samples_after)
        if self._end is not None and end != self._end:
            self._close()
        self._end = end
        self._terms.append((gradient_sq_rel, trace_sigma_rel))

    def advance(self, samples: int) -> NoiseScaleWindow | None:
        """After every step (measured or not): the window closed now that `samples` are
        trained, if one was open and the run is past its end."""
        if self._end is None or samples < self._end:
            return None
        return self._close()

    def _close(self) -> NoiseScaleWindow:
        assert self._end is not None
        terms, end = self._terms, self._end
        self._terms, self._end = [], None
        center = ratio_of_sums(terms)
        low = high = None
        if len(terms) >= self.min_steps and center is not None and center > 0:
            low, high = jackknife_interval(terms, center, self.blocks, self.confidence)
        start = 0 if end == FIRST_WINDOW_END_SAMPLES else end // 2
        window = NoiseScaleWindow(samples_start=start, samples_end=end, steps=len(terms),
                                  b_simple=center, b_low=low, b_high=high)
        self.windows.append(window)
        return window


def jackknife_interval(terms: list[tuple[float, float]], center: float, blocks: int,
                       confidence: float) -> tuple[float | None, float | None]:
    """The delete-one-block jackknife interval on B around `center` (in log B); (None, None)
    where leaving a block out leaves |G|² unresolved."""
    n = len(terms)
    bounds = [round(i * n / blocks) for i in range(blocks + 1)]
    logs = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        left_out = ratio_of_sums(terms[:lo] + terms[hi:])
        if left_out is None or left_out <= 0:
            return None, None
        logs.append(math.log(left_out))
    spread = math.sqrt((blocks - 1) / blocks * sum(
        (v - statistics.fmean(logs)) ** 2 for v in logs))
    half = stats.t.ppf(0.5 + confidence / 2, blocks - 1) * spread
    return center * math.exp(-half), center * math.exp(half)


def combine_runs(runs: list[NoiseScaleTrajectory]) -> NoiseScaleTrajectory:
    """One reference from several runs (seeds) measured alike: each window's B_simple is the
    runs' geometric mean, its half-width in log B the larger of the runs' own (their mean's:
    root-sum-square over the count) and the runs' spread (a t-interval over them), so that a
    reference does not carry one run's luck. A window that not every run resolved has no
    interval."""
    if not runs:
        raise ValueError("at least one run is needed")
    first = runs[0]
    if len(runs) == 1:
        return first
    combined = []
    for window in first.windows:
        same = [r.window_ending(window.samples_end) for r in runs]
        found = [w for w in same if w is not None and w.b_simple is not None and w.b_simple > 0]
        if len(found) < len(runs):
            combined.append(window.model_copy(update={"b_low": None, "b_high": None}))
            continue
        logs = [math.log(w.b_simple) for w in found]  # type: ignore[arg-type]
        center = math.exp(statistics.fmean(logs))
        halves = [math.log(w.b_high / w.b_simple) for w in found  # type: ignore[operator]
                  if w.b_high is not None and w.b_low is not None]
        n = len(found)
        low = high = None
        if len(halves) == n:
            within = math.sqrt(sum(h * h for h in halves)) / n
            between = (stats.t.ppf(0.5 + first.confidence / 2, n - 1)
                       * statistics.stdev(logs) / math.sqrt(n))
            half = max(within, between)
            low, high = center * math.exp(-half), center * math.exp(half)
        combined.append(NoiseScaleWindow(
            samples_start=window.samples_start, samples_end=window.samples_end,
            steps=sum(w.steps for w in found), b_simple=center, b_low=low, b_high=high))
    return first.model_copy(update={"windows": combined, "runs": len(runs)})
