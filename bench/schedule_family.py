#!/usr/bin/env python
"""Schedule family benchmark (issue 50): the recrawl schedule replayed on many simulated changing
webs drawn at random, not on the one it was developed on, against uniform refresh, Nutch's
adaptive rule and the Cho & Garcia-Molina optimum for the same number of fetches.

Run:      .venv/bin/python bench/schedule_family.py [--draws 20] [--first 1] [--held-out]
          [--cycles 60] [--jobs 1] [--out-json FILE] [--conf key=value ...]
          (tuning draws 1..20: ~3 min of CPU; --held-out: draws 9001..9004 instead)
Draws:    draw k is the web drawn from numpy's default_rng(k). Tuning draws are 1, 2, ...;
          the held-out draws are 9001..9004 (``--held-out``): they were never looked at while the
          schedule was tuned, and are run once, as they are, for the closing report.
A web:    hosts (2-8) of drawn sizes (equal: 20-60 pages each, or skewed: lognormal, 6-160; scaled
          down to about 400 pages in all when larger, so the replay stays fast), each
          a home page, important pages (10 %), deep pages (20 %) and normal ones (bench/freshness.py's
          kinds and weights: home 4, important 2, normal 1, deep 0.5). Mean time between changes:
          log-uniform, bimodal (two lognormal clusters) or heavy-tailed (rates Pareto-distributed
          from the slowest up), between a fastest of 5-50 s and a slowest 30-1000 x that, the cycle
          being 16 s; 0-40 % of the pages never change. Change rate against importance: independent,
          fast pages important, or fast pages deep (a rank correlation with noise). Budget: top_n
          = 1/8 .. 1/2 of the pages (log-uniform). Last-Modified: sent by every host, by half the
          hosts, or by none. Changes are Poisson with the drawn rate; a page's first age is a draw
          of its own process. As live: the fetch step starts 0-6.4 s after generate decided, each
          host's URLs fetch.delay_s (0.25 s) apart; the crawler's link score varies within a kind
          (lognormal, sigma 0-1) and normal and deep pages sit 0-3 links deeper than their kind's
          depth.
Ours:     the crawler's own decision code on the driver path, no Spark and no HTTP (as
          tests/test_refresh_allocation.py): generate's selection (crawl.crawldb.selection.select:
          due URLs, the fill with early URLs, priorities, host turns, discovery/refresh pools),
          update's transition (crawl.crawldb.status.apply_fetch: change history, Last-Modified,
          interval, refresh value) and update's fit (crawl.crawldb.schedule_fit.fit) every cycle, on
          the default config with the clock compressed (schedule.min_interval_s 5, max_interval_s
          7200, prior 5 s .. 1 day, as bench/freshness.py). Each fetch answers 304 when the ETag
          matches. The crawler's importance comes from score and depth by kind (home 1.0 / 0,
          important 0.06 / 1, normal 0.01 / 2, deep 0.002 / 4, with the noise above), never from
          the benchmark's weights.
Baselines: the same fetches at the same instants: every policy makes ours' discovery fetches and
          shares ours' refetches of each cycle (count and instants, the first chosen fetched first)
          among the pages discovered before the fetch step starts, deciding at its start:
          uniform       round-robin, the page fetched longest ago first;
          nutch         Nutch's AdaptiveFetchSchedule with its defaults (inc_rate 0.4: interval
                        x 1.4 after an unchanged fetch; dec_rate 0.2: x 0.8 after a change;
                        sync_delta on, rate 0.3: after a change with a Last-Modified, the interval
                        is at least the page's age and the next fetch is counted from
                        fetch time - 0.3 x age), min/max interval as ours, first interval the
                        uniform period; the most overdue (relative to its interval) first, so
                        the budget is always used;
          nutch_plain   the same without sync_delta (bench/freshness.py's model);
          optimum_plain / optimum_weighted  Cho & Garcia-Molina with the TRUE rates (bench/
                        schedule.py's Lagrangian solver), plain weights or the kind weights, for
                        the refetches per second ours made in steady state, run as fetch credits.
Scored:   every policy alike: a page is fresh while its stored copy is the live version;
          time-averaged over steady state (from the cycle after the last first fetch, at least a
          third of the run), every page counted; plain and importance-weighted (kind weights).
Reported: per draw its parameters, ours / uniform / nutch / optimum plain and weighted, ours ÷
          optimum; the median and lowest ours ÷ optimum; how many draws ours is at least uniform and
          at least either Nutch rule, plain and weighted (the issue's targets, reported, not checked).
Exit:     0 done · 2 bad arguments.
"""
from __future__ import annotations

