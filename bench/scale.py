#!/usr/bin/env python
"""Scale: does a step's cost follow its work or the table's size? (issue 13, targets 2 and 3)

Run:      .venv/bin/python bench/scale.py [--sizes 1000000,10000000] [--hosts 100000] [--top-n 100000]
                                          [--new-links 5] [--cycles 0] [--rerun-update]
                                          [--reads-only [--baseline-stats REV] [--repeats 2]]
                                          [--out-json FILE] [--keep]
What:     for each size, a synthetic crawl root in a fresh folder: a crawldb of that many URLs over
          --hosts hosts of skewed size (synth_base's rows: ~80 % unfetched, the rest fetched,
          redirected, gone, ...; url_hash and host_bucket computed as crawl/net/urls.py does), the hostdb
          rows to match (url_count = the host's rows), dedup/pages and dedup/bands for every fetched
          200 page (SimHash and 512-byte MinHash signatures, so all 12 bands per page), and the WARC
          index of every archived page. Then, in one SparkSession with the documented defaults
          (local[2], spark.driver_memory 2g) but generate.top_n = --top-n:
            generate  jobs.generate.run: the due URLs, the top N, their lease;
            fetched   a fetch result for that fetchlist made up, not fetched: every URL 200 with
                      --new-links outlinks to new URLs of its host plus one known URL, fresh text
                      fingerprints (1 % exact copies of known pages), and one host row per host;
            dedup     jobs.dedup.run on that segment;
            update    jobs.update.run on that segment (crawldb, hostdb and warc_index);
            stats     jobs.stats.collect_stats;
            warc-get  jobs.warc_get.captures of one archived URL.
          For each step: seconds; for the MERGEs of update (crawldb, hostdb) and dedup (dedup/pages,
          dedup/bands), Delta's operationMetrics and the write
          amplification (bytes the MERGE wrote / bytes of the rows it changed, at the table's mean
          bytes per row); the driver JVM's peak resident memory (VmHWM) and the Python driver's.
          Then the ratio of each step's time at the largest size to the smallest. --cycles K then
          runs K more generate / fetched / dedup / update rounds at the smallest size and reports,
          for each table before and after `deltacrawl maintain`, the files and MB of its snapshot
          (what a query reads), of its folder outside _delta_log (what storage holds until VACUUM)
          and the log's file count. --rerun-update adds, at
          each size, a second generate / fetched / dedup / update round whose update takes the
          re-run path (segments/<id>/_update_started already there, as after a crash): the crawldb
          MERGE, then the touched hosts' url_count counted again from the crawldb, then hostdb and
          warc_index. Its time beside the first round's update is the cost of crash safety's
          recount (issue 14). --reads-only skips the round: on each built root it times stats
          and warc-get --repeats times (medians), and with --baseline-stats REV also REV's
          jobs/stats.py (from `git show`), alternating with today's, checking both say the same.
Targets:  a 10x larger crawldb may cost each step <= 3x the time; write amplification <= 10; no
          driver memory that grows with the crawldb beyond the default driver memory.
Exit:     0 done · 1 a check failed (row counts after build or update).

Everything is local: Spark binds to loopback, no network is used.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, machine_facts  # noqa: E402

SEGMENT_OLD = "20260101000000-000000"
SIGNATURE_BYTES = 512  # crawl.dedup.fingerprint: 64 MinHash values of 8 bytes
DAY = 86400


def synth_base(spark, n_urls: int, n_hosts: int, buckets: int, now: float):
    """url_state rows (without lease) as a DataFrame; deterministic for given sizes."""
    from pyspark.sql import functions as F
    from crawl.net.urls import host_bucket
    from jobs.engine.schemas import URL_STATE_SCHEMA

    def uniform(col, salt: str):  # deterministic uniform [0, 1) from a row id
        return F.pmod(F.xxhash64(col, F.lit(salt)), F.lit(1_000_000_007)) / F.lit(1_000_000_007.0)

    bucket_rows = [(f"h{i}.example", host_bucket(f"h{i}.example", buckets)) for i in range(n_hosts)]
    bucket_df = spark.createDataFrame(bucket_rows, "host string, host_bucket int")
    ts = lambda col: F.timestamp_seconds(col)  # noqa: E731
    r = F.pmod(F.xxhash64(F.col("id"), F.lit("status")), F.lit(1000))
    status = (F.when(r < 800, "unfetched").when(r < 920, "fetched").when(r < 940, "notmodified")
              .when(r < 955, "redirect_perm").when(r < 965, "redirect_temp").when(r < 980, "retry")
              .when(r < 995, "gone").when(r < 998, "robots_denied").otherwise("duplicate"))
    http = (F.when(r < 800, F.lit(None)).when(r < 920, 200).when(r < 940, 304).when(r < 955, 301)
            .when(r < 965, 302).when(r < 980, 503).when(r < 995, 404).otherwise(200))
    fetched = F.col("status") != "unfetched"
    df = (spark.range(0, n_urls, numPartitions=8)
          .withColumn("host_idx", F.least(F.floor(F.pow(uniform(F.col("id"), "host"), 2) * n_hosts),
                                          F.lit(n_hosts - 1)).cast("long"))
          .withColumn("host", F.concat(F.lit("h"), F.col("host_idx"), F.lit(".example")))
          .withColumn("url", F.concat(F.lit("http://"), F.col("host"), F.lit("/p"), F.col("id")))
          .withColumn("url_hash", F.xxhash64("url"))
          .withColumn("status", status)
          .withColumn("http_status", http.cast("int"))
          .withColumn("depth", F.pmod(F.col("id"), F.lit(5)).cast("int"))
          .withColumn("score", F.lit(1.0) / (F.col("depth") + 1) * uniform(F.col("id"), "score"))
          .withColumn("_disc", F.lit(int(now)) - (uniform(F.col("id"), "disc") * 60 * DAY).cast("long"))
          .withColumn("_last", F.col("_disc") + (uniform(F.col("id"), "last") * (F.lit(int(now)) - F.col("_disc"))).cast("long"))
          .withColumn("discovered_at", ts(F.col("_disc")))
          .withColumn("last_fetched_at", F.when(fetched, ts(F.col("_last"))))
          .withColumn("fetch_interval_s", F.when(fetched, F.lit(30 * DAY)).cast("long"))
          .withColumn("next_fetch_at", F.when(fetched, ts(F.col("_last") + F.col("fetch_interval_s")))
                      .otherwise(ts(F.col("_disc"))))
          .withColumn("retries", F.when(F.col("status") == "retry", 1).otherwise(0).cast("int"))
          .withColumn("etag", F.lit(None).cast("string"))
          .withColumn("last_modified", F.lit(None).cast("string"))
          .withColumn("content_hash", F.when(F.col("http_status") == 200, F.sha2(F.col("url"), 256).substr(1, 40)))
          .withColumn("content_type", F.when(F.col("http_status") == 200, F.lit("text/html")))
          .withColumn("simhash", F.when(F.col("http_status") == 200, F.xxhash64(F.col("url"), F.lit("sim"))))
          .withColumn("change_count", F.lit(0))
          .withColumn("fetch_count", F.when(fetched, 1).otherwise(0).cast("int"))
          .withColumn("dup_of", F.when(F.col("status") == "duplicate", F.concat(F.lit("http://"), F.col("host"), F.lit("/p0"))))
          .withColumn("lease_until", F.lit(None).cast("timestamp"))
          .withColumn("segment_id", F.lit(None).cast("string"))
          .withColumn("warc_file", F.when(F.col("http_status") == 200, F.lit("segments/x/warc/part-00000.warc.gz")))
          .withColumn("warc_offset", F.when(F.col("http_status") == 200, F.col("id") * 4096))
          .withColumn("warc_length", F.when(F.col("http_status") == 200, F.lit(4096).cast("long")))
          .withColumn("redirect_to", F.when(F.col("status").startswith("redirect"), F.concat(F.col("url"), F.lit("/"))))
          .withColumn("error", F.when(F.col("status") == "retry", F.lit("HTTP 503")))
          .join(F.broadcast(bucket_df), "host"))
    return df.select(*conform(df, URL_STATE_SCHEMA), "host_idx")


def conform(df, schema) -> list:
    """Columns of ``schema`` from ``df``, cast; a schema column the generator does not know (added
    since this generator was written) becomes null, or 0 / "" / false when NOT NULL."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, NumericType, StringType
    cols = []
    for f in schema.fields:
        if f.name in df.columns:
            value = F.col(f.name)
        elif f.nullable:
            value = F.lit(None)
        elif isinstance(f.dataType, NumericType):
            value = F.lit(0)
        elif isinstance(f.dataType, StringType):
            value = F.lit("")
        elif isinstance(f.dataType, BooleanType):
            value = F.lit(False)
        else:
            raise SystemExit(f"bench/scale.py: no synthetic value for NOT NULL column {f.name} {f.dataType}")
        cols.append(value.cast(f.dataType).alias(f.name))
    return cols


