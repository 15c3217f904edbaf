"""Change hints pushed by site owners: a list of URLs that changed (IndexNow-style).

``deltacrawl hint URLS_FILE`` reads the file like a seeds file (crawl/crawldb/seeds.py: one URL
per line, # comments, normalised the same way) and keeps what the URL filters of [discovery]
keep (crawl/net/filters.py, the rules links obey; a hint has no source page, so the scope check
compares the URL's host with itself). What it keeps goes to the hints table; the next generate
applies it (jobs/engine/hint_inbox.py):

  * a known URL is made due at the hint's time, unless our copy is already newer than the hint
    (fetched after it) or it is due earlier anyway — ``HINT_APPLIES_SQL``;
  * an unknown URL is inserted as a new one (unfetched, depth 0, ``inject.seed_score``, due at
    the hint's time), like a seed.

Robots.txt, the address guard and politeness judge hinted URLs at fetch time, like any URL.
Applying the same hint twice changes nothing the second time (the URL is then due at the hint's
time, or fetched after it): that is what makes the consumption crash-safe.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from crawl.crawldb.seeds import parse_seed_lines
from crawl.net.filters import LinkFilter
from crawl.net.urls import host_of

# How many bad lines a message names (the rest are counted).
SHOWN_BAD_LINES = 5

# The rule of a hint for a known URL (Spark SQL on the crawldb row ``t`` and the hint ``s``):
# our copy predates the hint (never fetched, or fetched before it was hinted), and the URL is
# not due by then already. A duplicate stays one (generate never selects it) until its page is
# refetched through the canonical URL's schedule.
HINT_APPLIES_SQL = ("(t.last_fetched_at IS NULL OR t.last_fetched_at < s.hinted_at) "
                    "AND (t.next_fetch_at IS NULL OR t.next_fetch_at > s.hinted_at)")


@dataclass
class HintParse:
    urls: list[str] = field(default_factory=list)                       # normalised, unique, in order
    rejected: list[tuple[int, str, str]] = field(default_factory=list)  # (line number, text, reason)
    duplicates: int = 0

    def describe_rejected(self) -> str | None:
        """One line about the bad lines: how many, and the first few with their reasons."""
        if not self.rejected:
            return None
        shown = "; ".join(f"line {n}: {text!r}: {reason}" for n, text, reason in self.rejected[:SHOWN_BAD_LINES])
        more = len(self.rejected) - SHOWN_BAD_LINES
        return f"{len(self.rejected)} bad lines skipped ({shown}{f'; and {more} more' if more > 0 else ''})"


def parse_hint_lines(lines: Iterable[str], link_filter: LinkFilter, max_url_length: int | None = None) -> HintParse:
    """The hinted URLs of ``lines`` (a seeds file's format: crawl/crawldb/seeds.py parses each
    line, so hints and seeds are normalised alike), filtered; bad lines keep their numbers."""
    result = HintParse()
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        parsed = parse_seed_lines([line], max_url_length)
        result.rejected += [(number, text, reason) for _n, text, reason in parsed.rejected]
        for url in parsed.urls:
            if url in seen:
                result.duplicates += 1
                continue
            seen.add(url)
            reason = link_filter.reject_reason(url, host_of(url))
            if reason is None:
                result.urls.append(url)
            else:
                result.rejected.append((number, url[:200], f"refused by the URL filters ([discovery]): {reason}"))
    return result
