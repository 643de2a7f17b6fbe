"""The server's SQLite store: models (weights as blobs), efficiency vectors, profiles, jobs.

Durability is the point of using SQLite here. Every connection runs in WAL mode with
`synchronous=FULL`, so a committed transaction is on disk before `COMMIT` returns, and the
server acknowledges a write only after that. A process killed mid-write leaves at most an
uncommitted tail in the WAL, which SQLite discards on the next open. Writes are serialised
by one lock (SQLite has one writer anyway; queueing in Python avoids busy-retry storms), reads
run concurrently on per-thread connections.

Payloads are stored byte for byte as uploaded, with their SHA-256, so what a client pulls is
exactly what was pushed and can be verified end to end.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.power_mode import power_mode_spellings
from wattcap.core.profile import ProfileTable
from wattcap.server.schemas import (
    EfficiencyInfo,
    EstimateRequest,
    JobInfo,
    JobStatus,
    ModelInfo,
    ProfileInfo,
)
from wattcap.server.validate import CheckedWeights

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    architecture TEXT NOT NULL,
    input_shape TEXT NOT NULL,
    task TEXT NOT NULL,
    num_classes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    weights BLOB NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (architecture, num_classes, sha256)
);
CREATE TABLE IF NOT EXISTS efficiency_vectors (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model TEXT NOT NULL,
    input_shape TEXT NOT NULL,
    task TEXT NOT NULL,
    dataset TEXT NOT NULL,
    target_accuracy REAL NOT NULL,
    model_id INTEGER REFERENCES models (id),
    sha256 TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS profiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    device TEXT NOT NULL,
    device_kind TEXT NOT NULL,
    power_mode TEXT,
    model TEXT NOT NULL,
    input_shape TEXT NOT NULL,
    mode TEXT NOT NULL,
    points INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    model_id INTEGER NOT NULL REFERENCES models (id),
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    progress TEXT NOT NULL,
    error TEXT,
    efficiency_id INTEGER REFERENCES efficiency_vectors (id),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS models_arch ON models (architecture);
CREATE INDEX IF NOT EXISTS efficiency_model ON efficiency_vectors (model, task);
CREATE INDEX IF NOT EXISTS profiles_device_model ON profiles (device, model);
"""

_MODEL_COLUMNS = ("id, architecture, input_shape, task, num_classes, sha256, size_bytes, "
                  "metadata, created_at")
_EFFICIENCY_COLUMNS = ("id, model, input_shape, task, dataset, target_accuracy, model_id, "
                       "sha256, created_at")
_PROFILE_COLUMNS = ("id, device, device_kind, power_mode, model, input_shape, mode, points, "
                    "sha256, created_at")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _shape(shape: list[int] | tuple[int, ...]) -> str:
    # One canonical spelling, so equality in SQL is equality of shapes.
    return json.dumps([int(d) for d in shape])


def _where(filters: dict[str, object]) -> tuple[str, list[object]]:
    """A WHERE clause from the filters that are set (None means: any)."""
    clauses, values = [], []
    for column, value in filters.items():
        if value is not None:
            clauses.append(f"{column} = ?")
            values.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), values


