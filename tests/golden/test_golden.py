"""Golden outputs (issue 25): plans of the bundled scenarios, profiles, a run record and the
quick demo's comparison, recorded with the code as it was before the layout moved, must come
out identical (clock, machine and version fields masked; see generate.py)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tests.golden.generate import HERE, generate

EXPECTED = HERE / "expected"


@pytest.mark.slow
def test_cli_outputs_equal_the_goldens(tmp_path: Path) -> None:
    names = generate(tmp_path)
    expected = sorted(p.name for p in EXPECTED.iterdir())
    assert sorted(names) == expected, "the set of golden files changed"
    for name in expected:
        want = (EXPECTED / name).read_text()
        got = (tmp_path / name).read_text()
        if got != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                f"expected/{name}", f"now/{name}", n=2))
            pytest.fail(f"{name} differs from its golden output:\n{diff[:6000]}")


def test_masking_keeps_what_the_method_computed() -> None:
    from tests.golden.generate import mask

    record = {"created_at": "2026-11-24T15:00:00Z", "wall_time_s": 12.5,
              "device_time_s": 3.25, "path": "/tmp/xyz/file.json",
              "curve": [{"samples": 256, "accuracy": 0.5}]}
    masked = mask(record)
    assert masked["created_at"] == masked["wall_time_s"] == "<masked>"
    assert masked["device_time_s"] == 3.25  # emulated device time is deterministic
    assert masked["path"] == "<tmp>"
    assert masked["curve"] == record["curve"]
