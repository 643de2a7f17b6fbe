"""`wattcap migrate FILE`: rewrite a profile or efficiency vector of an earlier schema version
in the current one. Loading already migrates in memory (`VersionedFile.MIGRATIONS`); this
makes it permanent, keeping the original beside it, so that nothing is lost."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.files import write_file
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import VersionedFile, WattcapFileError

#: the formats with files of earlier versions in users' hands (hours of device time each)
MIGRATABLE: dict[str, type[VersionedFile]] = {
    cls.FILE_KIND: cls for cls in (ProfileTable, EfficiencyVector)
}


@dataclass(frozen=True)
class MigrationResult:
    """What `migrate_file` did."""

    path: Path
    kind: str
    from_version: int
    to_version: int
    #: the original file, kept (None: nothing was rewritten)
    backup: Path | None


def migrate_file(path: str | Path) -> MigrationResult:
    """Rewrite `path` in the current schema version of its kind; the original is kept as
    ``<name>.schema-v<N>.json`` beside it. A file already current is left alone."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise WattcapFileError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise WattcapFileError(f"{path}: not a JSON file (corrupt?)") from None
    kind = raw.get("kind") if isinstance(raw, dict) else None
    cls = MIGRATABLE.get(str(kind))
    if cls is None:
        raise WattcapFileError(
            f"{path}: a {kind!r} file; wattcap migrate rewrites "
            + " and ".join(repr(k) for k in MIGRATABLE) + " files"
        )
    loaded = cls.load(path)  # refuses a newer version, a corrupt or invalid file
    found = loaded.migrated_from
    if found is None:
        return MigrationResult(path, cls.FILE_KIND, cls.SCHEMA_VERSION, cls.SCHEMA_VERSION, None)
    backup = path.with_name(f"{path.stem}.schema-v{found}{path.suffix}")
    write_file(backup, path.read_text())
    loaded.schema_version = cls.SCHEMA_VERSION
    loaded.save(path)
    return MigrationResult(path, cls.FILE_KIND, found, cls.SCHEMA_VERSION, backup)
