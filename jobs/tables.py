"""Schemas and locations of the crawl root's tables (documented column by column in docs/crawldb.md).

Layout decision (measured in docs/layout.md): url_state and host_state are partitioned by
``host_bucket`` = stable_hash(host) mod ``crawldb.host_buckets``. A bounded bucket keeps the
partition count fixed (partitionBy("host") means one directory per host: millions of tiny
files), and every row of a host stays in one partition, so a host lookup with the bucket in
its predicate reads 1/B of the table even right after a MERGE, with no OPTIMIZE (unsorted
layouts and liquid clustering lose that locality until the next OPTIMIZE). It does NOT make a
MERGE cheaper: a segment's hosts land in every bucket. Deletion vectors do that (8.5x fewer
bytes written per MERGE), so they are enabled on both tables.

Pure code (crawl/) works with epoch seconds; tables hold TIMESTAMP columns for SQL users. The
``to_epoch``/``from_epoch`` pair converts at the boundary.
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark import InheritableThread
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DoubleType, IntegerType, LongType, StringType,
                               MapType, StructField, StructType, TimestampType)

from jobs.errors import UserError

URL_STATE_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("status", StringType(), False),
    StructField("depth", IntegerType(), False),
    StructField("score", DoubleType(), False),
    StructField("discovered_at", TimestampType(), False),
    StructField("last_fetched_at", TimestampType(), True),
    StructField("next_fetch_at", TimestampType(), True),
    StructField("fetch_interval_s", LongType(), True),
    StructField("retries", IntegerType(), False),
    StructField("http_status", IntegerType(), True),
    StructField("etag", StringType(), True),
    StructField("last_modified", StringType(), True),
    StructField("content_hash", StringType(), True),
    StructField("content_type", StringType(), True),
    StructField("simhash", LongType(), True),
    StructField("change_count", IntegerType(), False),
    StructField("fetch_count", IntegerType(), False),
    StructField("dup_of", StringType(), True),
    StructField("lease_until", TimestampType(), True),
    StructField("segment_id", StringType(), True),
    StructField("warc_file", StringType(), True),
    StructField("warc_offset", LongType(), True),
    StructField("warc_length", LongType(), True),
    StructField("redirect_to", StringType(), True),
    StructField("error", StringType(), True),
    StructField("parse_error", StringType(), True),
    StructField("redirect_hops", IntegerType(), True),
    StructField("inlinks", IntegerType(), True),
    StructField("canonical_url", StringType(), True),
    StructField("noindex", BooleanType(), True),
    StructField("text_hash", LongType(), True),
    StructField("observed_count", IntegerType(), True),
    StructField("first_observed_at", TimestampType(), True),
    StructField("last_observed_at", TimestampType(), True),
    StructField("last_changed_at", TimestampType(), True),
    StructField("gone_checks", IntegerType(), True),
    # last, where _ensure adds it to a crawldb made before it existed (its old rows have null)
    StructField("discovered_segment", StringType(), True),
])
URL_STATE_TIMES = ("discovered_at", "last_fetched_at", "next_fetch_at", "lease_until", "first_observed_at",
                   "last_observed_at", "last_changed_at")

HOST_STATE_SCHEMA = StructType([
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("robots_status", IntegerType(), True),
    StructField("robots_txt", StringType(), True),
    StructField("robots_fetched_at", TimestampType(), True),
    StructField("robots_error", StringType(), True),
    StructField("crawl_delay_s", DoubleType(), True),
    StructField("sitemaps", ArrayType(StringType()), True),
    StructField("deferred_until", TimestampType(), True),
    StructField("backoff_until", TimestampType(), True),
    StructField("backoff_s", DoubleType(), True),
    StructField("stop_reason", StringType(), True),
    StructField("mean_response_ms", DoubleType(), True),
    StructField("override_pattern", StringType(), True),
    StructField("min_delay_s", DoubleType(), True),
    StructField("last_fetch_at", TimestampType(), True),
    StructField("requests", LongType(), False),
    StructField("pages_fetched", LongType(), False),
    StructField("errors", LongType(), False),
    StructField("last_segment_id", StringType(), True),
    StructField("url_count", LongType(), True),
    StructField("url_budget", IntegerType(), True),
    StructField("trap_signal", StringType(), True),
    StructField("links_found", LongType(), True),
    StructField("links_kept", LongType(), True),
    StructField("link_rejects", MapType(StringType(), LongType()), True),
    StructField("sitemaps_fetched_at", TimestampType(), True),
    StructField("sitemap_urls", LongType(), True),
])
HOST_STATE_TIMES = ("robots_fetched_at", "deferred_until", "backoff_until", "last_fetch_at", "sitemaps_fetched_at")

FETCHLIST_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("depth", IntegerType(), False),
    StructField("score", DoubleType(), False),
    StructField("segment_id", StringType(), False),
    StructField("etag", StringType(), True),
    StructField("last_modified", StringType(), True),
    StructField("robots_status", IntegerType(), True),
    StructField("robots_txt", StringType(), True),
    StructField("robots_fetched_at", TimestampType(), True),
    StructField("backoff_s", DoubleType(), True),
    StructField("redirect_hops", IntegerType(), True),
    StructField("sitemaps", ArrayType(StringType()), True),
    StructField("sitemaps_fetched_at", TimestampType(), True),
])
FETCHLIST_TIMES = ("robots_fetched_at", "sitemaps_fetched_at")

# One row per attempted URL (kind = "url") or per host (kind = "host"); the fields of the other
# kind are null. Written partitioned by kind. Times here are epoch seconds (doubles) as produced by
# the fetcher; update converts them.
FETCHED_SCHEMA = StructType([
    StructField("kind", StringType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("segment_id", StringType(), False),
    # url rows
    StructField("url", StringType(), True),
    StructField("url_hash", LongType(), True),
    StructField("depth", IntegerType(), True),
    StructField("score", DoubleType(), True),
    StructField("fetch_status", StringType(), True),
    StructField("http_status", IntegerType(), True),
    StructField("fetched_at", DoubleType(), True),
    StructField("elapsed_ms", LongType(), True),
    StructField("content_type", StringType(), True),
    StructField("content_length", LongType(), True),
    StructField("truncated", BooleanType(), True),
    StructField("content_hash", StringType(), True),
    StructField("etag", StringType(), True),
    StructField("last_modified", StringType(), True),
    StructField("redirect_to", StringType(), True),
    StructField("error", StringType(), True),
    StructField("outlinks", ArrayType(StringType()), True),
    StructField("parse_error", StringType(), True),
    StructField("warc_file", StringType(), True),
    StructField("warc_offset", LongType(), True),
    StructField("warc_length", LongType(), True),
    StructField("payload_digest", StringType(), True),
    StructField("redirect_hops", IntegerType(), True),
    StructField("canonical", StringType(), True),
    StructField("noindex", BooleanType(), True),
    StructField("text_hash", LongType(), True),
    StructField("simhash", LongType(), True),
    StructField("signature", BinaryType(), True),
    # host rows
    StructField("robots_status", IntegerType(), True),
    StructField("robots_txt", StringType(), True),
    StructField("robots_fetched_at", DoubleType(), True),
    StructField("robots_error", StringType(), True),
    StructField("crawl_delay_s", DoubleType(), True),
    StructField("sitemaps", ArrayType(StringType()), True),
    StructField("deferred", BooleanType(), True),
    StructField("backoff_until", DoubleType(), True),
    StructField("backoff_s", DoubleType(), True),
    StructField("stop_reason", StringType(), True),
    StructField("mean_response_ms", DoubleType(), True),
    StructField("override_pattern", StringType(), True),
    StructField("min_delay_s", DoubleType(), True),
    StructField("requests", LongType(), True),
    StructField("pages_fetched", LongType(), True),
    StructField("errors", LongType(), True),
    StructField("last_fetch_at", DoubleType(), True),
    StructField("links_found", LongType(), True),
    StructField("links_kept", LongType(), True),
    StructField("link_rejects", MapType(StringType(), LongType()), True),
    StructField("trap_signal", StringType(), True),
    StructField("similar_pages", LongType(), True),
    StructField("sitemaps_fetched_at", DoubleType(), True),
    StructField("sitemap_entries", ArrayType(StructType([StructField("url", StringType(), False),
                                                         StructField("lastmod", DoubleType(), True)])), True),
    # both kinds: which task ("<partition>.<attempt>") and executor ("<machine>/<executor id>", or
    # "<machine>/jvm-<pid>" where Spark does not tell the id) fetched the row; one host is always
    # one task of its segment
    StructField("fetch_task", StringType(), True),
    StructField("fetch_executor", StringType(), True),
])


# fullmatch, never match with "$": "$" also matches before a trailing newline, and an id with one
# would name a different folder
_SEGMENT_ID = re.compile(r"\d{14}-[0-9a-f]{6}")


def check_segment_id(segment_id: str) -> str:
    """Segment ids come from generate (time + random hex); anything else is a user error."""
    if not _SEGMENT_ID.fullmatch(segment_id or ""):
        raise UserError(f"invalid segment id {segment_id!r} (expected the id printed by generate, "
                        f"like 20261129120000-a1b2c3)")
    return segment_id


# One row per archived record (response or revisit); see docs/crawldb.md.
WARC_INDEX_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("fetched_at", TimestampType(), False),
    StructField("http_status", IntegerType(), True),
    StructField("mime", StringType(), True),
    StructField("payload_digest", StringType(), True),
    StructField("warc_file", StringType(), False),
    StructField("warc_offset", LongType(), False),
    StructField("warc_length", LongType(), False),
    StructField("segment_id", StringType(), False),
    # last, where _ensure adds it to an index made before it existed (its old rows have null)
    StructField("warc_uri", StringType(), True),
])


# dedup/pages: one row per canonical page with text (its fingerprints, for later segments)
DEDUP_PAGES_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("text_hash", LongType(), False),
    StructField("simhash", LongType(), False),
    StructField("signature", BinaryType(), True),
    StructField("score", DoubleType(), False),
    StructField("first_fetched_at", TimestampType(), False),
    StructField("segment_id", StringType(), False),
])

# dedup/bands: the band rows of every canonical page (crawl/dedup/rules.py), partitioned by band
DEDUP_BANDS_SCHEMA = StructType([
    StructField("band", IntegerType(), False),
    StructField("value", LongType(), False),
    StructField("url_hash", LongType(), False),
    StructField("url", StringType(), False),
    StructField("simhash", LongType(), False),
])


# cycles: one row per step run (jobs/tracking.py, crawl/tracking.py), appended; see docs/crawldb.md
CYCLES_SCHEMA = StructType([
    StructField("crawl_id", StringType(), True),
    StructField("mlflow_run_id", StringType(), True),
    StructField("cycle", IntegerType(), True),
    StructField("step", StringType(), False),
    StructField("segment_id", StringType(), True),
    StructField("started_at", TimestampType(), False),
    StructField("seconds", DoubleType(), False),
    StructField("urls", LongType(), True),
    StructField("hosts", LongType(), True),
    StructField("by_outcome", MapType(StringType(), LongType()), True),
    StructField("bytes", LongType(), True),
    StructField("new_urls", LongType(), True),
    StructField("duplicates", LongType(), True),
    StructField("crawldb_urls", LongType(), True),
    StructField("crawldb_by_status", MapType(StringType(), LongType()), True),
])


class CrawlRoot:
    """Paths inside a crawl root (local path or any Hadoop-compatible URI)."""

    def __init__(self, root: str):
        if "://" not in root:
            # Delta's table builder misreads relative paths ("./crawl-data") as attribute names
            root = os.path.abspath(root)
        self.root = root.rstrip("/")

    @property
    def crawldb(self) -> str:
        return f"{self.root}/crawldb"

    @property
    def hostdb(self) -> str:
        return f"{self.root}/hostdb"

    @property
    def warc_index(self) -> str:
        return f"{self.root}/warc_index"

    @property
    def warc_dir(self) -> str:
        return f"{self.root}/warc"

    def segment(self, segment_id: str) -> str:
        return f"{self.root}/segments/{check_segment_id(segment_id)}"

    def fetchlist(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/fetchlist"

    def fetched(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/fetched"

    def updated_marker(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/_updated"

    def leased_marker(self, segment_id: str) -> str:
        """Written by generate once its lease committed: the segment's URLs are its own."""
        return f"{self.segment(segment_id)}/_leased"

    def fetched_run_marker(self, segment_id: str) -> str:
        """Written by fetch once a run succeeded: that run's id (crawl/fetch/requestlog.py)."""
        return f"{self.segment(segment_id)}/_fetched_run"

    def request_log_dir(self, segment_id: str) -> str:
        """Where fetch tasks log their requests (crawl/fetch/requestlog.py): in the segment on a local
        crawl root; on an object store, which has no append, on each executor's local disk (so
        a retry on another machine does not see what the dead attempt sent)."""
        if self.is_local:
            return self.local_path(f"{self.segment(segment_id)}/requests")
        return os.path.join(tempfile.gettempdir(), "deltacrawl-requests", check_segment_id(segment_id))

    def update_started_marker(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/_update_started"

    def dedup_result(self, segment_id: str) -> str:
        return f"{self.segment(segment_id)}/dedup"

    def dedup_started_marker(self, segment_id: str) -> str:
        """Written by dedup before it writes anything (jobs/dedup.py)."""
        return f"{self.segment(segment_id)}/_dedup_started"

    def deduped_marker(self, segment_id: str) -> str:
        """Written by dedup once both its commits are in (removed when it starts): update refuses a
        segment whose dedup started and has no such marker (it died before or between its writes)."""
        return f"{self.segment(segment_id)}/_deduped"

    @property
    def cycles(self) -> str:
        return f"{self.root}/cycles"

    @property
    def dedup_pages(self) -> str:
        return f"{self.root}/dedup/pages"

    @property
    def dedup_bands(self) -> str:
        return f"{self.root}/dedup/bands"

    @property
    def is_local(self) -> bool:
        return "://" not in self.root or self.root.startswith("file://")

    def local_path(self, path: str) -> str:
        return path[len("file://"):] if path.startswith("file://") else path


def epoch_schema(schema: StructType) -> StructType:
    """The same schema with TIMESTAMP columns as DOUBLE epoch seconds (for pure Python code)."""
    return StructType([StructField(f.name, DoubleType(), f.nullable) if isinstance(f.dataType, TimestampType)
                       else f for f in schema.fields])


def to_epoch(df: DataFrame, columns: Iterable[str]) -> DataFrame:
    return df.withColumns({c: F.unix_micros(F.col(c)) / F.lit(1e6) for c in columns})


def from_epoch_col(col: Column) -> Column:
    return F.timestamp_micros(F.round(col * F.lit(1e6)).cast("long"))


def from_epoch(df: DataFrame, columns: Iterable[str]) -> DataFrame:
    return df.withColumns({c: from_epoch_col(F.col(c)) for c in columns})


def _ensure(spark: SparkSession, path: str, schema: StructType, comment: str, partition: str | None,
            change_feed: bool = False, deletion_vectors: bool = False) -> None:
    """Runs before every step that writes the table, so a table that is there costs no Spark job:
    its columns and properties come from the snapshot Delta keeps in the session.

    ``deletion_vectors``: a MERGE marks the rows it changes in a deletion vector instead of
    copying every untouched row of each file it touches (docs/layout.md: 8.5x fewer bytes
    written per update). Every table a step MERGEs into, and grows, has them."""
    if DeltaTable.isDeltaTable(spark, path):
        snapshot = _snapshot(spark, path)
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
    return _property_true(_snapshot(spark, path), CHANGE_FEED_PROPERTY)


def _property_true(snapshot, name: str) -> bool:
    configuration = snapshot.metadata().configuration()
    return configuration.contains(name) and str(configuration.apply(name)).lower() == "true"


def ensure_tables(spark: SparkSession, root: CrawlRoot) -> None:
    """Create the crawl root's tables if missing, or add new columns to old ones (idempotent)."""
    _ensure(spark, root.crawldb, URL_STATE_SCHEMA, "deltacrawl url_state: one row per known URL", "host_bucket",
            change_feed=True, deletion_vectors=True)
    _ensure(spark, root.hostdb, HOST_STATE_SCHEMA, "deltacrawl host_state: one row per host", "host_bucket",
            change_feed=True, deletion_vectors=True)
    _ensure(spark, root.warc_index, WARC_INDEX_SCHEMA, "deltacrawl warc_index: where each response is archived", None)


def ensure_cycles_table(spark: SparkSession, root: CrawlRoot) -> None:
    _ensure(spark, root.cycles, CYCLES_SCHEMA, "deltacrawl cycles: one row per step run, with counts and seconds",
            None)


def ensure_dedup_tables(spark: SparkSession, root: CrawlRoot) -> None:
    # dedup/pages is not partitioned (dedup reads all of it), so without deletion vectors each MERGE
    # rewrote the whole table (BENCHMARKS.md "Ten cycles, then maintenance")
    _ensure(spark, root.dedup_pages, DEDUP_PAGES_SCHEMA, "deltacrawl dedup pages: fingerprints of canonical pages",
            None, deletion_vectors=True)
    _ensure(spark, root.dedup_bands, DEDUP_BANDS_SCHEMA, "deltacrawl dedup bands: SimHash and MinHash band rows",
            "band", deletion_vectors=True)


def _snapshot(spark: SparkSession, path: str):
    """The table's newest snapshot (a JVM object): Delta lists _delta_log/ for commits newer
    than the one the session holds; no Spark job (history(1) runs one: 0.3 s against 0.05 s)."""
    none = spark.sparkContext._jvm.scala.Option.empty()
    return DeltaTable.forPath(spark, path)._jdt.deltaLog().update(False, none, none)


def table_version(spark: SparkSession, path: str) -> int:
    return int(_snapshot(spark, path).version())


def table_bytes(spark: SparkSession, path: str) -> int:
    """The newest snapshot's data files, in bytes (what a query reads; DESCRIBE DETAIL's sizeInBytes)."""
    return int(_snapshot(spark, path).sizeInBytes())


def build_snapshots(spark: SparkSession, paths: Iterable[str]) -> None:
    """Have Delta build the newest snapshot of each table at ``paths``: its list of data files,
    replayed from the log by a few Spark jobs the first time a version is read (0.3-1.2 s a table
    on a small crawl, BENCHMARKS.md "Cycle cost, eighth round"). A later read of that version
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


class CachedFrames:
    """Mixin of a step's computed inputs (a dataclass with a ``cached`` field): the DataFrames it
    cached, unpersisted by release() once the step's writes are done."""
    cached: list[DataFrame]

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def fits_driver(spark: SparkSession, cfg: Mapping[str, Any], path: str) -> bool:
    """The table at ``path`` is small enough for a step's in-memory path to read it whole
    (crawldb.local_read_max_mb)."""
    max_bytes = float(cfg["crawldb.local_read_max_mb"]) * 1024 * 1024
    return max_bytes > 0 and table_bytes(spark, path) <= max_bytes


def rows_where(df: DataFrame, keep: Callable[[pa.Table], pa.Array]) -> list[dict]:
    """The rows of ``df`` (a projection of a whole table, no filter) that ``keep`` (a boolean
    mask of an Arrow table; null counts as false) selects, as dicts. Read through Arrow and
    filtered on the driver: Delta plans a read without a filter without the three file-listing
    jobs of a filtered one (BENCHMARKS.md "Cycle cost, sixth round")."""
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


def table_exists(spark: SparkSession, path: str) -> bool:
    """A Delta table is there; a folder with other things in it is bad input (check_not_foreign)."""
    if DeltaTable.isDeltaTable(spark, path):
        return True
    check_not_foreign(spark, path)
    return False


def check_not_foreign(spark: SparkSession, path: str) -> None:
    """Where a table of ours belongs there must be nothing, or an empty folder: files that are not
    a Delta table (a copy gone wrong, another tool's output) are refused, never written into."""
    fs, hpath = _hadoop_path(spark, path)
    if fs.exists(hpath) and (not fs.getFileStatus(hpath).isDirectory() or len(fs.listStatus(hpath)) > 0):
        raise UserError(f"{path} exists but is not a Delta table (no _delta_log/ in it): move it away, "
                        f"or use another crawl root")


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


def _hadoop_path(spark: SparkSession, path: str):
    """(FileSystem, Path) through Hadoop, so local paths, s3a:// and hdfs:// all work."""
    hpath = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def path_exists(spark: SparkSession, path: str) -> bool:
    fs, hpath = _hadoop_path(spark, path)
    return fs.exists(hpath)


def delete_path(spark: SparkSession, path: str) -> None:
    fs, hpath = _hadoop_path(spark, path)
    fs.delete(hpath, True)


def write_marker(spark: SparkSession, path: str, text: str) -> None:
    fs, hpath = _hadoop_path(spark, path)
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def read_marker(spark: SparkSession, path: str) -> str | None:
    """The text of a small marker file (write_marker), or None when there is none."""
    fs, hpath = _hadoop_path(spark, path)
    if not fs.exists(hpath):
        return None
    stream = fs.open(hpath)
    try:
        reader = spark.sparkContext._jvm.java.io.BufferedReader(
            spark.sparkContext._jvm.java.io.InputStreamReader(stream, "UTF-8"))
        line = reader.readLine()
    finally:
        stream.close()
    return None if line is None else str(line).strip()


def list_segments(spark: SparkSession, root: CrawlRoot) -> list[str]:
    fs, hpath = _hadoop_path(spark, f"{root.root}/segments")
    if not fs.exists(hpath):
        return []
    return sorted(st.getPath().getName() for st in fs.listStatus(hpath) if st.isDirectory())

