"""What jobs/update.py writes for one segment, computed in memory for a small segment.

jobs/update.py computes its MERGE sources with Spark queries (updated_states, jobs/engine/discover.py,
orphaned_duplicates): on a small segment their data is a few hundred rows and their cost is
Spark's planning and job start, about half of a warm update's time (docs/decisions.md "Cycle cost,
sixth round"). For a segment of at most ``update.local_max_urls`` URLs, jobs/update.py instead
collects the segment, the crawldb rows it can touch (its own URLs, the URLs it discovered, the
duplicates of its pages) and the url_count of the hosts it discovered URLs on: all bounded by
the segment, not by the tables. This module then computes, with the rules of jobs/update.py and
jobs/engine/discover.py step for step, each rule defined once (here or in crawl.crawldb.status) and used by
both paths (tests/test_both_paths_property.py compares the two on generated segments,
tests/test_dedup_job.py, tests/test_discovery_e2e.py and tests/test_e2e.py on real crawls):

- updates: each attempted URL still leased to the segment gets
  crawl.crawldb.status.apply_fetch (and mark_duplicate when dedup found its content elsewhere);
- candidates: outlinks and redirect targets of the pages answered OK or with a redirect
  (crawl.crawldb.status.discovered_links, with a duplicate's score scaled down) and the hosts'
  sitemap entries, one row per URL (least depth, summed score and in-links, least redirect hops,
  newest lastmod), without the URLs the segment attempted;
- new rows: the unknown candidates each host's total budget has room for, best score first
  (then least depth, then URL), and per host how many were kept and how many were over its cap;
- hints (due now): known candidates whose sitemap lastmod is newer than their last fetch, and the
  duplicates of pages that no longer hold the content they copy (gone, redirected, changed text,
  or duplicates themselves), except those attempted in this segment.

Rows use epoch seconds (floats) for times, as the Spark path's Python stages do; jobs/update.py
converts them with jobs.engine.schemas.from_epoch.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from crawl.crawldb.status import (DUPLICATE, FetchStatus, apply_fetch, discovered_links, mark_duplicate,
                                  SchedulePolicy, new_url_state)
from crawl.net.urls import host_bucket, host_of, url_hash
from crawl.rule_ops import NUMPY_OPS, By, sort_key

Key = tuple[int, int, str]  # (host_bucket, url_hash, url): the crawldb's row key
# the fields of one candidate, in jobs/engine/discover.py's _CANDIDATE_SCHEMA order
CANDIDATE_FIELDS = ("url", "host", "host_bucket", "url_hash", "depth", "score", "redirect_hops", "inlinks", "lastmod")
LINK_SOURCES = (FetchStatus.OK, FetchStatus.REDIRECT)
# Answers after which a page no longer holds the content its duplicates copy.
LOST_CONTENT = (FetchStatus.NOT_FOUND, FetchStatus.CLIENT_ERROR, FetchStatus.REDIRECT)


# How the links and sitemap entries naming one URL become its one candidate row: per field,
# Spark's aggregate of that name (nulls skipped). jobs/engine/discover.py aggregates with these in its
# groupBy; candidates() folds with them.
CANDIDATE_AGGREGATES = (("depth", "min"), ("score", "sum"), ("redirect_hops", "min"), ("inlinks", "sum"),
                        ("lastmod", "max"))
# New URLs of a host enter, within its total budget, best first (crawl.rule_ops orderings).
NEW_URL_ORDER = (By("score", descending=True), By("depth"), By("url"))


_FOLDS: dict[str, Callable[[Any, Any], Any]] = {"min": min, "max": max, "sum": lambda x, y: x + y}


def _fold(how: str, a: Any, b: Any) -> Any:
    """Spark's ``how`` aggregate of two values, nulls skipped (a group of nulls gives null)."""
    if a is None:
        return b
    if b is None:
        return a
    return _FOLDS[how](a, b)


def duplicate_score_rule(score, dup_of, factor: float, ops):
    """The score a page's links share: a duplicate's (dup_of set by dedup) times
    dedup.duplicate_link_factor, any other page's as it is."""
    return ops.when(ops.not_null(dup_of), score * ops.lit(float(factor)), score)


def lost_content_rule(fetch_status, text_hash, old_text_hash, dup_of, ops):
    """The page no longer holds the content its duplicates copy: it answered gone or with a
    redirect (LOST_CONTENT), its text changed (another text_hash than the crawldb's), or dedup
    found it a duplicate itself."""
    changed = ((fetch_status == FetchStatus.OK) & ops.not_null(text_hash) & ops.not_null(old_text_hash)
               & (text_hash != old_text_hash))
    return ops.isin(fetch_status, LOST_CONTENT) | changed | ops.not_null(dup_of)


def lastmod_hint_rule(lastmod, last_fetched_at, ops):
    """A known URL's sitemap lastmod is newer than our last fetch: it is due now. Never fetched
    (null): due already, no hint. Times as the path compares them: timestamps in Spark, whole
    microseconds (crawl.rule_ops micros) on the driver."""
    return ops.not_null(lastmod) & ops.not_null(last_fetched_at) & (lastmod > last_fetched_at)


def within_budget_rule(rank_in_host, cap, url_count, ops):
    """The ``rank_in_host``-th best new URL of a host (NEW_URL_ORDER) fits its total budget
    ``cap`` beside the host_state.url_count URLs it has (null: none)."""
    return rank_in_host <= cap - ops.coalesce(url_count, ops.lit(0))


