"""Reading the crawl root's tables into a step: a table pinned to its version, whole tables through
Arrow filtered on the driver (no file-listing jobs; read by DuckDB's delta extension where it may,
whole_arrow), a small table as a local relation for a step that asks it many questions
(queried_frame), per-host URL counts, whether a table is small enough for a step's in-memory
path, and the release of what a step cached.
"""
from __future__ import annotations

import threading
from typing import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.schemas import to_epoch
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


_DUCKDB = threading.local()  # this thread's cursor on the process's one DuckDB, its delta extension loaded
_DUCKDB_LOCK = threading.Lock()
_DUCKDB_DB: list = []  # [the process's DuckDB connection], or [None] where it cannot be had


def _duckdb_cursor():
    """A DuckDB cursor of this thread with the delta extension loaded, or None where DuckDB or its
    delta extension is missing (both are dependencies, for `deltacrawl sql`: an install without
    them, say)."""
    cursor = getattr(_DUCKDB, "cursor", None)
    if cursor is not None:
        return cursor
    with _DUCKDB_LOCK:
        if not _DUCKDB_DB:
            try:
                import duckdb

                from crawl.readers import duckdb_delta_extension
                con = duckdb.connect()
                con.execute(f"LOAD '{duckdb_delta_extension()}'")
                _DUCKDB_DB.append(con)
            except ImportError:
                _DUCKDB_DB.append(None)
        if _DUCKDB_DB[0] is None:
            return None
        _DUCKDB.cursor = _DUCKDB_DB[0].cursor()  # a connection is not shared by threads: a cursor each
    return _DUCKDB.cursor


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _duckdb_for(cfg: Config, root: CrawlRoot):
    """The DuckDB cursor whole_arrow reads with for ``root``, None where it reads by Spark."""
    return _duckdb_cursor() if cfg.crawldb.driver_reader == "auto" and root.is_local else None


def queried_frame(spark: SparkSession, cfg: Config, root: CrawlRoot, path: str,
                  columns: Sequence[str] | None = None) -> DataFrame:
    """``columns`` (all by default; those the table lacks left out: a table of an older crawl
    root) of the Delta table at ``path``, for a step that asks it many questions (stats): where
    whole_arrow reads by DuckDB and the table fits the driver, read whole into a local relation,
    on which Spark answers each query without a Delta scan, a file listing or a job; else the
    table as Spark reads it."""
    table = spark.read.format("delta").load(path)
    columns = table.columns if columns is None else [c for c in columns if c in table.columns]
    if _duckdb_for(cfg, root) is not None and fits_driver(spark, cfg, path):
        return spark.createDataFrame(whole_arrow(spark, cfg, root, path, columns))
    return table.select(*columns)


def whole_arrow(spark: SparkSession, cfg: Config, root: CrawlRoot, path: str, columns: Sequence[str],
                epoch: Sequence[str] = (), micros: Mapping[str, str] | None = None) -> pa.Table:
    """The Delta table at ``path`` (a table of ``root``) read whole into Arrow: ``columns`` as
    stored, those of them named in ``epoch`` (timestamps) as epoch seconds (schemas.to_epoch), and
    ``micros`` {alias: timestamp column} as whole microseconds since the epoch (Spark's
    unix_micros). Read by DuckDB's delta extension (delta-kernel: deletion vectors included; no
    Spark job, no snapshot built in the JVM) where crawldb.driver_reader is "auto", the root is on
    this machine and DuckDB is there; by Spark otherwise. Both give the same rows and types
    (tests/test_e2e.py). The newest version, as a Spark read by path."""
    micros = dict(micros or {})
    cursor = _duckdb_for(cfg, root)
    if cursor is not None:
        parts = [f"epoch_us({_quoted(c)}) / 1e6 AS {_quoted(c)}" if c in epoch else _quoted(c) for c in columns]
        parts += [f"epoch_us({_quoted(c)}) AS {_quoted(alias)}" for alias, c in micros.items()]
        table = "delta_scan('" + root.local_path(path).replace("'", "''") + "')"
        rows = cursor.execute(f"SELECT {', '.join(parts)} FROM {table}").to_arrow_table()
        # DuckDB's empty answer has columns of no chunks, which pyspark's conversion refuses
        # (queried_frame): one empty chunk each, as Spark's read gives
        return rows if rows.num_rows else rows.schema.empty_table()
    return projected_arrow(spark.read.format("delta").load(path), columns, epoch, micros)


def projected_arrow(frame: DataFrame, columns: Sequence[str], epoch: Sequence[str] = (),
                    micros: Mapping[str, str] | None = None) -> pa.Table:
    """``frame``'s ``columns`` in Arrow, with whole_arrow's ``epoch`` and ``micros`` conversions, by Spark."""
    frame = frame.select(*columns, *[F.unix_micros(c).alias(alias) for alias, c in (micros or {}).items()])
    return to_epoch(frame, list(epoch)).toArrow()


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
