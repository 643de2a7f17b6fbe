"""Drift or noise (`wattcap.algorithms.drift`): windows that vary as much as an H100's
host-bound resnet18 step does (12 % from one 0.5 s window to the next, against a point
measured over one such window) are not drift, a real change on a quiet device still is, from
its second window."""

from __future__ import annotations

import random

import pytest

from wattcap.algorithms.drift import (
    BOARD_TOLERANCE,
    BOARD_WINDOWS,
    MIN_DIFFERENCES,
    DriftTest,
    WindowChange,
    noise_threshold,
    sigma_of_differences,
)


def window(time_change: float, power_change: float = 0.0) -> WindowChange:
    return WindowChange(time_change=time_change, power_change=power_change, steps=4, readings=5)


def false_drifts(windows: int, noise: float, seed: int) -> tuple[int, int]:
    """(drifts decided, windows a single-window rule at 10 % would have called drift) over
    `windows` windows of a device that never moves: each window reads the point's own
    measurement error (one window's noise, drawn afresh at each re-measure) plus its own."""
    rng = random.Random(seed)
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    point_error = rng.gauss(0, noise)
    decided = single = 0
    for _ in range(windows):
        change = point_error + rng.gauss(0, noise)
        single += abs(change) > 0.1
        if test.add(window(change, rng.gauss(0, 0.03))) is not None:
            decided += 1
            point_error = rng.gauss(0, noise)  # re-measured: a new draw
            test.new_point()
    return decided, single


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_windows_are_not_drift(seed: int) -> None:
    """An hour of 0.5 s windows at 12 % noise: a window-by-window rule re-measured about a
    third of the time; the noise-aware one a handful of times."""
    decided, single = false_drifts(7200, noise=0.12, seed=seed)
    assert single > 2000
    assert decided <= 30


def test_a_change_on_a_quiet_device_is_drift_from_its_second_window() -> None:
    rng = random.Random(0)
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    verdicts = []
    for index in range(30):
        change = (0.25 if index >= 10 else 0.0) + rng.gauss(0, 0.005)
        verdicts.append(test.add(window(change)))
    assert verdicts[:11] == [None] * 11  # the window holding the change alone does not decide
    verdict = verdicts[11]
    assert verdict is not None and verdict.time_change == pytest.approx(0.25, abs=0.02)
    assert verdict.time_threshold == pytest.approx(0.1)  # the change is not taken for noise
    assert verdict.steps == 3 * 4 and verdict.readings == 3 * 5


def test_one_slow_window_is_not_drift() -> None:
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    changes = [0.0] * 10 + [0.6] + [0.0] * 10
    assert all(test.add(window(change)) is None for change in changes)


def test_power_drifts_alone() -> None:
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.05)
    verdicts = [test.add(window(0.0, 0.08 if index >= 6 else 0.0)) for index in range(10)]
    assert verdicts[6] is None and verdicts[7] is not None
    assert verdicts[7].power_change == pytest.approx(0.08)


def test_no_decision_before_the_noise_is_known_and_it_outlives_a_point() -> None:
    """A run's first windows only show the noise (a first window 50 % off may be the point's
    error alone); a new point (another clock, a re-measure) starts its level afresh but keeps
    the noise learnt."""
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    assert [test.add(window(0.5)) for _ in range(MIN_DIFFERENCES)] == [None] * MIN_DIFFERENCES
    assert not test.ready
    assert test.add(window(0.5)) is not None and test.ready
    test.new_point()
    assert test.add(window(0.5)) is None  # one window at the new point
    assert test.add(window(0.5)) is not None


def test_the_noise_sets_the_threshold_above_the_tolerance() -> None:
    assert sigma_of_differences([]) == 0.0
    # differences of a normal noise sigma have a median |d| of 0.954 sigma
    rng = random.Random(3)
    draws = [rng.gauss(0, 0.12) for _ in range(4001)]
    sigma = sigma_of_differences([b - a for a, b in zip(draws, draws[1:], strict=False)])
    assert sigma == pytest.approx(0.12, rel=0.05)
    assert noise_threshold(0.1, 0.0) == 0.1
    assert noise_threshold(0.1, 0.12) == pytest.approx(3 * 0.12 * (4 / 3) ** 0.5)


