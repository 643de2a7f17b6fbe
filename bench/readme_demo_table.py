"""Paste the demo's table into the results page of the docs (docs/results.md), so that the
page shows the current demo's output and nothing edited by hand.

    make demo && python bench/readme_demo_table.py [demo-output] [--date YYYY-MM-DD]

`wattcap demo` writes OUT/table.md (`wattcap.experiments.demo.markdown_table`); this replaces
the block between the page's `<!-- demo-table -->` markers with it and the run's date.
Exits 1, changing nothing, when the markers or the table are missing.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

from wattcap.core.files import write_file

RESULTS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "results.md"
BLOCK = re.compile(r"<!-- demo-table -->\n.*?<!-- /demo-table -->\n", re.DOTALL)


def paste(page_text: str, table: str, date: str) -> str:
    """The page's text with the demo block replaced (ValueError: no block)."""
    if not BLOCK.search(page_text):
        raise ValueError("the page has no <!-- demo-table --> ... <!-- /demo-table --> block")
    block = (f"<!-- demo-table -->\n<!-- pasted by bench/readme_demo_table.py from the demo "
             f"run of {date} -->\n{table.rstrip()}\n<!-- /demo-table -->\n")
    return BLOCK.sub(lambda _: block, page_text, count=1)


def main(argv: list[str] | None = None) -> int:
    """Paste OUT/table.md into docs/results.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("demo-output"))
    parser.add_argument("--date", default=None, help="The run's date (default: the table "
                        "file's modification date).")
    parser.add_argument("--page", type=Path, default=RESULTS_PAGE)
    args = parser.parse_args(argv)
    table_path = args.out / "table.md"
    if not table_path.exists():
        print(f"no {table_path}: run `make demo` (or `wattcap demo --out {args.out}`) first")
        return 1
    date = args.date or datetime.date.fromtimestamp(table_path.stat().st_mtime).isoformat()
    try:
        text = paste(args.page.read_text(), table_path.read_text(), date)
    except ValueError as err:
        print(f"{args.page}: {err}")
        return 1
    write_file(args.page, text)
    print(f"pasted {table_path} into {args.page} (run of {date})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
