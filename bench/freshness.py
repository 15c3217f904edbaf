#!/usr/bin/env python
"""Live freshness benchmark (issue 32): deltacrawl recrawling a changing web on loopback, scored
from the web's request log, against uniform refresh, Nutch's adaptive rule and the Cho &
Garcia-Molina optimum given the same fetches at the same instants.

Run:      .venv/bin/python bench/freshness.py [--seed 1] [--pages 320] [--hosts 8] [--budget 0.25]
          [--cycles 18] [--warmup-cycles N] [--fetch-value-s MU] [--conf key=value ...]
          [--cycle-s 15] [--out-json FILE] [--keep]   (8–10 min; ``--score-only DIR`` re-scores a kept run)
The web:  bench/_changing_web.py, in this process (its own thread), on 127.0.0.2 … (one address per
          host, loopback only): a home page per host, important pages (10 %), normal pages and
          deep pages (20 %, in chains of 4 links hanging off normal pages, reachable only through
          the chain). Each page's mean time between changes is log-uniform in 10 s … 2 h, except a
          fifth that never change; the change times are Poisson, precomputed from --seed, so the
          live version at any instant is known. Strong ETag and Last-Modified per version; 304 on
          a matching If-None-Match (or, without one, If-Modified-Since).
The crawl: what ``deltacrawl crawl`` runs (inject, then generate → fetch → dedup → update per cycle,
          one SparkSession, jobs/*.run), in a child process, with two differences: cycles keep a
          cadence (--cycle-s, 15 s: a cycle starts 15 s after the previous one started, or at once
          if that one overran), and a cycle whose generate finds nothing due fetches nothing and
          the crawl goes on (``deltacrawl crawl`` stops there: with a compressed clock nothing is
          due for a while after the discovery waves, and those are exactly the cycles whose
          budget went unused). Seeds: every home page. The schedule's clock is compressed only
          through config: schedule.min_interval_s 5, max_interval_s 7200, prior_min_change_s 5,
          prior_max_change_s 86400, the fetch value fitted to the budget by update (the default;
          --fetch-value-s sets one by hand instead), retry 30 s, gone 60 s;
          generate.top_n = round(--budget × pages) (a quarter of the pages per cycle by default),
          max_urls_per_host = top_n; fetch.delay_s 0.25; fetch.allow_networks = exactly the web's
          addresses (the address guard refuses loopback).
          --conf adds or overrides options.
Scoring:  from the request log only. A page's stored copy is the version last served to it with
          200 or confirmed by 304 (at the request's start); it is fresh while that version is
          the live one. A request belongs to the cycle whose fetch step was running (the driver's record of step
          times says which; nothing else is taken from the crawler). Steady state = from the fetch step of cycle --warmup-cycles + 1
          (default: the cycle after the last one that fetched a page for the first time, so every
          page the crawl reaches is known; at most two thirds of the cycles are warm-up) to the last page request; every page of the web
          counts (one not fetched yet is stale). Importance weights by kind: home 4, important 2,
          normal 1, deep 0.5 (--weights). Change classes by mean time between changes: fast
          < 60 s, medium 60–600 s, slow ≥ 600 s, never.
Baselines: the same fetches at the same instants. Each cycle, every policy makes exactly the
          crawler's discovery fetches (first fetch of a page: same page, same instant), and
          allocates the crawler's refetches of that cycle (their count, their instants) among
          the pages discovered in earlier cycles:
          uniform   round-robin: the pages fetched longest ago;
          nutch     Nutch's AdaptiveFetchSchedule: interval × 0.8 after a fetch that saw a change,
                    × 1.4 after one that did not, clamped to [min_interval_s, max_interval_s] of
                    the crawl's config, first interval = the uniform period (pages ÷ refetches
                    per second); the most overdue (relative to their interval) first, so the
                    budget is always used (Nutch itself would leave it unused when few are due);
          optimum   Cho & Garcia-Molina, "Effective page refresh policies for web crawlers" (ACM
                    TODS 28(4), 2003): frequencies fᵢ maximising Σ wᵢ F(λᵢ, fᵢ), F = (f/λ)(1 −
                    e^(−λ/f)), under Σ fᵢ = the crawler's refetches per second in steady state,
                    with the TRUE rates (bench/schedule.py's Lagrangian solver); run as a fixed
                    period per page (each page earns fᵢ fetch credits per second; each cycle the
                    highest credits are fetched). Solved twice: plain (wᵢ = 1, the reference for
                    plain freshness) and weighted (the reference for weighted freshness).
          Every policy is scored by the same function as the crawler. One more row is a reference,
          not a baseline: the weighted optimum given every cycle's whole budget (top_n fetches
          minus the cycle's first fetches, spread evenly over its fetch step): what the budget
          the crawler left unused would have bought.
Reported: plain and weighted freshness in steady state (and per cycle) for each policy and ours ÷
          optimum; freshness and fetches per page by change class and by kind; versions captured
          ÷ versions live in the window; the crawler's conditional share of refetches, 200 vs 304;
          WARC revisit records against the 304s (warcio over <crawl root>/warc); politeness
          (smallest gap per host, request end to next start, against fetch.delay_s); budget used
          per cycle (page fetches ÷ top_n); the analytic F of the optimum's frequencies.
Checks:   --cycles cycles ran; every page request inside a fetch step; 0 politeness violations; every refetch of a page
          that has validators is conditional; a revisit record for every 304 (when WARC is on).
          The schedule's own targets (issue 32) are reported, not checked.
Exit:     0 done · 1 a check failed (figures still printed and written) · 2 bad arguments / crawl failed.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import REPO, finish, machine_facts  # noqa: E402
from _changing_web import KINDS, ChangingWeb  # noqa: E402
from schedule import optimum_frequencies, freshness as analytic_freshness  # noqa: E402  (bench/schedule.py)

CLASSES = ("fast", "medium", "slow", "never")
POLICIES = ("ours", "uniform", "nutch", "optimum_plain", "optimum_weighted", "optimum_full_budget")
LABELS = {"ours": "**ours** (deltacrawl)", "uniform": "uniform round-robin", "nutch": "Nutch adaptive (×0.8 / ×1.4)",
          "optimum_plain": "optimum, plain (C&GM, wᵢ = 1)", "optimum_weighted": "optimum, weighted (C&GM, wᵢ)",
          "optimum_full_budget": "reference: optimum, weighted, every cycle's top_n used"}
DEFAULT_WEIGHTS = "home=4,important=2,normal=1,deep=0.5"


def change_class(mean_change_s: float) -> str:
    if not math.isfinite(mean_change_s):
        return "never"
    return "fast" if mean_change_s < 60 else "medium" if mean_change_s < 600 else "slow"


# --------------------------------------------------------------------------- the crawl

def crawl_conf(args: argparse.Namespace, web: ChangingWeb) -> dict[str, str]:
    top_n = top_n_of(args)
    conf = {
        "schedule.min_interval_s": args.min_interval_s, "schedule.max_interval_s": args.max_interval_s,
        "schedule.prior_min_change_s": args.prior_min_change_s, "schedule.prior_max_change_s": args.prior_max_change_s,
        "schedule.retry_interval_s": 30, "schedule.gone_interval_s": 60,
        "generate.top_n": top_n, "generate.max_urls_per_host": top_n, "fetch.delay_s": args.delay_s,
        "fetch.allow_networks": json.dumps(web.networks()),
    }
    if args.fetch_value_s is not None:  # a hand-set fetch value instead of update's fit to the budget
        conf.update({"schedule.fit_fetch_value": "false", "schedule.fetch_value_s": args.fetch_value_s})
    # as --conf strings; a whole float as an int (some [schedule] defaults are ints)
    conf = {k: str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for k, v in conf.items()}
    for kv in args.conf:
        k, _, v = kv.partition("=")
        conf[k] = v
    return conf


def top_n_of(args: argparse.Namespace) -> int:
    return max(1, int(round(args.budget * args.pages)))


def run_crawl(args: argparse.Namespace, web: ChangingWeb, workdir: str) -> dict[str, Any]:
    """The crawl, in a child process (its own JVM and interpreter, so the web's thread here does
    not share a GIL with the fetcher): ``drive_crawl`` below."""
    seeds = os.path.join(workdir, "seeds.txt")
    with open(seeds, "w", encoding="utf-8") as fh:
        fh.write("\n".join(web.seeds()) + "\n")
    conf = crawl_conf(args, web)
    spec = {"seeds": seeds, "crawl_root": os.path.join(workdir, "root"), "cycles": args.cycles,
            "cycle_s": args.cycle_s, "conf": conf, "record": os.path.join(workdir, "cycles.jsonl")}
    spec_path = os.path.join(workdir, "drive.json")
    with open(spec_path, "w", encoding="utf-8") as fh:
        json.dump(spec, fh)
    cmd = [sys.executable, os.path.abspath(__file__), "--drive", spec_path]
    started = time.time()
    lines: list[str] = []
    with open(os.path.join(workdir, "crawl.out"), "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            out.flush()
            lines.append(line.rstrip("\n"))
            if line.startswith("drive:"):
                print("  " + line.strip()[:200], flush=True)
        rc = proc.wait()
    return {"conf": conf, "cycle_s": args.cycle_s, "returncode": rc, "seconds": round(time.time() - started, 1),
            "tail": lines[-15:]}


def drive_crawl(spec_path: str) -> int:
    """What ``deltacrawl crawl`` does (inject, then generate → fetch → dedup → update per cycle, one
    SparkSession), but on a cadence and without stopping when nothing is due: cycle k starts
    cycle_s after cycle k − 1 started, or at once when that one overran; a cycle whose generate
    finds nothing due fetches nothing (a cycle whose budget went unused). Each cycle's step
    times go to the record file (JSON lines), which tells the scorer which requests belong to
    which cycle."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    from crawl.config import build_config
    from jobs import dedup, fetch, generate, inject, update
    from jobs.engine.commit_info import set_crawl_cycle
    from jobs.engine.session import build_spark
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.tables import snapshots_built_meanwhile
    from jobs.engine.tracking import new_crawl_id

    cfg = build_config(overrides=spec["conf"])
    spark = build_spark(cfg)
    root = CrawlRoot(spec["crawl_root"])
    crawl_id = new_crawl_id()
    record = open(spec["record"], "a", encoding="utf-8")
    t = time.time()
    set_crawl_cycle(spark, crawl_id, 0)
    inj = inject.run(spark, cfg, root, spec["seeds"])
    print(f"drive: inject {inj.inserted} seeds in {time.time() - t:.1f} s", flush=True)
    next_start = time.time()
    for cycle in range(1, spec["cycles"] + 1):
        time.sleep(max(0.0, next_start - time.time()))
        row: dict[str, Any] = {"cycle": cycle, "start": time.time()}
        next_start = row["start"] + spec["cycle_s"]
        set_crawl_cycle(spark, crawl_id, cycle)
        gen = generate.run(spark, cfg, root)
        row["generated"] = time.time()
        row["segment"] = gen.segment_id
        row["urls"] = getattr(gen, "urls", None) if gen.segment_id else 0
        if gen.segment_id is not None:
            row["fetch_start"] = time.time()
            # as jobs/crawl_cycles.py: the driver builds the snapshots dedup and update read while
            # fetch waits on hosts
            with snapshots_built_meanwhile(spark, (root.dedup_pages, root.dedup_bands, root.crawldb, root.hostdb,
                                                   root.warc_index)):
                fetch.run(spark, cfg, root, gen.segment_id)
                row["fetch_end"] = time.time()
            dedup.run(spark, cfg, root, gen.segment_id)
            update.run(spark, cfg, root, gen.segment_id)
        row["end"] = time.time()
        record.write(json.dumps(row) + "\n")
        record.flush()
        steps = (f"generate {row['generated'] - row['start']:.1f} s" + (
            f", fetch {row['fetch_end'] - row['fetch_start']:.1f} s, dedup + update {row['end'] - row['fetch_end']:.1f} s"
            if gen.segment_id else ", nothing due"))
        print(f"drive: cycle {cycle}/{spec['cycles']} done, {row['urls']} URLs ({steps})", flush=True)
    set_crawl_cycle(spark, None, None)
    record.close()
    spark.stop()
    return 0


