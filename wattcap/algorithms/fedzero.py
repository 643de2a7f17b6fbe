"""A FedZero-style client selection (a baseline for the fleet plan; built from the description
of FedZero, e-Energy 2024, not from its code): every round, choose which clients train from a
forecast of the energy each has available over the round, with fairness, and run each chosen
client at fixed settings (here: its largest batch at its safe clock, the uniform plan's).

Selection, per round: clients whose forecast energy over the round is too small for their
share of the round's work are not eligible; the `fraction` of the fleet (at least one client)
is chosen from the rest by forecast energy, first among those that took part in at most
`max_share` of the past rounds (fairness), then, to fill the round, among the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: the share of the fleet chosen each round
DEFAULT_FRACTION = 0.5
#: a client that took part in more than this share of past rounds waits (fairness)
DEFAULT_MAX_SHARE = 0.75


def select_clients(candidates: Sequence[str], energy_j: Mapping[str, float],
                   needed_j: Mapping[str, float], participated: Mapping[str, int],
                   rounds_so_far: int, fraction: float = DEFAULT_FRACTION,
                   max_share: float = DEFAULT_MAX_SHARE) -> list[str]:
    """The clients of this round (see the module docstring), most forecast energy first.
    `energy_j`: each candidate's forecast energy over the round (inf: no cap); `needed_j`: what
    its share of the round costs at its fixed settings."""
    if not 0 < fraction <= 1 or not 0 < max_share <= 1:
        raise ValueError("fraction and max_share must lie in (0, 1]")
    eligible = [c for c in candidates if energy_j[c] >= needed_j[c]]

    def fair(client: str) -> bool:
        return rounds_so_far == 0 or participated.get(client, 0) / rounds_so_far <= max_share

    count = max(1, math.ceil(fraction * len(candidates)))
    return sorted(eligible, key=lambda c: (not fair(c), -energy_j[c], c))[:count]


__all__ = ["DEFAULT_FRACTION", "DEFAULT_MAX_SHARE", "select_clients"]
