"""The proxy sweep: samples read on the curves, a proxy target of its own, budget retries."""

from __future__ import annotations

import pytest

from wattcap.algorithms.curves import samples_to_target
from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.core.metric import metric_named
from wattcap.data import get_dataset
from wattcap.train.efficiency import estimate_efficiency
from wattcap.train.loop import TrainConfig, train_to_accuracy

META = dict(model="digits-cnn", input_shape=[1, 8, 8], dataset="digits",
            task="image-classification", target_accuracy=0.9, seeds=[0, 1])

# these runs train a CNN from scratch on digits, which wants a larger rate than the paper's
# fine-tuning reference (the default)
FROM_SCRATCH = {"lr_ref": 1e-3, "batch_size_ref": 32}


def test_efficiency_on_digits_favours_small_batches():
    """r_b on digits with 3 seeds: b=128 needs more samples than b=4 (we measured r_4 ≈ 0.5
    with a small CNN; the bound here is loose)."""
    vector = estimate_efficiency("digits-cnn", "digits", 0.9, batch_sizes=(4, 128), seeds=3,
                                 sample_budget=12_288, eval_every_samples=256, **FROM_SCRATCH)
    r4 = vector.ratio(4)
    assert vector.ratio(128) == 1.0
    assert r4 is not None and 0.1 < r4 < 0.9
    assert vector.samples(128) > vector.samples(4)
    assert all(len(e.samples_per_seed) == 3 for e in vector.entries)
    assert vector.seeds == [0, 1, 2]
    assert vector.target_accuracy_source == "given" and vector.target_accuracy == 0.9
    # samples are read between evaluations, not at them
    readings = [s for e in vector.entries for s in e.samples_per_seed if s is not None]
    assert any(s % 256 for s in readings)


def test_auto_proxy_target_is_a_share_of_what_the_largest_batch_reaches():
    calls = []
    vector = estimate_efficiency(
        "digits-cnn", "digits", "auto", batch_sizes=(16, 64), seeds=1, sample_budget=1536,
        eval_every_samples=256, progress=lambda u: calls.append((u.done, u.total)),
        **FROM_SCRATCH,
    )
    assert vector.target_accuracy_source == "auto"
    assert vector.target_accuracy_rule.startswith("auto: 0.9 x ")
    best = float(vector.target_accuracy_rule.split(" x ")[1].split(",")[0])
    assert vector.target_accuracy == pytest.approx(0.9 * best, abs=1e-4)
    # b_max's seed-0 reading from the auto run is what a run with that target gives
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=64, seed=0, sample_budget=1536,
                         target_accuracy=vector.target_accuracy, eval_every_samples=256,
                         **FROM_SCRATCH)
    own = samples_to_target(train_to_accuracy(config, train, test).curve,
                            vector.target_accuracy)
    assert vector.entry(64).samples_per_seed[0] == pytest.approx(own)
    assert calls[-1][0] == calls[-1][1]  # every announced run was reported done


def test_missed_runs_are_retried_with_an_extended_budget():
    """A budget far too small for b=128: every run misses it, is re-run once with twice the
    budget, and what still misses is extrapolated, never dropped."""
    calls = []
    vector = estimate_efficiency(
        "digits-cnn", "digits", 0.9, batch_sizes=(16, 128), seeds=1, sample_budget=512,
        eval_every_samples=128, budget_extension=2.0, **FROM_SCRATCH,
        progress=lambda u: calls.append((u.done, u.total, u.detail)),
    )
    assert vector.budget_extension == 2.0 and vector.sample_budget == 512
    for entry in vector.entries:
        assert entry.budget_per_seed == [1024]
        assert entry.source in ("extended-budget", "extrapolated")
        assert entry.ratio is not None and entry.ratio > 0
    assert vector.entry(128).ratio == 1.0
    assert calls[-1][:2] == (4, 4) and "with 1024 samples" in calls[-1][2]


def test_estimator_refuses_bad_settings():
    with pytest.raises(ValueError, match="seeds must be at least 1"):
        estimate_efficiency("digits-cnn", "digits", 0.9, seeds=0)
    with pytest.raises(ValueError, match="budget extension"):
        estimate_efficiency("digits-cnn", "digits", 0.9, budget_extension=0.5)
    with pytest.raises(ValueError, match=r"outside accuracy's range \(0, 1\]"):
        estimate_efficiency("digits-cnn", "digits", 1.5)
    with pytest.raises(ValueError, match="automatic target is a share of the best accuracy"):
        estimate_efficiency("digits-cnn", "digits", "auto", target_metric=metric_named("loss"))