# --------------------------------------------------------------------------- what the log says

def crawler_cycles(entries: list[dict[str, Any]], record: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Per cycle of the driver's record: its start (the fetch step's start; the generate's end for
    a cycle with nothing due), discoveries (a page's first request answered 200: (page, ts)) and
    refetches ((page, ts) of later 200/304 answers). A request belongs to the last cycle whose
    fetch step started before it. Also the number of page requests outside every fetch step."""
    cycles = [{"cycle": r["cycle"], "start": r.get("fetch_start", r["generated"]), "fetch_end": r.get("fetch_end"),
               "discoveries": [], "refetches": []} for r in record]
    starts = [c["start"] for c in cycles]
    seen: set[int] = set()
    outside = 0
    for e in sorted(entries, key=lambda e: e["ts"]):
        if e["page"] is None or e["status"] not in (200, 304):
            continue
        k = max(0, bisect.bisect_right(starts, e["ts"]) - 1)
        cyc = cycles[k]
        if cyc["fetch_end"] is None or not cyc["start"] <= e["ts"] <= cyc["fetch_end"] + 1.0:
            outside += 1
        if e["page"] in seen:
            cyc["refetches"].append((e["page"], e["ts"]))
        else:
            seen.add(e["page"])
            cyc["discoveries"].append((e["page"], e["ts"]))
    return cycles, outside


def warmup_of(cycles: list[dict[str, Any]]) -> int:
    """The default warm-up: the cycles up to the one that made the crawl's last first fetch (from
    the next cycle on every page the crawl ever reaches is known), but at most two thirds of
    them, so the steady state spans at least a third."""
    last_discovery = max((k for k, c in enumerate(cycles) if c["discoveries"]), default=0)
    return min(last_discovery + 1, (2 * len(cycles)) // 3)


# --------------------------------------------------------------------------- the baselines

class Policy:
    """A refresh policy replayed on the crawler's cycles: the crawler's discoveries as they were,
    its refetch count and instants allocated by ``choose``."""

    def __init__(self, web: ChangingWeb):
        self.web = web
        self.n = len(web.pages)
        self.known = np.zeros(self.n, dtype=bool)
        self.last = np.full(self.n, -math.inf)
        self.stored = np.full(self.n, -1)

    def live(self, page: int, t: float) -> int:
        return self.web.pages[page].version_at(t - self.web.t0)

    def fetch(self, page: int, t: float) -> tuple[int, bool]:
        v = self.live(page, t)
        changed = self.stored[page] >= 0 and v != self.stored[page]
        self.stored[page] = v
        self.last[page] = t
        return v, changed

    def choose(self, now: float, count: int) -> list[int]:
        raise NotImplementedError

    def fetched(self, page: int, t: float, changed: bool, first: bool) -> None:
        pass

    def run(self, cycles: list[dict[str, Any]]) -> list[tuple[int, float, int]]:
        events: list[tuple[int, float, int]] = []
        for cyc in cycles:
            instants = sorted(t for _, t in cyc["refetches"])
            chosen = self.choose(cyc["start"], len(instants)) if instants else []
            todo = [(t, p, False) for p, t in zip(chosen, instants)] + [(t, p, True) for p, t in cyc["discoveries"]]
            for t, p, first in sorted(todo):
                v, changed = self.fetch(p, t)
                self.fetched(p, t, changed, first)
                events.append((p, t, v))
            for p, _ in cyc["discoveries"]:
                self.known[p] = True
        return events


class Uniform(Policy):
    def choose(self, now: float, count: int) -> list[int]:
        idx = np.flatnonzero(self.known)
        order = np.lexsort((idx, self.last[idx]))
        return [int(i) for i in idx[order][:count]]


class Nutch(Policy):
    """Nutch's AdaptiveFetchSchedule (INC_RATE 0.4, DEC_RATE 0.2; no sync delta)."""

    def __init__(self, web: ChangingWeb, first_interval: float, min_interval: float, max_interval: float):
        super().__init__(web)
        self.first, self.lo, self.hi = first_interval, min_interval, max_interval
        self.interval = np.full(self.n, first_interval)
        self.next_at = np.full(self.n, math.inf)

    def choose(self, now: float, count: int) -> list[int]:
        idx = np.flatnonzero(self.known)
        overdue = (now - self.next_at[idx]) / self.interval[idx]
        order = np.lexsort((idx, -overdue))
        return [int(i) for i in idx[order][:count]]

    def fetched(self, page: int, t: float, changed: bool, first: bool) -> None:
        if not first:
            self.interval[page] = min(max(self.interval[page] * (0.8 if changed else 1.4), self.lo), self.hi)
        self.next_at[page] = t + self.interval[page]


