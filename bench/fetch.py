#!/usr/bin/env python
"""Fetch benchmarks: throughput, politeness efficiency and memory of the fetch step.

Run:      .venv/bin/python bench/fetch.py [--only throughput|politeness|memory] [--out-json FILE] [--keep]
          (--only is repeatable; without it all three run, one after the other, in one process)
          Scrapy comes from bench/requirements.txt (.venv/bin/pip install -r bench/requirements.txt).

throughput  DevWeb (200 hosts x 50 pages, `deltacrawl devweb` in a SUBPROCESS, so its server has a
            GIL of its own), fetch.delay_s = 0, fetch.delay_factor = 0, WARC on, parse.isolate on.
            One segment (inject + generate of all 10,000 page URLs), then --rounds rounds, each
            timing, interleaved, on the same URLs:
              (a) jobs.fetch.run — the Spark fetch step (fetch.tasks default: 2 tasks) — alone;
              (b) jobs.fetch.fetch_task — the body of one Spark task: WarcWriter + ParserPool +
                  crawl.fetch.fetcher.fetch_partition — on all fetchlist rows in one plain Python child
                  process (no Spark);
              (c) plain aiohttp + crawl.parse.links.extract_outlinks, same URLs, same concurrency cap
                  (fetch.max_concurrency), one request in flight per host, same child process;
              (d) Scrapy (bench/_scrapy_fetch.py, a subprocess): CONCURRENT_REQUESTS = cap,
                  CONCURRENT_REQUESTS_PER_DOMAIN = 1, DOWNLOAD_DELAY = 0, ROBOTSTXT_OBEY = True,
                  LinkExtractor on every page.
            Reports the median pages/s of each and the ratios a/c (target >= 0.7), a/d (target >= 5),
            and each method's CPU time per page from /proc: the whole machine's, the test web
            process's, and the rest (the client), with how busy the cores were. When both are
            CPU-bound on the same cores, a/c cannot exceed c's CPU per page / a's ("ceiling").
politeness  DevWeb (50 hosts, subprocess, request log), host i seeded with 20 + i*180//49 pages
            (20..200), fetch.delay_s = 0.2, default fetch.tasks; the Spark fetch step is run on the
            same segment once per --delay-factors value (default 5.0 = conf default, then 0).
            Lower bound = max over hosts of pages x 0.2 s; efficiency = lower bound / fetch wall
            time (target >= 0.85). From the server's log: gaps between the end of one request to a
            host and the start of the next; violations = gaps < 0.2 s (must be 0).
memory      DevWeb(hostile=True) in this process; a fresh child process (started through `sh`, so its
            ru_maxrss does not inherit this process's high-water mark) runs jobs.fetch.fetch_task
            (WarcWriter + ParserPool exactly as a Spark task sets them up) over every hostile URL
            (crawl.devweb.web.HOSTILE), default fetch.max_body_bytes (10 MiB), fetch.*timeout_s = 5.
            Reports the child's ru_maxrss (RUSAGE_SELF) and, apart, its children's (RUSAGE_CHILDREN:
            the parser workers, after their forkserver is stopped), plus a /proc sampler of every
            descendant's VmHWM; target <= 512 MB.
Checks:     every URL attempted, all "ok" (throughput, politeness), request counts seen by the test
            web, zero politeness violations, every hostile URL with an outcome.
Exit:       0 done · 1 a check failed (figures still printed/written) · 2 bad arguments.

Loopback only: the test web binds 127.0.x.y; every request loop is bounded by its URL list.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py, also in spawned children
from _common import (REPO, Checker, DevWebProcess, cpu_snapshot, cpu_used, devweb_networks, finish, fmt,  # noqa: E402
                     http_span, machine_facts, median_run, rate, raw_fetch, release)

BENCHMARKS = ("throughput", "politeness", "memory")
MB = 1024 * 1024


# =========================================================================== child-process work
# (top-level functions: a spawned child process looks them up by name)

class _Row(dict):
    """A fetchlist row that looks like a pyspark Row to jobs.fetch.fetch_task (``asDict``)."""
    def asDict(self) -> dict[str, Any]:  # noqa: N802 (pyspark's spelling)
        return dict(self)


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def child_fetch_task(rows: list[dict[str, Any]], cfg: dict[str, Any], warc_dir: str | None, index: int = 0,
                     profile_top: int = 0) -> dict[str, Any]:
    """Run jobs.fetch.fetch_task (WarcWriter + ParserPool + fetch_partition) on ``rows``, no Spark.
    ``warc_dir`` None: no WARC (as warc.enabled = false); ``profile_top`` > 0: cProfile the call
    (this process only, not the parser child) and return that many top functions by own time."""
    from jobs.fetch import FetchRun, fetch_task
    from jobs.engine.schemas import FETCHED_SCHEMA
    names = FETCHED_SCHEMA.fieldNames()
    pairs = ((r["host"], _Row(r)) for r in rows)
    profiler = None
    if profile_top:
        import cProfile
        profiler = cProfile.Profile()
    started = time.perf_counter()
    cpu0 = time.process_time()
    if profiler is not None:
        profiler.enable()
    out = list(fetch_task(index, pairs, cfg, FetchRun("bench", warc_dir, None)))
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    kind, status, outlinks = names.index("kind"), names.index("fetch_status"), names.index("outlinks")
    truncated = names.index("truncated")
    urls = [t for t in out if t[kind] == "url"]
    return {"urls": len(urls), "hosts": len(out) - len(urls), "seconds": seconds,
            "pages_per_s": rate(len(urls), seconds),
            "by_fetch_status": dict(collections.Counter(t[status] for t in urls)),
            "outlinks": sum(len(t[outlinks] or ()) for t in urls),
            "truncated": sum(1 for t in urls if t[truncated]), "cpu_s": cpu,
            "profile": _profile_top(profiler, profile_top) if profiler is not None else None}


def _profile_top(profiler, n: int) -> list[dict[str, Any]]:
    import pstats
    st = pstats.Stats(profiler)
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():
        rows.append({"function": f"{os.path.basename(file)}:{line}({func})", "calls": nc,
                     "own_s": round(tt, 3), "cumulative_s": round(ct, 3)})
    rows.sort(key=lambda r: -r["own_s"])
    return rows[:n]


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = []
        try:
            tids = os.listdir(f"/proc/{p}/task")  # children hang off the thread that forked them
        except OSError:
            tids = []
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children", encoding="ascii") as fh:
                    kids += [int(x) for x in fh.read().split()]
            except OSError:
                pass
        out.extend(kids)
        todo.extend(kids)
    return out


def _vm_hwm_mb(pid: int | str) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def child_memory(rows: list[dict[str, Any]], cfg: dict[str, Any], warc_dir: str) -> dict[str, Any]:
    """The memory benchmark's child: imports first, then fetch_task over the hostile rows."""
    import importlib
    for mod in ("jobs.fetch", "crawl.parse.page", "crawl.fetch.warc"):  # what a Spark Python worker has loaded
        importlib.import_module(mod)
    rss_before = _rss_mb()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peaks: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:  # every descendant's VmHWM (peak RSS), sampled until it is gone
        me = os.getpid()
        while not stop.wait(0.05):
            for pid in _descendants(me):
                hwm = _vm_hwm_mb(pid)
                if hwm is not None:
                    peaks[pid] = max(peaks.get(pid, 0.0), hwm)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = child_fetch_task(rows, cfg, warc_dir)
    finally:
        stop.set()
        sampler.join()
    self_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    self_vmhwm = _vm_hwm_mb("self")
    # The parser workers are children of multiprocessing's forkserver, which reaps them; stopping
    # the forkserver (and waiting for it) brings their rusage into our RUSAGE_CHILDREN.
    import multiprocessing.forkserver as fs
    try:
        fs._forkserver._stop()  # private, but the only way to wait for the forkserver
        stopped = True
    except Exception:  # pragma: no cover - depends on the Python version
        stopped = False
    children_maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result.update(rss_after_imports_mb=rss_before, maxrss_after_imports_mb=maxrss_before,
                  self_maxrss_mb=self_maxrss, self_vmhwm_mb=self_vmhwm, children_maxrss_mb=children_maxrss,
                  forkserver_stopped=stopped,
                  sampled_descendant_peaks_mb=sorted((round(v, 1) for v in peaks.values()), reverse=True))
    return result


