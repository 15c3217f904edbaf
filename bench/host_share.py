#!/usr/bin/env python
"""Politeness efficiency with one dripping host in the mix: the fair time share of the fetcher
(fetch.host_time_factor, fetch.host_time_floor_s) on and off, side by side in one run.

Run:      .venv/bin/python bench/host_share.py [--hosts 20] [--pages 30] [--drip-urls 8] [--drip-s 6]
                                             [--factors 2,1,0] [--floor-s S] [--out-json FILE]

Web:      crawl.devweb.web.DevWeb(hostile=True, crawl_delay_s=0) in this process (its own thread; this
          process does nothing else meanwhile). The quick hosts are the first --hosts normal hosts,
          each seeded with /p/0.html .. /p/<pages-1>.html; the dripping host is the "drip" hostile
          host, seeded with --drip-urls URLs /slow.html?s=<drip-s>&n=k: 200 answers that complete
          after --drip-s seconds each, under every read timeout.
Fetch:    jobs.fetch.fetch_task (the body of one Spark fetch task: crawl.fetch.fetcher with the parser
          child pool as configured; no Spark, no WARC) in a fresh spawned child process per run,
          with the conf defaults
          (fetch.delay_s 1, fetch.delay_factor 5, fetch.max_delay_s 30, timeouts 10/20/60 s) but for
          fetch.host_time_factor. Runs, in this order: the quick hosts alone (the reference), then
          quick hosts + the drip host once per --factors value (0 = the rule off).
Figures:  span = first request start to last request end in the web's log (all hosts); bound = the
          politeness bound = max over quick hosts of (their requests - 1) x fetch.delay_s;
          efficiency = bound / span; the drip host's URLs fetched and left due, its stop_reason.
Checks:   every quick-host URL ok in every run; no two requests to a host closer than fetch.delay_s
          (from the web's log: next start - previous end); with the rule on, the drip host stopped
          as "slow" with its other URLs not_attempted and never requested; off, all its URLs ok.
Exit:     0 done · 1 a check failed (figures still printed/written).

Loopback only: the test web binds 127.0.x.y.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py, also in spawned children
from _common import devweb_networks, fetch_rows, finish, fmt, machine_facts  # noqa: E402


class _Row(dict):
    """A fetchlist row that looks like a pyspark Row to jobs.fetch.fetch_task (``asDict``)."""
    def asDict(self) -> dict[str, Any]:  # noqa: N802 (pyspark's spelling)
        return dict(self)


def child_fetch(rows: list[dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """jobs.fetch.fetch_task — one Spark fetch task's body (ParserPool as configured, no WARC) —
    in a fresh process; top-level so a spawned child finds it."""
    from jobs.fetch import FetchRun, fetch_task
    from jobs.engine.schemas import FETCHED_SCHEMA
    names = FETCHED_SCHEMA.fieldNames()
    started = time.perf_counter()
    out = [dict(zip(names, t)) for t in fetch_task(0, ((r["host"], _Row(r)) for r in rows), cfg, FetchRun("bench", None, None))]
    return {"seconds": time.perf_counter() - started, "out": out}



def one_run(web, rows: list[dict[str, Any]], cfg: dict[str, Any], delay: float, drip: str,
            quick: set[str]) -> dict[str, Any]:
    web.clear_log()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        got = pool.submit(child_fetch, rows, cfg).result()
    time.sleep(0.5)  # the last log entries get their done_ts
    log = web.requests()
    by_host: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in log:
        by_host[e["host"]].append(e)
    violations, smallest = 0, None
    for entries in by_host.values():
        entries.sort(key=lambda e: e["ts"])
        for a, b in zip(entries, entries[1:]):
            gap = b["ts"] - (a["done_ts"] or a["ts"])
            smallest = gap if smallest is None else min(smallest, gap)
            if gap < delay - 0.01:
                violations += 1
    span = max((e["done_ts"] or e["ts"]) for e in log) - min(e["ts"] for e in log)
    bound = max((len(by_host[h]) - 1) * delay for h in quick)
    urls = [r for r in got["out"] if r["kind"] == "url"]
    hosts = {r["host"]: r for r in got["out"] if r["kind"] == "host"}
    drip_urls = [r for r in urls if r["host"] == drip]
    drip_asked = {e["path"] for e in by_host.get(drip, []) if e["path"].startswith("/slow.html")}
    return {
        "fetch_s": round(got["seconds"], 1), "span_s": round(span, 1), "bound_s": round(bound, 1),
        "efficiency": round(bound / span, 3) if span > 0 else None,
        "quick_statuses": dict(collections.Counter(r["fetch_status"] for r in urls if r["host"] in quick)),
        "quick_problems": [(r["url"], r["fetch_status"], r["error"]) for r in urls
                           if r["host"] in quick and r["fetch_status"] != "ok"][:5],
        "drip_statuses": dict(collections.Counter(r["fetch_status"] for r in drip_urls)),
        "drip_requested": len(drip_asked),
        "drip_left_requested": sum(1 for r in drip_urls if r["fetch_status"] == "not_attempted"
                                   and r["url"].split("/", 3)[3] in {p.lstrip("/") for p in drip_asked}),
        "drip_stop_reason": hosts[drip]["stop_reason"] if drip in hosts else None,
        "drip_error": next((r["error"] for r in drip_urls if r["fetch_status"] == "not_attempted"), None),
        "gap_violations": violations, "smallest_gap_s": round(smallest, 3) if smallest is not None else None,
        "loadavg": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--pages", type=int, default=30)
    ap.add_argument("--drip-urls", type=int, default=8)
    ap.add_argument("--drip-s", type=int, default=6)
    ap.add_argument("--factors", default="2,1,0", help="fetch.host_time_factor values, 0 = rule off")
    ap.add_argument("--floor-s", type=float, help="fetch.host_time_floor_s (default: the conf default)")
    ap.add_argument("--out-json")
    args = ap.parse_args(argv)
    factors = [float(x) for x in args.factors.split(",")]

    from crawl.config import build_config
    from crawl.devweb.web import DevWeb
    facts = machine_facts()
    print("machine:", facts, flush=True)
    base_cfg = build_config()
    delay = float(base_cfg["fetch.delay_s"])
    web = DevWeb(hosts=args.hosts, pages_per_host=args.pages, port=0, seed=1, crawl_delay_s=0.0,
                 hostile=True).start()
    failures: list[str] = []
    runs: list[dict[str, Any]] = []
    try:
        quick_urls = [f"{base}p/{k}.html" for base in web.seed_urls() for k in range(args.pages)]
        quick = {u.split("/")[2] for u in quick_urls}
        drip = web.hostile_hosts["drip"]
        drip_urls = [f"{web.hostile_urls('drip')[0]}?s={args.drip_s}&n={k}" for k in range(args.drip_urls)]
        plan = [("quick hosts only", None)] + [(f"+ drip, factor {f:g}" + (" (rule off)" if f == 0 else ""), f)
                                                for f in factors]
        for label, factor in plan:
            urls = quick_urls + ([] if factor is None else drip_urls)
            # the guard refuses loopback: allow exactly this web (its hosts and hostile hosts)
            overrides: dict[str, Any] = {"fetch.allow_networks": devweb_networks(args.hosts, hostile=True)}
            if factor is not None:
                overrides["fetch.host_time_factor"] = factor
            if args.floor_s is not None:
                overrides["fetch.host_time_floor_s"] = args.floor_s
            cfg = dict(build_config(overrides=overrides))
            print(f"bench: {label}: {len(urls)} URLs ...", flush=True)
            run = {"label": label, "factor": factor, "floor_s": cfg["fetch.host_time_floor_s"],
                   **one_run(web, fetch_rows(urls), cfg, delay, drip, quick)}
            runs.append(run)
            print(f"  span {run['span_s']}s, bound {run['bound_s']}s, efficiency {run['efficiency']}, "
                  f"drip {run['drip_statuses']} stop_reason {run['drip_stop_reason']!r}", flush=True)
            if run["quick_statuses"] != {"ok": len(quick_urls)}:
                failures.append(f"{label}: quick hosts {run['quick_statuses']}, expected all ok "
                                f"(e.g. {run['quick_problems'][:2]})")
            if run["gap_violations"]:
                failures.append(f"{label}: {run['gap_violations']} gaps below fetch.delay_s")
            if factor is not None and factor > 0:
                if run["drip_stop_reason"] != "slow" or not run["drip_statuses"].get("not_attempted"):
                    failures.append(f"{label}: drip host not stopped as slow ({run['drip_statuses']})")
                if run["drip_left_requested"]:
                    failures.append(f"{label}: {run['drip_left_requested']} URLs left due were requested")
            elif factor == 0 and run["drip_statuses"] != {"ok": args.drip_urls}:
                failures.append(f"{label}: rule off, drip host {run['drip_statuses']}, expected all ok")
    finally:
        web.stop()
    result = {"machine": facts, "args": vars(args), "runs": runs}
    off = next((r for r in runs if r["factor"] == 0), None)
    for r in runs:
        r["span_vs_rule_off"] = round(r["span_s"] / off["span_s"], 3) if off else None

    def report(res: dict[str, Any]) -> None:
        print(f"\nPoliteness efficiency with one dripping host ({args.hosts} quick hosts x {args.pages} pages, "
              f"drip host {args.drip_urls} URLs x {args.drip_s} s), fetch.delay_s {delay:g}, "
              f"fetch.host_time_floor_s {runs[0]['floor_s'] if runs else '-'}")
        print(f"{'run':<28}{'span s':>9}{'bound s':>9}{'effic.':>8}{'span/off':>10}{'drip fetched':>14}"
              f"{'drip left':>11}  stop_reason")
        for r in res["runs"]:
            print(f"{r['label']:<28}{fmt(r['span_s']):>9}{fmt(r['bound_s']):>9}{fmt(r['efficiency'], 2):>8}"
                  f"{fmt(r['span_vs_rule_off'], 2):>10}{fmt(r['drip_statuses'].get('ok', 0)):>14}"
                  f"{fmt(r['drip_statuses'].get('not_attempted', 0)):>11}  {r['drip_stop_reason']}")
        for r in res["runs"]:
            if r["drip_error"]:
                print(f"  {r['label']}: {r['drip_error']}")
        print(f"  gap violations: {sum(r['gap_violations'] for r in res['runs'])}; smallest gap "
              f"{min((r['smallest_gap_s'] for r in res['runs'] if r['smallest_gap_s'] is not None), default=None)} s")

    return finish(result, failures, args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