class FixedRate(Policy):
    """A fixed refresh frequency per page, as fetch credits: each known page earns fᵢ credits per
    second; each cycle the pages with the most credit are fetched, each paying one credit."""

    def __init__(self, web: ChangingWeb, freq: np.ndarray):
        super().__init__(web)
        self.freq = freq
        self.credit = np.zeros(self.n)
        self.clock: float | None = None

    def choose(self, now: float, count: int) -> list[int]:
        if self.clock is not None:
            self.credit += np.where(self.known, self.freq, 0.0) * (now - self.clock)
        self.clock = now
        idx = np.flatnonzero(self.known)
        # pages the optimum refreshes first, by credit; a page with fᵢ = 0 only to fill the count
        order = np.lexsort((idx, -self.credit[idx], self.freq[idx] <= 0))
        chosen = [int(i) for i in idx[order][:count]]
        self.credit[chosen] -= 1.0
        return chosen


def optimum(rate: np.ndarray, weight: np.ndarray, budget_per_s: float) -> np.ndarray:
    """C&GM frequencies (bench/schedule.py's solver) for the changing pages; 0 for the others."""
    f = np.zeros(rate.size)
    changing = rate > 0
    if budget_per_s > 0 and changing.any():
        f[changing], _ = optimum_frequencies(rate[changing], weight[changing], budget_per_s)
    return f


