"""Golden outputs: plans of the bundled scenarios, profiles, a run record and the quick demo's
comparison must come out as recorded (clock, machine and version fields masked; see
generate.py): decisions exactly, the numbers of CPU training within the tolerances that
compare.py states, so that they hold on any CPU's kernels.

The outputs are made again with the most generic kernels this machine can be asked for, not
its own: ATen's scalar code (ATEN_CPU_CAPABILITY=default) and oneDNN and MKL held to AVX2 (on
an AVX-512 machine this changes a recorded accuracy; on an AVX2 machine ATen's capability
changes). The goldens are regenerated on a developer's machine with its own kernels, so one
run checks both that nothing changed and that what was recorded holds on another CPU's
kernels (a run on this machine's own kernels as well cost a minute of every `make test` and
could fail only where this one fails too, a change within the tolerances aside)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden.compare import differences
from tests.golden.generate import HERE, generate

EXPECTED = HERE / "expected"
GENERIC_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "AVX2",
                   "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def assert_equal_to_goldens(out: Path, names: list[str]) -> None:
    """Every file `names` in `out` agrees with its recorded golden."""
    problems = []
    for name in sorted(names):
        problems += differences(name, (EXPECTED / name).read_text(), (out / name).read_text())
    assert not problems, "differs from the goldens:\n" + "\n".join(problems[:40])


@pytest.mark.slow(seconds=70)  # the whole CLI on fixed seeds, the quick demo included
def test_cli_outputs_equal_the_goldens_on_generic_kernels(tmp_path: Path) -> None:
    names = generate(tmp_path / "out", env_extra=GENERIC_KERNELS, keep=tmp_path / "work")
    assert sorted(names) == sorted(p.name for p in EXPECTED.iterdir()), \
        "the set of golden files changed"
    assert_equal_to_goldens(tmp_path / "out", names)
    # the same run of the quick demo, as its user sees it (one demo run for both checks)
    _the_demo_shows_its_comparison(tmp_path / "work")


def _the_demo_shows_its_comparison(work: Path) -> None:
    """`wattcap demo --quick`: its summary, heatmaps and profiles, and the results page's table with
    one row per cap, wattcap's choice as the comparison recorded it."""
    from wattcap.core.profile import ProfileTable
    from wattcap.experiments.compare import Comparison

    shown, out = (work / "demo-stdout.txt").read_text(), work / "demo"
    assert "speed-up" in shown and "vs wattcap" in shown and "2 seeds" in shown
    heatmaps = sorted(out.glob("heatmap-*.png"))
    profiles = sorted(out.glob("profile-*.json"))
    assert len(heatmaps) >= 2 and len(profiles) >= 2
    assert all(png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for png in heatmaps)
    assert all(ProfileTable.load(path).device == "jetson-nano" for path in profiles)
    comparison = Comparison.load(out / "comparison.json")
    rows = (out / "table.md").read_text().splitlines()[2:]
    caps = list(dict.fromkeys(r.power_cap_w for r in comparison.results))
    assert len(rows) == len(caps)
    for row, cap in zip(rows, caps, strict=True):
        ours = comparison.get("jetson-nano", cap, comparison.targets[0], "wattcap")
        assert ours.knob_value is not None
        assert f"| {ours.batch_size}, {ours.knob_value / 1e6:.1f}: " in row


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
