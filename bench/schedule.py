#!/usr/bin/env python
"""Schedule-quality benchmark: a simulated web of pages with known Poisson change rates and
importance weights, crawled with a fixed fetch budget per day by four refresh policies (and two diagnostic ones).

Run:      .venv/bin/python bench/schedule.py [--pages 10000] [--days 90] [--warmup-days 30]
          [--budget PAGES_PER_DAY] [--cycle-hours 1] [--seed 1] [--out-json FILE]
Pages:    change rate λ: mean time between changes log-uniform in [--min-change-s 300 (5 min),
          --max-change-s 31536000 (1 year)]; importance w: lognormal (σ = --importance-sigma 1),
          independent of λ. Default budget: pages / 10 fetches per day.
Policies: uniform       every page every pages / budget days;
          proportional  interval ∝ 1 / λ with the TRUE rates (Σ 1/I = budget);
          optimum       Cho & Garcia-Molina, "Effective page refresh policies for web crawlers",
                        ACM TODS 28(4) 2003: maximise Σ wᵢ F(λᵢ, fᵢ) subject to Σ fᵢ = budget,
                        F(λ, f) = (f/λ)(1 − e^(−λ/f)), TRUE rates, Lagrange multiplier by
                        bisection — computed here independently of crawl.crawldb.schedule (bisection on
                        x instead of its Newton solver), unclamped;
          ours          crawl.crawldb.schedule as update would run it: record_observation after every
                        fetch, then next_interval — learning λ only from what a crawler sees (did
                        the content change since the last fetch; a 304 is the same observation),
                        never the true rates; μ = crawl.crawldb.schedule.calibrate_fetch_value on the
                        current histories once per simulated day, with the prior range 1 min …
                        10 years (wider than the simulated web's);
          point_estimate (diagnostic) the same, but deciding on Cho & Garcia-Molina's point
                        estimate: clamp(optimal_interval(estimate_change_rate(history))) — what
                        deciding on the posterior instead buys;
          oracle        (diagnostic) ours' interval rule fed the TRUE rates: the gap ours→oracle
                        is the cost of learning, oracle→optimum the cost of the clamps and cycles.
Engine:   every page is fetched once at t = 0 (the discovery crawl, outside the budget), then its
          first refetch falls at a random phase of its first interval. Every --cycle-hours a
          generate step takes the due pages (next_fetch_at ≤ now), at most the cycle's share of
          the budget, ranked by crawl.crawldb.schedule.priority (importance × staleness; same for every
          policy), fetches them at that instant and sets next_fetch_at = now + interval. Changes
          are simulated exactly: at each fetch the time to the page's next change is drawn
          Exp(λ) (memoryless), so the copy is fresh until then and the next fetch sees a change
          iff it comes later.
Measures: importance-weighted freshness = time average over [warm-up, end] of Σ w·[copy current]
          / Σ w (also unweighted, and over the whole run), per policy; ours / optimum,
          uniform / optimum, proportional / optimum; the steady-state analytic F of the
          fixed-interval policies (uniform must agree; proportional scores higher in the
          simulation because within 90 days it never refetches slow pages, whose t = 0 copies are
          still mostly current); fetches used, and the share of them spent on pages the optimum
          never refreshes (they change faster than w/μ); ours' μ per day.
Checks:   ours beats uniform and proportional; ours ≥ 0.85 × optimum after warm-up; the simulated
          uniform policy is within 2 % of its analytic value.
Exit:     0 done · 1 a check failed (figures are still printed and written) · 2 bad arguments.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import finish, fmt, machine_facts  # noqa: E402  (importing it also puts the checkout on sys.path)

from crawl.crawldb import schedule as S  # noqa: E402

DAY = 86400.0

# The proposed conf/defaults.toml [schedule] values "ours" runs with (fetch_value_s, μ, is
# calibrated to the budget instead). The prior range is deliberately wider than the simulated
# web's (5 min … 1 year): the schedule must not be told the truth.
SCHEDULE = {
    "min_interval_s": 3600.0,
    "max_interval_s": 5184000.0,
    "prior_min_change_s": 60.0,
    "prior_max_change_s": 315360000.0,
}


# --------------------------------------------------------------------------- reference formulas

def freshness(rate: np.ndarray, freq: np.ndarray) -> np.ndarray:
    """Time-averaged freshness of a page of change rate λ refreshed every 1/f seconds:
    F(λ, f) = (f/λ)(1 − e^(−λ/f)) (Cho & Garcia-Molina 2003); 0 when never refreshed."""
    rate = np.asarray(rate, dtype=float)
    freq = np.asarray(freq, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = rate / freq
        out = np.where(x < 1e-8, 1.0 - x / 2.0, -np.expm1(-x) / x)
    return np.where(freq > 0, out, 0.0)


def weighted(values: np.ndarray, weights: np.ndarray) -> float:
    return float(np.sum(values * weights) / np.sum(weights))


def optimum_frequencies(rate: np.ndarray, weight: np.ndarray, budget_per_s: float) -> tuple[np.ndarray, float]:
    """Cho & Garcia-Molina's optimal refresh frequencies for Σ f = budget: wᵢ ∂F/∂f = μ, i.e.
    1 − (1 + x)e^(−x) = μλ/w with x = λ/f, f = 0 where μλ/w ≥ 1. Bisection on x per page (not
    crawl.crawldb.schedule's Newton solver, so the two are independent) inside a bisection on μ."""
    def x_of(c: np.ndarray) -> np.ndarray:
        lo = np.zeros_like(c)
        hi = np.full_like(c, 1.0)
        def g(x):
            return -np.expm1(-x) - x * np.exp(-x)  # 1 − (1 + x)e^(−x)
        while np.any(g(hi) < c):
            hi = np.where(g(hi) < c, hi * 2.0, hi)
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            below = g(mid) < c
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        return 0.5 * (lo + hi)

    def freqs(mu: float) -> np.ndarray:
        c = mu * rate / weight
        ok = c < 1.0
        x = x_of(np.where(ok, c, 0.5))
        return np.where(ok, rate / x, 0.0)

    lo, hi = -8.0, 14.0  # log10 μ
    for _ in range(70):
        mid = 0.5 * (lo + hi)
        if np.sum(freqs(10.0 ** mid)) > budget_per_s:
            lo = mid
        else:
            hi = mid
    mu = 10.0 ** (0.5 * (lo + hi))
    f = freqs(mu)
    return f * (budget_per_s / np.sum(f)), mu  # exact budget (bisection leaves ~1e-15 relative)


# --------------------------------------------------------------------------- the simulation

class Simulation:
    """One policy crawling the simulated web (see the module docstring for the engine)."""

    def __init__(self, rate: np.ndarray, weight: np.ndarray, budget_per_day: float, days: float,
                 warmup_days: float, cycle_s: float, seed: int):
        self.rate, self.weight = rate, weight
        self.n = rate.size
        self.budget_per_cycle = budget_per_day * cycle_s / DAY
        self.cycles = int(round(days * DAY / cycle_s))
        self.cycle_s = cycle_s
        self.start_measure = warmup_days * DAY
        self.end = self.cycles * cycle_s
        self.rng = np.random.default_rng(seed)

    def _fresh_overlap(self, last: np.ndarray, fresh_until: np.ndarray, now: float | np.ndarray,
                       lo: float, hi: float) -> np.ndarray:
        """Seconds of [lo, hi] during which the copy fetched at ``last`` was current."""
        a = np.maximum(last, lo)
        b = np.minimum(np.minimum(fresh_until, now), hi)
        return np.maximum(b - a, 0.0)

    def run(self, first_interval: np.ndarray,
            on_fetch: Callable[[np.ndarray, float, np.ndarray], np.ndarray],
            on_day: Callable[[float], None] | None = None) -> dict[str, Any]:
        """``first_interval``: each page's interval after the t = 0 crawl; ``on_fetch(idx, now,
        changed)`` returns the new intervals of the pages fetched at ``now``."""
        n, rng = self.n, self.rng
        last = np.zeros(n)
        fresh_until = rng.exponential(1.0 / self.rate)
        interval = np.asarray(first_interval, dtype=float).copy()
        next_due = rng.uniform(0.0, 1.0, n) * np.where(np.isfinite(interval), interval, 0.0)
        next_due = np.where(np.isfinite(interval), next_due, np.inf)
        fresh_measured = np.zeros(n)
        fresh_all = np.zeros(n)
        fetches = 0
        fetches_measured = 0
        per_page_measured = np.zeros(n, dtype=np.int64)
        daily: list[float] = []
        day_sum = 0.0
        cycles_per_day = int(round(DAY / self.cycle_s))
        wsum = float(np.sum(self.weight))
        for k in range(1, self.cycles + 1):
            now = k * self.cycle_s
            if on_day is not None and (k - 1) % cycles_per_day == 0:
                on_day(now)
            cap = int(math.floor(k * self.budget_per_cycle + 1e-9) - math.floor((k - 1) * self.budget_per_cycle + 1e-9))
            due = np.flatnonzero(next_due <= now)
            if due.size > cap:
                prio = S.priority(self.weight[due], 0, now, next_due[due], interval[due],
                                  score_exponent=1.0, depth_decay=1.0, score_floor=0.0)
                # highest priority first; ties (equal priority) by page number, deterministically
                due = due[np.lexsort((due, -prio))[:cap]]
            # the daily curve: weighted share of current copies, sampled just before and just
            # after each cycle's fetches (the figures above use the exact integrals instead)
            before = float(np.sum(self.weight[fresh_until > now])) / wsum
            if due.size:
                changed = fresh_until[due] <= now
                fresh_measured[due] += self._fresh_overlap(last[due], fresh_until[due], now, self.start_measure, self.end)
                fresh_all[due] += self._fresh_overlap(last[due], fresh_until[due], now, 0.0, self.end)
                new_interval = np.asarray(on_fetch(due, now, changed), dtype=float)
                last[due] = now
                fresh_until[due] = now + rng.exponential(1.0 / self.rate[due])
                interval[due] = new_interval
                next_due[due] = now + new_interval
                fetches += due.size
                if now > self.start_measure:
                    fetches_measured += due.size
                    per_page_measured[due] += 1
            after = float(np.sum(self.weight[fresh_until > now])) / wsum
            day_sum += 0.5 * (before + after)
            if k % cycles_per_day == 0:
                daily.append(day_sum / cycles_per_day)
                day_sum = 0.0
        fresh_measured += self._fresh_overlap(last, fresh_until, self.end, self.start_measure, self.end)
        fresh_all += self._fresh_overlap(last, fresh_until, self.end, 0.0, self.end)
        span = self.end - self.start_measure
        return {
            "weighted_freshness": weighted(fresh_measured / span, self.weight),
            "freshness": float(np.mean(fresh_measured / span)),
            "weighted_freshness_whole_run": weighted(fresh_all / self.end, self.weight),
            "fetches": fetches,
            "fetches_per_day_after_warmup": fetches_measured / (span / DAY),
            "never_refetched": int(np.sum(~np.isfinite(next_due))),
            "daily_weighted_freshness": [round(x, 4) for x in daily],
            "per_page_fetches_after_warmup": per_page_measured,
        }


# --------------------------------------------------------------------------- the policies

def fixed_policy(intervals: np.ndarray):
    """A policy whose intervals never change: (first intervals, on_fetch, on_day)."""
    return intervals, (lambda idx, now, changed: intervals[idx]), None


def calibrate_known_rates(rates: np.ndarray, weight: np.ndarray, budget_per_s: float) -> float:
    """μ at which clamp(optimal_interval(rates)) adds up to the budget (bisection on log μ), for
    the two diagnostic rows that decide on a point value of λ."""
    lo_iv, hi_iv = SCHEDULE["min_interval_s"], SCHEDULE["max_interval_s"]

    def total(mu: float) -> float:
        return float(np.sum(1.0 / np.asarray(S.clamp_interval(S.optimal_interval(rates, weight, mu), lo_iv, hi_iv))))

    lo, hi = -6.0, 14.0
    for _ in range(70):
        mid = 0.5 * (lo + hi)
        if total(10.0 ** mid) > budget_per_s:
            lo = mid
        else:
            hi = mid
    return 10.0 ** hi


def learning_policy(weight: np.ndarray, budget_per_s: float, info: dict[str, Any], point_estimate: bool = False):
    """A crawler that knows only what it observed, the way update would run crawl.crawldb.schedule:
    record_observation after every fetch, then next_interval; μ recalibrated once per simulated
    day with calibrate_fetch_value on the current histories.

    ``point_estimate`` (diagnostic): decide on Cho & Garcia-Molina's point estimate instead of
    the posterior: clamp(optimal_interval(estimate_change_rate(history))), μ calibrated the same
    way on that rule."""
    n = weight.size
    fetch_count = np.ones(n)     # the t = 0 crawl is the first content observation
    change_count = np.zeros(n)
    first = np.zeros(n)
    last = np.zeros(n)
    changed_at = np.full(n, np.nan)
    limits = {k: SCHEDULE[k] for k in ("min_interval_s", "max_interval_s")}
    prior = {k: SCHEDULE[k] for k in ("prior_min_change_s", "prior_max_change_s")}
    info["fetch_value_s_by_day"] = []

    def intervals(idx, mu: float):
        if point_estimate:
            rates = S.estimate_change_rate(fetch_count[idx], change_count[idx], first[idx], last[idx], **prior)
            return S.clamp_interval(S.optimal_interval(rates, weight[idx], mu), **limits)
        return S.next_interval(fetch_count[idx], change_count[idx], first[idx], last[idx], weight[idx],
                               fetch_value_s=mu, **limits, **prior)

    def calibrate(now: float) -> None:
        if point_estimate:
            rates = S.estimate_change_rate(fetch_count, change_count, first, last, **prior)
            mu = calibrate_known_rates(rates, weight, budget_per_s)
        else:
            mu = S.calibrate_fetch_value(fetch_count, change_count, first, last, weight, budget_per_s,
                                         **limits, **prior)
        info["fetch_value_s"] = mu
        info["fetch_value_s_by_day"].append(round(mu, 1))

    def on_fetch(idx: np.ndarray, now: float, changed: np.ndarray) -> np.ndarray:
        (fetch_count[idx], change_count[idx], first[idx], last[idx],
         changed_at[idx]) = S.record_observation(fetch_count[idx], change_count[idx], first[idx], last[idx],
                                                 changed_at[idx], now, changed)
        return intervals(idx, info["fetch_value_s"])

    calibrate(0.0)
    first_iv = intervals(np.arange(n), info["fetch_value_s"])  # after the t = 0 crawl: nothing compared yet
    info["rate_estimates"] = lambda: S.estimate_change_rate(fetch_count, change_count, first, last, **prior)
    return first_iv, on_fetch, calibrate


# --------------------------------------------------------------------------- the benchmark

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Simulate refresh policies on pages with known Poisson change "
                                            "rates and compare importance-weighted freshness.")
    p.add_argument("--pages", type=int, default=10000, help="simulated pages (default 10000)")
    p.add_argument("--days", type=float, default=90.0, help="simulated days (default 90)")
    p.add_argument("--warmup-days", type=float, default=30.0,
                   help="days left out of the 'after warm-up' figures (default 30)")
    p.add_argument("--budget", type=float, default=None, help="fetches per day (default pages / 10)")
    p.add_argument("--cycle-hours", type=float, default=1.0, help="hours between generate steps (default 1)")
    p.add_argument("--min-change-s", type=float, default=300.0, help="shortest mean time between changes (default 300)")
    p.add_argument("--max-change-s", type=float, default=365 * DAY, help="longest mean time between changes (default 1 year)")
    p.add_argument("--importance-sigma", type=float, default=1.0, help="σ of the lognormal importance (default 1)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--target", type=float, default=0.85, help="required ours / optimum (default 0.85)")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    args = p.parse_args(argv)
    if args.budget is None:
        args.budget = args.pages / 10.0
    if args.pages < 10 or args.days <= 0 or not 0 <= args.warmup_days < args.days or args.budget <= 0:
        p.error("need --pages >= 10, --days > 0, 0 <= --warmup-days < --days, --budget > 0")
    if args.cycle_hours <= 0 or (24.0 / args.cycle_hours) != round(24.0 / args.cycle_hours):
        p.error("--cycle-hours must divide 24")
    if not 0 < args.min_change_s < args.max_change_s:
        p.error("need 0 < --min-change-s < --max-change-s")
    return args


