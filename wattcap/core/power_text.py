"""A power as a person writes it ('4.5', '4.5W', '250 W', '0.25kW', '500 mW', 'none'), read
the same way wherever a cap is written: on the command line, as `Session(cap="...")`, in a
schedule file or a polled cap file.

Units: W, kW and mW. Case does not matter where it cannot change the meaning ('w', 'kw',
'KW'); the m of mW must be lower case: 'MW' would be megawatts, which is no cap of a GPU, and is
refused rather than read as milliwatts. Whether 0 W is a cap is the caller's rule (`zero_ok`):
the command line refuses it (write 'none' for no cap), a cap source accepts it (a cap below
every configuration: training pauses).
"""

from __future__ import annotations

import math
import re

#: the units a power may carry, to watts (lower-cased, except the m of mW: see the module)
_UNITS_W = {"w": 1.0, "kw": 1e3, "mw": 1e-3}
#: a number, then maybe a unit ("4.5", "4.5W", "0.25 kW"); nan and inf to refuse them clearly
_POWER_TEXT = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
                         r"\s*([^\s\d.].*?)?\s*", re.IGNORECASE)
#: the words that mean "no cap"
NO_CAP_WORDS = ("none", "off", "null", "")


def parse_power_w(text: str, *, zero_ok: bool = False) -> float | None:
    """A power in watts from `text` ('4.5', '4.5W', '4.5 W', '250 W', '0.25kW', '500 mW');
    'none', 'off', 'null' or nothing is None. ValueError, saying what is wrong, on anything
    else: a unit of something else, 'MW', a power that is negative, not finite, or 0 unless
    `zero_ok`."""
    if text.strip().lower() in NO_CAP_WORDS:
        return None
    match = _POWER_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("must be a power in watts (e.g. 4.5, 4.5W, 0.25kW) or 'none'")
    number, unit = match.groups()
    if unit is not None and unit.startswith("M") and unit.lower() == "mw":
        raise ValueError(f"{unit!r} would be megawatts; write mW for milliwatts")
    if unit is not None and unit.lower() not in _UNITS_W:
        raise ValueError(f"{unit!r} is not a unit of power (W, kW or mW)")
    power_w = float(number) * _UNITS_W[(unit or "W").lower()]
    # `not >` also refuses nan, which compares false with every power
    if not math.isfinite(power_w) or not (power_w >= 0 if zero_ok else power_w > 0):
        raise ValueError("must be watts, a finite number ≥ 0, or 'none'" if zero_ok
                         else "must be a positive, finite power in watts or 'none'")
    return power_w
