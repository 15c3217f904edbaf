#!/usr/bin/env python
"""Overlapping cycles (issue 33): how much of a crawl's wall time the fetcher works, in turn and overlapped.

Run:      PYTHONPATH=. .venv/bin/python bench/overlap.py [--hosts 1000 --pages 30] [--crawldb-urls 1000000]
          [--padding-hosts 100000] [--cycles 10] [--top-n 3000] [--max-urls-per-host 3] [--delay-s 40]
          [--modes sequential,overlap] [--conf key=value ...] [--out-json FILE] [--keep]
          (quick: --hosts 50 --crawldb-urls 100000 --padding-hosts 10000 --cycles 3 --top-n 150 --delay-s 5)
What:     bench/_realistic_web.py serves hosts x pages realistic pages (~50 KB, gzip, ~100 links, 3 % 404,
          2 % 301, robots.txt) from its own process on 127.0.0.2 ... (loopback only), logging every
          request (host, path, status, start, end). One crawl root is built once, in a child process
          with one SparkSession: the web's page URLs injected as seeds (jobs.inject.run), plus padding
          rows that fill the crawldb to --crawldb-urls: bench/layout.py's synthetic rows (url_hash and
          host_bucket as crawl/net/urls.py computes them, via bench/scale.py) on --padding-hosts hosts
          that do not exist, every one status fetched (200) with next_fetch_at 1-2 years ahead, so
          never due, never filling a budget within the crawl (generate.fill_budget takes only URLs
          fetched >= schedule.min_interval_s ago, and only when fewer than top_n are due), but read
          by every generate and MERGEd into by every update; their hosts are IP literals in
          127.200.0.0/14, outside fetch.allow_networks, so even a fetch of one would be refused by
          the address guard before any packet. Matching hostdb rows (robots cached), and dedup/pages,
          dedup/bands and warc_index rows for 13 % of them (the share of 200 pages in scale.py's
          mix). Then the root is copied once per mode, and each mode runs the real CLI,
          `python -m jobs.cli crawl --seeds SEEDS --cycles N [--overlap]` (inject finds every seed
          known; stats at the end), with the same config: generate.top_n, max_urls_per_host and
          fetch.delay_s as given, fetch.allow_networks = exactly the web's addresses, mlflow off.
          The modes run one after the other (2 cores: side by side they would measure each other).
Why top_n 3,000, 3 a host, delay 40 s: a segment then holds 3 pages of each of the 1,000 hosts,
          and the 10 cycles fetch exactly the 30,000 seeds (seeds rank first: a discovered link
          inherits a share of its page's score). Fetch time is then politeness, not CPU: per host
          robots.txt (cycle 1) and 3 pages 40 s apart (and, overlapped, 40 s after the segment
          before last asked the host), ~90-150 s a segment for ~12 CPU s of fetch work. That is
          at least what generate + dedup + update of a 1 M-URL crawldb take on a loaded 2-core
          machine (~60-200 s), so the overlap has the driver's steps to hide and the fetch has CPU
          to spare. A shorter fetch than the driver's steps bounds the busy share by fetch /
          (driver steps) whatever the overlap does.
Measures: from each crawl root's cycles table (Delta, read with delta-rs as crawl/readers.py does):
          wall = first generate's start to the last update's end; fetch busy = the union of the
          fetch steps' [started_at, started_at + seconds] intervals; busy share = busy / wall; what
          the rest is (before the first fetch, between fetches, after the last fetch); each cycle's
          step seconds. From the web's request log, within each crawl's window: page requests by
          status, pages per second of wall, robots.txt requests per host, how long each fetch step
          waited before its first request, the smallest gap between the end of one request
          and the start of the next to the same host against fetch.delay_s (a gap shorter by
          more than 1 ms is a politeness violation), also across the segments' boundaries, and
          the smallest start-to-start interval. The server stamps a request's end once the whole
          response is in the kernel's send buffer (bench/_realistic_web.py: a buffer a body fits,
          the web ahead of the crawler in the scheduler); under load the stamp can still lag, and
          the client waits delay_s from when it had the bytes, so the check counts the gap from
          that end stamp (conservative) and also from the stamp taken before the body's write
          (violations_before_write: short even if the response ended when its writing began).
          Both modes side by side, and overlap / sequential.
Checks:   every crawl exits 0 and runs every cycle; no politeness violation; no request but pages,
          robots.txt and /sitemap.xml (asked once a host, sitemaps.enabled); no URL of a padding host in any segment's outcomes
          (blocked_address counts); every page request inside some fetch step of its crawl.
Exit:     0 done · 1 a check failed (figures still printed/written) · 2 bad arguments.

Loopback only: the web binds 127.0.x.y; fetch.allow_networks allows exactly its addresses.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py, _realistic_web.py, scale.py
from _common import REPO, Checker, fmt, machine_facts, run_in_workdir  # noqa: E402

MODES = ("sequential", "overlap")
STEPS = ("generate", "fetch", "dedup", "update")
DAY = 86400
PADDING_PAGES_SHARE = 0.13  # padding rows with a dedup/pages, dedup/bands and warc_index entry
PADDING_NET = 200  # padding hosts are 127.200.0.0 + index (127.200.0.0/14), never served, never allowed


# =========================================================================== the crawl root (child)

def padding_host(i: int) -> str:
    return f"127.{PADDING_NET + i // 65536}.{i // 256 % 256}.{i % 256}"


def build_root(spec_path: str) -> int:
    """``--build SPEC``: the padded crawldb and the seeds, in one SparkSession (module docstring)."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    from pyspark.sql import functions as F

    from crawl.config import build_config
    from crawl.net.urls import host_bucket
    from jobs import inject
    from jobs.dedup import page_bands
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.schemas import (DEDUP_BANDS_SCHEMA, DEDUP_PAGES_SCHEMA, HOST_STATE_SCHEMA, URL_STATE_SCHEMA,
                                     WARC_INDEX_SCHEMA)
    from jobs.engine.session import build_spark
    from jobs.engine.tables import ensure_dedup_tables, ensure_tables
    from layout import conform, synth_base
    from scale import SEGMENT_OLD, _signature, _with_url_hash

    cfg = build_config(overrides=spec["conf"])
    spark = build_spark(cfg, spec["root"])
    root = CrawlRoot(spec["root"])
    ensure_tables(spark, root)
    ensure_dedup_tables(spark, root)
    now, n, hosts = time.time(), spec["padding_urls"], spec["padding_hosts"]
    buckets = int(cfg["crawldb.host_buckets"])
    started = time.perf_counter()
    names = spark.createDataFrame([(i, padding_host(i), host_bucket(padding_host(i), buckets)) for i in range(hosts)],
                                  "host_idx long, host string, host_bucket int")

    def uniform(salt: str):
        return F.pmod(F.xxhash64(F.col("id"), F.lit(salt)), F.lit(1_000_003)) / F.lit(1_000_003.0)

    # layout.py's rows (depth, score, discovery times, fingerprints ...), moved to the padding hosts
    # and made fetched pages that are not due again within the crawl
    rows = (synth_base(spark, n, hosts, buckets, now).drop("host", "host_bucket")
            .join(F.broadcast(names), "host_idx")
            .withColumn("id", F.regexp_extract("url", r"/p(\d+)$", 1).cast("long"))
            .withColumn("url", F.concat(F.lit("http://"), F.col("host"), F.lit("/p"), F.col("id")))
            .withColumn("status", F.lit("fetched")).withColumn("http_status", F.lit(200))
            .withColumn("last_fetched_at", F.timestamp_seconds(F.lit(int(now)) - (uniform("last") * 30 * DAY).cast("long")))
            .withColumn("fetch_interval_s", F.lit(400 * DAY).cast("long"))
            .withColumn("next_fetch_at", F.timestamp_seconds(F.unix_timestamp("last_fetched_at") + F.col("fetch_interval_s")))
            .withColumn("fetch_count", F.lit(1)).withColumn("retries", F.lit(0))
            .withColumn("content_hash", F.sha2(F.col("url"), 256).substr(1, 40))
            .withColumn("content_type", F.lit("text/html"))
            .withColumn("simhash", F.xxhash64(F.col("url"), F.lit("sim")))
            .withColumn("text_hash", F.xxhash64("url", F.lit("text")))
            .withColumn("dup_of", F.lit(None).cast("string")).withColumn("redirect_to", F.lit(None).cast("string"))
            .withColumn("error", F.lit(None).cast("string"))
            .withColumn("warc_file", F.lit("segments/x/warc/part-00000.warc.gz"))
            .withColumn("warc_offset", F.col("id") * 4096).withColumn("warc_length", F.lit(4096).cast("long")))
    rows = _with_url_hash(rows.select(*conform(rows, URL_STATE_SCHEMA)))
    rows.write.format("delta").mode("append").save(root.crawldb)
    crawldb = spark.read.format("delta").load(root.crawldb)
    robots = "User-agent: *\nDisallow: /private/\n"
    host_rows = (crawldb.groupBy("host", "host_bucket")
                 .agg(F.count("*").alias("url_count"), F.count("*").alias("pages_fetched"))
                 .withColumn("requests", F.col("pages_fetched")).withColumn("errors", F.lit(0).cast("long"))
                 .withColumn("robots_status", F.lit(200)).withColumn("robots_txt", F.lit(robots))
                 .withColumn("robots_fetched_at", F.timestamp_seconds(F.lit(int(now) - DAY)))
                 .withColumn("last_segment_id", F.lit(SEGMENT_OLD)))
    host_rows.select(*conform(host_rows, HOST_STATE_SCHEMA)).write.format("delta").mode("append").save(root.hostdb)
    kept = crawldb.filter(F.pmod(F.xxhash64("url", F.lit("kept")), F.lit(1000)) < int(PADDING_PAGES_SHARE * 1000))
    index = (kept.withColumn("fetched_at", F.col("last_fetched_at")).withColumn("mime", F.col("content_type"))
             .withColumn("warc_file", F.concat(F.lit("CC-SEG-" + SEGMENT_OLD + "-"), F.pmod(F.col("url_hash"), F.lit(500)),
                                               F.lit(".warc.gz")))
             .withColumn("segment_id", F.lit(SEGMENT_OLD)))
    index.select(*conform(index, WARC_INDEX_SCHEMA)).write.format("delta").mode("append").save(root.warc_index)
    pages = (kept.withColumn("signature", _signature(F.col("url"), "old"))
             .withColumn("first_fetched_at", F.col("last_fetched_at")).withColumn("segment_id", F.lit(SEGMENT_OLD)))
    pages.select(*conform(pages, DEDUP_PAGES_SCHEMA)).write.format("delta").mode("append").save(root.dedup_pages)
    bands = page_bands(spark, spark.read.format("delta").load(root.dedup_pages))
    bands.select(*conform(bands, DEDUP_BANDS_SCHEMA)).write.format("delta").mode("append").save(root.dedup_bands)
    padding_s = time.perf_counter() - started
    t = time.perf_counter()
    injected = inject.run(spark, cfg, root, spec["seeds"])
    built = {name: spark.read.format("delta").load(path).count()
             for name, path in (("crawldb", root.crawldb), ("hostdb", root.hostdb), ("warc_index", root.warc_index),
                                ("dedup_pages", root.dedup_pages), ("dedup_bands", root.dedup_bands))}
    crawldb = spark.read.format("delta").load(root.crawldb)
    built["due_at_build"] = crawldb.filter(F.col("next_fetch_at") <= F.current_timestamp()).count()
    built.update(padding_s=round(padding_s, 1), inject_s=round(time.perf_counter() - t, 1),
                 seeds_inserted=injected.inserted)
    spark.stop()
    with open(spec["out"], "w", encoding="utf-8") as fh:
        json.dump(built, fh)
    return 0


