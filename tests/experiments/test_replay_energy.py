"""A replayed configuration's energy is the board's over the replay, accounted as a run's:
the first reading measures from the replay's start, and the time after the last reading counts
at that reading's power. Before, the first reading stood for a whole period and the tail was
left out, each worth up to a period of energy, so a replay read up to ~0.6 of a period's
energy off wherever its start and end fell between readings."""

from __future__ import annotations

import pytest

from wattcap.core.run import CurvePoint, RunRecord
from wattcap.devices.emulated import EmulatedDevice
from wattcap.experiments.replay import replay_on_device

MODEL = "digits32-cnn"
#: the Nano with a sensor that reads its period's exact average power
NOISELESS = EmulatedDevice("jetson-nano").spec.model_copy(update={"sensor_noise_w": 0.0})


def _missed_run(b: int, seen: int) -> RunRecord:
    """A run that missed its target after `seen` samples: its replay trains all of them."""
    return RunRecord(model=MODEL, batch_size=b, reached=False, samples_to_target=None,
                     samples_seen=seen, final_accuracy=0.5,
                     curve=[CurvePoint(samples=seen, accuracy=0.5, device_time_s=0.0)],
                     device_time_s=0.0, energy_j=0.0, peak_power_w=None, avg_power_w=None,
                     wall_time_s=0.0)


@pytest.mark.parametrize("seen", [1000, 1100])
@pytest.mark.parametrize("phase", [0.1, 0.5, 0.9])
def test_a_replay_reads_the_energy_the_board_drew(seen: int, phase: float) -> None:
    device = EmulatedDevice(NOISELESS)
    period_s = device.sensor_period_s
    device.idle(phase * period_s)  # the replay starts `phase` of a period after a reading
    before_j = device.true_energy_j
    replay = replay_on_device(_missed_run(64, seen), device, max(device.frequencies_hz()), None)
    drawn_j = device.true_energy_j - before_j
    assert replay.budget_energy_j is not None and replay.budget_time_s is not None
    assert replay.budget_time_s > 10 * period_s
    period_j = drawn_j / replay.budget_time_s * period_s
    # what is left: the first reading averages its whole period, idle before the start too
    assert replay.budget_energy_j == pytest.approx(drawn_j, abs=0.25 * period_j)
