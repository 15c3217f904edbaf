#!/usr/bin/env python
"""Maintenance benchmark: what `deltacrawl maintain` does to a crawldb of many small files, and
whether ZORDER BY (host) earns its rewrite.

Run:      .venv/bin/python bench/maintain.py [--urls 300000] [--hosts 2000] [--write-tasks 64]
                                             [--small-file-kb 256] [--out-json FILE] [--keep]
Data:     bench/layout.py's synthetic url_state rows (synth_base), written to a crawldb created as
          jobs/engine/tables.py does (PARTITIONED BY host_bucket, deletion vectors and Change Data Feed
          on) by --write-tasks unsorted tasks: up to tasks x buckets small files; then an UPDATE
          of 5% of the rows (a lease, as generate writes it) leaves a deletion vector on most files.
Measures: 1. per variant, on a fresh copy: OPTIMIZE (bin-packing, what maintain runs) against
          OPTIMIZE ZORDER BY (host); each with Delta's default target file size and with
          --small-file-kb (a stand-in for a bucket holding many files, as at cluster scale):
          files and bytes after, seconds, files rewritten by a second run right after (the cost of
          running it every day on an unchanged table), and the data files a one-host lookup reads
          (the scan's "number of files read"; with host_bucket in the predicate as our queries do,
          and without).
          2. jobs.maintain.run on the full crawl root (crawldb only; retention 0 so this run's own
          leftovers are vacuumed): seconds, files / bytes in the table and on disk before and after.
Output:   a table per part; --out-json writes all figures.

Local only: Spark runs with master local[2]; no network is used.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def disk(path: str) -> tuple[int, int]:
    """(data files, bytes) on disk outside _delta_log."""
    n = size = 0
    for d, _, fs in os.walk(path):
        if "_delta_log" in d:
            continue
        for f in fs:
            if f.endswith(".parquet") or f.endswith(".bin"):
                n += 1
                size += os.path.getsize(os.path.join(d, f))
    return n, size


def build_crawldb(spark, staged: str, path: str, write_tasks: int, now: float) -> None:
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.schemas import URL_STATE_SCHEMA
    from jobs.engine.tables import ensure_tables
    root = CrawlRoot(os.path.dirname(path))
    ensure_tables(spark, root)  # crawldb exactly as the steps create it
    (spark.read.parquet(staged).repartition(write_tasks).select(*URL_STATE_SCHEMA.fieldNames())
     .write.format("delta").mode("append").save(path))
    spark.sql(f"UPDATE delta.`{path}` SET lease_until = timestamp_seconds({int(now) + 3600}), "
              f"segment_id = '20260101000000-abcdef' WHERE pmod(url_hash, 20) = 0")


def lookup_files(spark, path: str, host: str, bucket: int | None) -> int:
    from pyspark.sql import functions as F
    from bench.layout import files_read
    df = spark.read.format("delta").load(path).filter(F.col("host") == host)
    if bucket is not None:
        df = df.filter(F.col("host_bucket") == bucket)
    df.collect()
    return files_read(df._jdf)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--urls", type=int, default=300000)
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--write-tasks", type=int, default=64)
    p.add_argument("--small-file-kb", type=int, default=256)
    p.add_argument("--out-json", default="")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)

    from pyspark.sql import functions as F
    from bench.layout import synth_base
    from crawl.config import build_config
    from jobs import maintain
    from jobs.engine.session import build_spark
    from jobs.engine.crawl_root import CrawlRoot
    cfg = build_config(overrides={"spark.master": "local[2]", "maintain.quiet_s": 0.0,
                                  "maintain.vacuum_retain_hours": 0, "maintain.unsafe_short_retention": True})
    spark = build_spark(cfg)
    work = tempfile.mkdtemp(prefix="deltacrawl-maintain-")
    now = float(int(time.time()))
    out: dict = {"urls": args.urls, "hosts": args.hosts, "write_tasks": args.write_tasks, "variants": []}
    try:
        staged = f"{work}/staged"
        synth_base(spark, args.urls, args.hosts, int(cfg["crawldb.host_buckets"]), now).drop("host_idx") \
            .write.parquet(staged)
        # a mid-size host, as bench/layout.py probes
        sizes = sorted((r["n"], r["host"], r["host_bucket"]) for r in spark.read.parquet(staged)
                       .groupBy("host", "host_bucket").agg(F.count("*").alias("n")).collect())
        rows, probe, bucket = sizes[len(sizes) // 2]
        out["probe"] = {"host": probe, "rows": rows, "bucket": bucket}
        print(f"probe host {probe} ({rows} rows, bucket {bucket})", flush=True)

        # 1. bin-packing vs ZORDER BY (host), default and small target file size
        for target in ("default", "small"):
            for zorder in (False, True):
                path = f"{work}/v-{target}-{int(zorder)}/crawldb"
                build_crawldb(spark, staged, path, args.write_tasks, now)
                if target == "small":
                    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(args.small_file_kb * 1024))
                before = maintain.file_stats(spark, path)
                sql = f"OPTIMIZE delta.`{path}`" + (" ZORDER BY (host)" if zorder else "")
                t = time.perf_counter()
                spark.sql(sql).collect()
                seconds = time.perf_counter() - t
                after = maintain.file_stats(spark, path)
                again = spark.sql(sql).collect()[0]["metrics"]["numFilesAdded"]
                res = {"target": target, "zorder": zorder, "files_before": before[0], "bytes_before": before[1],
                       "dv_files_before": before[2], "files_after": after[0], "bytes_after": after[1],
                       "optimize_s": round(seconds, 1), "second_run_files_rewritten": int(again),
                       "lookup_files_with_bucket": lookup_files(spark, path, probe, bucket),
                       "lookup_files_without_bucket": lookup_files(spark, path, probe, None)}
                spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
                out["variants"].append(res)
                print(json.dumps(res), flush=True)
                shutil.rmtree(os.path.dirname(path))

        # 2. maintain itself on the crawl root
        root = CrawlRoot(f"{work}/root")
        build_crawldb(spark, staged, root.crawldb, args.write_tasks, now)
        disk_before = disk(root.crawldb)
        t = time.perf_counter()
        result = maintain.run(spark, cfg, root, now=now + 7200)  # the UPDATE's leases have ended
        seconds = time.perf_counter() - t
        table = result.tables[0]
        out["maintain"] = {"seconds": round(seconds, 1), "files_before": table.files_before,
                           "files_after": table.files_after, "bytes_before": table.bytes_before,
                           "bytes_after": table.bytes_after, "dv_files_purged": table.dvs_purged,
                           "files_vacuumed": table.files_vacuumed, "disk_files_before": disk_before[0],
                           "disk_bytes_before": disk_before[1], "disk_files_after": disk(root.crawldb)[0],
                           "disk_bytes_after": disk(root.crawldb)[1]}
        print(maintain.format_result(result), flush=True)
        print(json.dumps(out["maintain"]), flush=True)
        if args.out_json:
            with open(args.out_json, "w") as fh:
                json.dump(out, fh, indent=1)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