def test_unreachable_batch_size_is_extrapolated_above_its_floor():
    vector = vector_from_samples(
        {4: [500, 600], 64: [None, 900], 128: [1000, 1100]}, sample_budget=1000, **META)
    entry = vector.entry(64)
    assert entry.source == "extrapolated" and not entry.reachable
    # the missed run needed more than 1,000 samples
    assert vector.samples(64) >= (1000 + 900) / 2
    assert vector.ratio(64) == pytest.approx(vector.samples(64) / vector.samples(128))
    assert vector.entry(4).source in ("fit", "mean")


def test_a_killed_estimate_resumes_with_its_finished_runs(tmp_path):
    """Each finished (batch size, seed) run is kept by its identity; a killed sweep run again
    reuses them (and says so) and ends with the same vector as one that never stopped."""
    import json

    from tests.train.test_executors import _untimed

    settings = dict(batch_sizes=(16, 64), seeds=2, sample_budget=512, eval_every_samples=128,
                    budget_extension=None, **FROM_SCRATCH)
    whole = estimate_efficiency("digits-cnn", "digits", 0.5, **settings)

    class Killed(Exception):
        pass

    def kill_after_two(update) -> None:
        if update.done == 2:
            raise Killed

    runs = tmp_path / "runs"
    with pytest.raises(Killed):
        estimate_efficiency("digits-cnn", "digits", 0.5, runs_dir=runs, progress=kill_after_two,
                            **settings)
    assert len(list(runs.glob("*.json"))) == 2
    seen = []
    resumed = estimate_efficiency("digits-cnn", "digits", 0.5, runs_dir=runs,
                                  progress=seen.append, **settings)
    reused = [u.detail for u in seen if "reused" in u.detail]
    assert len(reused) == 2 and reused[-1].endswith("(reused: 2 of 4 runs)")
    assert _untimed(json.loads(resumed.to_json())) == _untimed(json.loads(whole.to_json()))
    # another input (here the seeds' budget) never reuses them
    other = estimate_efficiency("digits-cnn", "digits", 0.5, runs_dir=runs,
                                **{**settings, "sample_budget": 640})
    assert other.sample_budget == 640 and len(list(runs.glob("*.json"))) == 8


def test_a_killed_compare_proxy_sweep_resumes_with_its_finished_runs(tmp_path):
    """compare's proxy sweep keeps each run in OUT/runs too: a kill loses at most the run in
    flight, the counters say what was trained and reused, and the vector is the same."""
    import json

    from tests.train.test_executors import _untimed
    from wattcap.experiments.compare import estimate_proxy_efficiency

    class Killed(Exception):
        pass

    def kill_after_three(update) -> None:
        if update.done == 3:
            raise Killed

    args = ("digits-cnn", None, "digits", (16, 64), 2, 0.5, 512)
    with pytest.raises(Killed):
        estimate_proxy_efficiency(tmp_path, *args, True, {"trained": 0, "reused": 0},
                                  kill_after_three)
    assert len(list((tmp_path / "runs").glob("*.json"))) == 3
    counters = {"trained": 0, "reused": 0}
    resumed = estimate_proxy_efficiency(tmp_path, *args, True, counters)
    recorded = len(list((tmp_path / "runs").glob("*.json")))  # retries of a miss included
    assert counters["reused"] == 3 and counters["trained"] == recorded - 3 >= 1
    fresh = estimate_proxy_efficiency(tmp_path / "fresh", *args, False,
                                      {"trained": 0, "reused": 0})
    assert _untimed(json.loads(resumed.to_json())) == _untimed(json.loads(fresh.to_json()))


def test_an_auto_proxy_target_near_chance_is_cautioned_in_the_vector():
    """A largest batch that barely learned within the budget sets an automatic target at a
    fraction of near-chance accuracy: the vector says so, and how to fix it. Here: 64 samples
    of the 10-class digits, far too few to learn."""
    from wattcap.train.efficiency import NEAR_CHANCE_FACTOR, _near_chance

    vec = estimate_efficiency(model="digits-cnn", proxy="digits", batch_sizes=(8, 32),
                              target_accuracy="auto", sample_budget=64, seeds=1,
                              eval_every_samples=32)
    best = float(vec.target_accuracy_rule.split(" x ")[1].split(",")[0])
    assert best < NEAR_CHANCE_FACTOR / 10
    assert any("near chance (10% for 10 classes)" in n and "--sample-budget" in n
               for n in vec.notes)
    # a model that learned is not cautioned; nor a language model, whose chance is 1/vocab
    assert _near_chance(0.9, 10, "image-classification", True, 4096) is None
    assert _near_chance(0.01, 65, "char-lm", True, 4096) is None
    assert _near_chance(0.15, 10, "image-classification", True, 4096) is not None
