"""A choice robust to a proxy whose critical batch size does not transfer: scenarios move the
proxy's B_noise within a stated factor, and the choice minimises the worst regret over them."""

from __future__ import annotations

import itertools
import random

import pytest

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import Selector, plan
from wattcap.algorithms.transfer import (
    TransferRule,
    minimax_regret_choice,
    transfer_scenarios,
)
from wattcap.core.objective import Objective
from wattcap.core.profile import ProfilePoint, ProfileTable

F_HZ = 900_000_000
B_NOISE = 32.0
REF = 128


def relation(b_noise: float, b: int) -> float:
    return (b_noise + b) / (b_noise + REF)


def frontier(seconds: dict[int, float]) -> dict[int, ProfilePoint]:
    return {b: ProfilePoint(batch_size=b, knob_value=F_HZ, peak_power_w=3.0, avg_power_w=2.5,
                            seconds_per_sample=s, steps=10, readings=5)
            for b, s in seconds.items()}


# per-sample times where the proxy's own choice is b=128, narrowly (costs 0.25, 0.24, 0.235)
SECONDS = {8: 1.0, 32: 0.6, 128: 0.235}
RATIOS: dict[int, float | None] = {b: relation(B_NOISE, b) for b in SECONDS}


def worst_regret(b: int, factor: float, seconds: dict[int, float]) -> float:
    """b's worst T/T(best) over targets B' in [B/K, B*K], on a fine grid, from the relation
    itself (independent of the module's scenarios)."""
    worst = 1.0
    for i in range(-200, 201):
        b_prime = B_NOISE * factor ** (i / 200)
        cost = {c: s * relation(b_prime, c) for c, s in seconds.items()}
        worst = max(worst, cost[b] / min(cost.values()))
    return worst


