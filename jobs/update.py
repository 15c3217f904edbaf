"""update — merge one fetched segment into the crawldb and hostdb.

Inputs:   <crawl_root>/segments/<id>/fetched, <crawl_root>/crawldb, <crawl_root>/hostdb.
Outputs:  ONE Delta MERGE into crawldb: each attempted URL gets its new state from
          crawl.status.apply_fetch (status, http status, timestamps, content hash,
          next_fetch_at; lease released), and outlinks not yet known are inserted as unfetched
          with depth + 1 (up to update.max_depth) and an OPIC-like share of their parent's score.
          Then one MERGE into hostdb (robots cache, sitemaps, crawl-delay, deferral, backoff,
          counters), one insert-only MERGE into warc_index (url -> WARC file and offset), then
          the marker segments/<id>/_updated.
Re-run:   safe, changes nothing. With the marker present the job stops at once. Without it (the
          job died before writing it), the MERGE conditions make each write apply once: a URL
          is updated only while it is still leased to this segment, and a host only if its
          last_segment_id is not this segment, and an index row only once per (file, offset).
Exit:     0 done (or already done) · 2 unknown segment or segment not fetched · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/update.py 20261129120000-a1b2c3 --crawl-root /data/crawl
"""
from __future__ import annotations

if __name__ == "__main__":  # run as `spark-submit jobs/<step>.py`: import our packages, not sibling files
    import os as _os, sys as _sys
    _sys.path[0] = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))

import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.status import FetchStatus, apply_fetch, discovered_links, new_url_state
from crawl.urls import host_bucket, host_of, url_hash
from jobs.common import UserError, report, run_segment_step
from jobs.tables import (HOST_STATE_SCHEMA, URL_STATE_SCHEMA, URL_STATE_TIMES, CrawlRoot,
                         ensure_tables, epoch_schema, from_epoch, from_epoch_col, merge_metrics, path_exists,
                         read_url_state, table_version, to_epoch, write_marker)

URL_KEY = "t.host_bucket = s.host_bucket AND t.url_hash = s.url_hash AND t.url = s.url"
_OUTCOME_FIELDS = ("fetch_status", "http_status", "fetched_at", "content_hash", "content_type", "etag",
                   "last_modified", "redirect_to", "error", "parse_error", "warc_file", "warc_offset",
                   "warc_length")
_URL_FIELDS = URL_STATE_SCHEMA.fieldNames()
_LINK_SOURCES = (FetchStatus.OK, FetchStatus.REDIRECT)


@dataclass
class UpdateResult:
    segment_id: str
    already_applied: bool
    updated: int = 0
    new_urls: int = 0
    hosts: int = 0
    archived: int = 0


def _apply_rows(rows: Iterator[Any], policy: Mapping[str, Any]) -> Iterator[tuple]:
    for row in rows:
        d = row.asDict()
        state = {name: d[name] for name in _URL_FIELDS}
        outcome = {name: d["o_" + name] for name in _OUTCOME_FIELDS}
        new = apply_fetch(state, outcome, policy)
        yield tuple(new[name] for name in _URL_FIELDS)


def updated_states(spark: SparkSession, url_state: DataFrame, outcomes: DataFrame, cfg: Mapping[str, Any]) -> DataFrame:
    """New crawldb rows for the URLs of this segment still leased to it (pure transitions)."""
    renamed = outcomes.select("host_bucket", "url_hash", "url", "segment_id",
                              *[F.col(c).alias("o_" + c) for c in _OUTCOME_FIELDS])
    current = to_epoch(url_state.filter(F.col("lease_until").isNotNull()), URL_STATE_TIMES)
    joined = current.join(renamed, ["host_bucket", "url_hash", "url", "segment_id"], "inner")
    policy = {k: v for k, v in cfg.items() if k.startswith("update.")}
    rdd = joined.rdd.mapPartitions(lambda it: _apply_rows(it, policy))
    return from_epoch(spark.createDataFrame(rdd, epoch_schema(URL_STATE_SCHEMA), verifySchema=False), URL_STATE_TIMES)


def _link_rows(rows: Iterator[Any], factor: float, max_depth: int, max_redirects: int) -> Iterator[tuple]:
    for row in rows:
        yield from discovered_links(row.asDict(), factor, max_depth, max_redirects)


def _new_url_rows(rows: Iterator[Any], buckets: int, now: float) -> Iterator[tuple]:
    for row in rows:
        url = row["url"]
        host = host_of(url)
        state = new_url_state(url, host, host_bucket(host, buckets), url_hash(url), int(row["depth"]),
                              float(row["score"]), now, int(row["redirect_hops"]))
        yield tuple(state[name] for name in _URL_FIELDS)