# --------------------------------------------------------------------------- scoring (every policy alike)

def score(web: ChangingWeb, events: list[tuple[int, float, int]], t_lo: float, t_hi: float,
          weight: np.ndarray, cycle_starts: list[float]) -> dict[str, Any]:
    """Freshness of the stored copies given fetch events (page, instant, version served or
    confirmed), over [t_lo, t_hi]; also per cycle interval, per class and kind, versions captured
    and fetches per page in the window."""
    n = len(web.pages)
    by_page: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
    for p, t, v in events:
        by_page[p].append((t, v))
    edges = list(cycle_starts) + [t_hi]
    fresh = np.zeros(n)
    fresh_cycle = np.zeros((len(cycle_starts), n))
    captured = np.zeros(n)
    live_versions = np.zeros(n)
    fetches = np.zeros(n)
    for i, page in enumerate(web.pages):
        rel_lo, rel_hi = t_lo - web.t0, t_hi - web.t0
        v_lo, v_hi = page.version_at(rel_lo), page.version_at(rel_hi)
        live_versions[i] = v_hi - v_lo + 1
        evs = sorted(by_page.get(i, []))
        got: set[int] = set()
        for k, (t, v) in enumerate(evs):
            end = evs[k + 1][0] if k + 1 < len(evs) else t_hi
            change = web.t0 + (page.change_times[v] if v < page.change_times.size else math.inf)
            fresh_end = min(end, change)
            fresh[i] += max(0.0, min(fresh_end, t_hi) - max(t, t_lo))
            for c in range(len(cycle_starts)):
                fresh_cycle[c, i] += max(0.0, min(fresh_end, edges[c + 1]) - max(t, edges[c]))
            if t_lo <= t <= t_hi:
                fetches[i] += 1
                got.add(v)
            elif t < t_lo and fresh_end > t_lo:
                got.add(v)  # the copy held when the window opens is the live version
        captured[i] = len({v for v in got if v_lo <= v <= v_hi})
    span = t_hi - t_lo
    f = fresh / span
    widths = np.diff(edges)
    per_cycle = fresh_cycle / np.maximum(widths, 1e-9)[:, None]
    kinds = np.array([p.kind for p in web.pages])
    classes = np.array([change_class(p.mean_change_s) for p in web.pages])

    def group(mask: np.ndarray) -> dict[str, Any]:
        return {"pages": int(mask.sum()), "freshness": float(f[mask].mean()) if mask.any() else None,
                "fetches_per_page": float(fetches[mask].mean()) if mask.any() else None}

    return {
        "freshness": float(f.mean()),
        "weighted_freshness": float(np.sum(f * weight) / np.sum(weight)),
        "per_cycle_freshness": [round(float(x), 4) for x in per_cycle.mean(axis=1)],
        "per_cycle_weighted_freshness": [round(float(x), 4) for x in (per_cycle @ weight) / weight.sum()],
        "versions_live": int(live_versions.sum()), "versions_captured": int(captured.sum()),
        "captured_share": float(captured.sum() / live_versions.sum()),
        "fetches_in_window": int(fetches.sum()),
        "by_class": {c: group(classes == c) for c in CLASSES},
        "by_kind": {k: group(kinds == k) for k in KINDS},
    }


