"""The evaluation harness on a tiny scenario, end to end through the CLI."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.plan import METHODS
from wattcap.core.profile import ProfileTable
from wattcap.experiments.compare import Comparison
from wattcap.train.loop import pretrain

# every test here shares a comparison that trains for about 8 s: make test runs them, test-fast
# not (the seconds: that comparison's share per test, for the order the tests start in)
pytestmark = pytest.mark.slow(seconds=1)

runner = CliRunner()
CAPS = [3.6, None]
#: the target runs' accuracy on digits 5-9 (5 classes) and every run's sample budget: the
#: proxy's automatic target is 0.9 of what b=128 reaches within the budget (about 0.49 here).
#: Every target run reaches 0.6 by 1,600 samples, every proxy run but the auto run its target
#: by 2,000; each method's choice, time ratio and margin is what 0.8 and 8,192 gave, at half
#: the training steps (2,704 of 5,100, most of them the small batch sizes' runs).
TARGET, BUDGET = "0.6", "3072"


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    weights = out / "w.safetensors"
    pretrain("digits-cnn", "digits-0-4", weights, epochs=2)
    args = ["compare", "--out", str(out), "--device", "jetson-nano", "--model", "digits-cnn",
            "--weights", str(weights), "--proxy", "digits-rotated", "--targets", "digits-5-9",
            "--power-caps", "3.6,none", "--seeds", "2", "--target-accuracy", TARGET,
            "--sample-budget", BUDGET, "--board", "kind"]  # the default draws a board per seed
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    return out, first.output, second.output


def test_report_files_exist_and_are_readable(compared):
    out, _, _ = compared
    for name in ("report.md", "report.html", "results.csv", "bars-time.png", "bars-energy.png",
                 "heatmap-jetson-nano.png", "comparison.json"):
        assert (out / name).exists(), name
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    html = (out / "report.html").read_text()
    assert "<table>" in html and "bars-time.png" in html
    # the report names the files it was made from, by content
    from wattcap.models.weights import file_sha256

    made_from = (out / "report.md").read_text().split("## Made from")[1]
    profile = next(out.glob("profile-jetson-nano-*.json"))
    assert f"| `{profile.name}` | wattcap.profile | `{file_sha256(profile)[:12]}…` |" in made_from
    assert "| `efficiency-proxy.json` | wattcap.efficiency |" in made_from
    assert "| weights |" in made_from and "comparison.json" in made_from
    assert "Made from" in html


def test_table_has_every_method_and_scenario(compared):
    out, _, _ = compared
    report = (out / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| device"))
    assert all(method in header for method in METHODS)
    rows = [line for line in report.splitlines() if line.startswith("| jetson-nano")]
    assert len(rows) == len(CAPS)
    assert any("3.6 W" in row for row in rows) and any("no cap" in row for row in rows)
    comparison = Comparison.load(out / "comparison.json")
    for cap in CAPS:
        for method in METHODS:
            result = comparison.get("jetson-nano", cap, "digits-5-9", method)
            assert result is not None and len(result.time_s) == 2
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(CAPS) * len(METHODS) * 2
    # each seed's row has its own run's peak; the result's peak is their maximum
    for row in rows:
        cap = None if row["power_cap_w"] == "none" else float(row["power_cap_w"])
        result = comparison.get("jetson-nano", cap, "digits-5-9", row["method"])
        assert result is not None and len(result.seed_peak_power_w) == 2
        assert float(row["peak_power_w"]) == pytest.approx(
            result.seed_peak_power_w[int(row["seed"])], abs=1e-3)
        assert result.peak_power_w == max(result.seed_peak_power_w)


def _target_runs(out):
    """The recorded target runs by (b, seed), and the fastest configuration's r_b from them."""
    from wattcap.experiments.compare import efficiency_from_runs
    from wattcap.train.loop import RunRecord

    runs = {}
    for path in (out / "runs").glob("math-digits-5-9-*.json"):
        record = RunRecord.load(path)
        runs[(record.config.batch_size, record.config.seed)] = record
    return runs, efficiency_from_runs(runs, "digits-cnn", "digits-5-9", 2, float(TARGET),
                                      [1, 8, 8], measured=True)


