"""Objectives (issue 19): each equals a brute-force scan over random profiles; the time objective
keeps today's choices on the emulated Nano; constraints, the Pareto front and its plot."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wattcap.algorithms.objectives import CandidateSet
from wattcap.algorithms.planner import Replanner, Selector, plan
from wattcap.core.objective import InfeasibleObjectiveError, Objective, ObjectiveError
from wattcap.core.plan import InfeasibleCapError, Plan
from wattcap.core.profile import ProfilePoint, ProfileTable, time_key
from wattcap.core.schema import WattcapFileError
from wattcap.devices.workload import DEFAULT_BATCH_SIZES
from wattcap.experiments.pareto import plot_pareto

CAPS_W = (3.5, 4.0, 5.0, 6.5, 8.0, 9.5, None)


# -- random problems ----------------------------------------------------------------------------
def _table(points: list[ProfilePoint], batch_sizes: list[int], freqs: list[int]) -> ProfileTable:
    return ProfileTable(
        device="test-device", device_kind="emulated", sensor_rail="VDD_IN",
        sensor_period_s=0.05, model="test-model", input_shape=[3, 32, 32],
        batch_sizes=batch_sizes, knob_values=freqs, max_batch_size=max(batch_sizes),
        mode="exhaustive", points=points, points_measured=len(points), profiling_device_s=1.0,
    )


@st.composite
def random_problem(draw):
    """Random points (time per sample, peak and average power in any order, some (b, f)
    missing), r_b (some None), samples to target = r_b · N, a cap and an objective whose
    limit is sometimes exactly a point's energy or time."""
    batch_sizes = sorted(draw(st.sets(st.sampled_from(DEFAULT_BATCH_SIZES), min_size=1,
                                      max_size=6)))
    freqs_hz = sorted(f * 1_000_000 for f in draw(st.sets(st.integers(50, 2000), min_size=1,
                                                          max_size=12)))
    watts = st.floats(0.5, 20.0, allow_nan=False)
    points = []
    for b in batch_sizes:
        for f in sorted(draw(st.sets(st.sampled_from(freqs_hz), min_size=1))):
            peak = draw(watts)
            points.append(ProfilePoint(
                batch_size=b, knob_value=f, peak_power_w=peak,
                avg_power_w=peak * draw(st.floats(0.3, 1.0)),
                seconds_per_sample=draw(st.floats(1e-4, 1.0)), steps=1, readings=5,
            ))
    ratios = {b: draw(st.one_of(st.none(), st.floats(0.05, 5.0))) for b in batch_sizes}
    n_ref = draw(st.floats(100.0, 1e5))
    samples = {b: (r * n_ref if r is not None else 0.0) for b, r in ratios.items()}
    cap = draw(st.one_of(st.none(), st.floats(0.0, 25.0),
                         st.sampled_from([p.peak_power_w for p in points])))
    kind = draw(st.sampled_from(("time", "energy", "cost", "time-max-energy",
                                 "energy-deadline")))
    known = [p for p in points if ratios[p.batch_size] is not None]
    times = [p.seconds_per_sample * samples[p.batch_size] for p in known] or [1.0]
    energies = [t * p.avg_power_w for t, p in zip(times, known, strict=False)] or [1.0]
    if kind == "cost":
        objective = Objective.of("cost", eta=draw(st.floats(0.0, 1.0)))
        objective = objective.model_copy(update={"cost_power_w": draw(st.floats(1.0, 30.0))})
    elif kind == "time-max-energy":
        limit = draw(st.one_of(st.sampled_from(energies),
                               st.floats(min(energies) * 0.5, max(energies) * 1.5)))
        objective = Objective.of("time", max_energy_j=limit)
    elif kind == "energy-deadline":
        limit = draw(st.one_of(st.sampled_from(times),
                               st.floats(min(times) * 0.5, max(times) * 1.5)))
        objective = Objective.of("energy", deadline_s=limit)
    else:
        objective = Objective.of(kind)
    return _table(points, batch_sizes, freqs_hz), ratios, samples, cap, objective


