"""A run resumed from its checkpoint reports the energy of the same run uninterrupted.

The sensor measures a run in periods: each reading stands for the time since the one before.
A checkpoint falls between two readings, and a resumed emulated device starts its sensor's
phase afresh, so the part of a period before the checkpoint has to be carried to the first
reading after the resume (and the time after a run's last reading counted at that reading's
power), or every resume loses up to a period of energy. All on the emulated clock.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.train.test_training import Killed, kill_at, small_config
from wattcap.core.run import RunRecord, TrainConfig
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice, PowerReading
from wattcap.devices.spec import DeviceSpec
from wattcap.runtime.meter import PowerMeter
from wattcap.train.loop import train_to_accuracy

ORIN = EmulatedDevice("jetson-agx-orin").spec
#: the same board with a sensor that reads the board's exact average power over each period
NOISELESS = ORIN.model_copy(update={"sensor_noise_w": 0.0})
#: an unreachable target: every run trains the whole budget, 2048 samples (0.23 s, 4.5
#: sensor periods on the AGX Orin); checkpoints at every evaluation (256 samples)
CONFIG = small_config(target_accuracy=1.0, sample_budget=2048)
#: evaluations at which the run is killed, each resumed from its checkpoint: the first part
#: (0.03 s) is shorter than a sensor period (no reading: all of it waits for a later one)
KILLS = [256, 1024, 1536]


@pytest.fixture(scope="module")
def digits_splits():  # noqa: ANN201 - the data set's own split type
    return get_dataset("digits").split(0.2, seed=0)


def board(spec: DeviceSpec) -> EmulatedDevice:
    """A fresh emulated board (a restarted process opens one) that keeps the ground truth of
    each sensor period."""
    device = EmulatedDevice(spec)
    device.true_period_w = []
    return device


def interrupted(config: TrainConfig, splits: tuple, spec: DeviceSpec,
                folder: Path) -> RunRecord:
    """The run killed at each of KILLS and resumed, each time on a fresh board."""
    train, test = splits
    for samples in KILLS:
        with pytest.raises(Killed):
            train_to_accuracy(config, train, test, device=board(spec), checkpoint_dir=folder,
                              on_eval=kill_at(samples))
    return train_to_accuracy(config, train, test, device=board(spec), checkpoint_dir=folder)


def test_a_resumed_run_reports_the_energy_of_the_run_uninterrupted(
        digits_splits: tuple, tmp_path: Path) -> None:
    train, test = digits_splits
    device = board(NOISELESS)
    full = train_to_accuracy(CONFIG, train, test, device=device)
    resumed = interrupted(CONFIG, digits_splits, NOISELESS, tmp_path)
    assert resumed.resumed_from_samples == KILLS[-1]
    assert resumed.device_time_s == pytest.approx(full.device_time_s, rel=1e-9)
    assert resumed.energy_source == full.energy_source == "sensor"
    # The tolerance: what the sampling leaves unmeasured. At each checkpoint, the part of a
    # period since the last reading is measured by the next period's reading, and at each
    # run's end the time since the last reading is counted at that reading's power: each of
    # these (a part of one period, KILLS + 2 of them) is off by at most a period times the
    # spread of the periods' true average powers (the board's ground truth). No noise here:
    # the readings are those true averages.
    period_s = NOISELESS.sensor_period_s
    powers = [w for _, w in device.true_period_w or []]
    tolerance_j = (len(KILLS) + 2) * period_s * (max(powers) - min(powers))
    period_j = period_s * (full.avg_power_w or 0.0)
    assert tolerance_j < 0.05 * period_j  # a period lost per resume would show 20x over
    assert resumed.energy_j == pytest.approx(full.energy_j, abs=tolerance_j)
    # both are the board's energy, the time after the last reading included
    assert full.energy_j == pytest.approx(device.true_energy_j, abs=tolerance_j)


def test_on_a_noisy_sensor_a_resume_changes_the_energy_by_noise_only(
        digits_splits: tuple, tmp_path: Path) -> None:
    """The bundled AGX Orin's sensor adds noise to each reading (sigma = `sensor_noise_w`),
    drawn afresh by the resumed board: the two runs' readings differ by it."""
    train, test = digits_splits
    full = train_to_accuracy(CONFIG, train, test, device=board(ORIN))
    resumed = interrupted(CONFIG, digits_splits, ORIN, tmp_path)
    assert full.observed_frequency_hz is not None and resumed.observed_frequency_hz is not None
    readings = full.observed_frequency_hz.readings + resumed.observed_frequency_hz.readings
    # Each reading's noise weighs at most two periods (the first after a resume measures the
    # checkpoint's part of a period too): four standard deviations of the sum over both runs'
    # readings. Well under one period's energy, which each resume lost before.
    period_s = ORIN.sensor_period_s
    tolerance_j = 4 * ORIN.sensor_noise_w * 2 * period_s * math.sqrt(readings)
    assert tolerance_j < 0.5 * period_s * (full.avg_power_w or 0.0)
    assert resumed.energy_j == pytest.approx(full.energy_j, abs=tolerance_j)


