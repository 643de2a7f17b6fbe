"""The goldens hold on another CPU's kernels. The training part of the goldens (a run record,
the quick demo) is made again with the most generic kernels this machine can be asked for:
ATen's scalar code (ATEN_CPU_CAPABILITY=default) and oneDNN and MKL held to AVX2 (on an
AVX-512 machine this changes a recorded accuracy; on an AVX2 machine ATen's capability
changes). Its own file, so that it runs beside test_golden.py in the other test process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.golden.compare import differences
from tests.golden.generate import HERE, generate
from tests.golden.test_golden import assert_equal_to_goldens

GENERIC_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "AVX2",
                   "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


@pytest.mark.slow(seconds=35)  # the training part of the goldens again
def test_training_goldens_hold_on_generic_kernels(tmp_path: Path) -> None:
    # no heatmaps: pictures of the same profiles test_golden.py draws, and compared by no golden
    names = generate(tmp_path / "out", decisions=False, plots=False, env_extra=GENERIC_KERNELS,
                     keep=tmp_path / "work")
    assert "run-record.json" in names and any(n.startswith("demo-runs-") for n in names)
    assert_equal_to_goldens(tmp_path / "out", names)
    demo = tmp_path / "work" / "demo"
    assert not list(demo.glob("*.png")) and (demo / "comparison.json").is_file()
    assert "files written to" in (tmp_path / "work" / "demo-stdout.txt").read_text()


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