def test_the_middle_scenario_is_the_proxy_and_the_ends_follow_the_relation() -> None:
    scenarios = transfer_scenarios(RATIOS, B_NOISE, REF, factor=3.0)
    assert len(scenarios) % 2 == 1
    b_mid, middle = scenarios[len(scenarios) // 2]
    assert b_mid == pytest.approx(B_NOISE) and middle == pytest.approx(RATIOS)
    (b_low, low), (b_high, high) = scenarios[0], scenarios[-1]
    assert b_low == pytest.approx(B_NOISE / 3) and b_high == pytest.approx(B_NOISE * 3)
    for b in SECONDS:  # a proxy that follows the relation moves exactly along it
        assert low[b] == pytest.approx(relation(B_NOISE / 3, b))
        assert high[b] == pytest.approx(relation(B_NOISE * 3, b))
    # a batch size without an r_b stays without one
    assert all(r[64] is None for _, r in transfer_scenarios({64: None, 128: 1.0}, 32, 128, 2))


def test_the_robust_choice_hedges_where_the_proxys_own_risks_most() -> None:
    robust = minimax_regret_choice(frontier(SECONDS),
                                   transfer_scenarios(RATIOS, B_NOISE, REF, factor=3.0))
    assert robust is not None
    assert robust.nominal.batch_size == 128  # Algorithm 1 on the proxy's r_b
    assert robust.point.batch_size == 32  # the hedge
    # checked against the relation on a fine grid: no batch size has a smaller worst regret,
    # and the proxy's own choice risks more
    worst = {b: worst_regret(b, 3.0, SECONDS) for b in SECONDS}
    assert worst[32] == min(worst.values()) and worst[128] > worst[32] + 0.1
    assert robust.worst_regret == pytest.approx(worst[32], rel=0.01)
    assert robust.nominal_worst_regret == pytest.approx(worst[128], rel=0.01)
    # where the proxy is right the hedge costs what it costs: 0.24 / 0.235
    assert robust.regret_if_proxy_right == pytest.approx(0.6 * RATIOS[32] / 0.235)


def test_a_factor_of_one_is_algorithm_1() -> None:
    rng = random.Random(7)
    sizes = [4, 8, 16, 32, 64, 128]
    for _ in range(200):
        seconds = {b: rng.uniform(0.1, 1.0) for b in sizes}
        ratios: dict[int, float | None] = {b: rng.uniform(0.2, 1.0) for b in sizes}
        ratios[128] = 1.0
        points = frontier(seconds)
        robust = minimax_regret_choice(points, transfer_scenarios(ratios, 40.0, REF, 1.0))
        assert robust is not None
        table = ProfileTable(device="d", device_kind="emulated", sensor_rail="VDD_IN",
                             sensor_period_s=0.05, model="m", input_shape=[],
                             batch_sizes=sizes, knob_values=[F_HZ], max_batch_size=128,
                             mode="exhaustive", points=list(points.values()),
                             points_measured=len(points), profiling_device_s=1.0,
                             power_noise_w=0.0)
        algorithm_1 = Selector(table).select(None, ratios)
        assert algorithm_1 is not None and robust.point.batch_size == algorithm_1.batch_size
        assert robust.worst_regret == pytest.approx(1.0)


def test_no_choice_has_a_smaller_worst_regret() -> None:
    rng = random.Random(11)
    sizes = [8, 16, 32, 64, 128]
    for factor, _ in itertools.product((1.5, 3.0, 10.0), range(50)):
        seconds = {b: rng.uniform(0.1, 1.0) / b ** 0.5 for b in sizes}
        ratios: dict[int, float | None] = {b: relation(B_NOISE, b) for b in sizes}
        scenarios = transfer_scenarios(ratios, B_NOISE, REF, factor)
        robust = minimax_regret_choice(frontier(seconds), scenarios)
        assert robust is not None

        def worst(b: int, scenarios=scenarios, seconds=seconds) -> float:
            return max(seconds[b] * r[b] / min(seconds[c] * r[c] for c in sizes)  # type: ignore[operator]
                       for _, r in scenarios)
        assert robust.worst_regret == pytest.approx(min(worst(b) for b in sizes))
        assert robust.worst_regret <= robust.nominal_worst_regret + 1e-12


def test_bad_factors_are_refused() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        transfer_scenarios(RATIOS, B_NOISE, REF, factor=0.5)
    with pytest.raises(ValueError, match="odd"):
        transfer_scenarios(RATIOS, B_NOISE, REF, factor=2.0, points=4)


# -- in a plan ----------------------------------------------------------------------------------

def _vector(use_fit: bool = True):
    """Three seeds per batch size along E(b) = 1000 (1 + b/32), within 3 %: a good fit."""
    wiggle = (0.97, 1.0, 1.03)
    return vector_from_samples(
        {b: [1000 * (1 + b / B_NOISE) * w for w in wiggle] for b in (8, 16, 32, 64, 128)},
        sample_budget=100_000, use_fit=use_fit, model="m", input_shape=[], dataset="proxy",
        task="image-classification", target_accuracy=0.8, seeds=[0, 1, 2])


def _profile() -> ProfileTable:
    seconds = {8: 1.0, 16: 0.8, 32: 0.6, 64: 0.4, 128: 0.235}
    points = list(frontier({b: s * 1e-3 for b, s in seconds.items()}).values())
    return ProfileTable(device="d", device_kind="emulated", sensor_rail="VDD_IN",
                        sensor_period_s=0.05, model="m", input_shape=[],
                        batch_sizes=sorted(seconds), knob_values=[F_HZ],
                        max_batch_size=128, mode="exhaustive", points=points,
                        points_measured=len(points), profiling_device_s=1.0, power_noise_w=0.0)


def test_the_plan_chooses_robustly_and_says_what_each_choice_risks() -> None:
    vector, profile = _vector(), _profile()
    plain = plan(profile, None, efficiency=vector, margin_sigmas=0)
    robust = plan(profile, None, efficiency=vector, margin_sigmas=0, transfer_factor=3.0)
    assert plain.choices["wattcap"].batch_size == 128
    assert robust.choices["wattcap"].batch_size < 128
    (note,) = [n for n in robust.notes if n.startswith("robust to")]
    assert "--transfer-factor" in note and "instead of the proxy's own b=128" in note
    # the rule's choice is what the Replanner (a moving cap's path) chooses too
    rule = TransferRule.of(vector, {b: vector.ratio(b) for b in profile.batch_sizes}, 3.0)
    assert isinstance(rule, TransferRule)
    chosen = rule.choose(Selector(profile).frontier(None))
    assert chosen is not None and chosen.point.batch_size == robust.choices["wattcap"].batch_size
    # the baselines and the fastest are untouched by it
    assert robust.choices["baseline-1"] == plain.choices["baseline-1"]


def test_the_factor_is_said_ignored_where_it_cannot_apply() -> None:
    profile = _profile()
    # a vector without a fit or a noise scale has no B_noise to move
    no_fit = _vector().model_copy(update={"fit": None, "ratio_source": "mean"})
    ignored = plan(profile, None, efficiency=no_fit, margin_sigmas=0, transfer_factor=3.0)
    assert any("transfer factor ignored" in n for n in ignored.notes)
    assert ignored.choices["wattcap"] == plan(profile, None, efficiency=no_fit,
                                              margin_sigmas=0).choices["wattcap"]
    # r_b from raw means beside a fit: the fit still gives the centre B_noise
    means = plan(profile, None, efficiency=_vector(use_fit=False), margin_sigmas=0,
                 transfer_factor=3.0)
    assert any(n.startswith("robust to") for n in means.notes)
    energy = plan(profile, None, efficiency=_vector(), margin_sigmas=0, transfer_factor=3.0,
                  objective=Objective(name="energy"))
    assert any("applies to the plain time objective, not energy" in n for n in energy.notes)
    no_vector = plan(profile, None, margin_sigmas=0, transfer_factor=3.0)
    assert any("no efficiency vector" in n for n in no_vector.notes)
    assert not any(n.startswith("robust to") for n in energy.notes)


def test_plan_on_the_command_line(tmp_path) -> None:
    from typer.testing import CliRunner

    from wattcap.cli import app

    _profile().save(tmp_path / "p.json")
    _vector().save(tmp_path / "e.json")
    base = ["plan", "--profile", str(tmp_path / "p.json"), "--efficiency",
            str(tmp_path / "e.json"), "--power-cap", "none", "--margin-sigmas", "0", "--json"]
    result = CliRunner().invoke(app, [*base, "--transfer-factor", "3"])
    assert result.exit_code == 0, result.output
    assert "instead of the proxy's own b=128" in result.output
    refused = CliRunner().invoke(app, [*base, "--transfer-factor", "0.5"])
    assert refused.exit_code != 0 and "transfer-factor" in refused.output
    for bad in ("nan", "inf"):
        refused = CliRunner().invoke(app, [*base, "--transfer-factor", bad])
        assert refused.exit_code != 0 and "finite ratio >= 1" in refused.output, refused.output
        assert "Traceback" not in refused.output


def test_under_a_cap_only_feasible_points_are_chosen() -> None:
    """b=128 draws over the cap: the robust choice is made among the others, at their f*(b)."""
    vector = _vector()
    profile = _profile()
    hot = [p.model_copy(update={"peak_power_w": 5.0}) if p.batch_size == 128 else p
           for p in profile.points]
    capped = profile.model_copy(update={"points": hot})
    robust = plan(capped, 4.0, efficiency=vector, margin_sigmas=0, transfer_factor=3.0)
    chosen = robust.choices["wattcap"]
    assert chosen.batch_size != 128 and chosen.peak_power_w <= 4.0
    (note,) = [n for n in robust.notes if n.startswith("robust to")]
    assert "b=128" not in note


def test_a_session_and_a_moving_cap_choose_as_the_plan_does() -> None:
    from wattcap.runtime.cap_follower import ConfigChooser
    from wattcap.runtime.errors import SessionError
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import PlanSettings

    vector, profile = _vector(), _profile()
    robust = plan(profile, None, efficiency=vector, margin_sigmas=0, transfer_factor=3.0)
    session = Session(None, planning=PlanSettings(profile=profile, efficiency=vector,
                                                  margin_sigmas=0, transfer_factor=3.0))
    assert session.batch_size == robust.choices["wattcap"].batch_size != 128
    assert any("robust to" in e for e in session.events)
    # the default switch margin, on nominal time, does not keep b=128 against the rule's choice
    chooser = ConfigChooser(profile, "replan", 128, None, efficiency=vector, margin_sigmas=0,
                            transfer_factor=3.0)
    target = chooser.choose(None, 128)
    assert target is not None and target.batch_size == session.batch_size
    assert chooser.with_profile(profile).transfer_factor == 3.0
    with pytest.raises(SessionError, match="transfer_factor is a ratio >= 1"):
        Session(None, planning=PlanSettings(profile=profile, efficiency=vector,
                                            transfer_factor=0.5))


def test_train_plans_with_the_transfer_factor(tmp_path) -> None:
    """`wattcap train --transfer-factor` starts from the choice `plan --transfer-factor` makes
    (a dry run: the choice is printed, nothing changed)."""
    from typer.testing import CliRunner

    from wattcap.cli import app
    from wattcap.devices.emulated import EmulatedDevice
    from wattcap.measure.profiling import Profiler

    sizes = (16, 32, 64, 128)
    profile = Profiler(EmulatedDevice("jetson-nano"), "digits32-cnn",
                       batch_sizes=sizes).run(exhaustive=True)
    vector = vector_from_samples(  # the proxy's B_noise = 128: b=128 is its own choice
        {b: [1000 * (1 + b / 128) * w for w in (0.97, 1.0, 1.03)] for b in sizes},
        sample_budget=10**6, model="digits32-cnn", input_shape=[1, 32, 32], dataset="proxy",
        task="image-classification", target_accuracy=0.8, seeds=[0, 1, 2])
    profile.save(tmp_path / "p.json")
    vector.save(tmp_path / "e.json")
    expected = {k: plan(profile, None, efficiency=vector, transfer_factor=k)
                .choices["wattcap"].batch_size for k in (None, 3.0)}
    assert expected[None] != expected[3.0]
    for factor in (None, 3.0):
        args = ["train", "--profile", str(tmp_path / "p.json"), "--efficiency",
                str(tmp_path / "e.json"), "--model", "digits32-cnn", "--data",
                "digits-5-9-32", "--power-cap", "none", "--target-accuracy", "0.5",
                "--dry-run"] + ([] if factor is None else ["--transfer-factor", str(factor)])
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert f"wattcap: batch size {expected[factor]} at" in result.output
