"""The fair time share of crawl.fetch.fetcher (fetch.host_time_factor, fetch.host_time_floor_s): a host
whose answers drip is stopped for the cycle with its remaining URLs left due, while quick hosts
finish; a polite host with a long Crawl-delay, and a task whose hosts are all slow, are left
alone. Real servers on loopback (crawl.devweb.web), no Spark. Assertions are on outcomes and on the
server's request log, never on how long anything took."""
from __future__ import annotations

import time

import pytest

from crawl.config import ConfigError, build_config
from crawl.devweb.web import DevWeb
from crawl.fetch.fetcher import SLOW_STOP_REASON, fetch_partition
from crawl.crawldb.status import FetchStatus as FS
from tests.test_fetcher import kind_index, rows_for
from tests.conftest import TEST_WEB_NETWORKS

DRIP_URLS = 12
# robots.txt known and empty: every URL allowed, no robots request (the quick hosts' gaps are
# then fetch.delay_s alone)
CACHED_ROBOTS = {"robots_status": 404, "robots_txt": "", "robots_fetched_at": time.time(), "robots_scheme": "http"}
CFG = {"fetch.delay_s": 0.2, "fetch.delay_factor": 0.5, "fetch.max_delay_s": 1.0,
       "fetch.connect_timeout_s": 5.0, "fetch.read_timeout_s": 5.0, "fetch.total_timeout_s": 10.0,
       "parse.isolate": False, "sitemaps.enabled": False, "fetch.allow_networks": TEST_WEB_NETWORKS}


@pytest.fixture(scope="module")
def web():
    dw = DevWeb(hosts=4, pages_per_host=10, port=0, seed=5, crawl_delay_s=1.0, hostile=True).start()
    try:
        yield dw
    finally:
        dw.stop()


def drip_urls(web, n=DRIP_URLS, seconds=1):
    """n distinct URLs of the drip host, each answering its 600-byte page over ``seconds``."""
    base = web.hostile_urls("drip")[0]
    return [f"{base}?s={seconds}&n={k}" for k in range(n)]


def quick_urls(web, i, pages=10):
    base = web.seed_urls()[i]
    return [f"{base}p/{k}.html" for k in range(pages)]


def outcomes(out, host):
    return {r["url"]: r for r in out if r["kind"] == "url" and r["host"] == host}


def host_row(out, host):
    return next(r for r in out if r["kind"] == "host" and r["host"] == host)


def requested(web, host):
    return [e for e in web.requests() if e["host"] == host and e["path"] != "/robots.txt"]


def test_a_dripping_host_is_stopped_and_its_urls_stay_due(web):
    drip = web.hostile_hosts["drip"]
    quick = [0, 2, 3]  # kinds disallow, missing, allow_all: no Crawl-delay in their robots.txt
    rows = rows_for(drip_urls(web), **CACHED_ROBOTS)
    for i in quick:
        rows += rows_for(quick_urls(web, i), **CACHED_ROBOTS)
    cfg = build_config(overrides={**CFG, "fetch.host_time_factor": 1.0, "fetch.host_time_floor_s": 1.0})
    web.clear_log()
    out = fetch_partition(rows, cfg)

    # the quick hosts finish every URL
    for i in quick:
        host = web.seed_urls()[i].split("/")[2]
        got = outcomes(out, host)
        assert len(got) == 10 and {r["fetch_status"] for r in got.values()} == {FS.OK}
        assert host_row(out, host)["stop_reason"] is None
    # the drip host is stopped: some answers were fetched (all complete), the rest never requested
    got = outcomes(out, drip)
    assert len(got) == DRIP_URLS  # every URL still has exactly one outcome
    fetched = {u for u, r in got.items() if r["fetch_status"] == FS.OK}
    left = {u for u, r in got.items() if r["fetch_status"] == FS.NOT_ATTEMPTED}
    assert fetched and left and fetched | left == set(got)
    assert all(r["content_length"] == 600 for u, r in got.items() if u in fetched)
    assert all(r["error"].startswith(f"host stopped for this cycle: {SLOW_STOP_REASON} (") for u, r in got.items()
               if u in left)
    asked = {f"http://{drip}{e['path']}" for e in requested(web, drip)}  # path_qs
    assert asked == fetched  # the URLs left were never asked for
    row = host_row(out, drip)
    assert row["stop_reason"] == SLOW_STOP_REASON and row["requests"] == len(fetched)
    assert row["backoff_until"] is None  # nothing keeps generate away: the URLs are due next cycle


def test_the_rule_off_lets_the_dripping_host_finish(web):
    drip = web.hostile_hosts["drip"]
    rows = rows_for(drip_urls(web, n=3), **CACHED_ROBOTS) + rows_for(quick_urls(web, 0, pages=3), **CACHED_ROBOTS)
    cfg = build_config(overrides={**CFG, "fetch.host_time_factor": 0.0, "fetch.host_time_floor_s": 0.0})
    out = fetch_partition(rows, cfg)
    assert {r["fetch_status"] for r in outcomes(out, drip).values()} == {FS.OK}
    assert host_row(out, drip)["stop_reason"] is None


def test_a_polite_host_with_a_long_crawl_delay_is_not_stopped(web):
    """Politeness sleeps are not charged: this host sleeps ~1 s before each of its pages, far more
    than the floor and than its share (factor 0.5 x the task's span), yet answers quickly."""
    polite = kind_index(web, "crawl_delay")
    host = web.seed_urls()[polite].split("/")[2]
    rows = rows_for(quick_urls(web, polite, pages=3))  # robots.txt fetched live: Crawl-delay 1.0
    rows += rows_for(quick_urls(web, 0, pages=3), **CACHED_ROBOTS)
    cfg = build_config(overrides={**CFG, "fetch.host_time_factor": 0.5, "fetch.host_time_floor_s": 0.3})
    out = fetch_partition(rows, cfg)
    row = host_row(out, host)
    assert row["crawl_delay_s"] == 1.0 and row["stop_reason"] is None
    assert {r["fetch_status"] for r in outcomes(out, host).values()} == {FS.OK}


def test_a_task_whose_hosts_are_all_slow_stops_none(web):
    """The share is relative to the task's typical answer: when every answer is slow (a slow
    network, a task of one slow host) the expected span is long and no host is cut."""
    drip = web.hostile_hosts["drip"]
    rows = rows_for(drip_urls(web, n=3), **CACHED_ROBOTS)
    cfg = build_config(overrides={**CFG, "fetch.host_time_factor": 1.0, "fetch.host_time_floor_s": 0.5})
    out = fetch_partition(rows, cfg)
    assert {r["fetch_status"] for r in outcomes(out, drip).values()} == {FS.OK}
    assert host_row(out, drip)["stop_reason"] is None


@pytest.mark.parametrize("key", ["fetch.host_time_factor", "fetch.host_time_floor_s"])
def test_negative_values_are_refused(key):
    with pytest.raises(ConfigError, match=key):
        build_config(overrides={key: -1.0})


def test_the_fetch_summary_counts_stopped_hosts():
    from jobs.fetch import FetchResult  # the step's summary line (no Spark session needed)
    result = FetchResult("seg", 12, 4, {"not_attempted": 9, "ok": 3}, {SLOW_STOP_REASON: 1})
    assert result.summary().endswith("; hosts stopped for the cycle: slow 1")
    assert "stopped" not in FetchResult("seg", 3, 1, {"ok": 3}).summary()