def _with_url_hash(df):
    """url_hash as crawl.net.urls.url_hash computes it (blake2b, in Python: Spark has no blake2b)."""
    import pyarrow as pa

    def hashes(batches):
        from crawl.net.urls import url_hash
        for batch in batches:
            index = batch.schema.get_field_index("url_hash")
            values = pa.array([url_hash(u) for u in batch.column("url").to_pylist()], pa.int64())
            yield batch.set_column(index, batch.schema.field(index), values)
    return df.mapInArrow(hashes, df.schema)


def _signature(url_col, salt: str):
    from pyspark.sql import functions as F
    return F.unhex(F.concat(*[F.sha2(F.concat(url_col, F.lit(f"{salt}{i}")), 512) for i in range(8)]))


def build_root(spark, root, n_urls: int, n_hosts: int, buckets: int, now: float) -> dict[str, Any]:
    """The synthetic crawl root (see the module docstring)."""
    from pyspark.sql import functions as F

    from jobs.dedup import page_bands
    from jobs.engine.schemas import (DEDUP_BANDS_SCHEMA, DEDUP_PAGES_SCHEMA, HOST_STATE_SCHEMA, URL_STATE_SCHEMA,
                                     WARC_INDEX_SCHEMA)
    from jobs.engine.tables import ensure_dedup_tables, ensure_tables
    ensure_tables(spark, root)
    ensure_dedup_tables(spark, root)
    started = time.perf_counter()
    rows = synth_base(spark, n_urls, n_hosts, buckets, now).drop("host_idx")
    rows = _with_url_hash(rows.withColumn("text_hash", F.when(F.col("http_status") == 200,
                                                            F.xxhash64("url", F.lit("text")))))
    rows.select(*URL_STATE_SCHEMA.fieldNames()).write.format("delta").mode("append").save(root.crawldb)
    crawldb = spark.read.format("delta").load(root.crawldb)
    robots = "User-agent: *\nDisallow: /private/\n"
    hosts = (crawldb.groupBy("host", "host_bucket")
             .agg(F.count("*").alias("url_count"), F.sum((F.col("fetch_count") > 0).cast("long")).alias("pages_fetched"))
             .withColumn("requests", F.col("pages_fetched")).withColumn("errors", F.lit(0).cast("long"))
             .withColumn("robots_status", F.lit(200)).withColumn("robots_txt", F.lit(robots))
             .withColumn("robots_fetched_at", F.timestamp_seconds(F.lit(int(now) - 86400)))
             .withColumn("last_segment_id", F.lit(SEGMENT_OLD)))
    hosts.select(*conform(hosts, HOST_STATE_SCHEMA)).write.format("delta").mode("append").save(root.hostdb)
    archived = crawldb.filter(F.col("warc_file").isNotNull())
    index = (archived.withColumn("fetched_at", F.col("last_fetched_at")).withColumn("mime", F.col("content_type"))
             .withColumn("warc_file", F.concat(F.lit("CC-SEG-" + SEGMENT_OLD + "-"), F.pmod(F.col("url_hash"), F.lit(500)),
                                               F.lit(".warc.gz")))
             .withColumn("segment_id", F.lit(SEGMENT_OLD)))
    index.select(*conform(index, WARC_INDEX_SCHEMA)).write.format("delta").mode("append").save(root.warc_index)
    pages = (crawldb.filter(F.col("http_status") == 200)
             .withColumn("signature", _signature(F.col("url"), "old"))
             .withColumn("first_fetched_at", F.col("last_fetched_at"))
             .withColumn("segment_id", F.lit(SEGMENT_OLD)))
    pages.select(*conform(pages, DEDUP_PAGES_SCHEMA)).write.format("delta").mode("append").save(root.dedup_pages)
    pages = spark.read.format("delta").load(root.dedup_pages)
    bands = page_bands(spark, pages)
    bands.select(*conform(bands, DEDUP_BANDS_SCHEMA)).write.format("delta").mode("append").save(root.dedup_bands)
    built = {name: spark.read.format("delta").load(path).count()
             for name, path in (("crawldb", root.crawldb), ("hostdb", root.hostdb), ("warc_index", root.warc_index),
                                ("dedup_pages", root.dedup_pages), ("dedup_bands", root.dedup_bands))}
    built["seconds"] = round(time.perf_counter() - started, 1)
    return built


