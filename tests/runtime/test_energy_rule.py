"""The time objective on a finite energy store: the chooser keeps the predicted energy of the rest
of the run within the energy left (the fastest configuration that fits; the least energy when
none does), leaves the plain time choice where it fits, and scales each configuration's energy
to target by the share of the run still to go. A hand-made profile where power rises steeply
with the clock (as on a desktop GPU), so that the fastest configuration is not the thriftiest:
b=64 at the top clock is fastest, b=32 at the lowest clock needs the least energy."""

from __future__ import annotations

import math

import pytest

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.energy_budget import EnergyBudget, fastest_within_energy
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.objective import Objective
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.runtime.config_chooser import ConfigChooser, Target

MHZ = 1_000_000
FREQS_HZ = (400 * MHZ, 700 * MHZ, 1000 * MHZ)
#: seconds per sample at 1 GHz: the larger batch has the higher throughput
SPP_AT_1GHZ_S = {32: 1.3e-3, 64: 1.0e-3}
SAMPLES = {32: 1000, 64: 1200}


def _point(b: int, f_hz: int) -> ProfilePoint:
    scale = f_hz / FREQS_HZ[-1]
    avg_w = (1.0 + 6.0 * scale ** 3) * (0.9 if b == 32 else 1.0)
    return ProfilePoint(batch_size=b, knob_value=f_hz, peak_power_w=1.1 * avg_w,
                        avg_power_w=avg_w, seconds_per_sample=SPP_AT_1GHZ_S[b] / scale,
                        steps=10, readings=10)


@pytest.fixture(scope="module")
def profile() -> ProfileTable:
    points = [_point(b, f) for b in sorted(SPP_AT_1GHZ_S) for f in FREQS_HZ]
    return ProfileTable(
        device="desktop-like", device_kind="emulated", sensor_rail="VDD_IN",
        sensor_period_s=0.05, model="test-model", input_shape=[3, 32, 32],
        batch_sizes=sorted(SPP_AT_1GHZ_S), knob_values=list(FREQS_HZ), max_batch_size=64,
        mode="exhaustive", points=points, points_measured=len(points), profiling_device_s=1.0)


@pytest.fixture(scope="module")
def efficiency() -> EfficiencyVector:
    return vector_from_samples({b: [float(n)] for b, n in SAMPLES.items()}, sample_budget=4096,
                               use_fit=False, model="test-model", input_shape=[3, 32, 32],
                               dataset="proxy", task="image-classification",
                               target_accuracy=0.7, seeds=[0])


@pytest.fixture
def chooser(profile: ProfileTable, efficiency: EfficiencyVector) -> ConfigChooser:
    return ConfigChooser(profile, "replan", 64, None, efficiency=efficiency)


def _energy_j(chooser: ConfigChooser, target: Target) -> float:
    """Predicted energy to target of a configuration, from the chooser's candidates."""
    candidates = chooser.replanner.candidates
    for point, energy_j in zip(candidates.points, candidates.energy_j, strict=True):
        if (point.batch_size, point.knob_value) == (target.batch_size, target.frequency_hz):
            return float(energy_j)
    raise AssertionError(f"{target} is not a candidate")


def _brute_force(chooser: ConfigChooser, cap_w: float | None, budget: EnergyBudget
                 ) -> tuple[Target, bool]:
    """Every point's rest-of-run energy against the energy left: the fastest that fits by
    T · r_b, else the least energy."""
    candidates = chooser.replanner.candidates
    share = budget.rest_share(chooser.replanner.samples)
    under = [i for i, p in enumerate(candidates.points)
             if cap_w is None or p.peak_power_w <= cap_w]
    fitting = [i for i in under if candidates.energy_j[i] * share <= budget.energy_left_j]
    if fitting:
        best = min(fitting, key=lambda i: candidates.time_key[i])
    else:
        best = min(under, key=lambda i: candidates.energy_j[i])
    point = candidates.points[best]
    return Target(point.batch_size, point.knob_value), bool(fitting)


