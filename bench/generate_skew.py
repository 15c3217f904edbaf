#!/usr/bin/env python
"""generate's per-host cap with one giant host: Spark's WindowGroupLimit on and off, side by side.

Run:      .venv/bin/python bench/generate_skew.py [--rows 2000000] [--giant 1000000] [--hosts 20000]
          [--repeats 2] [--top-n 100000] [--out-json FILE]
Measures: jobs.generate.select_fetchlist (rank by priority, cap per host, split the budget) over
          --rows due URLs, --giant of them on one host and the rest spread evenly over --hosts
          hosts, written as the fetchlist is (Parquet), with generate.top_n = --top-n and the
          documented generate.max_urls_per_host. Two settings alternate in one SparkSession,
          --repeats times each: Spark's window group limit on (the default threshold, what
          generate gets from its literal bound on the rank: largest_host_cap) and off
          (spark.sql.optimizer.windowGroupLimitThreshold = -1: every due row of a host shuffled
          into one task and sorted there, as before that bound). Seconds of each run and their
          medians' ratio.
Checks:   both settings select the same URLs (count and the sum of url_hash); the plan has a
          WindowGroupLimit exactly when it is on.
Exit:     0 done · 1 a check failed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import Checker, finish, machine_facts, release  # noqa: E402

NOW = 1_800_000_000.0


def due_rows(spark, rows: int, giant: int, hosts: int, buckets: int):
    """URL_STATE_SCHEMA rows, all due and never fetched: ``giant`` on giant.example, the rest spread
    over ``hosts`` hosts; scores vary so the ranking has work to do."""
    from pyspark.sql import functions as F
    from jobs.engine.schemas import URL_STATE_SCHEMA
    ids = spark.range(rows)
    host = F.when(F.col("id") < giant, F.lit("giant.example")).otherwise(
        F.concat(F.lit("h"), (F.col("id") % hosts).cast("string"), F.lit(".example")))
    df = ids.select(
        F.concat(F.lit("http://"), host, F.lit("/p"), F.col("id").cast("string")).alias("url"),
        F.xxhash64(F.col("id")).alias("url_hash"), host.alias("host"),
        (F.abs(F.hash(host)) % buckets).cast("int").alias("host_bucket"),
        F.lit(1).alias("depth"), (F.rand(7) + 0.01).alias("score"),
        F.timestamp_seconds(F.lit(NOW) - F.col("id") % 86400).alias("next_fetch_at"))
    fields = {f.name: f for f in URL_STATE_SCHEMA.fields}
    return df.select(*[F.col(n).cast(fields[n].dataType) if n in df.columns
                       else F.lit(None).cast(fields[n].dataType).alias(n) for n in fields])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--giant", type=int, default=1_000_000)
    p.add_argument("--hosts", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--top-n", type=int, default=100_000)
    p.add_argument("--out-json")
    args = p.parse_args()
    from crawl.config import build_config
    from jobs import generate
    from jobs.engine.session import build_spark
    from jobs.engine.schemas import HOST_STATE_SCHEMA
    from pyspark.sql import functions as F
    check = Checker()
    cfg = build_config(overrides={"generate.top_n": args.top_n})
    spark = build_spark(cfg)
    work = tempfile.mkdtemp(prefix="deltacrawl-bench-skew-")
    result = {"machine": machine_facts(), "args": vars(args), "runs": []}
    try:
        t = time.perf_counter()
        due_rows(spark, args.rows, args.giant, args.hosts, int(cfg["crawldb.host_buckets"])) \
            .write.parquet(f"{work}/due")
        print(f"bench: {args.rows:,} due rows ({args.giant:,} on one host) written in {time.perf_counter() - t:.1f}s",
              flush=True)
        due = spark.read.parquet(f"{work}/due")
        hosts = spark.createDataFrame([], HOST_STATE_SCHEMA)
        answers = {}
        for i in range(args.repeats):
            for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
                spark.conf.set("spark.sql.optimizer.windowGroupLimitThreshold", "1000" if mode == "on" else "-1")
                fetchlist = generate.select_fetchlist(due, hosts, cfg, "20260101000000-abcdef", NOW)
                planned = "WindowGroupLimit" in fetchlist._jdf.queryExecution().executedPlan().toString()
                check(planned == (mode == "on"), f"{mode}: WindowGroupLimit in the plan is {planned}")
                t = time.perf_counter()
                fetchlist.write.mode("overwrite").parquet(f"{work}/fetchlist")
                seconds = time.perf_counter() - t
                got = spark.read.parquet(f"{work}/fetchlist").agg(F.count("*"), F.sum(F.col("url_hash").cast("decimal(38,0)"))).first()
                answers.setdefault(mode, tuple(got))
                result["runs"].append({"mode": mode, "seconds": seconds, "rows": got[0]})
                print(f"bench: window group limit {mode}: {seconds:.1f}s, {got[0]:,} URLs", flush=True)
        spark.conf.unset("spark.sql.optimizer.windowGroupLimitThreshold")
        check(answers["on"] == answers["off"], f"both settings select the same URLs: {answers}")
        med = {m: statistics.median(r["seconds"] for r in result["runs"] if r["mode"] == m) for m in ("on", "off")}
        result.update(median_s=med, on_over_off=med["on"] / med["off"])
    finally:
        release(spark, work, keep=False)

    def report(r):
        print(f"\n== generate with a giant host ==\n{r['machine']}\nmedian seconds: window group limit on "
              f"{r['median_s']['on']:.1f}, off {r['median_s']['off']:.1f}; on / off {r['on_over_off']:.2f}")
    return finish(result, check.failures, args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
