"""A profile point's power and time are physical: a hand-edited or damaged file with a negative
or non-finite one is refused on load, naming the point, where it used to load and plan (a cap
met by -5 W); every profile the project ships or tests with still loads."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import WattcapFileError

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "expected" / "profile-jetson-nano.json"


def _with_point(tmp_path: Path, field: str, value: float) -> tuple[Path, dict]:
    raw = json.loads(GOLDEN.read_text())
    point = raw["points"][3]
    point[field] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(raw))  # NaN and Infinity as Python's json writes them
    return path, point


@pytest.mark.parametrize(("field", "value"), [
    ("peak_power_w", -5.0), ("avg_power_w", math.nan), ("seconds_per_sample", math.inf),
    ("seconds_per_sample", -1e-3), ("peak_power_std_w", -0.1),
])
def test_a_negative_or_non_finite_power_or_time_is_refused_naming_the_point(
        tmp_path: Path, field: str, value: float) -> None:
    path, point = _with_point(tmp_path, field, value)
    with pytest.raises(WattcapFileError) as refused:
        ProfileTable.load(path)
    message = str(refused.value)
    assert f"the point b={point['batch_size']}, knob value {point['knob_value']} has {field}" \
        in message
    assert "must be finite and not negative" in message and str(path) in message


def test_plan_refuses_such_a_profile_in_one_line(tmp_path: Path) -> None:
    path, point = _with_point(tmp_path, "peak_power_w", -5.0)
    result = CliRunner().invoke(app, ["plan", "--profile", str(path), "--power-cap", "3"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2
    text = re.sub(r"\s+", " ", result.output)
    assert f"b={point['batch_size']}" in text and "peak_power_w = -5.0" in text
    assert "Traceback" not in result.output


def test_every_shipped_and_test_profile_still_loads() -> None:
    loaded = 0
    for folder in ("tests", "examples", "bench", "docs", "wattcap"):
        for path in sorted((ROOT / folder).rglob("*.json")):
            try:
                raw = json.loads(path.read_text())
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(raw, dict) and raw.get("kind") == "wattcap.profile":
                ProfileTable.load(path)
                loaded += 1
    assert loaded >= 3  # the goldens at least
