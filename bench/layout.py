#!/usr/bin/env python
"""Layout benchmark: the physical layout of the crawldb (url_state) measured side by side.

Run:      .venv/bin/python bench/layout.py [--urls 300000] [--hosts 2000] [--segment 20000]
                                           [--segment-hosts 100] [--layouts a,b,c,d] [--rows-per-file N]
                                           [--merge-repeats 2] [--deletion-vectors] [--out-json FILE] [--keep]
Layouts:  a  PARTITIONED BY host_bucket (crawldb.host_buckets buckets), rows sorted by host, url
             inside each bucket: the current choice (jobs/engine/tables.py). Results: docs/layout.md.
          b  no partitioning, rows sorted by host, url (range-partitioned write).
          c  liquid clustering: CLUSTER BY host, rows written unsorted, then OPTIMIZE.
          d  PARTITIONED BY host (the anti-pattern): one directory per host.
Data:     --urls synthetic url_state rows (URL_STATE_SCHEMA) over --hosts hosts of skewed size
          (host k gets a share ~ 1/sqrt(k)), ~80% unfetched, the rest fetched / redirect / retry /
          gone / ...; built with Spark expressions and staged once as Parquet, so every layout
          loads the same rows. A segment is leased in the table beforehand: --segment rows of
          --segment-hosts hosts (at most segment/segment-hosts rows per host, as generate caps).
Measures: per layout, in one run and one SparkSession:
          load s (create table + write; for c also OPTIMIZE, shown apart); active data files,
          partition directories and bytes after load and after the MERGE;
          MERGE s: jobs.update.merge_crawldb itself (key host_bucket, url_hash, url) with the
          segment's rows updated plus 2 x segment new URLs on the same hosts, and its
          operationMetrics (target files removed / added, rows copied = rewritten unchanged);
          generate s: jobs.generate.select_due + select_fetchlist (due filter, window top-N per
          host) run to a no-op sink; lookup s: all rows of one mid-size host (filter host = ...),
          with the data files actually scanned (the scan node's "number of files read", i.e.
          after partition pruning and data skipping); for a also with host_bucket = ... added.
          Queries run --repeats (3) times and the MERGE --merge-repeats (2) times (RESTORE to the
          loaded version in between); the best time is kept. Load runs once. A warm-up
          pass on a tiny table runs first so layout a does not pay the JVM warm-up.
Output:   a table with each figure and its ratio to layout a; --out-json writes all figures.
Exit:     0 done · 1 a check failed (row counts after load or MERGE) · 2 bad arguments.

Local only: Spark runs with master local[2] and binds to loopback; no network is used.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # the package is installed editable; this only helps a bare checkout
    sys.path.insert(0, REPO)

LAYOUTS = {
    "a": "partitionBy host_bucket",
    "b": "no partitioning, sorted",
    "c": "liquid CLUSTER BY host",
    "d": "partitionBy host",
}
SEGMENT_ID = "20260101000000-abcdef"
DAY = 86400


# --------------------------------------------------------------------------- synthetic data

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
    since this file was written) becomes null, or 0 / "" / false when NOT NULL."""
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
            raise SystemExit(f"bench/layout.py: no synthetic value for NOT NULL column {f.name} {f.dataType}")
        cols.append(value.cast(f.dataType).alias(f.name))
    return cols


