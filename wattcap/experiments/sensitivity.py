"""The sensitivity matrix: how much wattcap's choice loses against the fastest configuration
for every pairing of a proxy with a target, from a profile and efficiency vectors alone
(`wattcap sensitivity`)."""

from __future__ import annotations

from wattcap.algorithms.planner import plan
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.plan import InfeasibleCapError
from wattcap.core.profile import ProfileTable

__all__ = ["sensitivity_matrix"]


def sensitivity_matrix(
    profile: ProfileTable,
    references: list[ProfileTable],
    proxy_vectors: dict[str, EfficiencyVector],
    target_vectors: dict[str, EfficiencyVector],
    caps_w: list[float | None],
) -> dict[str, list[list[float | None]]]:
    """Per cap, the proxies × targets matrix of wattcap's % time increase over the fastest
    configuration; times are T(b, f) from the profile × samples-to-target measured on the
    target (exact on the emulator, where time does not depend on the values computed)."""
    matrices: dict[str, list[list[float | None]]] = {}
    for cap in caps_w:
        rows = []
        for proxy_vector in proxy_vectors.values():
            row: list[float | None] = []
            for target_vector in target_vectors.values():
                try:
                    result = plan(profile, cap, efficiency=proxy_vector,
                                  reference_profiles=references, target_efficiency=target_vector)
                except InfeasibleCapError:
                    row.append(None)
                    continue
                ours, best = result.choices["wattcap"], result.choices.get("fastest")
                ours_samples = target_vector.samples(ours.batch_size)
                if best is None or ours_samples is None or best.predicted_time_s is None:
                    row.append(None)
                    continue
                ours_time = ours.seconds_per_sample * ours_samples
                row.append(100.0 * (ours_time / best.predicted_time_s - 1.0))
            rows.append(row)
        matrices["none" if cap is None else f"{cap:g}"] = rows
    return matrices
