"""A fleet is a file: the clients of a federated run, each with its device,
its power cap, its data shard, its link and (optionally) its measured profile.

    kind: wattcap.fleet
    schema_version: 2
    model: digits32-cnn
    efficiency: efficiency-proxy.json      # the proxy's r_b (wattcap estimate)
    samples_per_round: 2048
    target_accuracy: 0.8                   # the global model's, on the dataset's test split
    max_rounds: 40                         # a federation that has not reached it stops here
    deadline_slack: 0.25                   # a round closes at its planned time x 1.25
    split: equal                           # or by-speed (alike data only)
    clients_may_sit_out: false             # by-speed only: may a slow-link client sit out?
    clients:
      - name: cam-1
        device: emulated:jetson-nano       # or trace:MANIFEST, or "jetson", "nvml:0" with a profile
        power_cap: 4.5                     # W, a cap source ("solar:seed=3", "battery:...",
                                           # "schedule:FILE"), or null: no cap
        data: {dataset: digits-5-9-32, labels: [5, 6], fraction: 0.5}
        link: {bandwidth_mbps: 10, latency_s: 0.05, energy_j_per_mb: 0.1}
        profile: profiles/cam-1.json       # optional: else profiled on first use (emulated)
        dropout: 0.1                       # chance of dropping out of a round (simulation)

A cap source is read at each round's start (the fleet's elapsed time) and the client
re-planned; schema 1 files (no federation fields) load with the defaults.

JSON works as well as YAML (YAML needs PyYAML). Paths are read relative to the fleet file.
Device names, shards and caps that cannot work are refused when the fleet is checked
(`wattcap.experiments.fleet.check_fleet`), one line each naming the client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from wattcap.core.schema import VersionedFile, WattcapFileError


class DataShard(BaseModel):
    """A client's data: part of a bundled task (or a data spec), non-IID by label if asked."""

    model_config = ConfigDict(extra="forbid")
    dataset: str
    #: only these labels (a non-IID shard); None: every label
    labels: list[int] | None = None
    #: the share of the (label-filtered) training split this client holds
    fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = 0


class LinkSpec(BaseModel):
    """A client's link to the server: the model goes down and its update up every round."""

    model_config = ConfigDict(extra="forbid")
    bandwidth_mbps: float = Field(gt=0.0)
    latency_s: float = Field(default=0.0, ge=0.0)
    energy_j_per_mb: float = Field(default=0.0, ge=0.0)

    def round_trip_s(self, payload_bytes: int) -> float:
        """Seconds to receive the model and send the update back (two transfers)."""
        return 2 * (self.latency_s + payload_bytes * 8 / (self.bandwidth_mbps * 1e6))

    def round_trip_j(self, payload_bytes: int) -> float:
        """Joules the two transfers cost."""
        return 2 * self.energy_j_per_mb * payload_bytes / 1e6


class FleetClientSpec(BaseModel):
    """One client of the fleet file."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    device: str
    #: the cap in W, a cap source (`wattcap.devices.caps.parse_cap_source`), or None: no cap
    power_cap: float | str | None = None
    data: DataShard
    link: LinkSpec
    profile: str | None = None
    #: the chance that the client drops out of a round (a simulated failure: its update never
    #: arrives), drawn per round from the federation's seed
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)


class FleetFile(VersionedFile):
    """The fleet (see the module docstring)."""

    FILE_KIND = "wattcap.fleet"
    SCHEMA_VERSION = 2
    #: 1 -> 2 added the federation's fields and dropout, all with defaults
    MIGRATIONS = {1: lambda raw: raw}

    model: str
    #: the proxy's efficiency vector (a path relative to the fleet file)
    efficiency: str
    samples_per_round: int = Field(gt=0)
    #: the global model's accuracy that ends a federation (None: the efficiency vector's)
    target_accuracy: float | None = Field(default=None, gt=0.0, le=1.0)
    max_rounds: int = Field(default=40, gt=0)
    #: a round closes at its planned time x (1 + slack): later updates are left out
    deadline_slack: float = Field(default=0.25, ge=0.0)
    #: how the fleet plan may split a round's samples: "equal" (every client's data weighs the
    #: same each round) or "by-speed" (faster clients train more: right where the clients hold
    #: alike data; with shards of different labels it starves the slow clients' labels)
    split: Literal["equal", "by-speed"] = "equal"
    #: with split "by-speed": a client whose link alone outlasts the rounds may sit them out
    clients_may_sit_out: bool = False
    #: the FedZero-style baseline's forecast of each cap source: exact (0) or off by this
    #: relative standard deviation, drawn per client and round from the federation's seed
    forecast_error: float = Field(default=0.0, ge=0.0)
    clients: list[FleetClientSpec] = Field(min_length=1)

    @classmethod
    def load(cls, path: str | Path) -> FleetFile:
        """Read a fleet from YAML (.yaml, .yml: needs PyYAML) or JSON; a malformed file is one
        WattcapFileError naming it."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as err:
            raise WattcapFileError(f"{path}: cannot read the fleet file ({err.strerror})") \
                from None
        if path.suffix.lower() in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise WattcapFileError(f"{path}: reading YAML needs PyYAML (pip install "
                                       "pyyaml), or write the fleet as JSON") from None
            try:
                raw = yaml.safe_load(text)
            except yaml.YAMLError as err:
                raise WattcapFileError(f"{path}: not valid YAML ({err})") from None
            text = json.dumps(raw)
        return cls.from_json(text, source=str(path))


__all__ = ["DataShard", "FleetClientSpec", "FleetFile", "LinkSpec"]