def child_pid() -> int:
    return os.getpid()


# =========================================================================== shared helpers

def page_rows_from_fetchlist(spark, path: str) -> list[dict[str, Any]]:
    """The fetchlist rows exactly as jobs.fetch.fetch_segment hands them to a task (plain dicts)."""
    from crawl.fetch.fetcher import FETCHLIST_FIELDS
    from jobs.engine.schemas import FETCHLIST_TIMES, to_epoch
    df = to_epoch(spark.read.parquet(path), FETCHLIST_TIMES).select(*FETCHLIST_FIELDS)
    return [r.asDict() for r in df.collect()]


def fetched_outlinks(spark, path: str) -> int:
    from pyspark.sql import functions as F
    row = (spark.read.parquet(path).filter(F.col("kind") == "url")
           .agg(F.sum(F.size("outlinks")).alias("n")).collect()[0])
    return int(row["n"] or 0)


def write_seeds(path: str, urls: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(u + "\n" for u in urls)


def round_robin(urls: list[str]) -> list[str]:
    """The same URLs, hosts interleaved (host0 p0, host1 p0, ..., host0 p1, ...)."""
    by_host: dict[str, list[str]] = collections.OrderedDict()
    for u in urls:
        by_host.setdefault(u.split("/", 3)[2], []).append(u)
    out, queues = [], [collections.deque(v) for v in by_host.values()]
    while queues:
        queues = [q for q in queues if q]
        for q in queues:
            out.append(q.popleft())
    return out


def phases(log: list[dict[str, Any]], wall_start: float, wall_end: float) -> dict[str, Any]:
    """Where a timed call's wall time went: before the first request, HTTP span, after the last."""
    if not log:
        return {}
    first = min(e["ts"] for e in log)
    last = max(e["done_ts"] or e["ts"] for e in log)
    return {"before_first_request_s": first - wall_start, "http_span_s": last - first,
            "after_last_request_s": wall_end - last}


# =========================================================================== 1. throughput

def bench_throughput(args, spark_box: dict, workdir: str, check: Checker) -> dict[str, Any]:
    from crawl.config import build_config
    hosts, pages = args.tp_hosts, args.tp_pages
    res: dict[str, Any] = {"params": {"hosts": hosts, "pages_per_host": pages, "rounds": args.rounds}}
    wd = os.path.join(workdir, "throughput")
    os.makedirs(wd)
    web = DevWebProcess(hosts, pages, os.path.join(wd, "devweb.jsonl"), crawl_delay_s=0.0)
    res["devweb"] = {"how": "subprocess", "command": web.command, "port": web.port}
    pool = None
    try:
        urls = [f"{base}p/{k}.html" for base in web.seeds for k in range(pages)]
        seeds_path = os.path.join(wd, "seeds.txt")
        write_seeds(seeds_path, urls)
        cfg = build_config(overrides={"fetch.delay_s": 0.0, "fetch.delay_factor": 0.0,
                                      "generate.max_urls_per_host": pages, "generate.top_n": 10_000_000,
                                      "fetch.allow_networks": web.networks})  # the guard refuses loopback
        res["config"] = {k: cfg[k] for k in ("fetch.delay_s", "fetch.delay_factor", "fetch.max_concurrency",
                                             "fetch.tasks", "warc.enabled", "parse.isolate", "parse.workers",
                                             "spark.master")}
        concurrency = int(cfg["fetch.max_concurrency"])
        timeouts = (float(cfg["fetch.total_timeout_s"]), float(cfg["fetch.connect_timeout_s"]),
                    float(cfg["fetch.read_timeout_s"]))
        ua = cfg["fetch.user_agent"]
        print(f"throughput: devweb subprocess on port {web.port}, {len(urls)} page URLs", flush=True)

        spark = spark_box["get"](cfg)
        from jobs import fetch, generate, inject
        from jobs.engine.crawl_root import CrawlRoot
        root = CrawlRoot(os.path.join(wd, "crawl-root"))
        t = time.perf_counter()
        inj = inject.run(spark, cfg, root, seeds_path)
        res["inject_s"] = time.perf_counter() - t
        t = time.perf_counter()
        gen = generate.run(spark, cfg, root)
        res["generate_s"] = time.perf_counter() - t
        check(inj.inserted == len(urls) and gen.urls == len(urls),
              f"throughput: injected {inj.inserted}, generated {gen.urls} URLs, expected {len(urls)}")
        seg = gen.segment_id
        rows = page_rows_from_fetchlist(spark, root.fetchlist(seg))
        tasks = int(cfg["fetch.tasks"]) or spark.sparkContext.defaultParallelism
        res["spark_fetch_tasks"] = tasks
        plain_cfg = dict(cfg)
        scrapy_urls = os.path.join(wd, "scrapy-urls.txt")
        write_seeds(scrapy_urls, round_robin(urls))

        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        res["child_pid"] = pool.submit(child_pid).result()  # start it before timing anything
        methods = ["spark", "direct", "aiohttp", "scrapy"]
        variants = {  # --breakdown: fetch_task with parts switched off, same child process
            "direct_inprocess_parse": ({"parse.isolate": False}, True),
            "direct_no_warc": ({}, False),
            "direct_inprocess_parse_no_warc": ({"parse.isolate": False}, False),
        }
        if args.breakdown:
            methods += list(variants)
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
        for rnd in range(1, args.rounds + 1):
            for method in runs:
                off = web.log_size()
                wall_start = time.time()
                cpu_before = cpu_snapshot((web.proc.pid,))
                if method == "spark":
                    t = time.perf_counter()
                    fr = fetch.run(spark, cfg, root, seg)
                    seconds = time.perf_counter() - t
                    out = {"urls": fr.urls, "hosts": fr.hosts, "seconds": seconds,
                           "pages_per_s": rate(fr.urls, seconds), "by_fetch_status": fr.by_fetch_status,
                           "outlinks": fetched_outlinks(spark, root.fetched(seg))}
                elif method == "direct":
                    out = pool.submit(child_fetch_task, rows, plain_cfg,
                                      os.path.join(wd, f"warc-direct-{rnd}")).result()
                elif method in variants:
                    over, warc = variants[method]
                    out = pool.submit(child_fetch_task, rows, dict(plain_cfg, **over),
                                      os.path.join(wd, f"warc-{method}-{rnd}") if warc else None).result()
                elif method == "aiohttp":
                    out = pool.submit(raw_fetch, urls, concurrency, ua, timeouts,
                                      int(cfg["parse.max_outlinks"])).result()
                else:
                    out = run_scrapy(scrapy_urls, concurrency, ua, os.path.join(wd, f"scrapy-{rnd}.json"))
                wall_end = time.time()
                used = cpu_used(cpu_before, cpu_snapshot((web.proc.pid,)))
                out.update(_cpu_per_page(used, web.proc.pid, len(urls)))
                time.sleep(0.3)  # let the last log lines land
                log = web.read_log(off)
                out.update(phases(log, wall_start, wall_end))
                kinds = collections.Counter("robots" if e["path"] == "/robots.txt" else
                                            "sitemap" if "sitemap" in e["path"] else "page" for e in log)
                out.update(round=rnd, web_page_requests=kinds["page"], web_robots_requests=kinds["robots"],
                           web_sitemap_requests=kinds["sitemap"],
                           web_http_span_s=http_span(log), loadavg=round(os.getloadavg()[0], 2))
                runs[method].append(out)
                print(f"throughput: round {rnd} {method:8s} {out['seconds']:7.2f} s  "
                      f"{fmt(out['pages_per_s'])} pages/s  (web saw {kinds['page']} pages + "
                      f"{kinds['robots']} robots.txt + {kinds['sitemap']} sitemaps)", flush=True)
                check(kinds["page"] == len(urls), f"throughput r{rnd} {method}: web saw {kinds['page']} "
                                                  f"page requests, expected {len(urls)}")
                if method == "spark" or method.startswith("direct"):
                    check(out["by_fetch_status"] == {"ok": len(urls)},
                          f"throughput r{rnd} {method}: statuses {out['by_fetch_status']}, expected all ok")
                else:
                    check(out["statuses"] == {"200": len(urls)},
                          f"throughput r{rnd} {method}: statuses {out['statuses']}, expected all 200")
        res["runs"] = runs
        med = {m: median_run(v) for m, v in runs.items()}
        res["median"] = med
        a, b, c, d = (med[m]["pages_per_s"] for m in ("spark", "direct", "aiohttp", "scrapy"))
        res["ratios"] = {"spark_over_aiohttp": a / c, "direct_over_aiohttp": b / c, "spark_over_scrapy": a / d,
                         "direct_over_scrapy": b / d, "aiohttp_over_scrapy": c / d,
                         "spark_over_aiohttp_per_round": [x["pages_per_s"] / y["pages_per_s"]
                                                          for x, y in zip(runs["spark"], runs["aiohttp"])],
                         "spark_over_scrapy_per_round": [x["pages_per_s"] / y["pages_per_s"]
                                                         for x, y in zip(runs["spark"], runs["scrapy"])]}
        res["targets"] = {"spark_over_aiohttp": 0.7, "spark_over_scrapy": 5.0}
        cpu = {m: statistics.median(r["cpu_us_per_page"] for r in v) for m, v in runs.items()
               if all("cpu_us_per_page" in r for r in v)}
        if "spark" in cpu and "aiohttp" in cpu:
            # both CPU-bound on the same cores: the best a/c the machine allows is the CPU ratio
            res["cpu_bound_ceiling_spark_over_aiohttp"] = cpu["aiohttp"] / cpu["spark"]
        if args.profile_top:
            print("throughput: profiling one more (b) run in the child (cProfile)", flush=True)
            res["profile_direct"] = pool.submit(child_fetch_task, rows, plain_cfg, os.path.join(wd, "warc-profile"),
                                                0, args.profile_top).result()
    finally:
        if pool is not None:
            pool.shutdown()
        web.stop()
    return res


def _cpu_per_page(used: dict[str, Any], server_pid: int, pages: int) -> dict[str, Any]:
    """CPU microseconds per page of one method: the whole machine's, the test web's, and the rest
    (the client: fetcher, parser children, Spark's JVM and Python workers, or Scrapy), plus how
    busy the cores were. What a CPU-bound method can reach on this machine is about
    cores / CPU per page, so two methods' CPU per page bound their best possible ratio."""
    busy, server = used["busy_s"], used["pids"].get(server_pid)
    if busy is None or not pages:
        return {}
    out = {"cpu_us_per_page": busy / pages * 1e6, "cpu_busy_share": busy / used["capacity_s"] if used["capacity_s"] else None}
    if server is not None:
        out.update(server_cpu_us_per_page=server / pages * 1e6, client_cpu_us_per_page=(busy - server) / pages * 1e6)
    return out


def run_scrapy(urls_path: str, concurrency: int, ua: str, out_path: str) -> dict[str, Any]:
    cmd = [sys.executable, os.path.join(REPO, "bench", "_scrapy_fetch.py"), "--urls", urls_path,
           "--concurrency", str(concurrency), "--user-agent", ua, "--out-json", out_path]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=REPO)
    wall = time.perf_counter() - t
    if not os.path.exists(out_path):
        raise RuntimeError(f"scrapy subprocess failed ({proc.returncode}): {proc.stderr[-3000:]}")
    with open(out_path, encoding="utf-8") as fh:
        out = json.load(fh)
    out["subprocess_wall_s"] = wall
    out["returncode"] = proc.returncode
    return out


