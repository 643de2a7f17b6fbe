"""`compare`'s terminal table says what its report says about cap violations (a time measured
while the cap was broken is marked, with the count and the peak) and shows the same ratios of
times, to 3 decimals."""

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


def _close_comparison() -> Comparison:
    """wattcap 0.4 % behind the fastest and 0.4 % ahead of baseline-1."""
    times: dict[str, list[float | None]] = {
        "wattcap": [10.0, 10.1], "baseline-1": [10.04, 10.14], "baseline-2": [12.0, 12.1],
        "fastest": [9.96, 10.06]}

    def result(method: str) -> MethodResult:
        return MethodResult(
            device="jetson-nano", power_cap_w=4.5, target="t", method=method, batch_size=64,
            knob_value=921_600_000, predicted_time_s=10.0, time_s=times[method],
            energy_j=[40.0, 40.0], peak_power_w=4.4, cap_violations=0, frequency_steps=0)

    return Comparison(model="m", proxy="p", targets=["t"], devices=["jetson-nano"], seeds=2,
                      target_accuracy=0.9, results=[result(m) for m in METHODS])


def test_ratios_to_wattcap_are_shown_to_3_decimals_in_table_and_report() -> None:
    comparison = _close_comparison()
    text = _printed(comparison)
    _, rows = table_rows(comparison)
    report = " | ".join(rows[0])
    for shown in (text, report):
        assert "1.004x (within noise)" in shown  # baseline-1 over wattcap
        assert "0.996x (within noise)" in shown  # the fastest over wattcap
        assert "1.199x" in shown  # baseline-2 over wattcap
        assert "1.00x" not in shown
    # % over the fastest keeps one decimal of a percent: the same resolution as a ratio's third
    assert "10.05 ± 0.07 (b=64, 921.6 MHz) +0.4%" in text
    assert "+0.4 % over fastest" in report