def discovered_urls(spark: SparkSession, outcomes: DataFrame, cfg: Mapping[str, Any], now: float) -> DataFrame:
    """Outlinks of this segment as new unfetched rows (one per URL: least depth, summed score)."""
    factor = float(cfg["update.outlink_score_factor"])
    max_depth = int(cfg["update.max_depth"])
    buckets = int(cfg["crawldb.host_buckets"])
    max_redirects = int(cfg["fetch.max_redirects"])
    sources = (outcomes.filter(F.col("fetch_status").isin(*_LINK_SOURCES))
               .select("outlinks", "depth", "score", "fetch_status", "redirect_hops"))
    links = spark.createDataFrame(
        sources.rdd.mapPartitions(lambda it: _link_rows(it, factor, max_depth, max_redirects)),
        "url string, depth int, score double, redirect_hops int", verifySchema=False)
    fetched_here = outcomes.select("url")
    unique = (links.groupBy("url").agg(F.min("depth").alias("depth"), F.sum("score").alias("score"),
                                       F.min("redirect_hops").alias("redirect_hops"))
              .join(fetched_here, "url", "left_anti"))
    rdd = unique.rdd.mapPartitions(lambda it: _new_url_rows(it, buckets, now))
    # rows come from crawl.status.new_url_state in schema order: no per-row type verification
    return from_epoch(spark.createDataFrame(rdd, epoch_schema(URL_STATE_SCHEMA), verifySchema=False), URL_STATE_TIMES)


def merge_crawldb(spark: SparkSession, root: CrawlRoot, updates: DataFrame, discovered: DataFrame) -> dict[str, int]:
    """One atomic commit: updates of leased URLs and inserts of unknown outlinks."""
    source = (updates.withColumn("_fetched", F.lit(True))
              .unionByName(discovered.withColumn("_fetched", F.lit(False))))
    crawldb = DeltaTable.forPath(spark, root.crawldb)
    before = table_version(crawldb)
    (crawldb.alias("t").merge(source.alias("s"), URL_KEY)
     .whenMatchedUpdate(condition="s._fetched AND t.segment_id = s.segment_id AND t.lease_until IS NOT NULL",
                        set={name: F.col(f"s.{name}") for name in _URL_FIELDS})
     .whenNotMatchedInsert(values={name: F.col(f"s.{name}") for name in _URL_FIELDS})
     .execute())
    metrics = merge_metrics(crawldb, before)
    return {"updated": metrics.get("numTargetRowsUpdated", 0), "inserted": metrics.get("numTargetRowsInserted", 0)}


def merge_hostdb(spark: SparkSession, root: CrawlRoot, hosts: DataFrame, cfg: Mapping[str, Any], now: float) -> None:
    defer_s = float(cfg["fetch.robots_ttl_s"])
    source = hosts.select(
        "host", "host_bucket", "robots_status", "robots_txt", "robots_error", "crawl_delay_s", "sitemaps",
        "backoff_s", "stop_reason", "mean_response_ms", "override_pattern", "min_delay_s",
        F.col("segment_id").alias("last_segment_id"),
        from_epoch_col(F.col("robots_fetched_at")).alias("robots_fetched_at"),
        from_epoch_col(F.col("last_fetch_at")).alias("last_fetch_at"),
        from_epoch_col(F.col("backoff_until")).alias("backoff_until"),
        F.when(F.col("deferred"), from_epoch_col(F.lit(now + defer_s))).alias("deferred_until"),
        F.coalesce("requests", F.lit(0)).alias("requests"),
        F.coalesce("pages_fetched", F.lit(0)).alias("pages_fetched"),
        F.coalesce("errors", F.lit(0)).alias("errors"))
    fetched_robots = "s.robots_fetched_at IS NOT NULL"
    hostdb = DeltaTable.forPath(spark, root.hostdb)
    (hostdb.alias("t").merge(source.alias("s"), "t.host_bucket = s.host_bucket AND t.host = s.host")
     .whenMatchedUpdate(
        condition="t.last_segment_id IS NULL OR t.last_segment_id <> s.last_segment_id",
        set={
            # the robots cache changes only when this segment fetched robots.txt anew
            "robots_status": F.expr(f"CASE WHEN {fetched_robots} THEN s.robots_status ELSE t.robots_status END"),
            "robots_txt": F.expr(f"CASE WHEN {fetched_robots} THEN s.robots_txt ELSE t.robots_txt END"),
            "robots_fetched_at": F.expr(f"CASE WHEN {fetched_robots} THEN s.robots_fetched_at ELSE t.robots_fetched_at END"),
            "robots_error": F.expr(f"CASE WHEN {fetched_robots} THEN s.robots_error ELSE t.robots_error END"),
            "sitemaps": F.expr(f"CASE WHEN {fetched_robots} THEN s.sitemaps ELSE t.sitemaps END"),
            "crawl_delay_s": F.col("s.crawl_delay_s"),
            "deferred_until": F.col("s.deferred_until"),
            "backoff_until": F.col("s.backoff_until"),
            "backoff_s": F.col("s.backoff_s"),
            "stop_reason": F.col("s.stop_reason"),
            "mean_response_ms": F.expr("coalesce(s.mean_response_ms, t.mean_response_ms)"),
            "override_pattern": F.col("s.override_pattern"),
            "min_delay_s": F.expr("coalesce(s.min_delay_s, t.min_delay_s)"),
            "last_fetch_at": F.expr("coalesce(s.last_fetch_at, t.last_fetch_at)"),
            "requests": F.expr("t.requests + s.requests"),
            "pages_fetched": F.expr("t.pages_fetched + s.pages_fetched"),
            "errors": F.expr("t.errors + s.errors"),
            "last_segment_id": F.col("s.last_segment_id"),
        })
     .whenNotMatchedInsert(values={name: F.col(f"s.{name}") for name in HOST_STATE_SCHEMA.fieldNames()})
     .execute())


