"""Batch sizes the proxy did not run: r_b predicted between the proxy's batch sizes from the
large-batch relation (or interpolated in log b when r_b comes from raw means), and outside them
from the relation by default, flagged, with an uncertainty that widens with the distance
(`extrapolate=False` / `--no-extrapolate` keeps to them); baseline-2 keeps to the proxy's range
and the oracle's brute force never predicts."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import (
    _spread_within,
    doublings_outside,
    ratio_log_spread,
    ratios_for_batch_sizes,
    vector_from_samples,
)
from wattcap.algorithms.planner import Replanner, plan
from wattcap.cli import app
from wattcap.core.profile import ProfilePoint, ProfileTable

E_MIN, B_NOISE = 1000.0, 64.0
PROXY_BATCH_SIZES = (8, 64, 256)
PROFILE_BATCH_SIZES = [4, 8, 16, 32, 64, 256, 512]


def _samples(b: int, seed: int) -> float:
    # the large-batch relation, with a small seed-to-seed spread
    return E_MIN * (1 + b / B_NOISE) * (1 + 0.02 * (seed - 1))


def _vector(batch_sizes=PROXY_BATCH_SIZES, use_fit: bool = True):
    return vector_from_samples({b: [_samples(b, s) for s in range(3)] for b in batch_sizes},
                               sample_budget=100_000, use_fit=use_fit, model="m",
                               input_shape=[3, 8, 8], dataset="proxy",
                               task="image-classification", target_accuracy=0.8,
                               seeds=[0, 1, 2])


def _profile(fast_b: int) -> ProfileTable:
    """One clock; every batch size equally fast per sample except `fast_b`, twice as fast."""
    points = [ProfilePoint(batch_size=b, knob_value=900_000_000, peak_power_w=3.0,
                           avg_power_w=2.5, seconds_per_sample=(0.5 if b == fast_b else 1.0)
                           * 1e-3, steps=10, readings=5)
              for b in PROFILE_BATCH_SIZES]
    return ProfileTable(device="d", device_kind="emulated", sensor_rail="VDD_IN",
                        sensor_period_s=0.05, model="m", input_shape=[3, 8, 8],
                        batch_sizes=PROFILE_BATCH_SIZES, knob_values=[900_000_000],
                        max_batch_size=512, mode="exhaustive", points=points,
                        points_measured=len(points), profiling_device_s=1.0,
                        power_noise_w=0.0)


def test_between_the_proxys_batch_sizes_r_b_comes_from_the_fit() -> None:
    vector = _vector()
    assert vector.ratio_source == "fit"
    b_noise = vector.fit.b_noise
    ratios, samples, notes = ratios_for_batch_sizes(vector, PROFILE_BATCH_SIZES,
                                                    extrapolate=False)
    for b in (16, 32):
        assert ratios[b] == pytest.approx((b_noise + b) / (b_noise + 256))
        assert samples[b] == pytest.approx(ratios[b] * vector.samples(256))
    assert ratios[4] is None and ratios[512] is None  # outside [8, 256]: not chosen
    assert ratios[64] == vector.ratio(64)  # a measured batch size keeps its own r_b
    assert any("b = [16, 32]" in n and "predicted" in n for n in notes)
    assert any("b = [4, 512]" in n and "not chosen" in n and "--no-extrapolate" in n
               for n in notes)
    extrapolated, _, notes = ratios_for_batch_sizes(vector, PROFILE_BATCH_SIZES)  # default
    assert extrapolated[512] == pytest.approx((b_noise + 512) / (b_noise + 256))
    assert extrapolated[4] == pytest.approx((b_noise + 4) / (b_noise + 256))
    assert any("extrapolated" in n and "b = [4, 512]" in n and "widens" in n for n in notes)


def test_from_raw_means_r_b_is_interpolated_in_log_b_and_never_extrapolated() -> None:
    vector = _vector(use_fit=False)
    assert vector.ratio_source == "mean"
    ratios, _, notes = ratios_for_batch_sizes(vector, PROFILE_BATCH_SIZES, extrapolate=True)
    r8, r64 = vector.ratio(8), vector.ratio(64)
    weight = math.log(16 / 8) / math.log(64 / 8)
    assert ratios[16] == pytest.approx(r8 + weight * (r64 - r8))
    assert ratios[512] is None
    assert any("no fitted relation" in n for n in notes)


def test_the_plan_chooses_a_batch_size_the_proxy_did_not_run() -> None:
    vector = _vector()
    result = plan(_profile(fast_b=32), None, efficiency=vector, margin_sigmas=0)
    chosen = result.choices["wattcap"]
    assert chosen.batch_size == 32
    assert chosen.efficiency_ratio == pytest.approx(
        (vector.fit.b_noise + 32) / (vector.fit.b_noise + 256))
    assert any("predicted for b = [16, 32]" in n for n in result.notes)
    # 512 outside the proxy's range: a candidate by default, and flagged when chosen
    assert plan(_profile(fast_b=512), None, efficiency=vector, margin_sigmas=0,
                extrapolate=False).choices["wattcap"].batch_size != 512
    extrapolated = plan(_profile(fast_b=512), None, efficiency=vector, margin_sigmas=0)
    # at equal time per sample the relation favours the smallest batch size: b=4, below the
    # proxy's range, predicted r = (B + 4) / (B + 256) ~ 0.21 against 512's 1.8 x 0.5
    assert extrapolated.choices["wattcap"].batch_size == 4
    assert any("wattcap's choice b=4 lies 1 doubling(s) beyond the batch sizes run on proxy"
               in n for n in extrapolated.notes)
    # baseline-2 is the best *proxy* batch: never one the proxy did not reach
    assert extrapolated.choices["baseline-2"].batch_size <= max(PROXY_BATCH_SIZES)
    # the oracle is a brute force over the target's measured runs: it never predicts
    oracle = plan(_profile(fast_b=32), None, efficiency=vector, margin_sigmas=0,
                  target_efficiency=vector).choices["fastest"]
    assert oracle.batch_size in PROXY_BATCH_SIZES


def test_plan_extrapolate_from_the_command_line(tmp_path) -> None:
    _profile(fast_b=4).save(tmp_path / "p.json")
    _vector().save(tmp_path / "e.json")
    runner = CliRunner()
    args = ["plan", "--profile", str(tmp_path / "p.json"), "--efficiency",
            str(tmp_path / "e.json"), "--margin-sigmas", "0", "--power-cap", "none"]
    narrow = runner.invoke(app, [*args, "--no-extrapolate"])
    assert narrow.exit_code == 0, narrow.output
    assert "--no-extrapolate" in narrow.output
    wide = runner.invoke(app, [*args, "--json"])
    assert wide.exit_code == 0, wide.output
    assert '"batch_size": 4' in wide.stdout


def test_baseline_1_stands_when_the_proxy_never_ran_its_batch_size(tmp_path) -> None:
    """Item 7: the practice's choice (the largest batch at the safe clock) needs no r_b; a
    missing one only makes its predicted time unknown, and every output says so."""
    from wattcap.core.plan import Plan

    result = plan(_profile(fast_b=32), None, efficiency=_vector(), margin_sigmas=0,
                  extrapolate=False)
    practice = result.choices["baseline-1"]
    assert practice.batch_size == 512  # outside what the proxy ran: no r_b
    assert practice.predicted_time_s is None and practice.efficiency_ratio is None
    assert "baseline-1" not in result.unavailable
    assert any("baseline-1's predicted time is unknown" in n for n in result.notes)
    assert result.speedup("baseline-1") is None
    result.save(tmp_path / "plan.json")
    assert Plan.load(tmp_path / "plan.json").choices["baseline-1"].predicted_time_s is None
    _profile(fast_b=32).save(tmp_path / "p.json")
    _vector().save(tmp_path / "e.json")
    args = ["plan", "--profile", str(tmp_path / "p.json"), "--efficiency",
            str(tmp_path / "e.json"), "--margin-sigmas", "0", "--power-cap", "none",
            "--no-extrapolate"]
    table = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    row = next(line for line in table.output.splitlines() if "baseline-1" in line)
    assert "512" in row and "unknown" in row
    summary = CliRunner().invoke(app, [*args, "--json"])
    assert '"speedup_of_wattcap": null' in summary.stdout


def test_an_extrapolated_r_b_is_less_certain_the_farther_it_lies() -> None:
    vector = _vector()
    within = ratio_log_spread(vector, 32)  # between the proxy's batch sizes: the relation's
    one, two = ratio_log_spread(vector, 512), ratio_log_spread(vector, 1024)
    assert doublings_outside(vector, 32) == 0 and doublings_outside(vector, 1024) == 2
    assert doublings_outside(vector, 2) == 2  # below the range: from its smallest, 8
    assert within > 0 and one > 0
    # the relation's own spread at b, and the spread across the range once per doubling
    across = _spread_within(vector, 8)
    assert across > 0
    assert one == pytest.approx(math.hypot(_spread_within(vector, 512), across))
    assert two == pytest.approx(math.hypot(_spread_within(vector, 1024), 2 * across))
    assert two > one > _spread_within(vector, 512)
    # so a plan at a risk quantile distrusts a far batch size more than a near one
    at_value = Replanner(_profile(fast_b=32), vector, margin_sigmas=0).ratios
    at_risk = Replanner(_profile(fast_b=32), vector, margin_sigmas=0, risk=0.9).ratios
    assert at_risk[512] / at_value[512] > at_risk[32] / at_value[32] > 1
