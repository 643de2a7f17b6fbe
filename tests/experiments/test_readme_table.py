"""The results page's demo table is the demo's output: `markdown_table` renders a comparison,
and bench/readme_demo_table.py pastes OUT/table.md between the page's markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_scripts import load_bench_script
from wattcap.experiments.compare import Comparison, MethodResult
from wattcap.experiments.demo import DEVICE, markdown_table

RESULTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def _result(method: str, cap: float | None, b: int, times: list[float | None]) -> MethodResult:
    return MethodResult(device=DEVICE, power_cap_w=cap, target="digits-5-9-32", method=method,
                        batch_size=b, knob_value=921_600_000, predicted_time_s=1.0,
                        time_s=times, energy_j=[1.0 for _ in times], peak_power_w=4.0,
                        cap_violations=0, frequency_steps=0)


def test_the_table_renders_each_cap_from_the_comparison() -> None:
    results = []
    for cap in (4.5, None):
        results += [_result("wattcap", cap, 32, [3.0, 3.2, 3.1]),
                    _result("baseline-1", cap, 128, [9.0, 9.5, 9.2]),
                    _result("baseline-2", cap, 32, [3.0, 3.2, 3.1]),
                    _result("fastest", cap, 16, [2.9, 3.3, 3.0] if cap else [3.0, None, 3.1])]
    comparison = Comparison(model="digits32-cnn", proxy="digits-rotated-32",
                            targets=["digits-5-9-32"], devices=[DEVICE], seeds=3,
                            target_accuracy=0.9, results=results)
    lines = markdown_table(comparison).splitlines()
    assert len(lines) == 4 and lines[0].startswith("| cap | wattcap")
    capped, uncapped = lines[2], lines[3]
    assert capped.startswith("| 4.5 W | 32, 921.6: 3.1 ± 0.1 s | 2.98x wattcap's time |")
    assert "| same choice |" in capped  # baseline-2 chose what wattcap chose
    assert capped.endswith("| 16, 921.6: 3.1 ± 0.2 s (0.99x wattcap's time, within noise) |")
    assert uncapped.endswith("| 16, 921.6: not reached in 1 of 3 seeds |")  # never invented


def test_the_script_pastes_between_the_markers_and_refuses_without_them(tmp_path: Path) -> None:
    script = load_bench_script("readme_demo_table")
    assert "<!-- demo-table -->" in RESULTS_PAGE.read_text()  # the real page has the block
    readme = tmp_path / "results.md"
    readme.write_text("intro\n<!-- demo-table -->\nold table\n<!-- /demo-table -->\nrest\n")
    out = tmp_path / "demo-output"
    out.mkdir()
    (out / "table.md").write_text("| cap |\n|---|\n| 4.5 W |\n")
    assert script.main([str(out), "--page", str(readme), "--date", "2026-11-25"]) == 0
    text = readme.read_text()
    assert "old table" not in text and "| 4.5 W |" in text and "run of 2026-11-25" in text
    assert text.startswith("intro\n") and text.endswith("rest\n")
    readme.write_text("no markers\n")
    assert script.main([str(out), "--page", str(readme)]) == 1
    assert readme.read_text() == "no markers\n"
    with pytest.raises(ValueError, match="no <!-- demo-table -->"):
        script.paste("x", "t", "d")