def test_fastest_is_never_slower_on_its_own_r(compared):
    """The oracle property on the recorded data: with r_b measured on the target, no method's
    choice beats the fastest configuration's."""
    out, _, _ = compared
    comparison = Comparison.load(out / "comparison.json")
    profile = ProfileTable.load(out / "profile-jetson-nano-digits-cnn.json")
    runs, target_r = _target_runs(out)

    def time_on_target(r) -> float:
        point = profile.lookup(r.batch_size, r.knob_value)
        return point.seconds_per_sample * target_r.samples(r.batch_size)

    for cap in CAPS:
        fastest = comparison.get("jetson-nano", cap, "digits-5-9", "fastest")
        for method in METHODS:
            other = comparison.get("jetson-nano", cap, "digits-5-9", method)
            assert time_on_target(fastest) <= time_on_target(other) * (1 + 1e-9)
            if other.frequency_steps == 0:
                # Measured on the device clock, it matches the profile's prediction for the
                # samples the runs trained (their first evaluation at the target).
                point = profile.lookup(other.batch_size, other.knob_value)
                trained = [runs[(other.batch_size, s)].samples_to_target for s in range(2)]
                assert other.time_mean_s == pytest.approx(
                    point.seconds_per_sample * sum(trained) / 2, rel=0.02)


def test_resumed_comparison_reuses_recorded_runs(compared):
    _, first, second = compared
    assert "0 reused" in first and "0 training runs trained" not in first
    assert "0 training runs trained" in second


def test_the_proxy_has_its_own_target_and_the_report_says_how_many_seeds(compared):
    out, first, _ = compared
    comparison = Comparison.load(out / "comparison.json")
    proxy = EfficiencyVector.load(out / "efficiency-proxy.json")
    assert proxy.target_accuracy_source == "auto" and proxy.target_accuracy_rule
    assert comparison.proxy_target_accuracy == proxy.target_accuracy
    assert proxy.target_accuracy != comparison.target_accuracy
    assert "proxy digits-rotated: target accuracy" in first
    report = (out / "report.md").read_text()
    assert f"{proxy.target_accuracy:.2%}" in report and "2 seed(s) behind every number" in report
    assert "(2 seeds)" in report and "(1 seed)" not in report


def test_the_oracle_is_the_brute_force_over_measured_means(compared):
    """The fastest configuration knows the target through the measured mean samples of each
    batch size, a missed seed counted by its budget and a restart: nothing modelled."""
    out, _, _ = compared
    runs, oracle = _target_runs(out)
    assert oracle.ratio_source == "mean"
    for b in sorted({b for b, _ in runs}):
        reached = [runs[(b, seed)].samples_to_target for seed in range(2)]
        entry = oracle.entry(b)
        hits = [s for s in reached if s is not None]
        if not hits:
            assert entry is None  # never picked on a model of what it would have needed
        else:  # p = len(hits) / 2 of the tries reach it; each miss costs the budget
            expected = sum(hits) / len(hits) + (2 - len(hits)) / len(hits) * int(BUDGET)
            assert entry.samples == pytest.approx(expected, rel=1e-6)


def test_one_seed_shows_no_spread_rather_than_a_false_zero():
    from wattcap.experiments.compare import MethodResult
    from wattcap.experiments.report import table_rows

    def result(method: str, t: float) -> MethodResult:
        return MethodResult(device="jetson-nano", power_cap_w=None, target="t", method=method,
                            batch_size=32, knob_value=921_600_000, predicted_time_s=t,
                            time_s=[t], energy_j=[10 * t], peak_power_w=5.0,
                            cap_violations=0, frequency_steps=0)

    comparison = Comparison(model="m", proxy="p", targets=["t"], devices=["jetson-nano"],
                            seeds=1, target_accuracy=0.9,
                            results=[result(m, 2.0 + i) for i, m in enumerate(METHODS)])
    _, rows = table_rows(comparison)
    text = " ".join(rows[0])
    assert "± 0.00" not in text and "(1 seed)" in text and "1 seed: no spread" in text


