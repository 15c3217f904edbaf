"""Every rule of the recrawl schedule (crawl/crawldb/schedule.py)."""
import math

import numpy as np
import pytest

from crawl.crawldb import schedule as S

DAY = 86400.0
LIMITS = {"min_interval_s": 3600.0, "max_interval_s": 60 * DAY}
PRIOR = {"prior_min_change_s": 60.0, "prior_max_change_s": 10 * 365 * DAY}
POLICY = dict(fetch_value_s=50000.0, **LIMITS, **PRIOR)
IMPORTANCE = {"score_exponent": 0.5, "depth_decay": 0.9, "score_floor": 1e-6}


def interval(history, importance=1.0, **overrides):
    fetch_count, change_count, first, last = history[:4]
    return S.next_interval(fetch_count, change_count, first, last, importance, **dict(POLICY, **overrides))


def poisson_polls(rate, poll_intervals, rng):
    """(fetch_count, change_count, first, last) after polling a Poisson(rate) page at these intervals."""
    history = S.record_observation(0, 0, None, None, None, 0.0, None)
    t = 0.0
    for dt in poll_intervals:
        t += dt
        changed = rng.poisson(rate * dt) > 0
        history = S.record_observation(*history, t, changed)
    return history


# --------------------------------------------------------------------------- history

def test_record_observation_counts_changes_but_not_the_first_copy():
    h = S.record_observation(0, 0, None, None, None, 100.0, True)  # nothing to compare with yet
    assert h == (1, 0, 100.0, 100.0, None)
    h = S.record_observation(*h, 200.0, False)  # same content, or a 304
    assert h == (2, 0, 100.0, 200.0, None)
    h = S.record_observation(*h, 300.0, True)
    assert h == (3, 1, 100.0, 300.0, 300.0)
    assert isinstance(h[0], int) and isinstance(h[2], float)


def test_record_observation_on_arrays():
    fc, cc, first, last, changed_at = S.record_observation(
        np.array([0, 2]), np.array([0, 1]), np.array([np.nan, 10.0]), np.array([np.nan, 50.0]),
        np.array([np.nan, 50.0]), 90.0, np.array([True, True]))
    assert fc.tolist() == [1, 3] and cc.tolist() == [0, 2]
    assert first.tolist() == [90.0, 10.0] and last.tolist() == [90.0, 90.0]
    assert np.isnan(changed_at[0]) and changed_at[1] == 90.0


# --------------------------------------------------------------------------- the estimator

def test_point_estimate_is_cho_garcia_molina_with_one_pseudo_poll():
    # 11 fetches one day apart = 10 polls, 5 changes; + one pseudo-poll with half a change
    rate = S.estimate_change_rate(11, 5, 0.0, 10 * DAY, **PRIOR)
    assert rate == pytest.approx(-math.log((11 - 5.5 + 0.5) / (11 + 0.5)) / DAY)
    # no comparison yet: the pseudo-poll alone, over the geometric middle of the prior range
    middle = math.sqrt(PRIOR["prior_min_change_s"] * PRIOR["prior_max_change_s"])
    assert S.estimate_change_rate(1, 0, 5.0, 5.0, **PRIOR) == pytest.approx(math.log(1.5) / middle)
    assert S.estimate_change_rate(0, 0, None, None, **PRIOR) == pytest.approx(math.log(1.5) / middle)
    # never seen to change: ≈ half a change over the time observed, not 0
    assert S.estimate_change_rate(31, 0, 0.0, 30 * DAY, **PRIOR) == pytest.approx(0.5 / (30 * DAY), rel=0.05)
    # changed at every poll: finite
    assert math.isfinite(S.estimate_change_rate(11, 10, 0.0, 10 * DAY, **PRIOR))


@pytest.mark.parametrize("regular", [True, False])
def test_estimator_converges_to_the_true_rate(regular):
    rng = np.random.default_rng(7)
    true_rate = 1.0 / DAY
    polls = np.full(400, 0.5 * DAY) if regular else rng.uniform(0.25, 0.75, 400) * DAY
    fc, cc, first, last, _ = poisson_polls(true_rate, polls, rng)
    assert S.estimate_change_rate(fc, cc, first, last, **PRIOR) == pytest.approx(true_rate, rel=0.12)


