"""fetch — fetch one segment's fetchlist, politely, inside Spark tasks.

Inputs:   <crawl_root>/segments/<id>/fetchlist.
How:      the fetchlist is hash-partitioned by host into fetch.tasks partitions, so one host
          lives in exactly one task; each task runs crawl.fetcher (asyncio + aiohttp) over its
          hosts: robots.txt first, one request in flight per host, the configured delay.
Outputs:  <crawl_root>/segments/<id>/fetched (Parquet, partitioned by kind: one "url" row per
          attempted URL, one "host" row per host), committed atomically by Spark (_SUCCESS).
Re-run:   allowed until the segment is updated (it fetches again and replaces the results);
          refused afterwards.
Exit:     0 done · 2 unknown segment / already updated · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/fetch.py 20261129120000-a1b2c3 --crawl-root /data/crawl
"""
from __future__ import annotations

if __name__ == "__main__":  # run as `spark-submit jobs/<step>.py`: import our packages, not sibling files
    import os as _os, sys as _sys
    _sys.path[0] = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))

import sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.fetcher import FETCHLIST_FIELDS, fetch_partition
from jobs.common import EXIT_OK, UserError, report, run_spark_step
from jobs.tables import FETCHED_SCHEMA, FETCHLIST_TIMES, CrawlRoot, check_segment_id, path_exists, to_epoch

_FETCHED_FIELDS = FETCHED_SCHEMA.fieldNames()


@dataclass
class FetchResult:
    segment_id: str
    urls: int
    hosts: int
    by_fetch_status: dict[str, int] = field(default_factory=dict)


def fetch_task(rows: Iterator[Any], cfg: Mapping[str, Any]) -> Iterator[tuple]:
    """The body of one Spark task: Rows in, FETCHED_SCHEMA tuples out."""
    dicts = [row.asDict() for row in rows]
    for out in fetch_partition(dicts, cfg):
        yield tuple(out.get(name) for name in _FETCHED_FIELDS)


def fetch_segment(spark: SparkSession, fetchlist: DataFrame, cfg: Mapping[str, Any]) -> DataFrame:
    tasks = int(cfg["fetch.tasks"]) or spark.sparkContext.defaultParallelism
    plain_cfg = dict(cfg)  # a plain dict pickles into the task closure
    rows = (to_epoch(fetchlist, FETCHLIST_TIMES).select(*FETCHLIST_FIELDS)
            .repartition(tasks, "host").sortWithinPartitions("host"))
    fetched = rows.rdd.mapPartitions(lambda it: fetch_task(it, plain_cfg))
    return spark.createDataFrame(fetched, FETCHED_SCHEMA)


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, segment_id: str) -> FetchResult:
    fetchlist_path = root.fetchlist(segment_id)
    if not path_exists(spark, fetchlist_path):
        raise UserError(f"no segment {segment_id} in {root.root} (no {fetchlist_path})")
    if path_exists(spark, root.updated_marker(segment_id)):
        raise UserError(f"segment {segment_id} is already updated into the crawldb; generate a new one")
    fetched = fetch_segment(spark, spark.read.parquet(fetchlist_path), cfg)
    fetched.write.mode("overwrite").partitionBy("kind").parquet(root.fetched(segment_id))
    written = spark.read.parquet(root.fetched(segment_id))
    by_status = {r["fetch_status"]: r["n"] for r in
                 written.filter(F.col("kind") == "url").groupBy("fetch_status").agg(F.count("*").alias("n")).collect()}
    hosts = written.filter(F.col("kind") == "host").count()
    result = FetchResult(segment_id, sum(by_status.values()), hosts, dict(sorted(by_status.items())))
    summary = ", ".join(f"{k} {v}" for k, v in result.by_fetch_status.items()) or "none"
    report(f"fetch: segment {segment_id}: {result.urls} URLs attempted on {hosts} hosts ({summary})")
    return result


def configure(parser) -> None:
    parser.description = "Fetch a generated segment (robots.txt first, polite per-host delays)."
    parser.add_argument("segment", metavar="SEGMENT", help="segment id printed by generate")


def step(spark, cfg, root, args) -> int:
    run(spark, cfg, root, args.segment)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_spark_step("deltacrawl fetch", argv, configure, step, lambda args: check_segment_id(args.segment))


if __name__ == "__main__":
    sys.exit(main())
