"""Issue 32, findings 2-4: how the crawler shares a fixed refetch budget among pages that change at
different rates, measured on a simulated web whose change times are known.

What runs is the crawler's own decision code, on the driver path, without Spark or HTTP: generate's
selection (crawl.crawldb.selection.select: due and early URLs, priorities, host turns, pools),
update's transition (crawl.crawldb.status.apply_fetch: the change history, Last-Modified, the next
interval and the refresh value) and update's fit of the fetch value (schedule.fit_fetch_value). The
web is a set of Poisson pages (mean time between changes log-uniform in 10 s ... 2 h, a fifth never
change), each version with its own ETag and a Last-Modified at its change time; a fetch answers
304 when the ETag matches. Cycles are 16 s apart and fetch top_n URLs at once. The same refetch
count per cycle is then given to uniform round-robin refresh and to Cho & Garcia-Molina's
optimal allocation with the TRUE rates (fixed frequencies, run as fetch credits), and all three
are scored alike: the time-averaged share of pages whose stored copy is the live version, over
the last two thirds of the run. (bench/freshness.py does the same live, over HTTP, with Spark.)

Before the refresh value, generate ranked known URLs by importance x staleness: on this web that
fetched the important pages at every cycle, never refetched the deep ones, and reached 0.67-0.75 of
the optimum (the exploration in the issue's notes); these tests fail with that ranking.
"""
from __future__ import annotations

import email.utils
import math

import numpy as np
import pytest

from crawl.crawldb import schedule, schedule_fit, selection
from crawl.crawldb.status import FetchStatus, apply_fetch, lease, new_url_state, schedule_policy
from tests.conftest import make_config

CYCLE_S = 16.0
CYCLES = 60
HOSTS = 4
PAGES_PER_HOST = 40
START = 1_800_000_000.0


