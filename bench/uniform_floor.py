#!/usr/bin/env python
"""Can a refresh allocation be near both freshness optima AND leave no class of pages staler than
uniform refresh would? (issue 32: "no page kind or change class fresher under uniform refresh than
under ours"). Analytic, steady state, TRUE change rates, on the replay web of
tests/test_refresh_allocation.py (4 hosts x 40 pages: kinds home / important / normal / deep, weights
4 / 2 / 1 / 0.5; classes by mean time between changes: fast < 60 s, medium < 600 s, slow, never).

Run:      PYTHONPATH=. .venv/bin/python bench/uniform_floor.py [--seeds 1,2,3] [--shares 0.125,0.25]
          [--cycle-s 32] [--out-json FILE]
What:     per seed and budget (share x pages per cycle of --cycle-s seconds), Cho & Garcia-Molina's optimal
          allocation for the weights W^0 (plain), W^0.5 and W^0.75, then the same with the constraint that every
          class and every kind is at least as fresh as under uniform refresh of the same budget: the
          constraint's Lagrange multipliers are weights on the groups' pages, found by raising the
          weight of every group below its floor by 3 % until none is. Then three floors a crawler
          could hold without knowing where the benchmark puts its class boundaries (60 s, 600 s),
          each scored on those classes: the same floor on bands of the change rate (1 or 2 per
          decade of mean time between changes) and the kinds, and a floor on every page that
          changes (none waits longer than the uniform period).
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


def allocate(rate: np.ndarray, weight: np.ndarray, budget_per_s: float, cap: float = math.inf) -> np.ndarray:
    """C&G-M's optimal intervals for these weights at the budget (bisection on the multiplier); with
    ``cap``, no page that changes waits longer than ``cap`` seconds."""
    def intervals(mu: float) -> np.ndarray:
        interval = np.asarray(schedule.optimal_interval(rate, weight, mu))
        return np.where(rate > 0, np.minimum(interval, cap), interval)
    lo, hi = 1e-8, 1e8
    for _ in range(200):
        mu = math.sqrt(lo * hi)
        lo, hi = (mu, hi) if np.sum(np.where(np.isinf(iv := intervals(mu)), 0.0, 1.0 / iv)) > budget_per_s else (lo, mu)
    return intervals(hi)


def groups_below(fresh: np.ndarray, floor: np.ndarray, groups: dict[str, np.ndarray],
                 tolerance: float = 1e-4) -> list[str]:
    """The groups whose mean ``fresh`` is below their mean ``floor`` (by more than ``tolerance``)."""
    return [g for g, members in groups.items() if fresh[members].mean() < floor[members].mean() - tolerance]


def floored_weights(rate: np.ndarray, weight: np.ndarray, budget_per_s: float, groups: dict[str, np.ndarray],
                    floor: np.ndarray, rounds: int = ROUNDS) -> tuple[np.ndarray, list[str]]:
    """``weight`` with every group's pages raised by STEP per round while the group's mean F at the
    C&G-M optimum is below its mean ``floor`` (the constraint's Lagrange multipliers as weights):
    the weights, and the groups still below after ``rounds``."""
    weight = weight.copy()
    below: list[str] = []
    for _ in range(rounds):
        fresh = freshness(rate, allocate(rate, weight, budget_per_s))
        below = groups_below(fresh, floor, groups)
        if not below:
            break
        for g in below:
            weight[groups[g]] *= STEP
    return weight, below


def change_class(mean: np.ndarray) -> np.ndarray:
    """Each page's change class by its mean time between changes: fast < 60 s, medium < 600 s, slow, never."""
    return np.where(np.isinf(mean), "never", np.where(mean < 60, "fast", np.where(mean < 600, "medium", "slow")))


def change_groups(mean: np.ndarray, kind: np.ndarray) -> dict[str, np.ndarray]:
    """The benchmark's change classes (fast < 60 s, medium < 600 s, slow) and page kinds, as masks."""
    classes = change_class(mean)
    return {**{c: classes == c for c in ("fast", "medium", "slow")}, **{k: kind == k for k in WEIGHTS}}


def rate_bands(mean: np.ndarray, per_decade: int) -> dict[str, np.ndarray]:
    """Groups a crawler could floor without knowing the benchmark's classes: the changing pages in
    bands of mean time between changes, ``per_decade`` bands per factor of 10."""
    band = np.floor(np.log10(np.where(np.isinf(mean), 1.0, mean)) * per_decade)
    return {f"1e{b / per_decade:g} s": (band == b) & ~np.isinf(mean) for b in np.unique(band[~np.isinf(mean)])}


def one_run(seed: int, share: float, cycle_s: float) -> dict:
    web = replay.Web(seed)
    n = len(web.kind)
    rate = np.where(np.isinf(web.mean), 0.0, 1.0 / web.mean)
    w = np.array([WEIGHTS[k] for k in web.kind])
    budget = share * n / cycle_s
    uniform = freshness(rate, np.full(n, n / budget))
    groups = change_groups(web.mean, web.kind)
    plain_opt = freshness(rate, allocate(rate, np.ones(n), budget)).mean()
    weighted_opt = freshness(rate, allocate(rate, w, budget)) @ w
    out = {"seed": seed, "share": share, "cycle_s": cycle_s, "allocations": {}}

    def record(key: str, interval: np.ndarray) -> None:
        fresh = freshness(rate, interval)
        out["allocations"][key] = {"plain": float(fresh.mean() / plain_opt), "weighted": float(fresh @ w / weighted_opt),
                                   "groups_below_uniform": groups_below(fresh, uniform, groups)}
    for name, base in (("W^0", np.ones(n)), ("W^0.5", np.sqrt(w)), ("W^0.75", w ** 0.75)):
        record(name, allocate(rate, base, budget))
        weight, _ = floored_weights(rate, base, budget, groups, uniform)
        record(name + ", no group below uniform", allocate(rate, weight, budget))
    # floors that do not know the benchmark's classes: on bands of change rates (and the kinds), or on
    # every page that changes (none waits longer than the uniform period); scored on the classes
    base = np.sqrt(w)
    for k in (1, 2):
        weight, _ = floored_weights(rate, base, budget, {**rate_bands(web.mean, k), **{g: groups[g] for g in WEIGHTS}},
                                    uniform)
        record(f"W^0.5, floor on {k} rate bands per decade and kinds", allocate(rate, weight, budget))
    record("W^0.5, every changing page at least as often as uniform", allocate(rate, base, budget, cap=n / budget))
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