# =========================================================================== 2. politeness

def politeness_pages(i: int, n_hosts: int, lo: int, hi: int) -> int:
    return lo + (i * (hi - lo) // (n_hosts - 1) if n_hosts > 1 else 0)


def gap_report(log: list[dict[str, Any]], min_gap: float) -> dict[str, Any]:
    """Per host, in request order: next start (ts) - previous end (done_ts); also start-to-start."""
    by_host: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in log:
        by_host[e["host"]].append(e)
    gaps, starts, per_host_span, big = [], [], {}, []
    for host, entries in by_host.items():
        entries.sort(key=lambda e: e["ts"])
        for prev, nxt in zip(entries, entries[1:]):
            gap = nxt["ts"] - (prev["done_ts"] if prev["done_ts"] is not None else prev["ts"])
            gaps.append(gap)
            starts.append(nxt["ts"] - prev["ts"])
            big.append((gap, host, prev["path"], nxt["path"]))
        per_host_span[host] = entries[-1]["ts"] - entries[0]["ts"]
    gaps.sort()
    big.sort(reverse=True)
    t0 = min(e["ts"] for e in log) if log else 0.0
    longest = max(by_host, key=lambda h: len(by_host[h])) if by_host else None
    q = (lambda p: gaps[min(len(gaps) - 1, int(p * len(gaps)))]) if gaps else (lambda p: None)
    return {"hosts": len(by_host), "gaps": len(gaps), "violations": sum(1 for g in gaps if g < min_gap),
            "min_gap_s": gaps[0] if gaps else None, "min_start_to_start_s": min(starts) if starts else None,
            "median_gap_s": q(0.5), "p99_gap_s": q(0.99), "max_gap_s": gaps[-1] if gaps else None,
            "mean_gap_s": statistics.fmean(gaps) if gaps else None,
            "max_host_span_s": max(per_host_span.values()) if per_host_span else None,
            "gaps_over_0_5_s": sum(1 for g in gaps if g > 0.5),
            "largest_gaps": [{"gap_s": round(g, 3), "host": h, "after": a, "before": b} for g, h, a, b in big[:8]],
            "last_host_first_request_s": max(v[0]["ts"] for v in by_host.values()) - t0 if by_host else None,
            "longest_host": ({"host": longest, "requests": len(by_host[longest]),
                              "first_request_s": by_host[longest][0]["ts"] - t0,
                              "span_s": per_host_span[longest]} if longest else None)}


def bench_politeness(args, spark_box: dict, workdir: str, check: Checker) -> dict[str, Any]:
    from crawl.config import build_config
    n_hosts, lo, hi, delay = args.pol_hosts, args.pol_min_pages, args.pol_max_pages, args.pol_delay
    factors = [float(x) for x in args.delay_factors.split(",")]
    res: dict[str, Any] = {"params": {"hosts": n_hosts, "pages_per_host": f"{lo} + i*{hi - lo}//{max(1, n_hosts - 1)}",
                                      "delay_s": delay, "delay_factors": factors}}
    wd = os.path.join(workdir, "politeness")
    os.makedirs(wd)
    web = DevWebProcess(n_hosts, hi, os.path.join(wd, "devweb.jsonl"), crawl_delay_s=0.0)
    res["devweb"] = {"how": "subprocess", "command": web.command, "port": web.port}
    try:
        counts = {base: politeness_pages(i, n_hosts, lo, hi) for i, base in enumerate(web.seeds)}
        urls = [f"{base}p/{k}.html" for base, n in counts.items() for k in range(n)]
        seeds_path = os.path.join(wd, "seeds.txt")
        write_seeds(seeds_path, urls)
        base_over = {"fetch.delay_s": delay, "generate.max_urls_per_host": hi, "generate.top_n": 10_000_000,
                     "fetch.allow_networks": web.networks}  # the guard refuses loopback
        cfg = build_config(overrides=base_over)
        # robots.txt first, then `pages` requests, each after a gap of at least max(delay, Crawl-delay = 0)
        lower_bound = max(counts.values()) * delay
        res.update(urls=len(urls), lower_bound_s=lower_bound,
                   config={k: cfg[k] for k in ("fetch.delay_s", "fetch.tasks", "fetch.max_concurrency",
                                               "warc.enabled", "parse.isolate", "spark.master")})
        print(f"politeness: devweb subprocess on port {web.port}, {len(urls)} URLs on {n_hosts} hosts, "
              f"lower bound {lower_bound:.1f} s", flush=True)
        spark = spark_box["get"](cfg)
        from jobs import fetch, generate, inject
        from jobs.engine.crawl_root import CrawlRoot
        root = CrawlRoot(os.path.join(wd, "crawl-root"))
        inject.run(spark, cfg, root, seeds_path)
        gen = generate.run(spark, cfg, root)
        check(gen.urls == len(urls), f"politeness: generated {gen.urls} URLs, expected {len(urls)}")
        res["spark_fetch_tasks"] = int(cfg["fetch.tasks"]) or spark.sparkContext.defaultParallelism
        res["runs"] = []
        for factor in factors:
            fcfg = build_config(overrides=dict(base_over, **{"fetch.delay_factor": factor}))
            off = web.log_size()
            wall_start = time.time()
            t = time.perf_counter()
            fr = fetch.run(spark, fcfg, root, gen.segment_id)
            seconds = time.perf_counter() - t
            wall_end = time.time()
            time.sleep(0.3)
            log = web.read_log(off)
            gaps = gap_report(log, delay)
            gaps.update(phases(log, wall_start, wall_end))
            run = {"delay_factor": factor, "seconds": seconds, "efficiency": lower_bound / seconds,
                   "http_span_s": http_span(log), "http_span_efficiency": lower_bound / (http_span(log) or 1e9),
                   "spark_overhead_s": seconds - (http_span(log) or 0.0), "web_requests": len(log),
                   "by_fetch_status": fr.by_fetch_status, "loadavg": round(os.getloadavg()[0], 2), **gaps}
            res["runs"].append(run)
            print(f"politeness: delay_factor {factor}: fetch {seconds:.2f} s, efficiency {run['efficiency']:.3f}, "
                  f"HTTP span {run['http_span_s']:.2f} s, {gaps['violations']} gaps < {delay} s "
                  f"(smallest {gaps['min_gap_s']:.4f} s)", flush=True)
            check(fr.by_fetch_status == {"ok": len(urls)},
                  f"politeness f={factor}: statuses {fr.by_fetch_status}, expected all ok")
            check(len(log) == len(urls) + n_hosts,
                  f"politeness f={factor}: web saw {len(log)} requests, expected {len(urls) + n_hosts}")
            check(gaps["violations"] == 0, f"politeness f={factor}: {gaps['violations']} gaps below {delay} s")
        res["target"] = 0.85
    finally:
        web.stop()
    return res


# =========================================================================== 3. memory

def bench_memory(args, workdir: str, check: Checker) -> dict[str, Any]:
    from crawl.config import build_config
    from crawl.devweb.web import HOSTILE, DevWeb
    from crawl.net.urls import host_bucket, host_of, normalize_url, url_hash
    wd = os.path.join(workdir, "memory")
    os.makedirs(wd)
    t = args.mem_timeout_s
    cfg = build_config(overrides={"fetch.total_timeout_s": t, "fetch.read_timeout_s": t,
                                  "fetch.connect_timeout_s": t,
                                  # the guard refuses loopback: allow exactly DevWeb(hosts=1, hostile=True)
                                  "fetch.allow_networks": devweb_networks(1, hostile=True)})
    res: dict[str, Any] = {"config": {k: cfg[k] for k in (
        "fetch.max_body_bytes", "fetch.total_timeout_s", "fetch.read_timeout_s", "fetch.connect_timeout_s",
        "fetch.delay_s", "fetch.delay_factor", "fetch.max_concurrency", "parse.isolate", "parse.workers",
        "parse.memory_limit_mb", "warc.enabled")}, "devweb": {"how": "in the benchmark process (thread)"}}
    web = DevWeb(hosts=1, pages_per_host=5, port=0, hostile=True).start()
    try:
        rows = []
        for name in HOSTILE:
            for u in web.hostile_urls(name):
                u = normalize_url(u)
                host = host_of(u)
                rows.append({"url": u, "url_hash": url_hash(u), "host": host,
                             "host_bucket": host_bucket(host, int(cfg["crawldb.host_buckets"])), "depth": 0,
                             "score": 1.0, "segment_id": "bench-memory", "etag": None, "last_modified": None,
                             "robots_status": None, "robots_txt": None, "robots_fetched_at": None, "backoff_s": None})
        res["urls"] = len(rows)
        res["behaviours"] = list(HOSTILE)
        print(f"memory: {len(rows)} hostile URLs on {len(HOSTILE)} hosts, child process starts", flush=True)
        # Linux keeps ru_maxrss across execve, and a child forked (or vforked) from this big process
        # starts with this process's RSS as its high-water mark. So the measured child is started
        # through `sh`, which forks once more: the child's ru_maxrss then counts only itself.
        job_in, job_out = os.path.join(wd, "job.json"), os.path.join(wd, "result.json")
        with open(job_in, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "cfg": dict(cfg), "warc_dir": os.path.join(wd, "warc")}, fh)
        cmd = ["sh", "-c", '"$@"; exit $?', "sh", sys.executable, os.path.abspath(__file__),
               "--memory-child", job_in, job_out]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=REPO)
        res["child_wall_s"] = time.perf_counter() - started
        if proc.returncode != 0 or not os.path.exists(job_out):
            raise RuntimeError(f"memory child failed ({proc.returncode}): {proc.stderr[-3000:]}")
        with open(job_out, encoding="utf-8") as fh:
            out = json.load(fh)
        res.update(out)
        res["peak_rss_mb"] = out["self_maxrss_mb"]
        res["target_mb"] = 512
        print(f"memory: fetch {out['seconds']:.1f} s; peak RSS {out['self_maxrss_mb']:.1f} MB (VmHWM "
              f"{out['self_vmhwm_mb']:.1f} MB; after imports "
              f"{out['rss_after_imports_mb']:.1f} MB); parser children peak {out['children_maxrss_mb']:.1f} MB; "
              f"statuses {out['by_fetch_status']}", flush=True)
        check(out["self_vmhwm_mb"] is None or abs(out["self_maxrss_mb"] - out["self_vmhwm_mb"]) < 8,
              f"memory: ru_maxrss {out['self_maxrss_mb']:.1f} MB agrees with VmHWM {out['self_vmhwm_mb']} MB "
              "(else the high-water mark was inherited from the benchmark process)")
        check(out["urls"] == len(rows), f"memory: {out['urls']} URL outcomes, expected {len(rows)}")
        check(out["hosts"] == len(HOSTILE), f"memory: {out['hosts']} host rows, expected {len(HOSTILE)}")
    finally:
        web.stop()
    return res