def merge_warc_index(spark: SparkSession, root: CrawlRoot, outcomes: DataFrame) -> int:
    """Index every archived record of the segment (insert-only, keyed by file and offset)."""
    rows = outcomes.filter(F.col("warc_file").isNotNull()).select(
        "url", "url_hash", "host", from_epoch_col(F.col("fetched_at")).alias("fetched_at"), "http_status",
        F.trim(F.split(F.coalesce("content_type", F.lit("")), ";").getItem(0)).alias("mime"),
        "payload_digest", "warc_file", "warc_offset", "warc_length", "segment_id")
    index = DeltaTable.forPath(spark, root.warc_index)
    before = table_version(index)
    (index.alias("t").merge(rows.alias("s"), "t.warc_file = s.warc_file AND t.warc_offset = s.warc_offset")
     .whenNotMatchedInsertAll().execute())
    return merge_metrics(index, before).get("numTargetRowsInserted", 0)


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, segment_id: str,
        now: float | None = None) -> UpdateResult:
    now = time.time() if now is None else now
    if not path_exists(spark, root.segment(segment_id)):
        raise UserError(f"no segment {segment_id} in {root.root}")
    if path_exists(spark, root.updated_marker(segment_id)):
        report(f"update: segment {segment_id} was already applied; nothing to do")
        return UpdateResult(segment_id, already_applied=True)
    if not path_exists(spark, root.fetched(segment_id) + "/_SUCCESS"):
        raise UserError(f"segment {segment_id} has not been fetched: run 'deltacrawl fetch {segment_id}' first")
    ensure_tables(spark, root)  # crawl roots of older versions get the new columns and tables
    fetched = spark.read.parquet(root.fetched(segment_id))
    outcomes = fetched.filter(F.col("kind") == "url")
    hosts = fetched.filter(F.col("kind") == "host")
    updates = updated_states(spark, read_url_state(spark, root), outcomes, cfg)
    discovered = discovered_urls(spark, outcomes, cfg, now)
    counts = merge_crawldb(spark, root, updates, discovered)
    hostdb = DeltaTable.forPath(spark, root.hostdb)
    before = table_version(hostdb)
    merge_hostdb(spark, root, hosts, cfg, now)
    host_metrics = merge_metrics(hostdb, before)
    n_hosts = host_metrics.get("numTargetRowsUpdated", 0) + host_metrics.get("numTargetRowsInserted", 0)
    archived = merge_warc_index(spark, root, outcomes)
    write_marker(spark, root.updated_marker(segment_id), f"updated at {now}\n")
    result = UpdateResult(segment_id, False, counts["updated"], counts["inserted"], n_hosts, archived)
    report(f"update: segment {segment_id}: {result.updated} URLs updated, {result.new_urls} new URLs, "
           f"{result.hosts} hosts, {result.archived} WARC records indexed")
    return result


def main(argv: list[str] | None = None) -> int:
    return run_segment_step("deltacrawl update", argv,
                            "Merge a fetched segment into the crawldb and hostdb (safe to re-run).", run)


if __name__ == "__main__":
    sys.exit(main())
