#!/usr/bin/env python
"""How far the crawler's refresh allocation is from allocations that meet issue 32's two targets
at once (plain freshness >= 0.97 of the plain optimum, importance-weighted >= 0.98 of the weighted
optimum), on the replay web of tests/test_refresh_allocation.py (no Spark, no HTTP: the crawler's
own selection, transition and fit of the fetch value on a simulated Poisson web, 4 hosts x 40
pages of kinds home / important / normal / deep, weights 4 / 2 / 1 / 0.5).

Run:      PYTHONPATH=. .venv/bin/python bench/refresh_frontier.py [--seeds 1,2,3] [--shares 0.25,0.125]
          [--cycle-s 16,32] [--conf schedule.score_exponent=0.35 ...] [--score realized|expected]
          [--floor-rounds 150] [--out-json FILE]
What:     per seed, budget share and cycle length, the crawler's fetches (its first fetches and its
          refetch count per cycle are then given to every other allocation, as the live benchmark
          does), and Cho & Garcia-Molina's optimal allocation with the TRUE change rates for the
          weights W^a, a = 0 (the plain optimum) ... 1 (the weighted optimum): a family of
          allocations between the two objectives, each scored both ways over the last two thirds
          of the run. Also the crawler's rules once more with learning made perfect ("ours, true
          rates": every URL's change history replaced by one that pins its posterior at its true
          rate), which splits what ours loses into what its rules cost and what learning costs;
          and the pages ours parked: changing every minute to every 2 h (worth refreshing), yet
          left at schedule.max_interval_s after at most PARKED_CHANGES dated changes (two
          short Last-Modified ages make a page changing every minute look like one changing every
          few seconds, too fast to be worth a fetch, and it is not looked at again).
          And two references for the third target, "no change class or kind staler than under uniform
          refresh": uniform refresh itself (equal frequencies), and W^0.75 with the weights of
          bench/uniform_floor.py that leave no class or kind staler than uniform refresh (true rates,
          steady state), raised further (3 % a round, at most --floor-rounds) for any group still
          staler than uniform refresh in this replay's own score: can even an oracle that knows the
          rates, the classes and the change times' outcome meet all three targets in a run?
Prints:   per run, ours, ours with true rates and each W^a as plain / weighted shares of their
          optima, and the groups ours and the floored oracle leave staler than uniform refresh; per policy, the lowest of each over all runs (the targets are met together
          where both are above them); the parked pages and the plain freshness they lost against
          the plain optimum; and fetches per page by kind and change class for ours, W^0.5, W^1.
Scores:   ``realized`` (the default, as the live benchmark): the share of the window each page's
          stored copy was the live version, from the simulated change times. ``expected``: the same
          in expectation given the fetch times, Σ (1 − e^(−λd)) / λ over the gaps d between fetches
          (a page's changes after a fetch are independent of when the next fetch comes, which only
          depends on what was seen before): the same mean, without the change times' noise, which
          moves a run's share by ~0.01 (issue 32: "Learning prototypes" in BENCHMARKS.md).
Learning: the crawler's own (crawl/crawldb/schedule_fit.py: the fitted rate prior and the value of
          what a fetch teaches, as the replay calls it); ``--conf schedule.fit_rate_prior=false`` or
          ``--conf schedule.information_horizon_cycles=0`` leaves either out.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from typing import Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import finish, machine_facts  # noqa: E402
import uniform_floor  # noqa: E402  (bench/uniform_floor.py)
from crawl.crawldb import schedule  # noqa: E402
from tests import test_refresh_allocation as replay  # noqa: E402
from tests.conftest import make_config  # noqa: E402

WEIGHTS = uniform_floor.WEIGHTS
EXPONENTS = (0.0, 0.25, 0.5, 0.75, 1.0)
KINDS = ("home", "important", "normal", "deep")
CLASSES = ("fast", "medium", "slow", "never")
TRUE_RATES = "ours, true rates"
# The oracle of issue 32's third target: C&G-M with the true rates for W^FLOOR_EXPONENT, its groups'
# weights raised until no change class or kind is staler than under uniform refresh (analytically).
FLOOR_EXPONENT = 0.75
FLOORED = f"W^{FLOOR_EXPONENT}, floor"
FLOOR_ROUNDS = 150
# A pinned history: this many seconds known unchanged, with λ·PIN_S changes each dated to the second.
PIN_S = 1e7
PARKED_CHANGES = 3


def page_of(url: str) -> int:
    """The replay page a URL names (the inverse of replay.Web.url)."""
    return int(url.rsplit("/p", 1)[1])


@contextlib.contextmanager
def recorded_transitions(web: "replay.Web", pin_true_rates: bool) -> Iterator[dict[int, dict]]:
    """The replay's update transition (replay.apply_fetch) wrapped: yields each page's latest row;
    with ``pin_true_rates`` every row's exposure columns are replaced, before the transition and
    after it, by a history that pins the posterior at the page's true rate."""
    last: dict[int, dict] = {}
    transition = replay.apply_fetch

    def pinned(state: dict) -> dict:
        page = page_of(state["url"])
        rate = 0.0 if math.isinf(web.mean[page]) else 1.0 / float(web.mean[page])
        return {**state, "unchanged_s": PIN_S, "exposure_changes": rate * PIN_S, "change_span_s": rate * PIN_S}

    def recorded(state, outcome, policy):
        out = transition(pinned(state) if pin_true_rates else state, outcome, policy)
        out = pinned(out) if pin_true_rates else out
        last[page_of(out["url"])] = out
        return out

    replay.apply_fetch = recorded
    try:
        yield last
    finally:
        replay.apply_fetch = transition