class Web:
    """Pages with Poisson change times (seconds after START) and importance by kind."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        n = HOSTS * PAGES_PER_HOST
        self.kind = np.array(["home" if i % PAGES_PER_HOST == 0 else "important" if i % PAGES_PER_HOST < 5
                              else "deep" if i % PAGES_PER_HOST >= 32 else "normal" for i in range(n)])
        self.score = np.array([{"home": 1.0, "important": 0.06, "normal": 0.01, "deep": 0.002}[k] for k in self.kind])
        self.depth = np.array([{"home": 0, "important": 1, "normal": 2, "deep": 4}[k] for k in self.kind])
        mean = np.exp(rng.uniform(math.log(10.0), math.log(7200.0), n))
        self.mean = np.where(rng.random(n) < 0.2, np.inf, mean)
        horizon = CYCLES * CYCLE_S + 100.0
        self.changes = []
        self.first_age = []
        for i in range(n):
            if math.isinf(self.mean[i]):
                self.changes.append(np.empty(0))
                self.first_age.append(86400.0)
                continue
            gaps = rng.exponential(self.mean[i], int(horizon / self.mean[i] * 2) + 20)
            times = np.cumsum(gaps)
            self.changes.append(times[times < horizon])
            self.first_age.append(float(rng.exponential(self.mean[i])))  # a Poisson page's age at START

    def version(self, page: int, t: float) -> int:
        return int(np.searchsorted(self.changes[page], t - START, side="right"))

    def changed_at(self, page: int, version: int) -> float:
        return START - self.first_age[page] if version == 0 else START + float(self.changes[page][version - 1])

    def url(self, page: int) -> str:
        return f"http://h{page // PAGES_PER_HOST}.example/p{page}"


def crawl(web: Web, top_n: int, cfg) -> tuple[list[tuple[int, float, int]], list[int]]:
    """The crawler's rules over CYCLES cycles: (page, time, version) of every fetch, and the
    refetch count of each cycle."""
    policy = schedule_policy(cfg)
    n = len(web.kind)
    rows = {p: new_url_state(web.url(p), f"h{p // PAGES_PER_HOST}.example", 0, p, int(web.depth[p]),
                             float(web.score[p]), START) for p in range(n)}
    events, refetches = [], []
    quotas = selection.budget_split(top_n, float(cfg["generate.discovery_share"]))
    starts = []
    for cycle in range(CYCLES):
        now = START + 5.0 + cycle * CYCLE_S
        starts.append(now)
        known = [r for r in rows.values() if r["status"] in schedule.VALUED_STATUSES and r["observed_count"]]
        if known:
            new = sum(1 for r in rows.values() if r["fetch_count"] == 0)
            histories = {c: np.array([np.nan if r[c] is None else r[c] for r in known], dtype=float)
                         for c in schedule_fit.HISTORY_COLUMNS}
            fitted = schedule_fit.fit(histories, cfg, refresh_per_cycle=schedule.refresh_budget(top_n, quotas[0], new),
                                      cycle_s=schedule.cycle_seconds(starts, now), sampled_share=1.0, seed=cycle)
            policy = schedule_policy(cfg, fitted)
        early = selection.early_rule(np.array([r["status"] for r in rows.values()], dtype=object),
                                     np.array([np.nan if r["next_fetch_at"] is None else r["next_fetch_at"]
                                               for r in rows.values()], dtype=float),
                                     np.array([np.nan if r["last_fetched_at"] is None else r["last_fetched_at"]
                                               for r in rows.values()], dtype=float),
                                     now, float(cfg["schedule.min_interval_s"]), selection.NUMPY_OPS)
        due = [r for r, e in zip(rows.values(), early)
               if r["status"] in ("unfetched", "fetched", "notmodified")
               and (e or (r["next_fetch_at"] is not None and r["next_fetch_at"] <= now))]
        chosen = selection.select(due, lambda host: top_n, {}, quotas, top_n, cfg, now)
        refetches.append(sum(1 for row, _ in chosen if row["fetch_count"]))
        for row, _ in chosen:
            p = row["url_hash"]
            v = web.version(p, now)
            state = lease(rows[p], "s", now, 600.0)
            etag = f'"{p}-{v}"'
            outcome = {"fetched_at": now, "etag": etag, "http_status": 200, "error": None,
                       "last_modified": email.utils.formatdate(web.changed_at(p, v), usegmt=True),
                       "content_hash": etag, "text_hash": hash(etag), "content_type": "text/html"}
            outcome["fetch_status"] = FetchStatus.NOT_MODIFIED if state["etag"] == etag else FetchStatus.OK
            rows[p] = apply_fetch(state, outcome, policy)
            events.append((p, now, v))
    return events, refetches


def replay_credits(web: Web, freq: np.ndarray, first_fetch: dict[int, float], refetches: list[int]):
    """A fixed frequency per page as fetch credits: every cycle the pages with the most credit
    are refetched, as many as the crawler refetched; first fetches as the crawler's."""
    n = len(web.kind)
    credit = np.zeros(n)
    events = [(p, t, web.version(p, t)) for p, t in first_fetch.items()]
    for cycle, count in enumerate(refetches):
        now = START + 5.0 + cycle * CYCLE_S
        known = np.array([p in first_fetch and first_fetch[p] < now for p in range(n)])
        credit += np.where(known, freq, 0.0) * CYCLE_S
        order = np.lexsort((np.arange(n), -credit, ~known))
        for p in order[:count]:
            credit[p] -= 1.0
            events.append((int(p), now, web.version(int(p), now)))
    return events


def uniform(web: Web, first_fetch: dict[int, float], refetches: list[int]):
    n = len(web.kind)
    last = np.full(n, np.inf)
    events = [(p, t, web.version(p, t)) for p, t in first_fetch.items()]
    for cycle, count in enumerate(refetches):
        now = START + 5.0 + cycle * CYCLE_S
        for p, t in first_fetch.items():
            if t < now and math.isinf(last[p]):
                last[p] = t
        order = np.lexsort((np.arange(n), last))
        for p in [int(p) for p in order if math.isfinite(last[p])][:count]:
            last[p] = now
            events.append((p, now, web.version(p, now)))
    return events


def optimal_frequencies(rate: np.ndarray, budget_per_s: float) -> np.ndarray:
    """Cho & Garcia-Molina with the true rates and equal weights: the μ at which the optimal
    intervals use the budget (bisection), their frequencies (0 for pages not worth a fetch)."""
    lo, hi = 1e-6, 1e6
    for _ in range(100):
        mu = math.sqrt(lo * hi)
        f = 1.0 / np.asarray(schedule.optimal_interval(rate, np.ones_like(rate), mu))
        lo, hi = (mu, hi) if f.sum() > budget_per_s else (lo, mu)
    return 1.0 / np.asarray(schedule.optimal_interval(rate, np.ones_like(rate), hi))