def test_with_a_long_history_the_interval_is_the_known_rate_optimum():
    rng = np.random.default_rng(11)
    true_rate = 1.0 / (3 * DAY)
    target = S.clamp_interval(S.optimal_interval(true_rate, 1.0, POLICY["fetch_value_s"]), **LIMITS)
    polls = np.full(300, target)  # polled at the optimal interval all along
    history = poisson_polls(true_rate, polls, rng)
    assert interval(history) == pytest.approx(target, rel=0.15)


# --------------------------------------------------------------------------- interval rules

ESTABLISHED = (7, 3, 0.0, 6 * DAY, 5 * DAY)  # 6 daily polls, 3 changes: a page worth tracking


def test_unchanged_content_lengthens_the_interval():
    before = interval(ESTABLISHED)
    after = interval(S.record_observation(*ESTABLISHED, 7 * DAY, False))
    assert after > before


def test_changed_content_shortens_the_interval():
    before = interval(ESTABLISHED)
    after = interval(S.record_observation(*ESTABLISHED, 7 * DAY, True))
    assert after < before


def test_304s_keep_lengthening_the_interval():
    history, t, seen = ESTABLISHED, 6 * DAY, [interval(ESTABLISHED)]
    for _ in range(10):
        t += seen[-1]
        history = S.record_observation(*history, t, False)  # 304 Not Modified: an unchanged observation
        seen.append(interval(history))
    assert all(b > a for a, b in zip(seen, seen[1:]))


def test_a_page_changing_at_every_visit_is_visited_less_and_less():
    # Cho & Garcia-Molina's optimal policy: a page that changes faster than is worth chasing
    # gets *longer* intervals the more changes it shows (not Nutch's "changed → shorter").
    history, t, seen = (1, 0, 0.0, 0.0, None), 0.0, []
    for _ in range(12):
        t += interval(history)
        history = S.record_observation(*history, t, True)
        seen.append(interval(history))
    assert all(b > a for a, b in zip(seen[1:], seen[2:]))
    assert seen[-1] > 2 * seen[0]


def test_important_pages_get_shorter_intervals():
    seen = [interval(ESTABLISHED, w) for w in (0.3, 1.0, 3.0, 10.0, 30.0)]
    assert all(b < a for a, b in zip(seen, seen[1:]))
    known = [S.optimal_interval(1 / DAY, w, 5000.0) for w in (1.0, 2.0, 4.0)]
    assert known[0] > known[1] > known[2]


def test_intervals_are_clamped_to_min_and_max():
    assert interval(ESTABLISHED, 1e6) == LIMITS["min_interval_s"]  # very important: at most min
    assert interval(ESTABLISHED, 1e-6) == LIMITS["max_interval_s"]  # worthless: at least max
    assert interval(ESTABLISHED, 0.0) == LIMITS["max_interval_s"]
    assert interval(ESTABLISHED, fetch_value_s=0.0) == LIMITS["min_interval_s"]  # fetches are free
    rng = np.random.default_rng(3)
    fc = rng.integers(0, 50, 500)
    cc = np.floor(rng.uniform(0, 1, 500) * np.maximum(fc - 1, 0))
    last = rng.uniform(0, 400 * DAY, 500)
    got = S.next_interval(fc, cc, np.zeros(500), last, rng.lognormal(0, 3, 500), **POLICY)
    assert got.min() >= LIMITS["min_interval_s"] and got.max() <= LIMITS["max_interval_s"]
    assert S.clamp_interval(math.inf, **LIMITS) == LIMITS["max_interval_s"]
    assert S.clamp_interval(1.0, **LIMITS) == LIMITS["min_interval_s"]


def test_arrays_give_the_same_intervals_as_scalars():
    fc, cc = np.array([1, 4, 9, 30]), np.array([0, 3, 2, 29])
    first, last = np.zeros(4), np.array([0.0, 3 * DAY, 20 * DAY, 40 * DAY])
    w = np.array([1.0, 2.0, 0.5, 5.0])
    together = S.next_interval(fc, cc, first, last, w, **POLICY)
    one_by_one = [S.next_interval(int(a), int(b), float(c), float(d), float(e), **POLICY)
                  for a, b, c, d, e in zip(fc, cc, first, last, w)]
    assert isinstance(one_by_one[0], float)
    assert together.tolist() == pytest.approx(one_by_one, rel=1e-12)


