"""The duplicate decision of jobs/dedup.py, computed in memory for a small segment.

jobs/dedup.py decides duplicates with a dozen Spark queries (`duplicates`). On a small segment
their data is a few hundred rows and their cost is Spark's planning and job start, about half a
warm dedup's time (docs/decisions.md "Cycle cost, fifth round"). For a segment of at most
``dedup.local_max_pages`` pages, jobs/dedup.py instead collects the segment's pages and the slice
of dedup/pages and dedup/bands they can meet (bounded by the segment, not by the tables: the
band rows holding one of the segment's band values, capped, and the dedup/pages rows of those
pages, of the segment's pages and of pages sharing their texts), and this module decides.

The rules are jobs/dedup.py's, step for step, and give the same answer (tests/test_dedup_job.py
runs both on the same inputs):

- exact: per text hash, the best page among the segment's pages and the earlier pages with that
  text (not the segment's own old rows) by the canonical key (first fetched, higher score,
  shorter URL, URL); every other segment page with that text matches it;
- near: pages sharing a SimHash band within ``max_hamming`` bits, or sharing a MinHash band and
  confirmed by crawl.dedup.rules.is_near_duplicate; band values held by more than
  ``max_candidates`` rows are left out (hot); pairs with an old row of a page the segment
  fetched again are dropped (stale);
- each duplicate's dup_of is its best match if that ranks before it, followed to the end of
  any chain.

Orderings follow Spark's: a struct compares field by field with nulls first; strings compare
by code point (as UTF-8 bytes do); "exact" sorts before "near".
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from crawl.dedup.rules import (EXACT, NEAR, SIMHASH_BANDS, band_collisions, canonical_key, hamming, is_cool_band,
                               is_near_duplicate)
from crawl.rule_ops import nulls_first_key

Key = tuple[int, str]  # (url_hash, url)


@dataclass
class Decision:
    duplicates: list[tuple[str, int, int, str, str]]  # (url, url_hash, host_bucket, dup_of, match)
    collisions: int  # band collisions of the segment's pages: a pair counts once per band it shares
    hot_values: int  # (band, value) pairs left out: held by more than max_candidates rows


def _rank(page: Mapping[str, Any]) -> tuple:
    """The canonical key (crawl.dedup.rules.canonical_key, smallest wins), compared as Spark
    compares the struct: field by field, nulls first."""
    return nulls_first_key(canonical_key(page["first"], page["score"], page["url"]))


def decide(pages: Iterable[Mapping[str, Any]], known: Iterable[Mapping[str, Any]],
           new_bands: Iterable[tuple[int, str, int, int, int]], old_bands: Iterable[tuple[int, int, int, str, int]],
           max_hamming: int, min_jaccard: float, max_candidates: int) -> Decision:
    """``pages``: the segment's pages (url, url_hash, host_bucket, text_hash, simhash, signature,
    score, first), one per (url_hash, url). ``known``: dedup/pages rows in the same shape
    (``first`` = first_fetched_at as epoch seconds), at least those of the segment's pages, of pages
    sharing a text with them and of pages in ``old_bands``. ``new_bands``: (url_hash, url, band,
    value, simhash) of the segment's pages. ``old_bands``: (band, value, url_hash, url, simhash) of
    dedup/bands, at least every row holding a (band, value) of ``new_bands``."""
    seg = {(p["url_hash"], p["url"]): p for p in pages}
    earlier = {(k["url_hash"], k["url"]): k for k in known}
    earlier = {key: row for key, row in earlier.items() if key not in seg}

    def page_of(key: Key) -> Mapping[str, Any] | None:
        """The segment's own row of a page, else its row in dedup/pages (as other_pages does)."""
        return seg.get(key) or earlier.get(key)

    matches: dict[tuple[Key, Key], str] = {}

    # exact: the best page per text, among the segment and the earlier pages with that text
    texts = {p["text_hash"] for p in seg.values()}
    best_text: dict[int, tuple[tuple, int, str]] = {}
    for row in (*seg.values(), *(r for r in earlier.values() if r["text_hash"] in texts)):
        cand = (_rank(row), row["url_hash"], row["url"])
        if row["text_hash"] not in best_text or cand < best_text[row["text_hash"]]:
            best_text[row["text_hash"]] = cand
    for key, page in seg.items():
        _, o_hash, o_url = best_text[page["text_hash"]]
        if o_hash != page["url_hash"]:
            matches[(key, (o_hash, o_url))] = EXACT

    # the band join: counts per value of the segment, hot values, collisions
    new_rows = list(new_bands)
    holders: dict[tuple[int, int], list[tuple[Key, int, bool]]] = defaultdict(list)  # value -> (page, simhash, old)
    n_new: dict[tuple[int, int], int] = defaultdict(int)
    for url_hash, url, band, value, simhash in new_rows:
        holders[(band, value)].append(((url_hash, url), simhash, False))
        n_new[(band, value)] += 1
    for band, value, url_hash, url, simhash in old_bands:
        if (band, value) in n_new:
            holders[(band, value)].append(((url_hash, url), simhash, True))
    collisions = hot = 0
    cool_values = set()
    for value, n in n_new.items():
        total = len(holders[value])
        if is_cool_band(total, max_candidates):
            collisions += band_collisions(n, total)
            cool_values.add(value)
        else:
            hot += 1

    def fresh(other: Key, old: bool) -> bool:
        """Not the stale old row of a page the segment fetched again."""
        return not old or other not in seg

    for url_hash, url, band, value, simhash in new_rows:
        if (band, value) not in cool_values:
            continue
        key = (url_hash, url)
        for other, o_simhash, old in holders[(band, value)]:
            if other[0] == url_hash or not fresh(other, old):
                continue
            if band < SIMHASH_BANDS:
                if hamming(simhash, o_simhash) > max_hamming:
                    continue
            else:
                mine, theirs = seg[key], page_of(other)
                if theirs is None or not is_near_duplicate(mine["simhash"], mine["signature"], theirs["simhash"],
                                                           theirs["signature"], max_hamming, min_jaccard):
                    continue
            matches.setdefault((key, other), NEAR)

    # each page's best match, if it ranks before the page
    best: dict[Key, tuple[tuple, str, str]] = {}
    for (key, other), match in matches.items():
        theirs = page_of(other)
        if theirs is None:
            continue
        cand = (_rank(theirs), other[1], match)
        if key not in best or cand < best[key]:
            best[key] = cand
    dup_of = {key: (b[1], b[2]) for key, b in best.items() if b[0] < _rank(seg[key])}

    # chains: X's dup_of Y is itself a duplicate (of Z): X's dup_of is Z
    by_url = {key[1]: target for key, (target, _) in dup_of.items()}
    duplicates = []
    for key, (target, match) in dup_of.items():
        for _ in range(len(by_url)):
            if target not in by_url:
                break
            target = by_url[target]
        duplicates.append((key[1], key[0], seg[key]["host_bucket"], target, match))
    return Decision(sorted(duplicates), collisions, hot)
