"""update — merge one fetched segment into the crawldb and hostdb.

Inputs:   <crawl_root>/segments/<id>/fetched, <crawl_root>/crawldb, <crawl_root>/hostdb.
Outputs:  ONE Delta MERGE into crawldb: each attempted URL gets its new state from
          crawl.crawldb.status.apply_fetch (status, http status, timestamps, content hash,
          next_fetch_at, canonical hint, noindex; lease released); what the segment discovered
          (jobs/engine/discover.py: outlinks, redirect targets, canonical hints, sitemap entries —
          deduplicated, anti-joined with the crawldb, within each host's total budget) is
          inserted as unfetched with depth + 1, an OPIC-like score and its in-link count; known
          URLs with a newer sitemap lastmod become due now.
          Then one MERGE into hostdb (robots cache, sitemaps, crawl-delay, deferral, backoff,
          counters, link rejections by reason, URLs per host, the trap budget), one append to
          warc_index (url -> WARC file, its URI, offset), then the marker segments/<id>/_updated.
          What the writes hold is computed on the driver for a segment of at most
          update.local_max_urls URLs (local_sources, crawl/crawldb/in_memory.py: the same rules,
          from four reads bounded by the segment), by Spark queries otherwise (spark_sources).
Re-run:   safe, changes nothing. With the marker present the job stops at once. Without it (the
          job died before writing it), each table takes the segment's write once: every write
          carries Delta's idempotent-write pair (application id deltacrawl-update-<segment>,
          version 1; jobs/engine/writes.commit_once), so a table that committed it skips it, whatever
          other steps committed in between. Such a run (segments/<id>/_update_started is there)
          counts the touched hosts' url_count from the crawldb instead of adding the new URLs
          it finds: those the dead run inserted are known by now. The MERGE conditions guard
          too: a URL is updated only while it is still leased to this segment, a host only if
          its last_segment_id is not this segment.
          A segment whose dedup started and did not finish (the marker _dedup_started without
          _deduped: jobs/dedup.py) is refused: run dedup again first.
Exit:     0 done (or already done) · 2 unknown segment, segment not fetched, or its dedup
          unfinished · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/update.py 20261129120000-a1b2c3 --crawl-root /data/crawl
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from crawl.crawldb import held_back, in_memory, schedule, schedule_fit
from crawl.crawldb.segment_ids import segment_time
from crawl.crawldb.selection import budget_split
from crawl.crawldb.status import (DUPLICATE, FETCHED, NOTMODIFIED, UNFETCHED, apply_fetch,
                                  SchedulePolicy, mark_duplicate, schedule_policy)
from crawl.fetch.warc_store import warc_location_uri
from jobs.engine import discover
from jobs.engine.column_ops import COLUMN_OPS
from jobs.engine.commit_info import writes_commits
from jobs.engine.runtime import run_segment_step
from jobs.engine.errors import UserError
from jobs.engine.logs import step_logger
from jobs.engine.discover import HOST_TOTAL_CAP
from jobs.engine.host_caps import per_host_cap
from jobs.engine.crawl_root import CrawlRoot, list_segments, path_exists, write_marker
from jobs.engine.reads import (CachedFrames, arrow_rows, fits_driver, projected_arrow, read_host_state, read_url_state,
                               url_counts, whole_arrow)
from jobs.engine.schemas import (FETCHED_SCHEMA, HOST_STATE_SCHEMA, URL_STATE_SCHEMA, URL_STATE_TIMES, epoch_schema, from_epoch,
                                 from_epoch_col, to_epoch)
from jobs.engine.tables import ensure_tables
from jobs.engine.writes import (append_once, commit_once, local_merge_sources, merge_counts, merge_mode, run_concurrently,
                         txn_app_id)

URL_KEY = "t.host_bucket = s.host_bucket AND t.url_hash = s.url_hash AND t.url = s.url"
_OUTCOME_FIELDS = ("fetch_status", "http_status", "fetched_at", "content_hash", "content_type", "etag",
                   "last_modified", "redirect_to", "error", "parse_error", "warc_file", "warc_offset",
                   "warc_length", "canonical", "noindex", "text_hash", "simhash")
_URL_FIELDS = URL_STATE_SCHEMA.fieldNames()


@dataclass
class UpdateResult:
    segment_id: str
    already_applied: bool
    updated: int = 0
    new_urls: int = 0
    hosts: int = 0
    archived: int = 0

    def summary(self) -> str:
        if self.already_applied:
            return f"segment {self.segment_id} was already applied; nothing to do"
        return (f"segment {self.segment_id}: {self.updated} URLs updated, {self.new_urls} new URLs, "
                f"{self.hosts} hosts, {self.archived} WARC records indexed")


def _apply_rows(rows: Iterator[Any], policy: SchedulePolicy) -> Iterator[tuple]:
    for row in rows:
        d = row.asDict()
        state = {name: d[name] for name in _URL_FIELDS}
        outcome = {name: d["o_" + name] for name in _OUTCOME_FIELDS}
        new = apply_fetch(state, outcome, policy)
        if d["o_dup_of"]:  # jobs/dedup.py found its content on another page
            new = mark_duplicate(new, d["o_dup_of"], policy)
        yield tuple(new[name] for name in _URL_FIELDS)


def updated_states(spark: SparkSession, url_state: DataFrame, outcomes: DataFrame, policy: SchedulePolicy) -> DataFrame:
    """New crawldb rows for the URLs of this segment still leased to it (pure transitions by
    ``policy``; ``outcomes`` carries dedup's ``dup_of``, null for pages that are not duplicates)."""
    renamed = outcomes.select("host_bucket", "url_hash", "url", "segment_id",
                              *[F.col(c).alias("o_" + c) for c in (*_OUTCOME_FIELDS, "dup_of")])
    current = to_epoch(url_state.filter(F.col("lease_until").isNotNull()), URL_STATE_TIMES)
    joined = current.join(renamed, ["host_bucket", "url_hash", "url", "segment_id"], "inner")
    rdd = joined.rdd.mapPartitions(lambda it: _apply_rows(it, policy))
    return from_epoch(spark.createDataFrame(rdd, epoch_schema(URL_STATE_SCHEMA), verifySchema=False), URL_STATE_TIMES)


def _dedup_result(spark: SparkSession, root: CrawlRoot, segment_id: str) -> DataFrame | None:
    """dedup's answer for the segment (url_hash, url, dup_of), None if dedup did not run."""
    if not path_exists(spark, root.dedup_result(segment_id)):
        return None
    return spark.read.parquet(root.dedup_result(segment_id)).select("url_hash", "url", "dup_of")


def with_duplicates(outcomes: DataFrame, dups: DataFrame | None, cfg: Config) -> DataFrame:
    """The segment's outcomes with dedup's ``dup_of`` (``dups``: url_hash, url, dup_of; None if
    dedup did not run) and the score of crawl.crawldb.in_memory.duplicate_score_rule: the share
    a duplicate's links get is smaller."""
    if dups is None:
        return outcomes.withColumn("dup_of", F.lit(None).cast("string"))
    factor = cfg.dedup.duplicate_link_factor
    return (outcomes.join(dups, ["url_hash", "url"], "left")
            .withColumn("score", in_memory.duplicate_score_rule(F.col("score"), F.col("dup_of"), factor, COLUMN_OPS)))




def orphaned_duplicates(url_state: DataFrame, outcomes: DataFrame, now: float) -> DataFrame:
    """Hints (keys, next_fetch_at = now) for the duplicates of pages that no longer hold the
    content those duplicates copy: pages this segment found gone or redirected, pages whose text
    changed (another text_hash than in the crawldb), and pages that became duplicates themselves.
    A duplicate of such a page is fetched again at once and judged by dedup again (against the
    pages that hold its content now, or none) instead of at its long re-check: so dup_of never
    keeps naming a page with other content, or a duplicate of a third page. Duplicates fetched
    in this segment are left out: their own outcome updates them."""
    previous = url_state.select("url_hash", "url", F.col("text_hash").alias("_old_text"))
    lost = (outcomes.join(previous, ["url_hash", "url"], "left")
            .filter(in_memory.lost_content_rule(F.col("fetch_status"), F.col("text_hash"), F.col("_old_text"),
                                                F.col("dup_of"), COLUMN_OPS))
            .select(F.col("url").alias("dup_of")).distinct())
    fetched = outcomes.select("url_hash", "url")
    return (url_state.filter(F.col("status") == DUPLICATE).join(lost, "dup_of", "left_semi")
            .join(fetched, ["url_hash", "url"], "left_anti")
            .select("host_bucket", "url_hash", "url", from_epoch_col(F.lit(now)).alias("next_fetch_at")))


def due_now_hints(*hints: DataFrame) -> DataFrame:
    """Several hint sources as one: a URL named by more than one gets one row, the earliest time."""
    union = hints[0]
    for more in hints[1:]:
        union = union.unionByName(more)
    return union.groupBy("host_bucket", "url_hash", "url").agg(F.min("next_fetch_at").alias("next_fetch_at"))


_HOST = ["host_bucket", "host"]


def host_reasons(hosts: DataFrame, host_state: DataFrame, segment_id: str) -> DataFrame:
    """Per host of the segment (its ``hosts`` rows): its held_back reason after this cycle
    (crawl.crawldb.held_back.held_back_rule) and whether it changed (``_changed``: changed_rule,
    against host_state's previous value)."""
    old = host_state.select(*_HOST, F.col("url_budget").alias("_budget"), F.col("held_back").alias("_previous"),
                            F.col("last_segment_id").alias("_last"))
    joined = hosts.select(*_HOST, "stop_reason", "deferred", "trap_signal").join(old, _HOST, "left")
    reason = held_back.held_back_rule(F.col("stop_reason"), F.col("deferred"), F.col("trap_signal"), F.col("_budget"),
                                      COLUMN_OPS).cast("string")
    return joined.select(*_HOST, reason.alias("held_back"),
                         held_back.changed_rule(F.col("_previous"), reason, F.col("_last"), segment_id,
                                                COLUMN_OPS).alias("_changed"))


def with_host_reason(rows: DataFrame, reasons: DataFrame, outcomes: DataFrame) -> DataFrame:
    """The segment's updated crawldb rows with their held_back reason: their own from their
    ``outcomes`` row, else their host's new one (crawl.crawldb.held_back.url_reason_rule)."""
    own = outcomes.select("host_bucket", "url_hash", "url", F.col("fetch_status").alias("_fs"), F.col("error").alias("_error"))
    return (rows.drop("held_back").join(reasons.select(*_HOST, F.col("held_back").alias("_host_reason")), _HOST, "left")
            .join(own, ["host_bucket", "url_hash", "url"], "left")
            .withColumn("held_back", held_back.url_reason_rule(F.col("_fs"), F.col("_error"), F.col("_host_reason"),
                                                               COLUMN_OPS).cast("string"))
            .select(*_URL_FIELDS))


def new_rows_with_reason(rows: DataFrame, reasons: DataFrame, host_state: DataFrame) -> DataFrame:
    """New crawldb rows with their host's held_back reason: the new one of a host in the segment,
    else host_state's."""
    segment = reasons.select(*_HOST, F.col("held_back").alias("_reason"), F.lit(True).alias("_in_segment"))
    old = host_state.select(*_HOST, F.col("held_back").alias("_old"))
    return (rows.drop("held_back").join(segment, _HOST, "left").join(old, _HOST, "left")
            .withColumn("held_back", F.when(F.col("_in_segment"), F.col("_reason")).otherwise(F.col("_old")))
            .select(*_URL_FIELDS))


def held_back_rewrites(url_state: DataFrame, reasons: DataFrame, outcomes: DataFrame) -> DataFrame:
    """(keys, held_back) of the crawldb rows, not attempted in the segment, whose host's reason
    changed in this update and whose own value differs (crawl.crawldb.held_back.rewrite_rule):
    only the hosts whose reason changed are read, so a host that stays held back costs nothing."""
    changed = reasons.filter(F.col("_changed")).select(*_HOST, F.col("held_back").alias("_reason"))
    # the changed hosts' buckets (``reasons`` is cached and has a row per host of the segment): no
    # host changed, no read; else only their buckets' files are read
    buckets = sorted({r["host_bucket"] for r in changed.select("host_bucket").distinct().collect()})
    if not buckets:
        return changed.sparkSession.createDataFrame([], _KEYS + ", held_back string")
    rows = (url_state.filter(F.col("host_bucket").isin(*buckets)).select(*_HOST, "url_hash", "url", "held_back")
            .join(F.broadcast(changed), _HOST))
    return (rows.filter(held_back.rewrite_rule(F.lit(True), F.col("held_back"), F.col("_reason"), COLUMN_OPS))
            .join(outcomes.select("url_hash", "url"), ["url_hash", "url"], "left_anti")
            .select("host_bucket", "url_hash", "url", F.col("_reason").alias("held_back")))


def with_rewrites(hints: DataFrame, rewrites: DataFrame) -> DataFrame:
    """The crawldb MERGE's hint rows: due-now hints (keys, next_fetch_at) and held_back rewrites
    (keys, held_back) as one row per URL, ``_held`` saying whether it has a rewrite."""
    return (hints.join(rewrites.withColumn("_held", F.lit(True)), ["host_bucket", "url_hash", "url"], "full")
            .select("host_bucket", "url_hash", "url", "next_fetch_at", "held_back",
                    F.coalesce("_held", F.lit(False)).alias("_held")))


def merge_crawldb(spark: SparkSession, root: CrawlRoot, updates: DataFrame, discovered: DataFrame,
                  hints: DataFrame) -> dict[str, int]:
    """One atomic commit: updates of leased URLs, inserts of unknown outlinks, and hints about
    known URLs (``hints``: with_rewrites): due now (its sitemap lastmod is newer than our fetch, or
    it duplicates a page that no longer holds its content: see orphaned_duplicates), and its
    host's new held_back reason (``_held``: the host's reason changed, crawl.crawldb.held_back).
    The three sources are disjoint: hints and new URLs exclude the URLs fetched in this segment,
    and each other."""
    source = (updates.withColumn("_kind", F.lit("fetched"))
              .unionByName(discovered.withColumn("_kind", F.lit("new")))
              .unionByName(hints.withColumn("_kind", F.lit("hint")), allowMissingColumns=True))
    crawldb = DeltaTable.forPath(spark, root.crawldb)
    counts = merge_counts(crawldb.alias("t").merge(source.alias("s"), URL_KEY)
     .whenMatchedUpdate(condition="s._kind = 'fetched' AND t.segment_id = s.segment_id AND t.lease_until IS NOT NULL",
                        set={name: F.col(f"s.{name}") for name in _URL_FIELDS})
     .whenMatchedUpdate(condition="s._kind = 'hint' AND (t.next_fetch_at > s.next_fetch_at "
                                  "OR (s._held AND NOT (t.held_back <=> s.held_back)))",
                        set={"next_fetch_at": F.expr("CASE WHEN t.next_fetch_at > s.next_fetch_at THEN s.next_fetch_at "
                                                     "ELSE t.next_fetch_at END"),
                             "held_back": F.expr("CASE WHEN s._held THEN s.held_back ELSE t.held_back END")})
     .whenNotMatchedInsert(condition="s._kind = 'new'", values={name: F.col(f"s.{name}") for name in _URL_FIELDS})
     .execute())
    return counts


def _host_source(hosts: DataFrame, discovered: DataFrame, reasons: DataFrame, cfg: Config,
                 segment_id: str, now: float) -> DataFrame:
    """One row per host touched by the segment: hosts fetched in it (``_fetched``, with their
    held_back ``reasons``) and hosts that only received new URLs, with the new-URL counts of
    discovery."""
    defer_s = float(cfg.fetch.robots_ttl_s)
    cap = per_host_cap(cfg)
    # a segment fetched by an older deltacrawl has no such columns: null (nothing cached, 0 queries)
    hosts = hosts.withColumns({f.name: F.lit(None).cast(f.dataType) for f in FETCHED_SCHEMA.fields
                               if f.name in _NEWER_HOST_FIELDS and f.name not in hosts.columns})
    fetched = hosts.select(
        "host", "host_bucket", "robots_status", "robots_txt", "robots_error", "crawl_delay_s", "sitemaps",
        "robots_scheme", "robots_other", "addresses", "dns_error", "tls_error",
        from_epoch_col(F.col("addresses_expire_at")).alias("addresses_expire_at"),
        F.coalesce("dns_queries", F.lit(0)).cast("long").alias("dns_queries"),
        "backoff_s", "stop_reason", "mean_response_ms", "override_pattern", "min_delay_s", "trap_signal",
        "link_rejects",
        from_epoch_col(F.col("robots_fetched_at")).alias("robots_fetched_at"),
        from_epoch_col(F.col("last_fetch_at")).alias("last_fetch_at"),
        from_epoch_col(F.col("backoff_until")).alias("backoff_until"),
        from_epoch_col(F.col("sitemaps_fetched_at")).alias("sitemaps_fetched_at"),
        F.when(F.col("sitemaps_fetched_at").isNotNull(), F.size(F.coalesce("sitemap_entries", F.array())).cast("long"))
        .alias("sitemap_urls"),
        F.when(F.col("deferred"), from_epoch_col(F.lit(now + defer_s))).alias("deferred_until"),
        F.coalesce("requests", F.lit(0)).alias("requests"),
        F.coalesce("pages_fetched", F.lit(0)).alias("pages_fetched"),
        F.coalesce("errors", F.lit(0)).alias("errors"),
        F.coalesce("links_found", F.lit(0)).alias("links_found"),
        F.coalesce("links_kept", F.lit(0)).alias("links_kept"),
        F.coalesce("sitemap_errors", F.lit(0)).cast("long").alias("sitemap_errors"), "sitemap_last_error",
        cap.alias("_cap"),  # the per-cycle budget a trap signal halves (see merge_hostdb)
        F.lit(True).alias("_fetched"))
    fetched = fetched.join(reasons.select(*_HOST, "held_back"), _HOST, "left")
    return (fetched.join(discovered, ["host_bucket", "host"], "full")
            .withColumn("url_count_exact", F.lit(None).cast("long"))
            .withColumn("_fetched", F.coalesce("_fetched", F.lit(False)))
            .withColumn("new_urls", F.coalesce("new_urls", F.lit(0)))
            .withColumn("over_cap", F.coalesce("over_cap", F.lit(0)))
            .withColumn("last_segment_id", F.lit(segment_id)))


# host row fields a segment fetched by an older deltacrawl lacks
_NEWER_HOST_FIELDS = ("robots_scheme", "robots_other", "addresses", "addresses_expire_at", "dns_queries", "dns_error",
                      "tls_error", "sitemap_errors", "sitemap_last_error")


_ADD = "(k, x, y) -> coalesce(x, 0L) + coalesce(y, 0L)"


def _map_sum(a: str, b: str) -> str:
    """SQL: the sum of two string -> count maps (either may be null)."""
    empty = "cast(map() AS map<string, bigint>)"
    return f"map_zip_with(coalesce({a}, {empty}), coalesce({b}, {empty}), {_ADD})"


def merge_hostdb(spark: SparkSession, root: CrawlRoot, source: DataFrame, cfg: Config) -> int:
    """host_state: robots cache, politeness, counters, discovery budget; the number of hosts
    written. Applied once per segment (run() commits it once; and a row whose last_segment_id
    is this segment is left alone)."""
    fetched_robots = "s._fetched AND s.robots_fetched_at IS NOT NULL"
    segment_rejects = _map_sum("s.link_rejects", f"map('{HOST_TOTAL_CAP}', s.over_cap)")
    # a trap signal halves the host's per-cycle budget, down to discovery.trap_min_budget
    halved = f"greatest({cfg.discovery.trap_min_budget}, coalesce(t.url_budget, s._cap) DIV 2)"

    def fetch(column: str, keep: str | None = None) -> Column:
        """The segment's value for a host it fetched, else the table's."""
        return F.expr(f"CASE WHEN s._fetched THEN {keep or 's.' + column} ELSE t.{column} END")

    def robots(column: str) -> Column:
        return F.expr(f"CASE WHEN {fetched_robots} THEN s.{column} ELSE t.{column} END")

    hostdb = DeltaTable.forPath(spark, root.hostdb)
    counts = merge_counts(hostdb.alias("t").merge(source.alias("s"), "t.host_bucket = s.host_bucket AND t.host = s.host")
     .whenMatchedUpdate(
        condition="t.last_segment_id IS NULL OR t.last_segment_id <> s.last_segment_id",
        set={
            # the robots cache changes only when this segment fetched robots.txt anew
            **{c: robots(c) for c in ("robots_status", "robots_txt", "robots_fetched_at", "robots_error", "sitemaps",
                                      "robots_scheme", "robots_other")},
            # the addresses the fetch resolved (with their expiry), else the table's; the last
            # cycle's DNS and TLS failures (null: the host answered)
            **{c: F.expr(f"CASE WHEN s._fetched AND s.addresses_expire_at IS NOT NULL THEN s.{c} ELSE t.{c} END")
               for c in ("addresses", "addresses_expire_at")},
            **{c: fetch(c) for c in ("dns_error", "tls_error", "held_back")},
            "dns_queries": F.expr("coalesce(t.dns_queries, 0) + coalesce(s.dns_queries, 0)"),
            **{c: fetch(c) for c in ("crawl_delay_s", "deferred_until", "backoff_until", "backoff_s",
                                     "stop_reason", "override_pattern")},
            "mean_response_ms": fetch("mean_response_ms", "coalesce(s.mean_response_ms, t.mean_response_ms)"),
            "min_delay_s": fetch("min_delay_s", "coalesce(s.min_delay_s, t.min_delay_s)"),
            "last_fetch_at": fetch("last_fetch_at", "coalesce(s.last_fetch_at, t.last_fetch_at)"),
            "sitemaps_fetched_at": fetch("sitemaps_fetched_at", "coalesce(s.sitemaps_fetched_at, t.sitemaps_fetched_at)"),
            "sitemap_urls": fetch("sitemap_urls", "coalesce(s.sitemap_urls, t.sitemap_urls)"),
            "trap_signal": fetch("trap_signal"),
            "url_budget": F.expr(f"CASE WHEN s._fetched AND s.trap_signal IS NOT NULL THEN {halved} "
                                 "ELSE t.url_budget END"),
            "requests": F.expr("t.requests + coalesce(s.requests, 0)"),
            "pages_fetched": F.expr("t.pages_fetched + coalesce(s.pages_fetched, 0)"),
            "errors": F.expr("t.errors + coalesce(s.errors, 0)"),
            "links_found": F.expr("coalesce(t.links_found, 0) + coalesce(s.links_found, 0)"),
            "links_kept": F.expr("coalesce(t.links_kept, 0) + coalesce(s.links_kept, 0)"),
            "sitemap_errors": F.expr("coalesce(t.sitemap_errors, 0) + coalesce(s.sitemap_errors, 0)"),
            "sitemap_last_error": F.expr("coalesce(s.sitemap_last_error, t.sitemap_last_error)"),
            "link_rejects": F.expr(f"map_filter({_map_sum('t.link_rejects', segment_rejects)}, (k, v) -> v > 0)"),
            # counted again from the crawldb when a run of this segment had died midway
            "url_count": F.expr("coalesce(s.url_count_exact, coalesce(t.url_count, 0) + s.new_urls)"),
            "last_segment_id": F.col("s.last_segment_id"),
        })
     .whenNotMatchedInsert(values={
        **{name: F.col(f"s.{name}") for name in HOST_STATE_SCHEMA.fieldNames()
           if name not in ("requests", "pages_fetched", "errors", "url_budget", "url_count", "link_rejects",
                           "links_found", "links_kept", "sitemap_errors", "dns_queries")},
        "dns_queries": F.expr("coalesce(s.dns_queries, 0)"),
        "requests": F.expr("coalesce(s.requests, 0)"),
        "pages_fetched": F.expr("coalesce(s.pages_fetched, 0)"),
        "errors": F.expr("coalesce(s.errors, 0)"),
        "links_found": F.expr("coalesce(s.links_found, 0)"),
        "links_kept": F.expr("coalesce(s.links_kept, 0)"),
        "sitemap_errors": F.expr("coalesce(s.sitemap_errors, 0)"),
        "url_budget": F.expr(f"CASE WHEN s.trap_signal IS NOT NULL THEN {halved.replace('t.url_budget', 'NULL')} END"),
        "url_count": F.expr("coalesce(s.url_count_exact, s.new_urls)"),
        "link_rejects": F.expr(f"map_filter({segment_rejects}, (k, v) -> v > 0)"),
     })
     .execute())
    return counts["updated"] + counts["inserted"]


def append_warc_index(root: CrawlRoot, outcomes: DataFrame, app_id: str) -> int:
    """Index every archived record of the segment, with the full URI of its file (fetch wrote
    the segment's files under <crawl_root>/warc): an append made once per segment (an
    insert-only MERGE keyed by file and offset cost 2.1 s and a join with the whole index, which
    only grows; the append, 0.4 s and no read)."""
    warc_dir = warc_location_uri(root.warc_dir)
    rows = outcomes.filter(F.col("warc_file").isNotNull()).select(
        "url", "url_hash", "host", from_epoch_col(F.col("fetched_at")).alias("fetched_at"), "http_status",
        F.trim(F.split(F.coalesce("content_type", F.lit("")), ";").getItem(0)).alias("mime"),
        "payload_digest", "warc_file", "warc_offset", "warc_length", "segment_id",
        F.concat(F.lit(warc_dir + "/"), F.col("warc_file")).alias("warc_uri"))
    rows = rows.cache()
    try:
        archived = rows.count()
        append_once(rows, root.warc_index, app_id)
    finally:
        rows.unpersist()
    return archived


@dataclass
class Sources(CachedFrames):
    """What update writes, as DataFrames: the crawldb MERGE's three sources (updates of the
    leased URLs, new URL rows, due-now hints with held_back rewrites), per host the new URLs its budget let in and kept
    out (per_host_counts), and the segment's url and host rows."""
    updates: DataFrame
    new_rows: DataFrame
    hints: DataFrame      # with_rewrites: due-now hints and held_back rewrites
    host_counts: DataFrame
    reasons: DataFrame    # host_bucket, host, held_back: the segment's hosts' reasons
    outcomes: DataFrame
    hosts: DataFrame
    local: bool = False   # made only of rows the driver holds (local_sources)
    cached: list[DataFrame] = field(default_factory=list)


def spark_sources(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str,
                  now: float, *, policy: SchedulePolicy | None = None) -> Sources:
    """The sources computed by Spark queries, for a segment of any size. ``policy``: the schedule
    the fetched URLs are scheduled by (None: ``cfg``'s options, nothing fitted)."""
    # pinned: the sources are computed while the MERGE writes a new version
    return sources_by_spark(spark, cfg, spark.read.parquet(root.fetched(segment_id)),
                            _dedup_result(spark, root, segment_id), read_url_state(spark, root, pinned=True),
                            read_host_state(spark, root, pinned=True), segment_id, now, policy=policy)


def sources_by_spark(spark: SparkSession, cfg: Config, fetched: DataFrame, dups: DataFrame | None,
                     url_state: DataFrame, host_state: DataFrame, segment_id: str, now: float, *,
                     policy: SchedulePolicy | None = None) -> Sources:
    """spark_sources of the segment's ``fetched`` rows, dedup's answer ``dups`` (None: dedup did
    not run), the crawldb ``url_state`` and the hostdb ``host_state``."""
    outcomes = with_duplicates(fetched.filter(F.col("kind") == "url"), dups, cfg)
    hosts = fetched.filter(F.col("kind") == "host")
    reasons = host_reasons(hosts, host_state, segment_id).cache()
    policy = schedule_policy(cfg) if policy is None else policy
    updates = with_host_reason(updated_states(spark, url_state, outcomes, policy), reasons, outcomes)
    # what the segment discovered: new URLs within each host's budget, and lastmod hints
    unknown, known = discover.split_known(discover.candidates(spark, outcomes, hosts, cfg), url_state)
    budgeted = discover.within_host_budget(unknown, host_state, cfg).cache()
    new_rows = new_rows_with_reason(discover.new_url_rows(spark, budgeted.filter("_keep"), now, segment_id),
                                    reasons, host_state)
    hints = with_rewrites(due_now_hints(discover.lastmod_hints(known, now), orphaned_duplicates(url_state, outcomes, now)),
                          held_back_rewrites(url_state, reasons, outcomes))
    return Sources(updates, new_rows, hints, discover.per_host_counts(budgeted), reasons.select(*_HOST, "held_back"),
                   outcomes, hosts, cached=[budgeted, reasons])


# At most this many discovered URLs (or crawldb rows they and the segment's pages meet) for
# local_sources; above, Spark computes the sources.
_LOCAL_MAX_ROWS = 200_000
_KEYS = "host_bucket int, url_hash long, url string"


def whole_crawldb(url_state: DataFrame) -> pa.Table:
    """The crawldb ``url_state`` read whole through Arrow by Spark (URL_STATE_SCHEMA's columns,
    epoch times): what _read_crawldb reads from a crawl root."""
    return projected_arrow(url_state, _URL_FIELDS, URL_STATE_TIMES)


def _read_crawldb(spark: SparkSession, cfg: Config, root: CrawlRoot) -> pa.Table:
    """``root``'s crawldb read whole (whole_crawldb's columns and times; reads.whole_arrow: by
    DuckDB where it may): update reads it once, for the schedule's fit and for local_sources."""
    return whole_arrow(spark, cfg, root, root.crawldb, _URL_FIELDS, URL_STATE_TIMES)


def _whole_crawldb_if_small(spark: SparkSession, cfg: Config, root: CrawlRoot) -> pa.Table | None:
    """_read_crawldb of ``root`` when the crawldb fits the driver (crawldb.local_read_max_mb) and
    the schedule's fit or local_sources reads it; else None (each reads what it needs then)."""
    fits = (cfg.schedule.fit_fetch_value or cfg.schedule.fit_rate_prior
            or cfg.schedule.information_horizon_cycles > 0 or cfg.update.local_max_urls > 0)
    return _read_crawldb(spark, cfg, root) if fits and fits_driver(spark, cfg, root.crawldb) else None


def _crawldb_rows(crawldb: pa.Table, keys: list[tuple], urls: list[str]) -> list[dict] | None:
    """The crawldb rows (epoch times) of ``keys`` (and of any URL sharing a url_hash with one),
    and of the duplicates whose dup_of is one of ``urls``, from the crawldb read whole
    (whole_crawldb); None if more than _LOCAL_MAX_ROWS."""
    hashes = pa.array(sorted({k[1] for k in keys}), pa.int64())
    dup_of = pa.array(sorted(set(urls)), pa.string())
    rows = arrow_rows(crawldb, pc.or_kleene(pc.is_in(crawldb["url_hash"], value_set=hashes),
                                            pc.and_kleene(pc.equal(crawldb["status"], DUPLICATE),
                                                          pc.is_in(crawldb["dup_of"], value_set=dup_of))))
    return None if len(rows) > 2 * _LOCAL_MAX_ROWS else rows


# the host_state columns update's rules read (in_memory.plan, crawl.crawldb.held_back)
HOST_COLUMNS = ("host_bucket", "host", "url_count", "url_budget", "held_back", "last_segment_id")


def _host_rows(hostdb: Callable[[], pa.Table], hosts: list[tuple]) -> dict[tuple[int, str], dict]:
    """{(host_bucket, host): row} of ``hosts`` from the whole hostdb's HOST_COLUMNS (``hostdb``
    reads them; its rows are hosts of a crawldb that fits the driver), filtered through Arrow."""
    if not hosts:
        return {}
    names = pa.array(sorted({h for _, h in hosts}), pa.string())
    table = hostdb()
    return {(r["host_bucket"], r["host"]): r for r in arrow_rows(table, pc.is_in(table["host"], value_set=names))}


def _held_back_rows(crawldb: pa.Table, hosts: list[tuple]) -> list[dict] | None:
    """The crawldb rows (keys, host, held_back) of ``hosts`` ((host_bucket, host) pairs whose
    held_back reason changed), from the crawldb read whole (whole_crawldb); None if more than
    _LOCAL_MAX_ROWS."""
    if not hosts:
        return []
    names = pa.array(sorted({h for _, h in hosts}), pa.string())
    table = crawldb.select(["host_bucket", "host", "url_hash", "url", "held_back"])
    rows = arrow_rows(table, pc.is_in(table["host"], value_set=names))
    return None if len(rows) > _LOCAL_MAX_ROWS else rows


def local_sources(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str,
                  now: float, crawldb: pa.Table | None = None, *, policy: SchedulePolicy | None = None) -> Sources | None:
    """The sources of a segment of at most update.local_max_urls URLs, computed on the driver
    (crawl/crawldb/in_memory.py) from what it collects: the segment, dedup's answer, the crawldb
    rows the segment can touch and its hosts' url_count; four reads instead of a dozen planned
    queries. None when the segment is larger, or the crawldb larger than
    crawldb.local_read_max_mb, or what it discovered or touches is larger than _LOCAL_MAX_ROWS
    (or a URL appears twice in it): spark_sources computes them then. ``crawldb``: the crawldb
    read whole (whole_crawldb), if the caller has it (run() read it for the schedule's fit);
    ``policy`` as for spark_sources."""
    if cfg.update.local_max_urls <= 0:
        return None
    if crawldb is None:
        if not fits_driver(spark, cfg, root.crawldb):
            return None
        crawldb = _read_crawldb(spark, cfg, root)
    return sources_in_memory(spark, cfg, spark.read.parquet(root.fetched(segment_id)),
                             lambda: _dedup_result(spark, root, segment_id), crawldb,
                             lambda: whole_arrow(spark, cfg, root, root.hostdb, HOST_COLUMNS),
                             segment_id, now, policy=policy)


def sources_in_memory(spark: SparkSession, cfg: Config, fetched: DataFrame,
                      dups: Callable[[], DataFrame | None], crawldb: pa.Table, hostdb: Callable[[], pa.Table],
                      segment_id: str, now: float, *, policy: SchedulePolicy | None = None) -> Sources | None:
    """local_sources of the segment's ``fetched`` rows, dedup's answer (``dups``: a reader of
    it, None if dedup did not run), the crawldb read whole (whole_crawldb: it must fit the
    driver) and the hostdb's HOST_COLUMNS (``hostdb``: a reader of them, whole); None when the
    segment is too large."""
    limit = cfg.update.local_max_urls
    fetched = fetched.select(*[c for c in fetched.columns if c != "signature"])  # dedup's, not needed here

    def duplicates() -> dict[tuple[int, str], str]:
        result = dups()
        if result is None:
            return {}
        return {(r["url_hash"], r["url"]): r["dup_of"] for r in result.collect()}

    # a host row per host with URLs in the segment: at most as many as url rows
    segment, dup_of = run_concurrently(lambda: fetched.limit(2 * limit + 1).collect(), duplicates)
    url_rows = [r.asDict() for r in segment if r["kind"] == "url"]
    host_rows = [r.asDict() for r in segment if r["kind"] == "host"]
    keys = {in_memory.key_of(r) for r in url_rows}
    if len(segment) > 2 * limit or len(url_rows) > limit or len(keys) != len(url_rows):
        return None
    links = discover.LinkSettings.of(cfg)
    outcomes = in_memory.with_duplicates(url_rows, dup_of, cfg.dedup.duplicate_link_factor)
    cands = in_memory.candidates(outcomes, host_rows, links.factor, links.max_depth, links.max_redirects,
                                 links.sitemap_score, links.buckets)
    if len(cands) > _LOCAL_MAX_ROWS:
        return None
    segment_hosts = {(h["host_bucket"], h["host"]) for h in host_rows}
    touched, previous = run_concurrently(
        lambda: _crawldb_rows(crawldb, sorted(keys | {in_memory.key_of(c) for c in cands}),
                              sorted({o["url"] for o in outcomes})),
        lambda: _host_rows(hostdb, sorted(segment_hosts | {(c["host_bucket"], c["host"]) for c in cands})))
    if touched is None:
        return None
    counts = {key: row["url_count"] for key, row in previous.items()}
    plan = in_memory.plan(outcomes, cands, {in_memory.key_of(r): r for r in touched}, counts,
                          lambda host: discover.host_total_cap_of(cfg, host),
                          schedule_policy(cfg) if policy is None else policy, now, segment_id)
    # the hosts' held_back reasons (crawl.crawldb.held_back): on the segment's rows, the new rows,
    # and the other rows of the hosts whose reason changed
    reasons = held_back.host_reasons(host_rows, previous)
    held_back.with_reasons(plan.updates, plan.new_rows, reasons, previous, outcomes)
    changed = held_back.changed_hosts(reasons, previous, segment_id)
    of_changed = _held_back_rows(crawldb, sorted(changed))
    if of_changed is None:
        return None
    rewrites = {(b, h, u): reason for b, h, u, reason in
                held_back.rewrites(of_changed, changed, {(o["url_hash"], o["url"]) for o in outcomes})}
    marks = {(bucket, hashed, url): [at, None, False] for bucket, hashed, url, at in plan.hints}
    for key, reason in rewrites.items():
        marks.setdefault(key, [None, None, False])[1:] = [reason, True]

    def url_state_rows(rows: list[dict]) -> DataFrame:
        local = spark.createDataFrame([tuple(r[n] for n in _URL_FIELDS) for r in rows], epoch_schema(URL_STATE_SCHEMA),
                                      verifySchema=False)
        return from_epoch(local, URL_STATE_TIMES)

    hints = spark.createDataFrame([(*key, *mark) for key, mark in marks.items()],
                                  _KEYS + ", next_fetch_at double, held_back string, _held boolean")
    segment_df = spark.createDataFrame(segment, fetched.schema, verifySchema=False)
    return Sources(url_state_rows(plan.updates), url_state_rows(plan.new_rows),
                   hints.withColumn("next_fetch_at", from_epoch_col(F.col("next_fetch_at"))),
                   spark.createDataFrame(plan.host_counts, "host_bucket int, host string, new_urls long, over_cap long"),
                   spark.createDataFrame([(*key, reason) for key, reason in reasons.items()],
                                         "host_bucket int, host string, held_back string"),
                   segment_df.filter(F.col("kind") == "url"), segment_df.filter(F.col("kind") == "host"), local=True)


def sources(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str, now: float,
            crawldb: pa.Table | None = None, *, policy: SchedulePolicy | None = None) -> Sources:
    """``crawldb``: the crawldb read whole (whole_crawldb), if the caller has it; ``policy``: the
    schedule with what update fitted (None: ``cfg``'s options)."""
    return (local_sources(spark, cfg, root, segment_id, now, crawldb, policy=policy)
            or spark_sources(spark, cfg, root, segment_id, now, policy=policy))


def _known_histories(spark: SparkSession, cfg: Config, root: CrawlRoot,
                     crawldb: pa.Table | None) -> tuple[dict, int, float]:
    """({column: numpy array} of the histories of (a random sample of at most
    schedule.fit_sample_urls of) the URLs update schedules from their history (fetched or not
    modified), the number of never-fetched URLs, the share sampled). ``crawldb``: the crawldb
    read whole (whole_crawldb), None when it does not fit the driver (then Spark filters it)."""
    import numpy as np
    limit = cfg.schedule.fit_sample_urls
    known = F.col("status").isin(FETCHED, NOTMODIFIED) & (F.coalesce("observed_count", F.lit(0)) > 0)
    pending = F.col("status") == UNFETCHED  # what generate's discovery pool will take first
    times = ["first_observed_at", "last_observed_at"]
    if crawldb is not None:
        whole = crawldb.select([*schedule_fit.HISTORY_COLUMNS, "status"])
        is_known = pc.fill_null(pc.and_kleene(pc.is_in(whole["status"], value_set=pa.array([FETCHED, NOTMODIFIED])),
                                              pc.greater(whole["observed_count"], 0)), False)
        is_new = pc.fill_null(pc.equal(whole["status"], UNFETCHED), False)
        rows = whole.filter(is_known)
        n_known, n_new = rows.num_rows, pc.sum(is_new).as_py() or 0
        if n_known > limit:
            pick = np.sort(np.random.default_rng().choice(n_known, size=limit, replace=False))
            rows = rows.take(pa.array(pick))
    else:
        table = read_url_state(spark, root)
        counts = table.agg(F.sum(known.cast("long")).alias("known"), F.sum(pending.cast("long")).alias("new")).first()
        n_known, n_new = int(counts["known"] or 0), int(counts["new"] or 0)
        chosen = table.filter(known).select(*schedule_fit.HISTORY_COLUMNS)
        if n_known > limit:
            chosen = chosen.sample(fraction=min(1.0, 1.2 * limit / n_known)).limit(limit)
        rows = to_epoch(chosen, times).toArrow()
    arrays = {c: rows[c].to_numpy(zero_copy_only=False).astype(float) for c in schedule_fit.HISTORY_COLUMNS}
    return arrays, int(n_new), (rows.num_rows / n_known if n_known else 1.0)


def fitted_schedule(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str,
                    now: float, crawldb: pa.Table | None = None) -> schedule_fit.Fitted:
    """What update fits to the crawl (crawl.crawldb.schedule_fit.Fitted): the fetch value fitted
    to the fetch budget, the change-rate prior and the information horizon, and one line saying
    what it chose; NOT_FITTED when nothing is fitted or no URL has a history yet.
    ``crawldb``: the crawldb read whole (whole_crawldb), None when it does not fit the driver."""
    if not (cfg.schedule.fit_fetch_value or cfg.schedule.fit_rate_prior
            or cfg.schedule.information_horizon_cycles > 0):
        return schedule_fit.NOT_FITTED
    histories, pending_new, share = _known_histories(spark, cfg, root, crawldb)
    if histories["observed_count"].size == 0:
        return schedule_fit.NOT_FITTED
    starts = []
    for name in list_segments(spark, root):
        try:
            starts.append(segment_time(name))
        except ValueError:  # not a segment id (a stray folder): not a cycle's start
            continue
    mine = segment_time(segment_id)
    cycle_s = schedule.cycle_seconds([t for t in starts if t <= mine], now)
    quota, _ = budget_split(cfg.generate.top_n, cfg.generate.discovery_share)
    refresh = schedule.refresh_budget(cfg.generate.top_n, quota, pending_new)
    fitted = schedule_fit.fit(histories, cfg, refresh_per_cycle=refresh, cycle_s=cycle_s, sampled_share=share)
    # what a user can check against the crawl: the budget is generate.top_n less the new URLs it
    # takes first, the value is what the schedule trades a fetch against (docs/architecture.md)
    step_logger("update").info(
        "schedule fitted to %d URL histories: a refresh budget of %d fetches a cycle (generate.top_n %d less "
        "%d new URLs taken first), a cycle every %.0f s; a fetch is worth %.3g s of freshness "
        "(schedule.fetch_value_s); change-rate prior: %s; information horizon: %.0f s",
        histories["observed_count"].size, refresh, cfg.generate.top_n, cfg.generate.top_n - refresh,
        cycle_s, cfg.schedule.fetch_value_s if fitted.fetch_value_s is None else fitted.fetch_value_s,
        "fitted to the crawl" if fitted.rate_prior is not None else "log-uniform (not fitted: too few histories, or schedule.fit_rate_prior off)",
        fitted.information_horizon_s)
    return fitted


@writes_commits("update")
def run(spark: SparkSession, cfg: Config, root: CrawlRoot, segment_id: str,
        now: float | None = None) -> UpdateResult:
    now = time.time() if now is None else now
    if not path_exists(spark, root.segment(segment_id)):
        raise UserError(f"no segment {segment_id} in {root.root}")
    if path_exists(spark, root.updated_marker(segment_id)):
        return UpdateResult(segment_id, already_applied=True)
    if not path_exists(spark, root.fetched(segment_id) + "/_SUCCESS"):
        raise UserError(f"segment {segment_id} has not been fetched: run 'deltacrawl fetch {segment_id}' first")
    if (path_exists(spark, root.dedup_started_marker(segment_id))
            and not path_exists(spark, root.deduped_marker(segment_id))):
        raise UserError(f"segment {segment_id}: its dedup started and did not finish: run "
                        f"'deltacrawl dedup {segment_id}' first")
    ensure_tables(spark, root)  # crawl roots of older versions get the new columns and tables
    # the crawldb read whole once, for the schedule's fit and the sources (when it fits the driver)
    crawldb = _whole_crawldb_if_small(spark, cfg, root)
    policy = schedule_policy(cfg, fitted_schedule(spark, cfg, root, segment_id, now, crawldb))
    rerun = path_exists(spark, root.update_started_marker(segment_id))
    if not rerun:
        write_marker(spark, root.update_started_marker(segment_id), f"update started at {now}\n")
    src = sources(spark, cfg, root, segment_id, now, crawldb, policy=policy)
    try:
        host_rows = _host_source(src.hosts, src.host_counts, src.reasons, cfg, segment_id, now)
        app_id = txn_app_id("update", segment_id)
        # each table takes the segment's write once; deletion vectors or rewrites by table size
        # (a re-run's hostdb source also reads the crawldb: Delta copies it then, as by default)
        with (commit_once(spark, app_id), merge_mode(spark, cfg, root.crawldb, root.hostdb),
              local_merge_sources(spark, src.local and not rerun)):
            if not rerun:
                # The three writes read only pinned inputs and the segment, never each other's new
                # rows, so they run side by side.
                counts, n_hosts, archived = run_concurrently(
                    lambda: merge_crawldb(spark, root, src.updates, src.new_rows, src.hints),
                    lambda: merge_hostdb(spark, root, host_rows, cfg),
                    lambda: append_warc_index(root, src.outcomes, app_id))
            else:
                # A run of this segment died midway, and its crawldb commit may be in: then the
                # URLs it inserted are known now, and the new-URL counts above miss them. The
                # hosts' url_count is counted again from the crawldb once it has the segment.
                counts = merge_crawldb(spark, root, src.updates, src.new_rows, src.hints)
                exact = url_counts(spark, root, host_rows).withColumnRenamed("url_count", "_exact")
                host_rows = (host_rows.join(exact, ["host_bucket", "host"], "left")
                             .withColumn("url_count_exact", F.coalesce("_exact", F.lit(0).cast("long")))
                             .drop("_exact"))
                n_hosts, archived = run_concurrently(lambda: merge_hostdb(spark, root, host_rows, cfg),
                                                     lambda: append_warc_index(root, src.outcomes, app_id))
    finally:
        src.release()
    write_marker(spark, root.updated_marker(segment_id), f"updated at {now}\n")
    result = UpdateResult(segment_id, False, counts["updated"], counts["inserted"], n_hosts, archived)
    return result


def main(argv: list[str] | None = None) -> int:
    return run_segment_step("deltacrawl update", argv,
                            "Merge a fetched segment into the crawldb and hostdb (safe to re-run).", run)


if __name__ == "__main__":
    sys.exit(main())
