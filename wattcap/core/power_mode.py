"""Power modes by name or by nvpmodel id: how a mode given on the command line, stored in a
profile or read from a board is matched to a device's modes, and how one is labelled.

A Jetson's modes are numbered and named by its ``/etc/nvpmodel.conf`` (AGX Orin 64GB: 0 MAXN,
1 MODE_15W, 2 MODE_30W, 3 MODE_50W). A mode is given by its name, case-insensitively, or by its
id ("2"); the short name without nvpmodel.conf's ``MODE_`` prefix ("15W", what the emulated
AGX Orin called its modes before it took the real names, and what its profiles stored) names
the same mode, and the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping


def _short(name: str) -> str:
    """A mode name without case or nvpmodel.conf's MODE_ prefix: 'mode_15w' -> '15W'."""
    return name.strip().upper().removeprefix("MODE_")


def find_power_mode(wanted: str, modes: Mapping[int, str]) -> int | None:
    """The id of `wanted` among `modes` (id -> name): by its name, case-insensitively; by its
    id ("2"); else by the name without (or with) the MODE_ prefix ("15W" for MODE_15W).
    None where no mode, or more than one, matches."""
    text = wanted.strip()
    for mode_id, name in modes.items():
        if name.upper() == text.upper():
            return mode_id
    if text.isdigit() and int(text) in modes:
        return int(text)
    alike = [mode_id for mode_id, name in modes.items() if _short(name) == _short(text)]
    return alike[0] if len(alike) == 1 else None


def same_power_mode(first: str, second: str) -> bool:
    """Whether two mode names name one mode: equal but for case and the MODE_ prefix (a
    profile that stored "15W" was made in the mode now named MODE_15W)."""
    return _short(first) == _short(second)


def power_mode_spellings(name: str) -> tuple[str, str]:
    """The two spellings, in upper case, that name the mode `name` names: without and with
    the MODE_ prefix ('15W', 'MODE_15W'), for a lookup that cannot call `same_power_mode`."""
    short = _short(name)
    return short, f"MODE_{short}"


def power_mode_label(mode_id: int, modes: Mapping[int, str] | None = None) -> str:
    """A mode by id with its name where known: '2 (MODE_30W)', else '2'."""
    name = (modes or {}).get(mode_id)
    return f"{mode_id} ({name})" if name else str(mode_id)


def list_power_modes(modes: Mapping[int, str]) -> str:
    """Every mode by id and name, in id order: '0 (MAXN), 1 (MODE_15W)'; 'none' for none."""
    return ", ".join(power_mode_label(i, modes) for i in sorted(modes)) or "none"
