"""The tolerances the goldens are compared with (compare.py): what another CPU's kernels change
passes, a moved result or a changed decision fails. (test_golden.py makes the goldens again on
generic kernels and compares them with these rules.)"""

from __future__ import annotations

import json

from tests.golden.compare import differences
from tests.golden.generate import HERE

RECORDED = (HERE / "expected" / "demo-runs-math-digits-5-9-b8-s0.json").read_text()


def _with(path: list[str | int], value: object) -> str:
    data = json.loads(RECORDED)
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return json.dumps(data)


def test_one_image_more_at_an_evaluation_is_within_tolerance() -> None:
    # the difference AVX2 kernels made: 0.8156 -> 0.8212 (one of 179 test images)
    assert differences("demo-runs-x.json", RECORDED,
                       _with(["curve", 4, "accuracy"], 0.8212290502793296)) == []


def test_a_curve_that_moved_beyond_tolerance_fails() -> None:
    assert differences("demo-runs-x.json", RECORDED, _with(["curve", 4, "accuracy"], 0.86))
    assert differences("demo-runs-x.json", RECORDED, _with(["samples_to_target"], 2400.0))


def test_a_changed_choice_fails_however_small() -> None:
    assert differences("demo-runs-x.json", RECORDED, _with(["batch_size"], 16))
    table = (HERE / "expected" / "demo-table.md").read_text()
    assert differences("demo-table.md", table, table.replace("128, 921.6", "128, 844.8", 1))
    assert differences("demo-table.md", table, table.replace("same choice", "other", 1))
    assert differences("demo-table.md", table, table) == []


def test_decisions_are_compared_exactly() -> None:
    plan = (HERE / "expected" / "plan-jetson-nano-4.5.json").read_text()
    assert differences("plan-jetson-nano-4.5.json", plan, plan.replace("0.", "0.0", 1))


def test_whole_numbers_and_identities_are_exact_wherever_they_stand() -> None:
    efficiency = (HERE / "expected" / "demo-efficiency-digits-cnn-digits-rotated.json").read_text()
    data = json.loads(efficiency)
    data["reference_batch_size"] = data["reference_batch_size"] - 16  # 128 -> 112: 12.5 %
    assert differences("demo-efficiency-x.json", efficiency, json.dumps(data))
    fingerprint = json.loads(RECORDED)["architecture_fingerprint"]
    changed = fingerprint[:-1] + ("0" if fingerprint[-1] != "0" else "1")
    assert differences("demo-runs-x.json", RECORDED, _with(["architecture_fingerprint"], changed))
    table = "| 4.5 W | 128, 921.6: 0.7 ± 0.0 s (1 of 3 seeds missed) |"
    assert differences("t.md", table, table.replace("1 of 3", "2 of 3"))
    # a count that follows from where the run stopped is a result
    steps = json.loads(RECORDED)["steps"]
    assert differences("demo-runs-x.json", RECORDED, _with(["steps"], steps + 32)) == []