def optimal_frequencies(rate: np.ndarray, weights: np.ndarray, budget_per_s: float) -> np.ndarray:
    """The weighted C&G-M optimum with the true rates: the multiplier at which the intervals use
    the budget (bisection), and their frequencies."""
    lo, hi = 1e-6, 1e6
    for _ in range(100):
        mu = (lo * hi) ** 0.5
        f = 1.0 / np.asarray(schedule.optimal_interval(rate, weights, mu))
        lo, hi = (mu, hi) if f.sum() > budget_per_s else (lo, mu)
    return 1.0 / np.asarray(schedule.optimal_interval(rate, weights, hi))


def expected_freshness(web: "replay.Web", events, t_lo: float, t_hi: float) -> np.ndarray:
    """Per page: the expected share of [t_lo, t_hi] its stored copy was the live version, given
    the fetch times (the ``expected`` score: module docstring)."""
    fresh = np.zeros(len(web.kind))
    times: dict[int, list[float]] = {}
    for page, t, _ in events:
        times.setdefault(page, []).append(t)
    for page, ts in times.items():
        ts.sort()
        rate = 0.0 if math.isinf(web.mean[page]) else 1.0 / float(web.mean[page])
        for k, t in enumerate(ts):
            lo, hi = max(t, t_lo), min(ts[k + 1] if k + 1 < len(ts) else t_hi, t_hi)
            if hi > lo:
                fresh[page] += (hi - lo) if rate == 0 else (math.exp(-rate * (lo - t)) - math.exp(-rate * (hi - t))) / rate
    return fresh / (t_hi - t_lo)


