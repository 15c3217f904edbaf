#!/usr/bin/env python
"""Cycle benchmark: one full crawl cycle (inject, generate, fetch, dedup, update, stats) against the
bundled local test web, timed step by step, next to a plain-aiohttp baseline that fetches the
same URLs in the same run.

Run:      .venv/bin/python bench/cycle.py [--hosts 200] [--pages 50] [--cycles 1] [--out-json FILE] [--keep]
          [--raw-repeats 3]
Measures: SparkSession start (build_spark) apart from the steps; each step's wall seconds
          (time.perf_counter); fetch pages/s = attempted URLs / fetch seconds; requests the test
          web saw (pages, robots.txt and /sitemap.xml apart); rows/s for inject and update; dedup
          seconds and the duplicates it found; then the same fetchlist fetched with plain aiohttp
          (same concurrency cap, one connection per host, no robots, no delay, no parsing, no
          Spark), in this process and in a fresh child process (each --raw-repeats times,
          interleaved; the median counts), and the ratios deltacrawl pages/s / raw pages/s.
          The in-process baseline shares the GIL with the test web's server thread; the child
          process one does not (like deltacrawl's fetch, which runs in Spark Python workers).
Checks:   cycle 1 attempts exactly hosts x pages URLs, all "ok"; the test web saw those plus one
          robots.txt per host and (sitemaps.enabled) one /sitemap.xml per host, requested after
          robots.txt because the test web's robots.txt lists no sitemap; after dedup and update
          the crawldb holds exactly the seeds plus every outlink of the fetched pages (computed
          independently with DevWeb.outlinks), and every fetched page is "fetched" or, as many as
          dedup found, "duplicate".
Exit:     0 done · 1 a check failed (figures are still printed and written) · 2 bad arguments.

Everything stays on loopback: the test web binds 127.0.x.y addresses only.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py, also in spawned children
from _common import (Checker, devweb_networks, finish, fmt, http_span, machine_facts, rate,  # noqa: E402
                     raw_fetch)  # (shared with bench/fetch.py)


# --------------------------------------------------------------------------- the benchmark

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time one deltacrawl cycle against the local test web, "
                                            "next to a plain-aiohttp baseline.")
    p.add_argument("--hosts", type=int, default=200, help="test web hosts (default 200)")
    p.add_argument("--pages", type=int, default=50, help="pages per host (default 50)")
    p.add_argument("--cycles", type=int, default=1, help="generate/fetch/dedup/update cycles (default 1)")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    p.add_argument("--keep", action="store_true", help="keep the temporary crawl root")
    p.add_argument("--raw-repeats", type=int, default=3,
                   help="runs of each raw aiohttp baseline; the median is reported (default 3)")
    args = p.parse_args(argv)
    if min(args.hosts, args.pages, args.cycles, args.raw_repeats) < 1:
        p.error("--hosts, --pages, --cycles and --raw-repeats must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from crawl.config import build_config
    from crawl.devweb.web import DevWeb
    from crawl.crawldb.status import DUPLICATE, FETCHED
    from crawl.net.urls import InvalidUrl, normalize_url

    facts = machine_facts()
    check = Checker()
    failures = check.failures

    workdir = tempfile.mkdtemp(prefix="deltacrawl-bench-", dir="/tmp")
    root_path = os.path.join(workdir, "crawl-root")
    web = DevWeb(hosts=args.hosts, pages_per_host=args.pages, port=0, crawl_delay_s=0)
    spark = None
    result: dict[str, Any] = {"benchmark": "cycle", "machine": facts,
                              "params": {"hosts": args.hosts, "pages": args.pages, "cycles": args.cycles},
                              "command": "python bench/cycle.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    try:
        web.start()
        cfg = build_config(overrides={
            "fetch.delay_s": 0.0,
            "generate.max_urls_per_host": args.pages,
            "generate.top_n": 10_000_000,
            "fetch.allow_networks": devweb_networks(args.hosts),  # the guard refuses loopback
        })
        concurrency = int(cfg["fetch.max_concurrency"])
        result["config"] = {k: cfg[k] for k in ("fetch.delay_s", "fetch.max_concurrency", "fetch.tasks",
                                                "generate.max_urls_per_host", "generate.top_n",
                                                "spark.master", "spark.shuffle_partitions",
                                                "spark.driver_memory", "crawldb.host_buckets")}

        # Seeds: every host's "/" and every /p/{k}.html. That is pages + 1 URLs per host; the cap
        # generate.max_urls_per_host = pages leaves exactly pages per host in the first segment.
        seeds = []
        for base in web.seed_urls():
            seeds.append(base)
            seeds.extend(f"{base}p/{k}.html" for k in range(args.pages))
        seeds_path = os.path.join(workdir, "seeds.txt")
        with open(seeds_path, "w", encoding="utf-8") as fh:
            fh.writelines(u + "\n" for u in seeds)
        seed_set = {normalize_url(u) for u in seeds}
        print(f"bench: test web on {web.addresses[0]}..{web.addresses[-1]} port {web.port}; "
              f"{len(seeds)} seeds in {seeds_path}; crawl root {root_path}", flush=True)

        from jobs import dedup, fetch, generate, inject, update
        from jobs.engine.session import build_spark
        from jobs.stats import collect_stats
        from jobs.engine.crawl_root import CrawlRoot

        t0 = time.perf_counter()
        spark = build_spark(cfg)
        result["spark_start_s"] = time.perf_counter() - t0
        root = CrawlRoot(root_path)

        def step(fn, *a):
            n0 = len(web.requests())
            t = time.perf_counter()
            out = fn(*a)
            seconds = time.perf_counter() - t
            log = web.requests()[n0:]
            return out, seconds, log

        inj, s, log = step(inject.run, spark, cfg, root, seeds_path)
        result["inject"] = {"seconds": s, "rows": inj.inserted, "rows_per_s": rate(inj.inserted, s),
                            "web_requests": len(log)}
        check(inj.inserted == len(seeds), f"inject inserted {inj.inserted} rows, expected {len(seeds)}")

        cycles = []
        first_fetchlist: list[str] = []
        first_fetched_ok: list[str] = []
        for c in range(1, args.cycles + 1):
            cyc: dict[str, Any] = {"cycle": c}
            gen, s, log = step(generate.run, spark, cfg, root)
            cyc["generate"] = {"seconds": s, "urls": gen.urls, "hosts": gen.hosts,
                               "rows_per_s": rate(gen.urls, s), "web_requests": len(log)}
            if gen.segment_id is None:
                print(f"bench: cycle {c}: nothing due, stopping", flush=True)
                cycles.append(cyc)
                break
            if c == 1:
                first_fetchlist = [r["url"] for r in
                                   spark.read.parquet(root.fetchlist(gen.segment_id)).select("url").collect()]
                check(gen.urls == args.hosts * args.pages,
                      f"generate selected {gen.urls} URLs, expected {args.hosts * args.pages}")
            fet, s, log = step(fetch.run, spark, cfg, root, gen.segment_id)
            by_path = collections.Counter("robots" if e["path"] == "/robots.txt" else
                                          "sitemap" if e["path"] == "/sitemap.xml" else "page" for e in log)
            cyc["fetch"] = {"seconds": s, "attempted": fet.urls, "hosts": fet.hosts,
                            "pages_per_s": rate(fet.urls, s), "by_fetch_status": fet.by_fetch_status,
                            "web_requests": len(log), "web_page_requests": by_path["page"],
                            "web_robots_requests": by_path["robots"],
                            "web_sitemap_requests": by_path["sitemap"],
                            "web_http_span_s": http_span(log)}
            if c == 1:
                expected = args.hosts * args.pages
                check(fet.urls == expected, f"fetch attempted {fet.urls} URLs, expected {expected}")
                check(fet.by_fetch_status == {"ok": expected},
                      f"fetch statuses {fet.by_fetch_status}, expected all {expected} 'ok'")
                # each host's /sitemap.xml is read once after its robots.txt (which names no sitemap)
                sitemaps = args.hosts if cfg["sitemaps.enabled"] else 0
                check(by_path["page"] == expected and by_path["robots"] == args.hosts
                      and by_path["sitemap"] == sitemaps,
                      f"test web saw {by_path['page']} page + {by_path['robots']} robots.txt + "
                      f"{by_path['sitemap']} /sitemap.xml requests, expected {expected} + {args.hosts} + {sitemaps}")
                first_fetched_ok = [r["url"] for r in
                                    spark.read.parquet(root.fetched(gen.segment_id))
                                    .filter("kind = 'url' AND fetch_status = 'ok'").select("url").collect()]
            ded, s, log = step(dedup.run, spark, cfg, root, gen.segment_id)
            cyc["dedup"] = {"seconds": s, "pages": ded.pages, "exact": ded.exact, "near": ded.near,
                            "candidate_pairs": ded.candidate_pairs, "web_requests": len(log)}
            upd, s, log = step(update.run, spark, cfg, root, gen.segment_id)
            rows = upd.updated + upd.new_urls
            cyc["update"] = {"seconds": s, "updated": upd.updated, "new_urls": upd.new_urls, "hosts": upd.hosts,
                             "rows": rows, "rows_per_s": rate(rows, s), "web_requests": len(log)}
            if c == 1:
                check(upd.updated == fet.urls, f"update updated {upd.updated} rows, expected {fet.urls}")
                # Independent expectation: seeds plus every outlink of the fetched pages.
                known = set(seed_set)
                for url in first_fetched_ok:
                    for link in web.outlinks(url):
                        try:
                            known.add(normalize_url(link))
                        except InvalidUrl:
                            pass
                cyc["expected_crawldb_urls"] = len(known)
                check(upd.new_urls == len(known) - len(seed_set),
                      f"update inserted {upd.new_urls} new URLs, expected {len(known) - len(seed_set)}")
            st, s, log = step(collect_stats, spark, cfg, root)
            cyc["stats"] = {"seconds": s, "total_urls": st["total_urls"], "by_status": dict(st["by_status"]),
                            "due_now": st["due_now"], "leased": st["leased"]}
            if c == 1:
                check(st["total_urls"] == cyc["expected_crawldb_urls"],
                      f"crawldb holds {st['total_urls']} URLs, expected {cyc['expected_crawldb_urls']}")
                # dedup marks the pages whose text (or nearly all of it) another page already has
                by_status = dict(st["by_status"])
                fetched, dups = by_status.get(FETCHED, 0), by_status.get(DUPLICATE, 0)
                check(fetched + dups == fet.urls and dups == ded.exact + ded.near,
                      f"crawldb has {fetched} '{FETCHED}' + {dups} '{DUPLICATE}' rows, expected {fet.urls} "
                      f"with {ded.exact + ded.near} duplicates")
                check(st["leased"] == 0, f"{st['leased']} URLs still leased after update, expected 0")
            cyc["cycle_seconds"] = sum(cyc[k]["seconds"] for k in ("generate", "fetch", "dedup", "update", "stats"))
            cycles.append(cyc)
        result["cycles"] = cycles

        # Baseline: the same fetchlist with plain aiohttp, in this process (sharing the GIL with the
        # test web's server thread) and in a fresh child process (like a Spark Python worker).
        timeouts = (float(cfg["fetch.total_timeout_s"]), float(cfg["fetch.connect_timeout_s"]),
                    float(cfg["fetch.read_timeout_s"]))
        ua = cfg["fetch.user_agent"]
        raw: dict[str, Any] = {"concurrency": concurrency, "repeats": args.raw_repeats}
        if first_fetchlist:
            runs: dict[str, list[dict[str, Any]]] = {"in_process": [], "child_process": []}
            ctx = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
                pool.submit(os.getpid).result()  # start the child before timing anything
                for _ in range(args.raw_repeats):  # interleaved, so drifting noise hits both alike
                    for mode in ("in_process", "child_process"):
                        n0 = len(web.requests())
                        if mode == "in_process":
                            out = raw_fetch(first_fetchlist, concurrency, ua, timeouts)
                        else:
                            out = pool.submit(raw_fetch, first_fetchlist, concurrency, ua, timeouts).result()
                        log = web.requests()[n0:]
                        out.update(web_requests=len(log), web_http_span_s=http_span(log))
                        runs[mode].append(out)
            dc = cycles[0]["fetch"]["pages_per_s"]
            for mode, outs in runs.items():
                for out in outs:
                    check(out["statuses"] == {"200": len(first_fetchlist)},
                          f"raw aiohttp ({mode}) statuses {out['statuses']}, expected all 200")
                # the run with the median rate stands for the mode; every run's rate is kept in runs_pages_per_s
                median = sorted(outs, key=lambda o: o["pages_per_s"])[len(outs) // 2]
                raw[mode] = dict(median, runs_pages_per_s=[o["pages_per_s"] for o in outs])
                raw[f"ratio_{mode}"] = dc / median["pages_per_s"]
        result["raw_aiohttp"] = raw
    finally:
        if spark is not None:
            spark.stop()
        web.stop()
        if args.keep:
            print(f"bench: kept {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return finish(result, failures, args.out_json, print_report)


def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    print()
    print(f"== deltacrawl cycle benchmark: {r['params']['hosts']} hosts x {r['params']['pages']} pages ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB RAM · python {m['python']} · "
          f"pyspark {m['pyspark']} · delta-spark {m['delta_spark']} · aiohttp {m['aiohttp']} · "
          f"{m['java']} · commit {m['git_commit']}")
    print(f"load average (1/5/15 min) at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')} "
          f"(above {m['nproc']}: other work competed for the cores)")
    rows: list[tuple[str, str, str, str]] = [("step", "seconds", "items", "rate")]
    if "spark_start_s" in r:
        rows.append(("spark start (build_spark)", fmt(r["spark_start_s"], 2), "", ""))
    if "inject" in r:
        i = r["inject"]
        rows.append(("inject", fmt(i["seconds"], 2), f"{fmt(i['rows'])} rows", f"{fmt(i['rows_per_s'])} rows/s"))
    for cyc in r.get("cycles", []):
        c = cyc["cycle"]
        g = cyc["generate"]
        rows.append((f"c{c} generate", fmt(g["seconds"], 2), f"{fmt(g['urls'])} URLs", f"{fmt(g['rows_per_s'])} URLs/s"))
        if "fetch" in cyc:
            f = cyc["fetch"]
            rows.append((f"c{c} fetch", fmt(f["seconds"], 2),
                         f"{fmt(f['attempted'])} attempted; web saw {fmt(f['web_requests'])} req "
                         f"({fmt(f['web_robots_requests'])} robots, {fmt(f['web_sitemap_requests'])} sitemap), "
                         f"span {fmt(f['web_http_span_s'], 2)}s",
                         f"{fmt(f['pages_per_s'])} pages/s"))
            d = cyc["dedup"]
            rows.append((f"c{c} dedup", fmt(d["seconds"], 2),
                         f"{fmt(d['pages'])} pages: {fmt(d['exact'])} exact + {fmt(d['near'])} near duplicates", ""))
            u = cyc["update"]
            rows.append((f"c{c} update", fmt(u["seconds"], 2),
                         f"{fmt(u['updated'])} updated + {fmt(u['new_urls'])} new", f"{fmt(u['rows_per_s'])} rows/s"))
            s = cyc["stats"]
            rows.append((f"c{c} stats (collect_stats)", fmt(s["seconds"], 2), f"{fmt(s['total_urls'])} URLs", ""))
            rows.append((f"c{c} cycle total", fmt(cyc["cycle_seconds"], 2), "", ""))
    raw = r.get("raw_aiohttp", {})
    for mode in ("in_process", "child_process"):
        if mode in raw:
            x = raw[mode]
            rows.append((f"raw aiohttp ({mode.replace('_', ' ')})", fmt(x["seconds"], 2),
                         f"{fmt(x['urls'])} URLs; web saw {fmt(x['web_requests'])} req; median of "
                         + "/".join(fmt(v, 0) for v in x["runs_pages_per_s"]),
                         f"{fmt(x['pages_per_s'])} pages/s"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[i]) if i in (0, 2) else cell.rjust(widths[i]) for i, cell in enumerate(row)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    if "ratio_in_process" in raw:
        print(f"ratio deltacrawl fetch pages/s / raw aiohttp pages/s: {raw['ratio_in_process']:.3f} (raw in process), "
              f"{raw['ratio_child_process']:.3f} (raw in a child process); concurrency cap {raw['concurrency']}")
    print(f"checks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


if __name__ == "__main__":
    sys.exit(main())
