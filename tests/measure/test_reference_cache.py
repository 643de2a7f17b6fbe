"""Cached reference profiles are what this wattcap would measure: an entry of the current schema
is reused, one written by earlier code (an earlier schema version, loaded migrated) is measured
again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wattcap.measure.references import emulated_reference_profiles


def test_an_entry_of_an_earlier_schema_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path))
    (first,) = emulated_reference_profiles("jetson-nano", models=["digits-cnn"])
    (entry,) = tmp_path.glob("reference-jetson-nano-*-digits-cnn.json")
    raw = json.loads(entry.read_text())
    raw["points"][0]["peak_power_w"] = 99.0  # a mark: reused entries keep it
    entry.write_text(json.dumps(raw))
    (reused,) = emulated_reference_profiles("jetson-nano", models=["digits-cnn"])
    assert reused.points[0].peak_power_w == 99.0
    raw["schema_version"] = 3  # as written before imported tables (schema 4)
    for field in ("imported_from", "peak_power_source", "power_window_s"):
        raw.pop(field, None)
    entry.write_text(json.dumps(raw))
    (again,) = emulated_reference_profiles("jetson-nano", models=["digits-cnn"])
    assert again.points[0].peak_power_w == first.points[0].peak_power_w
    assert json.loads(entry.read_text())["schema_version"] == again.SCHEMA_VERSION
