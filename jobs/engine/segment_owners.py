"""Segment ownership for `deltacrawl crawl`: the owner record its driver keeps in each segment it
has in hand, and the take-over of segments whose driver died (docs/architecture.md, "Crash
safety"; the liveness rule is crawl/crawldb/segment_owner.py).

A crawl driver writes segments/<id>/_owner into every segment it generates (before the fetchlist,
so no segment of it is ever without one) and rewrites it every ``crawl.owner_stale_s / 10``
seconds until the segment is updated (the heartbeat a crawl on another machine reads). A restarted
crawl takes over the unfinished segments (no _updated marker) whose owner is gone, and those
without an owner (a standalone `deltacrawl generate`, e.g. Airflow's) only once their lease has
ended. Taking over is one crawldb commit that renews the segment's lease, on the condition that
the lease is still the one read before the owner was checked:

    read the lease L (of every such segment at once) → check the owner → write this driver's record → UPDATE lease_until
    WHERE segment_id = <id> AND lease_until = L

Of two crawls that take over one segment at once, Delta lets one commit (the other's conflicts,
or matches no row as L has changed): the one whose commit comes second read L after the first's
commit, so it read the first's record too, and a live owner's segment is never taken. (A segment
whose update died after its crawldb commit holds no lease left to renew: two crawls starting at
once may both run its update; its writes are made once per table, and the one that loses a commit
race ends with one line, exit 3, and the next crawl finds the segment updated.)
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from crawl.crawldb.segment_owner import SegmentOwner, owner_is_gone
from crawl.rule_ops import epoch_micros
from jobs.engine.errors import is_commit_conflict
from jobs.engine.crawl_root import (CrawlRoot, check_segment_id, list_segments, modified_at, path_exists, read_marker,
                                    segments_with, write_marker)
from jobs.engine.logs import step_logger


def _crawldb_sql(root: CrawlRoot) -> str:
    return "delta.`" + root.crawldb.replace("`", "``") + "`"


class OwnedSegments:
    """The segments this crawl driver has in hand, their owner records and the heartbeat that
    rewrites them (a daemon thread, between start() and stop())."""

    def __init__(self, spark: SparkSession, root: CrawlRoot, owner: SegmentOwner, stale_s: float):
        self.spark, self.root, self.owner, self.stale_s = spark, root, owner, float(stale_s)
        self._segments: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def mark(self, segment_id: str) -> None:
        """Write this driver's record into the segment, and keep it fresh until done()."""
        write_marker(self.spark, self.root.owner_marker(segment_id), self.owner.record() + "\n")
        with self._lock:
            self._segments.add(segment_id)

    def done(self, segment_id: str) -> None:
        with self._lock:
            self._segments.discard(segment_id)

    def _beat(self) -> None:
        while not self._stop.wait(self.stale_s / 10):
            with self._lock:
                segments = sorted(self._segments)
            for segment_id in segments:
                try:
                    # only once leased: a segment generate gave up is removed, and must not come back
                    if path_exists(self.spark, self.root.leased_marker(segment_id)):
                        write_marker(self.spark, self.root.owner_marker(segment_id), self.owner.record() + "\n")
                except Exception as exc:  # the next beat tries again; the crawl goes on
                    step_logger("crawl").warning("cannot rewrite the owner record of segment %s: %s", segment_id, exc)

    def start(self) -> "OwnedSegments":
        self._thread = threading.Thread(target=self._beat, name="deltacrawl-owner-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the heartbeat; the segments still in hand (the crawl failed or was interrupted, and
        this process may live on) get a record saying their crawl ended: the next crawl takes them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            segments, self._segments = sorted(self._segments), set()
        ended = dataclasses.replace(self.owner, ended=True).record() + "\n"
        for segment_id in segments:
            try:
                if path_exists(self.spark, self.root.leased_marker(segment_id)):
                    write_marker(self.spark, self.root.owner_marker(segment_id), ended)
            except Exception as exc:  # its lease still ends; a crawl from another process sees the pid
                step_logger("crawl").warning("cannot mark segment %s as left by this crawl: %s", segment_id, exc)


@dataclass
class TakenOver:
    """A segment of a driver that died, now this driver's: what is left to do."""
    segment_id: str
    why: str
    fetched: bool
    deduped: bool

    def steps(self) -> list[str]:
        return [s for s, done in (("fetch", self.fetched), ("dedup", self.deduped), ("update", False)) if not done]


def unfinished_segments(spark: SparkSession, root: CrawlRoot) -> list[str]:
    """Segments with a fetchlist and no _updated marker, oldest first (three listings)."""
    updated = segments_with(spark, root, "_updated")
    listed = segments_with(spark, root, "fetchlist")
    return [s for s in list_segments(spark, root) if s in listed and s not in updated]