def test_optimal_interval_meets_the_lagrange_condition():
    mu = 20000.0
    for rate, w in ((1 / (30 * DAY), 1.0), (1 / DAY, 2.0), (1 / 3600, 50.0)):
        iv = S.optimal_interval(rate, w, mu)
        x = rate * iv
        assert w * (1 - (1 + x) * math.exp(-x)) / rate == pytest.approx(mu, rel=1e-9)
    slow = 1 / (3650 * DAY)  # slow pages: I ≈ √(2μ / (wλ)), not 1/λ
    assert S.optimal_interval(slow, 1.0, mu) == pytest.approx(math.sqrt(2 * mu / slow), rel=0.01)
    assert S.optimal_interval(1.0 / mu, 1.0, mu) == math.inf  # μλ/w ≥ 1: not worth refreshing
    assert S.optimal_interval(0.0, 1.0, mu) == math.inf


def test_calibrated_fetch_value_meets_the_budget():
    rng = np.random.default_rng(5)
    n = 2000
    fc = rng.integers(1, 20, n)
    cc = np.floor(rng.uniform(0, 1, n) * (fc - 1))
    last = (fc - 1) * rng.uniform(0.1, 10, n) * DAY
    w = rng.lognormal(0, 1, n)
    budget = n / (5 * DAY)
    mu = S.calibrate_fetch_value(fc, cc, np.zeros(n), last, w, budget, **LIMITS, **PRIOR)
    total = np.sum(1.0 / S.next_interval(fc, cc, np.zeros(n), last, w, fetch_value_s=mu, **LIMITS, **PRIOR))
    assert total == pytest.approx(budget, rel=0.01)
    huge = S.calibrate_fetch_value(fc, cc, np.zeros(n), last, w, 10 * n / 3600.0, **LIMITS, **PRIOR)
    tiny = S.calibrate_fetch_value(fc, cc, np.zeros(n), last, w, n / (100 * 60 * DAY), **LIMITS, **PRIOR)
    assert huge == 0.0 and tiny == math.inf


def test_fitted_fetch_value_asks_for_the_headroom_times_the_refresh_budget():
    """Issue 32, finding 1: μ fitted to the cycle's refresh budget, from a sample of the
    histories, makes all of them ask for headroom × top_n's refresh share per cycle."""
    rng = np.random.default_rng(11)
    n = 3000
    fc = rng.integers(1, 12, n)
    cc = np.floor(rng.uniform(0, 1, n) * (fc - 1))
    last = (fc - 1) * rng.uniform(0.1, 10, n) * DAY
    w = rng.lognormal(0, 1, n)
    cycle_s, per_cycle = 6 * 3600.0, 150
    sample = rng.choice(n, size=1000, replace=False)
    mu = S.fit_fetch_value(fc[sample], cc[sample], np.zeros(1000), last[sample], w[sample],
                           refresh_per_cycle=per_cycle, cycle_s=cycle_s, sampled_share=1000 / n, headroom=1.25,
                           **LIMITS, **PRIOR)
    asked = np.sum(1.0 / S.next_interval(fc, cc, np.zeros(n), last, w, fetch_value_s=mu, **LIMITS, **PRIOR))
    assert asked * cycle_s == pytest.approx(1.25 * per_cycle, rel=0.1)  # the sample stands for all
    assert S.fit_fetch_value([], [], [], [], [], refresh_per_cycle=10, cycle_s=60, sampled_share=1.0,
                             headroom=1.25, **LIMITS, **PRIOR) == math.inf  # no history: nothing to fit
    assert S.fit_fetch_value(fc, cc, np.zeros(n), last, w, refresh_per_cycle=0, cycle_s=60, sampled_share=1.0,
                             headroom=1.25, **LIMITS, **PRIOR) == math.inf  # no refresh budget


