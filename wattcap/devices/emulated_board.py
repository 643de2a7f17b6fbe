"""What differs between two runs of the same emulated board: the board state one run draws.

The kind emulator (`BoardState()`, every field neutral) reads the same (model, b, f) point the
same in every profile and run. Real boards do not, and an unkind board draws, per run, from the
spread measured on them (`draw_board_state`):

* **speed** (boost headroom, silicon, temperature at the start): the achievable FLOP/s times a
  factor; the GPU-bound points of resnet18 on an H100 moved 0.2-1.6 % between rounds of one
  session (`bench/results/gpu-2026-11-26-h100/timing-modes.txt`, b = 128 and 512), so one
  standard deviation of 1.6 %, the largest of them (across fresh starts we measured power, not
  time).
* **power** (leakage, temperature): the GPU's power times a factor; resnet18 at b=64 peaked at
  283, 312 and 345 W on three fresh starts of the same H100 machine kind (our reports), a
  relative standard deviation of 10 %.
* **host speed**: the host phase (launches, the input pipeline) times a factor; the host-bound
  points (b = 8 and 32) moved 18 % and 12 % between rounds of the same session (the same
  file), so one standard deviation of 15 %.
* **the sensor's window and lag**: a reading averages `sensor_window_s` (not one period) and
  describes the power `sensor_lag_s` ago; NVML's averaged power covers 1 s (NVIDIA's nvml.h,
  `nvmlDeviceGetPowerUsage` on recent GPUs), a Jetson's INA3221 averages over its conversion
  window. An unkind board lags by one period and averages over two.
* **power-limit overshoot**: a board's power limit holds average power over a window, and
  public sweeps of GPU power limits measure average power up to about 20 % over a low limit;
  an unkind board lets a step's average power overshoot the limit by up to 10 % (drawn).
* **time not monotone in the power limit**: in the same public sweeps a sixth of the (GPU,
  workload, batch size) rows run more than 5 % slower at the highest limit than at their
  fastest one (a hotter board boosts less); an unkind board draws that slowdown for limits in
  the top tenth of its range: 5-10 % with probability 1/6, else 0-2 %.

None of these numbers is chosen so that a method wins: they are the measured spreads above,
and the same draw serves every method of a comparison (a draw depends on the board's name and
the run's seed only).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

#: one standard deviation of each factor of an unkind board (see the module for the sources)
SPEED_SPREAD = 0.016
POWER_SPREAD = 0.10
HOST_SPREAD = 0.15
#: an unkind board's sensor: lag in periods, window in periods
SENSOR_LAG_PERIODS = 1.0
SENSOR_WINDOW_PERIODS = 2.0
#: the largest overshoot of a power limit an unkind board draws (a fraction of the limit)
MAX_LIMIT_OVERSHOOT = 0.10
#: the top share of the power-limit range where a hot board slows, and how likely and how much
TOP_LIMIT_BAND = 0.10
SLOW_AT_TOP_PROBABILITY = 1 / 6
SLOW_AT_TOP_RANGE = (0.05, 0.10)
MILD_AT_TOP_RANGE = (0.0, 0.02)


@dataclass(frozen=True)
class BoardState:
    """One run's board (see the module); the defaults are the kind, deterministic board."""

    #: achievable FLOP/s x this
    speed_factor: float = 1.0
    #: the GPU's power x this
    power_factor: float = 1.0
    #: the host phase's time x this
    host_factor: float = 1.0
    #: a reading averages this long a window, in sensor periods (1: one period, today's)
    sensor_window_periods: float = 1.0
    #: a reading describes the power this many sensor periods ago (0: none)
    sensor_lag_periods: float = 0.0
    #: a power limit holds a step's average power within limit x (1 + this)
    limit_overshoot: float = 0.0
    #: the slowdown at power limits in the top `TOP_LIMIT_BAND` of the range (0: none)
    slow_at_top_limit: float = 0.0
    #: the run's seed it was drawn with
    seed: int = 0
    #: what drew it ("kind", or "unkind (seed N)")
    label: str = "kind"

    def __post_init__(self) -> None:
        if not (self.speed_factor > 0 and self.power_factor > 0 and self.host_factor > 0):
            raise ValueError("the board's speed, power and host factors must be positive")
        if self.sensor_window_periods <= 0 or self.sensor_lag_periods < 0:
            raise ValueError("the sensor's window must be positive and its lag not negative")
        if not 0 <= self.slow_at_top_limit < 1 or self.limit_overshoot < 0:
            raise ValueError("the overshoot and the slowdown must be non-negative (and the "
                             "slowdown below 1)")

    @property
    def kind(self) -> bool:
        """The deterministic board of the goldens and unit tests."""
        return self == BoardState(seed=self.seed, label=self.label)

    def describe(self) -> str:
        """One line for a run's events."""
        if self.kind:
            return "a kind board (no run-to-run variation)"
        return (f"board state {self.label}: speed x{self.speed_factor:.3f}, power "
                f"x{self.power_factor:.3f}, host x{self.host_factor:.3f}, "
                f"sensor window {self.sensor_window_periods:g} periods lagging "
                f"{self.sensor_lag_periods:g}, power-limit overshoot up to "
                f"{self.limit_overshoot:.1%}, {self.slow_at_top_limit:.1%} slower at the top "
                "limits")


def draw_board_state(board_name: str, seed: int) -> BoardState:
    """An unkind board's state for one run of `board_name`, drawn from (name, seed) with the
    spreads of the module."""
    rng = random.Random(f"board:{board_name}:{seed}")
    slow_low, slow_high = SLOW_AT_TOP_RANGE if rng.random() < SLOW_AT_TOP_PROBABILITY \
        else MILD_AT_TOP_RANGE
    return BoardState(
        speed_factor=math.exp(rng.gauss(0.0, SPEED_SPREAD)),
        power_factor=math.exp(rng.gauss(0.0, POWER_SPREAD)),
        host_factor=math.exp(rng.gauss(0.0, HOST_SPREAD)),
        sensor_window_periods=SENSOR_WINDOW_PERIODS,
        sensor_lag_periods=SENSOR_LAG_PERIODS,
        limit_overshoot=rng.uniform(0.0, MAX_LIMIT_OVERSHOOT),
        slow_at_top_limit=rng.uniform(slow_low, slow_high),
        seed=seed, label=f"unkind (seed {seed})")


__all__ = ["BoardState", "draw_board_state"]
