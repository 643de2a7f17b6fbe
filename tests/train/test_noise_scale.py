"""The gradient noise scale: exact on a problem where B_simple is known, preconditioned like
Pollux, turned into an efficiency vector that plans, measured on a proxy and during a run."""

from __future__ import annotations

import math

import pytest
import torch

from wattcap.algorithms.noise_scale import (
    NoiseScaleTracker,
    gns_efficiency_vector,
    simple_noise_terms,
)
from wattcap.core.efficiency import EfficiencyVector
from wattcap.runtime.noise_scale import GradientNoiseScale, adam_preconditioner, chunked_backward
from wattcap.train.noise_scale import estimate_efficiency_gns

D, SIGMA2 = 10, 4.0


class _Regression:
    """y = x·w* + ε, x ~ N(0, I_d), ε ~ N(0, σ²), loss ½(x·w − y)² at a fixed w = w* + δ.

    Per-sample gradient g = x(xᵀδ − ε): G = δ and Σ = δδᵀ + (|δ|² + σ²) I (Isserlis), so
    tr(Σ) = |δ|² + d(|δ|² + σ²) and diag(Σ)_i = δ_i² + |δ|² + σ²."""

    def __init__(self, seed: int = 0) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.w_star = torch.randn(D, generator=self.gen)
        delta = torch.randn(D, generator=self.gen)
        self.delta = delta / delta.norm()
        self.model = torch.nn.Linear(D, 1, bias=False)
        with torch.no_grad():
            self.model.weight.copy_((self.w_star + self.delta)[None])

    def loss_of(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((self.model(x).squeeze(1) - y) ** 2).mean()

    def batch(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, D, generator=self.gen)
        return x, x @ self.w_star + math.sqrt(SIGMA2) * torch.randn(n, generator=self.gen)

    def exact_b_simple(self, p_sq: torch.Tensor | None = None) -> float:
        """tr(PΣP) / |PG|² for a diagonal preconditioner with P² = p_sq (None: P = I)."""
        p_sq = torch.ones(D) if p_sq is None else p_sq
        d2 = self.delta.square()
        sigma_diag = d2 + d2.sum() + SIGMA2
        # off-diagonal δδᵀ terms do not enter the trace of PΣP for a diagonal P
        return float((p_sq * sigma_diag).sum() / (p_sq * d2).sum())


def test_estimators_invert_the_expected_norms() -> None:
    """E|G_b|² = |G|² + tr(Σ)/b at both batch sizes gives back |G|² and tr(Σ) exactly."""
    g2, trace = 3.0, 500.0
    small, big = g2 + trace / 8, g2 + trace / 128
    assert simple_noise_terms(small, big, 8, 128) == pytest.approx((g2, trace))
    with pytest.raises(ValueError, match="b_small < b_big"):
        simple_noise_terms(small, big, 128, 8)


def test_recovers_b_noise_of_linear_regression_with_gaussian_noise() -> None:
    problem = _Regression()
    exact = problem.exact_b_simple()
    assert exact == pytest.approx(1 + D + D * SIGMA2)  # |δ| = 1: 1 + d + dσ²
    optimizer = torch.optim.SGD(problem.model.parameters(), lr=0.0)  # w stays where B is known
    gns = GradientNoiseScale(problem.model, optimizer, chunk_size=8)
    for _ in range(300):
        optimizer.zero_grad()
        assert gns.backward(problem.loss_of, *problem.batch(128))
        optimizer.step()
    estimate = gns.estimate()
    assert estimate.preconditioner == "none" and estimate.steps == 300
    assert (estimate.b_small, estimate.b_big) == (8, 128)
    assert estimate.b_noise == pytest.approx(exact, rel=0.1)
    assert estimate.b_noise_low < exact < estimate.b_noise_high
    # every block on its own lands near the truth too
    assert all(b == pytest.approx(exact, rel=0.2) for b in estimate.block_b_noise)


def test_preconditioned_noise_scale_is_the_one_of_the_scaled_gradients() -> None:
    """With weights P², the measured B is tr(PΣP)/|PG|², not the raw one."""
    problem = _Regression(seed=1)
    p_sq = 1 / (problem.delta.square() + 0.01)  # weighs the directions G hardly points in
    exact, raw = problem.exact_b_simple(p_sq), problem.exact_b_simple()
    assert abs(exact / raw - 1) > 0.2  # the preconditioner matters on this problem
    tracker = NoiseScaleTracker(ema_decay=0.99)
    params = list(problem.model.parameters())
    for _ in range(300):
        for p in params:
            p.grad = None
        norms = chunked_backward(params, problem.loss_of, *problem.batch(256), chunks=16,
                                 weights=[p_sq[None]])
        tracker.observe(norms.small_sq, norms.big_sq, norms.b_small, norms.b_big)
    assert tracker.b_simple() == pytest.approx(exact, rel=0.1)


def test_chunked_backward_leaves_the_batch_gradient() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))

    def loss_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(model(a), b)

    loss_of(x, y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    norms = chunked_backward(list(model.parameters()), loss_of, x, y, chunks=4)
    for p, g in zip(model.parameters(), plain, strict=True):
        torch.testing.assert_close(p.grad, g)
    assert norms.big_sq == pytest.approx(sum(float(g.square().sum()) for g in plain), rel=1e-5)
    assert norms.small_sq > norms.big_sq  # small batches are noisier
    with pytest.raises(ValueError, match="equal chunks"):
        chunked_backward(list(model.parameters()), loss_of, x, y, chunks=5)


def test_adam_preconditioner_follows_the_second_moments() -> None:
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-6)
    params = list(model.parameters())
    assert adam_preconditioner(optimizer, params) is None  # no second moments yet
    model(torch.randn(8, 4)).pow(2).mean().backward()
    optimizer.step()
    weights = adam_preconditioner(optimizer, params)
    for p, w in zip(params, weights, strict=True):
        v_hat = optimizer.state[p]["exp_avg_sq"] / (1 - 0.99)
        torch.testing.assert_close(w, 1 / (v_hat.sqrt() + 1e-6) ** 2)