def test_the_part_of_a_period_before_a_checkpoint_is_measured_after_the_resume() -> None:
    """Readings at 0.05 and 0.10 s, a checkpoint at 0.13 s; the resumed process's clock
    starts at 0 and reads at 0.05 s: that reading stands for 0.03 + 0.05 s, and the run's end
    at 0.07 s for 0.02 s more at its power: 0.20 s of the run in all, as uninterrupted."""
    def reading(time_s: float, power_w: float) -> PowerReading:
        return PowerReading(time_s, power_w, "VDD_IN")

    first = PowerMeter(0.05)
    first.start(0.0)
    first(reading(0.05, 10.0))
    first(reading(0.10, 12.0))
    state = first.state(0.13)
    assert state.uncovered_s == pytest.approx(0.03) and state.last_power_w == 12.0
    resumed = PowerMeter(0.05)
    resumed.start(0.0)
    resumed.resume(state, 0.0)
    resumed(reading(0.05, 20.0))
    assert resumed.energy_j == pytest.approx(0.05 * 10 + 0.05 * 12 + 0.08 * 20)
    assert resumed.energy_to_j(0.07) == pytest.approx(resumed.energy_j + 0.02 * 20)
    # a resumed part with no reading of its own ends at the checkpoint's last power
    quiet = PowerMeter(0.05)
    quiet.resume(state, 0.0)
    assert quiet.energy_to_j(0.01) == pytest.approx(first.energy_j + 0.04 * 12)


class RecordingBoard(EmulatedDevice):
    """A fresh board that keeps each reading beside the ground truth of its period (a kind
    board: a reading is its period's true average plus the sensor's noise)."""

    def __init__(self, spec: DeviceSpec) -> None:
        super().__init__(spec)
        self.true_period_w = []
        self.readings_w: list[float] = []

    def _dispatch_tick(self, reading: PowerReading) -> bool:
        self.readings_w.append(reading.power_w)
        return super()._dispatch_tick(reading)

    def noise_w(self) -> list[float]:
        """Each reading's noise: what it read over what the board drew."""
        assert self.true_period_w is not None
        return [r - t for r, (_, t) in zip(self.readings_w, self.true_period_w, strict=True)]


def test_a_resumed_board_draws_its_sensor_noise_afresh(digits_splits: tuple,
                                                        tmp_path: Path) -> None:
    """A restarted process opens a board whose sensor noise would start from its seed again,
    repeating the killed part's noise reading for reading; the resumed run draws it afresh."""
    train, test = digits_splits
    first, resumed = RecordingBoard(ORIN), RecordingBoard(ORIN)
    with pytest.raises(Killed):
        train_to_accuracy(CONFIG, train, test, device=first, checkpoint_dir=tmp_path,
                          on_eval=kill_at(1024))
    train_to_accuracy(CONFIG, train, test, device=resumed, checkpoint_dir=tmp_path)
    shared = min(len(first.readings_w), len(resumed.readings_w))
    assert shared >= 2
    before, after = first.noise_w()[:shared], resumed.noise_w()[:shared]
    assert all(abs(n) > 0 for n in before + after)  # the sensor is noisy
    assert all(abs(b - a) > 1e-9 for b, a in zip(before, after, strict=True))
