"""The seen-URL Bloom filter of a crawl root: kept up to date from cycle to cycle, not rebuilt.

fetch broadcasts a Bloom filter of every crawldb URL to its tasks, which drop the outlinks it
holds before they reach the shuffle (crawl/net/bloom.py; discovery.bloom_fpr, bloom_max_mb).
Building it means reading and hashing every crawldb URL, a pass that grows with the table
(~10 M URLs: minutes of Python hashing per cycle) while a cycle adds only its new URLs. So the
filter is stored in the crawl root and each fetch brings the newest one up to date:

- ``<crawl_root>/seen_filter/<table id>-<version>.bloom`` holds the filter of every URL of the
  crawldb at that version (``BloomFilter.to_bytes``; the table id is Delta's, so a crawldb that
  was deleted and created again never reuses an old table's filter).
- **Up to date** (same version): used as it is.
- **Older** (version V < the crawldb's W): the URLs the crawldb's Change Data Feed shows inserted
  in versions V+1 … W are added (per partition, then OR-ed in). That reads the cycle's changes,
  not the table. Rows only ever get inserted into the crawldb; a change that removes any (a
  DELETE, a RESTORE to an older version) would leave URLs in the filter that the crawldb no longer
  has, whose rediscovery the filter would drop, so any ``delete`` change in the range means a
  full build, as does a range whose change data cannot be read (vacuumed by maintain, or the
  feed turned off).
- **Full build** otherwise (none stored, unreadable, or too full: more than twice the configured
  false-positive rate at its URL count while a bigger filter is allowed): the crawldb at W is
  read once, sized for twice its URLs (at least MIN_FILTER_CAPACITY) so later cycles can add to
  it, hashed per partition, OR-merged in a tree on the executors.

The result is stored under W (a local file is written beside and renamed; an object-store PUT
appears whole), and all but the two newest stored filters are removed: a fetch running at the same
time may still be reading the one before. A filter may hold more URLs than the crawldb (false
positives only delay a new URL until another page links it), never fewer than its version had;
a lost or broken file only costs a full build.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from crawl.net.bloom import BloomFilter
from jobs.engine.logs import step_logger
from jobs.engine.crawl_root import CrawlRoot, hadoop_path
from jobs.engine.tables import latest_snapshot

# The filter is sized for at least this many URLs (1.2 MB at 1 %): a small crawl's filter would
# otherwise be a few bytes, whose false positives are at the mercy of a handful of bits.
MIN_FILTER_CAPACITY = 1_000_000
# A full build sizes the filter for this many times the crawldb's URLs, so cycles can add to it.
HEADROOM = 2
# A stored filter is rebuilt (bigger) once its expected false-positive rate passes this many times
# discovery.bloom_fpr.
MAX_FPR_FACTOR = 2.0
# A filter whose expected false-positive rate passes this many times discovery.bloom_fpr is not
# used (only stored): capped by discovery.bloom_max_mb it would drop that share of every cycle's
# new links as known, and discovery would stall. The links then go to update's exact anti-join.
MAX_USABLE_FACTOR = 10.0
# Stored filters kept: the newest, and the one before it (a concurrent fetch may be reading it).
KEEP = 2
_NAME = re.compile(r"(?P<table>[0-9A-Za-z-]+)-(?P<version>\d{20})\.bloom")  # fullmatch


@dataclass
class SeenFilter:
    """The seen-URL Bloom filter of one cycle, as broadcast to the fetch tasks."""
    data: bytes
    urls: int
    nbytes: int
    expected_fpr: float
    version: int = -1      # the crawldb version it holds every URL of
    how: str = "built"     # "stored" (up to date), "updated" (change data added), "built" (full build)
    added: int = 0         # URLs added from the change data ("updated")
    why: str = ""          # why a full build was needed

    def describe(self) -> str:
        how = {"stored": "stored, up to date", "updated": f"stored, {self.added} new URLs added",
               "built": f"built from the crawldb ({self.why})"}[self.how]
        return (f"seen-URL filter of {self.urls} URLs at crawldb version {self.version}, {how}, "
                f"{self.nbytes / 2**20:.1f} MiB, expected false-positive rate {self.expected_fpr:.4f}")


def seen_filter(spark: SparkSession, root: CrawlRoot, cfg: Config) -> SeenFilter | None:
    """The filter of every URL the crawldb holds now: the stored one, brought up to date, or a full
    build (module docstring); stored for the next fetch. None when discovery.bloom_fpr is 0, or when
    discovery.bloom_max_mb keeps it too small to use (MAX_USABLE_FACTOR)."""
    fpr = cfg.discovery.bloom_fpr
    if fpr <= 0:
        return None
    max_bytes = cfg.discovery.bloom_max_mb * 2**20
    store = _FilterStore(spark, f"{root.root}/seen_filter")
    snapshot = latest_snapshot(spark, root.crawldb)
    table, version = str(snapshot.metadata().id()), int(snapshot.version())
    bloom, why, stored_version, added = None, "none stored", None, 0
    newest = store.newest(table, version)
    if newest is not None:
        stored_version, name = newest
        try:
            bloom = BloomFilter.from_bytes(store.read(name))
        except Exception as exc:  # noqa: BLE001 - broken, or gone (a concurrent prune), or unreadable: build
            bloom, why = None, f"stored filter {name} unreadable: {str(exc).splitlines()[0][:200]}"
    if bloom is not None and stored_version < version:
        added, why = _add_changes(spark, root, bloom, stored_version, version)
        if why:
            bloom = None
    if bloom is not None and _too_full(bloom, fpr, max_bytes):
        bloom, why = None, (f"{bloom.count} URLs make it {bloom.expected_fpr():.4f} false-positive, over "
                            f"{MAX_FPR_FACTOR:g} x discovery.bloom_fpr")
    if bloom is None:
        bloom = _full_build(spark, root, version, fpr, max_bytes)
        how = "built"
    else:
        how = "stored" if stored_version == version else "updated"
    data = bloom.to_bytes()
    if how != "stored":
        try:
            store.write(f"{table}-{version:020d}.bloom", data)
            store.prune(KEEP)
        except Exception as exc:  # noqa: BLE001 - storing only saves the next fetch work
            step_logger("fetch").warning("could not store the seen-URL filter (%s): the next fetch builds it again",
                                         str(exc).splitlines()[0][:200])
    if not usable(bloom, fpr):
        step_logger("fetch").warning(
            "the seen-URL filter of %d URLs is capped at discovery.bloom_max_mb = %s MiB, where it would drop "
            "%.1f%% of new links as known: not used this cycle (raise discovery.bloom_max_mb)",
            bloom.count, cfg.discovery.bloom_max_mb, 100 * bloom.expected_fpr())
        return None
    return SeenFilter(data, bloom.count, bloom.nbytes, bloom.expected_fpr(), version, how, added,
                      "" if how != "built" else why)


def usable(bloom: BloomFilter, fpr: float) -> bool:
    """The filter drops at most MAX_USABLE_FACTOR x discovery.bloom_fpr of new links (expected)."""
    return bloom.expected_fpr() <= MAX_USABLE_FACTOR * fpr


def _too_full(bloom: BloomFilter, fpr: float, max_bytes: int) -> bool:
    """Past MAX_FPR_FACTOR x fpr at its count, unless bloom_max_mb allows nothing bigger."""
    if bloom.expected_fpr() <= MAX_FPR_FACTOR * fpr:
        return False
    return _shape(bloom.count, fpr, max_bytes).num_bits > bloom.num_bits


def _shape(urls: int, fpr: float, max_bytes: int) -> BloomFilter:
    return BloomFilter.for_capacity(max(HEADROOM * urls, MIN_FILTER_CAPACITY), fpr, max_bytes)


def _full_build(spark: SparkSession, root: CrawlRoot, version: int, fpr: float, max_bytes: int) -> BloomFilter:
    urls = spark.read.format("delta").option("versionAsOf", version).load(root.crawldb).select("url")
    shape = _shape(urls.count(), fpr, max_bytes)
    m, k = shape.num_bits, shape.num_hashes
    parts = urls.rdd.mapPartitions(lambda it: _partial(((row[0], "insert") for row in it), m, k))
    if not parts.getNumPartitions():
        return shape
    data, _inserts, _deletes = parts.treeReduce(_merge)
    return BloomFilter.from_bytes(data) if data is not None else shape


def _add_changes(spark: SparkSession, root: CrawlRoot, bloom: BloomFilter, since: int, version: int) -> tuple[int, str]:
    """Add the URLs inserted into the crawldb in versions since+1 … version to ``bloom``: (URLs
    added, ""), or (0, why) when the filter cannot be brought up to date that way."""
    try:
        changes = _changes(spark, root, since + 1, version)
        m, k = bloom.num_bits, bloom.num_hashes
        parts = changes.rdd.mapPartitions(lambda it: _partial(((row[0], row[1]) for row in it), m, k))
        data, inserts, deletes = parts.treeReduce(_merge) if parts.getNumPartitions() else (None, 0, 0)
    except Exception as exc:  # noqa: BLE001 - change data vacuumed, or the feed was off: build instead
        return 0, f"no change data for versions {since + 1}..{version}: {str(exc).splitlines()[0][:200]}"
    if deletes:
        return 0, f"versions {since + 1}..{version} removed {deletes} crawldb rows"
    if data is not None:
        bloom.union_update(BloomFilter.from_bytes(data))
    return inserts, ""


def _changes(spark: SparkSession, root: CrawlRoot, start: int, end: int) -> DataFrame:
    """(url, _change_type) of the crawldb's inserted and deleted rows in versions start … end,
    in at most as many partitions as the session has cores (each emits a whole-size filter)."""
    changes = (spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", start).option("endingVersion", end).load(root.crawldb)
               .filter(F.col("_change_type").isin("insert", "delete")).select("url", "_change_type"))
    return changes.coalesce(max(1, spark.sparkContext.defaultParallelism))


def _partial(rows: Iterator[tuple[str, str]], num_bits: int, num_hashes: int) -> Iterator[tuple]:
    """One partition: (filter bytes of its inserted URLs or None, inserts, deletes)."""
    bloom = BloomFilter(num_bits, num_hashes)
    deletes = 0

    def inserted() -> Iterator[str]:
        nonlocal deletes
        for url, change in rows:
            if change == "insert":
                yield url
            else:
                deletes += 1
    bloom.add_many(inserted())
    yield (bloom.to_bytes() if bloom.count else None, bloom.count, deletes)


def _merge(a: tuple, b: tuple) -> tuple:
    data = a[0] if b[0] is None else b[0] if a[0] is None else \
        BloomFilter.from_bytes(a[0]).union_update(BloomFilter.from_bytes(b[0])).to_bytes()
    return data, a[1] + b[1], a[2] + b[2]


class _FilterStore:
    """The files of <crawl_root>/seen_filter: plain files on a local crawl root, Hadoop's
    FileSystem (s3a://, hdfs://, ...) otherwise."""

    def __init__(self, spark: SparkSession, folder: str):
        self.spark = spark
        self.local = None
        if "://" not in folder or folder.startswith("file://"):
            self.local = folder.removeprefix("file://")
        self.folder = folder

    def _names(self) -> list[str]:
        if self.local is not None:
            return os.listdir(self.local) if os.path.isdir(self.local) else []
        fs, path = hadoop_path(self.spark, self.folder)
        if not fs.exists(path):
            return []
        return [st.getPath().getName() for st in fs.listStatus(path)]

    def _stored(self, names: list[str] | None = None) -> list[tuple[str, int, str]]:
        """(table id, version, name) of every stored filter (of ``names``, else a new listing), oldest first."""
        names = self._names() if names is None else names
        found = [(m["table"], int(m["version"]), name) for name in names if (m := _NAME.fullmatch(name))]
        return sorted(found, key=lambda t: (t[1], t[2]))

    def newest(self, table: str, version: int) -> tuple[int, str] | None:
        """(version, name) of the newest filter of this table at a version <= ``version``."""
        mine = [(v, name) for t, v, name in self._stored() if t == table and v <= version]
        return mine[-1] if mine else None

    def read(self, name: str) -> bytes:
        if self.local is not None:
            with open(os.path.join(self.local, name), "rb") as fh:
                return fh.read()
        jvm = self.spark.sparkContext._jvm
        fs, path = hadoop_path(self.spark, f"{self.folder}/{name}")
        stream = fs.open(path)
        try:
            return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write(self, name: str, data: bytes) -> None:
        if self.local is not None:
            os.makedirs(self.local, exist_ok=True)
            final = os.path.join(self.local, name)
            partial = f"{final}.{os.getpid()}.partial"
            with open(partial, "wb") as fh:
                fh.write(data)
            os.replace(partial, final)  # readers see the whole file or none
            return
        fs, path = hadoop_path(self.spark, f"{self.folder}/{name}")
        out = fs.create(path, True)  # an object store shows the object only once it is closed
        try:
            view = memoryview(data)
            for start in range(0, len(view), 8 << 20):
                out.write(bytearray(view[start:start + (8 << 20)]))
        finally:
            out.close()

    def prune(self, keep: int) -> None:
        """Remove all but the ``keep`` newest stored filters (of any table); on a local crawl root
        also the partial files of writers that died (older than an hour)."""
        names = self._names()  # one listing (a LIST request on an object store)
        doomed = [name for _t, _v, name in self._stored(names)[:-keep]]
        if self.local is not None:
            for name in names:
                path = os.path.join(self.local, name)
                try:
                    if name in doomed or (name.endswith(".partial") and time.time() - os.path.getmtime(path) > 3600):
                        os.remove(path)
                except FileNotFoundError:
                    pass
            return
        for name in doomed:
            fs, path = hadoop_path(self.spark, f"{self.folder}/{name}")
            fs.delete(path, False)
