"""generate — select the due URLs into a new segment's fetchlist and lease them.

Inputs:   <crawl_root>/crawldb, <crawl_root>/hostdb, and the change hints pushed since the last
          generate (<crawl_root>/hints, `deltacrawl hint`): first they are applied to the crawldb
          (jobs/engine/hint_inbox.py: known URLs due at the hint's time, unknown ones inserted), so they
          count in this very segment.
Selects:  URLs (of any status: crawl/crawldb/statuses.py) with next_fetch_at <= now, no lease
          in force, whose host is not deferred or backing off, ranked by priority =
          importance × staleness (crawl.crawldb.schedule.priority, computed here as a Spark Column:
          importance = max(score, schedule.score_floor)^schedule.score_exponent ×
          schedule.depth_decay^depth; staleness = 1 + (now − next_fetch_at) / fetch_interval_s).
          A URL without an interval yet (fetch_interval_s null: never fetched) has staleness 1,
          as crawl.crawldb.schedule.staleness defines it: new URLs rank by importance alone, and a due
          known URL of the same importance never ranks below them (where the two meet: in a
          host's cap).
          1. Per host: at most generate.max_urls_per_host (or a fetch.host_overrides entry's
             max_urls_per_cycle, or the host's lowered host_state.url_budget if it looked like a
             trap), the host's highest priority first (then longest due, then URL).
          2. Budget split, among what the host caps left: of generate.top_n, at most
             ceil(generate.discovery_share × top_n) are discovery URLs (fetch_count = 0: never
             answered — unfetched, or failed before a first answer) and the rest refresh URLs
             (fetched before), each pool by priority (ties: the URL ranked higher in its host,
             which spreads equal priorities over hosts). A pool with fewer URLs than its share
             leaves the rest to the other (a cycle is never smaller than top_n while that many
             are due within their hosts' caps), and neither a flood of new links nor a large
             refresh backlog can starve the other.
          3. With generate.fill_budget (the default), when the due URLs leave places free, known
             URLs that are not due yet fill them (crawl.crawldb.selection.early_rule: last answer
             2xx or 304, fetched at least schedule.min_interval_s ago), after every due URL in
             their host's cap and in the cycle, ranked by importance × the share of their
             interval gone by (crawl.crawldb.schedule.early_staleness_rule): the whole budget
             is used every cycle, and pages that came due together spread out (issue 32).
          When at most generate.local_max_due URLs are due (or taken early), they are ranked on the driver by the
          same rules (local_fetchlist, crawl/crawldb/selection.py), else by a Spark query
          (spark_fetchlist).
Outputs:  <crawl_root>/segments/<segment_id>/fetchlist (Parquet, with the host's cached
          robots.txt answers (one per origin, each when fresher than fetch.robots_ttl_s), its
          sitemap list, when its sitemaps were last read if within sitemaps.ttl_s, and its
          addresses until they expire); then one commit writes the
          lease (lease_until = now + generate.lease_s, segment_id) onto the selected crawldb rows
          (an UPDATE listing their keys for a fetchlist chosen in memory, else a MERGE), and the
          marker segments/<segment_id>/_leased says it committed (fetch requires it).
          Run on its own, a row in <crawl_root>/cycles (jobs/engine/tracking.py), nothing due included.
Re-run:   safe: leased URLs are not selected again, so a second run makes a disjoint segment
          (or exits 99). If the lease fails, the segment is removed; if the job is killed
          between the two writes, the orphan has no _leased marker and fetch refuses it. Two
          generates at once: Delta lets one lease commit; the other removes its segment and
          exits 3 with one line (ConcurrentStepError: run generate again). If the other's lease
          committed before this one's began, this lease passes over the rows it holds: fewer rows
          leased than chosen, so this one gives its leases back, removes its segment and exits 3
          the same way.
Exit:     0 segment written · 99 nothing due (Airflow's skip code; jobs/engine/runtime.py says why not Nutch's 1)
          · 2 bad input · 3 failure (also: lost the race to a concurrent step; retry).
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/generate.py --crawl-root /data/crawl
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, StructField, StructType

from crawl.config import Config
from crawl.fetch.fetcher import HOST_FIELDS
from crawl.fetch.politeness import override_value
from crawl.crawldb import selection
from crawl.crawldb.segment_ids import new_segment_id
from crawl.crawldb.selection import budget_split
from crawl.crawldb.schedule import importance_rule, priority_rule, staleness_rule, valued_rule
from crawl.rule_ops import NUMPY_OPS, epoch_micros
from jobs.engine.column_ops import COLUMN_OPS, spark_order
from jobs.engine.commit_info import note_segment, writes_commits
from jobs.engine.runtime import add_run_options, run_spark_step
from jobs.engine.errors import EXIT_NOTHING_DUE, EXIT_OK, ConcurrentStepError, UserError, is_commit_conflict
from jobs.engine.crawl_root import CrawlRoot, check_segment_id, delete_path, write_marker
from jobs.engine.reads import (CachedFrames, arrow_rows, fits_driver, projected_arrow, read_host_state,
                               read_url_state, whole_arrow)
from jobs.engine.schemas import (FETCHLIST_SCHEMA, FETCHLIST_TIMES, HOST_STATE_TIMES, epoch_schema, from_epoch,
                                 from_epoch_col, to_epoch)
from jobs.engine.tables import ensure_state_tables, table_exists
from jobs.engine.hint_inbox import consume_hints
from jobs.engine.segment_owners import OwnedSegments
from jobs.engine.host_caps import per_host_cap
from jobs.engine.tracking import record_step
from jobs.engine.writes import merge_counts, merge_mode, run_concurrently

LEASE_KEY = "t.host_bucket = s.host_bucket AND t.url_hash = s.url_hash AND t.url = s.url"


@dataclass
class GenerateResult:
    segment_id: str | None
    urls: int
    hosts: int

    def summary(self) -> str:
        if self.segment_id is None:
            return "nothing due"
        return f"segment {self.segment_id}: {self.urls} URLs from {self.hosts} hosts"


# The crawldb columns select_fetchlist reads: keys, the priority's inputs (score, depth,
# next_fetch_at, fetch_interval_s, fetch_count; status and last_fetched_at: early_col) and what
# the fetchlist carries.
DUE_COLUMNS = ("url", "url_hash", "host", "host_bucket", "depth", "score", "next_fetch_at", "fetch_interval_s",
               "fetch_count", "etag", "last_modified", "redirect_hops", "status", "last_fetched_at", "refresh_value",
               "refresh_slope")
DUE_TIMES = ("next_fetch_at", "last_fetched_at")


def _epoch(name: str) -> Column:
    return F.unix_micros(F.col(name)) / F.lit(1e6)


def early_col(cfg: Config, now: float) -> Column:
    """crawl.crawldb.selection.early_rule as a Column: the row may fill the budget before it is due."""
    return selection.early_rule(F.col("status"), _epoch("next_fetch_at"), _epoch("last_fetched_at"), float(now),
                                float(cfg.schedule.min_interval_s), COLUMN_OPS)


def _due_regardless_of_host(url_state: DataFrame, cfg: Config, now: float) -> DataFrame:
    """crawl.crawldb.selection.fetchable_rule as a filter (the held-back hosts are select_due's)."""
    early = early_col(cfg, now) if cfg.generate.fill_budget else F.lit(False)
    return url_state.filter(selection.fetchable_rule(F.col("next_fetch_at"), F.col("lease_until"),
                                                     from_epoch_col(F.lit(now)), early, COLUMN_OPS))


def _held_back(now: float) -> Column:
    """held_back_rule of the host_state row at ``now``, as a Column."""
    return held_back_rule(F.col("deferred_until"), F.col("backoff_until"), from_epoch_col(F.lit(now)), COLUMN_OPS)


def select_due(url_state: DataFrame, host_state: DataFrame, cfg: Config, now: float) -> DataFrame:
    """URLs eligible for fetching now (see module docstring)."""
    held_back = host_state.filter(_held_back(now)).select("host_bucket", "host")
    return _due_regardless_of_host(url_state, cfg, now).join(held_back, ["host_bucket", "host"], "left_anti")


def largest_host_cap(cfg: Config) -> int:
    """The largest per-host cap any host can have (per_host_cap; a trap's url_budget only lowers
    it). As a literal bound on the rank in its host it lets Spark keep only each host's best rows
    in every partition before the shuffle (WindowGroupLimit, up to
    spark.sql.optimizer.windowGroupLimitThreshold, 1,000 by default), so a giant host's due URLs
    are neither shuffled nor sorted whole in one task."""
    return max([cfg.generate.max_urls_per_host]
               + [int(e["max_urls_per_cycle"]) for e in cfg.fetch.host_overrides if "max_urls_per_cycle" in e])


def _priority_settings(cfg: Config) -> dict[str, float]:
    return {"score_exponent": cfg.schedule.score_exponent, "depth_decay": cfg.schedule.depth_decay,
            "score_floor": cfg.schedule.score_floor}


def importance_col(cfg: Config) -> Column:
    """crawl.crawldb.schedule.importance_rule of the row's score and depth, as a Column."""
    return importance_rule(F.col("score").cast("double"), F.col("depth").cast("double"), COLUMN_OPS,
                           **_priority_settings(cfg))


def staleness_col(now: float) -> Column:
    """crawl.crawldb.schedule.staleness_rule of the row at ``now``, as a Column (next_fetch_at in
    epoch seconds, as the driver path reads it: jobs.engine.schemas.to_epoch)."""
    due_at = F.unix_micros(F.col("next_fetch_at")) / F.lit(1e6)
    return staleness_rule(float(now), due_at, F.col("fetch_interval_s").cast("double"), COLUMN_OPS)


def priority_col(cfg: Config, now: float) -> Column:
    """crawl.crawldb.schedule.priority_rule as a Column (higher first: a URL with a refresh value
    by what its fetch buys now, the others by importance × staleness, 0 = not due, or for a row
    taken early how close it is to due). Reads score, depth, next_fetch_at, fetch_interval_s,
    status, last_fetched_at, refresh_value and refresh_slope."""
    return priority_rule(F.col("score").cast("double"), F.col("depth").cast("double"), float(now),
                         _epoch("next_fetch_at"), F.col("fetch_interval_s").cast("double"), COLUMN_OPS,
                         early=early_col(cfg, now), status=F.col("status"), refresh_value=F.col("refresh_value"),
                         refresh_slope=F.col("refresh_slope"), last_fetched_at=_epoch("last_fetched_at"),
                         **_priority_settings(cfg))


def valued_col() -> Column:
    """crawl.crawldb.schedule.valued_rule: the row ranks by its refresh value."""
    return valued_rule(F.col("status"), F.col("refresh_value"), F.col("refresh_slope"), _epoch("last_fetched_at"),
                       F.col("fetch_interval_s").cast("double"), COLUMN_OPS)


def is_discovery_col() -> Column:
    """crawl.crawldb.selection.is_discovery_rule: the URL belongs to the discovery pool."""
    return selection.is_discovery_rule(F.col("fetch_count"), COLUMN_OPS)


def split_budget(capped: DataFrame, top_n: int, discovery_share: float,
                 order: list[Column] | None = None) -> DataFrame:
    """The rows of ``capped`` (with a boolean ``_discovery``) that fill a cycle of ``top_n``:
    each pool's best rows by ``order`` (crawl.crawldb.selection.POOL_ORDER) up to its quota
    (budget_split), and a pool's unused quota goes to the other pool (selection.FILL_ORDER)."""
    order = spark_order(selection.POOL_ORDER) if order is None else order
    quotas = budget_split(top_n, discovery_share)
    # No pool can take more than top_n, so each pool's top_n best rows are all that can be
    # chosen: two bounded top-k sorts (TakeOrderedAndProject), never a sort of every due URL.
    best = (capped.filter(F.col("_discovery")).orderBy(*order).limit(top_n)
            .unionByName(capped.filter(~F.col("_discovery")).orderBy(*order).limit(top_n)))
    # At most 2 × top_n rows from here on. First every row within its pool's quota, then the
    # rest by rank in its pool: when both pools fill their quotas, the quotas add up to top_n
    # and nothing else is taken; when one pool is short, only the other has rows left over,
    # and its next best fill the places the short pool left.
    in_pool = Window.partitionBy("_discovery").orderBy(*order)
    return (best.withColumn("_pool_rank", F.row_number().over(in_pool))
            .withColumn("_over_quota", selection.over_quota_rule(F.col("_pool_rank"), F.col("_discovery"), quotas,
                                                                 COLUMN_OPS))
            .orderBy(*spark_order(selection.FILL_ORDER))
            .limit(top_n)
            .drop("_pool_rank", "_over_quota"))


def select_fetchlist(due: DataFrame, host_state: DataFrame, cfg: Config, segment_id: str,
                     now: float) -> DataFrame:
    """Rank by priority, cap per host, split the budget between discovery and refresh, attach the
    fresh robots.txt cache; one row per URL to fetch (see the module docstring)."""
    ranked = (due.withColumn("_priority", priority_col(cfg, now)).withColumn("_discovery", is_discovery_col())
              .withColumn("_early", early_col(cfg, now)).withColumn("_valued", valued_col()))
    per_host_pool = Window.partitionBy("host", "_discovery").orderBy(*spark_order(selection.HOST_POOL_RANK))
    per_host = Window.partitionBy("host").orderBy(*spark_order(selection.HOST_RANK))
    # a host flagged as a trap has a lowered budget (host_state.url_budget, set by update)
    budgets = host_state.filter(F.col("url_budget").isNotNull()).select("host_bucket", "host", "url_budget")
    capped = (ranked.withColumn("_host_pool_rank", F.row_number().over(per_host_pool))
              # a row past the cap in its own pool is past it in its host too (literal bound: see
              # largest_host_cap)
              .filter(F.col("_host_pool_rank") <= F.lit(largest_host_cap(cfg)))
              .join(F.broadcast(budgets), ["host_bucket", "host"], "left")
              .withColumn("_rank", F.row_number().over(per_host))
              .filter(F.col("_rank") <= F.lit(largest_host_cap(cfg)))  # a literal: see largest_host_cap
              .filter(F.col("_rank") <= selection.host_cap_rule(per_host_cap(cfg), F.col("url_budget"), COLUMN_OPS))
              .drop("url_budget"))
    top = split_budget(capped, cfg.generate.top_n, cfg.generate.discovery_share)
    def fetched_after(column: str, ttl_s: float) -> Column:
        return selection.fetched_after_rule(F.col(column), from_epoch_col(F.lit(now - ttl_s)), COLUMN_OPS)

    fresh = fetched_after("robots_fetched_at", float(cfg.fetch.robots_ttl_s))
    sitemaps_fresh = fetched_after("sitemaps_fetched_at", float(cfg.sitemaps.ttl_s))
    # the other origin's answer by its own time (epoch seconds in its JSON: selection.json_fetched_at)
    other_fresh = selection.fetched_after_rule(F.get_json_object("robots_other", "$.fetched_at").cast("double"),
                                               F.lit(now - float(cfg.fetch.robots_ttl_s)), COLUMN_OPS)
    known = selection.unexpired_rule(F.col("addresses_expire_at"), from_epoch_col(F.lit(now)), COLUMN_OPS)
    robots = host_state.select(
        "host_bucket", "host", "backoff_s", "sitemaps",
        *[F.when(fresh, F.col(c)).alias(c) for c in ("robots_status", "robots_txt", "robots_fetched_at",
                                                      "robots_scheme")],
        F.when(other_fresh, F.col("robots_other")).alias("robots_other"),
        *[F.when(known, F.col(c)).alias(c) for c in ("addresses", "addresses_expire_at")],
        F.when(sitemaps_fresh, F.col("sitemaps_fetched_at")).alias("sitemaps_fetched_at"))
    # the host's robots.txt (up to fetch.robots_max_bytes) and sitemap list ride on its best row
    # only, not on each of its URLs: the fetcher reads them from that row (crawl/fetch/fetcher.py)
    first = F.row_number().over(Window.partitionBy("host").orderBy("_rank")) == 1
    rows = (top.join(robots, ["host_bucket", "host"], "left")
            .withColumn("segment_id", F.lit(segment_id))
            .withColumns({c: F.when(first, F.col(c)) for c in HOST_FIELDS})
            .select(*FETCHLIST_SCHEMA.fieldNames(), "_rank"))
    return rows.repartition("host").sortWithinPartitions("host", "_rank").drop("_rank")


@dataclass
class Fetchlist(CachedFrames):
    """A segment's fetchlist rows (FETCHLIST_SCHEMA), and, when it was chosen in memory
    (local_fetchlist), its URL and host counts and its (host_bucket, url_hash) keys."""
    rows: DataFrame
    counts: tuple[int, int] | None = None
    lease_keys: list[tuple[int, int]] | None = None
    cached: list[DataFrame] = field(default_factory=list)


def spark_fetchlist(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str,
                    now: float) -> Fetchlist:
    # Both inputs are read once and cached: the fetchlist query reads the due URLs twice (one
    # top-k per pool) and the hostdb three times, and Delta plans every scan of a table with a
    # Spark job of its own ("Filtering files for query"), about fifty for this query, which
    # made planning most of a small generate's time (docs/decisions.md "Cycle cost").
    # Only the due rows' columns the fetchlist query reads are cached: at 10 M URLs the due rows
    # with all ~40 columns outgrew the default driver's memory and spilled (the query took 77 s
    # against 45 s with these 12: docs/decisions.md "Fourth run: a quiet machine").
    host_state = read_host_state(spark, root).cache()
    due = select_due(read_url_state(spark, root), host_state, cfg, now).select(*DUE_COLUMNS).cache()
    return Fetchlist(select_fetchlist(due, host_state, cfg, segment_id, now), cached=[due, host_state])


_HOST_COLUMNS = ("host_bucket", "host", "url_budget", "backoff_s", "sitemaps", "robots_status", "robots_fetched_at",
                 "robots_scheme", "robots_other", "addresses", "addresses_expire_at", "sitemaps_fetched_at",
                 "deferred_until", "backoff_until")


# every host with its robots.txt body, as the driver path reads the hostdb whole
_ALL_HOST_COLUMNS = (*_HOST_COLUMNS, "robots_txt")
_ALL_HOST_TIMES = tuple(c for c in HOST_STATE_TIMES if c in _ALL_HOST_COLUMNS)


def _hosts_in_table(table: pa.Table) -> dict[str, dict]:
    """{host: host row} of a whole hostdb read into Arrow (_ALL_HOST_COLUMNS, epoch times)."""
    return {r["host"]: r for r in arrow_rows(table, pc.is_valid(table["host"]))}


def _host_rows(spark: SparkSession, host_state: DataFrame, names: list[str] | None) -> dict[str, dict]:
    """{host: host row (epoch times)} of the hostdb ``host_state``: of the hosts ``names`` without
    their robots.txt bodies, or (None) of every host, bodies included (a whole read, through Arrow;
    local_fetchlist reads the hostdb itself with reads.whole_arrow, the same rows)."""
    if names is None:
        return _hosts_in_table(projected_arrow(host_state, _ALL_HOST_COLUMNS, _ALL_HOST_TIMES))
    hosts = to_epoch(host_state.select(*_HOST_COLUMNS), [c for c in HOST_STATE_TIMES if c in _HOST_COLUMNS])
    return {r["host"]: r.asDict() for r in hosts.filter(F.col("host").isin(names)).collect()}


def _due_rows(url_state: DataFrame, cfg: Config, now: float, limit: int, whole: bool) -> list[dict]:
    """The due URLs of the crawldb ``url_state`` (DUE_COLUMNS, epoch times), and with
    generate.fill_budget those that may be taken early, leased or held back or not; at most
    ``limit`` + 1 of them (more means: too many for the driver). ``whole``: read the table whole
    through Arrow (it fits the driver) and filter there (_due_in_table), else with the due filter."""
    if not whole:
        due = _due_regardless_of_host(url_state, cfg, now).select(*DUE_COLUMNS)
        return [r.asDict() for r in to_epoch(due, DUE_TIMES).limit(limit + 1).collect()]
    return _due_in_table(projected_arrow(url_state, DUE_COLUMNS, DUE_TIMES, _DUE_MICROS), cfg, now, limit)


# the times the due rule compares, as whole microseconds (exact in a double)
_DUE_MICROS = {"_due_us": "next_fetch_at", "_lease_us": "lease_until"}


def _due_in_table(table: pa.Table, cfg: Config, now: float, limit: int) -> list[dict]:
    """_due_rows of a whole crawldb read into Arrow: DUE_COLUMNS with DUE_TIMES in epoch seconds
    and _DUE_MICROS's columns (reads.whole_arrow), filtered on the driver."""
    def wanted(t: pa.Table) -> pa.Array:
        # the rules on whole columns (numpy): times as whole microseconds (exact in a double) and as
        # epoch seconds where early_rule reads them, as Spark's filter has them
        status = t["status"].to_numpy()
        with np.errstate(invalid="ignore"):  # null times are NaN, and compare as false
            early = (selection.early_rule(status, t["next_fetch_at"].to_numpy(), t["last_fetched_at"].to_numpy(),
                                          float(now), float(cfg.schedule.min_interval_s), NUMPY_OPS)
                     if cfg.generate.fill_budget else False)
            keep = selection.fetchable_rule(t["_due_us"].to_numpy().astype(float),
                                            t["_lease_us"].to_numpy().astype(float), float(epoch_micros(now)),
                                            early, NUMPY_OPS)
        return pa.array(np.broadcast_to(np.asarray(keep, dtype=bool), (t.num_rows,)))

    rows = arrow_rows(table, wanted(table))
    return [{c: r[c] for c in DUE_COLUMNS} for r in rows[:limit + 1]]


def held_back_rule(deferred_until, backoff_until, now, ops):
    """The host is deferred (Crawl-delay too large) or backing off (429/503, robots.txt
    unreachable) at ``now``: its URLs wait. Times as the path compares them: timestamp Columns
    and a timestamp literal in Spark, whole microseconds (crawl.rule_ops micros) on the driver."""
    return ((ops.not_null(deferred_until) & (deferred_until > now))
            | (ops.not_null(backoff_until) & (backoff_until > now)))


def choose_in_memory(due: list[dict], hosts: Mapping[str, Mapping[str, Any]], cfg: Config,
                     segment_id: str, now: float, with_bodies: bool) -> list[dict]:
    """The fetchlist rows (FETCHLIST_SCHEMA fields, epoch times, with ``_robots`` and ``_rank``)
    chosen on the driver from the due URLs and their hosts' rows (_due_rows, _host_rows): the
    held-back hosts' URLs left out, then crawl/crawldb/selection.py. ``with_bodies``: ``hosts``
    hold the robots.txt bodies (else robots_txt is None and ``_robots`` says which rows get it)."""
    names = sorted({r["host"] for r in due})
    held_back = {h for h in names if h in hosts
                 and held_back_rule(NUMPY_OPS.micros(hosts[h]["deferred_until"]), NUMPY_OPS.micros(hosts[h]["backoff_until"]),
                                    epoch_micros(now), NUMPY_OPS)}
    due = [r for r in due if r["host"] not in held_back]
    chosen = selection.select(due, lambda host: override_value(cfg, "max_urls_per_cycle", cfg.generate.max_urls_per_host, host),
                              {h: hosts[h]["url_budget"] for h in names if h in hosts},
                              budget_split(cfg.generate.top_n, cfg.generate.discovery_share),
                              cfg.generate.top_n, cfg, now)
    rows = selection.with_hosts(chosen, hosts, HOST_FIELDS, now - float(cfg.fetch.robots_ttl_s),
                                now - float(cfg.sitemaps.ttl_s), now)
    for r in rows:
        r["segment_id"] = segment_id
        r["robots_txt"] = hosts[r["host"]]["robots_txt"] if with_bodies and r["_robots"] else None
    return rows


def in_memory_frame(spark: SparkSession, rows: list[dict]) -> DataFrame:
    """choose_in_memory's rows as a DataFrame: FETCHLIST_SCHEMA (timestamps), ``_robots``, ``_rank``."""
    columns = FETCHLIST_SCHEMA.fieldNames()
    schema = StructType(epoch_schema(FETCHLIST_SCHEMA).fields
                        + [StructField("_robots", BooleanType()), StructField("_rank", IntegerType())])
    return from_epoch(spark.createDataFrame([tuple(r[c] for c in columns) + (r["_robots"], r["_rank"]) for r in rows],
                                            schema, verifySchema=False), FETCHLIST_TIMES)


def local_fetchlist(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str,
                    now: float) -> Fetchlist | None:
    """The fetchlist chosen on the driver (choose_in_memory, crawl/crawldb/selection.py) when at most
    generate.local_max_due URLs are due. Two reads side by side instead of the planned query:
    the due URLs, and the whole hostdb with its robots.txt bodies; each table read whole through
    Arrow if it fits the driver (crawldb.local_read_max_mb: no file-listing jobs for a filter,
    and the bodies need no join). On a larger hostdb, the due hosts' rows are read after the due
    URLs, without the bodies, which join the chosen rows as they are written. None when more are
    due (in hosts held back or not): spark_fetchlist chooses then."""
    limit = cfg.generate.local_max_due
    if limit <= 0:
        return None

    def due_rows() -> list[dict]:
        if not fits_driver(spark, cfg, root.crawldb):
            return _due_rows(read_url_state(spark, root), cfg, now, limit, False)
        return _due_in_table(whole_arrow(spark, cfg, root, root.crawldb, DUE_COLUMNS, DUE_TIMES, _DUE_MICROS),
                             cfg, now, limit)

    def all_hosts() -> dict[str, dict] | None:
        if not fits_driver(spark, cfg, root.hostdb):
            return None
        return _hosts_in_table(whole_arrow(spark, cfg, root, root.hostdb, _ALL_HOST_COLUMNS, _ALL_HOST_TIMES))

    due, hosts = run_concurrently(due_rows, all_hosts)
    if len(due) > limit:
        return None
    names = sorted({r["host"] for r in due})
    with_bodies = hosts is not None
    if not with_bodies:
        hosts = _host_rows(spark, read_host_state(spark, root), names) if names else {}
    rows = choose_in_memory(due, hosts, cfg, segment_id, now, with_bodies)
    columns = FETCHLIST_SCHEMA.fieldNames()
    local = in_memory_frame(spark, rows)
    if not with_bodies:
        bodies = read_host_state(spark, root).select("host_bucket", "host", F.col("robots_txt").alias("_body"))
        local = (local.join(bodies, ["host_bucket", "host"], "left")
                 .withColumn("robots_txt", F.when(F.col("_robots"), F.col("_body"))))
    written = (local.select(*columns, "_rank").repartition("host").sortWithinPartitions("host", "_rank")
               .drop("_rank"))
    return Fetchlist(written, (len(rows), len({r["host"] for r in rows})),
                     lease_keys=sorted({(r["host_bucket"], r["url_hash"]) for r in rows}))


def fetchlist(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str, now: float) -> Fetchlist:
    return local_fetchlist(spark, cfg, root, segment_id, now) or spark_fetchlist(spark, cfg, root, segment_id, now)


def _free(now: float, column: str = "lease_until") -> str:
    """SQL: the row holds no lease in force at ``now`` (its lease_until is ``column``)."""
    return f"({column} IS NULL OR {column} <= timestamp_micros({epoch_micros(now)}))"


def _table_sql(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def lease_in_place(spark: SparkSession, root: CrawlRoot, keys: list[tuple[int, int]], segment_id: str,
                   until: float, now: float) -> int:
    """Lease the crawldb rows of ``keys`` ((host_bucket, url_hash) pairs of a fetchlist chosen in
    memory) to ``segment_id`` until ``until``, unless a lease is in force on them; the number of
    rows leased. One UPDATE whose condition lists the keys: no source to join, 1.2 s against
    1.9 s for the MERGE on the demo's cycle-2 crawldb (docs/decisions.md "Cycle cost, seventh
    round"). (A URL whose 64-bit url_hash another URL of its bucket shares would be leased too,
    for nothing: no segment fetches it, and its lease ends.)"""
    check_segment_id(segment_id)  # it is written into the statement
    buckets = ", ".join(str(int(b)) for b in sorted({b for b, _ in keys}))
    hashes = ", ".join(str(int(h)) for h in sorted({h for _, h in keys}))
    rows = spark.sql(f"UPDATE {_table_sql(root.crawldb)} "
                     f"SET lease_until = timestamp_micros({epoch_micros(until)}), segment_id = '{segment_id}' "
                     f"WHERE host_bucket IN ({buckets}) AND url_hash IN ({hashes}) AND {_free(now)}").collect()
    return int(rows[0]["num_affected_rows"]) if rows else 0


def lease_by_merge(spark: SparkSession, cfg: Config, root: CrawlRoot, keys: DataFrame, until: float,
                   now: float) -> int:
    """Lease the crawldb rows of ``keys`` (host_bucket, url_hash, url, segment_id) to their
    segment until ``until``, unless a lease is in force on them; the number of rows leased."""
    with merge_mode(spark, cfg, root.crawldb):
        return merge_counts(DeltaTable.forPath(spark, root.crawldb).alias("t")
                            .merge(keys.alias("s"), LEASE_KEY)
                            .whenMatchedUpdate(condition=_free(now, "t.lease_until"),
                                               set={"lease_until": from_epoch_col(F.lit(until)),
                                                    "segment_id": F.col("s.segment_id")})
                            .execute())["updated"]


def release_leases(spark: SparkSession, root: CrawlRoot, segment_id: str) -> None:
    """End every lease ``segment_id`` holds (its rows are due again as they were)."""
    check_segment_id(segment_id)  # it is written into the statement
    spark.sql(f"UPDATE {_table_sql(root.crawldb)} SET lease_until = NULL "
              f"WHERE segment_id = '{segment_id}' AND lease_until IS NOT NULL").collect()


def _remove_segment(spark: SparkSession, root: CrawlRoot, segment_id: str, owner: OwnedSegments | None) -> None:
    if owner is not None:
        owner.done(segment_id)
    delete_path(spark, root.segment(segment_id))


@writes_commits("generate")
def run(spark: SparkSession, cfg: Config, root: CrawlRoot, now: float | None = None,
        owner: OwnedSegments | None = None) -> GenerateResult:
    """``owner``: the crawl driver's segments (deltacrawl crawl): its record goes into the new segment
    before the lease commits, so a crawl restarted after its death finds whose it was
    (jobs/engine/segment_owners.py)."""
    now = time.time() if now is None else now
    if not table_exists(spark, root.crawldb):
        raise UserError(f"no crawldb in {root.root}: run 'deltacrawl inject SEEDS_FILE' first")
    ensure_state_tables(spark, root)  # crawl roots of older versions get the new columns
    consume_hints(spark, cfg, root)  # pushed change hints count in this very segment
    segment_id = new_segment_id(now)
    note_segment(spark, segment_id)  # the lease's commit names the segment
    chosen = fetchlist(spark, cfg, root, segment_id, now)
    path = root.fetchlist(segment_id)
    try:
        chosen.rows.write.mode("errorifexists").parquet(path)
    finally:
        chosen.release()
    written = spark.read.parquet(path)
    if chosen.counts is None:
        counts = written.agg(F.count("*").alias("urls"), F.countDistinct("host").alias("hosts")).collect()[0]
        n_urls, n_hosts = int(counts["urls"]), int(counts["hosts"])
    else:
        n_urls, n_hosts = chosen.counts
    if n_urls == 0:
        _remove_segment(spark, root, segment_id, owner)
        return GenerateResult(None, 0, 0)
    if owner is not None:
        owner.mark(segment_id)  # before the lease: no leased segment of a crawl is without its record
    until = now + float(cfg.generate.lease_s)
    try:
        if chosen.lease_keys is not None:
            leased = lease_in_place(spark, root, chosen.lease_keys, segment_id, until, now)
        else:
            leased = lease_by_merge(spark, cfg, root, written.select("host_bucket", "url_hash", "url", "segment_id"),
                                    until, now)
        if leased < n_urls:
            # Another generate leased some of these URLs after this one read them: the commit
            # above passed over those rows. This segment must not fetch them; it gives back the
            # rest (killed before that, they stay leased until the lease ends, and without a
            # _leased marker the segment is never fetched).
            release_leases(spark, root, segment_id)
            raise ConcurrentStepError(f"another generate leased {n_urls - leased} of this segment's {n_urls} URLs "
                                      "while it chose them: its leases are given back and the segment is removed; "
                                      "run generate again")
    except ConcurrentStepError:
        _remove_segment(spark, root, segment_id, owner)
        raise
    except Exception as exc:
        # the lease did not commit: fetch must never see this fetchlist (its URLs may be leased to
        # another segment)
        _remove_segment(spark, root, segment_id, owner)
        if not is_commit_conflict(exc):
            raise
        # another step committed to the crawldb since this one read it (two generates at once)
        raise ConcurrentStepError("another step committed to the crawldb while this generate leased its URLs "
                                  "(two generates at once?): nothing was leased and the segment is removed; "
                                  "run generate again") from None
    except BaseException:  # interrupted: whether the lease committed is unknown; no fetch either way
        _remove_segment(spark, root, segment_id, owner)
        raise
    write_marker(spark, root.leased_marker(segment_id), f"leased until {until}\n")
    result = GenerateResult(segment_id, n_urls, n_hosts)
    return result


def configure(parser) -> None:
    parser.description = "Select due URLs into a new segment and lease them (exit 99 if nothing is due)."
    add_run_options(parser)


def step(spark, cfg, root, args) -> int:
    result = record_step(spark, cfg, root, "generate", lambda: run(spark, cfg, root), args)
    if result.segment_id is None:
        return EXIT_NOTHING_DUE
    print(result.segment_id)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_spark_step("deltacrawl generate", argv, configure, step)


if __name__ == "__main__":
    sys.exit(main())
