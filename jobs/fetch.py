"""fetch — fetch one segment's fetchlist, politely, inside Spark tasks.

Inputs:   <crawl_root>/segments/<id>/fetchlist.
How:      every host is assigned to exactly one of fetch.tasks tasks, balancing the expected
          work per task (URLs x politeness gap, largest hosts first onto the least loaded task),
          so a few big hosts never pile up in one task; each task runs crawl.fetcher (asyncio +
          aiohttp) over its hosts: robots.txt first, one request in flight per host, adaptive
          gaps, backoff; bodies are parsed in a guarded child process and written to WARC.
Outputs:  <crawl_root>/segments/<id>/fetched (Parquet, partitioned by kind: one "url" row per
          URL of the fetchlist, one "host" row per host), committed atomically by Spark
          (_SUCCESS); <crawl_root>/warc/*.warc.gz (named after segment, task and attempt, so a
          retried task never overwrites another's file; a task that dies leaves a *.open file).
Re-run:   allowed until the segment is updated (it fetches again and replaces the results);
          refused afterwards.
Exit:     0 done · 2 unknown segment / already updated · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/fetch.py 20261129120000-a1b2c3 --crawl-root /data/crawl
"""
from __future__ import annotations

if __name__ == "__main__":  # run as `spark-submit jobs/<step>.py`: import our packages, not sibling files
    import os as _os, sys as _sys
    _sys.path[0] = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))

import glob
import heapq
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.fetcher import FETCHLIST_FIELDS, fetch_partition
from jobs.common import UserError, report, run_segment_step
from jobs.tables import FETCHED_SCHEMA, FETCHLIST_TIMES, CrawlRoot, path_exists, to_epoch

_FETCHED_FIELDS = FETCHED_SCHEMA.fieldNames()


@dataclass
class FetchResult:
    segment_id: str
    urls: int
    hosts: int
    by_fetch_status: dict[str, int] = field(default_factory=dict)


# Beyond this many hosts in a segment, hosts are hash-partitioned instead of balanced on the driver.
MAX_BALANCED_HOSTS = 200_000
# Expected seconds per request besides the politeness gap (for balancing only).
_REQUEST_COST_S = 0.05


def balance_hosts(work: dict[str, float], tasks: int) -> dict[str, int]:
    """Assign hosts to tasks, largest expected work first onto the least loaded task (LPT)."""
    loads = [(0.0, t) for t in range(tasks)]
    heapq.heapify(loads)
    assignment: dict[str, int] = {}
    for host, cost in sorted(work.items(), key=lambda kv: (-kv[1], kv[0])):
        load, task = heapq.heappop(loads)
        assignment[host] = task
        heapq.heappush(loads, (load + cost, task))
    return assignment


def expected_work(fetchlist: DataFrame, cfg: Mapping[str, Any], limit: int | None = None) -> dict[str, float]:
    """Seconds a host will take: its URLs times (politeness gap + request cost); at most ``limit`` hosts."""
    delay = float(cfg["fetch.delay_s"])
    crawl_delay = F.regexp_extract(F.lower(F.coalesce(F.col("robots_txt"), F.lit(""))), r"crawl-delay:\s*([0-9.]+)", 1)
    gap = F.greatest(F.lit(delay), F.coalesce(crawl_delay.try_cast("double"), F.lit(0.0)), F.coalesce("backoff_s", F.lit(0.0)))
    rows = (fetchlist.groupBy("host").agg(F.count("*").alias("n"), F.max(gap).alias("gap"))
            .select("host", (F.col("n") * (F.col("gap") + F.lit(_REQUEST_COST_S))).alias("work")))
    rows = (rows.limit(limit) if limit else rows).collect()
    return {r["host"]: float(r["work"]) for r in rows}


