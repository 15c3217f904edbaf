"""generate's choice of a cycle's URLs, computed in memory for a small set of due URLs.

jobs/generate.py ranks the due URLs with a Spark query (select_fetchlist): per host by priority
within the host's cap, then the cycle's budget split between discovery and refresh. When at
most ``generate.local_max_due`` URLs are due, jobs/generate.py collects them (and their hosts'
rows) and this module applies the same rules, step for step (tests/generate_paths.py compares
the two on real crawls):

1. per host, by priority (crawl.crawldb.schedule.priority), then longest due, then URL: at most
   the host's cap (generate.max_urls_per_host or an override's max_urls_per_cycle, lowered to
   host_state.url_budget for a host that looked like a trap);
2. per pool (discovery: never answered, fetch_count 0; refresh: the rest), the pool's best by
   priority, then rank in its host, then longest due, then URL; each pool's rows within its
   quota (generate.budget_split) first, then the rest by rank in their pool, up to top_n;
3. the host's fresh robots.txt cache and sitemap list ride on its best row only.

Times are epoch seconds (floats) here; jobs/generate.py converts them.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable, Mapping

import numpy as np

from crawl.crawldb.schedule import epoch_micros, priority


def budget_split(top_n: int, discovery_share: float) -> tuple[int, int]:
    """(discovery quota, refresh quota) of a cycle of ``top_n`` URLs: ceil(share × top_n), the rest."""
    # round first: 0.7 × 10 is 7.000000000000001 in binary floating point, and must give 7
    discovery = min(int(top_n), max(0, math.ceil(round(float(discovery_share) * int(top_n), 9))))
    return discovery, int(top_n) - discovery


def select(due: list[Mapping[str, Any]], host_cap: Callable[[str], int], url_budget: Mapping[str, int | None],
           quotas: tuple[int, int], top_n: int, cfg: Mapping[str, Any], now: float) -> list[tuple[Mapping[str, Any], int]]:
    """(due row, rank in its host) of each URL the cycle fetches, best first. ``due``: the due
    URLs (jobs/generate.DUE_COLUMNS, next_fetch_at in epoch seconds) of hosts neither deferred
    nor backing off; ``url_budget``: a host's lowered budget, if it has one; ``quotas``: the
    (discovery, refresh) split of ``top_n``."""
    if not due:
        return []
    weights = priority([r["score"] for r in due], [r["depth"] for r in due], now,
                       [r["next_fetch_at"] for r in due], [r["fetch_interval_s"] for r in due],
                       score_exponent=float(cfg["schedule.score_exponent"]),
                       depth_decay=float(cfg["schedule.depth_decay"]), score_floor=float(cfg["schedule.score_floor"]))
    by_host: dict[str, list[tuple[float, Mapping[str, Any]]]] = defaultdict(list)
    for weight, row in zip(np.atleast_1d(weights).tolist(), due):
        by_host[row["host"]].append((weight, row))
    pools: dict[bool, list[tuple[float, int, Mapping[str, Any]]]] = {True: [], False: []}
    for host, rows in by_host.items():
        rows.sort(key=lambda wr: (-wr[0], wr[1]["next_fetch_at"], wr[1]["url"]))
        cap = host_cap(host)
        budget = url_budget.get(host)
        cap = min(cap, budget if budget is not None else cap)
        for rank, (weight, row) in enumerate(rows[:max(cap, 0)], 1):
            pools[(row["fetch_count"] or 0) == 0].append((weight, rank, row))
    ranked = []
    for discovery, quota in ((True, quotas[0]), (False, quotas[1])):
        best = sorted(pools[discovery], key=lambda c: (-c[0], c[1], c[2]["next_fetch_at"], c[2]["url"]))[:top_n]
        ranked += [((pool_rank > quota), pool_rank, discovery, rank, row)
                   for pool_rank, (_, rank, row) in enumerate(best, 1)]
    ranked.sort(key=lambda t: t[:3])
    return [(row, rank) for _, _, _, rank, row in ranked[:top_n]]


def with_hosts(chosen: list[tuple[Mapping[str, Any], int]], hosts: Mapping[str, Mapping[str, Any]],
               host_fields: tuple[str, ...], robots_fresh_after: float, sitemaps_fresh_after: float
               ) -> list[dict[str, Any]]:
    """The chosen rows with their host's backoff_s, and on the host's best row (rank) its
    robots.txt cache (status, fetched_at; ``_robots``: whether the body goes with them) if
    fetched after ``robots_fresh_after``, its sitemap list and when its sitemaps were last read
    if after ``sitemaps_fresh_after``."""
    best = {}
    for row, rank in chosen:
        best[row["host"]] = min(rank, best.get(row["host"], rank))
    out = []
    for row, rank in chosen:
        host = hosts.get(row["host"], {})
        robots_at, sitemaps_at = host.get("robots_fetched_at"), host.get("sitemaps_fetched_at")
        fresh = robots_at is not None and epoch_micros(robots_at) > epoch_micros(robots_fresh_after)
        values = {"robots_status": host.get("robots_status") if fresh else None,
                  "robots_fetched_at": robots_at if fresh else None,
                  "sitemaps": host.get("sitemaps"),
                  "sitemaps_fetched_at": sitemaps_at if sitemaps_at is not None
                  and epoch_micros(sitemaps_at) > epoch_micros(sitemaps_fresh_after) else None}
        first = best[row["host"]] == rank
        d = dict(row)
        d["backoff_s"] = host.get("backoff_s")
        d.update({name: (values[name] if first else None) for name in host_fields if name != "robots_txt"})
        d["_robots"] = first and fresh
        d["_rank"] = rank
        out.append(d)
    return out