POLICIES = ("uniform", "proportional", "optimum", "ours", "point_estimate", "oracle")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    facts = machine_facts()
    rng = np.random.default_rng(args.seed)
    n = args.pages
    mean_change_s = np.exp(rng.uniform(math.log(args.min_change_s), math.log(args.max_change_s), n))
    rate = 1.0 / mean_change_s
    weight = rng.lognormal(0.0, args.importance_sigma, n)
    weight /= weight.mean()
    budget_per_s = args.budget / DAY

    # fixed-interval policies and their analytic freshness F(λ, f)
    uniform_f = np.full(n, budget_per_s / n)
    proportional_f = budget_per_s * rate / rate.sum()
    optimum_f, optimum_mu = optimum_frequencies(rate, weight, budget_per_s)
    oracle_mu = calibrate_known_rates(rate, weight, budget_per_s)
    oracle_iv = np.asarray(S.clamp_interval(S.optimal_interval(rate, weight, oracle_mu),
                                            SCHEDULE["min_interval_s"], SCHEDULE["max_interval_s"]))
    freqs = {"uniform": uniform_f, "proportional": proportional_f, "optimum": optimum_f, "oracle": 1.0 / oracle_iv}
    analytic = {k: weighted(freshness(rate, f), weight) for k, f in freqs.items()}
    analytic_unweighted = {k: float(np.mean(freshness(rate, f))) for k, f in freqs.items()}

    result: dict[str, Any] = {
        "benchmark": "schedule", "machine": facts,
        "params": {"pages": n, "days": args.days, "warmup_days": args.warmup_days, "budget_per_day": args.budget,
                   "cycle_hours": args.cycle_hours, "min_change_s": args.min_change_s,
                   "max_change_s": args.max_change_s, "importance_sigma": args.importance_sigma,
                   "seed": args.seed, "schedule": SCHEDULE},
        "command": "python bench/schedule.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "analytic_weighted_freshness": analytic, "analytic_freshness": analytic_unweighted,
        "optimum_fetch_value_s": optimum_mu, "oracle_fetch_value_s": oracle_mu,
        "optimum_pages_never_refreshed": int(np.sum(optimum_f == 0)),
        "optimum_pages_below_cycle": int(np.sum((optimum_f > 0) & (1.0 / np.maximum(optimum_f, 1e-300) < args.cycle_hours * 3600))),
        "policies": {},
    }
    print(f"schedule bench: {n:,} pages, {args.days:g} days (warm-up {args.warmup_days:g}), "
          f"budget {args.budget:,.0f} fetches/day, a generate step every {args.cycle_hours:g} h", flush=True)
    ours_info: dict[str, Any] = {}
    point_info: dict[str, Any] = {}
    for name in POLICIES:
        t0 = time.perf_counter()
        if name == "ours":
            first_iv, on_fetch, on_day = learning_policy(weight, budget_per_s, ours_info)
        elif name == "point_estimate":
            first_iv, on_fetch, on_day = learning_policy(weight, budget_per_s, point_info, point_estimate=True)
        elif name == "oracle":
            first_iv, on_fetch, on_day = fixed_policy(oracle_iv)
        else:
            f = freqs[name]
            with np.errstate(divide="ignore"):
                first_iv, on_fetch, on_day = fixed_policy(np.where(f > 0, 1.0 / f, np.inf))
        sim = Simulation(rate, weight, args.budget, args.days, args.warmup_days, args.cycle_hours * 3600.0, args.seed)
        res = sim.run(first_iv, on_fetch, on_day)
        res["seconds"] = round(time.perf_counter() - t0, 2)
        per_page = res.pop("per_page_fetches_after_warmup")
        # fetches spent on pages the optimum never refreshes (they change faster than w/μ)
        res["share_of_fetches_on_pages_not_worth_it"] = float(per_page[optimum_f == 0].sum() / max(per_page.sum(), 1))
        result["policies"][name] = res
        print(f"  {name:<14} weighted freshness {res['weighted_freshness']:.4f} "
              f"(unweighted {res['freshness']:.4f}), {res['fetches_per_day_after_warmup']:,.0f} fetches/day, "
              f"{res['seconds']:.1f} s", flush=True)

    est = ours_info["rate_estimates"]()
    log_err = np.log10(est / rate)
    result["ours_fetch_value_s_final"] = ours_info["fetch_value_s"]
    result["ours_fetch_value_s_by_day"] = ours_info["fetch_value_s_by_day"]
    result["ours_rate_estimate_log10_error"] = {
        "median_abs": float(np.median(np.abs(log_err))),
        "p90_abs": float(np.quantile(np.abs(log_err), 0.9)),
        "weighted_median_abs": float(np.median(np.abs(log_err[weight > np.median(weight)]))),
    }
    pol = result["policies"]
    opt = pol["optimum"]["weighted_freshness"]
    result["ratios_to_optimum"] = {k: pol[k]["weighted_freshness"] / opt for k in POLICIES}
    result["seconds"] = round(time.perf_counter() - started, 1)

    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"check: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failures.append(what)

    ours = pol["ours"]["weighted_freshness"]
    check(ours > pol["uniform"]["weighted_freshness"], "ours beats uniform")
    check(ours > pol["proportional"]["weighted_freshness"], "ours beats proportional")
    check(ours >= args.target * opt, f"ours >= {args.target:g} x optimum after warm-up")
    check(abs(pol["uniform"]["weighted_freshness"] / analytic["uniform"] - 1.0) <= 0.02,
          "simulated uniform within 2 % of its analytic freshness")
    return finish(result, failures, args.out_json, report)


