"""stats — a readdb-style summary of the crawldb.

Inputs:   <crawl_root>/crawldb (read only).
Outputs:  on stdout, a table (or with --format json one JSON object): totals, URLs per status,
          per HTTP status, held back by their host per reason (``held_back``), per content type
          (with its parse errors), top hosts, URLs due now.
Re-run:   always safe (reads only).
Exit:     0 done · 2 no crawldb · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/stats.py --crawl-root /data/crawl
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawl import native
from crawl.config import Config
from crawl.report import format_stats
from crawl.crawldb.status import BLOCKED_ADDRESS
from crawl.net.addresses import REASON_PATTERN
from jobs.engine.runtime import add_run_options, run_spark_step
from jobs.engine.errors import EXIT_OK, UserError
from jobs.engine.logs import log_step
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.reads import queried_frame
from jobs.engine.schemas import from_epoch_col
from jobs.engine.tables import table_exists, table_version


# the crawldb columns stats reads (held_back, content_type and parse_error where the crawldb has them)
_CRAWLDB_COLUMNS = ("host", "status", "http_status", "depth", "next_fetch_at", "lease_until", "segment_id",
                    "held_back", "content_type", "parse_error", "error")


def collect_stats(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, now: float | None = None) -> dict[str, Any]:
    cfg = Config.of(cfg)
    now = time.time() if now is None else now
    if not table_exists(spark, root.crawldb):
        raise UserError(f"no crawldb in {root.root}: run 'deltacrawl inject SEEDS_FILE' first")
    version = table_version(spark, root.crawldb)
    # One pass over the crawldb, its ten columns only, down to one row per (host, status, HTTP
    # status, content type): ~hosts x a few rows, whatever the URL count. Everything the report says comes from
    # that small table (cached), so the crawldb is read once and never held: caching its rows
    # (all columns, then seven) made stats the one step whose time grew faster than the crawldb
    # (bench/scale.py: 7.9x for 10x the URLs). A crawldb that fits the driver is read whole by
    # DuckDB into a local relation first (reads.queried_frame: stats 1.6-2.2 s against 3.1-4.3 on
    # the demo's crawl), and so is the hostdb, which host_stats asks a dozen questions.
    table = queried_frame(spark, cfg, root, root.crawldb, _CRAWLDB_COLUMNS)
    # held_back: absent from a crawldb no update has written since it was added (then none)
    reason = F.col("held_back") if "held_back" in table.columns else F.lit(None).cast("string")
    # the media type of the URL's last answer (its Content-Type, corrected by sniffing: "application/pdf"
    # for a PDF sent as application/octet-stream), without parameters; null before any answer
    media = (F.lower(F.trim(F.split("content_type", ";").getItem(0))) if "content_type" in table.columns
             else F.lit(None).cast("string"))
    failed = F.col("parse_error").isNotNull() if "parse_error" in table.columns else F.lit(False)
    urls = table.select("host", "status", "http_status", "depth", "next_fetch_at", "lease_until", "segment_id",
                        reason.alias("held_back"), media.alias("content_type"), failed.alias("parse_failed"))
    now_ts = from_epoch_col(F.lit(now))
    leased = F.col("lease_until").isNotNull() & (F.col("lease_until") > now_ts)
    due = (F.col("next_fetch_at") <= now_ts) & ~F.coalesce(leased, F.lit(False))
    # (held_back is the host's reason, the same on all its rows: grouping by it adds no groups)
    groups = (urls.groupBy("host", "status", "http_status", "held_back", "content_type")
              .agg(F.count("*").alias("n"), F.sum(due.cast("long")).alias("due"),
                   F.sum(F.col("parse_failed").cast("long")).alias("parse_errors"),
                   F.sum(leased.cast("long")).alias("leased"), F.max("depth").alias("max_depth"))
              .cache())
    try:
        totals = groups.agg(F.sum("n").alias("total"), F.countDistinct("host").alias("hosts"),
                            F.sum("due").alias("due"), F.sum("leased").alias("leased"),
                            F.max("max_depth").alias("max_depth")).collect()[0]
        by_status = [(r["status"], r["n"]) for r in
                     groups.groupBy("status").agg(F.sum("n").alias("n")).orderBy(F.desc("n"), "status").collect()]
        by_http = [(r["http_status"], r["n"]) for r in
                   groups.groupBy("http_status").agg(F.sum("n").alias("n")).orderBy(F.desc("n"), "http_status").collect()]
        held = [(r["held_back"], r["n"]) for r in
                groups.filter(F.col("held_back").isNotNull()).groupBy("held_back").agg(F.sum("n").alias("n"))
                .orderBy(F.desc("n"), "held_back").collect()]
        by_type = [(r["content_type"], r["n"], r["parse_errors"] or 0) for r in
                   groups.filter(F.col("content_type").isNotNull()).groupBy("content_type")
                   .agg(F.sum("n").alias("n"), F.sum("parse_errors").alias("parse_errors"))
                   .orderBy(F.desc("n"), "content_type").collect()]
        top_hosts = [(r["host"], r["n"]) for r in
                     groups.groupBy("host").agg(F.sum("n").alias("n")).orderBy(F.desc("n"), "host")
                     .limit(cfg.stats.top_hosts).collect()]
    finally:
        groups.unpersist()
    # leases in force, per segment: a segment whose driver died mid-fetch holds its URLs until
    # the lease ends, and `deltacrawl fetch SEGMENT` resumes it before then (a second pass, only
    # when a lease is in force: between cycles none is)
    leases = [(r["segment_id"], r["n"], r["until"].isoformat(sep=" ", timespec="minutes") if r["until"] else None)
              for r in urls.filter(leased).groupBy("segment_id")
              .agg(F.count("*").alias("n"), F.max("lease_until").alias("until"))
              .orderBy(F.desc("n"), "segment_id").limit(5).collect()] if totals["leased"] else []
    # URLs the address guard refused, by reason: read only when there are some
    blocked = ([(r["reason"], r["n"]) for r in
                table.filter(F.col("status") == BLOCKED_ADDRESS)
                .groupBy(F.regexp_extract("error", REASON_PATTERN, 1).alias("reason"))
                .agg(F.count("*").alias("n")).orderBy(F.desc("n"), "reason").collect()]
               if any(status == BLOCKED_ADDRESS for status, _ in by_status) else [])
    hosts = host_stats(spark, cfg, root, now_ts)
    return {"hostdb": hosts, "crawl_root": root.root, "version": version, "total_urls": totals["total"] or 0,
            "hosts": totals["hosts"], "due_now": totals["due"] or 0, "leased": totals["leased"] or 0,
            "max_depth": totals["max_depth"], "by_status": by_status, "by_http_status": by_http, "held_back": held,
            "by_content_type": by_type, "top_hosts": top_hosts, "leases": leases, "native_code": native.status(), "blocked": blocked}


def host_stats(spark: SparkSession, cfg: Config, root: CrawlRoot, now_ts) -> dict[str, Any]:
    """What the hostdb says: deferred and backing-off hosts, hosts whose last robots.txt reading
    failed (robots_error: not crawled, RFC 9309's complete disallow), overrides, and discovery: links found
    and kept, rejections by reason, hosts whose budget a trap signal lowered, sitemap and feed files
    refused or cut short (all cycles) and the hosts with the most of them, with their last one."""
    if not table_exists(spark, root.hostdb):
        return {"deferred": 0, "backing_off": 0, "robots_errors": 0, "dns_errors": 0, "tls_errors": 0,
                "overrides": [], "stopped": [], "links": {}, "link_rejects": [],
                "traps": [], "sitemap_errors": 0, "sitemap_problem_hosts": [], "dns": {}}
    hosts = queried_frame(spark, cfg, root, root.hostdb)
    # the DNS and TLS columns: absent from a hostdb no update has written since they were added
    newer = {c: F.col(c) if c in hosts.columns else F.lit(None) for c in ("dns_error", "tls_error", "dns_queries")}
    counts = hosts.agg(F.sum((F.col("deferred_until") > now_ts).cast("int")).alias("deferred"),
                       F.sum((F.col("backoff_until") > now_ts).cast("int")).alias("backing_off"),
                       # not crawled for its robots.txt (RFC 9309's complete disallow): it could not
                       # be read or parsed (robots_error), or it answered 5xx/429 (the error is then
                       # the status alone)
                       F.sum((F.col("robots_error").isNotNull() | (F.col("robots_status") >= 500)
                              | (F.col("robots_status") == 429)).cast("int")).alias("robots_errors"),
                       F.count(newer["dns_error"]).alias("dns_errors"),
                       F.count(newer["tls_error"]).alias("tls_errors"), F.sum(newer["dns_queries"]).alias("dns_queries"),
                       F.count(newer["dns_queries"]).alias("resolved")).collect()[0]
    dns = {"queries": int(counts["dns_queries"] or 0), "hosts": int(counts["resolved"] or 0),
           "most": [(r["host"], f"{r['dns_queries']:,} queries") for r in
                    hosts.filter(newer["dns_queries"] > 0).orderBy(F.desc("dns_queries"), "host").limit(5).collect()]
           if counts["dns_queries"] else []}
    overrides = [(r["host"], f"{r['override_pattern']} (gap {r['min_delay_s']}s)") for r in
                 hosts.filter(F.col("override_pattern").isNotNull()).orderBy("host").limit(20).collect()]
    stopped = [(r["stop_reason"], r["n"]) for r in
               hosts.filter(F.col("stop_reason").isNotNull()).groupBy("stop_reason")
               .agg(F.count("*").alias("n")).orderBy(F.desc("n")).limit(10).collect()]
    # sitemap_errors: absent from a hostdb no update has written since it was added
    problems = F.col("sitemap_errors") if "sitemap_errors" in hosts.columns else F.lit(None).cast("long")
    links = hosts.agg(F.sum("links_found").alias("found"), F.sum("links_kept").alias("kept"),
                      F.sum("sitemap_urls").alias("sitemap_urls"), F.sum(problems).alias("sitemap_errors")).collect()[0]
    sitemap_problems = ([(r["host"], f"{r['sitemap_errors']:,} files, last: {r['sitemap_last_error']}") for r in
                         hosts.filter(F.col("sitemap_errors") > 0)
                         .orderBy(F.desc("sitemap_errors"), "host").limit(10).collect()]
                        if links["sitemap_errors"] else [])
    rejects = [(r["reason"], r["n"]) for r in
               hosts.select(F.explode("link_rejects").alias("reason", "n")).groupBy("reason")
               .agg(F.sum("n").alias("n")).orderBy(F.desc("n"), "reason").collect()]
    traps = [(r["host"], f"budget {r['url_budget']} per cycle ({r['trap_signal'] or 'earlier signal'}), "
                         f"{r['url_count'] or 0} URLs") for r in
             hosts.filter(F.col("url_budget").isNotNull()).orderBy("url_budget", "host").limit(20).collect()]
    return {"deferred": counts["deferred"] or 0, "backing_off": counts["backing_off"] or 0,
            "robots_errors": counts["robots_errors"] or 0, "dns_errors": counts["dns_errors"] or 0,
            "tls_errors": counts["tls_errors"] or 0, "dns": dns,
            "overrides": overrides, "stopped": stopped, "traps": traps, "link_rejects": rejects,
            "sitemap_errors": links["sitemap_errors"] or 0, "sitemap_problem_hosts": sitemap_problems,
            "links": {"found": links["found"] or 0, "kept": links["kept"] or 0,
                      "sitemap_urls": links["sitemap_urls"] or 0}}


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, now: float | None = None,
        fmt: str = "text") -> dict[str, Any]:
    """Collect the stats and print them on stdout: a table, or (``fmt="json"``) one JSON object."""
    stats = collect_stats(spark, cfg, root, now)
    if fmt == "json":
        print(json.dumps(stats, sort_keys=True, default=str), flush=True)
    else:
        print(format_stats(stats), flush=True)
    return stats


def configure(parser) -> None:
    parser.description = "Print a summary of the crawldb (per status, per HTTP status, top hosts, due now)."
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="a table for people (default), or one JSON object for programs")
    add_run_options(parser, cycle=False)


def step(spark, cfg, root, args) -> int:
    stats, _ = log_step("stats", "", lambda: run(spark, cfg, root, fmt=args.format),
                        lambda stats: f"{stats['total_urls']} URLs on {stats['hosts']} hosts in the crawldb")
    from jobs.engine.tracking import finish_run
    finish_run(spark, cfg, root, args, stats)  # --crawl-id: that crawl run's MLflow run ends here
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_spark_step("deltacrawl stats", argv, configure, step)


if __name__ == "__main__":
    sys.exit(main())
