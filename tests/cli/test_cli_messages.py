"""What the command line says where a newcomer went wrong or the numbers deserve a caution:
compare's near-chance proxy, a cap no configuration can meet or one far above the board, the
fix for a profile of another emulated device, --device auto's fallback as one warning line,
targets printed to the precision given, a baseline that misses the objective's constraint, and
the front's title on a user model."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from tests.cli.cli_run import flat as _flat
from tests.cli.cli_run import invoke
from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.core.profile import ProfileTable

DEVICE = "emulated:jetson-nano"
MODEL = "digits32-cnn"
CAUTION = ("caution: the proxy's best accuracy 11.0% is near chance (10% for 10 classes) within "
           "64 samples: r_b measured to such a target says little about training to a real one")

@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An exhaustive profile of the emulated Nano (3 batch sizes) and a proxy's r_b."""
    folder = tmp_path_factory.mktemp("cli-messages")
    profile = folder / "profile.json"
    result = invoke("profile", "--device", DEVICE, "--model", MODEL, "--batch-sizes",
                    "16,32,64", "--exhaustive", "--out", profile)
    assert result.exit_code == 0, result.output
    efficiency = folder / "eff.json"
    vector_from_samples(
        {16: [700], 32: [800], 64: [1000]}, sample_budget=4096, model=MODEL,
        input_shape=[1, 32, 32], dataset="proxy", task="image-classification",
        target_accuracy=0.8, seeds=[0]).save(efficiency)
    return profile, efficiency


def _edited(profile: Path, folder: Path, **update: object) -> Path:
    """A copy of the profile with fields replaced."""
    path = folder / "edited.json"
    ProfileTable.load(profile).model_copy(update=update).save(path)
    return path


# -- A: compare says the proxy's near-chance caution, on the console and in the report ------

def _cautioned_vector(out: Path):  # noqa: ANN202
    vector = vector_from_samples(
        {16: [700], 64: [1000]}, sample_budget=4096, model=MODEL, input_shape=[1, 32, 32],
        dataset="digits-rotated-32", task="image-classification", target_accuracy=0.1,
        seeds=[0])
    return vector.model_copy(update={"notes": [*vector.notes, CAUTION]})


def test_compare_says_the_near_chance_caution_on_the_console_and_in_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs are stood in for (they are compare's own tests'): what is checked is that the
    caution the estimate left in the proxy's vector reaches the console and both reports."""
    import wattcap.cli.experiments as cli_experiments
    import wattcap.experiments.compare as compare_module
    from wattcap.experiments.compare import Comparison, MethodResult

    def comparison(*args: object, **kwargs: object) -> Comparison:
        result = MethodResult(device="jetson-nano", power_cap_w=5.0, target="digits-5-9-32",
                              method="wattcap", batch_size=16, knob_value=921_600_000,
                              predicted_time_s=1.0, time_s=[1.0], energy_j=[4.0],
                              peak_power_w=4.0, cap_violations=0, frequency_steps=0)
        return Comparison(model=MODEL, proxy="digits-rotated-32", targets=["digits-5-9-32"],
                          devices=[], seeds=1, target_accuracy=0.8, results=[result])

    monkeypatch.setattr(cli_experiments, "_weights", lambda *args: None)
    monkeypatch.setattr(cli_experiments, "_proxy_vector",
                        lambda *args, **kwargs: _cautioned_vector(tmp_path))
    monkeypatch.setattr(compare_module, "run_comparison", comparison)
    result = invoke("compare", "--out", tmp_path, "--quick", "--device", "jetson-nano",
                    "--power-caps", "5", "--board", "kind")
    assert result.exit_code == 0, result.output
    assert CAUTION in _flat(result.output)
    assert CAUTION in (tmp_path / "report.md").read_text()
    assert CAUTION.replace("'", "&#x27;") in (tmp_path / "report.html").read_text()