def _brute(table, ratios, samples, cap, objective):
    """Scan every point: (value, time, energy) of the feasible ones meeting the constraint, and
    of those under the cap."""
    under, meeting = [], []
    for p in table.points:
        if ratios[p.batch_size] is None or (cap is not None and p.peak_power_w > cap):
            continue
        time_s = p.seconds_per_sample * samples[p.batch_size]
        energy_j = time_s * p.avg_power_w
        if objective.name == "time":
            value = time_s
        elif objective.name == "energy":
            value = energy_j
        else:
            value = (objective.eta * energy_j
                     + (1 - objective.eta) * objective.cost_power_w * time_s)
        under.append((value, time_s, energy_j, p))
        if objective.max_energy_j is not None and energy_j > objective.max_energy_j:
            continue
        if objective.deadline_s is not None and time_s > objective.deadline_s:
            continue
        meeting.append((value, time_s, energy_j, p))
    return under, meeting


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problem())
def test_each_objective_equals_brute_force(problem) -> None:
    table, ratios, samples, cap, objective = problem
    under, meeting = _brute(table, ratios, samples, cap, objective)
    candidates = CandidateSet(table.points, ratios, samples)
    if not under:
        assert candidates.best(objective, cap) is None
        return
    if not meeting:
        with pytest.raises(InfeasibleObjectiveError) as info:
            candidates.best(objective, cap)
        # the error names the best achievable energy (or time) under the cap
        achievable = min(e for _, _, e, _ in under) if objective.max_energy_j is not None \
            else min(t for _, t, _, _ in under)
        assert info.value.best_value == achievable
        assert f"{achievable:.1f}" in str(info.value)
        return
    chosen = candidates.best(objective, cap)
    assert chosen is not None
    assert cap is None or chosen.peak_power_w <= cap
    by_point = {(p.batch_size, p.knob_value): (v, t, e) for v, t, e, p in meeting}
    assert (chosen.batch_size, chosen.knob_value) in by_point  # meets the constraint
    value = by_point[(chosen.batch_size, chosen.knob_value)][0]
    assert value == pytest.approx(min(v for v, _, _, _ in meeting), rel=1e-9)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problem())
def test_pareto_front_is_the_non_dominated_set(problem) -> None:
    table, ratios, samples, cap, objective = problem
    under, _ = _brute(table, ratios, samples, cap, Objective())
    front = CandidateSet(table.points, ratios, samples).pareto_front(cap)
    # compared as the planner compares them, to time_key's digits: two points a rounding
    # apart (1.0e-2 and 1.0000000000000002e-2 s) are one, whichever of them the front names
    pairs = {(time_key(t), time_key(e)) for _, t, e, _ in under}
    non_dominated = {
        (t, e) for t, e in pairs
        if not any(t2 <= t and e2 <= e and (t2, e2) != (t, e) for t2, e2 in pairs)
    }
    assert [(time_key(p.predicted_time_s), time_key(p.predicted_energy_j)) for p in front] \
        == sorted(non_dominated, key=lambda te: te[0])
    for earlier, later in zip(front, front[1:], strict=False):
        assert earlier.predicted_time_s < later.predicted_time_s
        assert earlier.predicted_energy_j > later.predicted_energy_j
    for point in front:
        assert cap is None or point.peak_power_w <= cap


def test_pareto_front_drops_ties_that_are_dominated() -> None:
    def point(b, f_mhz, seconds, avg_w):
        return ProfilePoint(batch_size=b, knob_value=f_mhz * 1_000_000, peak_power_w=avg_w,
                            avg_power_w=avg_w, seconds_per_sample=seconds, steps=1, readings=5)

    points = [
        point(4, 100, 1.0, 10.0),  # t=1, e=10: fastest
        point(4, 200, 2.0, 5.0),   # t=2, e=10: as much energy, slower: dominated
        point(8, 100, 2.0, 2.5),   # t=2, e=5
        point(16, 100, 2.0, 2.5),  # the same (t, e) again: listed once
        point(16, 200, 3.0, 2.0),  # t=3, e=6: dominated by t=2, e=5
        point(8, 200, 4.0, 1.0),   # t=4, e=4
    ]
    table = _table(points, [4, 8, 16], [100_000_000, 200_000_000])
    ones = {4: 1.0, 8: 1.0, 16: 1.0}
    front = CandidateSet(table.points, ones, ones).pareto_front(None)
    assert [(p.predicted_time_s, p.predicted_energy_j) for p in front] == [
        (1.0, 10.0), (2.0, 5.0), (4.0, 4.0)]
    assert front[1].batch_size == 8  # the first of equal points in time, then energy order
    # under a cap of 4 W the fastest point is gone
    assert CandidateSet(table.points, ones, ones).pareto_front(4.0)[0].predicted_time_s == 2.0


