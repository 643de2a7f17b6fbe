"""Every option more than one command takes, defined once as a Typer `Annotated` alias.

A command declares `weights: WeightsOpt = None`; the name, help and panel come from here, so the
same option reads the same in every `--help`. Options that only one command has, or that mean
something else in another command (`--out` names a different file in each), stay with their
command. Only typer loads here.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.server import SERVER_ENV, TOKEN_ENV

DEVICE_HELP = "auto, jetson, nvml:N, emulated:NAME"
MODEL_HELP = ("Registered model name, or your own: path/to/file.py:factory or "
              "package.module:factory (a callable returning an nn.Module).")
DATA_HELP = ("A bundled dataset, or FORMAT:PATH with FORMAT one of cifar10, cifar100, svhn, "
             "mnist, fashion-mnist, stl10, imagefolder, text (the official training files).")
OBJECTIVE_HELP = ("What the selection minimises under the cap: time (the paper's), energy, or "
                  "cost (Zeus's eta·E + (1 − eta)·P_max·T, with --eta).")
MARGIN_HELP = ("Standard deviations of the sensor noise (seen while profiling) kept as a margin "
               "below the cap, so that a long run at the chosen point does not cross it.")
RAY_HELP = ("Run the independent trainings as Ray tasks (pip install 'wattcap[ray]'): 'local' "
            "starts a local Ray of 2 CPUs ('local:N': N CPUs), anything else is a cluster "
            "address ('auto', HOST:PORT, ray://HOST:10001); 'processes:N' runs them in N local "
            "processes without Ray. Default: one after another here.")
PROXY_TARGET_HELP = ("The proxy's own target accuracy (0-1), or 'auto': 0.9 x the best "
                     "accuracy the largest batch size reaches within the budget.")

# the help panels a long `--help` reads in (rich_help_panel): options no panel claims stay
# under "Options"
MODEL_AND_DATA = "Model and data"
SERVER = "Server"
CAP_AND_DEVICE = "Power cap and device"
PLAN_INPUTS = "Profile and efficiency"
OBJECTIVE = "Objective"
TRAINING = "Training"
OUTPUT = "Output"

# -- the device and the cap -------------------------------------------------------------------
DeviceOpt = Annotated[str, typer.Option(help=DEVICE_HELP, rich_help_panel=CAP_AND_DEVICE)]
PowerCapOpt = Annotated[str | None, typer.Option(
    help="Power cap in watts (4.5, 4.5W, 0.25kW), or 'none'.", rich_help_panel=CAP_AND_DEVICE)]
MovingPowerCapOpt = Annotated[str, typer.Option(
    "--power-cap", help="Power cap in watts (4.5, 4.5W, 0.25kW), or 'none', or a cap that "
    "moves during the run: "
    "solar:seed=N[,day_s=..,start=..,clouds=..], battery:capacity_wh=WH,max_w=W[,soc=..] "
    "(simulated), battery:sysfs[:NAME][,hours=H][,reserve=P%|reserve_wh=WH][,max_w=W]"
    "[,base_w=W][,period_s=S] (a real battery or supply from /sys/class/power_supply: the "
    "energy above the reserve spread over the hours left, 0 W at the reserve, max_w or no cap "
    "on external power), schedule:FILE (.json or .csv: time_s,cap_w), file:PATH[,period_s=..] "
    "(a file another process rewrites).", rich_help_panel=CAP_AND_DEVICE)]
MarginOpt = Annotated[float, typer.Option(
    min=0.0, help=MARGIN_HELP, rich_help_panel=CAP_AND_DEVICE)]


def _note_dry_run(ctx: typer.Context, value: bool) -> bool:
    """--dry-run's callback: while the command runs, `DRY_RUN` says so to the code that
    would write a file on the way (the data loader's pixel cache)."""
    from wattcap.cli.common import DRY_RUN

    if value:
        DRY_RUN.set(True)
        ctx.call_on_close(lambda: DRY_RUN.set(False))
    return value


DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Read the device and say what would be done; change no setting, write "
    "no file, train nothing.", rich_help_panel=CAP_AND_DEVICE, callback=_note_dry_run)]
DriftOpt = Annotated[str | None, typer.Option(
    help="Emulated devices only: AFTER_S,SPEED,POWER derating after AFTER_S device seconds "
    "(e.g. 0,0.8,1.15), to try --refresh and drift handling.", rich_help_panel=CAP_AND_DEVICE)]

