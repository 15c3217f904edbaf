"""The documentation holds together: every relative link of README.md and docs/*.md names a file
that exists, and every #anchor a heading of the page it points to; docs/index.md lists every page
of docs/; the README stays a map (short, and pointing at the index).

Anchors are GitHub's: the heading's text lower-cased, markup and punctuation dropped, spaces as
hyphens, and a repeated heading numbered (-1, -2, ...).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """The text without fenced code blocks (links and headings there are examples, not ours)."""
    return FENCE.sub("", text)


def github_anchor(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # GitHub keeps letters, digits, _, - and spaces
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_anchor(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", prose(path.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)]  # http:, https:, mailto: …


def test_anchors_follow_github():
    assert github_anchor("Read-only unless `--write`") == "read-only-unless---write"
    assert github_anchor("Small inputs skip Spark's planning") == "small-inputs-skip-sparks-planning"
    assert github_anchor("`warc_index/` — where every archived record is") == "warc_index--where-every-archived-record-is"
    assert github_anchor("Status model (`crawl/crawldb/status.py`)") == "status-model-crawlcrawldbstatuspy"


def test_the_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad](#nowhere) `[code](x.md)`\n"
                    "```\n[example](also-missing.md)\n```\n[web](https://example.com/x)\n", encoding="utf-8")
    assert relative_links(page) == ["#title", "missing.md", "#nowhere"]
    assert broken_links(page) == ["missing.md: no such file", "#nowhere: no heading page.md#nowhere"]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading {linked.name}#{anchor}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_index_lists_every_page_of_docs():
    listed = set(re.findall(r"\]\(([^)#]+\.md)\)", (DOCS / "index.md").read_text(encoding="utf-8")))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages - listed == set(), "docs/index.md should say what each page answers"


def cli_commands() -> set[str]:
    """The commands ``deltacrawl --help`` lists."""
    from jobs.cli import USAGE
    return set(re.findall(r"deltacrawl ([a-z][a-z-]*)", USAGE))


def test_the_readme_is_a_map():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert "(docs/index.md)" in text
    assert "```\nmake demo\n```" in text and "```\nmake test\n```" in text  # the quick start
    commands = cli_commands()
    assert {"inject", "generate", "fetch", "dedup", "update", "stats", "crawl", "sql"} <= commands
    for page in (REPO / "README.md", DOCS / "cli.md"):  # one line each in the map, in full in cli.md
        lines = page.read_text(encoding="utf-8")
        missing = [c for c in sorted(commands) if f"| `deltacrawl {c}" not in lines]
        assert missing == [], f"{page.name}'s command table lacks {missing}"
