"""fetch — fetch one segment's fetchlist, politely, inside Spark tasks.

Inputs:   <crawl_root>/segments/<id>/fetchlist.
How:      every host is assigned to exactly one of fetch.tasks tasks, balancing the expected
          work per task (URLs x politeness gap, largest hosts first onto the least loaded task),
          so a few big hosts never pile up in one task; each task runs crawl.fetch.fetcher (asyncio +
          aiohttp) over its hosts: robots.txt first, one request in flight per host, adaptive
          gaps, backoff; bodies are parsed in a guarded child process and written to WARC;
          outlinks are normalised and filtered there, and those the crawldb already knows are
          dropped by a Bloom filter of the crawldb's URLs (discovery.bloom_fpr; kept in
          <crawl_root>/seen_filter and brought up to date from the crawldb's change data at the
          start of the step: jobs/engine/seen_filter.py), so they never reach the shuffle.
Outputs:  <crawl_root>/segments/<id>/fetched (Parquet, partitioned by kind: one "url" row per
          URL of the fetchlist, one "host" row per host), committed atomically by Spark
          (_SUCCESS); <crawl_root>/warc/*.warc.gz (named after segment, task and attempt, so a
          retried task never overwrites another's file), written by the tasks themselves: on
          local disk as *.open files renamed when complete, or, with the crawl root on S3
          (s3a://), uploaded as they fill (multipart, endpoint and credentials from [s3] or the
          standard AWS configuration, resolved here and handed to the tasks); a file appears
          under its final name only when complete. What task attempts that died left (*.open
          files, in-progress uploads) is removed: this segment's after the fetch succeeded, any
          segment's older than generate.lease_s when a fetch starts.
          <crawl_root>/segments/<id>/requests/: every request each task attempt sent, logged
          just before sending (crawl/fetch/requestlog.py), so a retried task (spark.task_max_failures)
          or a run after one whose driver died keeps each host's gap to the dead attempt's last
          request, and requests the dead attempt's pages again, with the crawldb's validators (their
          answers died with it: nothing is lost; a page two attempts died with is left due);
          segments/<id>/_fetched_run names the run that succeeded. Once the results are committed, the segment's complete WARC files
          they do not name (closed by task attempts or runs that died) are removed: nothing would
          ever index them (crawl.fetch.warc_store.unindexed_files).
Re-run:   safe. A segment whose results are committed is not fetched again (every URL has its
          result, and a second request would break the lease's one request per URL): the run
          only finishes the clean-up above (what a driver that died after the commit left) and
          reports the results there are; update is next. Before the commit (a run that died), it
          fetches, keeping the gaps to what the dead run requested (the request log). Refused once the
          segment is updated.
Exit:     0 done (or fetched already) · 2 unknown segment / already updated / not leased (its
          generate did not commit the lease: see check_leased) · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/fetch.py 20261129120000-a1b2c3 --crawl-root /data/crawl
"""
from __future__ import annotations

import functools
import heapq
import os
import re
import socket
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config, spark_settings
from crawl.crawldb.status import FetchStatus
from crawl.fetch.fetcher import FETCHLIST_FIELDS, fetch_partition
from crawl.net.addresses import REASON_PATTERN
from crawl.s3 import is_s3_uri
from crawl.tracking import merge_counts
from crawl.fetch.warc_store import WarcStore, remove_files, sweep_unfinished, unindexed_files, warc_store
from jobs.engine.runtime import run_segment_step
from jobs.engine.errors import UserError
from jobs.engine.logs import Progress, step_logger
from jobs.engine.seen_filter import SeenFilter, seen_filter
from jobs.engine.crawl_root import CrawlRoot, list_segments, path_exists, read_marker, write_marker
from jobs.engine.reads import read_url_state
from jobs.engine.schemas import FETCHED_SCHEMA, FETCHLIST_SCHEMA, FETCHLIST_TIMES, to_epoch

_FETCHED_FIELDS = FETCHED_SCHEMA.fieldNames()