@pytest.mark.parametrize("command", ["compare", "sensitivity"])
def test_zero_seeds_are_refused_by_name(command, tmp_path):
    result = runner.invoke(app, [command, "--out", str(tmp_path), "--seeds", "0"])
    assert result.exit_code != 0 and "--seeds must be at least 1, got 0" in result.output


def test_a_recorded_run_is_reused_only_when_every_input_matches(tmp_path):
    """Same model, weights (by content), data, budget, seed and target: reused; any of them
    changed: trained again."""
    from wattcap.experiments.compare import math_runs

    weights = tmp_path / "w.safetensors"
    pretrain("digits-cnn", "digits-0-4", weights, epochs=1)
    out = tmp_path / "out"

    def sweep(**changes) -> dict:
        settings = {"weights": weights, "dataset": "digits", "target_accuracy": 0.5,
                    "sample_budget": 512, **changes}
        counters = {"trained": 0, "reused": 0}
        math_runs(out, "digits-cnn", settings["weights"], settings["dataset"], (32,), 1,
                  settings["target_accuracy"], settings["sample_budget"], True, counters)
        return counters

    assert sweep() == {"trained": 1, "reused": 0}
    assert sweep() == {"trained": 0, "reused": 1}
    assert sweep(sample_budget=768) == {"trained": 1, "reused": 0}
    assert sweep(target_accuracy=0.55) == {"trained": 1, "reused": 0}
    assert sweep(dataset="digits-rotated") == {"trained": 1, "reused": 0}
    assert sweep(weights=None) == {"trained": 1, "reused": 0}
    pretrain("digits-cnn", "digits-0-4", weights, epochs=1, seed=1)  # same path, new content
    assert sweep() == {"trained": 1, "reused": 0}
    assert sweep() == {"trained": 0, "reused": 1}


def test_sensitivity_tells_the_same_story_as_the_comparison(compared):
    """Same proxy, target, device, cap and seeds: the sensitivity cell is the comparison's
    measured % over the fastest; the proxy vector and target runs are reused, not retrained,
    and the report's footer counts both commands' runs."""
    import json

    out, _, _ = compared
    args = ["sensitivity", "--out", str(out), "--device", "jetson-nano", "--model",
            "digits-cnn", "--weights", str(out / "w.safetensors"), "--proxies",
            "digits-rotated", "--targets", "digits-5-9", "--power-caps", "3.6,none",
            "--seeds", "2", "--target-accuracy", TARGET, "--sample-budget", BUDGET]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "sensitivity.json").read_text())
    assert data["seeds"] == 2 and data["runs_trained"] == 0 and data["runs_reused"] > 0
    comparison = Comparison.load(out / "comparison.json")
    assert data["proxy_target_accuracy"]["digits-rotated"] == comparison.proxy_target_accuracy
    for cap, key in ((3.6, "3.6"), (None, "none")):
        ours = comparison.get("jetson-nano", cap, "digits-5-9", "wattcap")
        cell = data["matrices"][key][0][0]
        if ours.frequency_steps == 0:
            assert cell == pytest.approx(comparison.over_fastest_pct(ours), abs=2.5)
    footer = (out / "report.md").read_text().strip().splitlines()[-1]
    assert "`sensitivity`: 0 trained" in footer and "`compare`:" in footer