@pytest.mark.parametrize("noise", [1e-12, -1e-12])
def test_times_equal_but_for_float_rounding_are_ties(noise: float) -> None:
    """A host-bound row (every clock as fast) computed through different clocks differs in the
    last bits: the choice must not follow them. Of equal times not the highest clock (it buys
    no time and spends power) nor the lowest (the knee, where a faster host makes the GPU the
    bottleneck) but the first HOST_BOUND_HEADROOM above the knee; the front, which ranks
    energy, lists the least-energy point alone."""
    def point(f_mhz, seconds, avg_w):
        return ProfilePoint(batch_size=8, knob_value=f_mhz * 1_000_000, peak_power_w=avg_w,
                            avg_power_w=avg_w, seconds_per_sample=seconds, steps=1, readings=5)

    base = 1.0729687500e-05
    points = [point(600, base * (1 + noise), 100.0), point(1200, base, 150.0),
              point(1800, base * (1 - noise), 200.0)]
    table = _table(points, [8], [600_000_000, 1_200_000_000, 1_800_000_000])
    chosen = Selector(table).select(None, {8: 1.0})
    assert chosen is not None and chosen.knob_value == 1_200_000_000
    candidates = CandidateSet(table.points, {8: 1.0}, {8: 1.0})
    assert candidates.best(Objective(), None).knob_value == 1_200_000_000
    assert candidates.best(Objective(name="energy"), None).knob_value == 600_000_000
    front = candidates.pareto_front(None)
    assert [p.knob_value for p in front] == [600_000_000]  # as fast, least energy


def test_a_host_bound_row_under_a_cap_that_never_binds_is_said_and_read(capsys) -> None:
    """A datacenter GPU's host-bound row: every clock as fast, the cap far above every peak.
    The plan takes the thriftiest clock of the fastest clear of the knee, says the cap does not
    bind, and prints
    times of a tenth of a second with their digits (not '0.1' for every method)."""
    from wattcap.cli.plan import print_pareto_front, print_plan

    def point(f_mhz, avg_w, seconds=1.0729687500e-05):
        return ProfilePoint(batch_size=8, knob_value=f_mhz * 1_000_000, peak_power_w=avg_w + 3,
                            avg_power_w=avg_w, seconds_per_sample=seconds, steps=1, readings=5)

    table = _table([point(600, 80.0), point(1200, 110.0), point(1800, 150.0)], [8],
                   [600_000_000, 1_200_000_000, 1_800_000_000])
    result = plan(table, 350.0)
    assert result.choices["wattcap"].knob_value == 1_200_000_000
    assert any(n.startswith("the cap does not bind: every profiled point peaks at") and
               "under 350 W" in n for n in result.notes)
    assert not any("does not bind" in n for n in plan(table, 120.0).notes)
    print_plan(result)
    printed = capsys.readouterr().out
    assert "0.107" in printed and " 0.1 " not in printed  # 10,000 samples x 10.7 us
    # a choice off the front is told which point beats it and by how much
    front_j = min(p.predicted_energy_j for p in result.pareto_front)  # the knee, 600 MHz
    result.choices["baseline-1"] = result.choices["wattcap"].model_copy(update={
        "knob_value": 1_800_000_000, "avg_power_w": 150.0, "on_pareto_front": False,
        "predicted_energy_j": 2 * front_j})
    print_pareto_front(result)
    printed = capsys.readouterr().out
    assert "b=8 at 600.0 MHz is at least as fast and 50.0% thriftier" in printed
    # wattcap's own point, clear of the knee, is off the front too: it says why
    assert "wattcap (b=8, 1200.0 MHz" in printed and "clear of the knee" in printed


def test_three_significant_digits_never_use_an_exponent() -> None:
    from wattcap.core.plan import three_significant

    assert [three_significant(v) for v in (0.13284, 7.2, 20.34, 1234.5, 0.0)] == [
        "0.133", "7.20", "20.3", "1234", "0"]