# =========================================================================== report

def print_report(r: dict[str, Any]) -> None:
    m = r["machine"]
    print()
    print(f"== deltacrawl fetch benchmarks ({', '.join(r['benchmarks'])}) ==")
    print(f"date {m['date_utc']} · {m['nproc']} cores · {m['mem_total_gib']} GiB RAM · python {m['python']} · "
          f"pyspark {m['pyspark']} · aiohttp {m['aiohttp']} · scrapy {m.get('scrapy')} · commit {m['git_commit']}")
    print(f"load average (1 min) at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')}")
    if "throughput" in r:
        t = r["throughput"]
        print(f"\n-- throughput: {t['params']['hosts']} hosts x {t['params']['pages_per_host']} pages, "
              f"median of {t['params']['rounds']} interleaved rounds; devweb in a subprocess --")
        names = {"spark": "(a) Spark fetch step (jobs.fetch.run)", "direct": "(b) fetch_task/fetch_partition, no Spark",
                 "aiohttp": "(c) bare aiohttp + extract_outlinks", "scrapy": "(d) Scrapy + LinkExtractor"}
        for k, label in names.items():
            x = t["median"][k]
            print(f"  {label:42s} {x['seconds']:7.2f} s  {fmt(x['pages_per_s']):>8s} pages/s   runs "
                  + "/".join(fmt(v, 0) for v in x["runs_pages_per_s"]))
        for k, x in t["median"].items():
            if k not in names:
                print(f"  {'    ' + k:42s} {x['seconds']:7.2f} s  {fmt(x['pages_per_s']):>8s} pages/s   runs "
                      + "/".join(fmt(v, 0) for v in x["runs_pages_per_s"]))
        q = t["ratios"]
        print(f"  ratio a/c = {q['spark_over_aiohttp']:.3f} (target >= 0.7), b/c = {q['direct_over_aiohttp']:.3f}, "
              f"a/d = {q['spark_over_scrapy']:.2f} (target >= 5), c/d = {q['aiohttp_over_scrapy']:.2f}")
        print("  CPU per page, median over rounds (µs; machine = every process, web = the test web's process, "
              "client = the rest; busy = share of all cores' time):")
        for k, v in t["runs"].items():
            if all("client_cpu_us_per_page" in x for x in v):
                med = lambda key: statistics.median(x[key] for x in v)  # noqa: E731
                print(f"    {k:30s} machine {med('cpu_us_per_page'):7.0f}  web {med('server_cpu_us_per_page'):5.0f}  "
                      f"client {med('client_cpu_us_per_page'):6.0f}  busy {med('cpu_busy_share'):.2f}")
        if "cpu_bound_ceiling_spark_over_aiohttp" in t:
            print(f"  CPU-bound ceiling of a/c on these cores = c's CPU per page / a's = "
                  f"{t['cpu_bound_ceiling_spark_over_aiohttp']:.3f}")
        if t.get("profile_direct"):
            pr = t["profile_direct"]
            print(f"  cProfile of one (b) run ({pr['seconds']:.2f} s wall, {pr['cpu_s']:.2f} s CPU in the fetch process), "
                  "top functions by own time:")
            for x in pr["profile"]:
                print(f"    {x['own_s']:7.3f} s own {x['cumulative_s']:7.3f} s cum {x['calls']:>8} calls  {x['function']}")
    if "politeness" in r:
        p = r["politeness"]
        print(f"\n-- politeness: {p['params']['hosts']} hosts, {p['urls']} URLs, delay {p['params']['delay_s']} s, "
              f"{p['spark_fetch_tasks']} tasks; lower bound {p['lower_bound_s']:.1f} s --")
        for x in p["runs"]:
            print(f"  delay_factor {x['delay_factor']}: fetch {x['seconds']:.2f} s → efficiency {x['efficiency']:.3f} "
                  f"(target 0.85); HTTP span {x['http_span_s']:.2f} s ({x['http_span_efficiency']:.3f}); "
                  f"gaps {x['gaps']}: {x['violations']} < {p['params']['delay_s']} s, min {x['min_gap_s']:.4f} s, "
                  f"median {x['median_gap_s']:.4f} s, p99 {x['p99_gap_s']:.4f} s")
    if "memory" in r:
        x = r["memory"]
        print(f"\n-- memory: {x['urls']} hostile URLs, max_body_bytes {x['config']['fetch.max_body_bytes']} --")
        print(f"  fetch process peak RSS {x['self_maxrss_mb']:.1f} MB (target <= 512; VmHWM {x['self_vmhwm_mb']:.1f} MB; "
              f"{x['rss_after_imports_mb']:.1f} MB "
              f"after imports); parser children peak {x['children_maxrss_mb']:.1f} MB; sampled descendant "
              f"peaks {x['sampled_descendant_peaks_mb'][:4]}; fetch {x['seconds']:.1f} s")
        print(f"  outcomes {x['by_fetch_status']}")
    print(f"\nchecks: {'all passed' if not r['checks_failed'] else str(len(r['checks_failed'])) + ' FAILED'}")


