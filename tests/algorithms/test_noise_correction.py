"""The online correction's arithmetic: doubling windows of B_simple, the target-over-proxy
factor with its interval, pooling, the policy's relevance rule and the moved r_b."""

from __future__ import annotations

import math
import random

import pytest

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.noise_correction import (
    RELEVANT_FACTOR,
    CorrectionPolicy,
    corrected_vector,
    pooled_evidence,
    transfer_evidence,
)
from wattcap.algorithms.noise_windows import (
    FIRST_WINDOW_END_SAMPLES,
    NoiseScaleWindows,
    window_end,
)
from wattcap.core.noise_scale import NoiseScaleTrajectory, NoiseScaleWindow

BATCH_SIZES = [4, 8, 16, 32, 64, 128]


def _vector(b_noise: float):
    samples = {b: [2000 * (1 + b / b_noise) * f for f in (0.95, 1.0, 1.05)]
               for b in BATCH_SIZES}
    return vector_from_samples(samples, 400_000, model="digits-cnn", input_shape=[1, 8, 8],
                               dataset="proxy", task="image-classification",
                               target_accuracy=0.9, seeds=[0, 1, 2])


def _window(end: int, b: float, half_log: float) -> NoiseScaleWindow:
    return NoiseScaleWindow(samples_start=end // 2, samples_end=end, steps=32, b_simple=b,
                            b_low=b * math.exp(-half_log), b_high=b * math.exp(half_log))


def _trajectory(windows: list[NoiseScaleWindow], batch_size: int = 64) -> NoiseScaleTrajectory:
    return NoiseScaleTrajectory(batch_size=batch_size, chunk_size=batch_size // 4,
                                preconditioner="adam", confidence=0.95, windows=windows)


def test_windows_end_at_doublings_of_samples() -> None:
    assert window_end(1) == FIRST_WINDOW_END_SAMPLES
    assert window_end(FIRST_WINDOW_END_SAMPLES) == FIRST_WINDOW_END_SAMPLES
    assert window_end(FIRST_WINDOW_END_SAMPLES + 1) == 2 * FIRST_WINDOW_END_SAMPLES
    assert window_end(5000) == 8192
    with pytest.raises(ValueError):
        window_end(0)


def test_a_window_closes_when_the_run_passes_its_end_with_its_own_b_simple() -> None:
    rng = random.Random(0)
    windows = NoiseScaleWindows()
    closed = []
    samples = 0
    for _ in range(96):  # b = 32: windows (0,512] 16 steps, (512,1024] 16, (1024,2048] 32...
        samples += 32
        trace = 100.0 if samples <= 1024 else 300.0  # B_simple 100, then 300
        windows.observe(samples, 1.0 + rng.uniform(-0.2, 0.2), trace)
        window = windows.advance(samples)
        if window is not None:
            closed.append(window)
    assert [(w.samples_start, w.samples_end, w.steps) for w in closed] == [
        (0, 512, 16), (512, 1024, 16), (1024, 2048, 32)]
    assert closed[0].b_simple == pytest.approx(100, rel=0.1)
    assert closed[2].b_simple == pytest.approx(300, rel=0.1)
    for w in closed:  # an interval around the window's own value
        assert w.b_low is not None and w.b_high is not None
        assert w.b_low < w.b_simple < w.b_high
    assert windows.advance(samples) is None  # (2048, 4096] is still open, nothing in it


def test_a_window_with_too_few_measured_steps_has_no_interval() -> None:
    windows = NoiseScaleWindows()
    for step in range(1, 5):
        windows.observe(step * 128, 1.0, 50.0)
    window = windows.advance(512)
    assert window is not None and window.steps == 4 and window.b_simple == pytest.approx(50)
    assert window.b_low is None and window.b_high is None


def test_the_jackknife_interval_survives_a_block_whose_gradient_is_unresolved() -> None:
    """Noisy labels leave single blocks with |G|² ≤ 0: the window's interval still exists
    (leaving one block out keeps the others' |G|²)."""
    windows = NoiseScaleWindows()
    rng = random.Random(1)
    for step in range(1, 33):
        g = -0.5 if step <= 2 else 1.0 + rng.uniform(-0.3, 0.3)  # the first block: |G|² < 0
        windows.observe(512 + 16 * step, g, 200.0)
    window = windows.advance(1024)
    assert window is not None and window.b_simple is not None
    assert window.b_low is not None and window.b_high is not None


def test_the_factor_is_target_over_proxy_with_both_intervals() -> None:
    reference = _trajectory([_window(4096, 100.0, 0.3)])
    evidence = transfer_evidence(_window(4096, 300.0, 0.4), [reference], batch_size=128)
    assert not isinstance(evidence, str)
    assert evidence.factor == pytest.approx(3.0)
    assert math.log(evidence.factor_high / evidence.factor) == pytest.approx(0.5)  # √(.3²+.4²)
    assert evidence.reference_batch_size == 64