# =========================================================================== measuring

def read_cycles(root: str) -> list[dict[str, Any]]:
    """The cycles table's rows, read with delta-rs (as crawl/readers.py reads the tables without
    Spark) in a child process: deltalake 1.6.6 now and then aborts the interpreter at its exit
    ("terminate called without an active exception", exit 134), which must not become this
    benchmark's exit code."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--read-cycles", root], capture_output=True,
                         text=True, cwd=REPO)
    lines = [line for line in out.stdout.splitlines() if line.startswith("[")]
    if not lines:
        raise RuntimeError(f"reading {root}/cycles failed (exit {out.returncode}): {out.stderr[-500:]}")
    rows = json.loads(lines[-1])
    for r in rows:
        r["end"] = r["start"] + r["seconds"]
    return sorted(rows, key=lambda r: r["start"])


def read_cycles_child(root: str) -> int:
    """``--read-cycles ROOT``: the cycles table as one JSON line (started_at as epoch ``start``)."""
    from deltalake import DeltaTable
    rows = DeltaTable(os.path.join(root, "cycles")).to_pyarrow_table(
        columns=["crawl_id", "cycle", "step", "segment_id", "started_at", "seconds", "urls", "hosts",
                 "by_outcome"]).to_pylist()
    for r in rows:
        r["start"] = r.pop("started_at").timestamp()
        r["by_outcome"] = dict(r["by_outcome"] or [])
    print(json.dumps(rows), flush=True)
    return 0


def union_s(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def busy_share(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Wall, fetch busy and what the rest was, from one crawl's cycles rows (cycle >= 1)."""
    steps = [r for r in rows if (r["cycle"] or 0) >= 1 and r["step"] in STEPS]
    gens = [r for r in steps if r["step"] == "generate"]
    updates = [r for r in steps if r["step"] == "update"]
    fetches = sorted((r["start"], r["end"]) for r in steps if r["step"] == "fetch")
    if not gens or not updates or not fetches:
        return {}
    t0, t1 = min(r["start"] for r in gens), max(r["end"] for r in updates)
    busy = union_s(fetches)
    between = sum(max(0.0, b[0] - a[1]) for a, b in zip(fetches, fetches[1:]))
    per_cycle: dict[int, dict[str, float]] = collections.defaultdict(dict)
    for r in steps:
        per_cycle[r["cycle"]][r["step"]] = per_cycle[r["cycle"]].get(r["step"], 0.0) + r["seconds"]
    return {"wall_s": t1 - t0, "fetch_busy_s": busy, "busy_share": busy / (t1 - t0), "t0": t0, "t1": t1,
            "before_first_fetch_s": fetches[0][0] - t0, "between_fetches_s": between,
            "after_last_fetch_s": t1 - max(b for _, b in fetches), "fetch_intervals": fetches,
            "cycles": len(fetches), "per_cycle": {c: per_cycle[c] for c in sorted(per_cycle)},
            "step_total_s": {s: sum(r["seconds"] for r in steps if r["step"] == s) for s in STEPS},
            "fetched_urls": sum(r["urls"] or 0 for r in steps if r["step"] == "fetch"),
            "by_outcome": dict(sum((collections.Counter(r["by_outcome"]) for r in steps if r["step"] == "fetch"),
                                   collections.Counter()))}