def report(result: dict[str, Any]) -> None:
    m, p, pol = result["machine"], result["params"], result["policies"]
    ratios = result["ratios_to_optimum"]
    an = result["analytic_weighted_freshness"]
    print()
    print(f"### Schedule quality (bench/schedule.py) — {m['date_utc']}, commit {m['git_commit']}")
    print()
    print(f"- Command: `{result['command'].strip()}` — {p['pages']:,} pages, {p['days']:g} simulated days, "
          f"figures after a {p['warmup_days']:g}-day warm-up; budget {p['budget_per_day']:,.0f} fetches/day; "
          f"a generate step every {p['cycle_hours']:g} h; seed {p['seed']}; {result['seconds']:.0f} s wall "
          f"on {m['nproc']} cores (load {m['loadavg_at_start'][0]} → {m['loadavg_at_end'][0]}).")
    print(f"- Pages: mean time between changes log-uniform {fmt(p['min_change_s'] / 60, 0)} min … "
          f"{fmt(p['max_change_s'] / DAY, 0)} days; importance lognormal σ={p['importance_sigma']:g} (mean 1).")
    print(f"- Optimum (Cho & Garcia-Molina 2003, true rates, unclamped): μ = {result['optimum_fetch_value_s']:,.0f} s; "
          f"{result['optimum_pages_never_refreshed']:,} pages never refreshed, "
          f"{result['optimum_pages_below_cycle']:,} wanting less than one cycle.")
    print(f"- Ours: μ calibrated daily on its own histories, final {result['ours_fetch_value_s_final']:,.0f} s "
          f"(oracle μ on true rates {result['oracle_fetch_value_s']:,.0f} s); point estimates r̂ at the end: "
          f"median |log10(est/true)| {result['ours_rate_estimate_log10_error']['median_abs']:.2f}, "
          f"p90 {result['ours_rate_estimate_log10_error']['p90_abs']:.2f}.")
    print()
    print("| policy | **weighted freshness** | ÷ optimum | unweighted | analytic F (weighted) | fetches/day "
          "| fetches on pages not worth it |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    labels = {"uniform": "uniform", "proportional": "proportional (interval ∝ 1/λ, true λ)",
              "optimum": "optimum (true λ)", "ours": "**ours** (learned λ)",
              "point_estimate": "ours' rule on the point estimate r̂ (diagnostic)",
              "oracle": "ours' rule with true λ (diagnostic)"}
    for k in POLICIES:
        r = pol[k]
        ratio = f"**{ratios[k]:.3f}**" if k == "ours" else f"{ratios[k]:.3f}"
        analytic = f"{an[k]:.4f}" if k in an else "-"
        print(f"| {labels[k]} | **{r['weighted_freshness']:.4f}** | {ratio} | {r['freshness']:.4f} | {analytic} | "
              f"{r['fetches_per_day_after_warmup']:,.0f} | {r['share_of_fetches_on_pages_not_worth_it']:.0%} |")
    daily = pol["ours"]["daily_weighted_freshness"]
    print()
    step = max(1, len(daily) // 9)
    print("- Ours, weighted freshness by day: " + ", ".join(f"d{i + 1} {daily[i]:.3f}" for i in range(0, len(daily), step)))
    print(f"- Checks failed: {', '.join(result['checks_failed']) or 'none'}.")


if __name__ == "__main__":
    sys.exit(main())