# -- the emulated Nano --------------------------------------------------------------------------
@pytest.fixture
def proxy(make_efficiency):
    # smaller batches need fewer samples, as in the reference paper's proxies
    return make_efficiency({4: [4000, 4400], 8: [5000, 5200], 16: [6000, 6100],
                            32: [7000, 7400], 64: [9000, 9100], 128: [12000, 12500]})


def _ratios_samples(profile, efficiency):
    return ({b: efficiency.ratio(b) for b in profile.batch_sizes},
            {b: efficiency.samples(b) or 0.0 for b in profile.batch_sizes})


@pytest.mark.parametrize("cap", CAPS_W)
def test_time_objective_gives_todays_choices_on_the_nano(
    nano_resnet18_profile, nano_reference_profiles, proxy, cap
) -> None:
    profile = nano_resnet18_profile
    ratios, samples = _ratios_samples(profile, proxy)
    # the full search for time picks Algorithm 1's point (same point, ties included)
    assert CandidateSet(profile.points, ratios, samples).best(Objective(), cap) == \
        Selector(profile).select(cap, ratios)
    default = plan(profile, cap, efficiency=proxy, reference_profiles=nano_reference_profiles,
                   margin_sigmas=0)
    explicit = plan(profile, cap, efficiency=proxy, reference_profiles=nano_reference_profiles,
                    objective=Objective.of("time"), margin_sigmas=0)
    assert default.objective == Objective()
    assert default.choices == explicit.choices
    assert default.pareto_front == explicit.pareto_front
    wattcap = default.choices["wattcap"]
    assert (wattcap.batch_size, wattcap.knob_value) == (
        Selector(profile).select(cap, ratios).batch_size,
        Selector(profile).select(cap, ratios).knob_value,
    )


@pytest.mark.parametrize("cap", (4.0, 5.0, 6.5, 9.5))
def test_energy_and_cost_objectives_on_the_nano(nano_resnet18_profile, proxy, cap) -> None:
    profile = nano_resnet18_profile
    fast = plan(profile, cap, efficiency=proxy, margin_sigmas=0).choices["wattcap"]
    energy_plan = plan(profile, cap, efficiency=proxy, objective=Objective.of("energy"),
                       margin_sigmas=0)
    thrifty = energy_plan.choices["wattcap"]
    assert thrifty.peak_power_w <= cap
    assert thrifty.predicted_energy_j <= fast.predicted_energy_j
    assert thrifty.predicted_time_s >= fast.predicted_time_s
    # the least energy over every feasible point, frontier or not
    assert thrifty.predicted_energy_j == pytest.approx(min(
        p.seconds_per_sample * proxy.samples(p.batch_size) * p.avg_power_w
        for p in profile.points if p.peak_power_w <= cap
    ))
    assert thrifty.on_pareto_front
    assert energy_plan.pareto_front[-1].predicted_energy_j == pytest.approx(
        thrifty.predicted_energy_j)
    assert energy_plan.pareto_front[0].predicted_time_s == pytest.approx(fast.predicted_time_s)

    cost = plan(profile, cap, efficiency=proxy, objective=Objective.of("cost", eta=0.5),
                margin_sigmas=0)
    assert cost.objective.cost_power_w == max(p.peak_power_w for p in profile.points)
    middle = cost.choices["wattcap"]
    assert middle.on_pareto_front
    assert fast.predicted_time_s <= middle.predicted_time_s <= thrifty.predicted_time_s
    assert thrifty.predicted_energy_j <= middle.predicted_energy_j <= fast.predicted_energy_j
    # eta = 1 is the energy objective, eta = 0 the time objective
    only_energy = plan(profile, cap, efficiency=proxy,
                       objective=Objective.of("cost", eta=1.0), margin_sigmas=0)
    assert only_energy.choices["wattcap"].predicted_energy_j == thrifty.predicted_energy_j
    only_time = plan(profile, cap, efficiency=proxy,
                     objective=Objective.of("cost", eta=0.0), margin_sigmas=0)
    assert only_time.choices["wattcap"].predicted_time_s == pytest.approx(fast.predicted_time_s)


