"""`wattcap migrate`: files of earlier schema versions rewritten in the current one."""

from __future__ import annotations

from pathlib import Path

import typer

from wattcap.cli.common import say


def migrate(
    files: list[Path] = typer.Argument(..., help="Profiles or efficiency vectors to rewrite."),
) -> None:
    """Rewrite profiles and efficiency vectors of earlier schema versions in the current one.

    Loading an earlier file already works (it is migrated in memory); this makes it
    permanent. The original is kept beside it as NAME.schema-vN.json. A file written by a
    newer wattcap is refused with its version named.
    """
    from wattcap.core.migrate import migrate_file

    for path in files:
        result = migrate_file(path)
        if result.backup is None:
            say(f"{path}: already schema version {result.to_version}; nothing to do")
        else:
            say(f"{path}: {result.kind} schema version {result.from_version} -> "
                f"{result.to_version} (the original kept as {result.backup})")
