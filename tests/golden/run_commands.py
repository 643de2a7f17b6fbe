"""Run several `wattcap` commands in one process, in order: `python run_commands.py PLAN`, PLAN a
JSON list of [arguments, file] pairs; what each command printed goes to its file. The golden
generator's way to pay the imports once (see generate.py). A command that fails stops the rest
with its exit status."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path


def main(plan: Path) -> int:
    from wattcap.cli import app

    for args, stdout_path in json.loads(plan.read_text()):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            try:
                status = app(args, standalone_mode=False, prog_name="wattcap")
            except SystemExit as exit_:
                status = exit_.code
        Path(stdout_path).write_text(printed.getvalue())
        if status not in (None, 0):
            sys.stderr.write(f"wattcap {' '.join(args)} exited with {status}:\n"
                             f"{printed.getvalue()[-3000:]}\n")
            return int(status) if isinstance(status, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