# =========================================================================== main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="deltacrawl fetch benchmarks: throughput, politeness, memory.")
    p.add_argument("--only", action="append", choices=BENCHMARKS, help="run only this benchmark (repeatable)")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--rounds", type=int, default=3, help="throughput: interleaved rounds, median counts (default 3)")
    p.add_argument("--breakdown", action="store_true",
                   help="throughput: also time (b) with in-process parsing, without WARC, and without both")
    p.add_argument("--profile-top", type=int, default=0, metavar="N",
                   help="throughput: cProfile one extra (b) run and print its N top functions by own time")
    p.add_argument("--tp-hosts", type=int, default=200)
    p.add_argument("--tp-pages", type=int, default=50)
    p.add_argument("--pol-hosts", type=int, default=50)
    p.add_argument("--pol-min-pages", type=int, default=20)
    p.add_argument("--pol-max-pages", type=int, default=200)
    p.add_argument("--pol-delay", type=float, default=0.2, help="politeness: fetch.delay_s (default 0.2)")
    p.add_argument("--delay-factors", default="5.0,0",
                   help="politeness: fetch.delay_factor values, one fetch run each (default 5.0,0)")
    p.add_argument("--mem-timeout-s", type=float, default=5.0, help="memory: fetch.*timeout_s (default 5)")
    args = p.parse_args(argv)
    if min(args.rounds, args.tp_hosts, args.tp_pages, args.pol_hosts, args.pol_min_pages) < 1 \
            or args.pol_max_pages < args.pol_min_pages:
        p.error("counts must be >= 1 and --pol-max-pages >= --pol-min-pages")
    return args


