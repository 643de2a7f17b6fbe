"""Caps from an energy budget: a battery drained by training and refilled by a charger
(`BatteryCap`, with its voltage curve), and a solar panel under a clear-sky model with clouds
(`SolarCap`)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from wattcap.devices.cap_source import (
    CapSource,
    CapSourceError,
)


# -- battery ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatteryCurve:
    """How a Li-ion pack's deliverable power falls as it empties.

    The discharge power capability is the HPPC formula of the USABC/FreedomCAR battery test
    manuals (INL, DOE/ID-11069): P = V_min · (OCV(soc) − V_min) / R(soc), the power at which
    the terminal voltage sags to the minimum allowed voltage. Relative to a full pack:

        P(soc) / P(1) = [(OCV(soc) − V_min) / (OCV(1) − V_min)] · [R(1) / R(soc)]
        R(soc) / R(1) = 1 + resistance_rise · (1 − soc) ** resistance_exponent

    so P falls slowly on the OCV plateau, then steeply near empty, and is 0 at soc = 0 where
    the open-circuit voltage reaches the cutoff. Per-cell values (a pack of n cells in series
    scales OCV, V_min and R by n, which cancels in the ratio).
    """

    #: modelling estimate: the shape of typical NMC/graphite cell OCV-SoC curves (4.2 V full,
    #: a plateau around 3.6-3.8 V, a steep knee below ~10 %); not a specific cell's datasheet
    ocv_soc: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    ocv_v: tuple[float, ...] = (3.0, 3.3, 3.45, 3.55, 3.62, 3.68, 3.74, 3.82, 3.9, 3.98, 4.07,
                                4.2)
    #: modelling estimate: a conservative BMS cutoff per cell (cell datasheets allow 2.5-3.0 V)
    cutoff_v: float = 3.0
    #: modelling estimate: internal resistance about doubles from full to empty, rising
    #: mostly below ~30 % charge, as HPPC resistance measurements of Li-ion cells show in shape
    resistance_rise: float = 1.0
    resistance_exponent: float = 3.0

    def relative_power(self, soc: float) -> float:
        """P(soc) / P(full), in [0, 1], non-decreasing in soc."""
        soc = min(max(soc, 0.0), 1.0)
        ocv = float(np.interp(soc, self.ocv_soc, self.ocv_v))
        headroom = max(ocv - self.cutoff_v, 0.0) / (self.ocv_v[-1] - self.cutoff_v)
        resistance = 1.0 + self.resistance_rise * (1.0 - soc) ** self.resistance_exponent
        return headroom / resistance


class BatteryCap(CapSource):
    """A battery feeding the device: the cap is its maximum discharge power, which falls as it
    empties (`BatteryCurve`); the charge is drained by the energy the device draws, told with
    `record_energy`. A simulation for the emulated device (on real hardware the charge would be
    read from the fuel gauge instead).

    `max_power_w` is the power the pack can deliver to the device when full (after the
    converter); `converter_efficiency` (modelling estimate 0.9, a typical buck converter at
    these loads) makes the pack lose energy_j / efficiency for energy_j delivered.
    """

    def __init__(
        self,
        capacity_wh: float,
        max_power_w: float,
        state_of_charge: float = 1.0,
        converter_efficiency: float = 0.9,
        curve: BatteryCurve | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("capacity_wh", capacity_wh), ("max_power_w", max_power_w)):
            if not (math.isfinite(value) and value > 0):
                raise CapSourceError(f"battery: {name} must be > 0, got {value}")
        if not 0.0 <= state_of_charge <= 1.0:
            raise CapSourceError(
                f"battery: state_of_charge must be in [0, 1], got {state_of_charge}"
            )
        if not 0.0 < converter_efficiency <= 1.0:
            raise CapSourceError(
                f"battery: converter_efficiency must be in (0, 1], got {converter_efficiency}"
            )
        self.capacity_wh = float(capacity_wh)
        self.max_power_w = float(max_power_w)
        self.converter_efficiency = float(converter_efficiency)
        self.curve = curve or BatteryCurve()
        self.initial_state_of_charge = float(state_of_charge)
        self.drawn_j = 0.0  # from the pack, converter losses included
        #: (power, state of charge where the pack's power falls to it), the last asked for
        self._floor_soc: tuple[float, float] | None = None

    @property
    def state_of_charge(self) -> float:
        """Remaining charge as a share of capacity, in [0, 1]."""
        used = self.drawn_j / (self.capacity_wh * 3600.0)
        return max(self.initial_state_of_charge - used, 0.0)

    @property
    def empty(self) -> bool:
        """No charge left: the cap is 0 W."""
        return self.state_of_charge <= 0.0

    def power_at_w(self, state_of_charge: float) -> float:
        """Maximum power delivered to the device at a state of charge."""
        return self.max_power_w * self.curve.relative_power(state_of_charge)

    def state_of_charge_at(self, power_w: float) -> float:
        """The lowest state of charge at which the pack still delivers `power_w` (its
        `BatteryCurve` inverted by bisection, to 1e-9); 1.0 when even a full pack cannot."""
        if power_w <= 0:
            return 0.0
        if self.power_at_w(1.0) < power_w:
            return 1.0
        low, high = 0.0, 1.0
        while high - low > 1e-9:
            middle = (low + high) / 2
            if self.power_at_w(middle) >= power_w:
                high = middle
            else:
                low = middle
        return high

    def energy_left_j(self, above_w: float = 0.0) -> float | None:
        """The energy the pack can still deliver to the device (after the converter) while its
        power stays at or above `above_w`: the charge between now and the state of charge
        where its deliverable power falls to `above_w`."""
        if self._floor_soc is None or self._floor_soc[0] != above_w:
            self._floor_soc = (above_w, self.state_of_charge_at(above_w))
        usable = max(self.state_of_charge - self._floor_soc[1], 0.0)
        return usable * self.capacity_wh * 3600.0 * self.converter_efficiency

    def cap_w(self, now_s: float) -> float:
        return self.power_at_w(self.state_of_charge)

    def record_energy(self, energy_j: float, now_s: float) -> None:
        if not (math.isfinite(energy_j) and energy_j >= 0):
            raise CapSourceError(f"battery: energy drawn must be ≥ 0 J, got {energy_j}")
        self.drawn_j += energy_j / self.converter_efficiency

    def may_exceed(self, watts: float, now_s: float) -> bool:
        # the model has no charging: the cap only falls from here
        return self.cap_w(now_s) > watts

    def describe(self) -> str:
        return (f"battery {self.capacity_wh:g} Wh, {100 * self.state_of_charge:.0f} % charged, "
                f"{self.max_power_w:g} W when full")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "drawn_j": self.drawn_j}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.drawn_j = float(state.get("drawn_j", self.drawn_j))


# -- solar --------------------------------------------------------------------------------------
#: Haurwitz (1945) clear-sky global horizontal irradiance, GHI = A · cos z · exp(−B / cos z)
#: W/m² (as in pvlib.clearsky.haurwitz)
HAURWITZ_A_W_M2 = 1098.0
HAURWITZ_B = 0.057


def clear_sky_ghi_w_m2(cos_zenith: float) -> float:
    """Haurwitz clear-sky irradiance on a horizontal surface; 0 with the sun below the
    horizon."""
    if cos_zenith <= 0:
        return 0.0
    return HAURWITZ_A_W_M2 * cos_zenith * math.exp(-HAURWITZ_B / cos_zenith)


class SolarCap(CapSource):
    """A solar panel feeding the device: cap = irradiance · area · efficiency − base load,
    never below 0. A modelling estimate for the emulated device, seeded and reproducible.

    * Day: daylight lasts `day_length_s` device seconds (compress a 12 h day into minutes for
      an emulated run), then night for `night_length_s`, repeating. `start_fraction` is where in
      the daylight the run starts (0 sunrise, 0.5 noon). The sun's path is approximated by
      cos z(t) = cos_zenith_noon · sin(π · x), x the elapsed share of daylight (modelling
      estimate; cos_zenith_noon 0.9 ≈ a noon sun 26° from zenith).
    * Clear sky: Haurwitz's model (above), ≈ 930 W/m² at that noon.
    * Clouds: an alternating renewal process — clear and cloudy spells of exponential length
      (cloudy spells average `mean_cloud_s`, clear ones chosen so that `cloud_fraction` of the
      time is cloudy), each cloud passing a uniform share `cloud_transmittance` of the light
      (modelling estimate: clear-sky indices under broken cloud are commonly 0.2-0.7).
    * Panel: `panel_efficiency` 0.2 (modelling estimate: typical monocrystalline-silicon module
      at standard test conditions, 19-22 %), `panel_area_m2` 0.06 (≈ a 12 W panel), horizontal;
      `base_load_w` 1.0 W for the rest of the system (modelling estimate).
    """

    def __init__(
        self,
        seed: int = 0,
        panel_area_m2: float = 0.06,
        panel_efficiency: float = 0.2,
        base_load_w: float = 1.0,
        day_length_s: float = 12 * 3600.0,
        night_length_s: float | None = None,
        start_fraction: float = 0.25,
        cos_zenith_noon: float = 0.9,
        cloud_fraction: float = 0.3,
        mean_cloud_s: float | None = None,
        cloud_transmittance: tuple[float, float] = (0.2, 0.7),
    ) -> None:
        super().__init__()
        checks = (
            ("panel_area_m2", panel_area_m2, panel_area_m2 > 0),
            ("panel_efficiency", panel_efficiency, 0 < panel_efficiency <= 1),
            ("base_load_w", base_load_w, base_load_w >= 0),
            ("day_length_s", day_length_s, day_length_s > 0),
            ("start_fraction", start_fraction, 0 <= start_fraction <= 1),
            ("cos_zenith_noon", cos_zenith_noon, 0 < cos_zenith_noon <= 1),
            ("cloud_fraction", cloud_fraction, 0 <= cloud_fraction < 1),
        )
        for name, value, ok in checks:
            if not (math.isfinite(value) and ok):
                raise CapSourceError(f"solar: {name} out of range: {value}")
        low, high = cloud_transmittance
        if not 0 <= low <= high <= 1:
            raise CapSourceError(
                f"solar: cloud_transmittance must be 0 ≤ low ≤ high ≤ 1, got {cloud_transmittance}"
            )
        self.seed = seed
        self.panel_area_m2 = panel_area_m2
        self.panel_efficiency = panel_efficiency
        self.base_load_w = base_load_w
        self.day_length_s = day_length_s
        self.night_length_s = day_length_s if night_length_s is None else night_length_s
        self.start_fraction = start_fraction
        self.cos_zenith_noon = cos_zenith_noon
        self.cloud_fraction = cloud_fraction
        self.mean_cloud_s = day_length_s / 48 if mean_cloud_s is None else mean_cloud_s
        if not self.mean_cloud_s > 0 or self.night_length_s < 0:
            raise CapSourceError("solar: mean_cloud_s must be > 0 and night_length_s ≥ 0")
        self.cloud_transmittance = (low, high)
        # Cloud spells, drawn lazily in time order from one generator: the same seed gives the
        # same sky whatever order or cadence the trace is queried in.
        self._rng = np.random.default_rng(seed)
        self._spell_ends_s: list[float] = []
        self._spell_transmittance: list[float] = []
        self._cloudy = cloud_fraction > 0 and bool(self._rng.random() < cloud_fraction)

    def _extend_spells(self, until_s: float) -> None:
        if self.cloud_fraction == 0:
            return
        mean_clear_s = self.mean_cloud_s * (1 - self.cloud_fraction) / self.cloud_fraction
        end_s = self._spell_ends_s[-1] if self._spell_ends_s else 0.0
        while end_s <= until_s:
            if self._cloudy:
                end_s += float(self._rng.exponential(self.mean_cloud_s))
                transmittance = float(self._rng.uniform(*self.cloud_transmittance))
            else:
                end_s += float(self._rng.exponential(mean_clear_s))
                transmittance = 1.0
            self._spell_ends_s.append(end_s)
            self._spell_transmittance.append(transmittance)
            self._cloudy = not self._cloudy

    def cloud_factor(self, now_s: float) -> float:
        """Share of clear-sky light reaching the panel at `now_s` (1: no cloud)."""
        if self.cloud_fraction == 0:
            return 1.0
        self._extend_spells(now_s)
        index = bisect.bisect_right(self._spell_ends_s, now_s)
        return self._spell_transmittance[index]

    def cos_zenith(self, now_s: float) -> float:
        """cos z of the sun at `now_s` (≤ 0 at night)."""
        period_s = self.day_length_s + self.night_length_s
        since_sunrise_s = (self.start_fraction * self.day_length_s + now_s) % period_s
        if since_sunrise_s >= self.day_length_s:
            return 0.0
        return self.cos_zenith_noon * math.sin(math.pi * since_sunrise_s / self.day_length_s)

    def panel_power_w(self, now_s: float) -> float:
        """Electrical power of the panel at `now_s`, clouds included."""
        ghi = clear_sky_ghi_w_m2(self.cos_zenith(now_s))
        return ghi * self.cloud_factor(now_s) * self.panel_area_m2 * self.panel_efficiency

    def cap_w(self, now_s: float) -> float:
        if now_s < 0:
            raise CapSourceError(f"solar: device time must be ≥ 0 s, got {now_s}")
        return max(self.panel_power_w(now_s) - self.base_load_w, 0.0)

    def may_exceed(self, watts: float, now_s: float) -> bool:
        # tomorrow's clear noon is the most the panel ever gives
        noon_w = clear_sky_ghi_w_m2(self.cos_zenith_noon) * self.panel_area_m2 \
            * self.panel_efficiency
        return noon_w - self.base_load_w > watts

    def describe(self) -> str:
        return (f"solar seed {self.seed}: {self.panel_area_m2:g} m² at "
                f"{100 * self.panel_efficiency:.0f} %, {self.day_length_s:g} s daylight, "
                f"{100 * self.cloud_fraction:.0f} % cloud, {self.base_load_w:g} W base load")