import argparse
import email.utils
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py, bench/schedule.py
from _common import finish, machine_facts  # noqa: E402
from schedule import optimum_frequencies  # noqa: E402

from crawl.config import build_config, parse_pairs  # noqa: E402
from crawl.crawldb import schedule, schedule_fit, selection  # noqa: E402
from crawl.crawldb.status import FetchStatus, apply_fetch, lease, new_url_state, schedule_policy  # noqa: E402

CYCLE_S = 16.0
START = 1_800_000_000.0
HELD_OUT = tuple(range(9001, 9005))
KIND_WEIGHT = {"home": 4.0, "important": 2.0, "normal": 1.0, "deep": 0.5}
KIND_SCORE = {"home": 1.0, "important": 0.06, "normal": 0.01, "deep": 0.002}
KIND_DEPTH = {"home": 0, "important": 1, "normal": 2, "deep": 4}
# the compressed clock (bench/freshness.py's)
CLOCK = {"schedule.min_interval_s": 5, "schedule.max_interval_s": 7200, "schedule.prior_min_change_s": 5,
         "schedule.prior_max_change_s": 86400, "fetch.delay_s": 0.25}
NUTCH = {"inc_rate": 0.4, "dec_rate": 0.2, "sync_delta_rate": 0.3}


# --------------------------------------------------------------------------- the family

def draw_params(seed: int) -> dict[str, Any]:
    """The parameters of draw ``seed`` (module docstring)."""
    rng = np.random.default_rng(seed)
    hosts = int(rng.integers(2, 9))
    if rng.random() < 0.5:
        sizes = rng.integers(20, 61, hosts)
        site_sizes = "equal"
    else:
        sizes = np.clip(np.round(rng.lognormal(math.log(35), 0.8, hosts)), 6, 160).astype(int)
        site_sizes = "skewed"
    scale = 400.0 / max(sizes.sum(), 400.0)  # at most ~400 pages: the replay stays fast
    sizes = np.maximum(np.round(sizes * scale), 6).astype(int)
    fastest = float(CYCLE_S * 10 ** rng.uniform(-0.5, 0.5))
    return {
        "seed": seed, "hosts": hosts, "site_sizes": site_sizes, "sizes": [int(s) for s in sizes],
        "rates": str(rng.choice(["log-uniform", "bimodal", "heavy-tailed"])),
        "fastest_s": round(fastest, 1), "slowest_s": round(fastest * 10 ** rng.uniform(1.5, 3.0), 1),
        "never_share": round(float(rng.uniform(0.0, 0.4)), 3),
        "correlation": str(rng.choice(["independent", "fast-important", "fast-deep"])),
        "budget_share": round(float(2 ** rng.uniform(-3, -1)), 3),
        "last_modified": str(rng.choice(["all", "all", "half the hosts", "none"])),
        "bimodal_fast_share": round(float(rng.uniform(0.3, 0.7)), 3),
        "tail_alpha": round(float(rng.uniform(0.4, 1.2)), 3),
        # live-like: the fetch step starts this long after generate, one host's URLs fetch_delay_s apart
        "fetch_lag_s": round(float(rng.uniform(0.0, 0.4 * CYCLE_S)), 2),
        # the crawler's link score of a page varies within its kind (lognormal, this sigma), and
        # normal and deep pages sit 0-3 links deeper than their kind's depth
        "score_noise": round(float(rng.uniform(0.0, 1.0)), 3),
    }