@pytest.mark.parametrize(("flag", "bad", "refusal", "value", "setting"), [
    ("--risk", "1.5", "--risk must be a quantile in (0, 1)", 0.9, "risk"),
    ("--transfer-factor", "0.5", "transfer-factor", 4.0, "transfer_factor"),
])
def test_compare_replays_the_same_runs_with_the_plans_of_a_setting(compared, flag, bad,
                                                                   refusal, value, setting):
    """compare --risk q (wattcap plans on r_b's q quantile) or --transfer-factor K (robust to
    a target B_noise up to K from the proxy's): the recorded runs are reused, the comparison
    records the setting (the report says K), and each choice is plan()'s with it for the
    same inputs."""
    from wattcap.algorithms.planner import plan
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.profile import ProfileTable
    from wattcap.experiments.compare import Comparison
    from wattcap.measure.references import emulated_reference_profiles

    out, _, _ = compared
    args = ["compare", "--out", str(out), "--device", "jetson-nano", "--model", "digits-cnn",
            "--weights", str(out / "w.safetensors"), "--proxy", "digits-rotated",
            "--targets", "digits-5-9", "--power-caps", "3.6,none", "--seeds", "2",
            "--target-accuracy", TARGET, "--sample-budget", BUDGET, "--board", "kind"]
    refused = runner.invoke(app, [*args, flag, bad])
    assert refused.exit_code != 0 and refusal in refused.output
    changed = runner.invoke(app, [*args, flag, f"{value:g}"])
    assert changed.exit_code == 0, changed.output
    assert "0 training runs trained" in changed.output
    comparison = Comparison.load(out / "comparison.json")
    assert getattr(comparison, setting) == value
    if setting == "transfer_factor":
        assert "up to 4x from the proxy's" in (out / "report.md").read_text()
    profile = next(ProfileTable.load(p) for p in out.glob("profile-jetson-nano-*.json"))
    proxy = EfficiencyVector.load(out / "efficiency-proxy.json")
    for cap in CAPS:
        ours = comparison.get("jetson-nano", cap, "digits-5-9", "wattcap")
        expected = plan(profile, cap, efficiency=proxy, **{setting: value},
                        reference_profiles=emulated_reference_profiles("jetson-nano"))
        assert ours is not None
        assert (ours.batch_size, ours.knob_value) == (
            expected.choices["wattcap"].batch_size, expected.choices["wattcap"].knob_value)
    # put the folder back as the other tests expect it (without the setting)
    again = runner.invoke(app, args)
    assert again.exit_code == 0
    assert getattr(Comparison.load(out / "comparison.json"), setting) is None


def test_a_missed_run_replays_its_whole_budget_as_the_price_of_a_restart() -> None:
    from wattcap.core.run import CurvePoint, RunRecord
    from wattcap.devices import EmulatedDevice
    from wattcap.experiments.compare import replay_on_device

    def record(reached_at: float | None) -> RunRecord:
        return RunRecord(model="digits-cnn", batch_size=16, reached=reached_at is not None,
                         samples_to_target=reached_at, samples_seen=1024,
                         final_accuracy=0.5, curve=[CurvePoint(samples=1024, accuracy=0.5,
                                                               device_time_s=0.0)],
                         device_time_s=0.0, energy_j=0.0, peak_power_w=None,
                         avg_power_w=None, wall_time_s=0.0)

    f_hz = EmulatedDevice("jetson-nano").frequencies_hz()[-1]
    missed = replay_on_device(record(None), EmulatedDevice("jetson-nano", seed=0), f_hz, None)
    half = replay_on_device(record(512.0), EmulatedDevice("jetson-nano", seed=0), f_hz, None)
    assert missed.time_s is None and missed.energy_j is None
    assert missed.budget_time_s is not None and missed.budget_energy_j is not None
    assert missed.peak_w > 0  # the budget ran on the device: its power counts
    # 1024 samples cost twice what 512 do, at the same clock and batch size
    assert missed.budget_time_s == pytest.approx(2 * half.time_s, rel=0.02)
    assert half.budget_time_s is None
    # a replay's watchdog is a run's: with the profile's sensor noise, a reading far over the
    # cap is answered at once; without it, at the second reading
    cap_w = 0.5 * missed.peak_w
    with_noise = replay_on_device(record(512.0), EmulatedDevice("jetson-nano", seed=0), f_hz,
                                  cap_w, sensor_noise_w=0.01)
    without = replay_on_device(record(512.0), EmulatedDevice("jetson-nano", seed=0), f_hz,
                               cap_w)
    assert "standard deviations of the sensor's noise" in with_noise.frequency_steps[0].reason
    assert "for more than one sensor period" in without.frequency_steps[0].reason