def freshness(web: Web, events, t_lo: float, t_hi: float) -> np.ndarray:
    """Per page: the share of [t_lo, t_hi] its stored copy was the live version."""
    n = len(web.kind)
    fresh = np.zeros(n)
    by_page: dict[int, list[tuple[float, int]]] = {}
    for p, t, v in events:
        by_page.setdefault(p, []).append((t, v))
    for p, evs in by_page.items():
        evs.sort()
        for k, (t, v) in enumerate(evs):
            end = evs[k + 1][0] if k + 1 < len(evs) else t_hi
            stale_at = START + web.changes[p][v] if v < web.changes[p].size else math.inf
            fresh[p] += max(0.0, min(end, stale_at, t_hi) - max(t, t_lo))
    return fresh / (t_hi - t_lo)


@pytest.mark.parametrize("seed,share", [(1, 0.25), (2, 0.125)])
def test_the_refresh_budget_goes_where_it_buys_freshness(seed, share):
    web = Web(seed)
    top_n = int(share * len(web.kind))
    cfg = make_config(**{"schedule.min_interval_s": 5, "schedule.max_interval_s": 7200,
                         "schedule.prior_min_change_s": 5, "schedule.prior_max_change_s": 86400,
                         "generate.top_n": top_n, "generate.max_urls_per_host": top_n})
    events, refetches = crawl(web, top_n, cfg)
    first: dict[int, float] = {}
    for p, t, _ in events:
        first.setdefault(p, t)
    assert len(first) == len(web.kind)  # every page found and fetched
    warm = CYCLES // 3
    t_lo, t_hi = START + 5.0 + warm * CYCLE_S, START + 5.0 + CYCLES * CYCLE_S
    assert min(refetches[warm:]) == top_n  # finding 1 still holds: every cycle full
    rate = np.where(np.isinf(web.mean), 0.0, 1.0 / web.mean)
    opt = replay_credits(web, optimal_frequencies(rate, sum(refetches[warm:]) / (t_hi - t_lo)), first, refetches)
    ours, best, rr = (freshness(web, e, t_lo, t_hi) for e in (events, opt, uniform(web, first, refetches)))
    # 0.983 and 0.978 with the fitted rate prior, the information value and the flatter importance;
    # 0.977 and 0.962 without them (changes dated by Last-Modified alone); 0.975 and 0.946 before that
    assert ours.mean() >= 0.97 * best.mean(), (ours.mean() / best.mean(), rr.mean() / best.mean())
    assert ours.mean() > rr.mean()

    def refetches_per_page(evs):
        return np.bincount([p for p, t, _ in evs if t_lo <= t < t_hi and first[p] < t], minlength=len(web.kind))

    per_page, per_page_opt = refetches_per_page(events), refetches_per_page(opt)
    never = np.isinf(web.mean)
    fast = web.mean < 60
    medium = (web.mean >= 60) & (web.mean < 600)
    # finding 2: fast pages were over-served (1.7x the optimum's fetches) and medium ones
    # under-served (0.6x): a page that changed at every visit looked like a medium one. Dating
    # each change by its Last-Modified (schedule.record_exposure) tells them apart: 1.1x here
    # (1.4x when a change was only known to lie before its Last-Modified)
    assert per_page[fast].mean() <= 1.25 * per_page_opt[fast].mean(), (per_page[fast].mean(), per_page_opt[fast].mean())
    assert per_page[medium].mean() >= 0.65 * per_page_opt[medium].mean()
    for kind in ("home", "important", "normal", "deep"):
        pages = web.kind == kind
        changing = per_page[pages & ~never].mean()
        # finding 3: a page never seen to change (and old by its Last-Modified) gets a fraction of
        # what the changing pages of its kind get (the optimum gives it nothing; some budget is
        # left over every cycle, and it goes to the pages whose fetch buys the most, these included)
        if (pages & never).any():
            assert per_page[pages & never].mean() <= 0.25 * changing, kind
        # finding 4: deep pages were fetched once and never again; every kind is refreshed now
        assert changing >= 1.0, kind