class Web:
    """A drawn web: pages with kinds, Poisson change times (seconds after START), validators."""

    def __init__(self, params: dict[str, Any], cycles: int):
        rng = np.random.default_rng(params["seed"] + 7919)
        kinds, hosts = [], []
        for h, size in enumerate(params["sizes"]):
            k = np.array(["normal"] * size, dtype=object)
            k[0] = "home"
            rest = rng.permutation(np.arange(1, size))
            n_imp, n_deep = max(1, round(0.1 * size)), round(0.2 * size)
            k[rest[:n_imp]] = "important"
            k[rest[n_imp:n_imp + n_deep]] = "deep"
            kinds.extend(k.tolist())
            hosts.extend([h] * size)
        self.kind = np.array(kinds, dtype=object)
        self.host = np.array(hosts)
        n = self.n = self.kind.size
        self.weight = np.array([KIND_WEIGHT[k] for k in self.kind])
        lo, hi = math.log(params["fastest_s"]), math.log(params["slowest_s"])
        if params["rates"] == "log-uniform":
            mean = np.exp(rng.uniform(lo, hi, n))
        elif params["rates"] == "bimodal":
            fast = rng.random(n) < params["bimodal_fast_share"]
            centre = np.where(fast, lo + 0.15 * (hi - lo), hi - 0.15 * (hi - lo))
            mean = np.exp(np.clip(rng.normal(centre, 0.08 * (hi - lo)), lo, hi))
        else:  # heavy-tailed rates: most pages near the slowest, a few far faster
            rate = (1.0 + rng.pareto(params["tail_alpha"], n)) / params["slowest_s"]
            mean = np.clip(1.0 / rate, params["fastest_s"], params["slowest_s"])
        mean = np.sort(mean)  # fastest first, handed out by the correlation's ranking
        key = np.log(self.weight)
        if params["correlation"] == "independent":
            key = rng.random(n)
        elif params["correlation"] == "fast-deep":
            key = -key
        key = key + (rng.normal(0.0, 0.5, n) if params["correlation"] != "independent" else 0.0)
        order = np.argsort(-key, kind="stable")  # the highest key gets the fastest rate
        self.mean = np.empty(n)
        self.mean[order] = mean
        self.mean = np.where(rng.random(n) < params["never_share"], np.inf, self.mean)
        horizon = cycles * CYCLE_S + 200.0
        self.changes, self.first_age = [], []
        for i in range(n):
            if math.isinf(self.mean[i]):
                self.changes.append(np.empty(0))
                self.first_age.append(86400.0 * 30)
                continue
            gaps = rng.exponential(self.mean[i], int(horizon / self.mean[i] * 2) + 20)
            times = np.cumsum(gaps)
            self.changes.append(times[times < horizon])
            self.first_age.append(float(rng.exponential(self.mean[i])))
        lm = params["last_modified"]
        h = len(params["sizes"])
        sends = np.ones(h, bool) if lm == "all" else np.zeros(h, bool) if lm == "none" else np.arange(h) % 2 == 0
        self.sends_last_modified = sends[self.host]
        self.rate = np.where(np.isinf(self.mean), 0.0, 1.0 / self.mean)
        noise = np.random.default_rng(params["seed"] + 104729)
        self.score = np.array([KIND_SCORE[k] for k in self.kind]) * np.exp(noise.normal(0.0, params["score_noise"], n))
        self.score[self.kind == "home"] = 1.0  # the seeds
        self.depth = np.array([KIND_DEPTH[k] for k in self.kind]) + np.where(
            np.isin(self.kind, ["normal", "deep"]), noise.integers(0, 4, n), 0)

    def version(self, page: int, t: float) -> int:
        return int(np.searchsorted(self.changes[page], t - START, side="right"))

    def changed_at(self, page: int, version: int) -> float:
        return START - self.first_age[page] if version == 0 else START + float(self.changes[page][version - 1])

    def url(self, page: int) -> str:
        return f"http://h{self.host[page]}.example/p{page}"


