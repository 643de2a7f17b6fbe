"""Versioned JSON files: every file wattcap writes carries a kind, a schema version and the
metadata needed to refuse a mismatch. Loading never trusts the file: corrupt JSON, another
kind, another schema version, or a payload that fails validation is a `WattcapFileError` that
names the file and says what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from wattcap.core.errors import WattcapError
from wattcap.core.files import write_file
from wattcap.core.version import __version__


class WattcapFileError(WattcapError, ValueError):
    """A wattcap file is missing, corrupt, of another kind or version, or does not match."""


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


#: the command that writes each kind of file (what to run where one is damaged or missing)
_WRITTEN_BY = {"wattcap.profile": "wattcap profile", "wattcap.efficiency": "wattcap estimate",
               "wattcap.comparison": "wattcap compare", "wattcap.plan": "wattcap plan --out",
               "wattcap.run": "wattcap train", "wattcap.fleet-run": "wattcap fleet simulate"}


def _write_again_hint(kind: str) -> str | None:
    command = _WRITTEN_BY.get(kind)
    return None if command is None else f"write it again with `{command}`"


#: turns the raw JSON object of one schema version into the next version's (in place or new)
Migration = Callable[[dict[str, Any]], dict[str, Any]]


def rename_key(items: Any, old: str, new: str) -> None:
    """In a migration: the key `old` of every JSON object among `items` renamed `new`."""
    for item in items or []:
        if isinstance(item, dict) and old in item:
            item[new] = item.pop(old)


class VersionedFile(BaseModel):
    """Base of every file format. Subclasses set FILE_KIND and SCHEMA_VERSION, and
    MIGRATIONS where files of earlier versions exist: MIGRATIONS[v] turns a version-v object
    into a version-(v+1) one, so that a file of any earlier version loads (hours of device
    time are never thrown away for a format change)."""

    model_config = ConfigDict(extra="forbid")

    FILE_KIND: ClassVar[str] = "wattcap.file"
    SCHEMA_VERSION: ClassVar[int] = 1
    MIGRATIONS: ClassVar[dict[int, Migration]] = {}
    #: the schema version the file was read in, when it was migrated on load
    _migrated_from: int | None = PrivateAttr(default=None)

    kind: str = ""
    schema_version: int = 0
    tool_version: str = __version__
    created_at: str = Field(default_factory=_now_iso)

    def model_post_init(self, __context: Any) -> None:
        if not self.kind:
            self.kind = self.FILE_KIND
        if not self.schema_version:
            self.schema_version = self.SCHEMA_VERSION

    @property
    def migrated_from(self) -> int | None:
        """The earlier schema version this object was migrated from on load (None: none)."""
        return self._migrated_from

    def to_json(self) -> str:
        """The file's text."""
        return self.model_dump_json(indent=2)

    def save(self, path: str | Path) -> Path:
        """Write atomically and durably, as the user's file (see `wattcap.core.files`): an
        interrupted write never leaves half a file where a good one was."""
        return write_file(path, self.to_json())

    @classmethod
    def from_json(cls: type[_F], text: str, source: str = "<text>") -> _F:
        """Parse and validate, refusing other kinds and schema versions with a clear message."""
        hint = _write_again_hint(cls.FILE_KIND)
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise WattcapFileError(
                f"{source}: not valid JSON ({err}): the file is cut short or damaged",
                hint=hint) from None
        if not isinstance(raw, dict):
            raise WattcapFileError(f"{source}: expected a JSON object, found "
                                   f"{type(raw).__name__}", hint=hint)
        kind = raw.get("kind")
        if kind != cls.FILE_KIND:
            found = "has no \"kind\": not a wattcap file" if kind is None else \
                f"is a {kind!r} file"
            raise WattcapFileError(f"{source}: this {found}, expected {cls.FILE_KIND!r}",
                                   hint=hint)
        found_version = raw.get("schema_version")
        raw = cls._migrated(raw, source)
        try:
            loaded = cls.model_validate(raw)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5]
            )
            raise WattcapFileError(f"{source}: invalid {cls.FILE_KIND} file: {problems}") from None
        if found_version != cls.SCHEMA_VERSION:
            loaded._migrated_from = int(found_version)  # type: ignore[arg-type]  # _migrated checked it
        return loaded

    @classmethod
    def _migrated(cls, raw: dict[str, Any], source: str) -> dict[str, Any]:
        """`raw` in this version: as it is, or through every migration from its version; a
        newer version or one with no migration path is refused, naming the versions."""
        version = raw.get("schema_version")
        if version == cls.SCHEMA_VERSION:
            return raw
        if isinstance(version, int) and not isinstance(version, bool):
            if version > cls.SCHEMA_VERSION:
                raise WattcapFileError(
                    f"{source}: written by a newer wattcap (schema version {version}); this "
                    f"wattcap ({__version__}) reads {cls.FILE_KIND} files up to version "
                    f"{cls.SCHEMA_VERSION}. Upgrade wattcap to read it."
                )
            if all(v in cls.MIGRATIONS for v in range(version, cls.SCHEMA_VERSION)):
                for step in range(version, cls.SCHEMA_VERSION):
                    raw = cls.MIGRATIONS[step](dict(raw))
                    raw["schema_version"] = step + 1
                return raw
        raise WattcapFileError(
            f"{source}: schema version {version!r}; this wattcap ({__version__}) reads "
            f"version {cls.SCHEMA_VERSION} and has no migration from it. Re-create the file "
            "with this version."
        )

    @classmethod
    def load(cls: type[_F], path: str | Path) -> _F:
        """Read a file written by `save`."""
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise WattcapFileError(f"{path}: no such file") from None
        except UnicodeDecodeError:
            raise WattcapFileError(f"{path}: not a text file (corrupt?)") from None
        return cls.from_json(text, source=str(path))


_F = TypeVar("_F", bound=VersionedFile)


def require_match(what: str, field: str, expected: object, found: object, source: str,
                  other_architecture: bool = False, instead: str | None = None) -> None:
    """Refuse a file made for another device, model or input shape (`other_architecture`:
    the architecture fingerprints are known and differ, so a model of another name is not the
    same model under another name; `instead`: the other fix, said after re-creating it, e.g.
    "pass --device emulated:jetson-agx-orin" for a profile of an emulated device)."""
    if expected != found:
        hint = None
        again = (f"Re-create it for {expected!r}." if instead is None
                 else f"Re-create it for {expected!r}, or {instead}.")
        if field == "model" and not other_architecture:
            # a Session over the user's own nn.Module names it by model_name (or its class);
            # a file from the command line names it as --model was given there
            hint = (f"in Python, where it is the same model, give the Session "
                    f"model_name={found!r} (the name the file was made with; its architecture "
                    "fingerprint is still checked)")
        elif field == "architecture fingerprint":
            again = ("The model's layers or their shapes differ (another model, or another "
                     "number of classes): make the file again with the model as it is trained.")
        raise WattcapFileError(
            f"{source}: {what} was made for {field} {found!r}, but it is used with "
            f"{field} {expected!r}. {again}", hint=hint)
