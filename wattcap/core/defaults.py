"""Defaults shared by the library and the command line, in a module that imports nothing (the
CLI reads them before any heavy import)."""

#: how many standard deviations of the sensor's noise (and of a predicted point's uncertainty)
#: the planner keeps below the cap, so that a long run at the chosen point does not cross it
#: for more than one sensor period (measured on the emulated devices: tests/test_margin.py)
DEFAULT_MARGIN_SIGMAS = 2.0

#: the sample period of the instant power readings that an averaged reading smooths (NVML's
#: instant power field is refreshed every few tens of ms; wattcap reads it every 0.1 s). A "peak"
#: imported from readings averaged over a window W hides the instant peaks: the planner grows
#: its margin by the excursion of that peak above the average times (sqrt(W / this) - 1), the
#: gain by which averaging n = W / this independent samples shrinks an excursion
INSTANT_POWER_PERIOD_S = 0.1

#: of a row's equally fast points (a host-bound row: the GPU's work hides under the host's), the
#: planner takes the first clock (or power limit) at least this fraction above the lowest, not
#: the lowest: that is the knee, where a host faster on the day makes the GPU the bottleneck.
#: Host-bound step times on a real H200 moved 5-20 % between rounds of one profile
#: (bench/results/gpu-2026-11-26-h200: b = 32 and b = 128 resnet18), so the knee's tie holds
#: only within that; the upper end is taken
HOST_BOUND_HEADROOM = 0.20

#: under a moving cap, the batch size (and its learning rate) changes at most once per this many
#: device seconds; only a cap the current batch size cannot meet at any clock is obeyed at
#: once. Frequencies change freely (they cost the training nothing).
DEFAULT_BATCH_SIZE_HOLD_S = 30.0

#: the learning-rate reference of the paper: Adam at 5e-4 for b = 128, scaled by sqrt(b / 128)
DEFAULT_LR_REF = 5e-4
DEFAULT_BATCH_SIZE_REF = 128

#: the reference paper's models, whose profiles define a device's safe frequency; kept here so
#: that reading cached reference profiles (`wattcap plan`) never imports torch. The model
#: registry's `reference_models()` must list the same names (a test checks it).
REFERENCE_MODELS = ("efficientvit", "mobilenetv2", "resnet18")