# --------------------------------------------------------------------------- ours: the crawler's code

def crawl(web: Web, top_n: int, cycles: int, cfg, lag_s: float) -> tuple[list[tuple[int, float, int]], list[list[float]], float]:
    """The crawler's rules over ``cycles`` cycles: (page, time, version) of every fetch, each
    cycle's refetch instants, and the CPU seconds the fit took. generate decides at the cycle's
    start; its URLs are fetched from ``lag_s`` later, each host's in their order, fetch.delay_s
    apart (less when they would not fit in the cycle)."""
    policy = schedule_policy(cfg)
    rows = {p: new_url_state(web.url(p), f"h{web.host[p]}.example", 0, p, int(web.depth[p]), float(web.score[p]),
                             START) for p in range(web.n)}
    events, refetches, starts = [], [], []
    quotas = selection.budget_split(top_n, float(cfg["generate.discovery_share"]))
    fit_s = 0.0
    for cycle in range(cycles):
        now = START + 5.0 + cycle * CYCLE_S
        starts.append(now)
        known = [r for r in rows.values() if r["status"] in schedule.VALUED_STATUSES and r["observed_count"]]
        if known:
            t0 = time.process_time()
            new = sum(1 for r in rows.values() if r["fetch_count"] == 0)
            histories = {c: np.array([np.nan if r[c] is None else r[c] for r in known], dtype=float)
                         for c in schedule_fit.HISTORY_COLUMNS}
            fitted = schedule_fit.fit(histories, cfg, refresh_per_cycle=schedule.refresh_budget(top_n, quotas[0], new),
                                      cycle_s=schedule.cycle_seconds(starts, now), sampled_share=1.0, seed=cycle)
            policy = schedule_policy(cfg, fitted)
            fit_s += time.process_time() - t0
        all_rows = list(rows.values())
        early = selection.early_rule(np.array([r["status"] for r in all_rows], dtype=object),
                                     np.array([np.nan if r["next_fetch_at"] is None else r["next_fetch_at"]
                                               for r in all_rows], dtype=float),
                                     np.array([np.nan if r["last_fetched_at"] is None else r["last_fetched_at"]
                                               for r in all_rows], dtype=float),
                                     now, float(cfg["schedule.min_interval_s"]), selection.NUMPY_OPS)
        due = [r for r, e in zip(all_rows, early)
               if r["status"] in ("unfetched", "fetched", "notmodified")
               and (e or (r["next_fetch_at"] is not None and r["next_fetch_at"] <= now))]
        cap = int(cfg["generate.max_urls_per_host"])
        chosen = selection.select(due, lambda host: cap, {}, quotas, top_n, cfg, now)
        # fetch.delay_s apart, squeezed when a host's URLs would not fit in the cycle (the replay
        # applies each answer before the next cycle decides)
        last_rank = max((rank for _, rank in chosen), default=1)
        delay = min(float(cfg["fetch.delay_s"]), (0.9 * CYCLE_S - lag_s) / max(last_rank, 1))
        at = {}
        for row, rank in chosen:
            at[row["url_hash"]] = now + lag_s + (rank - 1) * delay
        refetches.append(sorted(at[row["url_hash"]] for row, _ in chosen if row["fetch_count"]))
        for row, _ in chosen:
            p = row["url_hash"]
            fetched_at = at[p]
            v = web.version(p, fetched_at)
            state = lease(rows[p], "s", now, 600.0)
            etag = f'"{p}-{v}"'
            last_modified = (email.utils.formatdate(web.changed_at(p, v), usegmt=True)
                             if web.sends_last_modified[p] else None)
            outcome = {"fetched_at": fetched_at, "etag": etag, "http_status": 200, "error": None,
                       "last_modified": last_modified, "content_hash": etag, "text_hash": hash(etag),
                       "content_type": "text/html"}
            outcome["fetch_status"] = FetchStatus.NOT_MODIFIED if state["etag"] == etag else FetchStatus.OK
            rows[p] = apply_fetch(state, outcome, policy)
            events.append((p, fetched_at, v))
    return events, refetches, fit_s