def test_the_profile_makes_speed_and_energy_disagree(chooser: ConfigChooser) -> None:
    # what the other tests rely on, stated once
    assert chooser.choose(None, 64) == Target(64, 1000 * MHZ)
    energies = {(p.batch_size, p.knob_value): e for p, e in
                zip(chooser.replanner.candidates.points, chooser.replanner.candidates.energy_j,
                    strict=True)}
    assert min(energies, key=energies.__getitem__) == (32, 400 * MHZ)
    assert energies[(64, 1000 * MHZ)] > 1.5 * energies[(32, 400 * MHZ)]


def test_a_small_battery_gets_the_fastest_configuration_whose_rest_fits(
        chooser: ConfigChooser) -> None:
    plain = chooser.choose(None, 64)
    assert plain is not None
    left_j = 0.7 * _energy_j(chooser, plain)  # the plain choice needs more than is left
    budget = EnergyBudget(energy_left_j=left_j, samples_done=0, batch_size=64)
    chosen = chooser.choose(None, 64, budget)
    assert chosen is not None and chosen != plain
    assert _energy_j(chooser, chosen) <= left_j  # at the start the whole run is still to go
    assert (chosen, True) == _brute_force(chooser, None, budget)
    assert chosen.frequency_hz < plain.frequency_hz  # this profile pays for speed in power
    rule = chooser.energy_rule
    assert rule is not None and rule.fits
    assert (rule.plain, rule.chosen, rule.energy_left_j) == (plain, chosen, left_j)
    assert rule.plain_rest_j == pytest.approx(_energy_j(chooser, plain))
    assert rule.plain_rest_j > left_j >= rule.chosen_rest_j
    text = rule.describe()
    assert f"energy left {left_j:.1f} J" in text and plain.describe() in text \
        and chosen.describe() in text


def test_the_rest_of_the_run_is_the_share_still_to_go(chooser: ConfigChooser) -> None:
    """Half-way to b=64's predicted samples, half the energy to target is what must fit: an
    energy left that fits no plain choice at the start fits it half-way."""
    plain = chooser.choose(None, 64)
    assert plain is not None
    plain_j = _energy_j(chooser, plain)
    left_j = 0.6 * plain_j
    start = EnergyBudget(left_j, samples_done=0, batch_size=64)
    halfway = EnergyBudget(left_j, samples_done=SAMPLES[64] / 2, batch_size=64)
    assert halfway.rest_share(chooser.replanner.samples) == pytest.approx(0.5)
    assert chooser.choose(None, 64, start) != plain
    assert chooser.choose(None, 64, halfway) == plain and chooser.energy_rule is None
    # past the predicted samples nothing is left to predict: the plain choice
    late = EnergyBudget(0.01, samples_done=2 * SAMPLES[64], batch_size=64)
    assert late.max_energy_to_target_j(chooser.replanner.samples) is None
    assert chooser.choose(None, 64, late) == plain


@pytest.mark.parametrize("cap_w", [None, 7.7, 5.0, 3.0, 2.0, 1.6])
@pytest.mark.parametrize("share_done", [0.0, 0.3, 0.8])
def test_every_choice_equals_a_brute_force_scan(profile: ProfileTable,
                                                efficiency: EfficiencyVector,
                                                cap_w: float | None, share_done: float) -> None:
    free = ConfigChooser(profile, "replan", 64, None, efficiency=efficiency, switch_margin=0.0)
    energies = sorted(set(free.replanner.candidates.energy_j.tolist()))
    for left_j in [0.5 * energies[0], *energies, 1.01 * energies[-1], 2 * energies[-1]]:
        for in_use in (32, 64):
            budget = EnergyBudget(left_j, share_done * SAMPLES[in_use], in_use)
            plain = free.choose(cap_w, in_use)
            chosen = free.choose(cap_w, in_use, budget)  # (energy_rule is this choice's)
            if plain is None:
                assert chosen is None
                continue
            share = budget.rest_share(free.replanner.samples)
            if _energy_j(free, plain) * share <= left_j:
                assert chosen == plain  # it fits: the plain time choice, untouched
                continue
            assert (chosen, free.energy_rule.fits if free.energy_rule else None) == \
                _brute_force(free, cap_w, budget)


