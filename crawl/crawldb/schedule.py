"""The recrawl schedule as pure functions: change-rate estimate, next interval, retries, priority.

Every function takes plain numbers (times in epoch seconds, intervals in seconds, rates in
changes per second) and returns plain numbers. The numeric ones also accept numpy arrays
(element-wise with broadcasting: pandas columns in a vectorised UDF, or a whole simulated web in
bench/schedule.py); a call with scalars returns a Python float.

History of a URL (what the schedule reads from the crawldb)
-----------------------------------------------------------
``fetch_count``      content observations: fetches that answered 2xx or 304, the first included.
``change_count``     observations whose content differed from the stored copy (the first
                     observation has nothing to compare with and never counts; a 304 is an
                     unchanged observation).
``first_fetched_at`` time of the first content observation.
``last_fetched_at``  time of the latest content observation.
``last_changed_at``  time a change was last detected: kept by ``record_observation`` for analysts
                     and a future change-point guard; the estimators below use counts only.

``record_observation`` folds one 2xx/304 answer into that history; ``next_interval`` reads it.

The model: Poisson changes seen by polling
------------------------------------------
A page changes as a Poisson process of unknown rate λ; a fetch only tells whether *at least
one* change happened since the previous fetch. With n polls at (mean) interval Ī of which X saw a
change, the likelihood is (1 − e^(−λĪ))^X · e^(−λĪ(n − X)) (Cho & Garcia-Molina, "Estimating
frequency of change", ACM TOIT 3(3), 2003). Our intervals vary as the schedule adapts, and the
crawldb keeps only aggregates, so Ī = (last_fetched_at − first_fetched_at) / n; the paper's
estimator for irregular access intervals would need every interval. With the mean, the estimate
errs low when intervals vary a lot (1 − e^(−λI) is concave in I).

Point estimate (``estimate_change_rate``) — for the crawldb column and for analysts
---------------------------------------------------------------------------------
Cho & Garcia-Molina's bias-reduced estimator r̂ = −ln((n − X + 0.5) / (n + 0.5)) / Ī, which,
unlike the naive X / (nĪ), stays finite when every poll saw a change. A prior keeps short
histories sane: one pseudo-poll of length Ī that saw half a change (n → n + 1, X → X + 0.5), and
with no comparison yet Ī is the geometric middle of the prior range below. So a page never seen
to change gets r̂ ≈ 0.5 / (time observed), not 0; the pseudo-poll's weight fades as 1 / (n + 1).

Interval (``next_interval``) — decided on the whole posterior, not on r̂
------------------------------------------------------------------------
Time-averaged freshness of a page refreshed every I = 1/f seconds is
F(λ, f) = (f/λ)(1 − e^(−λ/f)) (Cho & Garcia-Molina, "Effective page refresh policies for web
crawlers", ACM TODS 28(4), 2003). Maximising Σ wᵢ F(λᵢ, fᵢ) (w = importance) subject to
Σ fᵢ = budget gives, with a Lagrange multiplier μ, a condition per page: w ∂F/∂f = μ, i.e. with
x = λI, w(1 − (1 + x)e^(−x)) / λ = μ (``optimal_interval``). So the optimal interval is *not*
1/λ: slow pages get I ≈ √(2μ / (wλ)); no page gets less than ≈ 3.35 μ/w (at λ ≈ 0.54 w/μ); and a
page changing faster than w/μ is not worth refreshing at all — each visit would buy almost no
freshness — so it gets the maximum interval. Since μ is one global constant, each URL's interval
follows from its own data alone, which is what update needs.

λ is not known, only its posterior given the history: prior log-uniform on mean times between
changes in [prior_min_change_s, prior_max_change_s] (a grid of 64 rates), times the likelihood
above. What the crawler maximises is then expected freshness, and since ∂E[F]/∂f = E[∂F/∂f] the
condition becomes E_posterior[w ∂F/∂f] = μ. ``next_interval`` solves it for I on a grid of 64
intervals spanning [min_interval_s, max_interval_s] (log-log interpolation between grid points),
which also applies the clamps: the interval is min_interval_s when even that is worth it, and
max_interval_s when not even that is. There is no separate initial interval: with nothing
compared yet the posterior is the prior (a seed's first interval is ≈ 9 days at μ = 50,000 s).

Deciding on the posterior instead of on r̂ matters most for pages that changed at every visit:
r̂ is then only a lower bound (≈ ln(n + 1.5)/Ī), and plugging it into the condition keeps such a
page near the shortest interval its importance allows (≈ 3.4 μ/w), while the posterior knows
it may well change far faster than is worth chasing. In bench/schedule.py (10,000 pages,
changes every 5 min … 1 year) the point-estimate rule spends half the budget on pages the
optimum never refreshes and reaches 0.86 of the optimum; the posterior spends 28 % and reaches
0.91. The decision is myopic (it does not value what a fetch teaches), which is most of what
separates it from the same rule fed the true rates (0.99).

Learning from the crawl, not only from each URL (issue 32; both fitted by update at every run,
crawl/crawldb/schedule_fit.py):
* ``fit_rate_prior``: the prior above, log-uniform, is replaced by an empirical-Bayes one fitted to
  the crawl's histories, so a page's few observations are read against how this crawl's pages
  change; after one or two short Last-Modified ages a page changing every minute no longer looks
  like one changing every few seconds.
* ``information_value``: the rule above is myopic, it values a fetch only for the freshness it
  buys. For URLs whose rate rests on few dated changes, the table E[w ∂F/∂f](I) also gets what a
  fetch after I is expected to teach (the gain in the best net freshness rate the answer allows)
  × a horizon (schedule.information_horizon_cycles cycles), so an uncertain verdict "too fast to
  be worth a fetch" is checked again instead of parking the page at max_interval_s for good.
In the replay of tests/test_refresh_allocation.py these two with a flatter importance lift the
lowest of 12 runs from 0.940 to 0.972 of the plain optimum in expectation (docs/decisions.md "Live
freshness with learning").

Consequences, all deliberate:
* important pages (larger w) get shorter intervals;
* for a page worth tracking (changes slower than about 0.5 w/μ) an unchanged answer (2xx with
  the same content, or 304) lengthens the interval and a change shortens it;
* a page that changes at (nearly) every visit is visited *less* the more changes it shows, and
  an unchanged answer can make it worth tracking again (shorter interval) — Cho & Garcia-Molina's
  optimal policy, not Nutch's AdaptiveFetchSchedule rule of thumb.

μ is ``schedule.fetch_value_s``: the importance-weighted page-seconds of freshness one more fetch
must buy (importance 1 = a seed). A larger μ means longer intervals and fewer fetches.
``calibrate_fetch_value`` finds the μ at which a crawldb's intervals add up to a fetch budget;
``fit_fetch_value`` is what update calls with it at every run (schedule.fit_fetch_value, the
default): the budget is generate.top_n's refresh share per cycle, the cycle's length measured
from the segments' start times (``cycle_seconds``). generate's top-N enforces the budget anyway;
μ decides how it is shared.

Errors
------
Transient errors (network, 5xx, 429) are retried after ``retry_interval_s`` doubling per
consecutive failure, ``max_retries`` times; after that the URL is gone. Gone answers (404/410,
other permanent 4xx) are re-checked after ``gone_interval_s`` doubling per consecutive gone
answer up to ``max_interval_s``, since sites come back; after ``gone_max_checks`` of them the URL
is kept as gone and no longer re-checked (``None``: never due again; 0 = keep re-checking every
``max_interval_s``).

Priority (``priority``)
-----------------------
generate ranks due URLs by importance × staleness. Importance is
max(score, score_floor)^score_exponent × depth_decay^depth: the OPIC-like score carries the
in-links, the exponent compresses its orders of magnitude, depth is a prior that pages far from
the seeds matter less. Staleness is how overdue the URL is relative to its own interval:
1 + (now − next_fetch_at) / interval once due, 0 before.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from crawl.crawldb.statuses import FETCHED, NOTMODIFIED
from crawl.rule_ops import NUMPY_OPS

# The statuses whose interval the change-rate schedule sets (crawl.crawldb.status FETCHED and
# NOTMODIFIED: a 2xx or a 304), and so the ones ranked by their refresh value.
VALUED_STATUSES = (FETCHED, NOTMODIFIED)

# Last-Modified is an HTTP date: whole seconds (RFC 9110 5.6.7)
LAST_MODIFIED_RESOLUTION_S = 1.0
RATE_GRID_POINTS = 64      # posterior grid: rates, log-spaced over the prior range
INTERVAL_GRID_POINTS = 64  # intervals, log-spaced over [min_interval_s, max_interval_s]

# The point estimate's prior: one pseudo-poll that detected half a change.
_PRIOR_POLLS = 1.0
_PRIOR_CHANGES = 0.5


def _out(x: Any) -> Any:
    """A 0-d result as a Python float, an array as is."""
    arr = np.asarray(x, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def _times(value: Any) -> np.ndarray:
    return np.asarray(np.nan if value is None else value, dtype=float)


def _polls(fetch_count, change_count, first_fetched_at, last_fetched_at):
    """(n polls that could see a change, X changes seen, mean interval Ī or NaN)."""
    n = np.maximum(np.asarray(fetch_count, dtype=float) - 1.0, 0.0)
    x = np.clip(np.asarray(change_count, dtype=float), 0.0, n)
    span = np.where(n > 0, _times(last_fetched_at) - _times(first_fetched_at), np.nan)
    ok = np.isfinite(span) & (n > 0)
    mean_interval = np.where(ok, np.maximum(np.where(ok, span, 0.0), 1.0) / np.maximum(n, 1.0), np.nan)
    return n, np.where(ok, x, 0.0), mean_interval


def exposure(fetch_count, change_count, first_fetched_at, last_fetched_at, unchanged_s=None, change_span_s=None,
             exposure_changes=None):
    """(X changes, U seconds known unchanged, c̄ mean seconds each change is known to lie in,
    known: whether anything was observed) per URL. From the exposure columns when the crawldb has
    them (``record_exposure``: Last-Modified narrows both, and may add the first answer's change:
    ``exposure_changes``, else X is the changes seen), else from the poll counts with every
    interval taken as the mean one: U = (n − X)Ī, c̄ = Ī."""
    n, x, mean_interval = _polls(fetch_count, change_count, first_fetched_at, last_fetched_at)
    derived_u = np.where(np.isfinite(mean_interval), (n - x) * np.nan_to_num(mean_interval), 0.0)
    derived_c = np.where(np.isfinite(mean_interval), x * np.nan_to_num(mean_interval), 0.0)
    u = _times(unchanged_s)
    c = _times(change_span_s)
    k = _times(exposure_changes)
    u, c, k, derived_u, derived_c, x = np.broadcast_arrays(u, c, k, derived_u, derived_c, x)
    have = np.isfinite(u) & np.isfinite(c)
    unchanged = np.where(have, np.maximum(np.nan_to_num(u), 0.0), derived_u)
    span = np.where(have, np.maximum(np.nan_to_num(c), 0.0), derived_c)
    x = np.where(have & np.isfinite(k), np.maximum(np.nan_to_num(k), 0.0), x)
    cbar = np.where(x > 0, np.maximum(span / np.maximum(x, 1.0), 1.0), 0.0)
    return x, unchanged, cbar, (unchanged > 0) | (x > 0)


# --------------------------------------------------------------------------- history

def record_observation(fetch_count, change_count, first_fetched_at, last_fetched_at, last_changed_at,
                       fetched_at, changed):
    """The history after one 2xx or 304 answer at ``fetched_at``: (fetch_count, change_count,
    first_fetched_at, last_fetched_at, last_changed_at).

    ``changed``: content differs from the stored copy (False for a 304 or the same content;
    ignored for the first observation, which has nothing to compare with)."""
    fc = np.asarray(fetch_count, dtype=float)
    first_obs = fc <= 0
    seen_change = np.asarray(False if changed is None else changed, dtype=bool) & ~first_obs
    at = np.asarray(fetched_at, dtype=float)
    first = _times(first_fetched_at)
    new_first = np.where(first_obs | ~np.isfinite(first), at, first)
    new_changed_at = np.where(seen_change, at, _times(last_changed_at))
    out = (fc + 1, np.asarray(change_count, dtype=float) + seen_change, new_first, at + 0.0 * fc,
           new_changed_at)
    if all(np.ndim(v) == 0 for v in out):
        return (int(out[0]), int(out[1]), float(out[2]), float(out[3]),
                None if math.isnan(float(out[4])) else float(out[4]))
    return tuple(np.broadcast_arrays(*out))


def record_exposure(unchanged_s, change_span_s, observed_count, first_observed_at, previous_at, fetched_at, changed,
                    modified_at=None, *, max_age_credit_s: float, exposure_changes=None,
                    change_count=None) -> tuple[float, float, int]:
    """(unchanged_s, change_span_s, exposure_changes) after one 2xx or 304 answer at
    ``fetched_at``: the seconds the URL is known to have stayed unchanged, the seconds within which
    its changes lie, and how many changes those are.

    ``observed_count``: content observations before this one, the first at ``first_observed_at``
    and the last at ``previous_at``; ``changed`` as for record_observation; ``modified_at``: the
    answer's Last-Modified (epoch seconds; None when absent or unusable); ``exposure_changes``: the
    count so far (None: ``change_count``, the changes seen so far, as before the count was kept).

    Without Last-Modified a poll that saw no change adds its interval to the first sum and one
    that saw a change to the second. Last-Modified dates the last change (Cho & Garcia-Molina,
    "Estimating frequency of change", ACM TOIT 3(3), 2003: the last-modified date): a change
    seen with a Last-Modified inside the poll's interval happened within the second it names
    (an HTTP date's resolution, ``LAST_MODIFIED_RESOLUTION_S``) and nothing happened after it.
    The likelihood of that is λ·e^(−λ·age) up to a constant, the density of the last change at
    that date, whatever came before it in the interval; before, such a change was spread from the
    previous poll to the date, which for a page changing far faster than it is polled said almost
    nothing (issue 32, finding 2). The first answer's Last-Modified dates a change too, and says
    the page stayed unchanged since: a page observed at a random moment shows an age drawn from
    its own change process. An age beyond ``max_age_credit_s`` (the prior's slowest change) only
    credits that much unchanged time. A change seen with a Last-Modified outside the interval
    shows the server does not keep it: the poll counts whole, and the first answer's age and
    change are taken back (what is known unchanged is then at most the time observed)."""
    unchanged = float(unchanged_s or 0.0)
    span = float(change_span_s or 0.0)
    seen = int(change_count or 0)
    changes = int(seen if exposure_changes is None else exposure_changes)
    at = float(fetched_at)
    mod = None if modified_at is None or not math.isfinite(float(modified_at)) else float(modified_at)
    if int(observed_count or 0) <= 0 or previous_at is None:
        if mod is not None and mod < at:
            age = at - mod
            if age < float(max_age_credit_s):
                return (unchanged + max(age - LAST_MODIFIED_RESOLUTION_S, 0.0),
                        span + min(LAST_MODIFIED_RESOLUTION_S, age), changes + 1)
            unchanged += float(max_age_credit_s)
        return unchanged, span, changes
    prev = float(previous_at)
    gap = max(at - prev, 0.0)
    if not changed:
        return unchanged + gap, span, changes
    if mod is None:
        return unchanged, span + gap, changes + 1
    if prev < mod <= at:
        return (unchanged + max(at - mod - LAST_MODIFIED_RESOLUTION_S, 0.0),
                span + min(LAST_MODIFIED_RESOLUTION_S, at - mod), changes + 1)
    observed = max(prev - float(first_observed_at), 0.0) if first_observed_at is not None else unchanged
    first_dated = changes > seen  # the first answer's change, counted above: the server's dates are not kept
    return (min(unchanged, observed), max(span - (LAST_MODIFIED_RESOLUTION_S if first_dated else 0.0), 0.0) + gap,
            changes - (1 if first_dated else 0) + 1)


# --------------------------------------------------------------------------- point estimate

def estimate_change_rate(fetch_count, change_count, first_fetched_at, last_fetched_at, *,
                         prior_min_change_s: float, prior_max_change_s: float):
    """Changes per second: Cho & Garcia-Molina's bias-reduced estimator with one pseudo-poll of
    prior (see the module docstring). Times may be None / NaN while fetch_count ≤ 1."""
    n, x, mean_interval = _polls(fetch_count, change_count, first_fetched_at, last_fetched_at)
    prior_interval = math.sqrt(float(prior_min_change_s) * float(prior_max_change_s))
    interval = np.where(np.isfinite(mean_interval), mean_interval, prior_interval)
    n_all = n + _PRIOR_POLLS
    x_all = x + _PRIOR_CHANGES
    return _out(-np.log((n_all - x_all + 0.5) / (n_all + 0.5)) / interval)


# --------------------------------------------------------------------------- known rate

def _refresh_gain(rate, interval):
    """∂F/∂f = (1 − (1 + x)e^(−x)) / λ with x = λI: freshness bought per unit of fetch rate."""
    x = rate * interval
    small = x < 1e-4  # 1 − (1 + x)e^(−x) = x²/2 − x³/3 + …, without the cancellation
    g = np.where(small, x * x * (0.5 - x / 3.0), -np.expm1(-x) - x * np.exp(-x))
    return g / rate


def _solve_refresh_x(c):
    """x ≥ 0 with 1 − (1 + x)e^(−x) = c, for 0 < c < 1 (element-wise).

    Equivalently h(x) = ln(1 + x) − x − ln(1 − c) = 0; h is decreasing and concave on x > 0,
    so Newton's iterates approach the root from above after at most one step."""
    c = np.asarray(c, dtype=float)
    target = -np.log1p(-c)                            # −ln(1 − c) > 0
    x = np.sqrt(2.0 * c) + target + np.log1p(target)  # at or above the root; ≈ √(2c) for small c
    for _ in range(60):
        step = (np.log1p(x) - x + target) * (1.0 + x) / x  # −h / h'  with h' = −x / (1 + x)
        x = np.maximum(x + step, 0.5 * x)                  # guard: never jump below half the iterate
        if np.all(np.abs(step) <= 1e-13 * x):
            break
    return x


def optimal_interval(change_rate, importance, fetch_value_s: float):
    """Seconds between fetches of a page of *known* change rate that satisfy Cho &
    Garcia-Molina's per-page optimality condition w ∂F/∂f = μ (μ = ``fetch_value_s``). ``inf``
    when the page is not worth refreshing (rate 0, importance 0, or μ·rate / importance ≥ 1);
    0 when fetches are free (μ ≤ 0). Not clamped."""
    rate = np.asarray(change_rate, dtype=float)
    w = np.asarray(importance, dtype=float)
    mu = float(fetch_value_s)
    if mu <= 0:
        return _out(np.where((rate > 0) & (w > 0), 0.0, np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(w > 0, mu * rate / np.where(w > 0, w, 1.0), np.inf)
        ok = (rate > 0) & (c < 1)
        x = _solve_refresh_x(np.where(ok, c, 0.5))
        return _out(np.where(ok, x / np.where(ok, rate, 1.0), np.inf))


def clamp_interval(interval, min_interval_s: float, max_interval_s: float):
    """``interval`` limited to [min_interval_s, max_interval_s] (inf → max)."""
    return _out(np.clip(np.asarray(interval, dtype=float), float(min_interval_s), float(max_interval_s)))


# --------------------------------------------------------------------------- unknown rate: posterior

def _rate_grid(prior_min_change_s: float, prior_max_change_s: float) -> np.ndarray:
    """The posterior's RATE_GRID_POINTS rates, log-spaced over the prior range (changes per second)."""
    if not 0 < prior_min_change_s < prior_max_change_s:
        raise ValueError("need 0 < prior_min_change_s < prior_max_change_s")
    return np.exp(np.linspace(-math.log(prior_max_change_s), -math.log(prior_min_change_s), RATE_GRID_POINTS))


@functools.lru_cache(maxsize=32)
def _grids(prior_min_change_s: float, prior_max_change_s: float, min_interval_s: float,
           max_interval_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rates K, intervals J, gain K×J = ∂F/∂f at each rate and interval); read-only, cached."""
    rates = _rate_grid(prior_min_change_s, prior_max_change_s)
    if not 0 < min_interval_s < max_interval_s:
        raise ValueError("need 0 < min_interval_s < max_interval_s")
    intervals = np.exp(np.linspace(math.log(min_interval_s), math.log(max_interval_s), INTERVAL_GRID_POINTS))
    intervals[0], intervals[-1] = min_interval_s, max_interval_s  # the clamps exactly, not exp(log(·))
    gain = _refresh_gain(rates[:, None], intervals[None, :])
    for a in (rates, intervals, gain):
        a.flags.writeable = False
    return rates, intervals, gain


def _posterior(x, unchanged, cbar, known, rates, prior=None):
    """P(λ = rates[k] | X changes each within c̄ seconds, U seconds unchanged): N × K, under the
    log-uniform grid prior, or under ``prior`` (K weights on the grid: ``fit_rate_prior``). The
    likelihood is (1 − e^(−λc̄))^X · e^(−λU)."""
    x, unchanged, cbar, known = (np.atleast_1d(a) for a in np.broadcast_arrays(x, unchanged, cbar, known))
    lam = rates[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        changed_ll = np.where(x[:, None] > 0, x[:, None] * np.log(-np.expm1(-lam * cbar[:, None])), 0.0)
    log_lik = np.where(known[:, None], changed_ll - lam * unchanged[:, None], 0.0)
    log_lik = np.where(np.isnan(log_lik), -np.inf, log_lik)
    log_lik -= np.max(log_lik, axis=1, keepdims=True)
    p = np.exp(log_lik)
    if prior is not None and len(prior) == rates.size:  # a prior fitted on another grid: none
        p = p * np.asarray(prior, dtype=float)[None, :]
    return p / np.sum(p, axis=1, keepdims=True)


def _weighted_posterior(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, rates,
                        unchanged_s=None, change_span_s=None, exposure_changes=None, prior=None):
    """(posterior N × K, importance N (0 where unusable), the inputs' broadcast shape, dated
    changes X N)."""
    x, unchanged, cbar, known = exposure(fetch_count, change_count, first_fetched_at, last_fetched_at,
                                          unchanged_s, change_span_s, exposure_changes)
    x, unchanged, cbar, known, w = np.broadcast_arrays(x, unchanged, cbar, known, np.asarray(importance, dtype=float))
    post = _posterior(x.ravel(), unchanged.ravel(), cbar.ravel(), known.ravel(), rates, prior)
    w = np.atleast_1d(w.ravel())
    # no usable importance: not worth a refresh
    return post, np.where(np.isnan(w) | (w < 0), 0.0, w), x.shape, np.atleast_1d(x.ravel())


def _value_table(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, grids,
                 unchanged_s=None, change_span_s=None, exposure_changes=None, prior=None):
    """E_posterior[w ∂F/∂f] at each grid interval: N × J, non-decreasing along J."""
    rates, _, gain = grids
    post, w, shape, _ = _weighted_posterior(fetch_count, change_count, first_fetched_at, last_fetched_at, importance,
                                            rates, unchanged_s, change_span_s, exposure_changes, prior)
    return (post @ gain) * w[:, None], shape


def _interval_from_table(table, fetch_value_s: float, intervals):
    """The grid-interpolated I with E[w ∂F/∂f](I) = μ, per row; the grid's ends when out of it."""
    mu = float(fetch_value_s)
    rows = np.arange(table.shape[0])
    above = np.sum(table < mu, axis=1)  # grid points still below μ (the table rises along a row)
    j = np.clip(above, 1, intervals.size - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        v0 = np.log(table[rows, j - 1])
        v1 = np.log(table[rows, j])
        t = np.where(np.isfinite(v0) & (v1 > v0), (math.log(mu) - v0) / (v1 - v0), 1.0) if mu > 0 else 0.0
    log_iv = np.log(intervals)
    inner = np.exp(log_iv[j - 1] + np.clip(t, 0.0, 1.0) * (log_iv[j] - log_iv[j - 1]))
    inner = np.clip(inner, intervals[0], intervals[-1])
    return np.where(above == 0, intervals[0], np.where(above >= intervals.size, intervals[-1], inner))


def next_interval(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, *,
                  fetch_value_s: float, min_interval_s: float, max_interval_s: float,
                  prior_min_change_s: float, prior_max_change_s: float, unchanged_s=None, change_span_s=None,
                  exposure_changes=None):
    """Seconds until a URL is due again, from its history *including* the answer just recorded
    (``record_observation``, and ``record_exposure`` for ``unchanged_s`` / ``change_span_s``;
    None: derived from the counts) and its importance: the interval in [min_interval_s,
    max_interval_s] with E_posterior[importance · ∂F/∂f] = fetch_value_s (module docstring)."""
    return next_interval_and_value(
        fetch_count, change_count, first_fetched_at, last_fetched_at, importance, fetch_value_s=fetch_value_s,
        min_interval_s=min_interval_s, max_interval_s=max_interval_s, prior_min_change_s=prior_min_change_s,
        prior_max_change_s=prior_max_change_s, unchanged_s=unchanged_s, change_span_s=change_span_s,
        exposure_changes=exposure_changes)[0]


# The refresh value's slope is measured between the interval and this many times it.
_SLOPE_SPAN = 2.0


def next_interval_and_value(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, *,
                            fetch_value_s: float, min_interval_s: float, max_interval_s: float,
                            prior_min_change_s: float, prior_max_change_s: float, unchanged_s=None,
                            change_span_s=None, exposure_changes=None, rate_prior=None,
                            information_horizon_s: float = 0.0, information_max_changes: float = math.inf):
    """(interval, refresh value, refresh slope): ``next_interval``, and what a fetch buys as time
    goes by, for generate's ranking (``refresh_value_rule``).

    The refresh value is E_posterior[w ∂F/∂f] at the interval I (importance-weighted seconds; μ
    itself unless the interval was clamped), the slope its log-log slope between I and 2I, so
    that value × (τ / I)^slope approximates the same expectation after τ seconds. Ranking the
    known URLs by it is Cho & Garcia-Molina's optimality condition read the other way round:
    with a budget of top_n fetches, the best ones are those whose next fetch buys the most
    (bench/freshness.py and issue 32: ranking by importance × how overdue instead served
    important pages at every cycle and starved deep ones).

    ``rate_prior``: the prior over the rate grid (``fit_rate_prior``; None: log-uniform).
    ``information_horizon_s`` > 0 adds what a fetch teaches (``information_value``) for URLs with
    at most ``information_max_changes`` dated changes: to the value at every interval, before the
    interval is solved for, and so to the refresh value and its slope."""
    grids = _grids(float(prior_min_change_s), float(prior_max_change_s), float(min_interval_s),
                   float(max_interval_s))
    rates, intervals, gain = grids
    post, w, shape, changes = _weighted_posterior(fetch_count, change_count, first_fetched_at, last_fetched_at,
                                                  importance, rates, unchanged_s, change_span_s, exposure_changes,
                                                  rate_prior)
    table, extra = _value_table_with_information(post, w, changes, grids, information_horizon_s, fetch_value_s,
                                                 information_max_changes)
    interval = _interval_from_table(table, fetch_value_s, intervals)

    def value_at(at: np.ndarray) -> np.ndarray:
        plain = np.einsum("nk,kn->n", post, _refresh_gain(rates[:, None], at[None, :])) * w
        if extra is None:
            return plain
        log_iv = np.log(intervals)
        return plain + np.array([np.interp(math.log(v), log_iv, row) for v, row in zip(at, extra)])

    at_interval, later = value_at(interval), value_at(_SLOPE_SPAN * interval)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where((at_interval > 0) & (later > 0), np.log(later / at_interval) / math.log(_SLOPE_SPAN), 0.0)
    return (_out(interval.reshape(shape)), _out(at_interval.reshape(shape)),
            _out(np.clip(slope, 0.0, 2.0).reshape(shape)))


# --------------------------------------------------------------------------- learning

def _value_table_with_information(post, w, changes, grids, horizon_s: float, fetch_value_s: float,
                                  max_changes: float) -> tuple[np.ndarray, np.ndarray | None]:
    """(E_posterior[w ∂F/∂f] at each grid interval, N × J, plus ``horizon_s`` × information_value
    at ``fetch_value_s`` for the rows with at most ``max_changes`` dated changes, made
    non-decreasing along J; the part added, None when nothing was)."""
    rates, intervals, gain = grids
    table = (post @ gain) * w[:, None]
    learns = changes <= float(max_changes)
    if not (horizon_s > 0 and math.isfinite(float(fetch_value_s)) and learns.any()):
        return table, None
    extra = np.zeros_like(table)
    extra[learns] = float(horizon_s) * information_value(post[learns], w[learns], float(fetch_value_s), rates,
                                                         intervals)
    return np.maximum.accumulate(table + extra, axis=1), extra


# fit_rate_prior: EM steps from the log-uniform prior, the share of it kept, the histories needed.
RATE_PRIOR_STEPS = 3
RATE_PRIOR_FLOOR = 0.05
RATE_PRIOR_MIN_HISTORIES = 10
# information_value: grid intervals it is computed at (interpolated between), Last-Modified age bins.
INFORMATION_INTERVALS = 16
INFORMATION_AGE_BINS = 9


def fit_rate_prior(fetch_count, change_count, first_fetched_at, last_fetched_at, *, prior_min_change_s: float,
                   prior_max_change_s: float, unchanged_s=None, change_span_s=None,
                   exposure_changes=None) -> tuple[float, ...] | None:
    """An empirical-Bayes prior over the rate grid from a crawldb's histories (arrays): how this
    crawl's pages change, instead of "anything from prior_min_change_s to prior_max_change_s,
    log-uniformly". RATE_PRIOR_STEPS EM steps from the log-uniform prior, each prior ← (1 −
    RATE_PRIOR_FLOOR) · the mean of the URLs' posteriors + RATE_PRIOR_FLOOR · log-uniform, so no
    rate is ruled out. A page with one or two short Last-Modified ages then looks like the pages
    that showed the same, not like the fastest the prior allows (issue 32: pages changing every
    minute parked as "too fast to be worth a fetch"). A per-grid-point mean over rows (mergeable
    across partitions). None with fewer than RATE_PRIOR_MIN_HISTORIES histories that saw
    anything."""
    rates = _rate_grid(float(prior_min_change_s), float(prior_max_change_s))
    x, unchanged, cbar, known = exposure(fetch_count, change_count, first_fetched_at, last_fetched_at,
                                          unchanged_s, change_span_s, exposure_changes)
    x, unchanged, cbar, known = (np.atleast_1d(v).ravel() for v in np.broadcast_arrays(x, unchanged, cbar, known))
    if int(known.sum()) < RATE_PRIOR_MIN_HISTORIES:
        return None
    likelihood = _posterior(x[known], unchanged[known], cbar[known], known[known], rates)
    prior = np.full(rates.size, 1.0 / rates.size)
    for _ in range(RATE_PRIOR_STEPS):
        post = likelihood * prior[None, :]
        post /= post.sum(axis=1, keepdims=True)
        prior = (1.0 - RATE_PRIOR_FLOOR) * post.mean(axis=0) + RATE_PRIOR_FLOOR / rates.size
    return tuple(float(v) for v in prior)


def _freshness(rates: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """F(λ, 1/I) = (1 − e^(−λI)) / (λI): K × J."""
    x = rates[:, None] * intervals[None, :]
    return np.where(x < 1e-6, 1.0 - x / 2.0, -np.expm1(-x) / np.maximum(x, 1e-300))


def information_value(post: np.ndarray, w: np.ndarray, fetch_value_s: float, rates: np.ndarray,
                      intervals: np.ndarray) -> np.ndarray:
    """N × J: what observing each URL once more after each grid interval I is expected to teach,
    as the gain in the best net freshness rate it then allows (importance-weighted freshness per
    second; a one-step look-ahead, Bayesian preposterior analysis).

    The outcomes of a fetch after I: "unchanged", or "changed, Last-Modified age in one of
    INFORMATION_AGE_BINS log-spaced bins of (0, I]"; for each, the posterior it would leave and
    the best rate max(0, max_J E[w·F(λ, 1/J)] − μ/J) over the interval grid; the expectation of
    that over the outcomes less the same for today's posterior. The myopic rule alone values a
    fetch only for the freshness it buys, so a page whose first Last-Modified ages happened to be
    short is judged too fast to chase and never looked at again (issue 32). Computed at
    INFORMATION_INTERVALS grid intervals, interpolated in log I between them."""
    n = post.shape[0]
    mu = float(fetch_value_s)
    if n == 0 or not math.isfinite(mu) or mu <= 0:
        return np.zeros((n, intervals.size))
    fresh, at, outcome, log_iv = _information_grids(rates, intervals)
    cost = mu / intervals

    def best_rate(p: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return np.maximum((weight[..., None] * (p @ fresh) - cost).max(-1), 0.0)

    today = best_rate(post, w)
    joint = post[:, None, None, :] * outcome[None]                                 # N × A × E × K
    # P(outcome) × the best rate after it: max(0, max_J w·(joint @ F) − P(outcome)·μ/J), the
    # posterior after the outcome being joint / P(outcome)
    p_outcome = joint.sum(-1)
    best = (w[:, None, None, None] * (joint @ fresh) - p_outcome[..., None] * cost).max(-1)
    learned = np.maximum(best, 0.0).sum(-1)
    gain = np.maximum(learned - today[:, None], 0.0)                               # N × A
    if n == 1:
        return np.interp(log_iv, log_iv[at], gain[0])[None, :]
    return np.stack([np.interp(log_iv, log_iv[at], row) for row in gain])


_INFORMATION_CACHE: dict[tuple, tuple] = {}


def _information_grids(rates: np.ndarray, intervals: np.ndarray) -> tuple:
    """What information_value reads of the grids alone, computed once per grid: F(λ, 1/I) K × J,
    the grid indices it is computed at (A), each outcome's probability given the rate A × E × K
    (unchanged, then each Last-Modified age bin: 0, then log-spaced from 1 s to I), log I."""
    key = (rates[0], rates[-1], rates.size, intervals[0], intervals[-1], intervals.size)
    cached = _INFORMATION_CACHE.get(key)
    if cached is None:
        at = np.unique(np.linspace(0, intervals.size - 1, INFORMATION_INTERVALS).round().astype(int))
        spans = intervals[at]
        steps = np.linspace(0.0, 1.0, INFORMATION_AGE_BINS)[None, :]
        edges = np.where(spans[:, None] > 1.0, np.exp(steps * np.log(np.maximum(spans[:, None], 1.0))),
                         spans[:, None] * np.maximum(steps, 1.0))
        edges = np.concatenate([np.zeros((spans.size, 1)), edges], axis=1)
        survive = np.exp(-rates[None, None, :] * edges[:, :, None])                   # A × E+1 × K
        outcome = np.concatenate([survive[:, -1:], survive[:, :-1] - survive[:, 1:]], axis=1)
        cached = (_freshness(rates, intervals), at, outcome, np.log(intervals))
        for a in cached:
            a.flags.writeable = False
        _INFORMATION_CACHE[key] = cached
    return cached


def calibrate_fetch_value(fetch_count, change_count, first_fetched_at, last_fetched_at, importance,
                          fetches_per_s: float, *, min_interval_s: float, max_interval_s: float,
                          prior_min_change_s: float, prior_max_change_s: float, unchanged_s=None,
                          change_span_s=None, exposure_changes=None, rate_prior=None,
                          information_horizon_s: float = 0.0, information_fetch_value_s: float = math.nan,
                          information_max_changes: float = math.inf) -> float:
    """The fetch value μ (seconds) at which ``next_interval`` of these URLs (arrays: e.g. the whole
    crawldb) adds up to ``fetches_per_s`` fetches per second; bisection on log μ, since the
    total falls as μ grows. Returns 0.0 if every URL at min_interval_s fits the budget, and
    ``inf`` if not even every URL at max_interval_s does. ``rate_prior`` and the information
    value as in ``next_interval_and_value``, the latter valued at ``information_fetch_value_s``
    (a first fit's μ: it is what a fetch costs there)."""
    grids = _grids(float(prior_min_change_s), float(prior_max_change_s), float(min_interval_s),
                   float(max_interval_s))
    rates, intervals, _ = grids
    post, w, _, changes = _weighted_posterior(fetch_count, change_count, first_fetched_at, last_fetched_at,
                                              importance, rates, unchanged_s, change_span_s, exposure_changes,
                                              rate_prior)
    table, _ = _value_table_with_information(post, w, changes, grids, information_horizon_s,
                                             information_fetch_value_s, information_max_changes)
    budget = float(fetches_per_s)
    count = table.shape[0]
    if count / float(min_interval_s) <= budget:
        return 0.0
    if count / float(max_interval_s) >= budget:
        return math.inf
    positive = table[table > 0]
    if positive.size == 0:
        return math.inf
    lo, hi = math.log(positive.min()) - 1.0, math.log(positive.max()) + 1.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if np.sum(1.0 / _interval_from_table(table, math.exp(mid), grids[1])) > budget:
            lo = mid
        else:
            hi = mid
    return math.exp(hi)


def cycle_seconds(segment_starts, now: float, recent: int = 5) -> float:
    """The crawl's cycle length in seconds, as the segments' start times show it: the median gap
    between the last ``recent`` + 1 starts; with one segment only, the time from its start to
    ``now`` (a lower bound: the cycle has lasted at least that long). At least 1 s."""
    starts = sorted(float(t) for t in segment_starts)[-(int(recent) + 1):]
    gaps = [b - a for a, b in zip(starts, starts[1:]) if b > a]
    if gaps:
        return max(float(np.median(gaps)), 1.0)
    return max(float(now) - starts[-1], 1.0) if starts else 1.0


def refresh_budget(top_n: int, discovery_quota: int, pending_new: int) -> int:
    """Fetches per cycle left for refreshing known URLs: generate gives never-fetched URLs up to
    their quota and the rest to refresh (jobs/generate.py, split_budget)."""
    return max(int(top_n) - min(int(discovery_quota), max(int(pending_new), 0)), 0)


def fit_fetch_value(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, *,
                    refresh_per_cycle: float, cycle_s: float, sampled_share: float, headroom: float,
                    min_interval_s: float, max_interval_s: float, prior_min_change_s: float,
                    prior_max_change_s: float, unchanged_s=None, change_span_s=None, exposure_changes=None,
                    rate_prior=None, information_horizon_s: float = 0.0, information_fetch_value_s: float = math.nan,
                    information_max_changes: float = math.inf) -> float:
    """The fetch value μ that makes the intervals of a crawldb's known URLs ask for ``headroom`` ×
    the fetches a cycle has for refresh (``refresh_per_cycle`` every ``cycle_s`` seconds).

    The arrays are the histories of a ``sampled_share`` (0 < share ≤ 1) of those URLs: the budget
    is scaled by the same share. A headroom above 1 keeps slightly more URLs due than a cycle
    takes, so every cycle is full (issue 32: with a hand-set μ, pages discovered together came due
    together and the cycles between those waves used a fraction of top_n) and generate's
    priority (importance × staleness) decides which of the overdue ones wait. 0.0 when every URL
    at min_interval_s fits, ``inf`` when not even every URL at max_interval_s does (as
    ``calibrate_fetch_value``)."""
    share = min(max(float(sampled_share), 1e-12), 1.0)
    per_s = float(refresh_per_cycle) * float(headroom) * share / max(float(cycle_s), 1e-9)
    if np.size(fetch_count) == 0 or per_s <= 0:
        return math.inf
    return calibrate_fetch_value(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, per_s,
                                 min_interval_s=min_interval_s, max_interval_s=max_interval_s,
                                 prior_min_change_s=prior_min_change_s, prior_max_change_s=prior_max_change_s,
                                 unchanged_s=unchanged_s, change_span_s=change_span_s,
                                 exposure_changes=exposure_changes, rate_prior=rate_prior,
                                 information_horizon_s=information_horizon_s,
                                 information_fetch_value_s=information_fetch_value_s,
                                 information_max_changes=information_max_changes)


# --------------------------------------------------------------------------- errors

def retry_interval(retries: int, retry_interval_s: float, max_retries: int,
                   max_interval_s: float) -> float | None:
    """Seconds until the ``retries``-th consecutive transient failure (1, 2, …) is retried:
    ``retry_interval_s`` doubling per failure, at most ``max_interval_s``. ``None`` once
    ``retries`` exceeds ``max_retries``: stop retrying, the URL is gone (see gone_interval)."""
    retries = int(retries)
    if retries > int(max_retries):
        return None
    return float(min(float(retry_interval_s) * 2.0 ** min(max(retries - 1, 0), 1023), float(max_interval_s)))


def gone_interval(gone_checks: int, gone_interval_s: float, max_interval_s: float,
                  gone_max_checks: int) -> float | None:
    """Seconds until a URL is re-checked after its ``gone_checks``-th consecutive gone answer
    (404/410 or another permanent 4xx; 1 for the first): ``gone_interval_s`` doubling per check
    up to ``max_interval_s``. ``None`` once ``gone_checks`` exceeds ``gone_max_checks`` (> 0):
    kept as gone, never due again."""
    gone_checks = int(gone_checks)
    if int(gone_max_checks) > 0 and gone_checks > int(gone_max_checks):
        return None
    return float(min(float(gone_interval_s) * 2.0 ** min(max(gone_checks - 1, 0), 1023), float(max_interval_s)))


# --------------------------------------------------------------------------- priority

def importance_rule(score, depth, ops, *, score_exponent: float, depth_decay: float, score_floor: float):
    """How much a URL's freshness matters (1 for a seed: score 1, depth 0):
    max(score, score_floor)^score_exponent × depth_decay^max(depth, 0). The one definition:
    ``ops`` is crawl.rule_ops.NUMPY_OPS on the driver (``importance``) and
    jobs.engine.column_ops.COLUMN_OPS in generate's Spark query. A null score or depth is skipped by
    ``greatest`` (as Spark's greatest skips null): the floor, depth 0."""
    s = ops.greatest(score, ops.lit(float(score_floor)))
    d = ops.greatest(depth, ops.lit(0.0))
    return ops.pow(s, ops.lit(float(score_exponent))) * ops.pow(ops.lit(float(depth_decay)), d)


def staleness_rule(now, next_fetch_at, interval, ops):
    """How overdue a URL is relative to its own interval: 0 before next_fetch_at, then
    1 + (now − next_fetch_at) / interval. Without an interval yet (null or ≤ 0: never fetched)
    or without next_fetch_at, a due URL counts 1. Times in epoch seconds; ``ops`` as in
    importance_rule."""
    known = ops.not_null(interval) & (interval > 0) & ops.not_null(next_fetch_at)
    overdue = ops.when(known, (now - next_fetch_at) / interval, ops.lit(0.0))
    not_due = ops.not_null(next_fetch_at) & (now < next_fetch_at)
    return ops.when(not_due, ops.lit(0.0), ops.lit(1.0) + ops.greatest(overdue, ops.lit(0.0)))


def early_staleness_rule(now, next_fetch_at, interval, ops):
    """How close a URL that is not due yet is to due, relative to its own interval:
    1 + (now − next_fetch_at) / interval, at least 0 (the share of its interval gone by, for a URL
    whose next fetch is one interval after its last); 0 without an interval. Ranks the URLs
    generate takes before they are due (crawl.crawldb.selection.early_rule)."""
    known = ops.not_null(interval) & (interval > 0) & ops.not_null(next_fetch_at)
    return ops.when(known, ops.greatest(ops.lit(1.0) + (now - next_fetch_at) / interval, ops.lit(0.0)), ops.lit(0.0))


def valued_rule(status, refresh_value, refresh_slope, last_fetched_at, interval, ops):
    """The URL's next fetch is ranked by what it buys (``refresh_value_rule``): its last answer
    was a 2xx or 304 (``status`` fetched or not_modified: the change-rate schedule set its
    interval), update gave it a refresh value, and it has the times the rule reads. Other URLs
    (never fetched, retries, gone re-checks, redirects, duplicates; rows from before the refresh
    value existed) rank by importance × staleness."""
    return (ops.isin(status, VALUED_STATUSES) & ops.not_null(refresh_value) & ops.not_null(refresh_slope)
            & ops.not_null(last_fetched_at)
            & ops.not_null(interval) & (ops.coalesce(interval, ops.lit(0.0)) > 0))


def refresh_value_rule(refresh_value, refresh_slope, now, last_fetched_at, interval, ops):
    """What fetching the URL now buys: E_posterior[importance · ∂F/∂f] after τ = now −
    last_fetched_at seconds, as refresh_value × (τ / interval)^refresh_slope (the value and slope
    update stored: next_interval_and_value). Importance-weighted seconds; higher first."""
    tau = ops.greatest(now - last_fetched_at, ops.lit(0.0))
    return refresh_value * ops.pow(tau / interval, refresh_slope)


def priority_rule(score, depth, now, next_fetch_at, interval, ops, *, score_exponent: float,
                  depth_decay: float, score_floor: float, early=None, status=None, refresh_value=None,
                  refresh_slope=None, last_fetched_at=None):
    """generate's ranking of a URL (higher first): for a URL with a refresh value (valued_rule,
    given ``status``, ``refresh_value``, ``refresh_slope`` and ``last_fetched_at``), refresh_value_rule;
    otherwise importance × staleness (0 = not due), or, for a URL taken early (``early`` true),
    importance × early_staleness_rule. The two scales differ: the orderings
    (crawl.crawldb.selection) compare valued URLs only with each other."""
    staleness_of = staleness_rule(now, next_fetch_at, interval, ops)
    if early is not None:
        staleness_of = ops.when(early, early_staleness_rule(now, next_fetch_at, interval, ops), staleness_of)
    plain = (importance_rule(score, depth, ops, score_exponent=score_exponent, depth_decay=depth_decay,
                             score_floor=score_floor)
             * staleness_of)
    if refresh_value is None:
        return plain
    return ops.when(valued_rule(status, refresh_value, refresh_slope, last_fetched_at, interval, ops),
                    refresh_value_rule(refresh_value, refresh_slope, now, last_fetched_at, interval, ops), plain)


def importance(score, depth, *, score_exponent: float, depth_decay: float, score_floor: float):
    """importance_rule on numbers or numpy arrays (None / NaN: null)."""
    return _out(importance_rule(_times(score), _times(depth), NUMPY_OPS, score_exponent=score_exponent,
                                depth_decay=depth_decay, score_floor=score_floor))


def staleness(now, next_fetch_at, interval):
    """staleness_rule on numbers or numpy arrays (None / NaN: null)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # rows without an interval: discarded by ``when``
        return _out(staleness_rule(np.asarray(now, dtype=float), _times(next_fetch_at), _times(interval), NUMPY_OPS))


def priority(score, depth, now, next_fetch_at, interval, *, score_exponent: float,
             depth_decay: float, score_floor: float, early=None, status=None, refresh_value=None,
             refresh_slope=None, last_fetched_at=None):
    """priority_rule on numbers or numpy arrays (None / NaN: null)."""
    valued = {} if refresh_value is None else {
        "status": np.asarray(status, dtype=object), "refresh_value": _times(refresh_value),
        "refresh_slope": _times(refresh_slope),
        "last_fetched_at": _times(last_fetched_at)}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # rows without: discarded by ``when``
        return _out(priority_rule(_times(score), _times(depth), np.asarray(now, dtype=float), _times(next_fetch_at),
                                  _times(interval), NUMPY_OPS, score_exponent=score_exponent,
                                  depth_decay=depth_decay, score_floor=score_floor,
                                  early=None if early is None else np.asarray(early, dtype=bool), **valued))


def valued(status, refresh_value, refresh_slope, last_fetched_at, interval):
    """valued_rule on numbers or numpy arrays (None / NaN: null)."""
    return valued_rule(np.asarray(status, dtype=object), _times(refresh_value), _times(refresh_slope), _times(last_fetched_at), _times(interval),
                       NUMPY_OPS)

