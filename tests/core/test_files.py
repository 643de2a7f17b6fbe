"""Versioned files: round trips, refusals with clear messages, atomic saves."""

from __future__ import annotations

import json

import pytest

from wattcap.algorithms.planner import plan
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.plan import Plan
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import WattcapFileError

PROFILE_SAMPLES = {4: [1000, 1200], 8: [1500, 1500], 16: [2000, 2400], 32: [3000, 3100],
                   64: [5000, 5200], 128: [9000, 9400]}


@pytest.fixture
def efficiency(make_efficiency) -> EfficiencyVector:
    return make_efficiency(PROFILE_SAMPLES)


@pytest.fixture
def a_plan(nano_resnet18_profile, efficiency) -> Plan:
    return plan(nano_resnet18_profile, 5.0, efficiency=efficiency)


# -- round trips ----------------------------------------------------------------------------------
def test_profile_round_trip(tmp_path, nano_resnet18_profile) -> None:
    path = nano_resnet18_profile.save(tmp_path / "sub" / "profile.json")
    loaded = ProfileTable.load(path)
    assert loaded == nano_resnet18_profile
    assert loaded.kind == "wattcap.profile"
    assert loaded.schema_version == ProfileTable.SCHEMA_VERSION
    assert loaded.frontier(5.0) == nano_resnet18_profile.frontier(5.0)


def test_efficiency_round_trip(tmp_path, efficiency) -> None:
    loaded = EfficiencyVector.load(efficiency.save(tmp_path / "eff.json"))
    assert loaded == efficiency
    assert loaded.schema_version == EfficiencyVector.SCHEMA_VERSION
    assert loaded.reference_batch_size == 128
    assert loaded.ratio(128) == 1.0
    assert loaded.ratio(12) is None
    # the raw samples and the budget survive next to the fit
    assert loaded.entry(16).samples_per_seed == [2000.0, 2400.0]
    assert loaded.entry(16).budget_per_seed == [20_000, 20_000]
    assert loaded.fit.b_noise == efficiency.fit.b_noise
    expected = ("fit", "fit") if loaded.fit.good else ("mean", "mean")
    assert (loaded.ratio_source, loaded.entry(4).source) == expected
    if loaded.fit.good:
        assert loaded.ratio(4) == pytest.approx(loaded.fit.ratio(4, 128))
    else:
        assert loaded.ratio(4) == pytest.approx(1100 / 9200)


def test_an_efficiency_file_of_no_known_version_is_refused(tmp_path, efficiency) -> None:
    # earlier versions migrate (tests/core/test_old_files.py); a version that never existed
    # has no migration and is refused
    raw = _raw(efficiency)
    raw["schema_version"] = 0
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(WattcapFileError, match="Re-create the file"):
        EfficiencyVector.load(path)


def test_efficiency_with_largest_batch_missing_the_target(make_efficiency) -> None:
    samples = dict(PROFILE_SAMPLES)
    samples[128] = [9000, None]
    eff = make_efficiency(samples, sample_budget=12_000)
    # still relative to b_max: its samples come from the fit, never below the floor that
    # counts the missed run at its budget
    assert eff.reference_batch_size == 128
    assert eff.ratio(128) == 1.0
    entry = eff.entry(128)
    assert entry.source == "extrapolated" and not entry.reachable
    assert entry.samples_per_seed == [9000.0, None]
    if not eff.fit.good:
        assert entry.samples >= (9000 + 12_000) / 2
    assert all(eff.ratio(b) is not None for b in PROFILE_SAMPLES)
    assert any("b=128" in note for note in eff.notes)
    with pytest.raises(ValueError):
        make_efficiency({4: [None], 8: [None]})