def test_measuring_with_adam_starts_after_its_first_step() -> None:
    problem = _Regression(seed=2)
    optimizer = torch.optim.Adam(problem.model.parameters(), lr=0.0)
    gns = GradientNoiseScale(problem.model, optimizer, chunk_size=8, ema_decay=0.99)
    measured = []
    for _ in range(300):
        optimizer.zero_grad()
        measured.append(gns.backward(problem.loss_of, *problem.batch(128)))
        optimizer.step()
    assert measured[0] is False and all(measured[1:])
    estimate = gns.estimate()
    assert estimate.preconditioner == "adam" and estimate.warmup_steps == 1
    # Adam's P = 1/sqrt(v̂) settles to 1/sqrt(E g_B²); B is that preconditioned noise scale
    p = problem.model.weight
    v_hat = optimizer.state[p]["exp_avg_sq"] / (1 - 0.999 ** optimizer.state[p]["step"])
    p_sq = (1 / (v_hat.sqrt() + 1e-8)).square()[0]
    exact = problem.exact_b_simple(p_sq)
    assert estimate.b_noise == pytest.approx(exact, rel=0.1)
    assert abs(problem.exact_b_simple() / exact - 1) > 0.3  # and it is not the raw one


def test_unresolved_gradient_means_every_batch_size_is_as_efficient() -> None:
    tracker = NoiseScaleTracker()
    for _ in range(8):  # the big batch's norm is what pure noise would give: |G|² = 0 or less
        tracker.observe(small_sq=1.0, big_sq=1.0 / 16 * 0.9, b_small=8, b_big=128)
    estimate = tracker.estimate(samples=1024)
    assert estimate.b_noise is None and estimate.b_noise_high is None
    assert estimate.ratio(4, 128) == 1.0 and "unbounded" in estimate.describe()
    with pytest.raises(ValueError, match="no step was measured"):
        NoiseScaleTracker().estimate(samples=0)