def test_cycle_seconds_is_the_median_gap_of_the_last_segments():
    assert S.cycle_seconds([0, 60, 120, 190, 250, 900, 960, 1020], now=2000) == 60  # one long pause
    assert S.cycle_seconds([100], now=130) == 30  # one segment: at least as long as it has lasted
    assert S.cycle_seconds([], now=5) == 1.0
    assert S.cycle_seconds([100, 100], now=100) == 1.0  # two generates in one second


def test_refresh_budget_leaves_new_urls_their_quota_only():
    assert S.refresh_budget(100, 30, 500) == 70
    assert S.refresh_budget(100, 30, 12) == 88  # few new URLs: the rest of their quota refreshes
    assert S.refresh_budget(100, 30, 0) == 100


# --------------------------------------------------------------------------- errors

def test_gone_intervals_grow_then_stop_growing_then_stop():
    seen = [S.gone_interval(k, DAY, 60 * DAY, 10) for k in range(1, 11)]
    assert seen[:4] == [DAY, 2 * DAY, 4 * DAY, 8 * DAY]
    assert max(seen) == 60 * DAY and seen[-3:] == [60 * DAY] * 3
    assert all(b >= a for a, b in zip(seen, seen[1:]))
    assert S.gone_interval(11, DAY, 60 * DAY, 10) is None  # kept as gone, never due again
    assert S.gone_interval(1000, DAY, 60 * DAY, 0) == 60 * DAY  # 0: re-checked forever


def test_retries_grow_and_stop_after_max_retries():
    assert [S.retry_interval(k, 3600.0, 3, 60 * DAY) for k in (1, 2, 3)] == [3600.0, 7200.0, 14400.0]
    assert S.retry_interval(4, 3600.0, 3, 60 * DAY) is None
    assert S.retry_interval(3, DAY, 10, 2 * DAY) == 2 * DAY  # capped at the max interval


# --------------------------------------------------------------------------- priority

def test_importance_from_score_and_depth():
    imp = lambda s, d: S.importance(s, d, **IMPORTANCE)  # noqa: E731
    assert imp(1.0, 0) == 1.0  # a seed
    assert imp(0.5, 1) < imp(0.5, 0) and imp(0.01, 2) < imp(0.04, 2)
    assert imp(0.0, 0) == pytest.approx(1e-3)  # the floor, compressed: still ranks above nothing


def test_priority_overdue_important_then_overdue_unimportant_then_not_due():
    now = 100 * DAY
    prio = lambda score, due_at, iv=DAY: S.priority(score, 1, now, due_at, iv, **IMPORTANCE)  # noqa: E731
    overdue_important = prio(1.0, now - DAY)
    overdue_unimportant = prio(0.001, now - DAY)
    not_due = prio(1.0, now + 1)
    assert overdue_important > overdue_unimportant > not_due == 0.0
    assert prio(0.1, now - 3 * DAY) > prio(0.1, now - DAY) > prio(0.1, now)  # more overdue first
    assert prio(0.1, now - DAY, iv=DAY) > prio(0.1, now - DAY, iv=10 * DAY)  # relative to its interval
    assert S.staleness(now, now, None) == 1.0  # never fetched, due now
    ranked = np.argsort(-S.priority(np.array([1.0, 0.001, 1.0]), 1, now, np.array([now - DAY, now - DAY, now + 1]),
                                    DAY, **IMPORTANCE))
    assert ranked.tolist() == [0, 1, 2]