def test_a_large_battery_leaves_the_plain_time_choice(profile: ProfileTable,
                                                      efficiency: EfficiencyVector) -> None:
    chooser = ConfigChooser(profile, "replan", 64, None, efficiency=efficiency)
    caps = [None, *sorted({p.peak_power_w for p in chooser.profile.points})]
    for cap_w in caps:
        for in_use in (32, 64):
            plain = chooser.choose(cap_w, in_use)
            assert chooser.choose(cap_w, in_use, EnergyBudget(1e6, 0, in_use)) == plain
            assert chooser.energy_rule is None
            assert chooser.best_for_batch_size(in_use, cap_w, EnergyBudget(1e6, 0, in_use)) \
                == chooser.best_for_batch_size(in_use, cap_w)


def test_nothing_fits_takes_the_least_energy(chooser: ConfigChooser) -> None:
    energies = chooser.replanner.candidates.energy_j
    budget = EnergyBudget(0.5 * float(energies.min()), 0, 64)
    chosen = chooser.choose(None, 64, budget)
    assert chosen == Target(32, 400 * MHZ)
    rule = chooser.energy_rule
    assert rule is not None and not rule.fits
    assert "no configuration fits" in rule.describe()
    assert rule.chosen_rest_j == pytest.approx(float(energies.min()))
    # with no energy at all, the same
    assert chooser.choose(None, 64, EnergyBudget(0.0, 0, 64)) == Target(32, 400 * MHZ)


def test_the_batch_size_in_use_is_kept_only_where_it_fits(chooser: ConfigChooser) -> None:
    """The hold on batch-size changes keeps b in use only at a clock whose rest fits; when no
    clock of it fits but another batch size's does, it is not kept (obeyed as a cap is)."""
    e_32_top = _energy_j(chooser, Target(32, 1000 * MHZ))
    e_64_mid = _energy_j(chooser, Target(64, 700 * MHZ))
    e_64_low = _energy_j(chooser, Target(64, 400 * MHZ))
    keep = chooser.best_for_batch_size(32, None, EnergyBudget(e_32_top + 0.01, 0, 32))
    assert keep == Target(32, 1000 * MHZ)
    keep = chooser.best_for_batch_size(64, None, EnergyBudget(e_64_mid + 0.01, 0, 64))
    assert keep == Target(64, 700 * MHZ)  # not the plain top clock, which needs more
    # an energy left below b=64's least but above b=32's least
    e_32_low = _energy_j(chooser, Target(32, 400 * MHZ))
    assert e_32_low < e_64_low
    between = EnergyBudget((e_32_low + e_64_low) / 2, 0, 64)
    assert chooser.best_for_batch_size(64, None, between) is None
    assert chooser.choose(None, 64, between) == Target(32, 400 * MHZ)


def test_other_objectives_and_the_baselines_ignore_the_budget(
        profile: ProfileTable, efficiency: EfficiencyVector) -> None:
    small = EnergyBudget(0.01, 0, 64)
    energy = ConfigChooser(profile, "replan", 64, None, efficiency=efficiency,
                           objective=Objective.of("energy"))
    assert energy.choose(None, 64, small) == energy.choose(None, 64)
    assert energy.energy_rule is None
    for policy in ("safe-frequency", "fixed"):
        baseline = ConfigChooser(profile, policy, 64, 1000 * MHZ, efficiency=efficiency)
        assert baseline.choose(None, 64, small) == baseline.choose(None, 64)
    frequency = ConfigChooser(profile, "frequency", 64, None, efficiency=efficiency)
    chosen = frequency.choose(None, 64, small)
    assert chosen == Target(64, 400 * MHZ)  # its own batch size's least energy


def test_the_search_is_the_max_energy_time_objective(chooser: ConfigChooser) -> None:
    candidates = chooser.replanner.candidates
    limit_j = float(sorted(candidates.energy_j)[3])
    point, fits = fastest_within_energy(candidates, None, limit_j) or (None, False)
    assert fits and point == candidates.best(Objective.of("time", max_energy_j=limit_j), None)
    point, fits = fastest_within_energy(candidates, None, math.inf) or (None, False)
    assert fits and point == candidates.best(Objective(), None)
    assert fastest_within_energy(candidates, 0.1, limit_j) is None  # nothing under the cap