def segment_leases(spark: SparkSession, root: CrawlRoot, segments: list[str]) -> dict[str, float]:
    """The newest lease_until the crawldb gives each segment's rows (epoch seconds; generate gives
    them all one), for the segments holding a lease: one read of the crawldb for them all."""
    if not segments:
        return {}
    listed = ", ".join(f"'{check_segment_id(s)}'" for s in segments)  # written into the statement
    rows = spark.sql(f"SELECT segment_id, max(unix_micros(lease_until)) AS until FROM {_crawldb_sql(root)} "
                     f"WHERE segment_id IN ({listed}) AND lease_until IS NOT NULL GROUP BY segment_id").collect()
    return {r["segment_id"]: r["until"] / 1e6 for r in rows}


def _set_lease(spark: SparkSession, root: CrawlRoot, segment_id: str, was: float, until: float | None) -> int:
    """Set the lease of the segment's rows whose lease is ``was`` to ``until`` (None: end it); the
    number of rows changed."""
    value = "NULL" if until is None else f"timestamp_micros({epoch_micros(until)})"
    rows = spark.sql(f"UPDATE {_crawldb_sql(root)} SET lease_until = {value} WHERE segment_id = '{segment_id}' "
                     f"AND lease_until = timestamp_micros({epoch_micros(was)})").collect()
    return int(rows[0]["num_affected_rows"]) if rows else 0


def _dead_owner(spark: SparkSession, root: CrawlRoot, segment_id: str, here: SegmentOwner, stale_s: float,
                lease: float | None, now: float) -> str | None:
    """Why the segment may be taken over, or None when it may not (module docstring)."""
    path = root.owner_marker(segment_id)
    owner = SegmentOwner.parse(read_marker(spark, path))
    if owner is None:
        if lease is None or lease > now:
            return None  # a standalone generate's (or one made before owners): its lease decides
        return f"it has no crawl driver and its lease ended at {time.strftime('%H:%M:%S', time.gmtime(lease))} UTC"
    written = modified_at(spark, path)
    age = now - written if written is not None else float("inf")
    if not owner_is_gone(owner, here, age, stale_s):
        return None
    if owner.ended:
        return f"its crawl ended without finishing it (crawl {owner.crawl_id or '?'}, pid {owner.pid} on {owner.host})"
    return f"its crawl driver is gone (pid {owner.pid} on {owner.host}, crawl {owner.crawl_id or '?'})"


def take_over(spark: SparkSession, root: CrawlRoot, segment_id: str, lease: float | None, owned: OwnedSegments,
              lease_s: float, now: float | None = None) -> TakenOver | None:
    """Make ``segment_id`` this driver's if its owner is gone (module docstring): its lease renewed
    to now + ``lease_s``, this driver's record in it. ``lease``: the segment's lease as read
    before (segment_leases; None: it holds none). None when it is not to be taken: a live
    crawl's, a standalone generate's still leased, another crawl took it first, or nothing of it
    can be finished (a fetchlist not fetched whose URLs are no longer all leased to it)."""
    now = time.time() if now is None else now
    log = step_logger("crawl")
    why = _dead_owner(spark, root, segment_id, owned.owner, owned.stale_s, lease, now)
    if why is None:
        return None
    fetched = path_exists(spark, root.fetched(segment_id) + "/_SUCCESS")
    if lease is None and not fetched:
        # its generate died before the lease committed (or its lease was given back): fetch refuses it
        log.info("segment %s: %s, and it holds no lease: left as it is (nothing of it was fetched)", segment_id, why)
        return None
    owned.mark(segment_id)
    if lease is not None:
        until = now + float(lease_s)
        try:
            renewed = _set_lease(spark, root, segment_id, lease, until)
        except Exception as exc:
            if not is_commit_conflict(exc):
                owned.done(segment_id)
                raise
            renewed = 0
        if renewed == 0:
            owned.done(segment_id)
            log.info("segment %s: %s, and another crawl took it over first", segment_id, why)
            return None
        owned.mark(segment_id)  # after the commit: a crawl that lost the race wrote its record before it
        if not fetched:
            urls = spark.read.parquet(root.fetchlist(segment_id)).count()
            if renewed < urls:
                # its lease ended and another segment leased some of its URLs since: fetching
                # them again would break the one request per lease
                _set_lease(spark, root, segment_id, until, None)
                owned.done(segment_id)
                log.info("segment %s: %s, and %d of its %d URLs are leased elsewhere now: its leases are "
                         "given back, the segment left as it is", segment_id, why, urls - renewed, urls)
                return None
            if not path_exists(spark, root.leased_marker(segment_id)):
                # its generate died between the lease's commit and the marker
                write_marker(spark, root.leased_marker(segment_id), f"leased until {until}\n")
    return TakenOver(segment_id, why, fetched, path_exists(spark, root.deduped_marker(segment_id)))