def make_fetched(spark, root, segment_id: str, new_links: int, now: float) -> int:
    """A fetch result for the segment's fetchlist (see the module docstring); returns its URL rows."""
    from pyspark.sql import functions as F

    from jobs.engine.schemas import FETCHED_SCHEMA
    fetchlist = spark.read.parquet(root.fetchlist(segment_id))
    links = [F.concat(F.lit("http://"), F.col("host"), F.lit("/n"), F.abs(F.xxhash64("url", F.lit(i))))
             for i in range(new_links)] + [F.col("url")]  # and one known URL: the page itself
    copy = F.pmod(F.col("url_hash"), F.lit(100)) == 0  # 1 %: the text of a known page
    urls = (fetchlist.withColumn("kind", F.lit("url")).withColumn("fetch_status", F.lit("ok"))
            .withColumn("http_status", F.lit(200)).withColumn("fetched_at", F.lit(float(now)))
            .withColumn("elapsed_ms", F.lit(120).cast("long")).withColumn("content_type", F.lit("text/html"))
            .withColumn("content_length", F.lit(20000).cast("long")).withColumn("truncated", F.lit(False))
            .withColumn("content_hash", F.sha1(F.concat("url", F.lit("new"))))
            .withColumn("outlinks", F.array(*links))
            .withColumn("warc_file", F.lit(f"CC-SEG-{segment_id}-00000-0-x-00000.warc.gz"))
            .withColumn("warc_offset", F.abs(F.xxhash64("url")) % F.lit(1 << 30))
            .withColumn("warc_length", F.lit(6000).cast("long"))
            .withColumn("text_hash", F.when(copy, F.xxhash64(F.concat(F.col("host"), F.lit("/p0")), F.lit("text")))
                        .otherwise(F.xxhash64("url", F.lit("new-text"))))
            .withColumn("simhash", F.xxhash64("url", F.lit("new-sim")))
            .withColumn("signature", _signature(F.col("url"), "new"))
            .withColumn("fetch_task", F.lit("0.0")))
    hosts = (fetchlist.groupBy("host", "host_bucket", "segment_id").agg(F.count("*").alias("requests"))
             .withColumn("kind", F.lit("host")).withColumn("pages_fetched", F.col("requests"))
             .withColumn("errors", F.lit(0).cast("long")).withColumn("robots_status", F.lit(200))
             .withColumn("robots_fetched_at", F.lit(float(now))).withColumn("deferred", F.lit(False))
             .withColumn("backoff_s", F.lit(0.0)).withColumn("last_fetch_at", F.lit(float(now)))
             .withColumn("links_found", F.col("requests") * (new_links + 1))
             .withColumn("links_kept", F.col("requests") * new_links).withColumn("fetch_task", F.lit("0.0")))
    both = urls.select(*conform(urls, FETCHED_SCHEMA)).unionByName(hosts.select(*conform(hosts, FETCHED_SCHEMA)))
    both.write.mode("overwrite").partitionBy("kind").parquet(root.fetched(segment_id))
    return fetchlist.count()