class Store:
    """SQLite store of the server; safe to use from many threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        with self._write_lock:
            # executescript runs each statement in autocommit mode: IF NOT EXISTS makes a
            # half-created schema (a kill here) complete itself on the next start.
            self._db.executescript(_SCHEMA)
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                       (str(SCHEMA_VERSION),))
        version = self._db.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        if int(version) != SCHEMA_VERSION:
            raise RuntimeError(f"{self.path}: database schema version {version}; this wattcap "
                               f"reads version {SCHEMA_VERSION}")

    # -- connections -------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; every write is an explicit
        # BEGIN IMMEDIATE ... COMMIT, so the commit point is exactly where we say.
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    @property
    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; committed (durably) when the block ends without error."""
        with self._write_lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def integrity_check(self) -> str:
        """SQLite's own check of the file: 'ok' when sound."""
        return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])

    # -- models ------------------------------------------------------------------------------
    def _insert_once(self, table: str, columns: str, key: dict[str, object],
                     values: dict[str, object]) -> tuple[sqlite3.Row, bool]:
        """In one transaction: the row matching `key` if it is stored already (a retried upload
        is harmless), else a new row of `key`, `values` and the time; (row, created). Table and
        column names come from this module, never from a request."""
        match = " AND ".join(f"{name} IS ?" for name in key)
        fields = key | values | {"created_at": _now()}
        with self._write() as db:
            row = db.execute(f"SELECT {columns} FROM {table} WHERE {match}",
                             tuple(key.values())).fetchone()
            if row is not None:
                return row, False
            cursor = db.execute(
                f"INSERT INTO {table} ({', '.join(fields)}) "
                f"VALUES ({', '.join('?' * len(fields))})", tuple(fields.values()))
            row = db.execute(f"SELECT {columns} FROM {table} WHERE id = ?",
                             (cursor.lastrowid,)).fetchone()
        return row, True

    def _body(self, table: str, item_id: int) -> tuple[str, str] | None:
        row = self._db.execute(f"SELECT body, sha256 FROM {table} WHERE id = ?",
                               (item_id,)).fetchone()
        return (row["body"], row["sha256"]) if row is not None else None

    @staticmethod
    def _model_info(row: sqlite3.Row) -> ModelInfo:
        return ModelInfo(
            id=row["id"], architecture=row["architecture"],
            input_shape=json.loads(row["input_shape"]), task=row["task"],
            num_classes=row["num_classes"], sha256=row["sha256"], size_bytes=row["size_bytes"],
            metadata=json.loads(row["metadata"]), created_at=row["created_at"],
        )

    def add_model(self, checked: CheckedWeights, data: bytes, sha256: str) -> tuple[ModelInfo,
                                                                                     bool]:
        """Store verified weights; (record, created). The same weights uploaded again for the
        same architecture return the existing record, so a retried upload is harmless."""
        row, created = self._insert_once("models", _MODEL_COLUMNS, key={
            "architecture": checked.architecture, "num_classes": checked.num_classes,
            "sha256": sha256,
        }, values={
            "input_shape": _shape(checked.input_shape), "task": checked.task,
            "size_bytes": len(data), "metadata": json.dumps(checked.metadata),
            "weights": sqlite3.Binary(data),
        })
        return self._model_info(row), created

    def list_models(self, architecture: str | None = None, task: str | None = None,
                    input_shape: list[int] | None = None, limit: int = 100) -> list[ModelInfo]:
        """Stored models matching the filters, newest first."""
        where, values = _where({
            "architecture": architecture, "task": task,
            "input_shape": _shape(input_shape) if input_shape is not None else None,
        })
        rows = self._db.execute(
            f"SELECT {_MODEL_COLUMNS} FROM models{where} ORDER BY id DESC LIMIT ?",
            (*values, limit),
        ).fetchall()
        return [self._model_info(r) for r in rows]

    def get_model(self, model_id: int) -> ModelInfo | None:
        """One model's record, or None."""
        row = self._db.execute(f"SELECT {_MODEL_COLUMNS} FROM models WHERE id = ?",
                               (model_id,)).fetchone()
        return self._model_info(row) if row is not None else None

    def get_weights(self, model_id: int) -> tuple[bytes, str] | None:
        """(safetensors bytes, SHA-256) of a model, or None."""
        row = self._db.execute("SELECT weights, sha256 FROM models WHERE id = ?",
                               (model_id,)).fetchone()
        return (bytes(row["weights"]), row["sha256"]) if row is not None else None

    # -- efficiency vectors ------------------------------------------------------------------
    @staticmethod
    def _efficiency_info(row: sqlite3.Row) -> EfficiencyInfo:
        return EfficiencyInfo(
            id=row["id"], model=row["model"], input_shape=json.loads(row["input_shape"]),
            task=row["task"], dataset=row["dataset"], target_accuracy=row["target_accuracy"],
            model_id=row["model_id"], sha256=row["sha256"], created_at=row["created_at"],
        )

    def add_efficiency(self, vector: EfficiencyVector, body: str, sha256: str,
                       model_id: int | None = None) -> tuple[EfficiencyInfo, bool]:
        """Store a validated efficiency vector; (record, created). Idempotent like models."""
        row, created = self._insert_once("efficiency_vectors", _EFFICIENCY_COLUMNS, key={
            "sha256": sha256, "model_id": model_id,
        }, values={
            "model": vector.model, "input_shape": _shape(vector.input_shape),
            "task": vector.task, "dataset": vector.dataset,
            "target_accuracy": vector.target_accuracy, "body": body,
        })
        return self._efficiency_info(row), created

    def list_efficiency(self, model: str | None = None, task: str | None = None,
                        dataset: str | None = None, input_shape: list[int] | None = None,
                        target_accuracy: float | None = None, model_id: int | None = None,
                        limit: int = 100) -> list[EfficiencyInfo]:
        """Stored efficiency vectors matching the filters, newest first."""
        where, values = _where({
            "model": model, "task": task, "dataset": dataset, "model_id": model_id,
            "target_accuracy": target_accuracy,
            "input_shape": _shape(input_shape) if input_shape is not None else None,
        })
        rows = self._db.execute(
            f"SELECT {_EFFICIENCY_COLUMNS} FROM efficiency_vectors{where} ORDER BY id DESC "
            "LIMIT ?", (*values, limit),
        ).fetchall()
        return [self._efficiency_info(r) for r in rows]

    def get_efficiency(self, efficiency_id: int) -> tuple[str, str] | None:
        """(JSON text as uploaded, SHA-256) of a vector, or None."""
        return self._body("efficiency_vectors", efficiency_id)

    # -- profiles ----------------------------------------------------------------------------
    @staticmethod
    def _profile_info(row: sqlite3.Row) -> ProfileInfo:
        return ProfileInfo(
            id=row["id"], device=row["device"], device_kind=row["device_kind"],
            power_mode=row["power_mode"], model=row["model"],
            input_shape=json.loads(row["input_shape"]), mode=row["mode"], points=row["points"],
            sha256=row["sha256"], created_at=row["created_at"],
        )

    def add_profile(self, profile: ProfileTable, body: str, sha256: str) -> tuple[ProfileInfo,
                                                                                bool]:
        """Store a validated profile; (record, created). Idempotent like models."""
        row, created = self._insert_once("profiles", _PROFILE_COLUMNS, key={
            "sha256": sha256,
        }, values={
            "device": profile.device, "device_kind": profile.device_kind,
            "power_mode": profile.power_mode, "model": profile.model,
            "input_shape": _shape(profile.input_shape), "mode": profile.mode,
            "points": len(profile.points), "body": body,
        })
        return self._profile_info(row), created

    def list_profiles(self, device: str | None = None, model: str | None = None,
                      input_shape: list[int] | None = None, power_mode: str | None = None,
                      device_kind: str | None = None, limit: int = 100) -> list[ProfileInfo]:
        """Stored profiles matching the filters, newest first; a power mode matches in any case
        and with or without nvpmodel.conf's MODE_ prefix (`power_mode_spellings`: a profile
        stored as "15W" is one of MODE_15W), or by its id ("2", as `nvpmodel -q` prints it)
        where the profile's own table of the board's modes gives that id its mode."""
        where, values = _where({
            "device": device, "model": model, "device_kind": device_kind,
            "input_shape": _shape(input_shape) if input_shape is not None else None,
        })
        if power_mode is not None:
            clause = "UPPER(power_mode) IN (?, ?)"
            values += list(power_mode_spellings(power_mode))
            if power_mode.strip().isdecimal():  # (isdigit takes "²", which int() refuses)
                # ids differ between boards: only the profile's own modes (schema 8) say
                clause = f"({clause} OR UPPER(json_extract(body, ?)) = UPPER(power_mode))"
                values.append(f'$.power_modes."{int(power_mode)}"')
            where += (" AND " if where else " WHERE ") + clause
        rows = self._db.execute(
            f"SELECT {_PROFILE_COLUMNS} FROM profiles{where} ORDER BY id DESC LIMIT ?",
            (*values, limit),
        ).fetchall()
        return [self._profile_info(r) for r in rows]

    def get_profile(self, profile_id: int) -> tuple[str, str] | None:
        """(JSON text as uploaded, SHA-256) of a profile, or None."""
        return self._body("profiles", profile_id)

    # -- jobs --------------------------------------------------------------------------------
    @staticmethod
    def _job_info(row: sqlite3.Row) -> JobInfo:
        return JobInfo(
            id=row["id"], kind=row["kind"], model_id=row["model_id"], status=row["status"],
            request=EstimateRequest.model_validate_json(row["request"]),
            progress=row["progress"], error=row["error"], efficiency_id=row["efficiency_id"],
            created_at=row["created_at"], updated_at=row["updated_at"],
        )

    def create_job(self, model_id: int, request: EstimateRequest) -> JobInfo:
        """A queued estimate job."""
        now = _now()
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO jobs (kind, model_id, request, status, progress, created_at, "
                "updated_at) VALUES ('estimate', ?, ?, 'queued', '', ?, ?)",
                (model_id, request.model_dump_json(), now, now),
            )
            job_id = cursor.lastrowid
        assert job_id is not None  # an INSERT always sets it
        job = self.get_job(job_id)
        assert job is not None
        return job

    def update_job(self, job_id: int, status: JobStatus | None = None,
                   progress: str | None = None, error: str | None = None,
                   efficiency_id: int | None = None) -> None:
        """Record a job's progress or outcome (fields left None are unchanged)."""
        sets: list[str] = ["updated_at = ?"]
        values: list[object] = [_now()]
        for column, value in (("status", status), ("progress", progress), ("error", error),
                              ("efficiency_id", efficiency_id)):
            if value is not None:
                sets.append(f"{column} = ?")
                values.append(value)
        with self._write() as db:
            db.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id = ?", (*values, job_id))

    def finish_estimate(self, job_id: int, vector: EfficiencyVector, model_id: int) -> int:
        """Store a job's efficiency vector and mark the job succeeded, in one transaction (a
        kill between the two can never leave a succeeded job without its vector)."""
        from wattcap.server.validate import sha256_hex

        body = vector.to_json()
        sha = sha256_hex(body.encode())
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO efficiency_vectors (model, input_shape, task, dataset, "
                "target_accuracy, model_id, sha256, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (vector.model, _shape(vector.input_shape), vector.task, vector.dataset,
                 vector.target_accuracy, model_id, sha, body, _now()),
            )
            assert cursor.lastrowid is not None  # an INSERT always sets it
            efficiency_id = cursor.lastrowid
            db.execute("UPDATE jobs SET status = 'succeeded', efficiency_id = ?, updated_at = ? "
                       "WHERE id = ?", (efficiency_id, _now(), job_id))
        return efficiency_id

    def get_job(self, job_id: int) -> JobInfo | None:
        """One job, or None."""
        row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return self._job_info(row) if row is not None else None

    def list_jobs(self, limit: int = 100) -> list[JobInfo]:
        """Jobs, newest first."""
        rows = self._db.execute("SELECT * FROM jobs ORDER BY id DESC LIMIT ?",
                                (limit,)).fetchall()
        return [self._job_info(r) for r in rows]

    def interrupt_unfinished_jobs(self) -> int:
        """At start-up: jobs a previous server process left queued or running will never
        finish; say so instead of leaving them 'running' forever."""
        with self._write() as db:
            cursor = db.execute(
                "UPDATE jobs SET status = 'interrupted', error = 'the server stopped before the "
                "job finished', updated_at = ? WHERE status IN ('queued', 'running')", (_now(),))
            return cursor.rowcount