def test_no_evidence_without_a_matching_resolved_reference_window() -> None:
    reference = _trajectory([_window(4096, 100.0, 0.3)])
    assert "ends at 4096" in transfer_evidence(_window(8192, 300.0, 0.4), [reference], 64)
    unresolved = NoiseScaleWindow(samples_start=2048, samples_end=4096, steps=32,
                                  b_simple=300.0, b_low=None, b_high=None)
    assert "not resolved" in transfer_evidence(unresolved, [reference], 64)
    assert "no reference" in transfer_evidence(_window(4096, 1.0, 0.1), [], 64)


def test_the_nearest_batch_size_reference_is_used() -> None:
    small = _trajectory([_window(4096, 50.0, 0.2)], batch_size=16)
    large = _trajectory([_window(4096, 200.0, 0.2)], batch_size=128)
    evidence = transfer_evidence(_window(4096, 100.0, 0.2), [small, large], batch_size=32)
    assert not isinstance(evidence, str) and evidence.reference_batch_size == 16
    assert evidence.factor == pytest.approx(2.0)


def test_pooling_weights_each_window_by_its_precision() -> None:
    reference = _trajectory([_window(2048, 100.0, 0.01), _window(4096, 100.0, 0.01)])
    sharp = transfer_evidence(_window(2048, 300.0, 0.1), [reference], 64)
    vague = transfer_evidence(_window(4096, 100.0, 1.0), [reference], 64)
    pooled = pooled_evidence([sharp, vague])
    assert 2.8 < pooled.factor < 3.0  # the vague window barely moves it
    assert pooled.factor_high / pooled.factor < sharp.factor_high / sharp.factor


def test_the_policy_moves_only_on_a_relevant_difference_and_then_from_there() -> None:
    reference = _trajectory([_window(2 ** k, 100.0, 0.05) for k in range(10, 16)])
    policy = CorrectionPolicy()
    # significant (the interval excludes 1) but within the relevant factor: no move
    near = transfer_evidence(_window(1024, 100.0 * (RELEVANT_FACTOR - 0.1), 0.05),
                             [reference], 64)
    assert policy.consider(near) is None and policy.applied_factor == 1.0
    policy = CorrectionPolicy()
    far = transfer_evidence(_window(1024, 300.0, 0.05), [reference], 64)
    moved = policy.consider(far)
    assert moved is not None and policy.applied_factor == 1.0  # not until the run acts on it
    policy.apply(moved)
    assert policy.applied_factor == pytest.approx(3.0)
    # the same evidence again is not beyond the factor now applied: no second move
    again = transfer_evidence(_window(2048, 300.0, 0.05), [reference], 64)
    assert policy.consider(again) is None


def test_the_corrected_vector_moves_r_b_along_the_relation() -> None:
    proxy = _vector(10.0)
    same = corrected_vector(proxy, 1.0, "no change")
    assert [same.ratio(b) for b in BATCH_SIZES] == pytest.approx(
        [proxy.ratio(b) for b in BATCH_SIZES])
    larger = corrected_vector(proxy, 3.0, "target noisier")
    target = _vector(30.0)  # the relation at 3x the proxy's B_noise
    assert [larger.ratio(b) for b in BATCH_SIZES] == pytest.approx(
        [target.ratio(b) for b in BATCH_SIZES], rel=1e-3)
    assert larger.ratio(128) == pytest.approx(1.0)
    assert "3.00x" in larger.notes[-1]


def test_a_vector_without_b_noise_cannot_be_corrected() -> None:
    proxy = _vector(10.0).model_copy(update={"fit": None, "ratio_source": "mean"})
    with pytest.raises(ValueError, match="no B_noise"):
        corrected_vector(proxy, 2.0, "x")


def test_runs_combined_hold_their_spread_not_only_their_own_intervals() -> None:
    from wattcap.algorithms.noise_windows import combine_runs

    def run(b: float) -> NoiseScaleTrajectory:
        return _trajectory([_window(2048, b, 0.05), _window(4096, 2 * b, 0.05)])

    close = combine_runs([run(100.0), run(101.0), run(99.0)])
    apart = combine_runs([run(50.0), run(100.0), run(200.0)])
    assert close.runs == 3 and apart.runs == 3
    assert apart.windows[0].b_simple == pytest.approx(100.0)  # geometric mean
    width = lambda w: math.log(w.b_high / w.b_low)  # noqa: E731
    assert width(apart.windows[0]) > 5 * width(close.windows[0])  # the runs' spread counts
    assert width(close.windows[0]) >= 2 * 0.05 / math.sqrt(3) * 0.99  # never below their own
    lone = run(100.0)
    assert combine_runs([lone]) == lone
    unresolved = _trajectory([NoiseScaleWindow(samples_start=1024, samples_end=2048, steps=8,
                                               b_simple=None, b_low=None, b_high=None),
                              _window(4096, 200.0, 0.05)])
    mixed = combine_runs([run(100.0), unresolved])
    assert mixed.windows[0].b_low is None  # a window not every run resolved: no interval