@dataclass
class FetchResult:
    segment_id: str
    urls: int
    hosts: int
    by_fetch_status: dict[str, int] = field(default_factory=dict)
    # hosts stopped for this cycle (their URLs left due), by host_state.stop_reason
    stopped_hosts: dict[str, int] = field(default_factory=dict)
    # URLs the address guard refused (fetch_status blocked_address), by reason (crawl/net/addresses.py)
    blocked: dict[str, int] = field(default_factory=dict)
    # hosts whose robots.txt could not be read or parsed (host_state.robots_error): not crawled
    robots_errors: int = 0
    already_fetched: bool = False  # its results were committed before this run: nothing was requested
    warc_removed: int = 0          # complete WARC files no result names, removed (see the docstring)
    # sitemap and feed files refused or cut short, over the segment's hosts (host_state.sitemap_errors)
    sitemap_errors: int = 0
    # hosts whose name did not resolve (host_state.dns_error), whose TLS handshake failed
    # (host_state.tls_error), and the DNS queries the segment's tasks sent
    dns_errors: int = 0
    tls_errors: int = 0
    dns_queries: int = 0

    def summary(self) -> str:
        outcomes = ", ".join(f"{k} {v}" for k, v in self.by_fetch_status.items()) or "none"
        text = f"segment {self.segment_id}: {self.urls} URLs attempted on {self.hosts} hosts ({outcomes})"
        if self.already_fetched:
            text = (f"segment {self.segment_id} was fetched already, nothing requested again: {self.urls} URLs "
                    f"attempted on {self.hosts} hosts ({outcomes}); next: deltacrawl update {self.segment_id}")
        if self.stopped_hosts:
            text += "; hosts stopped for the cycle: " + ", ".join(f"{k} {v}" for k, v in self.stopped_hosts.items())
        if self.blocked:
            text += "; refused by the address guard: " + ", ".join(f"{k} {v}" for k, v in self.blocked.items())
        if self.sitemap_errors:
            text += f"; sitemap files refused or cut short: {self.sitemap_errors}"
        if self.dns_errors or self.tls_errors:
            text += f"; hosts failing DNS {self.dns_errors}, TLS {self.tls_errors}"
        if self.dns_queries:
            text += f"; DNS queries {self.dns_queries}"
        return text


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
    cfg = Config.of(cfg)
    delay = cfg.fetch.delay_s
    crawl_delay = F.regexp_extract(F.lower(F.coalesce(F.col("robots_txt"), F.lit(""))), r"crawl-delay:\s*([0-9.]+)", 1)
    gap = F.greatest(F.lit(delay), F.coalesce(crawl_delay.try_cast("double"), F.lit(0.0)), F.coalesce("backoff_s", F.lit(0.0)))
    rows = (fetchlist.groupBy("host").agg(F.count("*").alias("n"), F.max(gap).alias("gap"))
            .select("host", (F.col("n") * (F.col("gap") + F.lit(_REQUEST_COST_S))).alias("work")))
    rows = (rows.limit(limit) if limit else rows).collect()
    return {r["host"]: float(r["work"]) for r in rows}


def _jvm_pid() -> int | None:
    """The pid of the JVM (executor, or the driver in local mode) that started this Python
    worker: its parent, or its grandparent when workers are forked from pyspark's daemon (Linux)."""
    pid = os.getppid()
    for _ in range(2):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("java"):
                return pid
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])  # "pid (comm) state ppid ..."
        except (OSError, ValueError, IndexError):
            return None
    return None


def executor_identity() -> str:
    """"<machine>/<executor>" of the JVM whose Python worker runs this code: the executor id where
    Spark tells it (Kubernetes sets SPARK_EXECUTOR_ID; standalone with a UI and YARN name it in the
    log URLs), else the JVM's pid ("jvm-1234": an executor process, or the driver in local mode)."""
    env = os.environ
    executor = env.get("SPARK_EXECUTOR_ID")
    if not executor:
        match = re.search(r"[?&]executorId=([^&]+)", env.get("SPARK_LOG_URL_STDERR", ""))
        executor = match.group(1) if match else None
    if not executor:
        pid = _jvm_pid()
        executor = f"jvm-{pid}" if pid else f"pid-{os.getppid()}"
    return f"{socket.gethostname()}/{executor}"


@dataclass(frozen=True)
class FetchRun:
    """What every task of one fetch run shares besides the config (it travels in the closure)."""
    run_id: str                       # sortable by start time (crawl/fetch/requestlog.py)
    store: str | WarcStore | None     # where WARC files go (None: no WARC)
    request_log_dir: str | None       # where tasks log their requests (None: no log)
    completed_run: str | None = None  # the last run of this segment's fetch that succeeded
    sweep_logs_s: float | None = None  # logs on executors' local disks: remove other segments' this old
    # what the segments fetched just before know of this segment's hosts (recent_contacts):
    # politeness across segments, also when the next one starts at once
    recent_contacts: Mapping[str, Mapping[str, Any]] | None = None


