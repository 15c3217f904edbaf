"""generate — select the due URLs into a new segment's fetchlist and lease them.

Inputs:   <crawl_root>/crawldb, <crawl_root>/hostdb.
Selects:  URLs with a generatable status (all but duplicate), next_fetch_at <= now, no lease
          in force, whose host is not deferred or backing off; at most
          generate.max_urls_per_host per host (or a fetch.host_overrides entry's
          max_urls_per_cycle, or the host's lowered host_state.url_budget if it looked like a
          trap; best score first, then longest due), at most generate.top_n in all.
Outputs:  <crawl_root>/segments/<segment_id>/fetchlist (Parquet, with the host's cached
          robots.txt when fresher than fetch.robots_ttl_s, its sitemap list, and
          when its sitemaps were last read if within sitemaps.ttl_s); then one MERGE writes the lease
          (lease_until = now + generate.lease_s, segment_id) onto the selected crawldb rows.
Re-run:   safe: leased URLs are not selected again, so a second run makes a disjoint segment
          (or exits 1). If the job dies between the two writes, the orphan fetchlist is
          harmless: its URLs are not leased, and update ignores results for unleased URLs.
Exit:     0 segment written · 1 nothing due (like Nutch's generator) · 2 bad input · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/generate.py --crawl-root /data/crawl
"""
from __future__ import annotations

if __name__ == "__main__":  # run as `spark-submit jobs/<step>.py`: import our packages, not sibling files
    import os as _os, sys as _sys
    _sys.path[0] = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))

import secrets
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from crawl.status import GENERATABLE_STATUSES
from jobs.common import EXIT_NOTHING_TO_DO, EXIT_OK, UserError, report, run_spark_step
from jobs.tables import (FETCHLIST_SCHEMA, CrawlRoot, delete_path, ensure_tables, from_epoch_col,
                         read_host_state, read_url_state, table_exists)

LEASE_KEY = "t.host_bucket = s.host_bucket AND t.url_hash = s.url_hash AND t.url = s.url"


@dataclass
class GenerateResult:
    segment_id: str | None
    urls: int
    hosts: int


def new_segment_id(now: float) -> str:
    """Sortable by time, unique across concurrent generators."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def select_due(url_state: DataFrame, host_state: DataFrame, now: float) -> DataFrame:
    """URLs eligible for fetching now (see module docstring)."""
    now_ts = from_epoch_col(F.lit(now))
    # hosts deferred (Crawl-delay too large) or backing off (429/503, robots.txt unreachable)
    deferred = (host_state.filter((F.col("deferred_until") > now_ts) | (F.col("backoff_until") > now_ts))
                .select("host_bucket", "host"))
    return (url_state
            .filter(F.col("status").isin(*GENERATABLE_STATUSES))
            .filter(F.col("next_fetch_at") <= now_ts)
            .filter(F.col("lease_until").isNull() | (F.col("lease_until") <= now_ts))
            .join(deferred, ["host_bucket", "host"], "left_anti"))


def host_name_col() -> Column:
    """The host without its port, lower-case (what fetch.host_overrides patterns match)."""
    return F.lower(F.regexp_replace(F.col("host"), r":[0-9]+$", ""))


def override_cap(cfg: Mapping[str, Any], key: str, default: int) -> Column:
    """``default``, or ``key`` of the first fetch.host_overrides entry matching the row's host that sets it."""
    name = host_name_col()
    cap = F.lit(int(default))
    # CASE WHEN is first-match-wins, like crawl.politeness.host_override: build it back to front
    for entry in reversed(list(cfg["fetch.host_overrides"])):
        if key not in entry:
            continue
        pattern = entry["pattern"]
        if pattern.startswith("*."):
            domain = pattern[2:]
            matches = (name == domain) | name.endswith("." + domain)
        else:
            matches = name == pattern
        cap = F.when(matches, F.lit(int(entry[key]))).otherwise(cap)
    return cap


def per_host_cap(cfg: Mapping[str, Any]) -> Column:
    """generate.max_urls_per_host, or the first matching override's max_urls_per_cycle."""
    return override_cap(cfg, "max_urls_per_cycle", int(cfg["generate.max_urls_per_host"]))