def stage_data(spark, args, buckets: int, now: float, staging: str) -> dict[str, Any]:
    """Write base rows (segment leased) and the MERGE source (updates + discovered) as Parquet."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from jobs.engine.schemas import URL_STATE_SCHEMA

    raw = synth_base(spark, args.urls, args.hosts, buckets, now)
    raw.write.mode("overwrite").parquet(f"{staging}/raw")
    raw = spark.read.parquet(f"{staging}/raw")
    sizes = sorted(((r["host_idx"], r["n"]) for r in raw.groupBy("host_idx").agg(F.count("*").alias("n")).collect()))
    cap = math.ceil(args.segment / args.segment_hosts)
    eligible = [h for h, n in sizes if n >= cap]
    if len(eligible) >= args.segment_hosts:  # spread evenly over the hosts big enough for the cap
        step = len(eligible) / args.segment_hosts
        seg_hosts = [eligible[int(i * step)] for i in range(args.segment_hosts)]
    else:  # not enough big hosts: the biggest ones
        seg_hosts = [h for h, _ in sorted(sizes, key=lambda hn: -hn[1])[:args.segment_hosts]]
    seg_df = spark.createDataFrame([(h,) for h in seg_hosts], "host_idx long")
    rank = Window.partitionBy("host_idx").orderBy("url_hash")
    leased = (raw.join(F.broadcast(seg_df), "host_idx")
              .withColumn("_rk", F.row_number().over(rank)).filter(F.col("_rk") <= cap)
              .select("url", F.lit(True).alias("_leased")))
    lease_until = F.timestamp_seconds(F.lit(int(now) + 3600))
    base = (raw.join(leased, "url", "left")
            .withColumn("lease_until", F.when(F.col("_leased"), lease_until))
            .withColumn("segment_id", F.when(F.col("_leased"), F.lit(SEGMENT_ID)))
            .select(*URL_STATE_SCHEMA.fieldNames()))
    base.write.mode("overwrite").parquet(f"{staging}/base")
    base = spark.read.parquet(f"{staging}/base")

    fetched_at = F.timestamp_seconds(F.lit(int(now)))
    updates = (base.filter(F.col("segment_id") == SEGMENT_ID)
               .withColumn("status", F.lit("fetched")).withColumn("http_status", F.lit(200))
               .withColumn("last_fetched_at", fetched_at)
               .withColumn("fetch_interval_s", F.lit(30 * DAY).cast("long"))
               .withColumn("next_fetch_at", F.timestamp_seconds(F.lit(int(now) + 30 * DAY)))
               .withColumn("fetch_count", F.col("fetch_count") + 1)
               .withColumn("content_hash", F.sha2(F.concat(F.col("url"), F.lit("v2")), 256).substr(1, 40))
               .withColumn("content_type", F.lit("text/html"))
               .withColumn("lease_until", F.lit(None).cast("timestamp"))
               .select(*URL_STATE_SCHEMA.fieldNames()))
    updates.write.mode("overwrite").parquet(f"{staging}/updates")
    n_new = 2 * args.segment
    host_arr = F.array(*[F.lit(h) for h in seg_hosts])
    hb = raw.select("host_idx", "host_bucket").distinct()
    discovered = (spark.range(0, n_new, numPartitions=4)
                  .withColumn("host_idx", F.element_at(host_arr, (F.pmod(F.col("id"), F.lit(len(seg_hosts))) + 1).cast("int")))
                  .join(F.broadcast(hb), "host_idx")
                  .withColumn("host", F.concat(F.lit("h"), F.col("host_idx"), F.lit(".example")))
                  .withColumn("url", F.concat(F.lit("http://"), F.col("host"), F.lit("/n"), F.col("id")))
                  .withColumn("url_hash", F.xxhash64("url"))
                  .withColumn("status", F.lit("unfetched")).withColumn("depth", F.lit(1))
                  .withColumn("score", F.lit(0.01)).withColumn("discovered_at", fetched_at)
                  .withColumn("next_fetch_at", fetched_at)
                  .withColumn("retries", F.lit(0)).withColumn("change_count", F.lit(0))
                  .withColumn("fetch_count", F.lit(0)))
    discovered = discovered.select(*conform(discovered, URL_STATE_SCHEMA))
    discovered.write.mode("overwrite").parquet(f"{staging}/discovered")

    sizes_sorted = sorted(n for _, n in sizes)
    probe_idx = min(sizes, key=lambda hn: (abs(hn[1] - sizes_sorted[len(sizes_sorted) // 2]), hn[0]))[0]
    probe_host = f"h{probe_idx}.example"
    probe_bucket = raw.filter(F.col("host") == probe_host).select("host_bucket").first()["host_bucket"]
    return {
        "rows": spark.read.parquet(f"{staging}/base").count(),
        "hosts_with_rows": len(sizes),
        "largest_host_rows": sizes_sorted[-1],
        "median_host_rows": sizes_sorted[len(sizes_sorted) // 2],
        "smallest_host_rows": sizes_sorted[0],
        "segment_hosts": len(seg_hosts),
        "segment_hosts_buckets": len({r["host_bucket"] for r in hb.join(seg_df, "host_idx").collect()}),
        "segment_rows_updated": spark.read.parquet(f"{staging}/updates").count(),
        "segment_rows_new": spark.read.parquet(f"{staging}/discovered").count(),
        "probe_host": probe_host,
        "probe_host_bucket": probe_bucket,
        "probe_host_rows": next(n for h, n in sizes if h == probe_idx),
    }


# --------------------------------------------------------------------------- measurement helpers

def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def best_of(n: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = math.inf, None
    for _ in range(n):
        s, out = timed(fn)
        best = min(best, s)
    return best, out


def files_read(jdf) -> int:
    """Sum of "number of files read" over the file scans of the last execution of a Dataset."""
    total = 0

    def walk(node) -> None:
        nonlocal total
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            walk(node.executedPlan())
            return
        if name.endswith("QueryStageExec"):
            walk(node.plan())
            return
        if name == "FileSourceScanExec":
            metric = node.metrics().get("numFiles")
            if metric.isDefined():
                total += int(metric.get().value())
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(jdf.queryExecution().executedPlan())
    return total


def table_shape(spark, path: str) -> dict[str, int]:
    from delta.tables import DeltaTable
    d = DeltaTable.forPath(spark, path).detail().collect()[0]
    dirs = 0
    for dirpath, dirnames, _ in os.walk(path):
        if "_delta_log" in dirpath:
            continue
        dirs += sum(1 for name in dirnames if "=" in name)
    return {"files": int(d["numFiles"]), "bytes": int(d["sizeInBytes"]), "partition_dirs": dirs}


def create_table(spark, path: str, layout: str, deletion_vectors: bool = False) -> None:
    from delta.tables import DeltaTable
    from jobs.engine.schemas import URL_STATE_SCHEMA
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(URL_STATE_SCHEMA)
    if deletion_vectors:
        builder = builder.property("delta.enableDeletionVectors", "true")
    if layout == "a":
        builder = builder.partitionedBy("host_bucket")
    elif layout == "c":
        builder = builder.clusterBy("host")
    elif layout == "d":
        builder = builder.partitionedBy("host")
    builder.execute()


def load(spark, path: str, layout: str, base, deletion_vectors: bool = False) -> dict[str, float]:
    from delta.tables import DeltaTable
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    create_table(spark, path, layout, deletion_vectors)
    if layout == "a":
        df = base.repartition("host_bucket").sortWithinPartitions("host", "url")
    elif layout == "b":
        df = base.orderBy("host", "url")
    elif layout == "c":
        df = base  # clustering is OPTIMIZE's job
    else:
        df = base.repartition("host").sortWithinPartitions("url")
    df.write.format("delta").mode("append").save(path)
    out["write_s"] = time.perf_counter() - t0
    if layout == "c":
        out["optimize_s"], _ = timed(lambda: DeltaTable.forPath(spark, path).optimize().executeCompaction().collect())
    out["load_s"] = time.perf_counter() - t0
    return out


def run_layout(spark, cfg, layout: str, root: str, staging: str, info: dict[str, Any], now: float,
               repeats: int, timings: bool, merge_repeats: int = 1, deletion_vectors: bool = False) -> dict[str, Any]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    from jobs.generate import select_due, select_fetchlist
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.schemas import HOST_STATE_SCHEMA
    from jobs.engine.tables import table_version
    from jobs.update import merge_crawldb

    croot = CrawlRoot(f"{root}/{layout}")
    path = croot.crawldb
    res: dict[str, Any] = {"layout": layout, "name": LAYOUTS[layout], "checks": []}
    base = spark.read.parquet(f"{staging}/base")
    res.update(load(spark, path, layout, base, deletion_vectors))
    res["after_load"] = table_shape(spark, path)
    rows = spark.read.format("delta").load(path).count()
    if rows != info["rows"]:
        res["checks"].append(f"rows after load {rows} != {info['rows']}")
    if not timings:
        return res

    def lookup(with_bucket: bool):
        def go():
            df = spark.read.format("delta").load(path).filter(F.col("host") == info["probe_host"])
            if with_bucket:
                df = df.filter(F.col("host_bucket") == info["probe_host_bucket"])
            n = len(df.collect())
            return n, files_read(df._jdf)
        return go

    def lookups(tag: str) -> None:
        s, (n, files) = best_of(repeats, lookup(False))
        res[f"lookup_{tag}_s"], res[f"lookup_{tag}_files"] = s, files
        if n != info["probe_host_rows"] + (0 if tag == "load" else info.get("probe_new_rows", 0)):
            res["checks"].append(f"lookup after {tag}: {n} rows")
        if layout == "a":
            s, (n, files) = best_of(repeats, lookup(True))
            res[f"lookup_bucket_{tag}_s"], res[f"lookup_bucket_{tag}_files"] = s, files

    lookups("load")

    host_state = spark.createDataFrame([], HOST_STATE_SCHEMA)

    def generate():
        url_state = spark.read.format("delta").load(path)
        fl = select_fetchlist(select_due(url_state, host_state, cfg, now), host_state, cfg, "20260101000001-000000", now)
        fl.write.format("noop").mode("overwrite").save()
    res["generate_s"], _ = best_of(repeats, generate)

    updates = spark.read.parquet(f"{staging}/updates")
    discovered = spark.read.parquet(f"{staging}/discovered")
    table = DeltaTable.forPath(spark, path)
    before = table_version(table)
    # no due-now hints (sitemap lastmod, orphaned duplicates) in this benchmark's segment
    no_hints = spark.createDataFrame([], "host_bucket int, url_hash long, url string, next_fetch_at timestamp")
    times = []
    for i in range(merge_repeats):
        if i:  # back to the loaded table (RESTORE re-adds the same files), then the same MERGE again
            table.restoreToVersion(before)
        s, counts = timed(lambda: merge_crawldb(spark, croot, updates, discovered, no_hints))
        times.append(s)
    res["merge_s"], res["merge_runs_s"] = min(times), times
    last = table.history(1).collect()[0]
    metrics = {k: int(v) for k, v in (last["operationMetrics"] or {}).items() if str(v).lstrip("-").isdigit()}
    res["merge_metrics"] = metrics if int(last["version"]) > before else {}
    if counts != {"updated": info["segment_rows_updated"], "inserted": info["segment_rows_new"]}:
        res["checks"].append(f"merge counts {counts}")
    res["after_merge"] = table_shape(spark, path)
    lookups("merge")
    return res


# --------------------------------------------------------------------------- report

ROWS = [  # (label, key path, lower is better?)
    ("load s (write [+ OPTIMIZE])", ("load_s",)),
    ("  of which OPTIMIZE s", ("optimize_s",)),
    ("data files after load", ("after_load", "files")),
    ("partition dirs", ("after_load", "partition_dirs")),
    ("MB after load", ("after_load", "mb")),
    ("generate s", ("generate_s",)),
    ("lookup s", ("lookup_load_s",)),
    ("lookup files read", ("lookup_load_files",)),
    ("lookup+bucket files read", ("lookup_bucket_load_files",)),
    ("MERGE s", ("merge_s",)),
    ("MERGE target files removed", ("merge_metrics", "numTargetFilesRemoved")),
    ("MERGE target files added", ("merge_metrics", "numTargetFilesAdded")),
    ("MERGE rows copied unchanged", ("merge_metrics", "numTargetRowsCopied")),
    ("MERGE deletion vectors added", ("merge_metrics", "numTargetDeletionVectorsAdded")),
    ("MERGE MB written", ("merge_metrics", "mb_added")),
    ("data files after MERGE", ("after_merge", "files")),
    ("lookup s after MERGE", ("lookup_merge_s",)),
    ("lookup files read after MERGE", ("lookup_merge_files",)),
]


def _get(res: dict[str, Any], keys: tuple[str, ...]) -> Any:
    cur: Any = res
    for k in keys:
        if k == "mb" and isinstance(cur, dict) and "bytes" in cur:
            return cur["bytes"] / 1e6
        if k == "mb_added" and isinstance(cur, dict) and "numTargetBytesAdded" in cur:
            return cur["numTargetBytesAdded"] / 1e6
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def print_table(results: list[dict[str, Any]]) -> None:
    ref = next((r for r in results if r["layout"] == "a"), None)
    header = ["figure"] + [f"{r['layout']}: {r['name']}" for r in results]
    lines = [header]
    for label, keys in ROWS:
        cells = [label]
        for r in results:
            v = _get(r, keys)
            cell = _fmt(v)
            rv = _get(ref, keys) if ref is not None else None
            if r is not ref and isinstance(v, (int, float)) and isinstance(rv, (int, float)) and rv:
                cell += f" ({v / rv:.2f}x)"
            cells.append(cell)
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("(x) = ratio to layout a; times are wall seconds, queries best of the repeats")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--urls", type=int, default=300000)
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--segment", type=int, default=20000, help="URLs updated by the MERGE (plus 2x new URLs)")
    p.add_argument("--segment-hosts", type=int, default=100)
    p.add_argument("--buckets", type=int, default=0, help="host buckets for layout a (0: crawldb.host_buckets)")
    p.add_argument("--layouts", default="a,b,c,d")
    p.add_argument("--d-timings-max-hosts", type=int, default=2000,
                   help="layout d: above this host count only load it and count files")
    p.add_argument("--rows-per-file", type=int, default=0,
                   help="cap rows per data file (spark.sql.files.maxRecordsPerFile, and the same size in "
                        "bytes for OPTIMIZE) to model a table many files big; 0: Spark's defaults")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--merge-repeats", type=int, default=2,
                   help="run the MERGE this many times (RESTORE to the loaded version in between), keep the best")
    p.add_argument("--deletion-vectors", action="store_true",
                   help="create every table with delta.enableDeletionVectors=true (MERGE then marks "
                        "changed rows instead of copying the rest of each touched file)")
    p.add_argument("--out-json", default="")
    p.add_argument("--tmp", default="", help="work folder (default: a new temp dir, deleted at the end)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args(argv)
    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    if (any(x not in LAYOUTS for x in layouts) or args.urls < 1000 or args.hosts < 1 or args.segment < 1
            or args.segment_hosts < 1 or args.segment_hosts > args.hosts or args.repeats < 1 or args.merge_repeats < 1):
        p.error("bad arguments")

    from crawl.config import build_config
    from jobs.engine.session import build_spark
    cfg = build_config(overrides={"spark.master": "local[2]"})
    buckets = args.buckets or int(cfg["crawldb.host_buckets"])
    t_start = time.perf_counter()
    s_spark, spark = timed(lambda: build_spark(cfg))
    if args.rows_per_file:
        spark.conf.set("spark.sql.files.maxRecordsPerFile", str(args.rows_per_file))
    work = args.tmp or tempfile.mkdtemp(prefix="deltacrawl-layout-")
    os.makedirs(work, exist_ok=True)
    now = float(int(time.time()))
    results: list[dict[str, Any]] = []
    failed = False
    try:
        print(f"staging {args.urls} rows over {args.hosts} hosts in {work} ...", flush=True)
        s_stage, info = timed(lambda: stage_data(spark, args, buckets, now, f"{work}/staging"))
        from pyspark.sql import functions as F
        info["probe_new_rows"] = spark.read.parquet(f"{work}/staging/discovered").filter(
            F.col("host") == info["probe_host"]).count()
        print(f"staged in {s_stage:.1f}s: {json.dumps(info)}", flush=True)
        if args.rows_per_file:  # OPTIMIZE sizes its output by bytes: the same cap in bytes (layout c)
            staged = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(f"{work}/staging/base")
                         for f in fs if f.endswith(".parquet"))
            spark.conf.set("spark.databricks.delta.optimize.maxFileSize",
                           str(max(1 << 16, int(staged / info["rows"] * args.rows_per_file))))

        # warm-up: the same steps on a tiny table, so the first layout does not pay JIT/class loading
        warm_args = argparse.Namespace(urls=5000, hosts=50, segment=500, segment_hosts=10)
        winfo = stage_data(spark, warm_args, buckets, now, f"{work}/warm-staging")
        winfo["probe_new_rows"] = 0
        s_warm, _ = timed(lambda: run_layout(spark, cfg, "a", f"{work}/warm", f"{work}/warm-staging", winfo, now, 1, True))
        print(f"warm-up {s_warm:.1f}s", flush=True)

        for layout in layouts:
            timings = layout != "d" or args.hosts <= args.d_timings_max_hosts
            s, res = timed(lambda: run_layout(spark, cfg, layout, f"{work}/tables", f"{work}/staging", info, now,
                                              args.repeats, timings, args.merge_repeats, args.deletion_vectors))
            res["total_s"] = s
            print(f"layout {layout} ({LAYOUTS[layout]}) done in {s:.1f}s: "
                  f"{json.dumps({k: v for k, v in res.items() if k != 'merge_metrics'})}", flush=True)
            if res["checks"]:
                failed = True
                print(f"  CHECK FAILED: {res['checks']}", flush=True)
            results.append(res)
            shutil.rmtree(f"{work}/tables/{layout}", ignore_errors=True)
    finally:
        if not args.keep and not args.tmp:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{args.urls} rows, {args.hosts} hosts, {buckets} buckets, "
          f"rows per file cap {args.rows_per_file or 'none'}, deletion vectors {'on' if args.deletion_vectors else 'off'}; MERGE of {info['segment_rows_updated']} updates "
          f"+ {info['segment_rows_new']} new URLs on {info['segment_hosts']} hosts "
          f"(in {info['segment_hosts_buckets']} of {buckets} buckets); lookup host {info['probe_host']} "
          f"({info['probe_host_rows']} rows)")
    print_table(results)
    total = time.perf_counter() - t_start
    print(f"total {total:.0f}s (SparkSession {s_spark:.1f}s)")
    if args.out_json:
        import importlib.metadata
        doc = {
            "bench": "layout",
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "args": vars(args), "buckets": buckets,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version(),
                        "pyspark": importlib.metadata.version("pyspark"),
                        "delta_spark": importlib.metadata.version("delta-spark")},
            "data": info, "spark_session_s": s_spark, "total_s": total, "layouts": results,
        }
        with open(args.out_json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
        print(f"wrote {args.out_json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