class HeapSampler:
    """The driver JVM's heap in use, sampled every ``every_s`` seconds from a thread (py4j calls):
    its peak over a stretch of work is an upper bound of what that work held (garbage not yet
    collected counts too). In local mode the executors share the JVM, so their sorts and shuffles
    count as well: a driver-side collect growing with the crawldb would show as a peak growing
    with it, and at worst as an OutOfMemoryError."""

    def __init__(self, spark, every_s: float = 0.25):
        import threading
        self._bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
        self.max_mb = round(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20)
        self.peak = 0
        self._stop = threading.Event()
        self._every = every_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.peak = max(self.peak, int(self._bean.getHeapMemoryUsage().getUsed()))
            except Exception:
                return

    def take_mb(self) -> int:
        """The peak since the last call, in MB."""
        peak, self.peak = self.peak, 0
        return round(peak / 2**20)

    def stop(self) -> None:
        self._stop.set()


def merge_metrics(spark, path: str, operation: str = "MERGE") -> dict[str, Any]:
    """The newest commit of ``operation`` on the table: its operationMetrics, and write
    amplification = bytes added / (rows updated + inserted) x the table's mean bytes per row."""
    from delta.tables import DeltaTable
    table = DeltaTable.forPath(spark, path)
    entry = next(r for r in table.history(20).collect() if r["operation"] == operation)
    m = {k: int(v) for k, v in (entry["operationMetrics"] or {}).items() if str(v).isdigit()}
    detail = table.detail().collect()[0]
    rows = spark.read.format("delta").load(path).count()
    per_row = detail["sizeInBytes"] / max(rows, 1)
    changed = m.get("numTargetRowsUpdated", 0) + m.get("numTargetRowsInserted", 0)
    added = m.get("numTargetBytesAdded", 0)
    return {"rows_updated": m.get("numTargetRowsUpdated", 0), "rows_inserted": m.get("numTargetRowsInserted", 0),
            "rows_copied": m.get("numTargetRowsCopied", 0), "files_added": m.get("numTargetFilesAdded", 0),
            "files_removed": m.get("numTargetFilesRemoved", 0), "dvs_added": m.get("numTargetDeletionVectorsAdded", 0),
            "bytes_added": added, "table_bytes": detail["sizeInBytes"], "table_files": detail["numFiles"],
            "write_amplification": round(added / (changed * per_row), 2) if changed else None}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return round(time.perf_counter() - started, 2), out


