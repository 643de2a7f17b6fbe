"""Write the bundled trace (`wattcap compare --device trace:examples/trace-nano/trace.json`)
from the output folder of `make demo` (or of `wattcap compare` with the demo's settings): the
emulated Nano's exhaustive profile of digits32-cnn, the proxy's runs (digits-rotated-32 at its
own target) and the target's runs (digits-5-9-32 to 90 %), in the documented CSV layouts of
`wattcap import`. The numbers come from wattcap's emulator, not from hardware, and the
manifest's label says so.

    python examples/trace-nano/generate.py demo-output [examples/trace-nano]
"""

from __future__ import annotations

import sys
from pathlib import Path

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.experiments.compare import efficiency_from_runs
from wattcap.experiments.trace import TraceManifest, TraceRuns, TraceTable
from wattcap.measure.imported_tables import export_efficiency, export_profile

MODEL = "digits32-cnn"
PROXY = "digits-rotated-32"
TARGET = "digits-5-9-32"


def main(source: Path, out: Path) -> None:
    profile = ProfileTable.load(source / f"profile-jetson-nano-{MODEL}.json")
    proxy = EfficiencyVector.load(source / f"efficiency-{MODEL}-{PROXY}.json")
    runs = {(r.batch_size, r.config.seed if r.config else 0): r for r in
            (RunRecord.load(p) for p in sorted((source / "runs").glob(f"math-{TARGET}-*.json")))}
    if not runs:
        raise SystemExit(f"{source}/runs holds no {TARGET} runs: run `make demo` first")
    seeds = 1 + max(seed for _, seed in runs)
    target_accuracy = next(iter(runs.values())).config.target_accuracy  # type: ignore[union-attr]
    target = efficiency_from_runs(runs, MODEL, TARGET, seeds, target_accuracy,
                                  profile.input_shape, measured=False)
    if target is None:
        raise SystemExit(f"no {TARGET} run reached the target")
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.csv").write_text(export_profile(profile))
    (out / "proxy-runs.csv").write_text(export_efficiency(proxy))
    (out / "target-runs.csv").write_text(export_efficiency(target))
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
