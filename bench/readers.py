#!/usr/bin/env python
"""Readers benchmark: what deletion vectors cost the readers without Spark, and what they save.

Run:      .venv/bin/python bench/readers.py [--urls 300000] [--hosts 2000] [--segment 20000]
                                            [--segment-hosts 100] [--out-json FILE] [--keep]
          (needs the analysis extra: pip install -e '.[analysis]')
Data:     bench/layout.py's synthetic url_state (layout a: PARTITIONED BY host_bucket, sorted by
          host), loaded twice: with delta.enableDeletionVectors (what jobs/engine/tables.py creates) and
          without. Then the same update MERGE on both (jobs.update.merge_crawldb: the segment's
          rows updated plus 2 x segment new URLs).
Measures: per table: the MERGE's seconds and operationMetrics (files removed / added, rows
          copied unchanged, deletion vectors added, bytes written); then each reader's answer
          and seconds (best of --repeats) for the same aggregate, SELECT status, count(*) GROUP
          BY status over the whole table, checked against Spark's: Spark, DuckDB (delta_scan),
          polars (scan_delta), deltalake QueryBuilder (DataFusion), deltalake
          to_pyarrow_table() (delta-rs's Arrow export), or the error a reader gives.
Output:   a table per reader and table; --out-json writes all figures. Results: docs/readers.md.
Exit:     0 done · 1 a reader gave a different answer than Spark.

Local only: Spark runs with master local[2] and binds to loopback; no network is used.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (REPO, os.path.join(REPO, "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

QUERY = "SELECT status, count(*) AS n FROM crawldb GROUP BY status"


def best_of(n: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(n):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def readers(spark, path: str) -> dict[str, Callable[[], dict[str, int]]]:
    def spark_reader():
        return {r["status"]: r["n"] for r in spark.read.format("delta").load(path).createOrReplaceTempView("crawldb")
                or spark.sql(QUERY).collect()}

    def duckdb_reader():
        import duckdb
        from crawl.readers import duckdb_delta_extension
        con = duckdb.connect()
        con.load_extension(duckdb_delta_extension())
        return dict(con.execute(QUERY.replace("FROM crawldb", f"FROM delta_scan('{path}')")).fetchall())

    def polars_reader():
        import polars as pl
        df = pl.scan_delta(path).group_by("status").agg(pl.len().alias("n")).collect()
        return dict(zip(df["status"].to_list(), df["n"].to_list()))

    def deltalake_query():
        from deltalake import DeltaTable, QueryBuilder
        t = QueryBuilder().register("crawldb", DeltaTable(path)).execute(QUERY).read_all()
        import pyarrow as pa
        t = pa.table(t)
        return dict(zip(t.column("status").to_pylist(), t.column("n").to_pylist()))

    def deltalake_arrow():
        from deltalake import DeltaTable
        t = DeltaTable(path).to_pyarrow_table(columns=["status"])
        counts: dict[str, int] = {}
        for s in t.column("status").to_pylist():
            counts[s] = counts.get(s, 0) + 1
        return counts

    return {"spark": spark_reader, "duckdb delta_scan": duckdb_reader, "polars scan_delta": polars_reader,
            "deltalake QueryBuilder": deltalake_query, "deltalake to_pyarrow_table": deltalake_arrow}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--urls", type=int, default=300000)
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--segment", type=int, default=20000)
    p.add_argument("--segment-hosts", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out-json", default="")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)

    import deltalake
    import duckdb
    import polars
    from delta.tables import DeltaTable
    from crawl.config import build_config
    from jobs.engine.session import build_spark
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.update import merge_crawldb
    from layout import load, stage_data

    cfg = build_config(overrides={"spark.master": "local[2]", "spark.shuffle_partitions": 4})
    spark = build_spark(cfg)
    work = tempfile.mkdtemp(prefix="bench-readers-")
    now = time.time()
    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                           "machine": f"{os.cpu_count()} cores, {platform.python_version()}",
                           "versions": {"deltalake": deltalake.__version__, "duckdb": duckdb.__version__,
                                        "polars": polars.__version__, "spark": spark.version},
                           "args": vars(args), "tables": {}}
    failed = False
    try:
        info = stage_data(spark, args, int(cfg["crawldb.host_buckets"]), now, f"{work}/staging")
        out["data"] = info
        updates = spark.read.parquet(f"{work}/staging/updates")
        discovered = spark.read.parquet(f"{work}/staging/discovered")
        hints = updates.limit(0).select("host_bucket", "url_hash", "url", "next_fetch_at")
        for dv in (True, False):
            name = "deletion vectors" if dv else "no deletion vectors"
            root = CrawlRoot(f"{work}/{'dv' if dv else 'plain'}")
            res: dict[str, Any] = {"load": load(spark, root.crawldb, "a", spark.read.parquet(f"{work}/staging/base"), dv)}
            t0 = time.perf_counter()
            res["merge_counts"] = merge_crawldb(spark, root, updates, discovered, hints)
            res["merge_s"] = time.perf_counter() - t0
            last = DeltaTable.forPath(spark, root.crawldb).history(1).collect()[0]
            res["merge_metrics"] = {k: int(v) for k, v in (last["operationMetrics"] or {}).items()
                                    if str(v).lstrip("-").isdigit()}
            res["readers"] = {}
            expected = None
            for reader, fn in readers(spark, root.crawldb).items():
                try:
                    s, answer = best_of(args.repeats, fn)
                except Exception as exc:  # noqa: BLE001 - the error is the measurement
                    res["readers"][reader] = {"error": " ".join(str(exc).split())[:200]}
                    continue
                expected = answer if expected is None else expected
                ok = answer == expected
                failed |= not ok
                res["readers"][reader] = {"s": round(s, 3), "same_as_spark": ok, "rows": sum(answer.values())}
            out["tables"][name] = res
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for name, res in out["tables"].items():
        m = res["merge_metrics"]
        print(f"{name}: MERGE {res['merge_s']:.1f}s, files removed/added {m.get('numTargetFilesRemoved')}/"
              f"{m.get('numTargetFilesAdded')}, rows copied {m.get('numTargetRowsCopied')}, deletion vectors "
              f"added {m.get('numTargetDeletionVectorsAdded', 0)}, MB written {m.get('numTargetBytesAdded', 0) / 1e6:.1f}")
        for reader, r in res["readers"].items():
            print(f"  {reader:28s} " + (f"{r['s']:.2f}s rows={r['rows']} same={r['same_as_spark']}"
                                       if "s" in r else f"ERROR {r['error']}"))
    if args.out_json:
        with open(args.out_json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2, default=str)
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