def test_a_board_off_the_profile_from_the_start_is_its_level_not_a_drift() -> None:
    """Windows 30 % slower and 20 % cooler than the profile from the first on (another board of
    the kind): that is the board's level, never a drift; a 25 % slowdown from it later is."""
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    steady = [test.add(window(0.3, -0.2)) for _ in range(200)]
    assert steady == [None] * 200
    assert test.board_scale == pytest.approx((1.3, 0.8))
    later = [test.add(window(1.3 * 1.25 - 1, -0.2)) for _ in range(3)]
    assert later[0] is None and later[1] is not None
    assert later[1].time_change == pytest.approx(0.25) and later[1].power_change == \
        pytest.approx(0.0, abs=1e-12)


def test_the_board_level_is_robust_to_one_odd_window_and_to_alternating_ones() -> None:
    odd = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    for change in [0.35, 0.0, 0.01, -0.01][:BOARD_WINDOWS]:  # one window held up by a pause
        odd.add(window(change))
    assert odd.board_scale is not None and odd.board_scale[0] == pytest.approx(1.0, abs=0.011)
    swinging = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    for index in range(BOARD_WINDOWS):
        swinging.add(window(0.0, 0.2 if index % 2 else -0.2))
    assert swinging.board_scale is not None
    assert swinging.board_scale[1] == pytest.approx(1.0, abs=1e-12)


def test_a_board_farther_off_than_boards_differ_is_judged_against_the_profile() -> None:
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    verdicts = [test.add(window(0.0, BOARD_TOLERANCE + 0.1)) for _ in range(BOARD_WINDOWS)]
    assert test.board_scale is None
    assert verdicts[-1] is not None  # decided once the noise is known: the fourth window
    assert verdicts[-1].power_change == pytest.approx(BOARD_TOLERANCE + 0.1)


def test_windows_of_a_re_measured_point_neither_set_nor_use_the_board_level() -> None:
    """A point this run re-measured is this board's already: its windows are judged as they
    are (not against the board's level), and they do not count as the board's first windows."""
    fresh = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    verdicts = [fresh.add(window(0.3), from_profile=False) for _ in range(MIN_DIFFERENCES + 1)]
    assert not fresh.board_decided and verdicts[-1] is not None

    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    assert [test.add(window(0.3)) for _ in range(BOARD_WINDOWS)] == [None] * BOARD_WINDOWS
    assert test.board_scale == pytest.approx((1.3, 1.0))
    test.new_point()
    # as the re-measure reads: no drift (against the board's level it would read -23 %)
    assert [test.add(window(0.0), from_profile=False) for _ in range(6)] == [None] * 6
    test.new_point()
    moved = [test.add(window(0.3), from_profile=False) for _ in range(2)]
    assert moved[1] is not None and moved[1].time_change == pytest.approx(0.3)


def test_a_resumed_run_takes_the_board_level_it_had() -> None:
    """Not learnt again after a restart (the board may have drifted meanwhile): taken over,
    a level the run had decided as none stays none."""
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    test.take_board((1.0, 1.2))
    assert test.board_decided
    assert [test.add(window(0.0, 0.2)) for _ in range(8)] == [None] * 8
    drifted = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    drifted.take_board((1.0, 1.0))
    verdicts = [drifted.add(window(0.0, 0.2)) for _ in range(MIN_DIFFERENCES + 1)]
    assert verdicts[-1] is not None and verdicts[-1].power_change == pytest.approx(0.2)


def test_windows_whose_clock_the_board_did_not_hold_do_not_teach_its_level() -> None:
    """A power limit that binds flattens a window's power: such windows are judged, but the
    board's level comes from the first windows at a clock the board held."""
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    for _ in range(6):
        test.add(window(0.1, -0.2), teaches_board=False)
    assert not test.board_decided
    for _ in range(BOARD_WINDOWS):
        test.add(window(0.0, 0.25))
    assert test.board_scale == pytest.approx((1.0, 1.25))
