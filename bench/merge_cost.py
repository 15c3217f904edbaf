#!/usr/bin/env python
"""What one Delta MERGE costs on tiny input, by table feature (issue 13: a cycle's floor).

Run:      .venv/bin/python bench/merge_cost.py [--rounds 3] [--out-json FILE]
What:     in one warm SparkSession (deltacrawl's settings, jobs/engine/session.build_spark), six tables
          of 2,000 rows (key, host_bucket, text) that differ only in the features deltacrawl's
          tables use: deletion vectors, Change Data Feed, partitioning by host_bucket (64
          values). Round after round, each table gets the same MERGE (20 source rows: 10
          updates, 10 inserts) and a 20-row append, interleaved, after a warm-up on a table of
          its own. The input is tiny on purpose: what is measured is the fixed cost a MERGE
          pays whatever its size, which a small crawl cycle pays six times (generate's lease,
          update's crawldb and hostdb, dedup's pages and bands, and, before 3268744, the
          warc_index).
          Each round also runs the MERGE once more with deletion vectors turned off for it
          (spark.databricks.delta.merge.deletionVectors.persistent=false: touched files
          rewritten, what jobs/engine/writes.merge_mode does below crawldb.deletion_vectors_min_mb) and
          a count of the table's rows (the floor of any query that reads a Delta table).
Prints:   per table kind, the median seconds of a MERGE (both ways), an append and a count;
          machine facts.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine_facts  # noqa: E402  (puts the repository on sys.path)

KINDS = (  # name, deletion vectors, change data feed, partitioned by host_bucket
    ("crawldb/hostdb: DV + CDF + partitioned", True, True, True),
    ("DV + partitioned", True, False, True),
    ("CDF + partitioned", False, True, True),
    ("partitioned", False, False, True),
    ("plain (warc_index, dedup/pages)", False, False, False),
    ("DV only", True, False, False),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out-json")
    args = ap.parse_args()
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from crawl.config import build_config
    from jobs.engine.session import build_spark
    work = tempfile.mkdtemp(prefix="deltacrawl-merge-cost-")
    spark = build_spark(build_config(None, {}), work)

    def rows(start: int, n: int):
        return spark.range(start, start + n).select(F.col("id").alias("k"),
                                                    (F.col("id") % 64).cast("int").alias("host_bucket"),
                                                    F.lit("x").alias("v"))

    def make(path: str, dv: bool, cdf: bool, partitioned: bool) -> None:
        builder = (DeltaTable.createIfNotExists(spark).location(path).addColumn("k", "long")
                   .addColumn("host_bucket", "int").addColumn("v", "string")
                   .property("delta.enableDeletionVectors", str(dv).lower())
                   .property("delta.enableChangeDataFeed", str(cdf).lower()))
        (builder.partitionedBy("host_bucket") if partitioned else builder).execute()
        rows(0, 2000).write.format("delta").mode("append").save(path)

    def merge(path: str, start: int) -> None:
        (DeltaTable.forPath(spark, path).alias("t").merge(rows(start, 20).alias("s"),
                                                          "t.host_bucket = s.host_bucket AND t.k = s.k")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    try:
        warm = os.path.join(work, "warm-up")
        make(warm, True, True, True)
        for i in range(4):
            merge(warm, 1990 + 20 * i)
        paths = {name: os.path.join(work, f"t{i}") for i, (name, *_f) in enumerate(KINDS)}
        for name, dv, cdf, part in KINDS:
            make(paths[name], dv, cdf, part)
        timings: dict[str, dict[str, list[float]]] = {
            what: {name: [] for name, *_f in KINDS} for what in ("merge", "merge_rewrites", "append", "count")}
        rewrites = "spark.databricks.delta.merge.deletionVectors.persistent"

        def timed(what: str, name: str, call) -> None:
            started = time.perf_counter()
            call()
            timings[what][name].append(time.perf_counter() - started)

        for r in range(args.rounds):
            for name, *_f in KINDS:
                timed("merge", name, lambda: merge(paths[name], 1990 + 40 * r))
                spark.conf.set(rewrites, "false")
                try:
                    timed("merge_rewrites", name, lambda: merge(paths[name], 2010 + 40 * r))
                finally:
                    spark.conf.unset(rewrites)
                timed("append", name, lambda: rows(100_000 + 20 * r, 20).write.format("delta").mode("append")
                      .save(paths[name]))
                timed("count", name, lambda: spark.read.format("delta").load(paths[name]).count())
        report = {"machine": machine_facts(), "rounds": args.rounds,
                  **{f"{what}_median_s": {n: statistics.median(v) for n, v in per.items()}
                     for what, per in timings.items()}}
        print(f"{'table kind':42s} {'MERGE s':>8s} {'rewrites':>9s} {'append s':>9s} {'count s':>8s}"
              f"   (median of {args.rounds})")
        for name, *_f in KINDS:
            print(f"{name:42s} {report['merge_median_s'][name]:8.2f} {report['merge_rewrites_median_s'][name]:9.2f} "
                  f"{report['append_median_s'][name]:9.2f} {report['count_median_s'][name]:8.2f}")
        print(json.dumps(report["machine"]))
        if args.out_json:
            with open(args.out_json, "w") as fh:
                json.dump(report, fh, indent=2)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