def cycle(spark, cfg, root, new_links: int, now: float, out: dict[str, Any], rerun: bool = False) -> str:
    """One round; with ``rerun`` update finds its _update_started marker (the re-run path) and
    stats and warc-get are left out."""
    from jobs import dedup, generate, stats, update, warc_get
    from jobs.engine.crawl_root import write_marker
    out["generate_s"], result = timed(lambda: generate.run(spark, cfg, root, now=now))
    segment = result.segment_id
    out["fetchlist_urls"], out["fetchlist_hosts"] = result.urls, result.hosts
    out["fetched_made_s"], out["fetched_urls"] = timed(lambda: make_fetched(spark, root, segment, new_links, now))
    out["dedup_s"], _ = timed(lambda: dedup.run(spark, cfg, root, segment))
    if rerun:
        write_marker(spark, root.update_started_marker(segment), "bench: as if a run had died\n")
    out["update_s"], res = timed(lambda: update.run(spark, cfg, root, segment, now=now))
    out["new_urls"] = getattr(res, "new_urls", None)
    if rerun:
        return segment
    out["stats_s"], _ = timed(lambda: stats.collect_stats(spark, cfg, root, now))
    probe = spark.read.format("delta").load(root.warc_index).select("url").first()["url"]
    out["warc_get_s"], captures = timed(lambda: warc_get.captures(spark, root, probe))
    out["warc_get_captures"] = len(captures)
    return segment


def module_at(rev: str, path: str):
    """The module at ``path`` as it was at git revision ``rev`` (imported from the source that
    `git show` gives, under a name of its own): a baseline to time beside today's code."""
    import types
    source = subprocess.run(["git", "-C", REPO, "show", f"{rev}:{path}"], check=True, capture_output=True,
                            text=True).stdout
    module = types.ModuleType(f"baseline_{rev}_{os.path.basename(path)[:-3]}")
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def reads(spark, cfg, root, now: float, baseline_rev: str | None, repeats: int, out: dict[str, Any]) -> None:
    """--reads-only: stats (and, with --baseline-stats REV, REV's jobs/stats.py, alternating, same
    answers checked) and warc-get on the built root, ``repeats`` times each; the median seconds."""
    import statistics

    from jobs import stats, warc_get
    baseline = module_at(baseline_rev, "jobs/stats.py") if baseline_rev else None
    times: dict[str, list[float]] = {"stats_s": [], "stats_baseline_s": [], "warc_get_s": []}
    for _ in range(repeats):
        if baseline is not None:
            seconds, before = timed(lambda: baseline.collect_stats(spark, cfg, root, now))
            times["stats_baseline_s"].append(seconds)
        seconds, current = timed(lambda: stats.collect_stats(spark, cfg, root, now))
        times["stats_s"].append(seconds)
        if baseline is not None:
            same = {k: before[k] for k in current if k != "native_code"} == {k: current[k] for k in current if k != "native_code"}
            out["check_stats_same"] = out.get("check_stats_same", True) and same
        probe = spark.read.format("delta").load(root.warc_index).select("url").first()["url"]
        seconds, _ = timed(lambda: warc_get.captures(spark, root, probe))
        times["warc_get_s"].append(seconds)
    for key, values in times.items():
        if values:
            out[key] = statistics.median(values)
            out[key + "_runs"] = values