def _estimate(b_noise: float = 40.0):
    tracker = NoiseScaleTracker()
    g2 = 1.0
    for i in range(12):  # exact norms for B = b_noise, with a little spread between steps
        trace = b_noise * g2 * (1 + 0.05 * (-1) ** i)
        tracker.observe(g2 + trace / 8, g2 + trace / 128, 8, 128)
    return tracker.estimate(samples=1536, warmup_steps=1, preconditioner="adam")


def test_gns_vector_has_the_relation_and_survives_its_file(tmp_path) -> None:
    estimate = _estimate()
    assert estimate.b_noise == pytest.approx(40.0, rel=0.05)
    vector = gns_efficiency_vector(
        estimate, (4, 8, 16, 32, 64, 128), model="digits32-cnn", input_shape=[1, 32, 32],
        dataset="digits-rotated-32", task="image-classification", target_accuracy=0.6)
    b = estimate.b_noise
    for entry in vector.entries:
        assert entry.source == "gns"
        assert entry.ratio == pytest.approx((1 + entry.batch_size / b) / (1 + 128 / b))
        assert entry.ratio_low <= entry.ratio <= entry.ratio_high
    assert vector.ratio(128) == 1.0 and vector.fit is None and vector.ratio_source == "gns"
    assert any("gradient noise scale" in note for note in vector.ratio_notes())
    path = vector.save(tmp_path / "gns.json")
    again = EfficiencyVector.load(path)
    assert again.noise_scale == estimate and again.ratio(4) == vector.ratio(4)
    # a vector claiming GNS without saying how it was measured is refused
    with pytest.raises(ValueError, match="gradient noise scale"):
        EfficiencyVector.model_validate(vector.model_dump() | {"noise_scale": None})


def test_gns_vector_plans(nano_resnet18_profile, nano_reference_profiles) -> None:
    from wattcap.algorithms.planner import plan

    small_noise = gns_efficiency_vector(
        _estimate(b_noise=4.0), nano_resnet18_profile.batch_sizes, model="resnet18",
        input_shape=[3, 32, 32], dataset="proxy", task="image-classification",
        target_accuracy=0.6)
    result = plan(nano_resnet18_profile, None, efficiency=small_noise,
                  reference_profiles=nano_reference_profiles)
    without = plan(nano_resnet18_profile, None, reference_profiles=nano_reference_profiles)
    # B_noise = 4: a batch of 128 needs ~26x the samples of b=4; the plan moves down from
    # the pure-throughput choice
    assert result.choices["wattcap"].batch_size < without.choices["wattcap"].batch_size
    assert any("gradient noise scale" in note for note in result.notes)


def test_estimate_on_a_proxy_counts_its_compute() -> None:
    torch.manual_seed(0)
    vector = estimate_efficiency_gns(
        "digits-cnn", "digits", None, batch_sizes=(8, 16, 32, 64), sample_budget=768,
        lr_ref=1e-2, batch_size_ref=32)
    assert vector.ratio_source == "gns" and vector.training_samples == 768
    assert vector.noise_scale.b_small == 8 and vector.noise_scale.b_big == 64
    assert vector.noise_scale.steps == 11  # 12 steps of 64, the first before Adam's moments
    assert vector.target_accuracy_source == "reached" and 0 < vector.target_accuracy <= 1
    assert [e.batch_size for e in vector.entries] == [8, 16, 32, 64]
    with pytest.raises(ValueError, match="two batch sizes"):
        estimate_efficiency_gns("digits-cnn", "digits", batch_sizes=(16,), sample_budget=256)


def test_raw_measurement_with_adam_is_the_unpreconditioned_noise_scale() -> None:
    problem = _Regression(seed=2)
    optimizer = torch.optim.Adam(problem.model.parameters(), lr=0.0)
    gns = GradientNoiseScale(problem.model, optimizer, chunk_size=8, ema_decay=0.99,
                             precondition=False)
    for _ in range(300):
        optimizer.zero_grad()
        gns.backward(problem.loss_of, *problem.batch(128))
        optimizer.step()
    estimate = gns.estimate()
    assert estimate.preconditioner == "none" and estimate.warmup_steps == 0
    assert estimate.b_noise == pytest.approx(problem.exact_b_simple(), rel=0.1)