def test_unkind_boards_replay_each_seed_on_its_own_draw_and_brute_force_the_fastest(
        compared, tmp_path):
    """`compare --board unkind` on the recorded runs (nothing trained again): each seed's
    board is drawn for it, the same for every method, and "fastest" is the lowest expected time
    over replays of each batch size's highest clocks, so no method beats it."""
    import shutil

    from wattcap.devices.emulated_board import draw_board_state
    from wattcap.experiments.replay import run_device

    out, _, _ = compared
    unkind = tmp_path / "unkind"
    shutil.copytree(out, unkind)
    args = ["compare", "--out", str(unkind), "--device", "jetson-nano", "--model", "digits-cnn",
            "--weights", str(unkind / "w.safetensors"), "--proxy", "digits-rotated",
            "--targets", "digits-5-9", "--power-caps", "3.6,none", "--seeds", "2",
            "--target-accuracy", TARGET, "--sample-budget", BUDGET, "--board", "unkind"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    comparison = Comparison.load(unkind / "comparison.json")
    assert comparison.board == "unkind" and comparison.runs_trained == 0
    assert "Unkind boards" in (unkind / "report.md").read_text()
    assert list(unkind.glob("profile-jetson-nano-*-unkind.json"))  # its own board's profile
    assert run_device("jetson-nano", 1, "unkind").board == draw_board_state("jetson-nano", 1)
    kind = Comparison.load(out / "comparison.json")
    for cap in CAPS:
        fastest = comparison.get("jetson-nano", cap, "digits-5-9", "fastest")
        assert fastest is not None and fastest.predicted_time_s is None  # found by replaying
        for method in METHODS:
            ours = comparison.get("jetson-nano", cap, "digits-5-9", method)
            if method == "wattcap":
                # wattcap's runs are the Session's: each seed's says where it ended, at the
                # plan's choice unless it re-planned for its board (then it may beat the best
                # single configuration: it adapts to each board)
                assert len(ours.seed_batch_sizes) == len(ours.seed_knob_values) == 2
                ends = list(zip(ours.seed_batch_sizes, ours.seed_knob_values, strict=True))
                # a seed ends elsewhere than the plan exactly where it re-planned
                assert sum(end != (ours.batch_size, ours.knob_value) for end in ends) \
                    == ours.board_replans
                if ours.board_replans == 0:
                    assert set(zip(ours.seed_batch_sizes, ours.seed_knob_values, strict=True)) \
                        == {(ours.batch_size, ours.knob_value)}
                    assert ours.expected_time_s >= fastest.expected_time_s - 1e-9
                continue
            assert ours.seed_batch_sizes == [] and ours.board_replans == 0, method
            assert ours.expected_time_s >= fastest.expected_time_s - 1e-9, method
        # the boards differ from the kind one: the same choice takes another time
        same = comparison.get("jetson-nano", cap, "digits-5-9", "baseline-1")
        before = kind.get("jetson-nano", cap, "digits-5-9", "baseline-1")
        if (same.batch_size, same.knob_value) == (before.batch_size, before.knob_value):
            assert same.time_s != before.time_s


def test_compare_reuses_the_runs_of_a_given_runs_dir(tmp_path, monkeypatch):
    """`compare --runs-dir R` reads the runs `estimate --runs-dir R` kept (besides the cache's),
    and --no-resume reads none."""
    from wattcap.cli.experiments import _ProxySweep

    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(tmp_path / "cache"))
    given = tmp_path / "kept-runs"

    def sweep(**changes) -> _ProxySweep:
        settings = {"out": tmp_path / "out", "model": "digits-cnn", "weights": None, "seeds": 1,
                    "sample_budget": 512, "resume": True, "options": {}, "workers": 0,
                    "counters": {"trained": 0, "reused": 0}, **changes}
        return _ProxySweep(**settings)

    assert sweep(runs_dir=given).shared_runs == (given, tmp_path / "cache" / "runs")
    assert sweep().shared_runs == (tmp_path / "cache" / "runs",)
    assert sweep(runs_dir=given, resume=False).shared_runs == ()
    assert "--runs-dir" in CliRunner().invoke(app, ["compare", "--help"]).output