def memory_child_main(job_in: str, job_out: str) -> int:
    """``--memory-child IN OUT``: the memory benchmark's measured process (started by bench_memory)."""
    with open(job_in, encoding="utf-8") as fh:
        job = json.load(fh)
    out = child_memory(job["rows"], job["cfg"], job["warc_dir"])
    with open(job_out, "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--memory-child"] and len(argv) == 3:
        return memory_child_main(argv[1], argv[2])
    args = parse_args(argv)
    which = [b for b in BENCHMARKS if not args.only or b in args.only]
    facts = machine_facts(extra_dists=("scrapy", "selectolax"))
    check = Checker()
    result: dict[str, Any] = {"benchmarks": which, "machine": facts,
                              "command": "python bench/fetch.py " + " ".join(argv)}
    workdir = tempfile.mkdtemp(prefix="deltacrawl-bench-fetch-", dir="/tmp")
    spark_box: dict[str, Any] = {"spark": None}

    def get_spark(cfg):
        if spark_box["spark"] is None:
            from jobs.engine.session import build_spark
            t = time.perf_counter()
            spark_box["spark"] = build_spark(cfg)
            result["spark_start_s"] = time.perf_counter() - t
        return spark_box["spark"]

    spark_box["get"] = get_spark
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "throughput": lambda: bench_throughput(args, spark_box, workdir, check),
        "politeness": lambda: bench_politeness(args, spark_box, workdir, check),
        "memory": lambda: bench_memory(args, workdir, check),
    }
    try:
        for name in which:
            started = time.perf_counter()
            result[name] = runners[name]()
            result[name]["benchmark_wall_s"] = time.perf_counter() - started
    finally:
        release(spark_box["spark"], workdir, args.keep)
    return finish(result, check.failures, args.out_json, print_report)


if __name__ == "__main__":
    sys.exit(main())