def test_constraints_on_the_nano(nano_resnet18_profile, proxy) -> None:
    profile, cap = nano_resnet18_profile, 6.5
    fast = plan(profile, cap, efficiency=proxy).choices["wattcap"]
    thrifty = plan(profile, cap, efficiency=proxy,
                   objective=Objective.of("energy")).choices["wattcap"]
    assert thrifty.predicted_energy_j < fast.predicted_energy_j  # the constraint bites

    # time under a budget between the two: feasible, within budget, no faster choice fits
    budget = (thrifty.predicted_energy_j + fast.predicted_energy_j) / 2
    bounded = plan(profile, cap, efficiency=proxy,
                   objective=Objective.of("time", max_energy_j=budget)).choices["wattcap"]
    assert bounded.predicted_energy_j <= budget
    assert fast.predicted_time_s <= bounded.predicted_time_s <= thrifty.predicted_time_s
    with pytest.raises(InfeasibleObjectiveError) as info:
        plan(profile, cap, efficiency=proxy,
             objective=Objective.of("time", max_energy_j=thrifty.predicted_energy_j * 0.99))
    assert f"{thrifty.predicted_energy_j:.1f} J" in str(info.value)
    assert "6.50 W" in str(info.value)

    # energy with a deadline: exactly the fastest time is feasible, just below is not
    on_time = plan(profile, cap, efficiency=proxy,
                   objective=Objective.of("energy", deadline_s=fast.predicted_time_s))
    assert on_time.choices["wattcap"].predicted_time_s <= fast.predicted_time_s
    with pytest.raises(InfeasibleObjectiveError) as info:
        plan(profile, cap, efficiency=proxy,
             objective=Objective.of("energy", deadline_s=fast.predicted_time_s * 0.99))
    assert f"{fast.predicted_time_s:.1f} s" in str(info.value)


def test_baselines_and_oracle_under_another_objective(
    nano_resnet18_profile, nano_reference_profiles, make_efficiency
) -> None:
    profile, cap = nano_resnet18_profile, 6.5
    proxy = make_efficiency({b: [int(1000 * b ** 0.5)] for b in profile.batch_sizes})
    target = make_efficiency({b: [int(100_000 * b ** 0.5)] for b in profile.batch_sizes},
                             dataset="target")
    energy = plan(profile, cap, efficiency=proxy, reference_profiles=nano_reference_profiles,
                  target_efficiency=target, objective=Objective.of("energy"))
    f_safe = energy.safe_knob_value
    b2 = energy.choices["baseline-2"]
    assert b2.knob_value == f_safe
    assert b2.predicted_energy_j == pytest.approx(min(
        p.seconds_per_sample * proxy.samples(p.batch_size) * p.avg_power_w
        for p in profile.points if p.knob_value == f_safe and p.peak_power_w <= cap
    ))
    b1 = energy.choices["baseline-1"]
    assert (b1.batch_size, b1.knob_value) == (profile.max_batch_size, f_safe)
    assert energy.choices["fastest"].predicted_energy_j == pytest.approx(min(
        p.seconds_per_sample * target.samples(p.batch_size) * p.avg_power_w
        for p in profile.points if p.peak_power_w <= cap
    ))
    # a budget the proxy's predictions meet but the target's (100x the samples) cannot
    budget = energy.choices["wattcap"].predicted_energy_j * 2
    bounded = plan(profile, cap, efficiency=proxy, reference_profiles=nano_reference_profiles,
                   target_efficiency=target, objective=Objective.of("time", max_energy_j=budget))
    assert "wattcap" in bounded.choices
    assert "fastest" not in bounded.choices
    assert "least energy achievable" in bounded.unavailable["fastest"]


def test_replanner_is_plans_wattcap_choice(nano_resnet18_profile, proxy) -> None:
    profile = nano_resnet18_profile
    for objective in (Objective(), Objective.of("energy"), Objective.of("cost", eta=0.4)):
        replanner = Replanner(profile, proxy, objective, margin_sigmas=0)
        for cap in CAPS_W:
            expected = plan(profile, cap, efficiency=proxy, objective=objective,
                            margin_sigmas=0).choices["wattcap"]
            assert replanner.choose(cap) == expected
        lowest = replanner.lowest_feasible_cap_w
        assert lowest == min(p.peak_power_w for p in profile.points)
        assert replanner.choose(lowest).peak_power_w == lowest
        with pytest.raises(InfeasibleCapError) as info:
            replanner.choose(lowest - 0.01)  # the run pauses here
        assert info.value.lowest_feasible_w == lowest


