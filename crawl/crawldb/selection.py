"""generate's choice of a cycle's URLs, computed in memory for a small set of due URLs.

jobs/generate.py ranks the due URLs with a Spark query (select_fetchlist): per host by priority
within the host's cap, then the cycle's budget split between discovery and refresh. When at
most ``generate.local_max_due`` URLs are due, jobs/generate.py collects them (and their hosts'
rows) and this module applies the same rules, step for step, each defined once here or in
crawl.crawldb.schedule and evaluated by both paths (tests/test_both_paths_property.py compares
the two on generated crawldbs, tests/test_generate.py and tests/test_e2e.py on real crawls):

1. per host and pool (discovery: never answered, fetch_count 0; refresh: the rest), by priority
   (crawl.crawldb.schedule.priority), then longest due, then URL; the host's rows take turns
   between its two pools (its best refresh URL, its best new URL, its second best refresh URL,
   …), at most the host's cap (generate.max_urls_per_host or an override's max_urls_per_cycle,
   lowered to host_state.url_budget for a host that looked like a trap);
2. per pool, the pool's best by priority, then rank in its host, then longest due, then URL;
   each pool's rows within its quota (generate.budget_split) first, then the rest by rank in
   their pool, up to top_n;
3. the host's fresh robots.txt cache and sitemap list ride on its best row only.

Times are epoch seconds (floats) here; jobs/generate.py converts them.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any, Callable, Mapping

import numpy as np

from crawl.config import Config
from crawl.crawldb.schedule import priority, valued
from crawl.crawldb.status import FETCHED, NOTMODIFIED
from crawl.rule_ops import NUMPY_OPS, By, sort_key


# The orderings of the selection, one definition for both paths (crawl.rule_ops: sort_key here,
# jobs.engine.column_ops.spark_order in jobs/generate.py). Row fields: _priority (priority_rule),
# _rank (the URL's rank in its host), _pool_rank (its rank in its pool), _discovery (pool),
# _over_quota (over_quota_rule).
# _early (early_rule) comes first everywhere: a URL taken before it is due only ever fills places
# no due URL wants, in its host and in the cycle. _valued (crawl.crawldb.schedule.valued_rule):
# a URL ranked by its refresh value (importance-weighted seconds a fetch buys) is only compared
# with others so ranked; the re-checks that rank by importance × staleness (retries, gone,
# redirects, duplicates) go first among the due URLs of their pool, and a host's cap is shared
# between its pools by taking turns (_host_pool_rank: the rank in the host's pool), since a
# refresh value and a new URL's importance are on different scales.
HOST_POOL_RANK = (By("_early"), By("_valued"), By("_priority", descending=True), By("next_fetch_at"), By("url"))
HOST_RANK = (By("_early"), By("_host_pool_rank"), By("_discovery"))
POOL_ORDER = (By("_early"), By("_valued"), By("_priority", descending=True), By("_rank"), By("next_fetch_at"),
              By("url"))
FILL_ORDER = (By("_early"), By("_over_quota"), By("_pool_rank"), By("_discovery"))
# The statuses whose next fetch the change-rate schedule set (crawl.crawldb.status: a 2xx or a
# 304): only these are taken early; retries, gone re-checks and the rest keep their own times.
EARLY_STATUSES = (FETCHED, NOTMODIFIED)


def fetchable_rule(next_fetch_at, lease_until, now, early, ops):
    """The URL can go into a segment now, whatever its host's state: due (next_fetch_at <= now,
    whatever its status: crawl.crawldb.statuses) or taken early (``early``: early_rule, or False with
    generate.fill_budget off), and no lease in force. Times in each path's own form (timestamps
    in Spark, whole microseconds on the driver); ``now`` likewise."""
    due = ops.not_null(next_fetch_at) & (next_fetch_at <= now)
    free = ops.is_null(lease_until) | (lease_until <= now)
    return (due | early) & free


def early_rule(status, next_fetch_at, last_fetched_at, now, min_interval_s: float, ops):
    """The URL may fill a cycle's budget before it is due (generate.fill_budget): its interval
    came from the change-rate schedule, it is not due yet, and it was last fetched at least
    schedule.min_interval_s ago. Issue 32, finding 1: pages found together come due together,
    and the cycles between those waves left most of top_n unused; taking the URLs closest to
    due instead spreads the waves out and keeps every cycle full. Times in epoch seconds."""
    return (ops.isin(status, EARLY_STATUSES) & ops.not_null(next_fetch_at) & (next_fetch_at > now)
            & ops.not_null(last_fetched_at) & (last_fetched_at + ops.lit(float(min_interval_s)) <= now))


def is_discovery_rule(fetch_count, ops):
    """The URL has never had an answer (fetch_count 0 or null): the discovery pool."""
    return ops.coalesce(fetch_count, ops.lit(0)) == 0


def host_cap_rule(cap, url_budget, ops):
    """A host's cap this cycle: ``cap`` (generate.max_urls_per_host or its override), lowered to
    host_state.url_budget when the host looked like a trap (null: no lowered budget)."""
    return ops.least(cap, ops.coalesce(url_budget, cap))


def over_quota_rule(pool_rank, discovery, quotas: tuple[int, int], ops):
    """The row is past its pool's quota (quotas: discovery, refresh): it only fills places the
    other pool leaves."""
    return pool_rank > ops.when(discovery, ops.lit(int(quotas[0])), ops.lit(int(quotas[1])))


def fetched_after_rule(fetched_at, after, ops):
    """A host's cached robots.txt (or sitemap list) was read after ``after`` (now − its TTL):
    fresh, it rides on the fetchlist; never read (null): not fresh. Times as the path compares
    them: timestamps in Spark, whole microseconds (crawl.rule_ops micros) on the driver."""
    return ops.not_null(fetched_at) & (fetched_at > after)


def unexpired_rule(expire_at, now, ops):
    """A host's cached addresses (host_state.addresses) may still be used at ``now``: they expire
    after it (null: none cached). Times as fetched_after_rule has them."""
    return fetched_after_rule(expire_at, now, ops)


def json_fetched_at(text: str | None) -> float:
    """The ``fetched_at`` of a robots_other value (crawl.fetch.robots RobotsAnswer.to_json), NaN when
    there is none (it compares false, as a null does): what Spark's
    get_json_object(robots_other, '$.fetched_at') cast to double gives."""
    if not text:
        return math.nan
    try:
        value = json.loads(text).get("fetched_at")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except (ValueError, AttributeError):
        return math.nan


def budget_split(top_n: int, discovery_share: float) -> tuple[int, int]:
    """(discovery quota, refresh quota) of a cycle of ``top_n`` URLs: ceil(share × top_n), the rest."""
    # round first: 0.7 × 10 is 7.000000000000001 in binary floating point, and must give 7
    discovery = min(int(top_n), max(0, math.ceil(round(float(discovery_share) * int(top_n), 9))))
    return discovery, int(top_n) - discovery


def select(due: list[Mapping[str, Any]], host_cap: Callable[[str], int], url_budget: Mapping[str, int | None],
           quotas: tuple[int, int], top_n: int, cfg: Config, now: float) -> list[tuple[Mapping[str, Any], int]]:
    """(due row, rank in its host) of each URL the cycle fetches, best first. ``due``: the due
    URLs (jobs/generate.DUE_COLUMNS, times in epoch seconds) of hosts neither deferred nor backing
    off, and with generate.fill_budget those that may be taken early (early_rule); ``url_budget``: a host's lowered budget, if it has one; ``quotas``: the
    (discovery, refresh) split of ``top_n``."""
    if not due:
        return []
    next_at = [r["next_fetch_at"] for r in due]
    with np.errstate(invalid="ignore"):  # null times are NaN here, and compare as false
        early = np.atleast_1d(early_rule(np.array([r["status"] for r in due], dtype=object),
                                         np.array(next_at, dtype=float),
                                         np.array([r["last_fetched_at"] for r in due], dtype=float), float(now),
                                         float(cfg.schedule.min_interval_s), NUMPY_OPS))
    column = {name: [r.get(name) for r in due] for name in (
        "score", "depth", "fetch_interval_s", "status", "refresh_value", "refresh_slope", "last_fetched_at")}
    weights = priority(column["score"], column["depth"], now, next_at, column["fetch_interval_s"], early=early,
                       status=column["status"], refresh_value=column["refresh_value"],
                       refresh_slope=column["refresh_slope"], last_fetched_at=column["last_fetched_at"],
                       score_exponent=cfg.schedule.score_exponent,
                       depth_decay=cfg.schedule.depth_decay, score_floor=cfg.schedule.score_floor)
    is_valued = np.atleast_1d(valued(column["status"], column["refresh_value"], column["refresh_slope"],
                                     column["last_fetched_at"], column["fetch_interval_s"]))
    # the rules on whole columns at once (numpy), as Spark evaluates them on whole columns
    discovery = np.atleast_1d(is_discovery_rule(np.array([r["fetch_count"] for r in due], dtype=float), NUMPY_OPS))
    by_host_pool: dict[tuple[str, bool], list[dict[str, Any]]] = defaultdict(list)
    for weight, is_early, is_val, new, row in zip(np.atleast_1d(weights).tolist(), early.tolist(), is_valued.tolist(),
                                                  discovery.tolist(), due):
        by_host_pool[(row["host"], new)].append({
            "_priority": weight, "_early": bool(is_early), "_valued": bool(is_val), "_row": row,
            "next_fetch_at": row["next_fetch_at"], "url": row["url"], "_discovery": new})
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    host_pool_key = sort_key(HOST_POOL_RANK)
    for (host, _), rows in by_host_pool.items():
        rows.sort(key=host_pool_key)
        for rank, r in enumerate(rows, 1):
            r["_host_pool_rank"] = rank
        by_host[host].extend(rows)
    pools: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    host_key = sort_key(HOST_RANK)
    for host, rows in by_host.items():
        rows.sort(key=host_key)
        cap = int(host_cap_rule(host_cap(host), url_budget.get(host), NUMPY_OPS))
        for rank, r in enumerate(rows[:max(cap, 0)], 1):
            r["_rank"] = rank
            pools[r["_discovery"]].append(r)
    ranked = []
    for pool in (True, False):
        best = sorted(pools[pool], key=sort_key(POOL_ORDER))[:top_n]
        over = np.atleast_1d(over_quota_rule(np.arange(1, len(best) + 1), pool, quotas, NUMPY_OPS)).tolist()
        for pool_rank, (r, past) in enumerate(zip(best, over), 1):
            r["_pool_rank"], r["_over_quota"] = pool_rank, past
            ranked.append(r)
    ranked.sort(key=sort_key(FILL_ORDER))
    return [(r["_row"], r["_rank"]) for r in ranked[:top_n]]


def with_hosts(chosen: list[tuple[Mapping[str, Any], int]], hosts: Mapping[str, Mapping[str, Any]],
               host_fields: tuple[str, ...], robots_fresh_after: float, sitemaps_fresh_after: float,
               now: float) -> list[dict[str, Any]]:
    """The chosen rows with their host's backoff_s, and on the host's best row (rank) its
    robots.txt cache (status, fetched_at, scheme; ``_robots``: whether the body goes with them) if
    fetched after ``robots_fresh_after``, the other origin's answer (robots_other) if it was,
    its sitemap list and when its sitemaps were last read if after ``sitemaps_fresh_after``, and
    its addresses while they expire after ``now``."""
    best = {}
    for row, rank in chosen:
        best[row["host"]] = min(rank, best.get(row["host"], rank))
    out = []
    for row, rank in chosen:
        host = hosts.get(row["host"], {})
        robots_at, sitemaps_at = host.get("robots_fetched_at"), host.get("sitemaps_fetched_at")
        fresh = bool(fetched_after_rule(NUMPY_OPS.micros(robots_at), NUMPY_OPS.micros(robots_fresh_after), NUMPY_OPS))
        other = host.get("robots_other")
        other_fresh = bool(fetched_after_rule(json_fetched_at(other), float(robots_fresh_after), NUMPY_OPS))
        expire_at = host.get("addresses_expire_at")
        known = bool(unexpired_rule(NUMPY_OPS.micros(expire_at), NUMPY_OPS.micros(now), NUMPY_OPS))
        values = {"robots_status": host.get("robots_status") if fresh else None,
                  "robots_fetched_at": robots_at if fresh else None,
                  "robots_scheme": host.get("robots_scheme") if fresh else None,
                  "robots_other": other if other_fresh else None,
                  "addresses": host.get("addresses") if known else None,
                  "addresses_expire_at": expire_at if known else None,
                  "sitemaps": host.get("sitemaps"),
                  "sitemaps_fetched_at": sitemaps_at if fetched_after_rule(
                      NUMPY_OPS.micros(sitemaps_at), NUMPY_OPS.micros(sitemaps_fresh_after), NUMPY_OPS) else None}
        first = best[row["host"]] == rank
        d = dict(row)
        d["backoff_s"] = host.get("backoff_s")
        d.update({name: (values[name] if first else None) for name in host_fields if name != "robots_txt"})
        d["_robots"] = first and fresh
        d["_rank"] = rank
        out.append(d)
    return out
