"""Prototypes of better change-rate learning for the replay of bench/refresh_frontier.py (issue 32):
patched into crawl.crawldb.schedule for one benchmark process, NOT part of the crawler.

``install(names, information_horizon_s)`` patches, by name:

``eb``   An empirical-Bayes prior over the 64-point rate grid instead of the log-uniform one:
         at every fit of the fetch value (once per cycle, over the histories the fit reads), three
         EM steps from the log-uniform prior, prior ← 0.95 · mean over the known URLs of their
         posteriors + 0.05 · uniform on the grid; every posterior after that (update's interval and
         refresh value, the fit) multiplies its likelihood by it. A per-grid-point sum over rows,
         so mergeable across partitions in a real crawler.
``voi``  The value of what a fetch reveals (one-step look-ahead, Bayesian preposterior analysis):
         for a fetch after interval I, the outcomes "unchanged" and "changed, Last-Modified age in
         one of 9 log-spaced bins of (0, I]"; for each, the posterior it would leave and the best
         net freshness rate max(0, max_J E[w·F(λ, 1/J)] − μ/J) over the interval grid J; the
         expected gain of that over the same for today's posterior, times
         ``information_horizon_s``, is added to the value table E[w ∂F/∂f](I) (computed at 16 of
         the 64 grid intervals, interpolated in log I; made non-decreasing). The interval,
         refresh value, slope and the fit's intervals all read the augmented table; the fit
         values information at the μ of the previous fit (the first fit: none).

Cost: ``voi`` is ~16 × 10 posterior updates per URL and call (the replay runs ~5× slower); a
crawler would restrict it to URLs with few dated changes or fewer grid points.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from crawl.crawldb import schedule as S

EB_FLOOR = 0.05        # share of the uniform-on-the-grid (log-uniform) prior kept in the fitted one
EB_STEPS = 3           # EM steps per fit, from the log-uniform prior
VOI_INTERVALS = 16     # grid intervals at which the information value is computed
VOI_AGE_BINS = 9       # Last-Modified age bins of (0, I], log-spaced from 1 s

_state: dict = {"prior": None, "mu": None, "horizon_s": 1000.0, "voi": False}


def _freshness(rates: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """F(λ, 1/I) = (1 − e^(−λI)) / (λI): K × J."""
    x = rates[:, None] * intervals[None, :]
    return np.where(x < 1e-6, 1.0 - x / 2.0, -np.expm1(-x) / np.maximum(x, 1e-300))


def information_value(post: np.ndarray, w: np.ndarray, mu: float | None, rates: np.ndarray,
                      intervals: np.ndarray) -> np.ndarray:
    """N × J: expected gain in the best net freshness rate (weighted freshness per second) from
    observing the page once more after each grid interval (module docstring, ``voi``)."""
    if mu is None or not math.isfinite(mu) or mu <= 0:
        return np.zeros((post.shape[0], intervals.size))
    fresh = _freshness(rates, intervals)
    cost = mu / intervals

    def best_rate(p: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return np.maximum((weight[..., None] * (p @ fresh) - cost).max(-1), 0.0)

    today = best_rate(post, w)
    at = np.unique(np.linspace(0, intervals.size - 1, VOI_INTERVALS).round().astype(int))
    gain = np.zeros((post.shape[0], at.size))
    for i, j in enumerate(at):
        interval = intervals[j]
        edges = np.concatenate([[0.0], np.geomspace(1.0, interval, VOI_AGE_BINS)]) if interval > 1 else \
            np.array([0.0, interval])
        survive = np.exp(-rates[None, :] * edges[:, None])               # P(age > edge): E × K
        outcome = np.vstack([survive[-1:], survive[:-1] - survive[1:]])  # unchanged, then each age bin
        joint = post[:, None, :] * outcome[None]
        p_outcome = joint.sum(-1)
        after = joint / np.maximum(p_outcome[..., None], 1e-300)
        gain[:, i] = np.maximum((p_outcome * best_rate(after, np.broadcast_to(w[:, None], p_outcome.shape))).sum(-1)
                                - today, 0.0)
    log_iv = np.log(intervals)
    return np.stack([np.interp(log_iv, log_iv[at], row) for row in gain]) if gain.size else \
        np.zeros((post.shape[0], intervals.size))


_posterior = S._posterior
_fit = S.fit_fetch_value
_next = S.next_interval_and_value


def _prior_posterior(x, unchanged, cbar, known, rates):
    p = _posterior(x, unchanged, cbar, known, rates)
    prior = _state["prior"]
    if prior is None or prior.size != rates.size:
        return p
    q = p * prior[None, :]
    return q / q.sum(axis=1, keepdims=True)


def _fitted_prior(rates: np.ndarray, histories: tuple, exposure: dict) -> np.ndarray | None:
    x, unchanged, cbar, known = S.exposure(*histories, exposure.get("unchanged_s"), exposure.get("change_span_s"),
                                           exposure.get("exposure_changes"))
    known = np.atleast_1d(known)
    if known.sum() < 10:
        return _state["prior"]
    likelihood = _posterior(x, unchanged, cbar, known, rates)[known]  # under the log-uniform prior
    prior = np.full(rates.size, 1.0 / rates.size)
    for _ in range(EB_STEPS):
        post = likelihood * prior[None, :]
        post /= post.sum(axis=1, keepdims=True)
        prior = (1.0 - EB_FLOOR) * post.mean(axis=0) + EB_FLOOR / rates.size
    return prior


def _value_table_with_information(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, grids,
                                  unchanged_s=None, change_span_s=None, exposure_changes=None):
    rates, intervals, gain = grids
    post, w, shape = S._weighted_posterior(fetch_count, change_count, first_fetched_at, last_fetched_at, importance,
                                           rates, unchanged_s, change_span_s, exposure_changes)
    table = (post @ gain) * w[:, None]
    if _state["voi"] and _state["mu"] is not None:
        table = np.maximum.accumulate(
            table + _state["horizon_s"] * information_value(post, w, _state["mu"], rates, intervals), axis=1)
    return table, shape


def _fit_fetch_value(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, **kw):
    if _state.get("eb"):
        grids = S._grids(float(kw["prior_min_change_s"]), float(kw["prior_max_change_s"]),
                         float(kw["min_interval_s"]), float(kw["max_interval_s"]))
        _state["prior"] = _fitted_prior(grids[0], (fetch_count, change_count, first_fetched_at, last_fetched_at), kw)
    mu = _fit(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, **kw)
    _state["mu"] = mu
    return mu


def _next_interval_and_value(fetch_count, change_count, first_fetched_at, last_fetched_at, importance, *,
                             fetch_value_s, min_interval_s, max_interval_s, prior_min_change_s, prior_max_change_s,
                             unchanged_s=None, change_span_s=None, exposure_changes=None):
    if not _state["voi"]:
        return _next(fetch_count, change_count, first_fetched_at, last_fetched_at, importance,
                     fetch_value_s=fetch_value_s, min_interval_s=min_interval_s, max_interval_s=max_interval_s,
                     prior_min_change_s=prior_min_change_s, prior_max_change_s=prior_max_change_s,
                     unchanged_s=unchanged_s, change_span_s=change_span_s, exposure_changes=exposure_changes)
    rates, intervals, gain = S._grids(float(prior_min_change_s), float(prior_max_change_s), float(min_interval_s),
                                      float(max_interval_s))
    post, w, shape = S._weighted_posterior(fetch_count, change_count, first_fetched_at, last_fetched_at, importance,
                                           rates, unchanged_s, change_span_s, exposure_changes)
    extra = _state["horizon_s"] * information_value(post, w, float(fetch_value_s), rates, intervals)
    table = np.maximum.accumulate((post @ gain) * w[:, None] + extra, axis=1)
    interval = S._interval_from_table(table, fetch_value_s, intervals)
    log_iv = np.log(intervals)

    def value_at(iv: np.ndarray) -> np.ndarray:
        plain = np.einsum("nk,kn->n", post, S._refresh_gain(rates[:, None], iv[None, :])) * w
        return plain + np.array([np.interp(math.log(v), log_iv, row) for v, row in zip(iv, extra)])

    now, later = value_at(interval), value_at(S._SLOPE_SPAN * interval)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where((now > 0) & (later > 0), np.log(later / now) / math.log(S._SLOPE_SPAN), 0.0)
    return (S._out(interval.reshape(shape)), S._out(now.reshape(shape)),
            S._out(np.clip(slope, 0.0, 2.0).reshape(shape)))


def reset() -> None:
    """Forget the fitted prior and μ (a new crawl starts from the log-uniform prior)."""
    _state.update(prior=None, mu=None)


def install(names: Iterable[str], information_horizon_s: float = 1000.0) -> None:
    """Patch crawl.crawldb.schedule for this process with the named prototypes (``eb``, ``voi``)."""
    names = set(names)
    unknown = names - {"eb", "voi"}
    if unknown:
        raise ValueError(f"unknown prototype(s): {sorted(unknown)}")
    _state.update(eb="eb" in names, voi="voi" in names, horizon_s=float(information_horizon_s), prior=None, mu=None)
    if "eb" in names:
        S._posterior = _prior_posterior
    S.fit_fetch_value = _fit_fetch_value
    if "voi" in names:
        S._value_table = _value_table_with_information
        S.next_interval_and_value = _next_interval_and_value
