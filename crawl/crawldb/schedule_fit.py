"""update's fit of the schedule to the crawl at every run: the three things the pure rules of
crawl/crawldb/schedule.py take from the crawl as a whole rather than from one URL, held in
``Fitted`` (not in the config: they are not options).

- ``fetch_value_s`` (μ): fitted to the fetch budget (schedule.fit_fetch_value) when
  ``schedule.fit_fetch_value`` is on, else None (``schedule.fetch_value_s`` as configured);
- ``rate_prior``: an empirical-Bayes prior over change rates, from the same histories
  (schedule.fit_rate_prior) when ``schedule.fit_rate_prior`` is on;
- ``information_horizon_s``: how long a better decision about a URL pays,
  ``schedule.information_horizon_cycles`` × the measured cycle length (0: the value of what a fetch
  teaches is left out).

crawl.crawldb.status.schedule_policy puts them beside the schedule.* options for apply_fetch in
both of update's paths. jobs/update.py reads the histories (a sample of the known URLs) and the
cycle length; tests/test_refresh_allocation.py's replay calls the same function.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from crawl.config import Config
from crawl.crawldb import schedule

# The columns fit reads, one array each (update's sample of the known URLs' rows).
HISTORY_COLUMNS = ("observed_count", "change_count", "first_observed_at", "last_observed_at", "score", "depth",
                   "unchanged_s", "change_span_s", "exposure_changes")
# The fit with the information value reads at most this many histories (a random subset of the
# sample): it costs ~0.4 ms of CPU per history, against ~0.015 ms without it.
INFORMATION_FIT_ROWS = 1000


@dataclass(frozen=True)
class Fitted:
    """What update fitted to the crawl (the module docstring); ``NOT_FITTED``: nothing."""
    fetch_value_s: float | None = None  # None: schedule.fetch_value_s as configured
    rate_prior: Any = None  # weights over schedule's rate grid (numpy array); None: log-uniform
    information_horizon_s: float = 0.0


NOT_FITTED = Fitted()


def _histories(histories: Mapping[str, np.ndarray], pick=slice(None)) -> dict[str, Any]:
    return {"fetch_count": histories["observed_count"][pick], "change_count": histories["change_count"][pick],
            "first_fetched_at": histories["first_observed_at"][pick],
            "last_fetched_at": histories["last_observed_at"][pick], "unchanged_s": histories["unchanged_s"][pick],
            "change_span_s": histories["change_span_s"][pick], "exposure_changes": histories["exposure_changes"][pick]}


def fit(histories: Mapping[str, np.ndarray], cfg: Config, *, refresh_per_cycle: float, cycle_s: float,
        sampled_share: float, seed: int | None = None) -> Fitted:
    """The fitted values (module docstring) from ``histories`` ({column: array}, HISTORY_COLUMNS,
    NaN for nulls), a ``sampled_share`` of the known URLs; ``refresh_per_cycle`` fetches for
    refreshing them every ``cycle_s`` seconds. Without any history: ``NOT_FITTED``."""
    n = int(np.size(histories["observed_count"]))
    if n == 0:
        return NOT_FITTED
    options = cfg.schedule
    # the interval bounds are whole seconds (ints): the fit's grid takes floats
    grid = {"min_interval_s": float(options.min_interval_s), "max_interval_s": float(options.max_interval_s),
            "prior_min_change_s": options.prior_min_change_s,
            "prior_max_change_s": options.prior_max_change_s}
    prior = None
    if options.fit_rate_prior:
        prior = schedule.fit_rate_prior(**_histories(histories), prior_min_change_s=grid["prior_min_change_s"],
                                        prior_max_change_s=grid["prior_max_change_s"])
    horizon = options.information_horizon_cycles * max(float(cycle_s), 0.0)
    if not options.fit_fetch_value:
        return Fitted(None, prior, horizon)
    weight = schedule.importance(histories["score"], histories["depth"],
                                 score_exponent=options.score_exponent,
                                 depth_decay=options.depth_decay,
                                 score_floor=options.score_floor)
    budget = {"refresh_per_cycle": refresh_per_cycle, "cycle_s": cycle_s,
              "headroom": options.fit_headroom, **grid}
    mu = schedule.fit_fetch_value(**_histories(histories), importance=weight, sampled_share=sampled_share,
                                  rate_prior=prior, **budget)
    if horizon > 0 and 0 < mu < math.inf:
        # the intervals update will set also count what a fetch teaches, valued at this μ
        pick = np.arange(n)
        if n > INFORMATION_FIT_ROWS:
            pick = np.sort(np.random.default_rng(seed).choice(n, size=INFORMATION_FIT_ROWS, replace=False))
        mu = schedule.fit_fetch_value(**_histories(histories, pick), importance=np.asarray(weight)[pick],
                                      sampled_share=sampled_share * pick.size / n, rate_prior=prior,
                                      information_horizon_s=horizon, information_fetch_value_s=mu,
                                      information_max_changes=float(options.information_max_changes),
                                      **budget)
    return Fitted(mu, prior, horizon)
