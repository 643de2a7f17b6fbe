"""The README and the documentation site: the README fits on a screen, every page is in the
site's navigation, every picture a page shows exists, no page, docstring, comment or help text
cites issue numbers, the tour the getting-started page shows is the README's (one block, tested
by tests/cli/test_readme_tour.py), and the CLI reference is generated from the real command."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
#: what users read: the README, the changelog, the site's pages, the examples' READMEs
USER_TEXT = [README, ROOT / "CHANGELOG.md", *PAGES,
             *sorted((ROOT / "examples").glob("**/README.md"))]

#: the nodes whose docstrings mkdocstrings shows
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


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


#: a reference to a tracker's issue: "issue 19", "issues 28", "issue-19", "Issue #7", "#19",
#: "(#19)". A "#" after a word character, "&", ":", "=", a quote or "/" (an anchor, an HTML
#: entity, a colour) is none, nor a heading's "# ", nor "#" with more than 3 digits (another
#: project's pull request, a colour code)
ISSUE_REF = re.compile(r"\bissues?[ -]#?\d+|(?<![\w&:=\"'/])#\d{1,3}\b", flags=re.I)
#: where a "#" is code or a link target, not prose: fenced blocks, inline code, "](target)"
MARKDOWN_CODE = re.compile(r"```.*?```|`[^`\n]*`|\]\([^)\s]*\)", flags=re.S)
PACKAGE = ROOT / "wattcap"
MODULES = sorted(PACKAGE.rglob("*.py"))


def issue_refs(text: str) -> list[str]:
    """The issue references in prose (code spans and link targets left out)."""
    return ISSUE_REF.findall(MARKDOWN_CODE.sub(" ", text))


@pytest.mark.parametrize(
    "text", ["see issue 19", "issues 28 and 29", "(Issue #7)", "issue-19", "fixed in #19",
             "(#3)", "goal of #120."])
def test_the_issue_check_catches_every_form_of_reference(text: str) -> None:
    assert issue_refs(text)


@pytest.mark.parametrize(
    "text", ["# Results", "## 2 cores", "colour `#333`", "color:#333", "&#123;",
             "[the layers](architecture.md#2-layers)", "[x](#2-layers)", "PyTorch PR #183405",
             "```bash\nwattcap plan  #1 of 3\n```", "2 issues remain", "ebook 1342"])
def test_the_issue_check_leaves_headings_code_and_anchors_alone(text: str) -> None:
    assert not issue_refs(text)


@pytest.mark.parametrize("path", USER_TEXT, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_user_facing_text(path: Path) -> None:
    assert not issue_refs(path.read_text())


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_the_package_source(path: Path) -> None:
    # docstrings are the API reference's text, and comments rot once they cite a tracker
    source = path.read_text()
    docstrings = [ast.get_docstring(node) or "" for node in ast.walk(ast.parse(source))
                  if isinstance(node, DOCUMENTED)]
    assert not [ref for text in docstrings for ref in ISSUE_REF.findall(text)]
    assert not re.findall(r"\bissues?[ -]#?\d+", source, flags=re.I)


def test_no_issue_numbers_in_the_cli_help() -> None:
    import click

    from wattcap.cli.click_command import command

    def helps(cmd: click.Command, name: str) -> Iterator[tuple[str, str]]:
        for text in (cmd.help, cmd.short_help, cmd.epilog):
            if text:
                yield name, text
        for param in cmd.params:
            if isinstance(param, click.Option) and param.help:
                yield f"{name} {param.opts[0]}", param.help
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            yield from helps(sub, f"{name} {sub_name}")

    texts = list(helps(command, "wattcap"))
    assert len(texts) > 50  # the walk reached the sub-commands' options
    assert not [(where, text) for where, text in texts if ISSUE_REF.search(text)]


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


def test_the_install_section_names_every_emulated_device() -> None:
    """The README's "no GPU needed" line lists the emulated devices as `wattcap devices` does
    (their spec names), not a subset that was true once."""
    from wattcap.devices import list_specs

    text = README.read_text()
    install = text[text.index("[start:install]"):text.index("[end:install]")]
    try_it = install[:install.index("```")]
    assert all(f"`{name}`" in try_it for name in list_specs()), try_it