def test_last_modified_dates_changes_and_narrows_what_is_known_unchanged():
    """record_exposure (issue 32): without Last-Modified a poll counts whole, unchanged or
    changed; with it, the last change happened within the second it names and nothing after it,
    and the first answer's Last-Modified dates a change and credits the page's age, both taken
    back once a change comes with a Last-Modified that did not move (a server that does not keep
    it). Returns (unchanged_s, change_span_s, exposure_changes)."""
    credit = 86400.0
    # first answer, a week-old copy: older than the prior's slowest change, credited up to the cap
    assert S.record_exposure(None, None, 0, None, None, 1000.0, False, 1000.0 - 7 * DAY,
                             max_age_credit_s=credit) == (credit, 0.0, 0)
    # first answer 600 s old: a change dated to its second, 599 s unchanged since
    assert S.record_exposure(None, None, 0, None, None, 1000.0, False, 400.0, max_age_credit_s=credit) == (599.0, 1.0, 1)
    assert S.record_exposure(None, None, 0, None, None, 1000.0, False, None, max_age_credit_s=credit) == (0.0, 0.0, 0)
    # an unchanged poll adds its interval; a changed one without a usable Last-Modified its whole interval
    assert S.record_exposure(599.0, 1.0, 1, 1000.0, 1000.0, 1300.0, False, 400.0, max_age_credit_s=credit,
                             exposure_changes=1) == (899.0, 1.0, 1)
    assert S.record_exposure(600.0, 0.0, 1, 1000.0, 1000.0, 1300.0, True, None, max_age_credit_s=credit) == (600.0, 300.0, 1)
    # a change with a Last-Modified inside the interval: dated to its second, 99 s unchanged after it
    assert S.record_exposure(600.0, 0.0, 1, 1000.0, 1000.0, 1300.0, True, 1200.0, max_age_credit_s=credit) == (699.0, 1.0, 1)
    # rows from before the count was kept: it starts from change_count
    assert S.record_exposure(600.0, 400.0, 3, 1000.0, 1000.0, 1300.0, True, None, max_age_credit_s=credit,
                             change_count=2) == (600.0, 700.0, 3)
    # a change whose Last-Modified did not move: the first answer's age and change are taken back
    # (at most the 300 s observed before this poll were known unchanged)
    assert S.record_exposure(599.0, 1.0, 2, 1000.0, 1300.0, 1500.0, True, 400.0, max_age_credit_s=credit,
                             exposure_changes=1, change_count=0) == (300.0, 200.0, 1)


def test_a_dated_change_tells_a_fast_page_from_a_medium_one():
    """Issue 32, finding 2: a page polled every 300 s that changed at every poll. Without dates
    the posterior cannot tell 10 s from 100 s between changes; Last-Modified 10 s before each
    poll can, and the fetch is then worth far less (the page changes faster than any affordable
    interval keeps up with) than for one whose dates say 150 s."""
    kw = dict(fetch_value_s=50.0, min_interval_s=5.0, max_interval_s=7200.0, prior_min_change_s=5.0,
              prior_max_change_s=86400.0)

    def history(age):
        u, c, k = 0.0, 0.0, None
        for i in range(6):
            u, c, k = S.record_exposure(u, c, i, 0.0, None if i == 0 else 300.0 * (i - 1), 300.0 * i, i > 0,
                                        300.0 * i - age, max_age_credit_s=86400.0, exposure_changes=k,
                                        change_count=max(i - 1, 0))
        return S.next_interval_and_value(6, 5, 0.0, 1500.0, 1.0, unchanged_s=u, change_span_s=c,
                                         exposure_changes=k, **kw)

    undated = S.next_interval_and_value(6, 5, 0.0, 1500.0, 1.0, unchanged_s=0.0, change_span_s=1500.0, **kw)
    fast, medium = history(10.0), history(150.0)
    assert fast[1] * (300.0 / fast[0]) ** fast[2] < 0.3 * medium[1] * (300.0 / medium[0]) ** medium[2]
    assert fast[1] * (300.0 / fast[0]) ** fast[2] < 0.5 * undated[1] * (300.0 / undated[0]) ** undated[2]