@dataclass
class Plan:
    updates: list[dict[str, Any]] = field(default_factory=list)    # crawldb rows of the leased URLs
    new_rows: list[dict[str, Any]] = field(default_factory=list)   # crawldb rows of the URLs let in
    hints: list[tuple[int, int, str, float]] = field(default_factory=list)       # keys, next_fetch_at
    host_counts: list[tuple[int, str, int, int]] = field(default_factory=list)   # keys, new_urls, over_cap


def key_of(row: Mapping[str, Any]) -> Key:
    return row["host_bucket"], row["url_hash"], row["url"]


def with_duplicates(outcomes: Iterable[Mapping[str, Any]], dup_of: Mapping[tuple[int, str], str],
                    factor: float) -> list[dict[str, Any]]:
    """The outcomes with dedup's ``dup_of`` (or None), the score as duplicate_score_rule says."""
    out = []
    for row in outcomes:
        d = dict(row)
        d["dup_of"] = dup_of.get((d["url_hash"], d["url"]))
        d["score"] = duplicate_score_rule(d["score"], d["dup_of"], factor, NUMPY_OPS)
        out.append(d)
    return out


def candidates(outcomes: Iterable[Mapping[str, Any]], hosts: Iterable[Mapping[str, Any]], factor: float,
               max_depth: int, max_redirects: int, sitemap_score: float, buckets: int) -> list[dict[str, Any]]:
    """One dict (CANDIDATE_FIELDS) per URL the segment discovered and did not attempt."""
    outcomes = list(outcomes)
    found: dict[str, dict[str, Any]] = {}  # url -> the CANDIDATE_AGGREGATES fields so far

    def add(url: str, **values: Any) -> None:
        seen = found.get(url)
        if seen is None:
            found[url] = values
            return
        for name, how in CANDIDATE_AGGREGATES:
            seen[name] = _fold(how, seen[name], values[name])

    for row in outcomes:
        if row["fetch_status"] in LINK_SOURCES:
            for url, depth, share, hops in discovered_links(row, factor, max_depth, max_redirects):
                add(url, depth=depth, score=share, redirect_hops=hops, inlinks=1, lastmod=None)
    if max_depth >= 1:
        for host in hosts:
            for entry in host.get("sitemap_entries") or ():
                add(entry["url"], depth=1, score=sitemap_score, redirect_hops=0, inlinks=0, lastmod=entry["lastmod"])
    for row in outcomes:
        found.pop(row["url"], None)
    out = []
    for url, agg in found.items():
        host = host_of(url)
        out.append({"url": url, "host": host, "host_bucket": host_bucket(host, buckets), "url_hash": url_hash(url),
                    "depth": int(agg["depth"]), "score": float(agg["score"]), "redirect_hops": int(agg["redirect_hops"]),
                    "inlinks": int(agg["inlinks"]), "lastmod": agg["lastmod"]})
    return out


def plan(outcomes: list[Mapping[str, Any]], cands: list[Mapping[str, Any]], crawldb: Mapping[Key, Mapping[str, Any]],
         url_counts: Mapping[tuple[int, str], int | None], host_cap: Callable[[str], int],
         policy: SchedulePolicy, now: float, segment_id: str) -> Plan:
    """The segment's writes. ``outcomes``: the attempted URLs (with_duplicates); ``crawldb``: the
    rows (URL fields, epoch times) of every URL in ``outcomes`` or ``cands`` that the crawldb
    holds, and of every duplicate whose dup_of is one of the outcomes' URLs; ``url_counts``:
    host_state.url_count of the candidates' hosts (absent or None: 0); ``host_cap``: a host's
    total budget (discovery.max_urls_per_host_total or its override)."""
    result = Plan()
    attempted = {(o["url_hash"], o["url"]) for o in outcomes}
    by_url_key = {(k[1], k[2]): row for k, row in crawldb.items()}
    lost: set[str] = set()
    for o in outcomes:
        state = crawldb.get(key_of(o))
        if state is not None and state["lease_until"] is not None and state["segment_id"] == o["segment_id"]:
            new = apply_fetch(state, o, policy)
            if o["dup_of"]:
                new = mark_duplicate(new, o["dup_of"], policy)
            result.updates.append(new)
        old = by_url_key.get((o["url_hash"], o["url"]))
        old_text = old["text_hash"] if old is not None else None
        if lost_content_rule(o["fetch_status"], o["text_hash"], old_text, o["dup_of"], NUMPY_OPS):
            lost.add(o["url"])

    hints: dict[Key, float] = {}
    unknown: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in cands:
        known = crawldb.get(key_of(c))
        if known is None:
            unknown[c["host"]].append(c)
        elif lastmod_hint_rule(NUMPY_OPS.micros(c["lastmod"]), NUMPY_OPS.micros(known["last_fetched_at"]), NUMPY_OPS):
            hints[key_of(c)] = now
    for key, row in crawldb.items():
        if row["status"] == DUPLICATE and row["dup_of"] in lost and (key[1], key[2]) not in attempted:
            hints[key] = now
    result.hints = [(*key, at) for key, at in hints.items()]

    for host, rows in unknown.items():
        rows.sort(key=sort_key(NEW_URL_ORDER))
        bucket = rows[0]["host_bucket"]
        cap, count = host_cap(host), url_counts.get((bucket, host))
        kept = [c for rank, c in enumerate(rows, 1) if within_budget_rule(rank, cap, count, NUMPY_OPS)]
        for c in kept:
            result.new_rows.append(new_url_state(c["url"], host, bucket, c["url_hash"], c["depth"], c["score"], now,
                                                 c["redirect_hops"], c["inlinks"], segment_id))
        result.host_counts.append((bucket, host, len(kept), len(rows) - len(kept)))
    return result