def one_run(seed: int, share: float, cycle_s: float, confs: dict[str, str], score: str = "realized",
            floor_rounds: int = FLOOR_ROUNDS) -> dict:
    replay.CYCLE_S = cycle_s
    web = replay.Web(seed)
    top_n = int(share * len(web.kind))
    cfg = make_config(**{"schedule.min_interval_s": 5, "schedule.max_interval_s": 7200,
                         "schedule.prior_min_change_s": 5, "schedule.prior_max_change_s": 86400,
                         "generate.top_n": top_n, "generate.max_urls_per_host": top_n, **confs})
    with recorded_transitions(web, pin_true_rates=False) as rows:
        events, refetches = replay.crawl(web, top_n, cfg)
    with recorded_transitions(web, pin_true_rates=True):
        oracle_events, _ = replay.crawl(web, top_n, cfg)
    first: dict[int, float] = {}
    for page, t, _ in events:
        first.setdefault(page, t)
    warm = replay.CYCLES // 3
    t_lo = replay.START + 5.0 + warm * replay.CYCLE_S
    t_hi = replay.START + 5.0 + replay.CYCLES * replay.CYCLE_S
    rate = np.where(np.isinf(web.mean), 0.0, 1.0 / web.mean)
    budget = sum(refetches[warm:]) / (t_hi - t_lo)
    w = np.array([WEIGHTS[k] for k in web.kind])
    policies = {"ours": events, TRUE_RATES: oracle_events}
    for a in EXPONENTS:
        policies[f"W^{a}"] = replay.replay_credits(web, optimal_frequencies(rate, w ** a, budget), first, refetches)
    n = len(web.kind)
    score_of = expected_freshness if score == "expected" else replay.freshness
    groups = uniform_floor.change_groups(web.mean, web.kind)
    policies["uniform"] = replay.replay_credits(web, np.full(n, budget / n), first, refetches)
    uniform = score_of(web, policies["uniform"], t_lo, t_hi)
    # the floor's weights as bench/uniform_floor.py fits them (steady state), then raised 3 % a round
    # for every group still staler than uniform refresh in this replay's own score
    floored, _ = uniform_floor.floored_weights(rate, w ** FLOOR_EXPONENT, budget, groups,
                                               uniform_floor.freshness(rate, np.full(n, n / budget)))
    for round_ in range(max(floor_rounds, 0) + 1):
        policies[FLOORED] = replay.replay_credits(web, optimal_frequencies(rate, floored, budget), first, refetches)
        got = score_of(web, policies[FLOORED], t_lo, t_hi)
        below = uniform_floor.groups_below(got, uniform, groups, tolerance=0.0)
        if not below or round_ == floor_rounds:
            break
        for g in below:
            floored[groups[g]] *= uniform_floor.STEP
    fresh = {name: score_of(web, ev, t_lo, t_hi) for name, ev in policies.items()}
    plain_opt, weighted_opt = fresh["W^0.0"].mean(), fresh["W^1.0"] @ w
    classes = uniform_floor.change_class(web.mean)
    max_interval = float(cfg["schedule.max_interval_s"])

    def is_parked(page: int) -> bool:
        row = rows[page]  # every page is fetched in the replay
        return (60 <= web.mean[page] < math.inf and row["next_fetch_at"] is not None
                and row["next_fetch_at"] - row["last_fetched_at"] >= max_interval
                and (row["exposure_changes"] or 0) <= PARKED_CHANGES)
    parked = np.array([is_parked(page) for page in range(len(web.kind))])
    lost = fresh["W^0.0"] - fresh["ours"]
    out = {"seed": seed, "share": share, "cycle_s": cycle_s, "shares": {}, "fetches_per_page": {},
           "below_uniform": {name: uniform_floor.groups_below(f, fresh["uniform"], groups, tolerance=0.0)
                             for name, f in fresh.items() if name != "uniform"},
           "parked": {"pages": int(parked.sum()), "mean_change_s": [round(float(m)) for m in web.mean[parked]],
                      "plain_lost": round(float(lost[parked].sum()), 3), "plain_lost_all": round(float(lost.sum()), 3)}}
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
    parser.add_argument("--score", choices=("realized", "expected"), default="realized",
                        help="realized freshness (as the live benchmark) or its expectation given the fetch times")
    parser.add_argument("--floor-rounds", type=int, default=FLOOR_ROUNDS,
                        help=f"rounds of the floored oracle's tuning on the replay's own score ({FLOOR_ROUNDS}; 0: as fitted in steady state)")
    parser.add_argument("--out-json")
    args = parser.parse_args(argv)
    confs = dict(c.split("=", 1) for c in args.conf)
    runs = [one_run(int(s), float(b), float(c), confs, args.score, args.floor_rounds) for s in args.seeds.split(",")
            for b in args.shares.split(",") for c in args.cycle_s.split(",")]
    names = list(runs[0]["shares"])
    lowest = {n: [min(r["shares"][n][i] for r in runs) for i in (0, 1)] for n in names}
    mean = {n: [float(np.mean([r["shares"][n][i] for r in runs])) for i in (0, 1)] for n in names}
    result = {"machine": machine_facts(), "args": vars(args), "runs": runs, "lowest": lowest, "mean": mean}

    def report(res):
        print("plain / weighted freshness as shares of the plain / weighted optimum (true rates)")
        for r in res["runs"]:
            cells = "  ".join(f"{n} {p:.3f}/{q:.3f}" for n, (p, q) in r["shares"].items())
            print(f"seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g} s: {cells}")
        print("lowest over the runs (targets: plain >= 0.97, weighted >= 0.98):")
        for n, (p, q) in res["lowest"].items():
            print(f"  {n:16s} plain {p:.4f}  weighted {q:.4f}" + ("  both met" if p >= 0.97 and q >= 0.98 else "")
                  + "   (mean {:.4f} / {:.4f})".format(*res["mean"][n]))
        print(f"groups (change class, kind) staler than under uniform refresh, ours | {FLOORED}:")
        for r in res["runs"]:
            b = r["below_uniform"]
            print(f"  seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g}: {b['ours'] or '-'} | {b[FLOORED] or '-'}")
        print("pages ours parked at max_interval_s that change every 1 min ... 2 h (their mean change times),")
        print("and the plain freshness (in pages) they lost against the plain optimum, of all ours lost:")
        for r in res["runs"]:
            k = r["parked"]
            print(f"  seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g}: {k['pages']} {k['mean_change_s']}"
                  f"  {k['plain_lost']:.2f} of {k['plain_lost_all']:.2f}")
        print("fetches per page in the window, by kind/class (ours | W^0.5 | W^1), each run:")
        for r in res["runs"]:
            f = r["fetches_per_page"]
            cells = "  ".join(f"{key} {f['ours'][key]:g}|{f['W^0.5'][key]:g}|{f['W^1.0'][key]:g}" for key in f["ours"])
            print(f"  seed {r['seed']} share {r['share']} cycle {r['cycle_s']:g}: {cells}")
    return finish(result, [], args.out_json, report)


if __name__ == "__main__":
    sys.exit(main())
