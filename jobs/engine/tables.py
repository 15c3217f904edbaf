"""The Delta tables of a crawl root themselves: made (or given the columns and properties a newer
deltacrawl adds) before a step writes them, refused when something else is in their place, and
their newest snapshot — version, size, and built ahead of the step that reads it. Their schemas
are in jobs/engine/schemas.py, their places in jobs/engine/crawl_root.py.

Layout decision (measured in docs/layout.md): url_state and host_state are partitioned by
``host_bucket`` = stable_hash(host) mod ``crawldb.host_buckets``. A bounded bucket keeps the
partition count fixed (partitionBy("host") means one directory per host: millions of tiny
files), and every row of a host stays in one partition, so a host lookup with the bucket in
its predicate reads 1/B of the table even right after a MERGE, with no OPTIMIZE (unsorted
layouts and liquid clustering lose that locality until the next OPTIMIZE). It does NOT make a
MERGE cheaper: a segment's hosts land in every bucket. Deletion vectors do that (8.5x fewer
bytes written per MERGE), so they are enabled on both tables.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterable, Iterator

from delta.tables import DeltaTable
from pyspark import InheritableThread
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from jobs.engine.crawl_root import CrawlRoot, hadoop_path
from jobs.engine.errors import UserError
from jobs.engine.schemas import (CYCLES_SCHEMA, DEDUP_BANDS_SCHEMA, DEDUP_PAGES_SCHEMA, HOST_STATE_SCHEMA,
                                 URL_STATE_SCHEMA, WARC_INDEX_SCHEMA)


def _ensure(spark: SparkSession, path: str, schema: StructType, comment: str, partition: str | None,
            change_feed: bool = False, deletion_vectors: bool = False) -> None:
    """Runs before every step that writes the table, so a table that is there costs no Spark job:
    its columns and properties come from the snapshot Delta keeps in the session.

    ``deletion_vectors``: a MERGE marks the rows it changes in a deletion vector instead of
    copying every untouched row of each file it touches (docs/layout.md: 8.5x fewer bytes
    written per update). Every table a step MERGEs into, and grows, has them."""
    if DeltaTable.isDeltaTable(spark, path):
        snapshot = latest_snapshot(spark, path)
        # a crawl root made by an older deltacrawl: add the columns it lacks (all nullable)
        have = set(snapshot.schema().fieldNames())
        missing = [f for f in schema.fields if f.name not in have]
        if missing:
            cols = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({cols})")
        wanted = [name for name, on in ((CHANGE_FEED_PROPERTY, change_feed), (DELETION_VECTORS_PROPERTY, deletion_vectors))
                  if on and not _property_true(snapshot, name)]
        if wanted:
            # (the change feed starts with this commit: readChangeFeed from an older version fails, README)
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({', '.join(f'{n} = true' for n in wanted)})")
        return
    check_not_foreign(spark, path)
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).comment(comment)
    if change_feed:
        builder = builder.property(CHANGE_FEED_PROPERTY, "true")
    if deletion_vectors:
        builder = builder.property(DELETION_VECTORS_PROPERTY, "true")
    if partition:
        builder = builder.partitionedBy(partition)
    builder.execute()


# Change Data Feed on the crawldb and hostdb: a downstream indexer reads the rows each commit
# changed (table_changes / readChangeFeed, README) instead of diffing whole versions.
CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"


DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"


def change_feed_enabled(spark: SparkSession, path: str) -> bool:
    return _property_true(latest_snapshot(spark, path), CHANGE_FEED_PROPERTY)


def _property_true(snapshot, name: str) -> bool:
    configuration = snapshot.metadata().configuration()
    return configuration.contains(name) and str(configuration.apply(name)).lower() == "true"


def ensure_state_tables(spark: SparkSession, root: CrawlRoot) -> None:
    """ensure_tables for the crawldb and hostdb only: what generate reads and writes (the WARC
    index's snapshot would cost it a few Spark jobs for nothing)."""
    _ensure(spark, root.crawldb, URL_STATE_SCHEMA, "deltacrawl url_state: one row per known URL", "host_bucket",
            change_feed=True, deletion_vectors=True)
    _ensure(spark, root.hostdb, HOST_STATE_SCHEMA, "deltacrawl host_state: one row per host", "host_bucket",
            change_feed=True, deletion_vectors=True)


def ensure_tables(spark: SparkSession, root: CrawlRoot) -> None:
    """Create the crawl root's tables if missing, or add new columns to old ones (idempotent)."""
    ensure_state_tables(spark, root)
    _ensure(spark, root.warc_index, WARC_INDEX_SCHEMA, "deltacrawl warc_index: where each response is archived", None)


def ensure_cycles_table(spark: SparkSession, root: CrawlRoot) -> None:
    _ensure(spark, root.cycles, CYCLES_SCHEMA, "deltacrawl cycles: one row per step run, with counts and seconds",
            None)


def ensure_dedup_tables(spark: SparkSession, root: CrawlRoot) -> None:
    # dedup/pages is not partitioned (dedup reads all of it), so without deletion vectors each MERGE
    # rewrote the whole table (docs/decisions.md "Ten cycles, then maintenance")
    _ensure(spark, root.dedup_pages, DEDUP_PAGES_SCHEMA, "deltacrawl dedup pages: fingerprints of canonical pages",
            None, deletion_vectors=True)
    _ensure(spark, root.dedup_bands, DEDUP_BANDS_SCHEMA, "deltacrawl dedup bands: SimHash and MinHash band rows",
            "band", deletion_vectors=True)


def latest_snapshot(spark: SparkSession, path: str):
    """The table's newest snapshot (a JVM object): Delta lists _delta_log/ for commits newer
    than the one the session holds; no Spark job (history(1) runs one: 0.3 s against 0.05 s)."""
    none = spark.sparkContext._jvm.scala.Option.empty()
    return DeltaTable.forPath(spark, path)._jdt.deltaLog().update(False, none, none)


def table_version(spark: SparkSession, path: str) -> int:
    return int(latest_snapshot(spark, path).version())


def table_bytes(spark: SparkSession, path: str) -> int:
    """The newest snapshot's data files, in bytes (what a query reads; DESCRIBE DETAIL's sizeInBytes)."""
    return int(latest_snapshot(spark, path).sizeInBytes())


def build_snapshots(spark: SparkSession, paths: Iterable[str]) -> None:
    """Have Delta build the newest snapshot of each table at ``paths``: its list of data files,
    replayed from the log by a few Spark jobs the first time a version is read (0.3-1.2 s a table
    on a small crawl, docs/decisions.md "Cycle cost, eighth round"). A later read of that version
    finds it built. Best effort: a table that is missing or unreadable is left to the step that
    reads it (and its clear message)."""
    for path in paths:
        try:
            spark.read.format("delta").load(path).inputFiles()
        except Exception as exc:  # noqa: BLE001 - the reading step reports it, if it matters
            logging.getLogger("deltacrawl.tables").debug("snapshot of %s not built ahead: %s", path, exc)


@contextmanager
def snapshots_built_meanwhile(spark: SparkSession, paths: Iterable[str]) -> Iterator[None]:
    """While the body runs (a fetch, which waits on hosts most of its span), build the newest
    snapshots of the tables at ``paths`` on another thread, in a job group of their own; waits
    for them when the body ends, unless it failed."""
    sc = spark.sparkContext

    def build() -> None:
        sc.setJobGroup("deltacrawl-snapshots", "snapshots built ahead of the steps that read them")
        build_snapshots(spark, list(paths))

    thread = InheritableThread(target=build, name="deltacrawl-snapshots", daemon=True)
    thread.start()
    yield
    thread.join()


def table_exists(spark: SparkSession, path: str) -> bool:
    """A Delta table is there; a folder with other things in it is bad input (check_not_foreign)."""
    if DeltaTable.isDeltaTable(spark, path):
        return True
    check_not_foreign(spark, path)
    return False


def check_not_foreign(spark: SparkSession, path: str) -> None:
    """Where a table of ours belongs there must be nothing, or an empty folder: files that are not
    a Delta table (a copy gone wrong, another tool's output) are refused, never written into."""
    fs, hpath = hadoop_path(spark, path)
    if fs.exists(hpath) and (not fs.getFileStatus(hpath).isDirectory() or len(fs.listStatus(hpath)) > 0):
        raise UserError(f"{path} exists but is not a Delta table (no _delta_log/ in it): move it away, "
                        f"or use another crawl root")
