"""Write the bundled trace (`wattcap compare --device trace:examples/trace-nano/trace.json`)
from the output folder of `make demo` (or of `wattcap compare` with the demo's settings): the
emulated Nano's exhaustive profile of digits32-cnn, the proxy's runs (digits-rotated-32 at its
own target) and the target's runs (digits-5-9-32 to 90 %), in the documented CSV layouts of
`wattcap import`. The numbers come from wattcap's emulator, not from hardware, and the
manifest's label says so.

    python examples/trace-nano/generate.py demo-output [examples/trace-nano]
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.experiments.trace import TraceManifest, TraceRuns, TraceTable
from wattcap.measure.imported_tables import export_profile

MODEL = "digits32-cnn"
PROXY = "digits-rotated-32"
TARGET = "digits-5-9-32"


def runs_csv(rows: list[tuple[int, int, float | None, int]]) -> str:
    """batch_size, seed, samples_to_target ('not reached' for a miss), budget_samples."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["batch_size", "seed", "samples_to_target", "budget_samples"])
    for b, seed, samples, budget in sorted(rows):
        writer.writerow([b, seed, "not reached" if samples is None else f"{samples:.1f}",
                         budget])
    return out.getvalue()


def main(source: Path, out: Path) -> None:
    profile = ProfileTable.load(source / f"profile-jetson-nano-{MODEL}.json")
    proxy = EfficiencyVector.load(source / f"efficiency-{MODEL}-{PROXY}.json")
    target_rows, target_accuracy = [], None
    for path in sorted((source / "runs").glob(f"math-{TARGET}-b*-s*.json")):
        record = RunRecord.load(path)
        assert record.config is not None
        target_accuracy = record.config.target_accuracy
        target_rows.append((record.batch_size, record.config.seed, record.samples_to_target,
                            record.config.sample_budget))
    if not target_rows or target_accuracy is None:
        raise SystemExit(f"{source}/runs holds no {TARGET} runs: run `make demo` first")
    proxy_rows = [(e.batch_size, seed, s, budget) for e in proxy.entries
                  for seed, (s, budget) in enumerate(zip(e.samples_per_seed,
                                                         e.budget_per_seed, strict=True))]
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.csv").write_text(export_profile(profile))
    (out / "proxy-runs.csv").write_text(runs_csv(proxy_rows))
    (out / "target-runs.csv").write_text(runs_csv(target_rows))
    TraceManifest(
        label=("generated from wattcap's emulated Jetson Nano by `make demo` (not measured "
               "hardware): an example of the trace format"),
        device="jetson-nano", model=MODEL, input_shape=profile.input_shape,
        profile=TraceTable(file="profile.csv",
                           power_sampling=f"instant:{profile.sensor_period_s:g}"),
        proxy=TraceRuns(file="proxy-runs.csv", dataset=PROXY, target=proxy.target_accuracy),
        targets=[TraceRuns(file="target-runs.csv", dataset=TARGET, target=target_accuracy)],
    ).save(out / "trace.json")
    print(f"wrote {out}/trace.json, profile.csv, proxy-runs.csv, target-runs.csv")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent)
