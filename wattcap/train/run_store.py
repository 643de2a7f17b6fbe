"""Recorded training runs, reused only by the identity of what produced them.

A sweep (a proxy estimate, the harness's target runs) trains many (batch size, seed) runs of
minutes each. Each finished run is kept as a RunRecord named by a digest of everything it
depends on — model and architecture, weights by content, data spec, options and files, and the
run's TrainConfig (`SweepInputs`) — so a sweep killed half-way resumes with its finished runs,
and identical runs are shared between `estimate`, `compare` and `sensitivity`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from wattcap.core.run import RunRecord, TrainConfig
from wattcap.core.schema import WattcapFileError


def file_stem(text: str) -> str:
    """``text`` usable in a file name: a path or a user model's spec is reduced to safe
    characters plus a short hash, so different texts never share a file."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[-60:]
    if safe == text:
        return text
    return f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def run_stem(dataset: str, data_options: dict | None) -> str:
    """File-name part of a dataset's runs: the spec, and a hash of non-default options (runs
    on a subset are not runs on the whole set)."""
    options = {k: v for k, v in (data_options or {}).items() if v is not None}
    if not options:
        return file_stem(dataset)
    digest = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode())
    return f"{file_stem(dataset)}-{digest.hexdigest()[:8]}"


def data_stamp(dataset: str) -> list[list[str]] | None:
    """A data set's files by content — each file's name and sha256, hashed once per (size,
    modification time) — or None for a bundled set or a name that is no data spec: a run
    recorded on other files is never reused."""
    from wattcap.core.cache import content_sha256
    from wattcap.data import parse_data_spec

    try:
        path = parse_data_spec(dataset).path
    except (KeyError, ValueError):
        return None
    if path is None or not path.exists():
        return None
    files = [p for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else [path]
    return [[str(p.relative_to(path)) if path.is_dir() else p.name, content_sha256(p)]
            for p in files]


@dataclass(frozen=True)
class SweepInputs:
    """What a recorded training run depends on besides its configuration: a run is reused
    only when all of it matches (model and its architecture, weights by content, data spec,
    options and files)."""

    model: str
    weights: Path | None
    dataset: str
    data_options: dict | None = None

    @cached_property
    def _inputs(self) -> dict:
        """Hashed and stat-ed once per sweep, not once per run."""
        from wattcap.models import model_identity
        from wattcap.models.weights import weights_content_sha256

        return {
            **model_identity(self.model),  # a user model by name, architecture and source
            # the weights by their tensors, not the file's bytes: the same tensors saved with
            # other metadata, or a header in another order, are the same weights
            "weights_sha256": None if self.weights is None
            else weights_content_sha256(self.weights),
            "dataset": self.dataset, "data_options": self.data_options or {},
            "data_files": data_stamp(self.dataset),
        }

    def identity(self, **settings: object) -> dict:
        """The inputs and `settings` (a run's TrainConfig, a sweep's seeds...) as plain data."""
        return {**self._inputs, **settings}

    def key(self, **settings: object) -> str:
        """A short digest of :meth:`identity`: part of the recorded file's name."""
        return _digest(self.identity(**settings))

    def earlier_key(self, **settings: object) -> str | None:
        """The key files were recorded under when weights were identified by the file's
        sha256 (None: no weights, the key has not changed): such records stay reusable."""
        if self._file_sha256 is None:
            return None
        return _digest({**self.identity(**settings), "weights_sha256": self._file_sha256})

    @cached_property
    def _file_sha256(self) -> str | None:
        from wattcap.models.weights import file_sha256

        return None if self.weights is None else file_sha256(self.weights)


def _digest(identity: dict) -> str:
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class RunStore:
    """A folder of recorded runs of one sweep's inputs; `shared` folders (the runs folder of
    the wattcap cache, where `estimate` keeps its runs) are read too, and a run found there is
    copied into `folder`."""

    folder: Path
    inputs: SweepInputs
    shared: tuple[Path, ...] = ()

    def path(self, config: TrainConfig) -> Path:
        """Where the run of `config` is recorded (named by its inputs' digest)."""
        return self._path(self.folder, self.inputs.key(config=config.identity_fields()), config)

    def _path(self, folder: Path, key: str, config: TrainConfig) -> Path:
        return (folder / f"math-{run_stem(self.inputs.dataset, self.inputs.data_options)}"
                f"-b{config.batch_size}-s{config.seed}-{key}.json")

    def _candidates(self, config: TrainConfig) -> list[Path]:
        """Where the run may be recorded: this folder first, then the shared ones, each under
        its key and under the key of an earlier wattcap (weights by the file's sha256)."""
        settings = {"config": config.identity_fields()}
        keys = [self.inputs.key(**settings), self.inputs.earlier_key(**settings)]
        folders = [self.folder, *(f for f in self.shared if f.resolve() != self.folder.resolve())]
        return [self._path(folder, key, config) for folder in folders for key in keys
                if key is not None]

    def recorded(self, config: TrainConfig) -> RunRecord | None:
        """The run of `config`, if one was recorded and is usable."""
        for path in self._candidates(config):
            if not path.exists():
                continue
            try:
                record = RunRecord.load(path)
            except WattcapFileError:
                continue  # a half-written or stale record: look further, else train again
            if record.config == config:
                if path != self.path(config):
                    self.save(config, record)  # kept here too, under today's key
                return record
        return None

    def save(self, config: TrainConfig, record: RunRecord) -> None:
        """Keep a finished run (atomically: a kill leaves it whole or absent)."""
        record.save(self.path(config))
