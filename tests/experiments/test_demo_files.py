"""The demo's first part with `--no-plots`: the reference profiles and their plans, no
picture (tests/golden/test_golden.py runs the whole quick demo, heatmaps drawn)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from wattcap.experiments.demo import CAPS_W, profile_and_plan


def test_the_demo_without_plots_writes_its_profiles_and_draws_nothing(
        tmp_path: Path, nano_reference_profiles) -> None:
    printed = io.StringIO()
    plans = profile_and_plan(tmp_path, Console(file=printed, width=160), plots=False)
    assert {model: len(p) for model, p in plans.items()} == {
        "resnet18": len(CAPS_W), "mobilenetv2": len(CAPS_W)}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "profile-jetson-nano-mobilenetv2.json", "profile-jetson-nano-resnet18.json"]
    assert "Choices per method" in printed.getvalue()