# --------------------------------------------------------------------------- baselines

def _cycle_times(cycles: int) -> list[float]:
    return [START + 5.0 + c * CYCLE_S for c in range(cycles)]


def _steps(refetches: list[list[float]], lag_s: float):
    """Per cycle: when a baseline decides (the fetch step's start) and ours' refetch instants."""
    return zip((t + lag_s for t in _cycle_times(len(refetches))), refetches)


def _first_events(web: Web, first: dict[int, float]) -> list[tuple[int, float, int]]:
    return [(p, t, web.version(p, t)) for p, t in first.items()]


def uniform(web: Web, first: dict[int, float], refetches: list[list[float]], lag_s: float):
    last = np.full(web.n, np.inf)
    events = _first_events(web, first)
    for now, instants in _steps(refetches, lag_s):
        for p, t in first.items():
            if t < now and math.isinf(last[p]):
                last[p] = t
        order = np.lexsort((np.arange(web.n), last))
        for p, t in zip([int(p) for p in order if math.isfinite(last[p])], instants):
            last[p] = t
            events.append((p, t, web.version(p, t)))
    return events


def nutch_next(interval: float, changed: bool, at: float, modified_at: float | None, *, sync_delta: bool,
               min_interval: float, max_interval: float) -> tuple[float, float]:
    """Nutch's AdaptiveFetchSchedule.setFetchSchedule after a fetch at ``at``: (new interval, next
    fetch time). ``modified_at``: the answer's Last-Modified (None: not sent)."""
    interval *= (1.0 - NUTCH["dec_rate"]) if changed else (1.0 + NUTCH["inc_rate"])
    ref = at
    if changed and sync_delta and modified_at is not None:
        delta = at - modified_at
        interval = max(interval, delta)
        ref = at - NUTCH["sync_delta_rate"] * delta
    interval = min(max(interval, min_interval), max_interval)
    return interval, ref + interval


def nutch(web: Web, first: dict[int, float], refetches: list[list[float]], lag_s: float, *, sync_delta: bool,
          first_interval: float, min_interval: float, max_interval: float):
    """Nutch's AdaptiveFetchSchedule (module docstring), most overdue first."""
    interval = np.full(web.n, first_interval)
    next_at = np.full(web.n, np.inf)
    known = np.zeros(web.n, bool)
    version = np.full(web.n, -1)
    events = _first_events(web, first)
    for p, t in first.items():
        version[p] = web.version(p, t)
    for now, instants in _steps(refetches, lag_s):
        for p, t in first.items():
            if t < now and not known[p]:
                known[p], next_at[p] = True, t + first_interval
        idx = np.flatnonzero(known)
        overdue = (now - next_at[idx]) / interval[idx]
        for p, t in zip([int(i) for i in idx[np.lexsort((idx, -overdue))]], instants):
            v = web.version(p, t)
            changed = v != version[p]
            version[p] = v
            interval[p], next_at[p] = nutch_next(
                interval[p], changed, t, web.changed_at(p, v) if web.sends_last_modified[p] else None,
                sync_delta=sync_delta, min_interval=min_interval, max_interval=max_interval)
            events.append((p, t, v))
    return events