# -- the files a plan is made from --------------------------------------------------------------
ProfileOpt = Annotated[Path | None, typer.Option(
    help="The profile (JSON) of this device and model, as `wattcap profile` writes it "
    "(required unless --server fetches it).", rich_help_panel=PLAN_INPUTS)]
EfficiencyOpt = Annotated[Path | None, typer.Option(
    help="The efficiency vector (JSON): r_b estimated on the proxy by `wattcap estimate`.",
    rich_help_panel=PLAN_INPUTS)]
TargetEfficiencyOpt = Annotated[Path | None, typer.Option(
    help="r_b measured on the target: adds the fastest-configuration oracle.",
    rich_help_panel=PLAN_INPUTS)]

# -- what the selection minimises -----------------------------------------------------------------
ObjectiveOpt = Annotated[str, typer.Option(help=OBJECTIVE_HELP, rich_help_panel=OBJECTIVE)]
EtaOpt = Annotated[float | None, typer.Option(
    help="With --objective cost: weight of energy against time, in [0, 1].",
    rich_help_panel=OBJECTIVE)]
MaxEnergyOpt = Annotated[float | None, typer.Option(
    help="With --objective time: the fastest choice that reaches the target within this many "
    "joules (predicted).", rich_help_panel=OBJECTIVE)]
CostMaxPowerOpt = Annotated[float | None, typer.Option(
    help="With --objective cost: P_max of Zeus's cost, in W (default: the board's largest "
    "power limit where the profile recorded one, as Zeus uses, else the profile's highest "
    "peak power).", rich_help_panel=OBJECTIVE)]
DeadlineOpt = Annotated[float | None, typer.Option(
    help="With --objective energy: the thriftiest choice that reaches the target within this "
    "many seconds (predicted).", rich_help_panel=OBJECTIVE)]

# -- training -------------------------------------------------------------------------------
ModelOpt = Annotated[str, typer.Option(help=MODEL_HELP, rich_help_panel=MODEL_AND_DATA)]
DataOpt = Annotated[str, typer.Option(
    help=f"The dataset to train on. {DATA_HELP}", rich_help_panel=MODEL_AND_DATA)]
ProxyOpt = Annotated[str, typer.Option(
    help=f"The proxy dataset r_b is estimated on. {DATA_HELP}", rich_help_panel=MODEL_AND_DATA)]
WeightsOpt = Annotated[Path | None, typer.Option(
    help="Pre-trained weights (.safetensors) every run starts from.", rich_help_panel=TRAINING)]
TargetAccuracyOpt = Annotated[float, typer.Option(
    help="Test accuracy to reach on the target data (0-1).", rich_help_panel=TRAINING)]
MetricOpt = Annotated[str, typer.Option(
    help="What the loop evaluates on the test split and the target is on: accuracy (a "
    "fraction, reached at or above; the default), loss (mean cross-entropy) or perplexity "
    "(both reached at or below the target).", rich_help_panel=TRAINING)]
SeedOpt = Annotated[int, typer.Option(help="Random seed of the run.", rich_help_panel=TRAINING)]
# --seeds counts something else in each command that has it (the runs per batch size of an
# estimate, the sweeps of a sensitivity matrix, the federations of each method)
SeedsOpt = Annotated[int, typer.Option(
    help="Seeds per batch size (an efficiency estimate needs 2 for its large-batch fit; with 1 "
    "it uses the raw samples).", rich_help_panel=TRAINING)]
SensitivitySeedsOpt = Annotated[int, typer.Option(
    "--seeds", help="Seeds per batch size in the r_b sweep of every proxy and every target (2 "
    "or more fit the large-batch relation; with 1 the raw samples are used).",
    rich_help_panel=TRAINING)]
SampleBudgetOpt = Annotated[int, typer.Option(
    help="A run gives up after this many samples (a proxy batch size that misses gets one "
    "retry with twice the budget).", rich_help_panel=TRAINING)]
TrainSampleBudgetOpt = Annotated[int, typer.Option(
    "--sample-budget", help="The run gives up after this many samples if the target is not "
    "reached (the record says so, and the command exits with code 1).",
    rich_help_panel=TRAINING)]
EvalEveryOpt = Annotated[int, typer.Option(
    help="Evaluate every N samples (the same for every batch size).", rich_help_panel=TRAINING)]
BatchSizesOpt = Annotated[str, typer.Option(
    help="Comma-separated batch sizes.", rich_help_panel=TRAINING)]
LrRefOpt = Annotated[float | None, typer.Option(
    help="Learning rate at the reference batch size (default: the efficiency vector's where "
    f"one is read, else {DEFAULT_LR_REF:g} as in the paper: Adam at b = 128).",
    rich_help_panel=TRAINING)]