def test_compare_of_a_trace_says_its_proxy_caution(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import wattcap.experiments.trace as trace_module

    real = trace_module.load_trace

    def cautioned(path: Path):  # noqa: ANN202
        trace = real(path)
        trace.proxy = trace.proxy.model_copy(update={"notes": [*trace.proxy.notes, CAUTION]})
        return trace

    monkeypatch.setattr(trace_module, "load_trace", cautioned)
    example = Path(__file__).resolve().parents[2] / "examples" / "trace-nano" / "trace.json"
    result = invoke("compare", "--device", f"trace:{example}", "--power-caps", "4.5", "--out",
                    tmp_path)
    assert result.exit_code == 0, result.output
    assert CAUTION in _flat(result.output)
    assert CAUTION in (tmp_path / "report.md").read_text()


# -- B: a cap below the board's idle draw or below every measured point ---------------------

def test_profile_warns_of_a_cap_nothing_can_meet(tmp_path: Path) -> None:
    dry = _flat(invoke("profile", "--device", DEVICE, "--model", MODEL, "--power-cap", "1",
                       "--dry-run").output)
    assert "warning: the cap 1 W is below the board's power now (1.75 W" in dry
    assert "no configuration will be feasible under 1 W; try a cap above 1.75 W" in dry
    assert "warning" not in _flat(invoke("profile", "--device", DEVICE, "--model", MODEL,
                                         "--power-cap", "5", "--dry-run").output)
    out = tmp_path / "pruned.json"
    measured = invoke("profile", "--device", DEVICE, "--model", MODEL, "--power-cap", "1",
                      "--batch-sizes", "16", "--out", out)
    assert measured.exit_code == 0, measured.output
    text = _flat(measured.output)
    assert "warning: the cap 1 W is below the board's power now" in text
    found = re.search(r"every measured point peaks above the cap 1 W: nothing will be feasible "
                      r"under it \(plan says infeasible\); the lowest cap to try is ([\d.]+) W",
                      text)
    assert found, text
    # the lowest cap said is the one plan says, and plans
    refused = _flat(invoke("plan", "--profile", out, "--power-cap", "1").output)
    assert f"The lowest feasible cap for this profile is {found.group(1)} W" in refused
    assert invoke("plan", "--profile", out, "--power-cap", found.group(1)).exit_code == 0


# -- C: a cap far above the board may be a typo -----------------------------------------------

def test_a_cap_above_the_board_says_it_may_be_a_typo(files: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    profile, _ = files
    above = _flat(invoke("plan", "--profile", profile, "--power-cap", "5000").output)
    assert "the cap does not bind" in above
    # the emulated Nano's spec: its highest power mode's budget, 10 W
    assert "5000 W is above the board's maximum power (10 W): it may be a typo" in above
    within = _flat(invoke("plan", "--profile", profile, "--power-cap", "9").output)
    assert "the cap does not bind" in within and "typo" not in within
    # where the board's maximum is not recorded: twice the profile's highest peak
    unknown = _edited(profile, tmp_path, device_spec=None)
    text = _flat(invoke("plan", "--profile", unknown, "--power-cap", "5000").output)
    assert ("5000 W is more than 2x the profile's highest peak (the board's maximum power is "
            "not recorded in the profile): it may be a typo") in text
    assert "typo" not in _flat(invoke("plan", "--profile", unknown, "--power-cap",
                                      "8").output)


# -- C and F: train says the note, and its target to the precision given -----------------------

def test_train_says_a_cap_above_the_board_and_its_target_as_given(
        files: tuple[Path, Path]) -> None:
    profile, _ = files
    result = invoke("train", "--profile", profile, "--power-cap", "100", "--model", MODEL,
                    "--data", "digits-32", "--target-accuracy", "0.995", "--sample-budget", "64",
                    "--eval-every", "64")
    assert result.exit_code == NOT_REACHED_EXIT_CODE, result.output
    text = _flat(result.output)
    assert "100 W is above the board's maximum power (10 W): it may be a typo" in text
    assert "target 99.5%)" in text  # the header
    assert "(target 99.5%)" in text  # the progress line
    assert "did not reach 99.5%" in text
    assert "100%" not in text.replace("(100%)", "")  # no target rounded up to 100 %


# -- D: a profile of another emulated device names the --device that fits it ----------------

def test_a_profile_of_another_emulated_device_names_its_device_option(
        files: tuple[Path, Path], tmp_path: Path) -> None:
    profile, _ = files
    orin = _edited(profile, tmp_path, device="jetson-agx-orin")
    result = invoke("train", "--profile", orin, "--model", MODEL, "--data", "digits-32",
                    "--power-cap", "5", "--target-accuracy", "0.5", "--dry-run")
    assert result.exit_code != 0
    assert ("the profile was made for device 'jetson-agx-orin', but it is used with device "
            "'jetson-nano'. Re-create it for 'jetson-nano', or pass --device "
            "emulated:jetson-agx-orin.") in _flat(result.output)


# -- E: --device auto's fallback is one warning line ------------------------------------------

def test_device_auto_falling_back_is_one_warning_line(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import wattcap.devices.nvml as nvml

    monkeypatch.setattr(nvml, "list_nvml_devices", lambda: [])
    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(tmp_path))
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        result = invoke("profile", "--device", "auto", "--model", MODEL, "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("warning: --device auto found no Jetson and no NVIDIA GPU here: using "
                        "the emulated Jetson Nano (emulated:jetson-nano)")
    assert "UserWarning" not in result.output and ".py:" not in result.output
    assert not [w for w in escaped if issubclass(w.category, UserWarning)]


# -- G: a baseline that misses the objective's constraint is flagged --------------------------

def _methods(args: list[object]) -> dict[str, dict]:
    result = invoke("plan", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["methods"]


def test_a_baseline_over_the_deadline_or_the_energy_is_flagged(
        files: tuple[Path, Path]) -> None:
    profile, efficiency = files
    base = ["--profile", profile, "--efficiency", efficiency, "--power-cap", "5"]
    fastest = _methods([*base])["wattcap"]["predicted_time_s"]
    thriftiest = _methods([*base, "--objective", "energy"])
    practice = thriftiest["baseline-1"]
    assert fastest < practice["predicted_time_s"]  # the scenario has room for a deadline
    assert thriftiest["wattcap"]["predicted_energy_j"] < practice["predicted_energy_j"]
    deadline = (fastest + practice["predicted_time_s"]) / 2
    text = _flat(invoke(*["plan", *base, "--objective", "energy", "--deadline",
                          f"{deadline:.4g}"]).output)
    assert f"(over the {deadline:.4g} s deadline)" in text
    assert ("baseline-1 misses the objective's constraint: predicted "
            f"{practice['predicted_time_s']:.3g} s, over the deadline of {deadline:.4g} s") in text
    most_j = (thriftiest["wattcap"]["predicted_energy_j"] + practice["predicted_energy_j"]) / 2
    text = _flat(invoke(*["plan", *base, "--max-energy", f"{most_j:.4g}"]).output)
    assert f"(over the {most_j:.4g} J maximum)" in text
    assert "baseline-1 misses the objective's constraint" in text
    # without a constraint nothing is flagged
    assert "misses" not in _flat(invoke(*["plan", *base, "--objective", "energy"]).output)


# -- H: the front's title fits and names a user model by its file -----------------------------

def test_the_pareto_plot_title_fits_and_names_the_model_file(
        files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile, efficiency = files
    folder = tmp_path / "a-long-folder-name" / "of-the-user" / "models"
    user = _edited(profile, tmp_path, model=f"{folder}/net.py:build")
    figures = []
    close = plt.close

    def keep(fig: object = None) -> None:
        figures.append(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", keep)
    png = tmp_path / "front.png"
    result = invoke("plan", "--profile", user, "--power-cap", "12", "--objective", "energy",
                    "--plot", png)
    assert result.exit_code == 0, result.output
    [figure] = figures
    title = figure.axes[0].title
    text = title.get_text()
    assert "objective: energy" in text and "net.py:build" in text
    assert "a-long-folder-name" not in text and str(tmp_path) not in text
    figure.canvas.draw()
    box = title.get_window_extent()
    assert 0 <= box.x0 and box.x1 <= figure.bbox.width  # not cut off