# --------------------------------------------------------------------------- the crawler's mechanics

def politeness(entries: list[dict[str, Any]], delay_s: float) -> dict[str, Any]:
    """Per host, in order of start: gap = next request's start − previous request's end."""
    by_host: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in entries:
        by_host[e["host"]].append(e)
    gaps = []
    for reqs in by_host.values():
        reqs.sort(key=lambda e: e["ts"])
        gaps += [b["ts"] - a["done_ts"] for a, b in zip(reqs, reqs[1:])]
    gaps_a = np.array(gaps) if gaps else np.array([math.inf])
    return {"delay_s": delay_s, "hosts": len(by_host), "min_gap_s": round(float(gaps_a.min()), 4),
            "median_gap_s": round(float(np.median(gaps_a)), 4),
            "violations": int(np.sum(gaps_a < delay_s - 1e-3))}


def mechanics(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What the crawler asked and got: conditional refetches, 200/304, changes seen."""
    seen: set[int] = set()
    counts = collections.Counter()
    for e in sorted(entries, key=lambda e: e["ts"]):
        if e["page"] is None:
            counts["other_requests"] += 1
            continue
        if e["page"] in seen:
            counts["refetches"] += 1
            counts["refetches_conditional"] += bool(e["conditional"])
            counts["refetches_with_if_none_match"] += e["inm"] is not None
            counts[f"refetches_{e['status']}"] += 1
        else:
            counts["first_fetches"] += 1
            counts["first_fetches_conditional"] += bool(e["conditional"])
        if e["status"] == 200:
            seen.add(e["page"])
    out = dict(counts)
    out["conditional_share"] = counts["refetches_conditional"] / counts["refetches"] if counts["refetches"] else None
    return out


def warc_records(root: str, prefix: str) -> dict[str, Any] | None:
    """Response and revisit records under <root>/warc whose target is a page of the web."""
    files = sorted(glob.glob(os.path.join(root, "warc", "**", "*.warc.gz"), recursive=True))
    if not files:
        return None
    from warcio.archiveiterator import ArchiveIterator
    counts = collections.Counter()
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                uri = rec.rec_headers.get_header("WARC-Target-URI") or ""
                if uri.startswith(prefix) or "127.0.0." in uri:
                    counts[rec.rec_type] += 1
    return {"files": len(files), **dict(counts)}


# --------------------------------------------------------------------------- the benchmark

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Crawl a changing web on loopback and score freshness from its log "
                                            "against uniform, Nutch's adaptive rule and the C&GM optimum.")
    p.add_argument("--seed", type=int, default=1, help="seed of the web: layout, change rates, change times (1)")
    p.add_argument("--pages", type=int, default=320, help="pages in all (320)")
    p.add_argument("--hosts", type=int, default=8, help="hosts, 127.0.0.2 … (8; at most 253)")
    p.add_argument("--budget", type=float, default=0.25, help="generate.top_n as a share of --pages (0.25)")
    p.add_argument("--cycles", type=int, default=18, help="crawl cycles (18)")
    p.add_argument("--warmup-cycles", type=int, default=None,
                   help="cycles left out of steady state (default: up to the last cycle with a first fetch, "
                        "at most two thirds)")
    p.add_argument("--min-change-s", type=float, default=10.0, help="fastest mean time between changes (10)")
    p.add_argument("--max-change-s", type=float, default=7200.0, help="slowest finite mean time between changes (7200)")
    p.add_argument("--never-share", type=float, default=0.2, help="share of pages that never change (0.2)")
    p.add_argument("--fetch-value-s", type=float, default=None,
                   help="a hand-set schedule.fetch_value_s (fit_fetch_value off); default: fitted by update")
    p.add_argument("--min-interval-s", type=float, default=5.0, help="schedule.min_interval_s (5)")
    p.add_argument("--max-interval-s", type=float, default=7200.0, help="schedule.max_interval_s (7200)")
    p.add_argument("--prior-min-change-s", type=float, default=5.0, help="schedule.prior_min_change_s (5)")
    p.add_argument("--prior-max-change-s", type=float, default=86400.0, help="schedule.prior_max_change_s (86400)")
    p.add_argument("--delay-s", type=float, default=0.25, help="fetch.delay_s (0.25)")
    p.add_argument("--weights", default=DEFAULT_WEIGHTS, help=f"importance by kind ({DEFAULT_WEIGHTS})")
    p.add_argument("--cycle-s", type=float, default=15.0,
                   help="a cycle starts this long after the previous one started, or at once if it overran (15)")
    p.add_argument("--drive", metavar="SPEC", help=argparse.SUPPRESS)  # the crawl's child process
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="more crawl config (repeatable)")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    p.add_argument("--keep", action="store_true", help="keep the work directory (crawl root, log, crawl output)")
    p.add_argument("--score-only", metavar="DIR", help="re-score the kept run in DIR (no crawl)")
    args = p.parse_args(argv)
    if not 0 < args.budget <= 1 or args.cycles < 2 or not 0 <= (args.warmup_cycles or 0) < args.cycles:
        p.error("need 0 < --budget <= 1, --cycles >= 2, 0 <= --warmup-cycles < --cycles")
    try:
        args.weight_of = {k: float(v) for k, v in (kv.split("=") for kv in args.weights.split(","))}
    except ValueError:
        p.error("--weights: kind=number,...")
    if set(args.weight_of) != set(KINDS):
        p.error(f"--weights must name every kind: {', '.join(KINDS)}")
    return args


def make_web(args: argparse.Namespace, log_path: str | None) -> ChangingWeb:
    return ChangingWeb(pages=args.pages, hosts=args.hosts, seed=args.seed, min_change_s=args.min_change_s,
                       max_change_s=args.max_change_s, never_share=args.never_share, log_path=log_path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.drive:
        return drive_crawl(args.drive)
    started = time.time()
    facts = machine_facts()
    if args.score_only:
        workdir = args.score_only
        with open(os.path.join(workdir, "meta.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
        # the run's own options, but scoring ones given now win (--warmup-cycles, --weights, --out-json)
        given = argv if argv is not None else sys.argv[1:]
        rescore = [a for i, a in enumerate(given) if a.startswith(("--warmup-cycles", "--weights", "--out-json"))
                   or (i > 0 and given[i - 1] in ("--warmup-cycles", "--weights", "--out-json"))]
        args = parse_args(meta["argv"] + ["--score-only", workdir] + rescore)
        web = make_web(args, None)
        web.t0, web.port = meta["t0"], meta["port"]
        crawl = meta["crawl"]
    else:
        workdir = tempfile.mkdtemp(prefix="freshness-")
        web = make_web(args, os.path.join(workdir, "requests.jsonl")).start()
        print(f"freshness bench: {len(web.pages)} pages on {args.hosts} hosts "
              f"({web.addresses[0]}..{web.addresses[-1]} port {web.port}), seed {args.seed}, "
              f"top_n {top_n_of(args)}, {args.cycles} cycles; work dir {workdir}", flush=True)
        try:
            crawl = run_crawl(args, web, workdir)
        finally:
            web.stop()
        with open(os.path.join(workdir, "meta.json"), "w", encoding="utf-8") as fh:
            json.dump({"argv": [a for a in (argv if argv is not None else sys.argv[1:])
                                if a not in ("--keep",)], "t0": web.t0, "port": web.port, "crawl": crawl}, fh)
        if crawl["returncode"] != 0:
            print("bench: the crawl failed:\n" + "\n".join(crawl["tail"]), file=sys.stderr)
            if not args.keep:
                print(f"bench: kept {workdir} for a look", file=sys.stderr)
            return 2
    with open(os.path.join(workdir, "requests.jsonl"), encoding="utf-8") as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    result = evaluate(args, web, entries, crawl, workdir)
    result["machine"] = facts
    result["seconds"] = round(time.time() - started, 1)
    result["work_dir"] = workdir if (args.keep or args.score_only) else None
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"check: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failures.append(what)

    check(result["cycles_found"] == args.cycles, f"the driver ran {args.cycles} cycles (found {result['cycles_found']})")
    check(result["requests_outside_fetch_steps"] == 0, "every page request inside a fetch step")
    check(result["politeness"]["violations"] == 0, "no gap below fetch.delay_s on any host")
    m = result["mechanics"]
    check(m.get("refetches_conditional", 0) == m.get("refetches", 0), "every refetch conditional")
    if result["warc"] is not None:
        check(result["warc"].get("revisit", 0) == m.get("refetches_304", 0), "a WARC revisit record for every 304")
    code = finish(result, failures, args.out_json, report)
    if not args.keep and not args.score_only:
        shutil.rmtree(workdir, ignore_errors=True)
    return code


def evaluate(args: argparse.Namespace, web: ChangingWeb, entries: list[dict[str, Any]], crawl: dict[str, Any],
             workdir: str) -> dict[str, Any]:
    with open(os.path.join(workdir, "cycles.jsonl"), encoding="utf-8") as fh:
        record = [json.loads(line) for line in fh if line.strip()]
    cycles, outside = crawler_cycles(entries, record)
    page_entries = [e for e in entries if e["page"] is not None and e["status"] in (200, 304)]
    t_hi = max(e["ts"] for e in page_entries)
    w_idx = min(args.warmup_cycles if args.warmup_cycles is not None else warmup_of(cycles), len(cycles) - 1)
    t_lo = cycles[w_idx]["start"]
    weight = np.array([args.weight_of[p.kind] for p in web.pages])
    rate = np.array([0.0 if not math.isfinite(p.mean_change_s) else 1.0 / p.mean_change_s for p in web.pages])
    steady = cycles[w_idx:]
    refetches_window = sum(len(c["refetches"]) for c in steady)
    budget_per_s = refetches_window / (t_hi - t_lo)
    cycle_s = (t_hi - cycles[1]["start"]) / max(len(cycles) - 2, 1) if len(cycles) > 2 else t_hi - t_lo
    total_refetches = sum(len(c["refetches"]) for c in cycles)
    ref_span = t_hi - cycles[1]["start"] if len(cycles) > 1 else t_hi - t_lo
    uniform_period = len(web.pages) / max(total_refetches / max(ref_span, 1e-9), 1e-9)
    f_plain = optimum(rate, np.ones_like(rate), budget_per_s)
    f_weighted = optimum(rate, weight, budget_per_s)
    # the reference for budget left unused: every cycle's top_n fetches made, the refetches spread
    # evenly over the cycle's fetch step (at its start when it fetched nothing)
    top_n = top_n_of(args)
    full_cycles = []
    for cyc in cycles:
        extra = max(0, top_n - len(cyc["discoveries"]))
        end = cyc["fetch_end"] if cyc["fetch_end"] is not None else cyc["start"]
        full_cycles.append(dict(cyc, refetches=[(-1, float(t)) for t in np.linspace(cyc["start"], end, extra)]))
    full_per_s = sum(len(c["refetches"]) for c in full_cycles[w_idx:]) / (t_hi - t_lo)
    f_full = optimum(rate, weight, full_per_s)

    ours_events = [(e["page"], e["ts"], e["version"]) for e in page_entries]
    policies = {
        "ours": ours_events,
        "uniform": Uniform(web).run(cycles),
        "nutch": Nutch(web, uniform_period, args.min_interval_s, args.max_interval_s).run(cycles),
        "optimum_plain": FixedRate(web, f_plain).run(cycles),
        "optimum_weighted": FixedRate(web, f_weighted).run(cycles),
        "optimum_full_budget": FixedRate(web, f_full).run(full_cycles),
    }
    starts = [c["start"] for c in cycles]
    scores = {k: score(web, ev, t_lo, t_hi, weight, starts) for k, ev in policies.items()}
    per_cycle = []
    for c, cyc in enumerate(cycles):
        n_fetch = len(cyc["discoveries"]) + len(cyc["refetches"])
        per_cycle.append({"cycle": c + 1, "start_s": round(cyc["start"] - web.t0, 1), "fetches": n_fetch,
                          "first_fetches": len(cyc["discoveries"]), "refetches": len(cyc["refetches"]),
                          "budget_used": round(n_fetch / top_n, 3)})
    prefix = f"http://{web.addresses[0].rsplit('.', 1)[0]}."
    warc = None
    root = os.path.join(workdir, "root")
    if os.path.isdir(root):
        try:
            warc = warc_records(root, prefix)
        except Exception as exc:  # a figure, not a verdict: say why it is missing
            warc = {"error": repr(exc)}
    classes = collections.Counter(change_class(p.mean_change_s) for p in web.pages)
    opt_p, opt_w = scores["optimum_plain"], scores["optimum_weighted"]
    steady_used = [pc["budget_used"] for pc in per_cycle[w_idx:]]
    return {
        "benchmark": "freshness",
        "command": "python bench/freshness.py " + " ".join(a for a in (sys.argv[1:]) if a),
        "params": {k: v for k, v in vars(args).items() if k not in ("weight_of",)},
        "web": {"pages": len(web.pages), "hosts": args.hosts, "kinds": dict(collections.Counter(p.kind for p in web.pages)),
                "classes": {c: classes[c] for c in CLASSES}, "weights": args.weight_of,
                "addresses": [web.addresses[0], web.addresses[-1]], "networks": web.networks()},
        "crawl": {k: v for k, v in crawl.items() if k != "tail"},
        "top_n": top_n,
        "cycles_found": len(cycles), "requests_outside_fetch_steps": outside,
        "warmup_cycles": w_idx, "window_s": round(t_hi - t_lo, 1), "window_start_s": round(t_lo - web.t0, 1),
        "mean_cycle_s": round(cycle_s, 1),
        "refetches_per_s_steady": budget_per_s, "full_budget_refetches_per_s": full_per_s,
        "uniform_period_s": uniform_period,
        "pages_unfetched_at_window_start": int(len(web.pages) - len({p for c in cycles[:w_idx] for p, _ in c["discoveries"]})),
        "pages_never_fetched": int(len(web.pages) - len({e["page"] for e in page_entries})),
        "per_cycle": per_cycle,
        "budget_used_steady_mean": float(np.mean(steady_used)), "budget_used_steady_min": float(np.min(steady_used)),
        "budget_used_all_mean": float(np.mean([pc["budget_used"] for pc in per_cycle])),
        "policies": scores,
        "ratios": {k: {"plain": scores[k]["freshness"] / opt_p["freshness"],
                       "weighted": scores[k]["weighted_freshness"] / opt_w["weighted_freshness"]} for k in POLICIES},
        "analytic_optimum": {"plain": float(np.mean(analytic_freshness(rate, f_plain) * (rate > 0) + (rate == 0))),
                             "weighted": float(np.sum((analytic_freshness(rate, f_weighted) * (rate > 0) + (rate == 0)) * weight)
                                               / weight.sum())},
        "optimum_pages_not_refreshed": {"plain": int(np.sum((f_plain == 0) & (rate > 0))),
                                        "weighted": int(np.sum((f_weighted == 0) & (rate > 0)))},
        "mechanics": mechanics(entries),
        "politeness": politeness(entries, args.delay_s),
        "warc": warc,
    }


def report(result: dict[str, Any]) -> None:
    m, p, pol, r = result["machine"], result["params"], result["policies"], result["ratios"]
    print()
    print(f"### Live freshness (bench/freshness.py) — {m['date_utc']}, commit {m['git_commit']}")
    print()
    print(f"- {result['web']['pages']} pages on {p['hosts']} hosts, seed {p['seed']}, top_n {result['top_n']} "
          f"(budget {p['budget']:g}), {result['cycles_found']} cycles of {result['mean_cycle_s']:.0f} s on average; "
          f"steady state after {result['warmup_cycles']} cycles: a window of {result['window_s']:.0f} s "
          f"({result['pages_unfetched_at_window_start']} pages not fetched yet when it opens, "
          f"{result['pages_never_fetched']} never); classes {result['web']['classes']}; "
          f"{m['nproc']} cores, load {m['loadavg_at_start'][0]} → {m['loadavg_at_end'][0]}, crawl {result['crawl']['seconds']:.0f} s.")
    print()
    print("| policy | plain F | ÷ optimum | weighted F | ÷ optimum | versions captured | "
          "fetches/page fast | medium | slow | never | home | important | normal | deep |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in POLICIES:
        s = pol[k]
        cls = " | ".join(f"{s['by_class'][c]['fetches_per_page']:.2f}" for c in CLASSES)
        kin = " | ".join(f"{s['by_kind'][c]['fetches_per_page']:.2f}" for c in KINDS)
        print(f"| {LABELS[k]} | {s['freshness']:.3f} | {r[k]['plain']:.3f} | {s['weighted_freshness']:.3f} | "
              f"{r[k]['weighted']:.3f} | {s['captured_share']:.3f} | {cls} | {kin} |")
    print()
    print("| freshness by group | " + " | ".join(CLASSES) + " | " + " | ".join(KINDS) + " |")
    print("|---|" + "---:|" * (len(CLASSES) + len(KINDS)))
    for k in POLICIES:
        s = pol[k]
        vals = [s["by_class"][c]["freshness"] for c in CLASSES] + [s["by_kind"][c]["freshness"] for c in KINDS]
        print(f"| {LABELS[k]} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    print()
    an = result["analytic_optimum"]
    print(f"- Optimum's analytic F for {result['refetches_per_s_steady']:.3f} refetches/s: plain {an['plain']:.3f}, "
          f"weighted {an['weighted']:.3f}; it leaves {result['optimum_pages_not_refreshed']['plain']} "
          f"(plain) / {result['optimum_pages_not_refreshed']['weighted']} (weighted) changing pages unrefreshed.")
    pc = result["per_cycle"]
    print("- Budget used per cycle (page fetches ÷ top_n): " + ", ".join(f"{c['budget_used']:.2f}" for c in pc)
          + f"; steady mean {result['budget_used_steady_mean']:.2f}, min {result['budget_used_steady_min']:.2f}.")
    print("- Fetches per cycle (first + re): " + ", ".join(f"{c['first_fetches']}+{c['refetches']}" for c in pc))
    print("- Ours, plain freshness per cycle: " + ", ".join(f"{x:.2f}" for x in pol["ours"]["per_cycle_freshness"]))
    mech, pol_ = result["mechanics"], result["politeness"]
    print(f"- Refetches {mech.get('refetches', 0)}: conditional {mech.get('refetches_conditional', 0)} "
          f"(share {mech['conditional_share'] if mech['conditional_share'] is None else round(mech['conditional_share'], 3)}), "
          f"200 {mech.get('refetches_200', 0)}, 304 {mech.get('refetches_304', 0)}; first fetches {mech.get('first_fetches', 0)}; "
          f"other requests (robots.txt, sitemap) {mech.get('other_requests', 0)}.")
    w = result["warc"]
    print(f"- WARC: {w}" if w else "- WARC: none found")
    print(f"- Politeness: {pol_['hosts']} hosts, smallest gap {pol_['min_gap_s']} s (median {pol_['median_gap_s']} s) "
          f"against fetch.delay_s {pol_['delay_s']}; violations {pol_['violations']}.")
    print(f"- Checks failed: {', '.join(result['checks_failed']) or 'none'}.")


if __name__ == "__main__":
    sys.exit(main())
