"""Paste the demo's table into the README, so that the README shows the current demo's
output and nothing edited by hand.

    make demo && python bench/readme_demo_table.py [demo-output] [--date YYYY-MM-DD]

`wattcap demo` writes OUT/table.md (`wattcap.experiments.demo.markdown_table`); this replaces
the block between the README's `<!-- demo-table -->` markers with it and the run's date.
Exits 1, changing nothing, when the markers or the table are missing.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

from wattcap.core.files import write_file

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"<!-- demo-table -->\n.*?<!-- /demo-table -->\n", re.DOTALL)


def paste(readme_text: str, table: str, date: str) -> str:
    """The README's text with the demo block replaced (ValueError: no block)."""
    if not BLOCK.search(readme_text):
        raise ValueError("the README has no <!-- demo-table --> ... <!-- /demo-table --> block")
    block = (f"<!-- demo-table -->\n<!-- pasted by bench/readme_demo_table.py from the demo "
             f"run of {date} -->\n{table.rstrip()}\n<!-- /demo-table -->\n")
    return BLOCK.sub(lambda _: block, readme_text, count=1)


def main(argv: list[str] | None = None) -> int:
    """Paste OUT/table.md into README.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("demo-output"))
    parser.add_argument("--date", default=None, help="The run's date (default: the table "
                        "file's modification date).")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    table_path = args.out / "table.md"
    if not table_path.exists():
        print(f"no {table_path}: run `make demo` (or `wattcap demo --out {args.out}`) first")
        return 1
    date = args.date or datetime.date.fromtimestamp(table_path.stat().st_mtime).isoformat()
    try:
        text = paste(args.readme.read_text(), table_path.read_text(), date)
    except ValueError as err:
        print(f"{args.readme}: {err}")
        return 1
    write_file(args.readme, text)
    print(f"pasted {table_path} into {args.readme} (run of {date})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