def test_objective_input_is_checked() -> None:
    bad = [
        (("speed",), {}, "unknown objective"),
        (("cost",), {}, "eta in [0, 1]"),
        (("cost",), {"eta": 1.5}, "eta in [0, 1]"),
        (("time",), {"eta": 0.5}, "only applies to the cost"),
        (("energy",), {"max_energy_j": 10.0}, "time objective only"),
        (("time",), {"deadline_s": 10.0}, "energy objective only"),
        (("time",), {"max_energy_j": -1.0}, "> 0 J"),
        (("energy",), {"deadline_s": 0.0}, "> 0 s"),
    ]
    for args, kwargs, expected in bad:
        with pytest.raises(ObjectiveError) as info:
            Objective.of(*args, **kwargs)
        assert expected in str(info.value)
        assert "\n" not in str(info.value)
    assert Objective.of("cost", eta=0.25).describe() == "cost (eta 0.25)"
    assert Objective.of("energy", deadline_s=300).describe() == "energy within 300 s"


def test_plan_file_keeps_objective_and_front(tmp_path, nano_resnet18_profile, proxy) -> None:
    result = plan(nano_resnet18_profile, 6.5, efficiency=proxy,
                  objective=Objective.of("cost", eta=0.3))
    loaded = Plan.load(result.save(tmp_path / "plan.json"))
    assert loaded == result
    assert loaded.objective.name == "cost" and loaded.objective.eta == 0.3
    assert len(loaded.pareto_front) >= 2
    raw = json.loads(result.to_json())
    raw["objective"]["eta"] = 2.0
    with pytest.raises(WattcapFileError) as info:
        Plan.from_json(json.dumps(raw), source="plan.json")
    assert "eta" in str(info.value)


def test_pareto_plot(tmp_path, nano_resnet18_profile, nano_reference_profiles, proxy) -> None:
    result = plan(nano_resnet18_profile, 6.5, efficiency=proxy,
                  reference_profiles=nano_reference_profiles, objective=Objective.of("energy"))
    out = plot_pareto(result, tmp_path / "plots" / "pareto.png")
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


@pytest.mark.parametrize("cap_w", [None, 140.0, 112.0, 101.0])
def test_of_a_host_bound_row_the_clock_clear_of_the_knee_is_taken(cap_w) -> None:
    """Clocks 500-1000 MHz as fast (the host bounds the step from 500 MHz on): the lowest of
    them is the knee, which a host faster on the day turns GPU-bound. Without a cap, the first
    clock at least HOST_BOUND_HEADROOM above the knee is taken, not the knee nor the highest;
    a cap below that clock's peak takes the highest tied clock under it; time and energy
    objectives and the selector agree on time; energy still takes the knee."""
    from wattcap.core.defaults import HOST_BOUND_HEADROOM

    clocks_mhz = [400, 450, 500, 550, 600, 650, 700, 800, 1000]
    points = [ProfilePoint(batch_size=8, knob_value=f * 1_000_000, peak_power_w=f / 10 + 50,
                           avg_power_w=f / 10 + 45, seconds_per_sample=1e-5 * max(1.0, 500 / f),
                           steps=1, readings=5) for f in clocks_mhz]
    table = _table(points, [8], [f * 1_000_000 for f in clocks_mhz])
    target_mhz = min(f for f in clocks_mhz if f >= 500 * (1 + HOST_BOUND_HEADROOM))
    expected_mhz = {None: target_mhz, 140.0: target_mhz, 112.0: 600, 101.0: 500}[cap_w]
    chosen = Selector(table).select(cap_w, {8: 1.0})
    assert chosen is not None and chosen.knob_value == expected_mhz * 1_000_000
    assert table.frontier(cap_w)[8].knob_value == expected_mhz * 1_000_000
    candidates = CandidateSet(table.points, {8: 1.0}, {8: 1.0})
    assert candidates.best(Objective(), cap_w).knob_value == expected_mhz * 1_000_000
    assert candidates.best(Objective(name="energy"), cap_w).knob_value == 500_000_000