def select_fetchlist(due: DataFrame, host_state: DataFrame, cfg: Mapping[str, Any], segment_id: str,
                     now: float) -> DataFrame:
    """Cap per host and in all, attach the fresh robots.txt cache; one row per URL to fetch."""
    per_host = Window.partitionBy("host").orderBy(F.col("score").desc(), F.col("next_fetch_at").asc(),
                                                  F.col("url").asc())
    # a host flagged as a trap has a lowered budget (host_state.url_budget, set by update)
    budgets = host_state.filter(F.col("url_budget").isNotNull()).select("host_bucket", "host", "url_budget")
    capped = (due.join(F.broadcast(budgets), ["host_bucket", "host"], "left")
              .withColumn("_rank", F.row_number().over(per_host))
              .filter(F.col("_rank") <= F.least(per_host_cap(cfg), F.coalesce("url_budget", per_host_cap(cfg))))
              .drop("url_budget"))
    top = capped.orderBy(F.col("score").desc(), F.col("_rank").asc(), F.col("url").asc()).limit(int(cfg["generate.top_n"]))
    fresh_after = from_epoch_col(F.lit(now - float(cfg["fetch.robots_ttl_s"])))
    fresh = F.col("robots_fetched_at") > fresh_after
    sitemaps_fresh = F.col("sitemaps_fetched_at") > from_epoch_col(F.lit(now - float(cfg["sitemaps.ttl_s"])))
    robots = host_state.select(
        "host_bucket", "host", "backoff_s", "sitemaps",
        *[F.when(fresh, F.col(c)).alias(c) for c in ("robots_status", "robots_txt", "robots_fetched_at")],
        F.when(sitemaps_fresh, F.col("sitemaps_fetched_at")).alias("sitemaps_fetched_at"))
    rows = (top.join(robots, ["host_bucket", "host"], "left")
            .withColumn("segment_id", F.lit(segment_id))
            .select(*FETCHLIST_SCHEMA.fieldNames(), "_rank"))
    return rows.repartition("host").sortWithinPartitions("host", "_rank").drop("_rank")


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, now: float | None = None) -> GenerateResult:
    now = time.time() if now is None else now
    if not table_exists(spark, root.crawldb):
        raise UserError(f"no crawldb in {root.root}: run 'deltacrawl inject SEEDS_FILE' first")
    ensure_tables(spark, root)  # crawl roots of older versions get the new columns
    segment_id = new_segment_id(now)
    host_state = read_host_state(spark, root)
    due = select_due(read_url_state(spark, root), host_state, now)
    fetchlist = select_fetchlist(due, host_state, cfg, segment_id, now)
    path = root.fetchlist(segment_id)
    fetchlist.write.mode("errorifexists").parquet(path)
    written = spark.read.parquet(path)
    counts = written.agg(F.count("*").alias("urls"), F.countDistinct("host").alias("hosts")).collect()[0]
    if counts["urls"] == 0:
        delete_path(spark, root.segment(segment_id))
        report("generate: nothing due")
        return GenerateResult(None, 0, 0)
    lease_until = from_epoch_col(F.lit(now + float(cfg["generate.lease_s"])))
    now_ts = from_epoch_col(F.lit(now))
    (DeltaTable.forPath(spark, root.crawldb).alias("t")
     .merge(written.select("host_bucket", "url_hash", "url", "segment_id").alias("s"), LEASE_KEY)
     # re-checked at commit: a URL leased meanwhile by a concurrent generate keeps that lease
     .whenMatchedUpdate(condition=(F.col("t.lease_until").isNull() | (F.col("t.lease_until") <= now_ts)),
                        set={"lease_until": lease_until, "segment_id": F.col("s.segment_id")})
     .execute())
    result = GenerateResult(segment_id, int(counts["urls"]), int(counts["hosts"]))
    report(f"generate: segment {segment_id}: {result.urls} URLs from {result.hosts} hosts")
    return result


def configure(parser) -> None:
    parser.description = "Select due URLs into a new segment and lease them (exit 1 if nothing is due)."


def step(spark, cfg, root, args) -> int:
    result = run(spark, cfg, root)
    if result.segment_id is None:
        return EXIT_NOTHING_TO_DO
    print(result.segment_id)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_spark_step("deltacrawl generate", argv, configure, step)


if __name__ == "__main__":
    sys.exit(main())