def test_plan_round_trip(tmp_path, a_plan) -> None:
    loaded = Plan.load(a_plan.save(tmp_path / "plan.json"))
    assert loaded == a_plan
    assert loaded.choices["wattcap"].peak_power_w <= 5.0
    assert loaded.speedup("baseline-1") == a_plan.speedup("baseline-1")


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, nano_resnet18_profile, a_plan):
    target = tmp_path / "out.json"
    for _ in range(3):
        nano_resnet18_profile.save(target)
    a_plan.save(tmp_path / "plan.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "plan.json"]
    assert ProfileTable.load(target) == nano_resnet18_profile


def test_failed_save_keeps_the_old_file(tmp_path, nano_resnet18_profile, monkeypatch) -> None:
    target = nano_resnet18_profile.save(tmp_path / "profile.json")
    before = target.read_text()

    def broken(self) -> str:
        raise RuntimeError("disk full")

    monkeypatch.setattr(ProfileTable, "to_json", broken)
    with pytest.raises(RuntimeError):
        nano_resnet18_profile.save(target)
    assert target.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["profile.json"]


# -- refusals -------------------------------------------------------------------------------------
def _raw(model) -> dict:
    return json.loads(model.to_json())


def test_corrupt_json_is_refused(tmp_path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{this is not json")
    with pytest.raises(WattcapFileError) as info:
        ProfileTable.load(path)
    assert str(path) in str(info.value) and "not valid JSON" in str(info.value)


def test_truncated_file_is_refused(tmp_path, nano_resnet18_profile) -> None:
    path = nano_resnet18_profile.save(tmp_path / "p.json")
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(WattcapFileError) as info:
        ProfileTable.load(path)
    assert "not valid JSON" in str(info.value)


def test_binary_missing_and_non_object_files_are_refused(tmp_path) -> None:
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00garbage\x89PNG")
    missing = tmp_path / "missing.json"
    array = tmp_path / "a.json"
    array.write_text("[1, 2, 3]")
    for path, words in ((binary, "not a text file"), (missing, "no such file"),
                        (array, "expected a JSON object")):
        with pytest.raises(WattcapFileError) as info:
            ProfileTable.load(path)
        assert words in str(info.value)


def test_wrong_kind_is_refused(tmp_path, a_plan) -> None:
    path = a_plan.save(tmp_path / "plan.json")
    with pytest.raises(WattcapFileError) as info:
        ProfileTable.load(path)
    message = str(info.value)
    assert "wattcap.plan" in message and "wattcap.profile" in message
    with pytest.raises(WattcapFileError):
        EfficiencyVector.load(path)


def test_wrong_schema_version_is_refused(tmp_path, nano_resnet18_profile) -> None:
    raw = _raw(nano_resnet18_profile)
    raw["schema_version"] = 99
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(WattcapFileError) as info:
        ProfileTable.load(path)
    assert "99" in str(info.value)
    assert f"version {ProfileTable.SCHEMA_VERSION}" in str(info.value)


def test_missing_field_is_refused(tmp_path, nano_resnet18_profile, efficiency) -> None:
    for model, cls, field in ((nano_resnet18_profile, ProfileTable, "points_measured"),
                              (efficiency, EfficiencyVector, "target_accuracy")):
        raw = _raw(model)
        del raw[field]
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(raw))
        with pytest.raises(WattcapFileError) as info:
            cls.load(path)
        assert field in str(info.value)


def test_missing_field_in_a_point_is_refused(tmp_path, nano_resnet18_profile) -> None:
    raw = _raw(nano_resnet18_profile)
    del raw["points"][3]["peak_power_w"]
    with pytest.raises(WattcapFileError) as info:
        ProfileTable.from_json(json.dumps(raw), source="x.json")
    assert "points.3.peak_power_w" in str(info.value)


def test_extra_field_is_refused(tmp_path, nano_resnet18_profile, a_plan) -> None:
    raw = _raw(nano_resnet18_profile)
    raw["surprise"] = 1
    with pytest.raises(WattcapFileError) as info:
        ProfileTable.from_json(json.dumps(raw), source="p.json")
    assert "surprise" in str(info.value)
    raw = _raw(a_plan)
    raw["choices"]["wattcap"]["turbo"] = True
    with pytest.raises(WattcapFileError) as info:
        Plan.from_json(json.dumps(raw), source="plan.json")
    assert "turbo" in str(info.value)


def test_wrong_value_type_is_refused(nano_resnet18_profile) -> None:
    raw = _raw(nano_resnet18_profile)
    raw["points"][0]["seconds_per_sample"] = "fast"
    with pytest.raises(WattcapFileError):
        ProfileTable.from_json(json.dumps(raw))
    raw = _raw(nano_resnet18_profile)
    raw["mode"] = "guessed"
    with pytest.raises(WattcapFileError):
        ProfileTable.from_json(json.dumps(raw))


@pytest.mark.parametrize(
    ("field", "used", "made_for"),
    [("device", "jetson-tx2nx", "jetson-nano"),
     ("model", "mobilenetv2", "resnet18"),
     ("input_shape", (3, 64, 64), [3, 32, 32])],
)
def test_profile_of_another_device_model_or_shape_is_refused(
    nano_resnet18_profile, field, used, made_for
) -> None:
    nano_resnet18_profile.check_matches(
        device="jetson-nano", model="resnet18", input_shape=(3, 32, 32)
    )
    with pytest.raises(WattcapFileError) as info:
        nano_resnet18_profile.check_matches(**{field: used}, source="my-profile.json")
    message = str(info.value)
    assert repr(made_for) in message
    assert repr(list(used) if field == "input_shape" else used) in message
    assert "my-profile.json" in message


def test_efficiency_of_another_model_is_refused(efficiency) -> None:
    efficiency.check_matches(model="resnet18", input_shape=[3, 32, 32])
    with pytest.raises(WattcapFileError) as info:
        efficiency.check_matches(model="efficientvit")
    assert "'resnet18'" in str(info.value) and "'efficientvit'" in str(info.value)


def test_merging_profiles(nano_resnet18_profile) -> None:
    newer_point = nano_resnet18_profile.points[0].model_copy(update={"peak_power_w": 99.0})
    newer = nano_resnet18_profile.model_copy(
        update={"points": [newer_point], "mode": "refresh"}
    )
    merged = nano_resnet18_profile.merged(newer)
    assert len(merged.points) == len(nano_resnet18_profile.points)
    assert merged.lookup(newer_point.batch_size, newer_point.knob_value).peak_power_w == 99.0
    # the original is unchanged
    assert nano_resnet18_profile.points[0].peak_power_w != 99.0
    other = nano_resnet18_profile.model_copy(update={"model": "mobilenetv2"})
    with pytest.raises(WattcapFileError):
        nano_resnet18_profile.merged(other)