def test_the_refresh_value_is_what_a_fetch_buys():
    """next_interval_and_value: at the interval the value is the fetch value μ (unless clamped);
    value × (τ / interval)^slope follows E_posterior[w ∂F/∂f] as τ grows; a page long unchanged
    (old Last-Modified) is worth far less than one seen changing now and then."""
    kw = dict(fetch_value_s=50.0, min_interval_s=5.0, max_interval_s=7200.0, prior_min_change_s=5.0,
              prior_max_change_s=86400.0)
    interval, value, slope = S.next_interval_and_value(6, 3, 0.0, 1500.0, 1.0, **kw)
    assert 5.0 < interval < 7200.0 and value == pytest.approx(50.0, rel=1e-3) and 0.0 < slope <= 2.0
    grids = S._grids(5.0, 86400.0, 5.0, 7200.0)
    post, w, _, _ = S._weighted_posterior(6, 3, 0.0, 1500.0, 1.0, grids[0])
    exact = float((post @ S._refresh_gain(grids[0][:, None], np.array([[2 * interval]])))[0, 0]) * w[0]
    assert value * 2.0 ** slope == pytest.approx(exact, rel=1e-9)  # the slope spans [I, 2I]
    def bought_after(tau, **history):  # what generate ranks by, τ seconds after the last fetch
        i, v, k = S.next_interval_and_value(2, history.pop("changes"), 0.0, 300.0, 1.0, **history, **kw)
        return v * (tau / i) ** k

    assert bought_after(600.0, changes=0, unchanged_s=86400.0, change_span_s=0.0) < 0.1 * bought_after(
        600.0, changes=1, unchanged_s=0.0, change_span_s=300.0)


# --------------------------------------------------------------------------- learning (issue 32)

REPLAY = {"min_interval_s": 5.0, "max_interval_s": 7200.0, "prior_min_change_s": 5.0, "prior_max_change_s": 86400.0}


def _dated_histories(mean_change_s, n, rng, polls=4, poll_s=120.0):
    """(fetch_count, change_count, first, last, unchanged_s, change_span_s, exposure_changes) of n
    pages changing every ``mean_change_s`` on average, polled ``polls`` times ``poll_s`` apart with
    every change dated by Last-Modified (schedule.record_exposure)."""
    out = []
    for _ in range(n):
        u, c, k, t, seen = 0.0, 0.0, 0, 0.0, 0
        age = rng.exponential(mean_change_s)
        u, c, k = S.record_exposure(u, c, 0, None, None, t, False, t - age, max_age_credit_s=86400.0,
                                    exposure_changes=0, change_count=0)
        for i in range(1, polls):
            prev, t = t, t + poll_s
            last_change = None
            g = prev + rng.exponential(mean_change_s)
            while g <= t:
                last_change, g = g, g + rng.exponential(mean_change_s)
            u, c, k = S.record_exposure(u, c, i, 0.0, prev, t, last_change is not None,
                                        None if last_change is None else math.floor(last_change),
                                        max_age_credit_s=86400.0, exposure_changes=k, change_count=seen)
            seen += last_change is not None
        out.append((polls, seen, 0.0, t, u, c, k))
    return tuple(np.array(col, dtype=float) for col in zip(*out))


def test_the_fitted_rate_prior_is_where_the_crawls_pages_change():
    """An empirical-Bayes prior (fit_rate_prior): fitted to pages that change every ~100 s, its
    mass sits there, not spread log-uniformly over 5 s ... 1 day; too few histories: None."""
    rng = np.random.default_rng(3)
    fc, cc, first, last, u, c, k = _dated_histories(100.0, 200, rng)
    prior = np.array(S.fit_rate_prior(fc, cc, first, last, unchanged_s=u, change_span_s=c, exposure_changes=k,
                                      prior_min_change_s=5.0, prior_max_change_s=86400.0))
    rates = S._grids(5.0, 86400.0, 5.0, 7200.0)[0]
    assert prior.sum() == pytest.approx(1.0) and prior.min() >= S.RATE_PRIOR_FLOOR / prior.size * 0.999
    near = (rates > 1 / 400.0) & (rates < 1 / 25.0)  # within 4x of the pages' rate
    assert prior[near].sum() > 0.6 > near.mean()
    assert S.fit_rate_prior(fc[:5], cc[:5], first[:5], last[:5], unchanged_s=u[:5], change_span_s=c[:5],
                            exposure_changes=k[:5], prior_min_change_s=5.0, prior_max_change_s=86400.0) is None
    # a page whose two dated changes were 4 s and 6 s old: under the log-uniform prior it looks
    # like one changing every few seconds; under the crawl's prior like the pages it resembles
    history = dict(unchanged_s=8.0, change_span_s=2.0, exposure_changes=2)
    flat, _, _, _ = S._weighted_posterior(2, 1, 0.0, 960.0, 1.0, rates, **history)
    fitted, _, _, _ = S._weighted_posterior(2, 1, 0.0, 960.0, 1.0, rates, **history, prior=prior)
    assert float(flat[0] @ rates) > 2 * float(fitted[0] @ rates)  # 2.9x slower in the mean rate


