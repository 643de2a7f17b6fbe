"""The README and the documentation site: the README fits on a screen, every page is in the
site's navigation, every picture a page shows exists, no page cites issue numbers, the tour the
getting-started page shows is the README's (one block, tested by tests/cli/test_readme_tour.py),
and the CLI reference is generated from the real command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
#: what users read: the README, the changelog, the site's pages, the examples' READMEs
USER_TEXT = [README, ROOT / "CHANGELOG.md", *PAGES,
             *sorted((ROOT / "examples").glob("**/README.md"))]


def test_the_readme_fits_on_a_screen_and_links_into_the_docs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert text.index("make demo") < text.index("## Why")  # the two commands come first
    for page in ("getting-started", "hardware", "python-api", "measurements", "changing-caps",
                 "fleets", "server", "paper", "results", "architecture", "cli", "api"):
        assert f"(docs/{page}.md)" in text, page
        assert (DOCS / f"{page}.md").exists(), page


def test_every_page_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*([\w-]+\.md)\s*$", config, flags=re.M))
    assert listed == {page.name for page in PAGES}


@pytest.mark.parametrize("path", USER_TEXT, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_user_facing_text(path: Path) -> None:
    assert not re.search(r"\bissues? \d+", path.read_text(), flags=re.I)


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_picture_exists_and_says_what_made_it(path: Path) -> None:
    text = path.read_text()
    for match in re.finditer(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (path.parent / match.group(1)).is_file(), match.group(1)
        after = text[match.end():match.end() + 300]
        assert "Made by" in after, f"{match.group(1)}: name the command that made it"


def test_the_getting_started_page_shows_the_readme_tour_itself() -> None:
    page = (DOCS / "getting-started.md").read_text()
    assert '--8<-- "README.md:tour"' in page  # included at build time, never copied
    readme = README.read_text()
    start, end = readme.index("[start:tour]"), readme.index("[end:tour]")
    assert start < readme.index("## Five-minute tour") < readme.index("```bash", start) < end


def test_the_cli_reference_is_generated_from_the_real_command() -> None:
    from wattcap.cli.click_command import command

    assert "::: mkdocs-click" in (DOCS / "cli.md").read_text()
    names = set(getattr(command, "commands", {}))
    assert {"profile", "plan", "train", "compare", "fleet", "serve"} <= names
