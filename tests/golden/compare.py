"""How a fresh golden output is compared with the recorded one.

Decisions stay exact: the emulated devices' profiles, plans from fixed inputs, and every choice
(batch size, clock, method, counts of runs and violations) anywhere. The numbers that come out
of training on the CPU are compared within stated tolerances, because they depend on the
kernels torch picks for the CPU it runs on: oneDNN's convolutions, MKL's or OpenBLAS's matrix
products and ATen's vector code are chosen by instruction set (AVX-512, AVX2, SSE, NEON on
aarch64), each rounds in its own order, and a training run carries a rounding difference into
a prediction now and then. Seen on one x86-64 machine, AVX-512 against AVX2 kernels: one test
image of 179 classified differently at one evaluation (accuracy 0.8156 against 0.8212), nothing
else changed.

The tolerances, and why:
- a metric value (accuracy, loss): ``METRIC_ABS`` = 0.02, about four test images of the
  bundled 179-image test sets: four times the difference seen;
- every other number of training (samples to target, device time and energy to the target,
  steps, the fit of r_b): ``DERIVED_REL`` = 15 %. Samples to target are interpolated between
  evaluations, where a curve rises by about 0.011 per 256 samples near the target: one image
  (0.0056) there moves them by ~130 samples, 7 % of 1,900, and the rest follows them; a
  quotient or difference of two such numbers (r_b, "2.27x", "% over the fastest") twice that;
  a standard deviation 15 % of the numbers beside it (the spread of two seeds can double
  while their mean moves by little); a number printed rounded, one unit of its last digit
  more;
- whole numbers are exact (batch sizes, seeds, clocks, budgets, counts of runs and
  violations, a number of seeds in a sentence), except the counts that follow from where a
  run stopped (``TRAINING_COUNTS``: steps, samples seen, sensor readings) and the numbers in
  a fitted model's free-text notes (``RESULT_TEXT_KEYS``), which are results like any other;
- a training curve may end one evaluation earlier or later (its target crossed at another
  evaluation); the evaluations both have are compared.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator

METRIC_ABS = 0.02
DERIVED_REL = 0.15
#: file-name prefixes of outputs with no CPU training in them: compared exactly
EXACT_FILES = ("profile-", "plan-", "demo-profile-")
#: keys whose (non-integer) numbers are decisions or settings, never results of training:
#: compared exactly, as every whole number is
EXACT_KEYS = {"frequency_hz", "frequency_mhz", "max_hz", "min_hz", "power_cap_w",
              "target_accuracy", "proxy_target_accuracy", "high", "low", "lr_ref",
              "learning_rate", "weight_decay", "confidence", "budget_extension"}
#: whole numbers that follow from where a run stopped (its target crossed one evaluation
#: earlier or later): compared as results
TRAINING_COUNTS = {"steps", "samples_seen", "training_samples", "readings"}
#: free text whose numbers are all results (a fit's notes, the auto target's rule)
RESULT_TEXT_KEYS = {"notes", "quality_reason", "target_accuracy_rule"}
#: hexadecimal identities (fingerprints, keys): exact, never read as numbers
_HEX = re.compile(r"\b[0-9a-f]{12,}\b")
#: keys whose numbers are values of a training metric
METRIC_KEYS = {"accuracy", "final_accuracy", "loss", "best_accuracy", "metric", "value"}
#: lists that may differ in length by one evaluation
CURVE_KEYS = {"curve"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: "(b, MHz)" choices in the report tables: decisions, exact
_CHOICE = re.compile(r"\b\d+, \d+(?:\.\d+)?\b")


def differences(name: str, want: str, got: str) -> list[str]:
    """The differences beyond tolerance between the recorded output `want` and a fresh `got`
    of the golden file `name` (empty when they agree)."""
    if name.startswith(EXACT_FILES):
        return [] if want == got else [f"{name}: differs (compared exactly: no training in it)"]
    if name.endswith(".json"):
        return list(_json_differences(json.loads(want), json.loads(got), name))
    if name.endswith(".csv"):
        return list(_csv_differences(want, got, name))
    return list(_text_differences(want, got, name))


def _number_differs(want: float, got: float, key: str, scale: float = 0.0,
                    printed_unit: float = 0.0) -> bool:
    """Whether two numbers of training under `key` differ beyond tolerance; `scale` is the
    size of the numbers beside them (for a spread), `printed_unit` the last digit's unit of
    a rounded print."""
    if key in EXACT_KEYS:
        return want != got
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) != math.isnan(got)
    if key in METRIC_KEYS:
        allowed = METRIC_ABS
    elif key.endswith("std") and scale:
        allowed = DERIVED_REL * scale
    else:
        quotient = "ratio" in key or key == "quotient" or key.endswith("_pct")
        rel = 2 * DERIVED_REL if quotient else DERIVED_REL
        allowed = rel * max(abs(want), abs(got))
    return abs(want - got) > allowed + printed_unit + 1e-12


def _json_differences(want: object, got: object, where: str, key: str = "",
                      scale: float = 0.0) -> Iterator[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        if set(want) != set(got):
            yield f"{where}: keys {sorted(set(want) ^ set(got))} in one only"
        beside = max((abs(v) for k, v in want.items()
                      if _is_number(v) and not k.endswith("std")), default=0.0)
        for k in sorted(set(want) & set(got)):
            yield from _json_differences(want[k], got[k], f"{where}.{k}", k, beside)
    elif isinstance(want, list) and isinstance(got, list):
        slack = 1 if key in CURVE_KEYS else 0
        if abs(len(want) - len(got)) > slack:
            yield f"{where}: {len(want)} items recorded, {len(got)} now"
        for i, (w, g) in enumerate(zip(want, got, strict=False)):
            yield from _json_differences(w, g, f"{where}[{i}]", key)
    elif _is_number(want) and _is_number(got):
        assert isinstance(want, (int, float)) and isinstance(got, (int, float))
        whole = isinstance(want, int) and isinstance(got, int) and key not in TRAINING_COUNTS
        if (want != got) if whole else _number_differs(float(want), float(got), key, scale):
            yield f"{where}: {want!r} recorded, {got!r} now"
    elif isinstance(want, str) and isinstance(got, str):
        yield from _text_differences(want, got, where,
                                     whole_numbers_exact=key not in RESULT_TEXT_KEYS)
    elif want != got:
        yield f"{where}: {want!r} recorded, {got!r} now"


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _csv_differences(want: str, got: str, where: str) -> Iterator[str]:
    rows_want = list(csv.DictReader(io.StringIO(want)))
    rows_got = list(csv.DictReader(io.StringIO(got)))
    if len(rows_want) != len(rows_got):
        yield f"{where}: {len(rows_want)} rows recorded, {len(rows_got)} now"
    for i, (w, g) in enumerate(zip(rows_want, rows_got, strict=False)):
        if set(w) != set(g):
            yield f"{where} row {i}: columns differ"
            continue
        for column in w:
            a, b = w[column], g[column]
            if _NUMBER.fullmatch(a or "") and _NUMBER.fullmatch(b or ""):
                whole = "." not in a + b and column not in TRAINING_COUNTS
                if (a != b) if whole else _number_differs(float(a), float(b), column,
                                                          printed_unit=_unit(a)):
                    yield f"{where} row {i} {column}: {a} recorded, {b} now"
            elif a != b:
                yield f"{where} row {i} {column}: {a!r} recorded, {b!r} now"


def _text_differences(want: str, got: str, where: str,
                      whole_numbers_exact: bool = True) -> Iterator[str]:
    """Text with numbers in it (a report table): the words, hexadecimal identities, the
    "(b, MHz)" choices and (unless `whole_numbers_exact` is false) every whole number exact,
    the other numbers within the derived tolerance."""
    if _HEX.findall(want) != _HEX.findall(got):
        yield f"{where}: identities {_HEX.findall(want)} recorded, {_HEX.findall(got)} now"
    want, got = _HEX.sub("<hex>", want), _HEX.sub("<hex>", got)
    if _CHOICE.findall(want) != _CHOICE.findall(got):
        yield f"{where}: choices {_CHOICE.findall(want)} recorded, {_CHOICE.findall(got)} now"
    if _NUMBER.sub("#", want) != _NUMBER.sub("#", got):
        yield f"{where}: the text around its numbers differs"
        return
    numbers_want = list(_NUMBER.finditer(want))
    numbers_got = _NUMBER.findall(got)
    for i, (m, b) in enumerate(zip(numbers_want, numbers_got, strict=False)):
        a = m.group()
        if whole_numbers_exact and "." not in a + b:
            if a != b:
                yield f"{where}: {a} recorded, {b} now"
            continue
        after = want[m.end():m.end() + 2]
        before = want[max(0, m.start() - 3):m.start()]
        if before == " ± " and i:  # a spread, against the mean before it
            key, scale = "std", abs(float(numbers_want[i - 1].group()))
        else:
            key, scale = ("quotient" if after.startswith("x") else ""), 0.0
        if _number_differs(float(a), float(b), key, scale, _unit(a)):
            yield f"{where}: {a} recorded, {b} now"


def _unit(printed: str) -> float:
    """The unit of a printed number's last digit (0.01 for "3.14", 1 for "128")."""
    decimals = len(printed.split(".", 1)[1]) if "." in printed.split("e")[0] else 0
    return 10.0 ** -decimals