def test_what_a_fetch_teaches_is_worth_a_recheck_of_an_uncertain_verdict():
    """The information value (information_value): nothing to learn about a page whose rate is
    known; something about one judged on two short Last-Modified ages, which the myopic rule
    parks at max_interval_s ("too fast to be worth a fetch") and the look-ahead re-checks."""
    rates, intervals, _ = S._grids(5.0, 86400.0, 5.0, 7200.0)
    known = np.zeros((1, rates.size))
    known[0, 40] = 1.0
    assert np.all(S.information_value(known, np.ones(1), 2.0, rates, intervals) < 1e-12)
    history = dict(unchanged_s=8.0, change_span_s=2.0, exposure_changes=2)
    post, w, _, _ = S._weighted_posterior(2, 1, 0.0, 960.0, 1.0, rates, **history)
    value = S.information_value(post, w, 2.0, rates, intervals)
    assert value.min() >= 0.0 and value.max() > 0.0
    kw = dict(fetch_value_s=20.0, **REPLAY, **history)
    myopic = S.next_interval_and_value(2, 1, 0.0, 960.0, 1.0, **kw)
    looking = S.next_interval_and_value(2, 1, 0.0, 960.0, 1.0, information_horizon_s=1000.0, **kw)
    assert myopic[0] == 7200.0 and looking[0] < 7200.0 and looking[1] > myopic[1]
    # only for URLs whose rate rests on at most information_max_changes dated changes
    capped = S.next_interval_and_value(2, 1, 0.0, 960.0, 1.0, information_horizon_s=1000.0,
                                       information_max_changes=1, **kw)
    assert capped == myopic
    # with arrays, row by row as with scalars
    both = S.next_interval_and_value(np.array([2, 2]), np.array([1, 1]), 0.0, 960.0, 1.0, fetch_value_s=20.0,
                                     **REPLAY, unchanged_s=np.array([8.0, 8.0]), change_span_s=np.array([2.0, 2.0]),
                                     exposure_changes=np.array([2, 5]), information_horizon_s=1000.0,
                                     information_max_changes=3)
    assert both[0][0] == pytest.approx(looking[0]) and both[0][1] == 7200.0


def test_update_fits_the_prior_the_horizon_and_a_fetch_value_that_counts_what_fetches_teach():
    """crawl.crawldb.schedule_fit.fit, as update calls it: the horizon is information_horizon_cycles
    × the cycle; the fetch value fitted with the information value is at least the one without
    (a fetch is worth more, so the budget is used at a higher μ); nothing without histories."""
    from crawl.crawldb import schedule_fit
    from tests.conftest import make_config
    rng = np.random.default_rng(9)
    fc, cc, first, last, u, c, k = _dated_histories(300.0, 300, rng)
    histories = {"observed_count": fc, "change_count": cc, "first_observed_at": first, "last_observed_at": last,
                 "score": np.full(fc.size, 0.01), "depth": np.full(fc.size, 2.0), "unchanged_s": u,
                 "change_span_s": c, "exposure_changes": k}
    limits = {f"schedule.{key}": int(v) if key.endswith("interval_s") else v for key, v in REPLAY.items()}
    cfg = make_config(**limits)
    budget = {"refresh_per_cycle": 30, "cycle_s": 20.0, "sampled_share": 1.0, "seed": 1}
    fitted = schedule_fit.fit(histories, cfg, **budget)
    assert fitted.information_horizon_s == 20.0 * float(cfg["schedule.information_horizon_cycles"]) > 0
    assert len(fitted.rate_prior) == S.RATE_GRID_POINTS
    myopic = schedule_fit.fit(histories, make_config(**limits, **{"schedule.information_horizon_cycles": 0}),
                              **budget)
    assert myopic.information_horizon_s == 0.0
    assert fitted.fetch_value_s > myopic.fetch_value_s > 0
    empty = {key: np.empty(0) for key in histories}
    assert schedule_fit.fit(empty, cfg, **budget) is schedule_fit.NOT_FITTED