def credits(web: Web, freq: np.ndarray, first: dict[int, float], refetches: list[list[float]], lag_s: float):
    """A fixed frequency per page as fetch credits: every cycle the pages with the most credit are
    refetched, as many as ours refetched (pages the optimum never refreshes only to fill)."""
    credit = np.zeros(web.n)
    events = _first_events(web, first)
    for now, instants in _steps(refetches, lag_s):
        known = np.array([p in first and first[p] < now for p in range(web.n)])
        credit += np.where(known, freq, 0.0) * CYCLE_S
        order = np.lexsort((np.arange(web.n), freq <= 0, -credit, ~known))
        for p, t in zip(order, instants):
            if not known[p]:
                break
            credit[p] -= 1.0
            events.append((int(p), t, web.version(int(p), t)))
    return events


def optimum(web: Web, weight: np.ndarray, budget_per_s: float) -> np.ndarray:
    f = np.zeros(web.n)
    changing = web.rate > 0
    if budget_per_s > 0 and changing.any():
        f[changing], _ = optimum_frequencies(web.rate[changing], weight[changing], budget_per_s)
    return f


def freshness(web: Web, events, t_lo: float, t_hi: float) -> np.ndarray:
    """Per page: the share of [t_lo, t_hi] its stored copy was the live version."""
    fresh = np.zeros(web.n)
    by_page: dict[int, list[tuple[float, int]]] = {}
    for p, t, v in events:
        by_page.setdefault(p, []).append((t, v))
    for p, evs in by_page.items():
        evs.sort()
        for k, (t, v) in enumerate(evs):
            end = evs[k + 1][0] if k + 1 < len(evs) else t_hi
            stale_at = START + web.changes[p][v] if v < web.changes[p].size else math.inf
            fresh[p] += max(0.0, min(end, stale_at, t_hi) - max(t, t_lo))
    return fresh / (t_hi - t_lo)


# --------------------------------------------------------------------------- one draw

POLICIES = ("ours", "uniform", "nutch", "nutch_plain", "optimum_plain", "optimum_weighted")


