"""How the steps write the crawl root's Delta tables: once per segment, and side by side.

* ``commit_once`` / ``append_once``: Delta's idempotent writes. A commit carries an
  (application id, version) pair; a table that recorded the pair already skips the write,
  atomically with the check. A step that died after some of its tables committed is simply run
  again: each table takes the segment's write once, whatever other steps committed between.
* ``run_concurrently``: independent writes of one step (tables that do not read each other's
  new rows) as parallel Spark jobs. A MERGE on small input is mostly fixed cost on the driver
  (planning, Delta's log, several small jobs: docs/decisions.md "Cycle cost"); two at once took
  0.7x the time of two in a row on 2 cores.
* ``merge_mode``: whether a step's MERGEs mark changed rows in deletion vectors (large tables)
  or rewrite the files they touch (small ones: cheaper there), by the largest target's size.
* ``merge_counts``: the row counts a MERGE returns, without reading the table's history.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from delta.tables import DeltaTable
from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.reads import url_counts
from jobs.engine.tables import table_bytes

# Delta's idempotent writes: a commit carrying an (application id, version) the table has
# recorded already is skipped, atomically with the check (the pair is part of the commit).
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def txn_app_id(step: str, segment_id: str) -> str:
    """The application id of a step's writes for one segment (each table records it once)."""
    return f"deltacrawl-{step}-{segment_id}"


@contextmanager
def commit_once(spark: SparkSession, app_id: str) -> Iterator[None]:
    """The MERGE / UPDATE / DELETE made inside is committed at most once per table for
    ``app_id``: run again after it committed (the step died later, or ran twice), it changes
    nothing, whatever other commits came in between. One step's writes at a time: the setting
    belongs to the session. (An append takes the same pair as the writer options txnAppId,
    txnVersion: see append_once.)"""
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, "1")
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def append_once(rows: DataFrame, path: str, app_id: str) -> None:
    """Append ``rows`` to the Delta table at ``path`` unless an append of ``app_id`` is there."""
    rows.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", 1).save(path)


# Delta's switch: a MERGE into a table with deletion vectors enabled marks the rows it changes
# (true, Delta's default) or rewrites the files that hold them (false).
MERGE_DELETION_VECTORS = "spark.databricks.delta.merge.deletionVectors.persistent"


@contextmanager
def session_setting(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """The session's Spark setting ``key`` is ``value`` inside (unchanged for None), as before after."""
    if value is None:
        yield
        return
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


@contextmanager
def merge_mode(spark: SparkSession, cfg: Config, *paths: str) -> Iterator[bool]:
    """The MERGEs made inside mark changed rows in deletion vectors if one of the tables at
    ``paths`` (those they write) holds more than crawldb.deletion_vectors_min_mb, and rewrite the
    files they touch otherwise (yields which). A deletion-vector MERGE writes what changed, however
    large the table, but costs ~1 s more on a small one (conf/defaults.toml). One decision for all
    of a step's MERGEs: the setting belongs to the session (they may run side by side)."""
    min_bytes = cfg.crawldb.deletion_vectors_min_mb * 1024 * 1024
    mark = min_bytes == 0 or any(table_bytes(spark, path) > min_bytes for path in paths)
    with session_setting(spark, MERGE_DELETION_VECTORS, "true" if mark else "false"):
        yield mark


# Delta's switch: whether a MERGE first copies its source to the executors' storage ("auto": when
# the source is not only Delta scans, so it cannot change while the MERGE reads it twice).
MERGE_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


@contextmanager
def local_merge_sources(spark: SparkSession, local: bool) -> Iterator[None]:
    """``local``: the MERGEs made inside have sources made only of rows the driver holds (local
    relations: they cannot change between the MERGE's two reads), so Delta need not copy them
    first (a job per MERGE, 0.8-1.2 s on a warm demo update). Otherwise Delta's default."""
    with session_setting(spark, MERGE_MATERIALIZE_SOURCE, "none" if local else None):
        yield


def merge_counts(result: DataFrame) -> dict[str, int]:
    """The row counts a MERGE's execute() returns: {"updated", "inserted", "deleted"} (all 0
    when Delta skipped it as an idempotent write it had already committed)."""
    rows = result.collect()
    row = rows[0].asDict() if rows else {}
    return {key: int(row.get(f"num_{key}_rows") or 0) for key in ("updated", "inserted", "deleted")}


def run_concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Call each of ``calls`` in its own thread (Spark runs their jobs side by side) and return
    their results in order. Every call runs to its end; then the first failure is raised."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def target(index: int, call: Callable[[], Any]) -> None:
        try:
            results[index] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            errors[index] = exc

    # InheritableThread: the calls' jobs keep the caller's job group and local properties
    threads = [InheritableThread(target=target, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results


def recount_url_counts(spark: SparkSession, root: CrawlRoot, rows: DataFrame) -> None:
    """Set host_state.url_count of the hosts of ``rows`` (host_bucket, host) from the crawldb
    (url_counts), making a hostdb row for a host new to it: counted, not added, so a step that
    runs again (or died between its crawldb commit and this one) gives the same value."""
    exact = url_counts(spark, root, rows)
    (DeltaTable.forPath(spark, root.hostdb).alias("t")
     .merge(exact.alias("s"), "t.host_bucket = s.host_bucket AND t.host = s.host")
     .whenMatchedUpdate(condition="t.url_count IS NULL OR t.url_count <> s.url_count",
                        set={"url_count": F.col("s.url_count")})
     .whenNotMatchedInsert(values={"host": F.col("s.host"), "host_bucket": F.col("s.host_bucket"),
                                   "url_count": F.col("s.url_count"),
                                   **{c: F.lit(0).cast("long") for c in ("requests", "pages_fetched", "errors")}})
     .execute())