def read_log(path: str, t0: float, t1: float) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.endswith("}\n"):
                e = json.loads(line)
                if t0 <= e["ts"] <= t1:
                    out.append(e)
    return out


def politeness(entries: list[dict[str, Any]], delay_s: float, fetches: list[tuple[float, float]]) -> dict[str, Any]:
    """Per host, in order of start: gap = next request's start - previous request's end."""
    by_host: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in entries:
        by_host[e["host"]].append(e)
    gaps: list[tuple[float, Any, str]] = []
    min_start = float("inf")
    for host, reqs in by_host.items():
        reqs.sort(key=lambda e: e["ts"])
        gaps += [(b["ts"] - a["done_ts"], host, b["path"], b["ts"] - a.get("write_ts", a["done_ts"]))
                 for a, b in zip(reqs, reqs[1:])]
        starts_gaps = [b["ts"] - a["ts"] for a, b in zip(reqs, reqs[1:])]
        min_start = min([min_start, *starts_gaps])
    gaps.sort()
    robots = collections.Counter(e["host"] for e in entries if e["path"] == "/robots.txt")
    pages = [e for e in entries if e["path"].startswith("/p/")]
    sitemaps = [e for e in entries if e["path"] == "/sitemap.xml"]
    other = [e for e in entries if e["path"] not in ("/robots.txt", "/sitemap.xml") and not e["path"].startswith("/p/")]
    starts = sorted(e["ts"] for e in entries)
    # how long each fetch step waited before its first request (politeness carried over from the
    # segment before, the fetch's own start-up)
    first = []
    for a, b in fetches:
        i = bisect.bisect_left(starts, a)
        first.append(round(starts[i] - a, 1) if i < len(starts) and starts[i] <= b else None)
    outside = sum(1 for e in entries if not any(a - 1.0 <= e["ts"] <= b + 1.0 for a, b in fetches))
    median = gaps[len(gaps) // 2][0] if gaps else None
    return {"delay_s": delay_s, "requests": len(entries), "hosts": len(by_host), "page_requests": len(pages),
            "page_status": dict(collections.Counter(str(e["status"]) for e in pages)),
            "sitemap_requests": len(sitemaps), "first_request_after_s": first,
            "other_requests": len(other), "other_paths": sorted({e["path"] for e in other})[:5],
            "robots_requests": sum(robots.values()),
            "robots_per_host": (sum(robots.values()) / len(by_host)) if by_host else None,
            "robots_per_host_max": max(robots.values(), default=0),
            "min_gap_s": gaps[0][0] if gaps else None, "min_gap_at": gaps[0][1:] if gaps else None,
            "median_gap_s": median, "violations": sum(1 for g, *_ in gaps if g < delay_s - 1e-3),
            "violations_by_ms_short": sorted(round((delay_s - g) * 1e3, 1) for g, *_ in gaps if g < delay_s - 1e-3),
            # counted from the stamp before the body's write: short even if the response ended
            # the moment its writing began
            "violations_before_write": sum(1 for *_, w in gaps if w < delay_s - 1e-3),
            "min_start_to_start_s": min_start if gaps else None,
            "outside_fetch_steps": outside}


# =========================================================================== the benchmark

def conf_args(over: dict[str, Any]) -> list[str]:
    out = []
    for k, v in over.items():
        out += ["--conf", f"{k}={json.dumps(v) if isinstance(v, list) else v}"]
    return out


def run_child(cmd: list[str], log_path: str, env: dict[str, str], prefix: str) -> tuple[int, float, float]:
    """Run ``cmd``, its stdout and stderr to ``log_path``; echo its "cycle ... done" lines."""
    t0 = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            if " done in " in line or "ERROR" in line or "Traceback" in line or "error:" in line:
                print(f"  {prefix}: {line.strip()[:220]}", flush=True)
        rc = proc.wait()
    return rc, t0, time.time()


def bench(args, workdir: str, check: Checker) -> dict[str, Any]:
    from _realistic_web import RealisticWebProcess
    res: dict[str, Any] = {"params": {k: getattr(args, k) for k in
                                      ("hosts", "pages", "seed", "crawldb_urls", "padding_hosts", "cycles", "top_n",
                                       "max_urls_per_host", "delay_s", "modes", "conf")}}
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.path.join(REPO, "bench") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    request_log = os.path.join(workdir, "requests.jsonl")
    print(f"overlap: generating {args.hosts * args.pages:,} pages in the web's process", flush=True)
    t = time.perf_counter()
    web = RealisticWebProcess(args.hosts, args.pages, args.seed, os.path.join(workdir, "web.stderr"),
                              request_log=request_log)
    res["web"] = {"start_s": round(time.perf_counter() - t, 1), "port": web.port, **web.sizes,
                  "networks": web.networks()}
    try:
        urls = web.web.page_urls()
        seeds = os.path.join(workdir, "seeds.txt")
        with open(seeds, "w", encoding="utf-8") as fh:
            fh.writelines(u + "\n" for u in urls)
        over: dict[str, Any] = {"generate.top_n": args.top_n, "generate.max_urls_per_host": args.max_urls_per_host,
                                "fetch.delay_s": args.delay_s, "fetch.allow_networks": web.networks(),
                                "mlflow.tracking_uri": "off"}
        for kv in args.conf:
            k, v = kv.split("=", 1)
            over[k] = v
        res["conf"] = over
        # ---- the crawl root, once
        base = os.path.join(workdir, "base")
        spec = {"root": base, "seeds": seeds, "padding_urls": max(0, args.crawldb_urls - len(urls)),
                "padding_hosts": args.padding_hosts, "conf": {k: json.dumps(v) if isinstance(v, list) else str(v)
                                                               for k, v in over.items()},
                "out": os.path.join(workdir, "built.json")}
        with open(os.path.join(workdir, "build.json"), "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        print(f"overlap: building the crawl root: {spec['padding_urls']:,} padding rows on {args.padding_hosts:,} "
              f"hosts + {len(urls):,} seeds", flush=True)
        rc, b0, b1 = run_child([sys.executable, os.path.abspath(__file__), "--build", os.path.join(workdir, "build.json")],
                               os.path.join(workdir, "build.log"), env, "build")
        if rc != 0:
            raise RuntimeError(f"building the crawl root failed (exit {rc}); see {workdir}/build.log")
        with open(spec["out"], encoding="utf-8") as fh:
            res["built"] = dict(json.load(fh), seconds=round(b1 - b0, 1))
        print(f"overlap: built in {b1 - b0:.0f} s: {res['built']}", flush=True)
        check(res["built"]["crawldb"] >= args.crawldb_urls,
              f"crawldb holds {res['built']['crawldb']:,} URLs (>= {args.crawldb_urls:,})")
        check(res["built"]["due_at_build"] == len(urls),
              f"exactly the {len(urls):,} seeds are due ({res['built']['due_at_build']:,})")
        # ---- each mode on its own copy
        res["modes"] = {}
        for mode in args.modes.split(","):
            root = os.path.join(workdir, f"crawl-{mode}")
            shutil.copytree(base, root)
            cmd = [sys.executable, "-m", "jobs.cli", "crawl", "--crawl-root", root, "--seeds", seeds, "--cycles",
                   str(args.cycles), "--mlflow-uri", "off", *conf_args(over)] + (["--overlap"] if mode == "overlap" else [])
            print(f"overlap: {mode}: {' '.join(cmd[:9])} ... (load {os.getloadavg()[0]:.1f})", flush=True)
            load0 = os.getloadavg()
            rc, c0, c1 = run_child(cmd, os.path.join(workdir, f"crawl-{mode}.log"), env, mode)
            web.counters()  # flushes the request log
            out: dict[str, Any] = {"returncode": rc, "process_s": round(c1 - c0, 1), "load_start": load0,
                                   "load_end": os.getloadavg()}
            check(rc == 0, f"{mode}: the crawl exited {rc} (log: crawl-{mode}.log)")
            rows = read_cycles(root) if os.path.isdir(os.path.join(root, "cycles")) else []
            share = busy_share(rows)
            out.update(share)
            if share:
                out["politeness"] = politeness(read_log(request_log, c0, c1), args.delay_s, share["fetch_intervals"])
                p = out["politeness"]
                check(share["cycles"] == args.cycles, f"{mode}: {share['cycles']} of {args.cycles} cycles fetched")
                check(p["violations"] == 0, f"{mode}: no politeness violation ({p['violations']}; smallest gap "
                                            f"{fmt(p['min_gap_s'], 3)} s against {args.delay_s} s)")
                check(p["other_requests"] == 0, f"{mode}: only pages, robots.txt and /sitemap.xml requested ({p['other_paths']})")
                check(p["outside_fetch_steps"] == 0, f"{mode}: every request inside a fetch step "
                                                     f"({p['outside_fetch_steps']} outside)")
                check(not share["by_outcome"].get("blocked_address"),
                      f"{mode}: no URL of a padding host fetched (blocked_address "
                      f"{share['by_outcome'].get('blocked_address', 0)})")
                out["pages_per_wall_s"] = p["page_requests"] / share["wall_s"]
                print(f"overlap: {mode}: wall {share['wall_s']:.1f} s, fetch busy {share['fetch_busy_s']:.1f} s = "
                      f"{share['busy_share']:.1%}; {p['page_requests']:,} page requests, smallest gap "
                      f"{fmt(p['min_gap_s'], 3)} s", flush=True)
            res["modes"][mode] = out
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        m = res["modes"]
        if all(x in m and m[x].get("wall_s") for x in MODES):
            res["ratio"] = {k: m["overlap"][k] / m["sequential"][k] for k in ("wall_s", "fetch_busy_s", "busy_share")}
    finally:
        web.stop()
    return res


# =========================================================================== report

def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    p = r.get("params", {})
    print(f"\n== overlapping cycles: {p.get('hosts')} hosts x {p.get('pages')} pages, crawldb "
          f"{r.get('built', {}).get('crawldb', 0):,} URLs, {p.get('cycles')} cycles, top_n {p.get('top_n')}, "
          f"{p.get('max_urls_per_host')} a host, delay {p.get('delay_s')} s ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB · commit {m['git_commit']} · load "
          f"{m['loadavg_at_start']} -> {m.get('loadavg_at_end')}")
    modes = r.get("modes") or {}
    if not modes:
        return
    print(f"\n{'mode':11s} {'cycles':>6s} {'pages':>7s} {'wall s':>8s} {'busy s':>8s} {'share':>6s} "
          f"{'before':>7s} {'between':>8s} {'after':>7s} {'viol.':>5s} {'min gap':>8s} {'robots/h':>8s}  load")
    for mode, x in modes.items():
        if not x.get("wall_s"):
            print(f"{mode:11s} (no figures: exit {x.get('returncode')})")
            continue
        q = x.get("politeness", {})
        print(f"{mode:11s} {x['cycles']:6d} {q.get('page_requests', 0):7,d} {x['wall_s']:8.1f} {x['fetch_busy_s']:8.1f} "
              f"{x['busy_share']:6.1%} {x['before_first_fetch_s']:7.1f} {x['between_fetches_s']:8.1f} "
              f"{x['after_last_fetch_s']:7.1f} {q.get('violations', '-'):>5} {fmt(q.get('min_gap_s'), 2):>8s} "
              f"{fmt(q.get('robots_per_host'), 2):>8s}  {x['load_start'][0]:.1f}->{x['load_end'][0]:.1f}")
    if r.get("ratio"):
        print("overlap / sequential: " + ", ".join(f"{k} {v:.2f}" for k, v in r["ratio"].items()))
    for mode, x in modes.items():
        if not x.get("per_cycle"):
            continue
        q = x.get("politeness", {})
        print(f"\n{mode}: {fmt(x.get('pages_per_wall_s'), 2)} pages per wall second; seconds per step and cycle "
              f"(fetched URLs {x['fetched_urls']:,}, outcomes {x['by_outcome']}); each fetch's first request after "
              f"{q.get('first_request_after_s')} s")
        print("  cycle " + " ".join(f"{s:>9s}" for s in STEPS))
        for c, steps in x["per_cycle"].items():
            print(f"  {c:5d} " + " ".join(f"{steps.get(s, 0):9.1f}" for s in STEPS))
        print("  total " + " ".join(f"{x['step_total_s'][s]:9.1f}" for s in STEPS))
    print(f"\nchecks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--build"] and len(argv) == 2:
        return build_root(argv[1])
    if argv[:1] == ["--read-cycles"] and len(argv) == 2:
        return read_cycles_child(argv[1])
    p = argparse.ArgumentParser(description="Fetch busy share of a crawl in turn and with overlapping cycles (issue 33).")
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--pages", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--crawldb-urls", type=int, default=1_000_000, help="pad the crawldb to this many URLs")
    p.add_argument("--padding-hosts", type=int, default=100_000)
    p.add_argument("--cycles", type=int, default=10)
    p.add_argument("--top-n", type=int, default=3000)
    p.add_argument("--max-urls-per-host", type=int, default=3)
    p.add_argument("--delay-s", type=float, default=40.0)
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated, run in this order")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra crawler option")
    p.add_argument("--out-json", metavar="FILE")
    p.add_argument("--keep", action="store_true", help="keep the work directory (crawl roots, logs)")
    args = p.parse_args(argv)
    if (args.hosts < 1 or args.pages < 2 or args.cycles < 1 or not 0 < args.padding_hosts <= 4 * 65536
            or any("=" not in kv for kv in args.conf) or not set(args.modes.split(",")) <= set(MODES)):
        p.error("--hosts >= 1, --pages >= 2, --cycles >= 1, 0 < --padding-hosts <= 262144, --conf KEY=VALUE, "
                f"--modes from {','.join(MODES)}")
    check = Checker()
    result: dict[str, Any] = {"machine": machine_facts(), "command": "python bench/overlap.py " + " ".join(argv)}
    return run_in_workdir("overlap", bench, args, check, result, print_report)


if __name__ == "__main__":
    sys.exit(main())
