#!/usr/bin/env python
"""Can a refresh allocation be near both freshness optima AND leave no class of pages staler than
uniform refresh would? (issue 32: "no page kind or change class fresher under uniform refresh than
under ours"). Analytic, steady state, TRUE change rates, on the replay web of
tests/test_refresh_allocation.py (4 hosts x 40 pages: kinds home / important / normal / deep, weights
4 / 2 / 1 / 0.5; classes by mean time between changes: fast < 60 s, medium < 600 s, slow, never).

Run:      PYTHONPATH=. .venv/bin/python bench/uniform_floor.py [--seeds 1,2,3] [--shares 0.125,0.25]
          [--cycle-s 32] [--out-json FILE]
What:     per seed and budget (share x pages per cycle of --cycle-s seconds), Cho & Garcia-Molina's optimal
          allocation for the weights W^0 (plain) and W^0.5, then the same with the constraint that every
          class and every kind is at least as fresh as under uniform refresh of the same budget: the
          constraint's Lagrange multipliers are weights on the groups' pages, found by raising the
          weight of every group below its floor by 3 % until none is.
Prints:   per run, each allocation's plain freshness ÷ the plain optimum and weighted ÷ the weighted
          optimum, and whether every group is at least as fresh as under uniform refresh.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import finish, machine_facts  # noqa: E402
from crawl.crawldb import schedule  # noqa: E402
from tests import test_refresh_allocation as replay  # noqa: E402

WEIGHTS = {"home": 4.0, "important": 2.0, "normal": 1.0, "deep": 0.5}
STEP = 1.03
ROUNDS = 400


def freshness(rate: np.ndarray, interval: np.ndarray) -> np.ndarray:
    """F(λ, 1/I) per page (1 for a page that never changes, 0 for one never refreshed)."""
    x = rate * np.where(np.isinf(interval), 0.0, interval)
    f = np.where(x > 0, -np.expm1(-x) / np.where(x > 0, x, 1.0), 1.0)
    return np.where(rate == 0, 1.0, np.where(np.isinf(interval), 0.0, f))


def allocate(rate: np.ndarray, weight: np.ndarray, budget_per_s: float) -> np.ndarray:
    """C&G-M's optimal intervals for these weights at the budget (bisection on the multiplier)."""
    lo, hi = 1e-8, 1e8
    for _ in range(200):
        mu = math.sqrt(lo * hi)
        interval = np.asarray(schedule.optimal_interval(rate, weight, mu))
        lo, hi = (mu, hi) if np.sum(np.where(np.isinf(interval), 0.0, 1.0 / interval)) > budget_per_s else (lo, mu)
    return np.asarray(schedule.optimal_interval(rate, weight, hi))


def one_run(seed: int, share: float, cycle_s: float) -> dict:
    web = replay.Web(seed)
    n = len(web.kind)
    rate = np.where(np.isinf(web.mean), 0.0, 1.0 / web.mean)
    classes = np.where(np.isinf(web.mean), "never", np.where(web.mean < 60, "fast",
                                                              np.where(web.mean < 600, "medium", "slow")))
    w = np.array([WEIGHTS[k] for k in web.kind])
    budget = share * n / cycle_s
    uniform = freshness(rate, np.full(n, n / budget))
    groups = {**{c: classes == c for c in ("fast", "medium", "slow")}, **{k: web.kind == k for k in WEIGHTS}}
    plain_opt = freshness(rate, allocate(rate, np.ones(n), budget)).mean()
    weighted_opt = freshness(rate, allocate(rate, w, budget)) @ w
    out = {"seed": seed, "share": share, "cycle_s": cycle_s, "allocations": {}}
    for name, base in (("W^0", np.ones(n)), ("W^0.5", np.sqrt(w))):
        for constrained in (False, True):
            weight = base.copy()
            for _ in range(ROUNDS if constrained else 1):
                fresh = freshness(rate, allocate(rate, weight, budget))
                below = [g for g, members in groups.items() if fresh[members].mean() < uniform[members].mean() - 1e-4]
                if not constrained or not below:
                    break
                for g in below:
                    weight[groups[g]] *= STEP
            key = name + (", no group below uniform" if constrained else "")
            out["allocations"][key] = {"plain": float(fresh.mean() / plain_opt), "weighted": float(fresh @ w / weighted_opt),
                                       "groups_below_uniform": below}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--shares", default="0.125,0.25")
    parser.add_argument("--cycle-s", type=float, default=32.0)
    parser.add_argument("--out-json")
    args = parser.parse_args(argv)
    runs = [one_run(int(s), float(b), args.cycle_s) for s in args.seeds.split(",") for b in args.shares.split(",")]
    result = {"machine": machine_facts(), "args": vars(args), "runs": runs}

    def report(res):
        print("plain ÷ plain optimum / weighted ÷ weighted optimum (true rates); groups below uniform refresh")
        for r in res["runs"]:
            cells = "  ".join(f"{k}: {a['plain']:.4f} / {a['weighted']:.4f} {a['groups_below_uniform'] or 'none'}"
                              for k, a in r["allocations"].items())
            print(f"seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g} s: {cells}")
        for key in res["runs"][0]["allocations"]:
            print(f"lowest, {key}: plain {min(r['allocations'][key]['plain'] for r in res['runs']):.4f}, weighted "
                  f"{min(r['allocations'][key]['weighted'] for r in res['runs']):.4f}")
    return finish(result, [], args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
