"""`wattcap estimate --method gns`: one run measuring the gradient noise scale."""

from __future__ import annotations

from tests.cli.cli_run import invoke
from wattcap.core.efficiency import EfficiencyVector

COMMON = ("estimate", "--model", "digits-cnn", "--proxy", "digits", "--batch-sizes", "8,32",
          "--lr-ref", "1e-3", "--batch-size-ref", "32")


def test_estimate_with_gns_writes_a_gns_vector(tmp_path) -> None:
    out = tmp_path / "gns.json"
    result = invoke(*COMMON, "--method", "gns", "--gns-samples", "512", "--out", out)
    assert result.exit_code == 0, result.output
    vector = EfficiencyVector.load(out)
    assert vector.ratio_source == "gns" and vector.training_samples == 512
    assert {e.source for e in vector.entries} == {"gns"} and vector.ratio(32) == 1.0
    assert "gradient noise scale" in result.output and "B_noise" in result.output


def test_gns_with_a_target_stops_when_the_proxy_reaches_it(tmp_path) -> None:
    out = tmp_path / "gns.json"
    result = invoke(*COMMON, "--method", "gns", "--gns-samples", "4096",
                    "--target-accuracy", "0.3", "--eval-every", "128", "--out", out)
    assert result.exit_code == 0, result.output
    vector = EfficiencyVector.load(out)
    assert vector.target_accuracy == 0.3 and vector.target_accuracy_source == "given"
    assert vector.training_samples < 4096  # stopped at the target, well before the budget


def test_gns_options_are_checked(tmp_path) -> None:
    out = tmp_path / "x.json"
    for extra, message in ((["--method", "grid"], "'sweep' or 'gns'"),
                           (["--method", "gns", "--gns-samples", "16"], "at least one batch"),
                           (["--method", "gns", "--ray", "local"], "nothing to spread"),
                           (["--ray", "local:x"], "local:N")):
        result = invoke(*COMMON, *extra, "--out", out)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not out.exists()