BatchSizeRefOpt = Annotated[int | None, typer.Option(
    help="Reference batch size for square-root LR scaling (default: the efficiency vector's "
    f"where one is read, else {DEFAULT_BATCH_SIZE_REF}).", rich_help_panel=TRAINING)]
OptimizerOpt = Annotated[str | None, typer.Option(
    help="adam or adamw, both with square-root LR scaling (default: the efficiency vector's "
    "where one is read, else adam).", rich_help_panel=TRAINING)]
WeightDecayOpt = Annotated[float, typer.Option(
    help="Weight decay (e.g. 0.01 with adamw).", rich_help_panel=TRAINING)]
RayOpt = Annotated[str | None, typer.Option(
    "--ray", help=RAY_HELP, metavar="local|ADDRESS", rich_help_panel=TRAINING)]

# -- the model and its data, where they cannot be inferred ----------------------------------------
InputShapeOpt = Annotated[str | None, typer.Option(
    "--input-shape", help="The model's input shape, C x H x W (e.g. 3x32x32) or a context "
    "length for a char model: your own model's where it cannot be inferred, and images are "
    "converted to it (1<->3 channels, any size).", rich_help_panel=MODEL_AND_DATA)]
ColumnsOpt = Annotated[str | None, typer.Option(
    "--columns", help="Other headers for the layout's columns: NAME=HEADER,... (e.g. "
    "avg_power_w=power.draw).")]
NumClassesOpt = Annotated[int | None, typer.Option(
    "--num-classes", help="Your own model's number of classes, where it cannot be inferred.",
    rich_help_panel=MODEL_AND_DATA)]
VocabSizeOpt = Annotated[int | None, typer.Option(
    "--vocab-size", help="Your own char model's vocabulary size (96 for wattcap's text "
    "filter); makes it a char-lm model.", rich_help_panel=MODEL_AND_DATA)]
SubsetFractionOpt = Annotated[float | None, typer.Option(
    "--subset-fraction", help="Keep this seeded share of the data (e.g. 0.25: the paper's "
    "quarter of SVHN and CINIC-10).", rich_help_panel=MODEL_AND_DATA)]
TestFractionOpt = Annotated[float | None, typer.Option(
    "--test-fraction", help="Share held out for testing (default 0.2 for images, 0.1 for "
    "text files).", rich_help_panel=MODEL_AND_DATA)]
WorkersOpt = Annotated[int, typer.Option(
    "--workers", help="DataLoader worker processes that prepare batches.",
    rich_help_panel=MODEL_AND_DATA)]

# -- experiments ----------------------------------------------------------------------------
TargetsOpt = Annotated[str, typer.Option(
    help="Comma-separated target datasets (data specs, as --proxy).")]
PowerCapsOpt = Annotated[str | None, typer.Option(
    help="Comma-separated power caps in watts (4.5, 4.5W, 0.25kW) or 'none', for every device "
    "(default: a grid per device).", rich_help_panel=CAP_AND_DEVICE)]
ProxyTargetOpt = Annotated[str, typer.Option(help=PROXY_TARGET_HELP)]
ResumeOpt = Annotated[bool, typer.Option(
    help="Reuse runs already recorded in OUT, or by `wattcap estimate` in the cache (only "
    "those with the same model, weights by content, data, budget, seed and target).")]

# -- a wattcap server -----------------------------------------------------------------------------
ServerUrlOpt = Annotated[str | None, typer.Option(
    help="wattcap server URL: fetch what this command needs from it (the device's profile, "
    "the model's efficiency vector and weights); local files given still win.",
    rich_help_panel=SERVER)]
ServerOpt = Annotated[str, typer.Option(
    "--server", envvar=SERVER_ENV, help=f"wattcap server URL (env {SERVER_ENV}).")]
TokenOpt = Annotated[str | None, typer.Option(
    "--token", envvar=TOKEN_ENV, help=f"Bearer token: writes need it, and reads on a server "
    f"with private reads (better: env {TOKEN_ENV}, which other users cannot see in the process "
    "list).", rich_help_panel=SERVER)]
# the device model and the power mode: each command says what they do in it
PlanDeviceNameOpt = Annotated[str | None, typer.Option(
    "--device-name", help="With --server: the device model whose profile to fetch, e.g. "
    "jetson-nano (needed unless --profile is given).", rich_help_panel=SERVER)]
