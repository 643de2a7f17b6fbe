"""Golden outputs of the command line on fixed seeds. `python tests/golden/generate.py OUT`
writes them into OUT through the public CLI only (`python -m wattcap.cli ...`), masked;
`test_golden.py` compares a fresh run with the files committed beside this script (decisions
exactly, the numbers of CPU training within the tolerances of `compare.py`). Regenerate after
an intended change of behaviour with `python tests/golden/generate.py tests/golden/expected`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
INPUTS = HERE / "inputs"

#: keys whose values depend on the clock, the machine or the version, not on the method
MASKED_KEYS = {"created_at", "tool_version", "wall_time_s", "wall_s", "elapsed_wall_s",
               "hostname", "pid", "wall_seconds"}
#: path-like strings: where the run happened, not what it computed
_TMP = re.compile(r"(/tmp/|/private/var/|/var/folders/)[^\s\"']*")
_KEY_SUFFIX = re.compile(r"-[0-9a-f]{12}(\.json)$")


def mask(value: object, key: str = "") -> object:
    """The value with clock, machine and version fields replaced by a marker."""
    if key in MASKED_KEYS or key.startswith("wall") or key.endswith("_wall_s"):
        return "<masked>"
    if isinstance(value, dict):
        return {k: mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str):
        return _TMP.sub("<tmp>", value)
    return value


def run_cli(commands: list[list[str]], cwd: Path,
            env_extra: dict[str, str] | None = None) -> list[str]:
    """Run `wattcap ARGS` for each ARGS of `commands`, in order, in one fresh process (the same
    interpreter, `env_extra` added to its environment: torch reads its kernel choice once, at
    import); what each printed. One process for all of them: the imports, a few seconds per
    process, are paid once (`tests/golden/run_commands.py`)."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb", **(env_extra or {}))
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "commands.json"
        outputs = [Path(tmp) / f"stdout-{i}.txt" for i in range(len(commands))]
        plan.write_text(json.dumps([[args, str(path)] for args, path
                                    in zip(commands, outputs, strict=True)]))
        out = subprocess.run([sys.executable, str(HERE / "run_commands.py"), str(plan)],
                             cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise RuntimeError(f"wattcap commands failed ({out.returncode}):\n"
                               f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return [path.read_text() for path in outputs]


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(mask(data), indent=1, sort_keys=True) + "\n")


DEVICES = ("jetson-nano", "jetson-tx2nx")
CAPS = {"jetson-nano": ("4.5", "5.5", "none"), "jetson-tx2nx": ("7", "9", "none")}


def _profile_command(device: str, work: Path) -> list[str]:
    return ["profile", "--device", f"emulated:{device}", "--model", "digits32-cnn",
            "--exhaustive", "--out", str(work / f"{device}.json")]


def generate(out: Path, *, env_extra: dict[str, str] | None = None,
             keep: Path | None = None) -> list[str]:
    """Write the golden outputs into `out`, each command run with `env_extra` in its
    environment; the names written. With `keep`, the commands' own outputs stay there (the
    demo's folder and heatmaps in `keep/demo`, what it printed in `keep/demo-stdout.txt`).

    The profiles of the emulated devices (device time is deterministic) and plans from them
    are decisions from fixed inputs, with no CPU training in them; the run record (a training
    run on the emulated Nano, planned on the Nano's profile) and the quick demo (the
    comparison harness end to end, its tables and files) come out of CPU training."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        work = keep if keep is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        eff = work / "efficiency.json"
        shutil.copy(INPUTS / "efficiency.json", eff)
        commands = [_profile_command(device, work) for device in DEVICES]
        plans = [(device, cap) for device in DEVICES for cap in CAPS[device]]
        commands += [["plan", "--profile", str(work / f"{device}.json"), "--efficiency",
                      str(eff), "--power-cap", cap, "--json"] for device, cap in plans]
        record, demo = work / "record.json", work / "demo"
        commands += [
            ["train", "--profile", str(work / "jetson-nano.json"), "--efficiency", str(eff),
             "--model", "digits32-cnn", "--data", "digits-5-9-32", "--power-cap", "4.5",
             "--target-accuracy", "0.8", "--sample-budget", "4096", "--seed", "0",
             "--out", str(record)],
            # the kind board: the goldens pin one deterministic device (the demo's default
            # draws a board per seed)
            ["demo", "--quick", "--board", "kind", "--out", str(demo)]]
        printed = run_cli(commands, work, env_extra)
        for device in DEVICES:
            write_json(out / f"profile-{device}.json",
                       json.loads((work / f"{device}.json").read_text()))
            written.append(f"profile-{device}.json")
        for (device, cap), text in zip(plans, printed[len(DEVICES):len(DEVICES) + len(plans)],
                                    strict=True):
            name = f"plan-{device}-{cap}.json"
            write_json(out / name, json.loads(text))
            written.append(name)
        write_json(out / "run-record.json", json.loads(record.read_text()))
        written.append("run-record.json")
        (work / "demo-stdout.txt").write_text(printed[-1])
        for path in sorted(demo.rglob("*")):
            # run files are named by their identity key, whose hash covers file stamps of
            # the temporary folder: the name without it
            name = _KEY_SUFFIX.sub(r"\1", "demo-" + "-".join(path.relative_to(demo).parts))
            if path.suffix == ".json":
                write_json(out / name, json.loads(path.read_text()))
                written.append(name)
            elif path.suffix in (".md", ".csv", ".txt"):
                (out / name).write_text(_TMP.sub("<tmp>", path.read_text()))
                written.append(name)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "expected"
    names = generate(target)
    print(f"{len(names)} golden files in {target}")
