"""The fleet planner (issue 29, its planning part): per-client (b_i, k_i, s_i) under each
client's cap, chosen together; never slower than the uniform or the clients' own plans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattcap.algorithms.fleet import FleetClient, SplitPolicy, plan_fleet
from wattcap.core.profile import ProfilePoint

SIZES = (8, 16, 32, 64)
RATIOS = {8: 0.55, 16: 0.65, 32: 0.8, 64: 1.0}


def _point(b: int, knob: int, spp: float, power_w: float) -> ProfilePoint:
    return ProfilePoint(batch_size=b, knob_value=knob, peak_power_w=power_w,
                        avg_power_w=power_w * 0.9, seconds_per_sample=spp, steps=5,
                        readings=10)


def _client(name: str, options: list[ProfilePoint], comm_s: float) -> FleetClient:
    largest = max(p.batch_size for p in options)
    uniform = min((p for p in options if p.batch_size == largest), key=lambda p: p.knob_value)
    own = min(options, key=lambda p: p.seconds_per_sample * RATIOS[p.batch_size])
    return FleetClient(name, tuple(options), comm_s, uniform, own)


def _grid(speed: float, cap_w: float) -> list[ProfilePoint]:
    """A device `speed` times as fast as the reference; faster clocks draw more; the cap keeps
    what fits (larger batches draw more)."""
    points = [_point(b, k, 1e-3 / speed * (1.0 + 8 / b) * (1.6 - 0.3 * k), 2.0 + b / 32 + k)
              for b in SIZES for k in (0, 1, 2)]
    return [p for p in points if p.peak_power_w <= cap_w]


def test_the_water_filled_split_finishes_together_and_leaves_a_slow_link_out() -> None:
    fast = _client("fast", _grid(4.0, 9.0), comm_s=0.1)
    slow = _client("slow", _grid(1.0, 5.0), comm_s=0.1)
    remote = _client("remote", _grid(2.0, 9.0), comm_s=1000.0)  # its link alone: a round
    plans = plan_fleet([fast, slow, remote], RATIOS, samples_per_round=2048,
                       samples_to_target=50_000,
                       policy=SplitPolicy(by_speed=True, may_leave_out=True))
    fleet = plans["fleet"]
    assert fleet.left_out == ["remote"]
    assert sum(c.samples for c in fleet.clients) == pytest.approx(2048)
    assert {c.name for c in fleet.clients} == {"fast", "slow"}
    fastest = max(fleet.clients, key=lambda c: c.samples)
    assert fastest.name == "fast"  # the faster device takes more of the round
    assert fleet.time_s < plans["uniform"].time_s and fleet.time_s < plans["own"].time_s
    # the equal split waits for the remote client's link every round
    assert plans["uniform"].round_s > 1000.0
    # by speed without sitting out, its data stay in: it trains one batch, the others share
    # the rest
    kept = plan_fleet([fast, slow, remote], RATIOS, samples_per_round=2048,
                      samples_to_target=50_000, policy=SplitPolicy(by_speed=True))["fleet"]
    assert kept.left_out == []
    by_name = {c.name: c for c in kept.clients}
    assert by_name["remote"].samples == by_name["remote"].batch_size
    assert sum(c.samples for c in kept.clients) == pytest.approx(2048)
    assert kept.round_s >= 1000.0 and kept.time_s <= plans["uniform"].time_s
    # by default the split is equal: every client trains 2048 / 3 samples, the round waits for
    # the remote link, each client's (b, clock) still chosen for the fleet
    equal = plan_fleet([fast, slow, remote], RATIOS, samples_per_round=2048,
                       samples_to_target=50_000)["fleet"]
    assert [c.samples for c in equal.clients] == pytest.approx([2048 / 3] * 3)
    assert equal.time_s <= min(plans["uniform"].time_s, plans["own"].time_s) * (1 + 1e-9)


def test_clients_off_the_critical_path_are_slowed_to_the_round_time() -> None:
    clients = [_client("a", _grid(1.0, 9.0), 0.0), _client("b", _grid(3.0, 9.0), 0.0)]
    fleet = plan_fleet(clients, RATIOS, 4096, 50_000)["fleet"]
    for c in fleet.clients:
        assert c.busy_s <= fleet.round_s * (1 + 1e-9)


def test_a_bad_fleet_is_refused() -> None:
    with pytest.raises(ValueError, match="no clients"):
        plan_fleet([], RATIOS, 1024, 1000)
    empty = FleetClient("dark", (), 0.0, _point(8, 0, 1e-3, 2.0), _point(8, 0, 1e-3, 2.0))
    with pytest.raises(ValueError, match="client dark: no configuration is feasible"):
        plan_fleet([empty], RATIOS, 1024, 1000)


_fleet = st.lists(st.tuples(st.floats(0.5, 5.0), st.floats(4.0, 10.0), st.floats(0.0, 2.0)),
                  min_size=1, max_size=5)


@settings(max_examples=40, deadline=None)
@given(_fleet, st.sampled_from([512, 2048, 8192]), st.booleans())
def test_the_fleet_plan_is_never_slower_than_uniform_or_own(specs, samples_per_round,
                                                            by_speed) -> None:
    clients = []
    for i, (speed, cap_w, comm_s) in enumerate(specs):
        options = _grid(speed, cap_w)
        if not options:
            return
        clients.append(_client(f"c{i}", options, comm_s))
    plans = plan_fleet(clients, RATIOS, samples_per_round, 100_000,
                       SplitPolicy(by_speed=by_speed))
    fleet = plans["fleet"]
    assert fleet.time_s <= plans["uniform"].time_s * (1 + 1e-9)
    assert fleet.time_s <= plans["own"].time_s * (1 + 1e-9)
    assert sum(c.samples for c in fleet.clients) == pytest.approx(samples_per_round)
    for c in fleet.clients:  # every client at a point feasible under its own cap
        client = next(x for x in clients if x.name == c.name)
        assert any((p.batch_size, p.knob_value) == (c.batch_size, c.knob_value)
                   for p in client.options)
