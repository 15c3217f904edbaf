#!/usr/bin/env python
"""How far the crawler's refresh allocation is from allocations that meet issue 32's two targets
at once (plain freshness >= 0.97 of the plain optimum, importance-weighted >= 0.98 of the weighted
optimum), on the replay web of tests/test_refresh_allocation.py (no Spark, no HTTP: the crawler's
own selection, transition and fit of the fetch value on a simulated Poisson web, 4 hosts x 40
pages of kinds home / important / normal / deep, weights 4 / 2 / 1 / 0.5).

Run:      PYTHONPATH=. .venv/bin/python bench/refresh_frontier.py [--seeds 1,2,3] [--shares 0.25,0.125]
          [--cycle-s 16,32] [--conf schedule.score_exponent=0.35 ...] [--out-json FILE]
What:     per seed, budget share and cycle length, the crawler's fetches (its first fetches and its
          refetch count per cycle are then given to every other allocation, as the live benchmark
          does), and Cho & Garcia-Molina's optimal allocation with the TRUE change rates for the
          weights W^a, a = 0 (the plain optimum) ... 1 (the weighted optimum): a family of
          allocations between the two objectives, each scored both ways over the last two thirds
          of the run.
Prints:   per run, ours and each W^a as plain / weighted shares of their optima; per a, the
          lowest of each over all runs (the targets are met together where both are above them);
          and fetches per page by kind and change class for ours, W^0.5 and W^1.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import finish, machine_facts  # noqa: E402
from crawl.crawldb import schedule  # noqa: E402
from tests import test_refresh_allocation as replay  # noqa: E402
from tests.conftest import make_config  # noqa: E402

WEIGHTS = {"home": 4.0, "important": 2.0, "normal": 1.0, "deep": 0.5}
EXPONENTS = (0.0, 0.25, 0.5, 0.75, 1.0)
KINDS = ("home", "important", "normal", "deep")
CLASSES = ("fast", "medium", "slow", "never")


def optimal_frequencies(rate: np.ndarray, weights: np.ndarray, budget_per_s: float) -> np.ndarray:
    """The weighted C&G-M optimum with the true rates: the multiplier at which the intervals use
    the budget (bisection), and their frequencies."""
    lo, hi = 1e-6, 1e6
    for _ in range(100):
        mu = (lo * hi) ** 0.5
        f = 1.0 / np.asarray(schedule.optimal_interval(rate, weights, mu))
        lo, hi = (mu, hi) if f.sum() > budget_per_s else (lo, mu)
    return 1.0 / np.asarray(schedule.optimal_interval(rate, weights, hi))


def change_class(mean: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(mean), "never", np.where(mean < 60, "fast", np.where(mean < 600, "medium", "slow")))


def one_run(seed: int, share: float, cycle_s: float, confs: dict[str, str]) -> dict:
    replay.CYCLE_S = cycle_s
    web = replay.Web(seed)
    top_n = int(share * len(web.kind))
    cfg = make_config(**{"schedule.min_interval_s": 5, "schedule.max_interval_s": 7200,
                         "schedule.prior_min_change_s": 5, "schedule.prior_max_change_s": 86400,
                         "generate.top_n": top_n, "generate.max_urls_per_host": top_n, **confs})
    events, refetches = replay.crawl(web, top_n, cfg)
    first: dict[int, float] = {}
    for page, t, _ in events:
        first.setdefault(page, t)
    warm = replay.CYCLES // 3
    t_lo = replay.START + 5.0 + warm * replay.CYCLE_S
    t_hi = replay.START + 5.0 + replay.CYCLES * replay.CYCLE_S
    rate = np.where(np.isinf(web.mean), 0.0, 1.0 / web.mean)
    budget = sum(refetches[warm:]) / (t_hi - t_lo)
    w = np.array([WEIGHTS[k] for k in web.kind])
    policies = {"ours": events}
    for a in EXPONENTS:
        policies[f"W^{a}"] = replay.replay_credits(web, optimal_frequencies(rate, w ** a, budget), first, refetches)
    fresh = {name: replay.freshness(web, ev, t_lo, t_hi) for name, ev in policies.items()}
    plain_opt, weighted_opt = fresh["W^0.0"].mean(), fresh["W^1.0"] @ w
    classes = change_class(web.mean)
    out = {"seed": seed, "share": share, "cycle_s": cycle_s, "shares": {}, "fetches_per_page": {}}
    for name, ev in policies.items():
        out["shares"][name] = [float(fresh[name].mean() / plain_opt), float((fresh[name] @ w) / weighted_opt)]
        counts = np.bincount([p for p, t, _ in ev if t_lo <= t < t_hi and first[p] < t], minlength=len(web.kind))
        out["fetches_per_page"][name] = {
            f"{k}/{c}": round(float(counts[(web.kind == k) & (classes == c)].mean()), 2)
            for k in KINDS for c in CLASSES if ((web.kind == k) & (classes == c)).any()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--shares", default="0.25,0.125")
    parser.add_argument("--cycle-s", default="16,32")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a crawler setting for the replay, e.g. schedule.score_exponent=0.35")
    parser.add_argument("--out-json")
    args = parser.parse_args(argv)
    confs = dict(c.split("=", 1) for c in args.conf)
    runs = [one_run(int(s), float(b), float(c), confs) for s in args.seeds.split(",")
            for b in args.shares.split(",") for c in args.cycle_s.split(",")]
    names = list(runs[0]["shares"])
    lowest = {n: [min(r["shares"][n][i] for r in runs) for i in (0, 1)] for n in names}
    result = {"machine": machine_facts(), "args": vars(args), "runs": runs, "lowest": lowest}

    def report(res):
        print("plain / weighted freshness as shares of the plain / weighted optimum (true rates)")
        for r in res["runs"]:
            cells = "  ".join(f"{n} {p:.3f}/{q:.3f}" for n, (p, q) in r["shares"].items())
            print(f"seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g} s: {cells}")
        print("lowest over the runs (targets: plain >= 0.97, weighted >= 0.98):")
        for n, (p, q) in res["lowest"].items():
            print(f"  {n:7s} plain {p:.3f}  weighted {q:.3f}" + ("  both met" if p >= 0.97 and q >= 0.98 else ""))
        print("fetches per page in the window, by kind/class (ours | W^0.5 | W^1), each run:")
        for r in res["runs"]:
            f = r["fetches_per_page"]
            cells = "  ".join(f"{key} {f['ours'][key]:g}|{f['W^0.5'][key]:g}|{f['W^1.0'][key]:g}" for key in f["ours"])
            print(f"  seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g}: {cells}")
    return finish(result, [], args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
