"""bench/schedule_family.py: the family of changing webs, its Nutch baseline and its scoring must be
what its docstring says, or the per-draw table in BENCHMARKS.md "Schedule family" measures
something else. bench/'s own test, not the crawler's: `make bench-test`."""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from schedule_family import (CYCLE_S, HELD_OUT, KIND_WEIGHT, START, Web, draw_params,  # noqa: E402
                             freshness, nutch, nutch_next, parse_args, uniform)


def test_draws_are_deterministic_and_cover_the_documented_ranges():
    draws = [draw_params(s) for s in range(1, 201)]
    assert draws[0] == draw_params(1)
    assert {d["rates"] for d in draws} == {"log-uniform", "bimodal", "heavy-tailed"}
    assert {d["correlation"] for d in draws} == {"independent", "fast-important", "fast-deep"}
    assert {d["last_modified"] for d in draws} == {"all", "half the hosts", "none"}
    for d in draws:
        assert 0 <= d["never_share"] <= 0.4
        assert 1 / 8 - 1e-3 <= d["budget_share"] <= 1 / 2 + 1e-3
        assert 5 - 0.1 <= d["fastest_s"] <= 51 and 30 * d["fastest_s"] * 0.99 <= d["slowest_s"]
        assert 2 <= d["hosts"] == len(d["sizes"]) <= 8 and min(d["sizes"]) >= 6 and sum(d["sizes"]) <= 420
        assert 0 <= d["fetch_lag_s"] <= 0.4 * CYCLE_S


def test_held_out_draws_are_kept_apart():
    assert not set(HELD_OUT) & set(parse_args([]).seeds)
    assert parse_args(["--held-out"]).seeds == list(HELD_OUT)
    with pytest.raises(SystemExit):
        parse_args(["--seeds", str(HELD_OUT[0])])


def test_a_web_has_the_kinds_shares_and_rates_drawn():
    params = dict(draw_params(3), never_share=0.3, correlation="fast-important", score_noise=0.0)
    web = Web(params, cycles=60)
    assert web.n == sum(params["sizes"]) and (web.kind == "home").sum() == len(params["sizes"])
    never = np.isinf(web.mean)
    assert 0.15 < never.mean() < 0.45
    changing = ~never
    assert params["fastest_s"] * 0.999 <= web.mean[changing].min() and web.mean[changing].max() <= params["slowest_s"] * 1.001
    # fast pages important: the home and important pages change faster than the deep ones
    fast_rank = np.argsort(np.argsort(web.mean))
    assert fast_rank[web.kind == "important"].mean() < fast_rank[web.kind == "deep"].mean()
    assert set(np.unique(web.weight)) <= set(KIND_WEIGHT.values())
    for p in np.flatnonzero(changing)[:5]:  # versions follow the change times
        t = START + float(web.changes[p][0])
        assert web.version(int(p), t - 1e-3) == 0 and web.version(int(p), t + 1e-3) == 1


def _one_page_web(changes: list[float], last_modified: bool = True) -> Web:
    web = Web(dict(draw_params(1), sizes=[6], hosts=1, never_share=0.0), cycles=20)
    web.changes = [np.array(changes, dtype=float)] + [np.empty(0)] * (web.n - 1)
    web.first_age = [100.0] * web.n
    web.sends_last_modified = np.full(web.n, last_modified)
    return web


def test_nutch_adaptive_rule_and_sync_delta():
    limits = {"min_interval": 5.0, "max_interval": 1000.0}
    # inc_rate 0.4 after an unchanged fetch, dec_rate 0.2 after a change, clamped
    assert nutch_next(100.0, False, 0.0, None, sync_delta=True, **limits) == pytest.approx((140.0, 140.0))
    assert nutch_next(100.0, True, 0.0, None, sync_delta=True, **limits) == pytest.approx((80.0, 80.0))
    assert nutch_next(900.0, False, 0.0, None, sync_delta=True, **limits)[0] == 1000.0
    assert nutch_next(5.5, True, 0.0, None, sync_delta=True, **limits)[0] == 5.0
    # sync_delta: after a change the interval is at least the page's age, counted from fetch - 0.3 x age
    assert nutch_next(100.0, True, 1000.0, 700.0, sync_delta=True, **limits) == pytest.approx((300.0, 1210.0))
    assert nutch_next(100.0, True, 1000.0, 990.0, sync_delta=True, **limits) == pytest.approx((80.0, 1077.0))
    assert nutch_next(100.0, True, 1000.0, 700.0, sync_delta=False, **limits) == pytest.approx((80.0, 1080.0))


def test_nutch_fills_every_slot_most_overdue_first():
    web = _one_page_web([])
    first = {p: START for p in range(web.n)}
    slots = [[START + 10.0 + 0.25 * k for k in range(4)], [START + 26.0 + 0.25 * k for k in range(4)]]
    events = nutch(web, first, slots, 0.0, sync_delta=True, first_interval=5.0, min_interval=5.0, max_interval=1000.0)
    refetched = [p for p, t, _ in events if t > START]
    assert len(refetched) == 8
    assert set(refetched[4:]) >= {4, 5}  # the pages not refetched in the first cycle are the most overdue


def test_freshness_is_the_share_of_time_the_copy_is_live():
    web = _one_page_web([50.0])
    lo, hi = START + 10.0, START + 110.0
    # fetched at 0 (version 0, stale from 50) and at 70 (version 1, fresh to the end): 40 + 40 of 100 s
    fresh = freshness(web, [(0, START, 0), (0, START + 70.0, 1)], lo, hi)
    assert math.isclose(fresh[0], 0.8)
    assert fresh[1:].sum() == 0.0  # pages never fetched count as stale


def test_uniform_uses_every_instant_round_robin():
    web = _one_page_web([])
    first = {p: START for p in range(web.n)}
    slots = [[START + 10.0, START + 10.5], [START + 26.0, START + 26.5], [START + 42.0, START + 42.5]]
    events = uniform(web, first, slots, 0.0)
    refetched = [p for p, t, _ in events if t > START]
    assert refetched == [0, 1, 2, 3, 4, 5]
