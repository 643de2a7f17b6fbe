"""Selection (DESIGN §1): Algorithm 1 against a brute-force argmin on random profiles, and the
planner's methods (baselines, oracle, refusals) on the emulated Jetson Nano's profiles."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wattcap.algorithms.planner import DEFAULT_SAMPLES, Selector, plan, safe_knob_value
from wattcap.core.plan import InfeasibleCapError
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.schema import WattcapFileError
from wattcap.devices.workload import DEFAULT_BATCH_SIZES

CAPS_W = (3.5, 4.0, 5.0, 6.5, 8.0, 9.5)


# -- random profiles ----------------------------------------------------------------------------
def _table(points: list[ProfilePoint], batch_sizes: list[int], freqs: list[int]) -> ProfileTable:
    return ProfileTable(
        device="test-device",
        device_kind="emulated",
        sensor_rail="VDD_IN",
        sensor_period_s=0.05,
        model="test-model",
        input_shape=[3, 32, 32],
        batch_sizes=batch_sizes,
        knob_values=freqs,
        max_batch_size=max(batch_sizes),
        mode="exhaustive",
        points=points,
        points_measured=len(points),
        profiling_device_s=1.0,
    )


@st.composite
def random_problem(draw):
    """A random ProfileTable (physical: time per sample non-increasing in f per row; peak power
    in any order), random r_b (some None: never to be chosen) and a random cap."""
    batch_sizes = sorted(
        draw(st.sets(st.sampled_from(DEFAULT_BATCH_SIZES), min_size=1, max_size=6))
    )
    freqs = sorted(
        draw(st.sets(st.integers(50, 2000), min_size=1, max_size=14))
    )
    freqs_hz = [f * 1_000_000 for f in freqs]
    power = st.floats(0.5, 20.0, allow_nan=False, allow_infinity=False)
    points = []
    for b in batch_sizes:
        # a row may miss some frequencies (pruned profiles do), but is never empty
        measured = sorted(draw(st.sets(st.sampled_from(freqs_hz), min_size=1)))
        # time per sample: start somewhere and only fall (or stay) as f rises
        seconds = draw(st.floats(1e-4, 1.0, allow_nan=False))
        for f in measured:
            seconds *= draw(st.sampled_from((1.0, 1.0, 0.999, 0.9, 0.5)))
            points.append(ProfilePoint(
                batch_size=b, knob_value=f, peak_power_w=draw(power), avg_power_w=1.0,
                seconds_per_sample=seconds, steps=1, readings=5,
            ))
    ratios = {
        b: draw(st.one_of(st.none(), st.floats(0.05, 5.0, allow_nan=False)))
        for b in batch_sizes
    }
    peaks = [p.peak_power_w for p in points]
    cap = draw(st.one_of(
        st.none(),
        st.floats(0.0, 25.0, allow_nan=False),
        st.sampled_from(peaks),  # exactly on a measured peak: ≤ cap is feasible
    ))
    return _table(points, batch_sizes, freqs_hz), ratios, cap


def _brute_force(table: ProfileTable, ratios: dict[int, float | None], cap: float | None):
    """min over every feasible (b, f) with a known r_b of seconds_per_sample · r_b."""
    costs = [
        p.seconds_per_sample * ratios[p.batch_size]
        for p in table.points
        if ratios.get(p.batch_size) is not None and (cap is None or p.peak_power_w <= cap)
    ]
    return min(costs) if costs else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problem())
def test_algorithm1_equals_brute_force_argmin(problem) -> None:
    table, ratios, cap = problem
    chosen = Selector(table).select(cap, ratios)
    best = _brute_force(table, ratios, cap)
    if best is None:
        assert chosen is None
        return
    assert chosen is not None
    assert cap is None or chosen.peak_power_w <= cap
    assert ratios[chosen.batch_size] is not None
    # the chosen point is a measured point of the table
    assert table.lookup(chosen.batch_size, chosen.knob_value) == chosen
    value = chosen.seconds_per_sample * ratios[chosen.batch_size]
    assert value == pytest.approx(best, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(random_problem())
def test_selector_frontier_is_the_fastest_feasible_frequency(problem) -> None:
    """f*(b): the fastest clock under the cap (the highest where time falls with the clock);
    of clocks equally fast (a host-bound row), not the one of least peak power (the knee) but,
    going up in power, the first at least HOST_BOUND_HEADROOM above it (or the last short
    of it)."""
    from wattcap.core.defaults import HOST_BOUND_HEADROOM
    from wattcap.core.profile import time_key

    table, _, cap = problem
    frontier = Selector(table).frontier(cap)
    for b, row in table.rows().items():
        feasible = [p for p in row if cap is None or p.peak_power_w <= cap]
        if feasible:
            fastest = min(time_key(p.seconds_per_sample) for p in feasible)
            tied = sorted((p for p in feasible if time_key(p.seconds_per_sample) == fastest),
                          key=lambda p: (p.peak_power_w, p.knob_value))
            expected = tied[0]
            for p in tied[1:]:
                if expected.knob_value < tied[0].knob_value * (1 + HOST_BOUND_HEADROOM) \
                        and p.knob_value > expected.knob_value:
                    expected = p
            assert frontier[b].knob_value == expected.knob_value
            assert frontier[b].knob_value >= tied[0].knob_value
            if len({time_key(p.seconds_per_sample) for p in feasible}) == len(feasible) and \
                    sorted(feasible, key=lambda p: -p.seconds_per_sample) == \
                    sorted(feasible, key=lambda p: p.knob_value):
                assert frontier[b].knob_value == max(p.knob_value for p in feasible)
        else:
            assert b not in frontier
    assert {b: p.knob_value for b, p in frontier.items()} == {
        b: p.knob_value for b, p in table.frontier(cap).items()
    }


# -- plan on the emulated Nano ------------------------------------------------------------------
def _brute_safe_frequency(references: list[ProfileTable], cap: float) -> int | None:
    """Highest f at which every measured point of every reference profile is ≤ cap."""
    freqs = sorted({p.knob_value for r in references for p in r.points})
    safe = [
        f for f in freqs
        if all(p.peak_power_w <= cap for r in references for p in r.points if p.knob_value == f)
    ]
    return max(safe) if safe else None


def test_plan_without_efficiency_assumes_unit_ratios(nano_resnet18_profile) -> None:
    result = plan(nano_resnet18_profile, 6.5)
    assert any("r_b = 1" in note for note in result.notes)
    assert result.efficiency_source is None
    for choice in result.choices.values():
        assert choice.efficiency_ratio == 1.0
        assert choice.samples == DEFAULT_SAMPLES
        assert choice.predicted_time_s == pytest.approx(
            choice.seconds_per_sample * DEFAULT_SAMPLES
        )
        assert choice.predicted_energy_j == pytest.approx(
            choice.predicted_time_s * choice.avg_power_w
        )


def test_infeasible_cap_names_lowest_feasible_cap(nano_resnet18_profile) -> None:
    lowest = min(p.peak_power_w for p in nano_resnet18_profile.points)
    with pytest.raises(InfeasibleCapError) as info:
        plan(nano_resnet18_profile, lowest - 0.05, margin_sigmas=0)
    assert info.value.lowest_feasible_w == pytest.approx(lowest)
    # the cap the message names is feasible as printed, with the default margin too (it is
    # rounded up, never down to a cap that would be refused again)
    for margin in ({"margin_sigmas": 0}, {}):
        with pytest.raises(InfeasibleCapError) as info:
            plan(nano_resnet18_profile, lowest - 0.05, **margin)
        named = re.search(r"lowest feasible cap for this profile is ([0-9.]+) W",
                          str(info.value))
        assert named is not None and float(named.group(1)) >= info.value.lowest_feasible_w
        plan(nano_resnet18_profile, float(named.group(1)), **margin)
    # exactly at the lowest measured peak it is feasible
    result = plan(nano_resnet18_profile, lowest, margin_sigmas=0)
    assert result.choices["wattcap"].peak_power_w <= lowest


@pytest.mark.parametrize("cap", CAPS_W)
def test_safe_frequency_is_brute_force_over_reference_profiles(
    nano_reference_profiles, cap
) -> None:
    freqs = nano_reference_profiles[0].knob_values
    assert safe_knob_value(nano_reference_profiles, cap, freqs) == _brute_safe_frequency(
        nano_reference_profiles, cap
    )


@pytest.mark.parametrize("cap", CAPS_W)
def test_baselines_and_wattcap(nano_resnet18_profile, nano_reference_profiles, cap) -> None:
    profile = nano_resnet18_profile
    result = plan(profile, cap, reference_profiles=nano_reference_profiles, margin_sigmas=0)
    f_safe = _brute_safe_frequency(nano_reference_profiles, cap)
    assert result.safe_knob_value == f_safe
    assert f_safe is not None

    wattcap = result.choices["wattcap"]
    assert wattcap.peak_power_w <= cap
    for choice in result.choices.values():
        assert choice.peak_power_w <= cap
        point = profile.lookup(choice.batch_size, choice.knob_value)
        assert point is not None and point.peak_power_w == choice.peak_power_w

    b1 = result.choices["baseline-1"]
    assert (b1.batch_size, b1.knob_value) == (profile.max_batch_size, f_safe)

    b2 = result.choices["baseline-2"]
    assert b2.knob_value == f_safe
    at_safe = [p for p in profile.points if p.knob_value == f_safe and p.peak_power_w <= cap]
    assert b2.seconds_per_sample == min(p.seconds_per_sample for p in at_safe)

    # wattcap's predicted time is never worse than either baseline's on the same r
    assert wattcap.predicted_time_s <= b1.predicted_time_s
    assert wattcap.predicted_time_s <= b2.predicted_time_s
    # and it is the brute-force optimum of the profile
    feasible = [p for p in profile.points if p.peak_power_w <= cap]
    assert wattcap.seconds_per_sample == min(p.seconds_per_sample for p in feasible)
    assert result.speedup("baseline-1") >= 1.0


def test_no_cap_runs_at_highest_frequency(nano_resnet18_profile) -> None:
    result = plan(nano_resnet18_profile, None)
    f_max = max(nano_resnet18_profile.knob_values)
    assert result.safe_knob_value == f_max
    assert result.choices["wattcap"].knob_value == f_max
    assert result.choices["baseline-1"].batch_size == nano_resnet18_profile.max_batch_size


def test_wattcap_beats_baselines_with_an_efficiency_vector(
    nano_resnet18_profile, nano_reference_profiles, make_efficiency
) -> None:
    # smaller batches need fewer samples, as in the reference paper's proxies
    eff = make_efficiency({
        4: [4000, 4400], 8: [5000, 5200], 16: [6000, 6100], 32: [7000, 7400],
        64: [9000, 9100], 128: [12000, 12500],
    })
    for cap in CAPS_W:
        result = plan(nano_resnet18_profile, cap, efficiency=eff,
                      reference_profiles=nano_reference_profiles, margin_sigmas=0)
        wattcap = result.choices["wattcap"]
        assert wattcap.efficiency_ratio == pytest.approx(eff.ratio(wattcap.batch_size))
        assert wattcap.samples == pytest.approx(eff.samples(wattcap.batch_size))
        for baseline in ("baseline-1", "baseline-2"):
            assert wattcap.predicted_time_s <= result.choices[baseline].predicted_time_s
        objective = [
            p.seconds_per_sample * eff.ratio(p.batch_size)
            for p in nano_resnet18_profile.points if p.peak_power_w <= cap
        ]
        assert wattcap.seconds_per_sample * wattcap.efficiency_ratio == pytest.approx(
            min(objective)
        )


def test_fastest_oracle_only_with_target_efficiency(
    nano_resnet18_profile, nano_reference_profiles, make_efficiency
) -> None:
    proxy = make_efficiency({b: [10_000] for b in nano_resnet18_profile.batch_sizes})
    without = plan(nano_resnet18_profile, 5.0, efficiency=proxy,
                   reference_profiles=nano_reference_profiles)
    assert "fastest" not in without.choices
    assert "fastest" in without.unavailable

    target = make_efficiency(
        {b: [1000 * b] for b in nano_resnet18_profile.batch_sizes}, dataset="target"
    )
    with_oracle = plan(nano_resnet18_profile, 5.0, efficiency=proxy,
                       reference_profiles=nano_reference_profiles, target_efficiency=target)
    fastest = with_oracle.choices["fastest"]
    assert fastest.peak_power_w <= 5.0
    # the oracle's prediction uses the target's r and samples, and is the best under them
    for name, choice in with_oracle.choices.items():
        if name == "fastest":
            continue
        target_time = choice.seconds_per_sample * target.samples(choice.batch_size)
        assert fastest.predicted_time_s <= target_time * (1 + 1e-12)


def test_batch_size_that_missed_the_target_is_extrapolated_not_dropped(
    nano_resnet18_profile, nano_reference_profiles, make_efficiency
) -> None:
    batch_sizes = nano_resnet18_profile.batch_sizes
    for cap in CAPS_W:
        favourite = plan(nano_resnet18_profile, cap, margin_sigmas=0).choices["wattcap"].batch_size
        samples = {b: [10_000, 10_400] for b in batch_sizes}
        samples[favourite] = [10_000, None]  # one seed missed the target within 20,000
        eff = make_efficiency(samples)
        entry = eff.entry(favourite)
        assert entry.source == "extrapolated"
        # the missed run needed more than its budget: E(b) is at least the mean counting it
        # at 20,000
        assert eff.samples(favourite) >= (10_000 + 20_000) / 2
        result = plan(nano_resnet18_profile, cap, efficiency=eff,
                      reference_profiles=nano_reference_profiles, margin_sigmas=0)
        assert any(f"b = [{favourite}]" in note and "extrapolated" in note
                   for note in result.notes)
        wattcap = result.choices["wattcap"]
        objective = [p.seconds_per_sample * eff.ratio(p.batch_size)
                     for p in nano_resnet18_profile.points if p.peak_power_w <= cap]
        assert wattcap.seconds_per_sample * wattcap.efficiency_ratio == pytest.approx(
            min(objective))
        for choice in result.choices.values():
            assert math.isfinite(choice.predicted_time_s) and choice.predicted_time_s > 0


def test_plan_notes_name_the_source_of_r_b(nano_resnet18_profile, make_efficiency) -> None:
    sizes = nano_resnet18_profile.batch_sizes
    # seeds scattered ±5 % around E(b) = 2000·(1 + b/64): the relation holds
    follows = make_efficiency({b: [2000 * (1 + b / 64) * f for f in (0.95, 1.0, 1.05)]
                               for b in sizes})
    assert follows.fit.good
    notes = plan(nano_resnet18_profile, 5.0, efficiency=follows).notes
    fit_note = next(n for n in notes if n.startswith("r_b from the large-batch fit"))
    assert f"B_noise = {follows.fit.b_noise:.3g}" in fit_note and "CI" in fit_note
    # a zig-zag over b with tight seeds: no relation of that form fits
    zigzag = make_efficiency({b: [(3000 if i % 2 else 1000) * f for f in (0.99, 1.0, 1.01)]
                              for i, b in enumerate(sizes)})
    assert not zigzag.fit.good
    notes = plan(nano_resnet18_profile, 5.0, efficiency=zigzag).notes
    assert any("fit poor" in n and "raw means" in n for n in notes)
    assert not any(n.startswith("r_b from the large-batch fit") for n in notes)
    assert zigzag.ratio(sizes[0]) == pytest.approx(1000 / 3000 if len(sizes) % 2 == 0 else 1.0)


def test_efficiency_vector_of_another_model_is_refused(
    nano_resnet18_profile, make_efficiency
) -> None:
    eff = make_efficiency({b: [1000] for b in (4, 8, 16, 32, 64)}, model="mobilenetv2")
    with pytest.raises(WattcapFileError) as info:
        plan(nano_resnet18_profile, 5.0, efficiency=eff)
    assert "mobilenetv2" in str(info.value) and "resnet18" in str(info.value)
    other_shape = make_efficiency({b: [1000] for b in (4, 8)}, input_shape=(3, 64, 64))
    with pytest.raises(WattcapFileError):
        plan(nano_resnet18_profile, 5.0, efficiency=other_shape)


def test_a_plan_says_when_the_board_did_not_hold_a_points_clock(nano_resnet18_profile) -> None:
    """A point whose readings reported a clock below its own (a board that throttled in the
    window) was measured at a lower clock than its label: the plan says so, and says when
    wattcap's choice is such a point; a profile whose board held every clock says nothing."""
    from wattcap.core.observed_clock import ObservedFrequency

    held = plan(nano_resnet18_profile, 5.0)
    assert not any("did not hold the clock" in note for note in held.notes)
    chosen = held.choices["wattcap"]
    profile = nano_resnet18_profile.model_copy(deep=True)
    point = profile.lookup(chosen.batch_size, chosen.knob_value)
    assert point is not None and point.observed_frequency_hz is not None
    seen = point.observed_frequency_hz
    # four readings of six at 60 % of the clock: the mean falls 27 % below it
    point.observed_frequency_hz = ObservedFrequency.of(
        [seen.max_hz] * 2 + [int(seen.max_hz * 0.6)] * 4)
    note = next(n for n in plan(profile, 5.0).notes if "did not hold the clock" in n)
    assert note.startswith("the board did not hold the clock of 1 measured point(s) "
                           f"(b={chosen.batch_size} at ")
    assert "wattcap's choice is one of them" in note
    # a point the plan does not choose: named, the choice not
    other = next(p for p in profile.points
                 if (p.batch_size, p.knob_value) != (chosen.batch_size, chosen.knob_value))
    point.observed_frequency_hz = seen
    other.observed_frequency_hz = ObservedFrequency.of([int(other.knob_value * 0.9)] * 5)
    note = next(n for n in plan(profile, 5.0).notes if "did not hold the clock" in n)
    assert f"(b={other.batch_size} at " in note and "choice" not in note
    # a point within a clock step of its own is held
    other.observed_frequency_hz = ObservedFrequency.of([int(other.knob_value * 0.99)] * 5)
    assert not any("did not hold the clock" in n for n in plan(profile, 5.0).notes)
