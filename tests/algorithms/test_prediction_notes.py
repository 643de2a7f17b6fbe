"""A plan says when a predicted point's uncertainty held back a faster choice (a few-point
profile), names it, its predicted power ± uncertainty against the cap and the profile that
measures it; and says nothing where the choice would be the same without that uncertainty."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from wattcap.algorithms.planner import plan
from wattcap.algorithms.prediction_notes import HELD_BY_PREDICTION, as_if_measured
from wattcap.cli import app
from wattcap.core.objective import Objective
from wattcap.core.profile import ProfilePoint, ProfileTable

MHZ = 1_000_000
FREQS = [100 * MHZ, 200 * MHZ, 300 * MHZ]
NOISE_W = 0.1


def _point(b: int, mhz: int, peak_w: float, s_per_sample: float,
           std_w: float | None = None) -> ProfilePoint:
    """A measured point, or a predicted one where `std_w` (its peak's 1-sigma) is given."""
    predicted = std_w is not None
    return ProfilePoint(batch_size=b, knob_value=mhz * MHZ, peak_power_w=peak_w,
                        avg_power_w=peak_w - 0.2, seconds_per_sample=s_per_sample,
                        steps=0 if predicted else 10, readings=0 if predicted else 20,
                        predicted=predicted, peak_power_std_w=std_w,
                        seconds_per_sample_std=s_per_sample * 0.01 if predicted else None)


def _few_point_table(std_w: float | None = 0.5) -> ProfileTable:
    """b=8 measured at every clock (9.0 W at the top); b=32 measured at its lowest clock, its
    upper clocks predicted: 9.5 W ± `std_w` at 200 MHz (faster than any b=8 point), 11 W at
    300 MHz. With the 2-sigma margin, 200 MHz fits a 10 W cap only without the prediction's
    uncertainty (9.5 + 2·0.1 = 9.7 W; with it 9.5 + 2·hypot(0.1, 0.5) = 10.52 W)."""
    points = [_point(8, 100, 7.0, 4e-3), _point(8, 200, 8.0, 3e-3), _point(8, 300, 9.0, 2.5e-3),
              _point(32, 100, 8.5, 3.0e-3), _point(32, 200, 9.5, 1.5e-3, std_w),
              _point(32, 300, 11.0, 1.0e-3, None if std_w is None else 0.2)]
    return ProfileTable(
        device="jetson-agx-orin", device_kind="emulated", power_mode="MAXN",
        sensor_rail="VDD_GPU_SOC", sensor_period_s=0.05, model="digits32-cnn",
        input_shape=[1, 32, 32], batch_sizes=[8, 32], knob_values=FREQS, max_batch_size=32,
        mode="model" if std_w is not None else "exhaustive", points=points,
        points_measured=4 if std_w is not None else 6, profiling_device_s=1.0,
        power_noise_w=NOISE_W, model_fit={"max_points": 4} if std_w is not None else {})


def _held(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith(HELD_BY_PREDICTION)]


def test_a_faster_point_held_back_by_its_prediction_is_named() -> None:
    result = plan(_few_point_table(), 10.0)
    chosen = result.choices["wattcap"]
    assert (chosen.batch_size, chosen.knob_value) == (8, 300 * MHZ)
    [note] = _held(result.notes)
    assert "b=32 at 200.0 MHz would be wattcap's choice" in note
    assert "predicted time 40% shorter than b=8 at 300.0 MHz" in note  # 1.5e-3 vs 2.5e-3
    assert "9.50 W ± 0.50 W (1 sigma)" in note
    assert "10.52 W with the 2-sigma margin" in note and "over the 10 W cap" in note
    assert ("wattcap profile --device emulated:jetson-agx-orin --power-mode MAXN --model "
            "digits32-cnn --power-cap 10 --out FILE") in note
    assert "--max-points above 4" in note


def test_without_the_uncertainty_the_held_back_point_is_the_choice() -> None:
    """The counterfactual the note rests on: the same peaks, measured, choose that point."""
    certain = as_if_measured(_few_point_table())
    assert certain is not None
    chosen = plan(certain, 10.0).choices["wattcap"]
    assert (chosen.batch_size, chosen.knob_value) == (32, 200 * MHZ)


def test_no_note_where_the_uncertainty_changes_nothing() -> None:
    # 12 W: b=32 at 300 MHz fits even with its uncertainty (11 + 2·hypot(0.1, 0.2) = 11.45 W)
    result = plan(_few_point_table(), 12.0)
    assert result.choices["wattcap"].knob_value == 300 * MHZ
    assert _held(result.notes) == []
    # 9.6 W: b=32 at 200 MHz is over the cap even without it (9.7 W)
    assert _held(plan(_few_point_table(), 9.6).notes) == []
    assert _held(plan(_few_point_table(), None).notes) == []


def test_no_note_without_predictions_or_margin() -> None:
    measured = _few_point_table(std_w=None)
    assert as_if_measured(measured) is None
    result = plan(measured, 10.0)
    assert result.choices["wattcap"].batch_size == 32 and _held(result.notes) == []
    # no margin: the prediction's uncertainty holds nothing back
    loose = plan(_few_point_table(), 10.0, margin_sigmas=0)
    assert loose.choices["wattcap"].batch_size == 32 and _held(loose.notes) == []


def test_other_objectives_say_what_the_point_is_better_for() -> None:
    # energy with a deadline the b=8 points meet: b=32 at 200 MHz uses the least energy
    objective = Objective(name="energy", deadline_s=100.0)
    [note] = _held(plan(_few_point_table(), 10.0, objective=objective).notes)
    assert "b=32 at 200.0 MHz would be wattcap's choice (better for energy within 100 s" in note


def test_plan_prints_the_note(tmp_path: Path) -> None:
    profile = tmp_path / "few.json"
    _few_point_table().save(profile)
    result = CliRunner().invoke(app, ["plan", "--profile", str(profile), "--power-cap", "10"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = re.sub(r"\s+", " ", result.output)
    assert f"note: {HELD_BY_PREDICTION}: b=32 at 200.0 MHz" in text
    quiet = CliRunner().invoke(app, ["plan", "--profile", str(profile), "--power-cap", "12"],
                               env={"COLUMNS": "200"})
    assert quiet.exit_code == 0 and HELD_BY_PREDICTION not in re.sub(r"\s+", " ", quiet.output)
