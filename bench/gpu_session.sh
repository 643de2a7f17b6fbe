#!/usr/bin/env bash
# One read-only check session on a machine with an NVIDIA GPU: the GPU's settings before and
# after (they must match), `pytest -m gpu`, bench/gpu_check.py, bench/nvml_probe.py and
# bench/gpu_timing_modes.py.
# Nothing here changes a clock or a power limit. Reports go to $OUT (default: gpu-session/).
#
#     bash bench/gpu_session.sh            # from the repository root, wattcap importable
#
# Where wattcap is not installed, put the repository on PYTHONPATH first (as below); where
# pydantic is missing, install it (the checks need wattcap's core dependencies only).
set -u
OUT=${OUT:-gpu-session}
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
settings() {
  # What wattcap could change (and must leave as found): clocks locked or not, application
  # clocks, the power limit, persistence and compute mode.
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.applications.graphics,\
clocks.applications.memory,power.limit,power.default_limit,power.min_limit,power.max_limit,\
persistence_mode,compute_mode --format=csv
}
{ settings; nvidia-smi -q -d CLOCK | grep -iA3 "locked\|applications clocks"; } \
  >"$OUT/settings-before.txt" 2>&1
"$PY" -c "import torch, pynvml, pydantic; print('torch', torch.__version__, 'cuda', \
torch.version.cuda, torch.cuda.get_device_name(0)); print('pydantic', pydantic.VERSION)" \
  >"$OUT/machine.txt" 2>&1
timeout 60 "$PY" -m wattcap.cli devices --probe >>"$OUT/machine.txt" 2>&1
# Every test is collected (so collection itself is checked on this machine's packages), only the
# gpu-marked ones run. The import-layer test needs grimp, a dev tool: left out here.
timeout 200 "$PY" -m pytest -m gpu -p no:cacheprovider -rA \
  --ignore=tests/architecture/test_imports.py >"$OUT/pytest-gpu.txt" 2>&1
echo "pytest exit $?" >>"$OUT/pytest-gpu.txt"
timeout 120 "$PY" bench/gpu_check.py --out "$OUT/gpu-check.txt" >/dev/null 2>"$OUT/stderr.tmp"
echo "gpu_check exit $?" >>"$OUT/gpu-check.txt"
cat "$OUT/stderr.tmp" >>"$OUT/gpu-check.txt" && rm -f "$OUT/stderr.tmp"
timeout 120 "$PY" bench/nvml_probe.py --batch-sizes 4,16,64 >"$OUT/nvml-probe.txt" 2>&1
echo "nvml_probe exit $?" >>"$OUT/nvml-probe.txt"
# How a profile point's numbers compare with training's, and the drift monitor's windows on a
# device that has not moved (about a minute; TIMING_MODES=0 leaves it out of a short session).
if [ "${TIMING_MODES:-1}" != 0 ]; then
  timeout 150 "$PY" bench/gpu_timing_modes.py --rounds 2 --batch-sizes 32,128 --windows-s 10 \
    >"$OUT/timing-modes.txt" 2>&1
  echo "gpu_timing_modes exit $?" >>"$OUT/timing-modes.txt"
fi
{ settings; nvidia-smi -q -d CLOCK | grep -iA3 "locked\|applications clocks"; } \
  >"$OUT/settings-after.txt" 2>&1
# The settings, less the readings that move by themselves (pstate, the live SM clock).
strip() { cut -d, -f1,2,5- "$1"; }
if diff <(strip "$OUT/settings-before.txt") <(strip "$OUT/settings-after.txt") \
  >"$OUT/settings-diff.txt"; then echo "settings unchanged" >>"$OUT/settings-diff.txt"; fi
tail -n 3 "$OUT"/*.txt