def run_size(spark, cfg, workdir: str, n_urls: int, args, now: float) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from jobs.engine.crawl_root import CrawlRoot
    root = CrawlRoot(os.path.join(workdir, f"crawl-{n_urls}"))
    out: dict[str, Any] = {"urls": n_urls, "hosts": args.hosts}
    heap = HeapSampler(spark)
    out["built"] = build_root(spark, root, n_urls, args.hosts, int(cfg["crawldb.host_buckets"]), now)
    out["heap_peak_mb_build"] = heap.take_mb()
    if args.reads_only:
        reads(spark, cfg, root, now, args.baseline_stats, args.repeats, out)
        out["heap_peak_mb_steps"], out["max_heap_mb"] = heap.take_mb(), heap.max_mb
        heap.stop()
        out["root"] = root.root
        return out
    before = out["built"]["crawldb"]
    segment = cycle(spark, cfg, root, args.new_links, now, out)
    out["crawldb_merge"] = merge_metrics(spark, root.crawldb)
    out["hostdb_merge"] = merge_metrics(spark, root.hostdb)
    out["dedup_pages_merge"] = merge_metrics(spark, root.dedup_pages)
    out["dedup_bands_merge"] = merge_metrics(spark, root.dedup_bands)
    after = spark.read.format("delta").load(root.crawldb).count()
    out["crawldb_rows_after"] = after
    expected_new = out["fetched_urls"] * args.new_links
    out["check_new_urls"] = after - before == expected_new
    leased = spark.read.format("delta").load(root.crawldb).filter(F.col("segment_id") == segment)
    out["check_applied"] = (leased.filter(F.col("status").isin("fetched", "duplicate") & F.col("lease_until").isNull())
                            .count() == out["fetched_urls"])
    out["heap_peak_mb_steps"], out["max_heap_mb"] = heap.take_mb(), heap.max_mb  # generate .. warc-get
    heap.stop()
    out["python_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.rerun_update:
        second: dict[str, Any] = {}
        rows_before = spark.read.format("delta").load(root.crawldb).count()
        cycle(spark, cfg, root, args.new_links, now + 3600, second, rerun=True)
        out["rerun"] = second
        out["update_rerun_s"] = second["update_s"]
        out["check_rerun_counts"] = _url_counts_exact(spark, root)
        out["check_rerun_new_urls"] = (spark.read.format("delta").load(root.crawldb).count() - rows_before
                                       == second["fetched_urls"] * args.new_links)
    out["root"] = root.root
    return out


def _url_counts_exact(spark, root) -> bool:
    """Every host's url_count equals its crawldb rows (what the re-run's recount promises)."""
    from pyspark.sql import functions as F
    rows = spark.read.format("delta").load(root.crawldb).groupBy("host").agg(F.count("*").alias("rows"))
    hosts = spark.read.format("delta").load(root.hostdb).select("host", "url_count")
    return rows.join(hosts, "host", "full").filter(~F.col("rows").eqNullSafe(F.col("url_count"))).count() == 0


def maintenance_rounds(spark, cfg, root_path: str, rounds: int, new_links: int, now: float) -> dict[str, Any]:
    from jobs import maintain
    from jobs.engine.crawl_root import CrawlRoot
    root = CrawlRoot(root_path)
    for k in range(rounds):
        cycle(spark, cfg, root, new_links, now + (k + 1) * 3600, {})
    tables = (("crawldb", root.crawldb), ("hostdb", root.hostdb), ("warc_index", root.warc_index),
              ("dedup_pages", root.dedup_pages), ("dedup_bands", root.dedup_bands))

    def shape(path: str, when: str) -> dict[str, Any]:
        """The snapshot's files and MB (what a query reads), and what the folder holds outside
        _delta_log (what storage keeps: files removed from the table stay until VACUUM), and
        the log's own files."""
        d = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
        disk = log = 0
        disk_bytes = 0
        for folder, _, names in os.walk(path):
            if "_delta_log" in folder.split(os.sep):
                log += len(names)
                continue
            data = [n for n in names if not n.startswith(".")]  # Hadoop's .crc files aside
            disk += len(data)
            disk_bytes += sum(os.path.getsize(os.path.join(folder, n)) for n in data)
        return {f"files_{when}": d["numFiles"], f"mb_{when}": round(d["sizeInBytes"] / 2**20, 1),
                f"disk_files_{when}": disk, f"disk_mb_{when}": round(disk_bytes / 2**20, 1), f"log_files_{when}": log}

    shapes = {name: shape(path, "before") for name, path in tables}
    quiet = {**cfg, "maintain.quiet_s": 0.0}  # the rounds just wrote: nothing else runs here
    seconds, _ = timed(lambda: maintain.run(spark, quiet, root))
    for name, path in tables:
        shapes[name].update(shape(path, "after"))
    return {"rounds": rounds, "maintain_s": seconds, "tables": shapes}


STEPS = ("generate_s", "dedup_s", "update_s", "update_rerun_s", "stats_s", "stats_baseline_s", "warc_get_s")


def report(result: dict[str, Any]) -> None:
    runs = result["runs"]
    print(f"\n{'step':<16}" + "".join(f"{r['urls']:>14,}" for r in runs) + (f"{'ratio':>10}" if len(runs) > 1 else ""))
    for step in STEPS:
        if any(step not in r for r in runs):
            continue
        cells = "".join(f"{r[step]:>14.1f}" for r in runs)
        ratio = f"{runs[-1][step] / runs[0][step]:>10.2f}" if len(runs) > 1 and runs[0][step] else ""
        print(f"{step:<16}{cells}{ratio}")
    for name in ("crawldb_merge", "hostdb_merge", "dedup_pages_merge", "dedup_bands_merge"):
        if any(name not in r for r in runs):
            continue
        print(f"{name.replace('_merge', '') + ' WA':<16}" + "".join(f"{str(r[name]['write_amplification']):>14}" for r in runs))
    print(f"{'heap peak MB':<16}" + "".join(f"{r['heap_peak_mb_steps']:>14}" for r in runs)
          + f"   (max heap {runs[0]['max_heap_mb']} MB)")
    print(f"{'build s':<16}" + "".join(f"{r['built']['seconds']:>14.1f}" for r in runs))
    if result.get("maintenance"):
        print(json.dumps(result["maintenance"], indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--top-n", type=int, default=100_000)
    parser.add_argument("--new-links", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=0, help="rounds at the smallest size before maintain (0: none)")
    parser.add_argument("--rerun-update", action="store_true",
                        help="a second round whose update takes the re-run path (the recount's cost)")
    parser.add_argument("--reads-only", action="store_true",
                        help="after building each root, time only stats and warc-get (no cycle)")
    parser.add_argument("--baseline-stats", metavar="REV",
                        help="with --reads-only: also time REV's jobs/stats.py, alternating, and check the answers agree")
    parser.add_argument("--repeats", type=int, default=2, help="with --reads-only: timings per step")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out-json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    from crawl.config import build_config, parse_pairs
    from jobs.engine.session import build_spark
    overrides = {"generate.top_n": args.top_n, "spark.ui_enabled": False}
    overrides.update(parse_pairs(args.conf))
    cfg = build_config(overrides=overrides)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = build_spark(cfg)
    workdir = tempfile.mkdtemp(prefix="deltacrawl-scale-")
    now = time.time()
    result: dict[str, Any] = {"command": "bench/scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                              "machine": machine_facts(), "runs": []}
    failures = []
    try:
        for n in sizes:
            run = run_size(spark, cfg, workdir, n, args, now)
            result["runs"].append(run)
            print(json.dumps(run, default=str), flush=True)
            if args.reads_only:
                if not run.get("check_stats_same", True):
                    failures.append(f"size {n}: stats and the baseline's stats disagree")
            elif not (run["check_new_urls"] and run["check_applied"]):
                failures.append(f"size {n}: update did not apply the segment as expected")
            if args.rerun_update and not (run["check_rerun_counts"] and run["check_rerun_new_urls"]):
                failures.append(f"size {n}: the re-run path's update left url_count or new URLs wrong")
        if args.cycles:
            result["maintenance"] = maintenance_rounds(spark, cfg, result["runs"][0]["root"], args.cycles,
                                                       args.new_links, now)
        report(result)
    finally:
        if args.out_json:
            with open(args.out_json, "w") as fh:
                json.dump(result, fh, indent=1, default=str)
        spark.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    for failure in failures:
        print("CHECK FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