# How many of the segments fetched before this one say whom they contacted last (a crawl keeps at
# most one segment in flight besides this one: crawl.overlap, jobs/crawl_cycles.py).
RECENT_SEGMENTS = 2


def recent_contacts(spark: SparkSession, root: CrawlRoot, segment_id: str, fetchlist: DataFrame,
                    cfg: Mapping[str, Any], now: float) -> dict[str, dict[str, Any]]:
    """What the last ``RECENT_SEGMENTS`` segments fetched before this one (segment ids sort by
    time) know of this segment's hosts: {host: {ended: when its last request ended, gap: the gap
    it keeps, robots_status, robots_txt, robots_fetched_at, robots_error, robots_scheme,
    robots_other: its robots.txt answers, one per origin (crawl.fetch.robots host_columns), and
    sitemaps_fetched_at: when its sitemaps were read}}. Contacts count when they ended within the
    longest gap a host can ask for (the largest of fetch.delay_s, max_delay_s and
    max_crawl_delay_s); robots.txt answers only where read after the fetchlist's (the fetcher keeps
    the newer answer of each origin), sitemaps only for hosts the fetchlist carries none for.
    A segment's first request to a host then keeps the host's gap after the last one the segment
    before sent, also when it starts the moment that one ends, and a host the segment before
    met is not asked for robots.txt, nor its sitemaps read, again before that segment's update
    has cached them (crawl.overlap: the next segment is generated before it). The request log only covers
    attempts of this segment."""
    cfg = Config.of(cfg)
    earlier = [s for s in reversed(list_segments(spark, root)) if s < segment_id
               and path_exists(spark, root.fetched(s) + "/_SUCCESS")][:RECENT_SEGMENTS]
    if not earlier:
        return {}
    window = max(cfg.fetch.delay_s, cfg.fetch.max_delay_s, cfg.fetch.max_crawl_delay_s)
    gap = F.greatest(F.coalesce("min_delay_s", F.lit(0.0)), F.coalesce("crawl_delay_s", F.lit(0.0)),
                     F.lit(cfg.fetch.delay_s))
    mine = fetchlist.groupBy("host").agg(F.max("robots_fetched_at").alias("_cached"),
                                         F.max("sitemaps_fetched_at").alias("_sitemaps_cached"))
    # each segment read on its own: one read of several partitioned folders finds no common base
    columns = ("host", "last_fetch_at", "min_delay_s", "crawl_delay_s", *_ROBOTS_COLUMNS, "sitemaps_fetched_at")
    frames = [_host_columns(spark.read.parquet(root.fetched(s)).filter(F.col("kind") == "host"), columns)
              for s in earlier]
    hosts = functools.reduce(DataFrame.unionByName, frames).join(mine, "host")
    recent = F.col("last_fetch_at") > F.lit(now - window)
    # a segment fetched before per-origin robots.txt (no robots_scheme) caches nothing the fetcher reads
    robots = ((F.col("_cached").isNull() | (F.col("robots_fetched_at") > F.unix_micros("_cached") / F.lit(1e6)))
              & F.col("robots_fetched_at").isNotNull() & F.col("robots_scheme").isNotNull())
    sitemaps = F.col("_sitemaps_cached").isNull() & F.col("sitemaps_fetched_at").isNotNull()
    latest = F.max_by(F.struct(*_ROBOTS_COLUMNS), F.when(robots, F.col("robots_fetched_at")))
    rows = (hosts.filter(recent | robots | sitemaps).groupBy("host")
            .agg(F.max(F.when(recent, F.col("last_fetch_at"))).alias("ended"), F.max(F.when(recent, gap)).alias("gap"),
                 latest.alias("r"), F.max(F.when(sitemaps, F.col("sitemaps_fetched_at"))).alias("sitemaps_fetched_at"))
            .collect())
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        c: dict[str, Any] = {"ended": r["ended"], "gap": r["gap"]}
        if r["r"] is not None and r["r"]["robots_fetched_at"] is not None:
            c.update({name: r["r"][name] for name in _ROBOTS_COLUMNS})
        if r["sitemaps_fetched_at"] is not None:
            c["sitemaps_fetched_at"] = r["sitemaps_fetched_at"]
        out[r["host"]] = c
    return out