TrainDeviceNameOpt = Annotated[str | None, typer.Option(
    "--device-name", help="With --server: the device model whose profile to fetch, e.g. "
    "jetson-nano (default: --device's).", rich_help_panel=SERVER)]
PullDeviceNameOpt = Annotated[str, typer.Option(
    "--device-name", help="The device model whose profile to download, e.g. jetson-nano.")]
ProfileKnobOpt = Annotated[str, typer.Option(
    "--knob", help="What to vary beside the batch size: gpu-clock (every locked clock), "
    "power-mode (every nvpmodel mode, at the clock it allows) or power-limit (the board's power "
    "limit, the clock left to the board; see --power-limits). What was found is restored.")]
PowerLimitsOpt = Annotated[str | None, typer.Option(
    help="With --knob power-limit: the limits to measure, in W (e.g. 150,200,250); default: 8 "
    "spread over the range the board accepts.")]
class CapOn(str, Enum):
    """What a power cap holds."""

    PEAK = "peak"
    AVERAGE = "average"


class Board(str, Enum):
    """Which emulated boards a comparison replays on."""

    KIND = "kind"
    UNKIND = "unkind"


BoardOpt = Annotated[Board, typer.Option(
    help="unkind: each seed's runs on a board drawn for it (speed, power, host speed, a "
    "lagging sensor), the profile on one of its own, the fastest found by replaying; kind: "
    "one deterministic emulated board.", rich_help_panel=CAP_AND_DEVICE)]
CapOnOpt = Annotated[CapOn | None, typer.Option(
    help="What the cap holds: peak power (a Jetson's supply; the default) or average power "
    "(what a GPU power limit enforces, a site's budget). A trace's manifest may set it "
    "(cap_on).", rich_help_panel=CAP_AND_DEVICE)]
RiskOpt = Annotated[float | None, typer.Option(
    help="Plan on this quantile of r_b over its uncertainty (e.g. 0.9: guard against a "
    "batch size whose r_b is poorly known) instead of its value.", rich_help_panel=PLAN_INPUTS)]
TransferFactorOpt = Annotated[float | None, typer.Option(
    min=1.0, help="Choose robustly to a target whose critical batch size (B_noise) lies up to "
    "this factor from the proxy's either way (e.g. 3): the choice with the least worst-case "
    "regret over that range, by the large-batch relation; the notes say what each choice "
    "risks. Time objective only. Default: plan on the proxy's r_b as it is.",
    rich_help_panel=PLAN_INPUTS)]
OnlineCorrectionOpt = Annotated[bool, typer.Option(
    help="Measure the target's gradient noise scale all run long and re-plan when it parts "
    "from the proxy's (r_b moved along the large-batch relation; at most once per doubling of "
    "samples). Needs an efficiency vector with the proxy's reference (`wattcap estimate "
    "--noise-reference` or --method gns). Its chunked steps cost time, counted in the run.",
    rich_help_panel=PLAN_INPUTS)]
DevicePowerModeOpt = Annotated[str | None, typer.Option(
    "--power-mode", help="The nvpmodel power mode to run in, by name (MAXN, MODE_15W; any "
    "case) or id (1): an emulated device runs in it; a Jetson must already be in it, else "
    "wattcap stops (it never switches the board's mode for this: `sudo nvpmodel -m ID` does). "
    "A profile is measured in, and holds for, one mode.", rich_help_panel=CAP_AND_DEVICE)]
PlanPowerModeOpt = Annotated[str | None, typer.Option(
    "--power-mode", help="With --server: only a profile made in this nvpmodel power mode "
    "(e.g. MAXN).", rich_help_panel=SERVER)]
PullPowerModeOpt = Annotated[str | None, typer.Option(
    "--power-mode", help="Only a profile made in this nvpmodel power mode (e.g. MAXN).")]
ProxyFilterOpt = Annotated[str | None, typer.Option(
    help="Only an efficiency vector estimated on this proxy dataset.", rich_help_panel=SERVER)]
TargetFilterOpt = Annotated[float | None, typer.Option(
    help="Only an efficiency vector for this target accuracy.", rich_help_panel=SERVER)]
ModelIdOpt = Annotated[int | None, typer.Option(
    help="With --server: the stored weights to use (default: those the efficiency vector was "
    "estimated from, else the newest for --model).", rich_help_panel=SERVER)]

SharedRunsDirOpt = Annotated[Path | None, typer.Option(
    "--runs-dir", help="A folder of runs `wattcap estimate --runs-dir` kept: its proxy runs are "
    "reused (besides the wattcap cache's runs folder, the default).",
    rich_help_panel=TRAINING)]