def fetch_task(index: int, rows: Iterator[Any], cfg: Mapping[str, Any], warc_dir: str | None) -> Iterator[tuple]:
    """The body of one Spark task: (host, Row) pairs in, FETCHED_SCHEMA tuples out."""
    from pyspark import TaskContext
    dicts = [row.asDict() for _host, row in rows]
    if not dicts:
        return
    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    segment_id = dicts[0]["segment_id"]
    with ExitStack() as stack:
        archive = None
        if warc_dir:
            from crawl.warc import WarcWriter
            os.makedirs(warc_dir, exist_ok=True)
            info = {"operator": cfg["warc.operator"], "http-header-user-agent": cfg["fetch.user_agent"],
                    "robots": "obey", "isPartOf": segment_id}
            archive = stack.enter_context(WarcWriter(
                warc_dir, f"{cfg['warc.prefix']}-{segment_id}-{index:05d}-{attempt}",
                int(cfg["warc.max_file_bytes"]), {k: v for k, v in info.items() if v},
                gzip_level=int(cfg["warc.gzip_level"])))
        parser = None
        if cfg["parse.isolate"]:
            from crawl.parse import BatchingParser, ParserPool
            pool = ParserPool(workers=int(cfg["parse.workers"]),
                              memory_limit_bytes=int(cfg["parse.memory_limit_mb"]) * 2**20,
                              time_limit_s=float(cfg["parse.time_limit_s"]))
            parser = stack.enter_context(BatchingParser(pool))
        results = fetch_partition(dicts, cfg, archive, parser)
    for out in results:
        yield tuple(out.get(name) for name in _FETCHED_FIELDS)


def fetch_segment(spark: SparkSession, fetchlist: DataFrame, cfg: Mapping[str, Any], warc_dir: str | None) -> DataFrame:
    tasks = int(cfg["fetch.tasks"]) or spark.sparkContext.defaultParallelism
    plain_cfg = dict(cfg)  # a plain dict pickles into the task closure
    rows = to_epoch(fetchlist, FETCHLIST_TIMES).select(*FETCHLIST_FIELDS)
    pairs = rows.rdd.map(lambda row: (row["host"], row))
    work = expected_work(fetchlist, cfg, limit=MAX_BALANCED_HOSTS + 1)
    if len(work) <= MAX_BALANCED_HOSTS:
        assignment = spark.sparkContext.broadcast(balance_hosts(work, tasks))
        pairs = pairs.partitionBy(tasks, lambda host: assignment.value[host])
    else:  # too many hosts to plan on the driver: hashing still keeps each host in one task
        pairs = pairs.partitionBy(tasks)
    fetched = pairs.mapPartitionsWithIndex(lambda index, it: fetch_task(index, it, plain_cfg, warc_dir))
    # rows are built in schema order by fetch_task: no per-row type verification
    return spark.createDataFrame(fetched, FETCHED_SCHEMA, verifySchema=False)


def remove_unfinished_warcs(warc_dir: str, prefix: str, segment_id: str) -> int:
    """Delete this segment's *.open WARC files: left by task attempts that died (the attempt that
    succeeded closed and renamed its own). Nothing indexes them, so nothing is lost."""
    pattern = os.path.join(glob.escape(warc_dir), f"{glob.escape(prefix)}-{segment_id}-*.open")
    removed = 0
    for path in glob.glob(pattern):
        try:
            os.remove(path)
            removed += 1
        except OSError:
            pass
    return removed


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, segment_id: str) -> FetchResult:
    fetchlist_path = root.fetchlist(segment_id)
    if not path_exists(spark, fetchlist_path):
        raise UserError(f"no segment {segment_id} in {root.root} (no {fetchlist_path})")
    if path_exists(spark, root.updated_marker(segment_id)):
        raise UserError(f"segment {segment_id} is already updated into the crawldb; generate a new one")
    warc_dir = None
    if cfg["warc.enabled"]:
        if not root.is_local:
            raise UserError("warc.enabled needs a local crawl root for now (set --conf warc.enabled=false)")
        warc_dir = root.local_path(root.warc_dir)
    fetched = fetch_segment(spark, spark.read.parquet(fetchlist_path), cfg, warc_dir)
    fetched.write.mode("overwrite").partitionBy("kind").parquet(root.fetched(segment_id))
    if warc_dir:
        remove_unfinished_warcs(warc_dir, cfg["warc.prefix"], segment_id)
    counts = (spark.read.parquet(root.fetched(segment_id)).groupBy("kind", "fetch_status")
              .agg(F.count("*").alias("n")).collect())
    by_status = {r["fetch_status"]: r["n"] for r in counts if r["kind"] == "url"}
    hosts = sum(r["n"] for r in counts if r["kind"] == "host")
    result = FetchResult(segment_id, sum(by_status.values()), hosts, dict(sorted(by_status.items())))
    summary = ", ".join(f"{k} {v}" for k, v in result.by_fetch_status.items()) or "none"
    report(f"fetch: segment {segment_id}: {result.urls} URLs attempted on {hosts} hosts ({summary})")
    return result


def main(argv: list[str] | None = None) -> int:
    return run_segment_step("deltacrawl fetch", argv,
                            "Fetch a generated segment (robots.txt first, polite per-host delays).", run)


if __name__ == "__main__":
    sys.exit(main())