def run_draw(seed: int, cycles: int, overrides: dict[str, str]) -> dict[str, Any]:
    t0 = time.process_time()
    params = draw_params(seed)
    web = Web(params, cycles)
    top_n = max(1, int(round(params["budget_share"] * web.n)))
    cfg = build_config(overrides={**CLOCK, "generate.top_n": top_n, "generate.max_urls_per_host": top_n,
                                  **overrides})
    lag = params["fetch_lag_s"]
    events, refetches, fit_s = crawl(web, top_n, cycles, cfg, lag)
    first: dict[int, float] = {}
    for p, t, _ in events:
        first.setdefault(p, t)
    last_first = max(first.values())
    warm = max(cycles // 3, int(round((last_first - START - 5.0) / CYCLE_S)) + 1)
    times = _cycle_times(cycles)
    t_lo, t_hi = times[warm], times[-1] + CYCLE_S
    steady = sum(len(r) for r in refetches[warm:])
    budget_per_s = steady / (t_hi - t_lo)
    refetch_total = sum(len(r) for r in refetches)
    uniform_period = web.n / max(refetch_total / (cycles * CYCLE_S), 1e-9)
    limits = {"min_interval": float(cfg["schedule.min_interval_s"]), "max_interval": float(cfg["schedule.max_interval_s"])}
    runs = {
        "ours": events,
        "uniform": uniform(web, first, refetches, lag),
        "nutch": nutch(web, first, refetches, lag, sync_delta=True, first_interval=uniform_period, **limits),
        "nutch_plain": nutch(web, first, refetches, lag, sync_delta=False, first_interval=uniform_period, **limits),
        "optimum_plain": credits(web, optimum(web, np.ones(web.n), budget_per_s), first, refetches, lag),
        "optimum_weighted": credits(web, optimum(web, web.weight, budget_per_s), first, refetches, lag),
    }
    out: dict[str, Any] = {"params": params, "pages": web.n, "top_n": top_n, "warmup_cycles": warm,
                           "refetches_per_cycle_steady": steady / max(cycles - warm, 1),
                           "budget_used_steady": steady / max((cycles - warm) * top_n, 1)}
    fresh = {k: freshness(web, e, t_lo, t_hi) for k, e in runs.items()}
    out["plain"] = {k: float(f.mean()) for k, f in fresh.items()}
    out["weighted"] = {k: float(np.sum(f * web.weight) / web.weight.sum()) for k, f in fresh.items()}
    out["plain_ratio"] = out["plain"]["ours"] / max(out["plain"]["optimum_plain"], 1e-12)
    out["weighted_ratio"] = out["weighted"]["ours"] / max(out["weighted"]["optimum_weighted"], 1e-12)
    # per class and kind: fetches per page in steady state and freshness, ours against the optima
    never = np.isinf(web.mean)
    classes = {"fast": (web.mean < 60) & ~never, "medium": (web.mean >= 60) & (web.mean < 600),
               "slow": (web.mean >= 600) & ~never, "never": never,
               **{k: web.kind == k for k in KIND_WEIGHT}}

    def per_page(evs):
        return np.bincount([p for p, t, _ in evs if t_lo <= t < t_hi and first[p] < t], minlength=web.n)

    counts = {k: per_page(e) for k, e in runs.items()}
    out["by_group"] = {
        g: {"pages": int(m.sum()),
            **{f"fetches_{k}": float(counts[k][m].mean()) for k in ("ours", "uniform", "optimum_weighted")},
            **{f"fresh_{k}": float(fresh[k][m].mean()) for k in ("ours", "uniform", "optimum_weighted")}}
        for g, m in classes.items() if m.any()}
    out["fit_cpu_s"] = round(fit_s, 2)
    out["cpu_s"] = round(time.process_time() - t0, 2)
    return out


# --------------------------------------------------------------------------- the benchmark

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Replay the recrawl schedule on a family of random changing webs.")
    p.add_argument("--draws", type=int, default=20, help="tuning draws to run (default 20)")
    p.add_argument("--first", type=int, default=1, help="first tuning draw (default 1)")
    p.add_argument("--held-out", action="store_true",
                   help=f"run the held-out draws {HELD_OUT[0]}..{HELD_OUT[-1]} instead (never tune on them)")
    p.add_argument("--seeds", type=int, nargs="*", help="exactly these draws")
    p.add_argument("--cycles", type=int, default=60, help="cycles per replay (default 60)")
    p.add_argument("--jobs", type=int, default=1, help="draws replayed in parallel processes (default 1)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="override a config option")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    args = p.parse_args(argv)
    if args.draws < 1 or args.cycles < 12 or args.jobs < 1:
        p.error("need --draws >= 1, --cycles >= 12, --jobs >= 1")
    if args.seeds is None:
        args.seeds = list(HELD_OUT) if args.held_out else list(range(args.first, args.first + args.draws))
    elif any(s in HELD_OUT for s in args.seeds) and not args.held_out:
        p.error("draws 9001..9004 are held out: run them with --held-out")
    try:
        args.overrides = parse_pairs(args.conf)
        build_config(overrides={**CLOCK, **args.overrides})
    except (ValueError, KeyError) as exc:
        p.error(f"--conf: {exc}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    facts = machine_facts()
    print(f"schedule family: draws {args.seeds[0]}..{args.seeds[-1]} ({len(args.seeds)}), {args.cycles} cycles "
          f"of {CYCLE_S:g} s{' (HELD OUT)' if args.held_out else ''}", flush=True)
    draws: list[dict[str, Any]] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_draw, s, args.cycles, args.overrides) for s in args.seeds]
            for f in futures:
                draws.append(f.result())
                _line(draws[-1])
    else:
        for s in args.seeds:
            draws.append(run_draw(s, args.cycles, args.overrides))
            _line(draws[-1])
    w = np.array([d["weighted_ratio"] for d in draws])
    pl = np.array([d["plain_ratio"] for d in draws])

    def wins(key: str, rival: str) -> int:
        return sum(d[key]["ours"] >= d[key][rival] for d in draws)

    summary = {
        "weighted_ratio_median": float(np.median(w)), "weighted_ratio_min": float(w.min()),
        "plain_ratio_median": float(np.median(pl)), "plain_ratio_min": float(pl.min()),
        "draws": len(draws),
        **{f"{key}_at_least_{rival}": wins(key, rival) for key in ("weighted", "plain")
           for rival in ("uniform", "nutch", "nutch_plain")},
        "cpu_s": round(sum(d["cpu_s"] for d in draws), 1),
    }
    result = {"benchmark": "schedule_family", "machine": facts, "held_out": args.held_out,
              "command": "python bench/schedule_family.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "cycles": args.cycles, "overrides": args.overrides, "summary": summary, "draws": draws,
              "seconds": round(time.perf_counter() - started, 1)}
    return finish(result, [], args.out_json, report)


def _line(d: dict[str, Any]) -> None:
    p = d["params"]
    print(f"  draw {p['seed']}: weighted ours/opt {d['weighted_ratio']:.3f} plain {d['plain_ratio']:.3f} "
          f"(ours w {d['weighted']['ours']:.3f} uni {d['weighted']['uniform']:.3f} nutch {d['weighted']['nutch']:.3f}; "
          f"p {d['plain']['ours']:.3f} uni {d['plain']['uniform']:.3f} nutch {d['plain']['nutch']:.3f}) "
          f"{d['cpu_s']:.0f} s CPU", flush=True)


def report(result: dict[str, Any]) -> None:
    m, s = result["machine"], result["summary"]
    print()
    print(f"### Schedule family (bench/schedule_family.py) — {m['date_utc']}, commit {m['git_commit']}")
    print()
    print(f"- Command: `{result['command'].strip()}` — {s['draws']} draws"
          f"{' (the held-out ones)' if result['held_out'] else ''}, {result['cycles']} cycles of {CYCLE_S:g} s each; "
          f"{s['cpu_s']:.0f} s CPU, {result['seconds']:.0f} s wall on {m['nproc']} cores.")
    print()
    print("| draw | pages | rates | never | correlation | budget | Last-Mod. | weighted: ours / uniform / Nutch / "
          "optimum | ÷ opt | plain: ours / uniform / Nutch / optimum | ÷ opt |")
    print("|---|---:|---|---:|---|---:|---|---|---:|---|---:|")
    for d in result["draws"]:
        p, w, pl = d["params"], d["weighted"], d["plain"]
        nut_w, nut_p = max(w["nutch"], w["nutch_plain"]), max(pl["nutch"], pl["nutch_plain"])
        print(f"| {p['seed']} | {d['pages']} | {p['rates']} | {p['never_share']:.0%} | {p['correlation']} | "
              f"{p['budget_share']:.2f} | {p['last_modified']} | {w['ours']:.3f} / {w['uniform']:.3f} / {nut_w:.3f} / "
              f"{w['optimum_weighted']:.3f} | **{d['weighted_ratio']:.3f}** | {pl['ours']:.3f} / {pl['uniform']:.3f} / "
              f"{nut_p:.3f} / {pl['optimum_plain']:.3f} | **{d['plain_ratio']:.3f}** |")
    print()
    print(f"- Ours ÷ optimum, weighted: median {s['weighted_ratio_median']:.3f}, lowest {s['weighted_ratio_min']:.3f}; "
          f"plain: median {s['plain_ratio_median']:.3f}, lowest {s['plain_ratio_min']:.3f}.")
    print(f"- Ours ≥ uniform on {s['weighted_at_least_uniform']}/{s['draws']} draws weighted, "
          f"{s['plain_at_least_uniform']}/{s['draws']} plain; ≥ Nutch (sync delta) {s['weighted_at_least_nutch']} / "
          f"{s['plain_at_least_nutch']}; ≥ Nutch (no sync delta) {s['weighted_at_least_nutch_plain']} / "
          f"{s['plain_at_least_nutch_plain']}. (Nutch in the table: the better of the two.)")


if __name__ == "__main__":
    sys.exit(main())
