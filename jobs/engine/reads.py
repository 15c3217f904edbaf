"""Reading the crawl root's tables into a step: a table pinned to its version, whole tables through
Arrow filtered on the driver (no file-listing jobs), per-host URL counts, whether a table is small
enough for a step's in-memory path, and the release of what a step cached.
"""
from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.tables import table_bytes, table_version


class CachedFrames:
    """Mixin of a step's computed inputs (a dataclass with a ``cached`` field): the DataFrames it
    cached, unpersisted by release() once the step's writes are done."""
    cached: list[DataFrame]

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def fits_driver(spark: SparkSession, cfg: Config, path: str) -> bool:
    """The table at ``path`` is small enough for a step's in-memory path to read it whole
    (crawldb.local_read_max_mb)."""
    max_bytes = cfg.crawldb.local_read_max_mb * 1024 * 1024
    return max_bytes > 0 and table_bytes(spark, path) <= max_bytes


def rows_where(df: DataFrame, keep: Callable[[pa.Table], pa.Array]) -> list[dict]:
    """The rows of ``df`` (a projection of a whole table, no filter) that ``keep`` (a boolean
    mask of an Arrow table; null counts as false) selects, as dicts. Read through Arrow and
    filtered on the driver: Delta plans a read without a filter without the three file-listing
    jobs of a filtered one (docs/decisions.md "Cycle cost, sixth round")."""
    table = df.toArrow()
    return arrow_rows(table, keep(table))


def arrow_rows(table: pa.Table, mask: pa.Array) -> list[dict]:
    """The rows of ``table`` where ``mask`` is true (null counts as false), as dicts."""
    return table.filter(pc.fill_null(mask, False)).to_pylist()


def url_counts(spark: SparkSession, root: CrawlRoot, hosts: DataFrame) -> DataFrame:
    """(host_bucket, host, url_count): how many crawldb rows each of ``hosts`` has now — the
    exact value of host_state.url_count. The hosts are broadcast, so only their host_bucket
    partitions are read (dynamic partition pruning)."""
    keys = F.broadcast(hosts.select("host_bucket", "host").distinct())
    return (spark.read.format("delta").load(root.crawldb).select("host_bucket", "host")
            .join(keys, ["host_bucket", "host"], "left_semi")
            .groupBy("host_bucket", "host").agg(F.count("*").alias("url_count")))


def read_delta(spark: SparkSession, path: str, pinned: bool) -> DataFrame:
    reader = spark.read.format("delta")
    if pinned:
        # A DataFrame read by path re-resolves to the newest version each time it is computed;
        # a job that reads a table, writes it, and computes from the read again must pin it.
        reader = reader.option("versionAsOf", table_version(spark, path))
    return reader.load(path)


def read_url_state(spark: SparkSession, root: CrawlRoot, pinned: bool = False) -> DataFrame:
    return read_delta(spark, root.crawldb, pinned)


def read_host_state(spark: SparkSession, root: CrawlRoot, pinned: bool = False) -> DataFrame:
    return read_delta(spark, root.hostdb, pinned)