# a host row's robots.txt cache of both origins (crawl.fetch.robots.host_columns)
_ROBOTS_COLUMNS = ("robots_status", "robots_txt", "robots_fetched_at", "robots_error", "robots_scheme", "robots_other")


def _host_columns(hosts: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """``columns`` of fetched host rows; null where a segment fetched by an older deltacrawl lacks one."""
    return hosts.select(*[F.col(c) if c in hosts.columns else F.lit(None).cast("string").alias(c) for c in columns])


def new_run_id() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "-" + os.urandom(3).hex()


def fetch_task(index: int, rows: Iterator[Any], cfg: Mapping[str, Any], run: FetchRun,
               seen: Any = None) -> Iterator[tuple]:
    """The body of one Spark task: (host, Row) pairs in, FETCHED_SCHEMA tuples out. ``seen`` is
    the broadcast seen-URL filter (bytes of crawl.net.bloom.BloomFilter), or None. Its attempt number
    names its WARC files and request log, so a retried task never writes into a dead one's."""
    cfg = Config.of(cfg)
    from pyspark import TaskContext
    dicts = [row.asDict() for _host, row in rows]
    if not dicts:
        return
    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    segment_id = dicts[0]["segment_id"]
    store = run.store
    with ExitStack() as stack:
        request_log = None
        if run.request_log_dir is not None:
            from crawl.fetch.requestlog import RequestLog, sweep_stale
            if run.sweep_logs_s is not None:
                sweep_stale(os.path.dirname(run.request_log_dir), run.sweep_logs_s, segment_id)
            request_log = stack.enter_context(RequestLog(run.request_log_dir, run.run_id, index, attempt,
                                                         run.completed_run))
        archive = None
        if store is not None:
            from crawl.fetch.warc import WarcWriter
            info = {"operator": cfg.warc.operator, "http-header-user-agent": cfg.fetch.user_agent,
                    "robots": "obey", "isPartOf": segment_id}
            archive = stack.enter_context(WarcWriter(
                store, f"{cfg.warc.prefix}-{segment_id}-{index:05d}-{attempt}",
                cfg.warc.max_file_bytes, {k: v for k, v in info.items() if v},
                gzip_level=cfg.warc.gzip_level))
        parser = None
        if cfg.parse.isolate:
            from crawl.parse.pool import BatchingParser, ParserPool
            pool = ParserPool(workers=cfg.parse.workers,
                              memory_limit_bytes=cfg.parse.memory_limit_mb * 2**20,
                              time_limit_s=cfg.parse.time_limit_s)
            parser = stack.enter_context(BatchingParser(pool))
        bloom = None
        if seen is not None:
            from crawl.net.bloom import BloomFilter
            bloom = BloomFilter.from_bytes(seen.value)
        results = fetch_partition(dicts, cfg, archive, parser, bloom, request_log, run.recent_contacts)
    where = {"fetch_task": f"{index}.{attempt}", "fetch_executor": executor_identity()}
    for out in results:
        out.update(where)
        yield tuple(map(out.get, _FETCHED_FIELDS))


def fetch_segment(spark: SparkSession, fetchlist: DataFrame, cfg: Mapping[str, Any],
                  run: FetchRun, seen: SeenFilter | None = None) -> DataFrame:
    cfg = Config.of(cfg)
    tasks = cfg.fetch.tasks or spark.sparkContext.defaultParallelism
    # a fetchlist generated by an older deltacrawl lacks the newer host fields: null (not cached)
    fetchlist = fetchlist.withColumns({f.name: F.lit(None).cast(f.dataType) for f in FETCHLIST_SCHEMA.fields
                                       if f.name not in fetchlist.columns})
    rows = to_epoch(fetchlist, FETCHLIST_TIMES).select(*FETCHLIST_FIELDS)
    pairs = rows.rdd.map(lambda row: (row["host"], row))
    work = expected_work(fetchlist, cfg, limit=MAX_BALANCED_HOSTS + 1)
    if len(work) <= MAX_BALANCED_HOSTS:
        assignment = spark.sparkContext.broadcast(balance_hosts(work, tasks))
        pairs = pairs.partitionBy(tasks, lambda host: assignment.value[host])
    else:  # too many hosts to plan on the driver: hashing still keeps each host in one task
        pairs = pairs.partitionBy(tasks)
    seen_bc = spark.sparkContext.broadcast(seen.data) if seen is not None else None
    # the config (it pickles: crawl.config.Config) and the store travel in the closure (the store with
    # its S3 settings, not a client: a task makes its own)
    fetched = pairs.mapPartitionsWithIndex(lambda index, it: fetch_task(index, it, cfg, run, seen_bc))
    # rows are built in schema order by fetch_task: no per-row type verification
    return spark.createDataFrame(fetched, FETCHED_SCHEMA, verifySchema=False)


def open_warc_store(root: CrawlRoot, cfg: Mapping[str, Any]) -> WarcStore:
    """Where the fetch tasks write WARC files, <crawl_root>/warc: a local directory or S3 objects.
    Opening it removes what task attempts left there more than generate.lease_s ago (their
    segment's lease has expired, so nothing can still be writing them); that first request to an
    object store also finds a missing bucket or refused credentials before anything is fetched."""
    cfg = Config.of(cfg)
    if not (root.is_local or is_s3_uri(root.root)):
        raise UserError(f"warc.enabled needs a local or S3 (s3a://) crawl root, not {root.root} "
                        f"(or set --conf warc.enabled=false)")
    store = warc_store(root.warc_dir, cfg)
    try:
        removed = sweep_unfinished(store, older_than_s=cfg.generate.lease_s)
    except (FileNotFoundError, PermissionError) as exc:
        raise UserError(f"cannot write WARC files: {exc}") from None
    if removed:
        step_logger("fetch").info("removed %d unfinished WARC files of task attempts older than generate.lease_s", removed)
    return store


def remove_unindexed_warc(cfg: Config, store: WarcStore, segment_id: str, named: set[str]) -> int:
    """Once the segment's results are committed (they name the WARC files ``named``), the files of
    the segment nothing will index: what is still open (the attempts that succeeded closed theirs)
    and the complete files the results do not name (closed by attempts or earlier runs that died).
    Returns how many complete files it removed."""
    sweep_unfinished(store, segment_id=segment_id)
    names = store.finished(f"{cfg.warc.prefix}-{segment_id}-")
    unwanted = unindexed_files(names, {segment_id: named})
    removed = remove_files(store, unwanted)
    if removed:
        step_logger("fetch").info("removed %d complete WARC files of segment %s that no fetch result names "
                                  "(left by a task attempt or a run that died; never indexed): %s",
                                  removed, segment_id, ", ".join(unwanted[:3]) + (", ..." if removed > 3 else ""))
    return removed


def check_leased(spark: SparkSession, root: CrawlRoot, segment_id: str) -> None:
    """A segment whose generate did not commit its lease (it failed, lost a race with another
    generate, or was killed) is refused: its URLs may be leased to another segment, and fetching
    them twice would be impolite. generate marks a committed lease (segments/<id>/_leased); a
    segment made before that marker existed passes if the crawldb leases any URL to it."""
    if path_exists(spark, root.leased_marker(segment_id)):
        return
    leased = (read_url_state(spark, root).filter((F.col("segment_id") == segment_id)
                                                 & F.col("lease_until").isNotNull()).limit(1).count())
    if leased == 0:
        raise UserError(f"segment {segment_id} holds no lease on the crawldb (its generate failed or was "
                        f"interrupted before leasing): fetching it could fetch URLs another segment holds. "
                        f"Remove {root.segment(segment_id)} and run generate")


def refuse_speculation(value: str | None) -> None:
    """A speculative copy of a slow fetch task would request every URL of its hosts again."""
    if str(value or "false").strip().lower() == "true":
        raise UserError("fetch refuses to run with spark.speculation=true: a speculative copy of a fetch "
                        "task would fetch its hosts' URLs a second time (turn speculation off)")


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, segment_id: str) -> FetchResult:
    cfg = Config.of(cfg)
    refuse_speculation(spark.sparkContext.getConf().get("spark.speculation", "false"))  # spark-submit's --conf
    fetchlist_path = root.fetchlist(segment_id)
    if not path_exists(spark, fetchlist_path):
        raise UserError(f"no segment {segment_id} in {root.root} (no {fetchlist_path})")
    if path_exists(spark, root.updated_marker(segment_id)):
        raise UserError(f"segment {segment_id} is already updated into the crawldb; generate a new one")
    already_fetched = path_exists(spark, root.fetched(segment_id) + "/_SUCCESS")
    if not already_fetched:
        check_leased(spark, root, segment_id)
    store = open_warc_store(root, cfg) if cfg.warc.enabled else None
    if already_fetched:
        step_logger("fetch").info("segment %s was fetched already: nothing is requested again", segment_id)
    else:
        seen = seen_filter(spark, root, cfg)
        if seen is not None:
            step_logger("fetch").info("%s", seen.describe())
        fetchlist = spark.read.parquet(fetchlist_path)
        run = FetchRun(new_run_id(), store, root.request_log_dir(segment_id),
                       read_marker(spark, root.fetched_run_marker(segment_id)),
                       None if root.is_local else cfg.generate.lease_s,
                       recent_contacts(spark, root, segment_id, fetchlist, cfg, time.time()) or None)
        fetched = fetch_segment(spark, fetchlist, cfg, run, seen)
        with Progress(spark, "fetch", f"segment {segment_id}", cfg.log.progress_s):
            fetched.write.mode("overwrite").partitionBy("kind").parquet(root.fetched(segment_id))
        write_marker(spark, root.fetched_run_marker(segment_id), run.run_id)
    blocked_reason = F.when(F.col("fetch_status") == FetchStatus.BLOCKED_ADDRESS,
                            F.regexp_extract(F.col("error"), REASON_PATTERN, 1))
    fetched_rows = spark.read.parquet(root.fetched(segment_id))
    # null in a segment fetched before the fetcher counted them
    sitemap_errors = F.col("sitemap_errors") if "sitemap_errors" in fetched_rows.columns else F.lit(0)
    # likewise the DNS and TLS columns in a segment fetched before they existed
    newer = {c: F.col(c) if c in fetched_rows.columns else F.lit(None) for c in ("dns_error", "tls_error", "dns_queries")}
    counts = (fetched_rows
              .groupBy("kind", "fetch_status", "stop_reason", F.col("robots_error").isNotNull().alias("robots_failed"),
                       blocked_reason.alias("blocked_reason"), newer["dns_error"].isNotNull().alias("dns_failed"),
                       newer["tls_error"].isNotNull().alias("tls_failed"))
              .agg(F.count("*").alias("n"), F.collect_set("warc_file").alias("warc_files"),
                   F.sum(sitemap_errors).alias("sitemap_errors"), F.sum(newer["dns_queries"]).alias("dns_queries"))
              .collect())
    removed = 0
    if store is not None:
        named = {name for r in counts if r["kind"] == "url" for name in r["warc_files"]}
        removed = remove_unindexed_warc(cfg, store, segment_id, named)
    hosts = sum(r["n"] for r in counts if r["kind"] == "host")
    stopped = merge_counts({r["stop_reason"]: r["n"]} for r in counts
                           if r["kind"] == "host" and r["stop_reason"] is not None)
    by_status = merge_counts({r["fetch_status"]: r["n"]} for r in counts if r["kind"] == "url")
    robots_errors = sum(r["n"] for r in counts if r["kind"] == "host" and r["robots_failed"])
    blocked = merge_counts({r["blocked_reason"]: r["n"]} for r in counts if r["kind"] == "url" and r["blocked_reason"])
    result = FetchResult(segment_id, sum(by_status.values()), hosts, dict(sorted(by_status.items())),
                         dict(sorted(stopped.items(), key=lambda kv: (-kv[1], kv[0]))), dict(sorted(blocked.items())),
                         robots_errors, already_fetched, removed,
                         sum(r["sitemap_errors"] or 0 for r in counts if r["kind"] == "host"),
                         sum(r["n"] for r in counts if r["kind"] == "host" and r["dns_failed"]),
                         sum(r["n"] for r in counts if r["kind"] == "host" and r["tls_failed"]),
                         int(sum(r["dns_queries"] or 0 for r in counts if r["kind"] == "host")))
    return result


def main(argv: list[str] | None = None) -> int:
    return run_segment_step("deltacrawl fetch", argv,
                            "Fetch a generated segment (robots.txt first, polite per-host delays).", run,
                            lambda cfg: refuse_speculation(spark_settings(cfg).get("spark.speculation")))


if __name__ == "__main__":
    sys.exit(main())
