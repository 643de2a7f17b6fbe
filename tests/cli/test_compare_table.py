"""`compare`'s terminal table says what its report says about cap violations: a time
measured while the cap was broken is marked, with the count and the peak."""

from __future__ import annotations

import re

from rich.console import Console

from wattcap.cli.experiments import print_summary
from wattcap.core.plan import METHODS
from wattcap.experiments.compare import Comparison, MethodResult
from wattcap.experiments.report import table_rows


def _comparison(violations: dict[str, int]) -> Comparison:
    def result(method: str, i: int) -> MethodResult:
        return MethodResult(
            device="jetson-tx2nx", power_cap_w=6.0, target="t", method=method, batch_size=64,
            knob_value=1_236_800_000, predicted_time_s=1.9, time_s=[1.97 + i, 1.97 + i],
            energy_j=[11.0, 11.0], peak_power_w=6.038 if violations.get(method) else 5.7,
            cap_violations=violations.get(method, 0), frequency_steps=0)

    return Comparison(model="m", proxy="p", targets=["t"], devices=["jetson-tx2nx"], seeds=2,
                      target_accuracy=0.9,
                      results=[result(m, i) for i, m in enumerate(METHODS)])


def _printed(comparison: Comparison) -> str:
    console = Console(record=True, width=400, color_system=None)
    print_summary(comparison, console)
    return re.sub(r"\s+", " ", console.export_text())


def test_violations_are_marked_with_count_and_peak_as_the_report_records_them() -> None:
    comparison = _comparison({"wattcap": 2, "baseline-1": 1})
    text = _printed(comparison)
    assert "⚠ 2 cap violations, peak 6.04 W" in text
    assert "⚠ 1 cap violation, peak 6.04 W" in text
    assert text.count("⚠") == 2  # the others kept their cap: no mark
    # the report of the same comparison counts the same violations
    _, rows = table_rows(comparison)
    report = " ".join(rows[0])
    assert "2 cap violation(s)" in report and "1 cap violation(s)" in report


def test_no_violation_no_mark() -> None:
    text = _printed(_comparison({}))
    assert "⚠" not in text and "violation" not in text
