"""The fetcher against the hostile test web: it must stay polite and never crash, hang or
blow up, and every URL must end in a recorded outcome. Checked from the server's request log
and from the task's output, on one shared run (hosts are fetched concurrently). A hang would fail
the first test by its time bound (pytest-timeout, which counts the shared run's set-up), so no test
measures the run's wall-clock time."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from crawl.config import build_config
from crawl.devweb.web import HOSTILE, DevWeb
from crawl.fetch.fetcher import fetch_partition
from crawl.parse.pool import ParserPool
from crawl.crawldb.status import FetchStatus as FS
from crawl.fetch.warc import WarcWriter
from crawl.fetch.warc_read import read_record
from tests.test_fetcher import DEAD_ADDRESS, _closed_port, rows_for
from tests.conftest import TEST_WEB_NETWORKS

LIMIT = 1 << 20
CFG = {"fetch.delay_s": 0.1, "fetch.delay_factor": 0.0, "fetch.connect_timeout_s": 2.0,
       "fetch.read_timeout_s": 2.0, "fetch.total_timeout_s": 3.0, "fetch.max_body_bytes": LIMIT,
       "fetch.max_wait_in_cycle_s": 10.0, "fetch.max_consecutive_errors": 3, "parse.max_outlinks": 1000,
       "fetch.allow_networks": TEST_WEB_NETWORKS}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    warc_dir = str(tmp_path_factory.mktemp("warc"))
    web = DevWeb(hosts=2, pages_per_host=4, port=0, seed=3, hostile=True).start()
    try:
        urls = [u for name in HOSTILE for u in web.hostile_urls(name)]
        urls += [f"http://{web.hostile_hosts['messy']}/p/{k}.html" for k in range(2)]
        rows = rows_for(urls)
        cond = [r for r in rows if web.hostile_hosts["conditional"] in r["url"]]
        dead = f"http://{DEAD_ADDRESS}:{_closed_port()}"
        rows += rows_for([f"{dead}/{i}.html" for i in range(6)], robots_status=404, robots_txt="",
                         robots_fetched_at=time.time())
        cfg = build_config(overrides=CFG)
        with WarcWriter(warc_dir, "TEST-seg-00000-0", 10 * LIMIT, {"operator": "tests"}) as archive, \
                ParserPool(workers=1, memory_limit_bytes=1 << 30, time_limit_s=5.0) as parser:
            # conditional GET: first learn the validators, then ask again with them
            first = {r["url"]: r for r in fetch_partition(cond, cfg, archive, parser) if r["kind"] == "url"}
            for r in cond:
                r["etag"] = first[r["url"]]["etag"]
            web.clear_log()
            out = fetch_partition(rows, cfg, archive, parser)
            files = archive.close()
        yield {"web": web, "out": out, "rows": rows, "log": web.requests(),
               "warc_dir": warc_dir, "files": files, "dead": dead.split("//")[1]}
    finally:
        web.stop()


def urls_of(run, name):
    host = run["web"].hostile_hosts[name]
    return {r["url"]: r for r in run["out"] if r["kind"] == "url" and r["host"] == host}


def host_row(run, name):
    host = run["web"].hostile_hosts[name]
    return [r for r in run["out"] if r["kind"] == "host" and r["host"] == host][0]


def log_of(run, name):
    """The host's requests, without the one /sitemap.xml probe each host gets after robots.txt."""
    host = run["web"].hostile_hosts[name]
    return [e for e in run["log"] if e["host"] == host and e["path"] != "/sitemap.xml"]


def test_every_url_has_exactly_one_outcome_and_every_request_was_cut_short(run):
    outcomes = [r for r in run["out"] if r["kind"] == "url"]
    assert sorted(r["url"] for r in outcomes) == sorted(r["url"] for r in run["rows"])
    assert all(r["fetch_status"] in FS.ALL for r in outcomes)
    # every request the fetcher made ended with the fetcher's own timeouts at the latest, as it
    # recorded them: no_headers never answers and the drip takes a minute per page, both far above
    # this bound (fetch.total_timeout_s is 3 s; the bound leaves a loaded machine's late timers room)
    timed = [r for r in outcomes if r["elapsed_ms"] is not None]
    assert len(timed) > len(outcomes) / 2 and max(r["elapsed_ms"] for r in timed) < 30_000, sorted(
        (r["elapsed_ms"], r["url"]) for r in timed)[-3:]


def test_never_two_requests_in_flight_and_gaps_kept(run):
    by_host = defaultdict(list)
    for e in run["log"]:
        by_host[e["host"]].append(e)
    for host, entries in by_host.items():
        entries.sort(key=lambda e: e["ts"])
        for a, b in zip(entries, entries[1:]):
            assert a["done_ts"] is not None and b["ts"] >= a["done_ts"] - 0.01, f"{host}: overlapping requests"
            assert b["ts"] - a["ts"] >= CFG["fetch.delay_s"] - 0.005, f"{host}: gap too small"


@pytest.mark.parametrize("name", ["robots_500", "robots_429", "robots_redirect_loop"])
def test_unreachable_robots_means_no_page_request(run, name):
    assert {e["path"] for e in log_of(run, name)} <= {"/robots.txt"}
    assert len(log_of(run, name)) <= 6  # a redirect loop is cut after 5 hops
    outcomes = urls_of(run, name)
    # not requested, retries not used up: the URLs stay due while the host backs off
    assert {r["fetch_status"] for r in outcomes.values()} == {FS.NOT_ATTEMPTED}
    assert host_row(run, name)["backoff_until"] > time.time()


def test_robots_redirect_is_followed(run):
    outcomes = urls_of(run, "robots_redirect")
    assert [e["path"] for e in log_of(run, "robots_redirect")][:2] == ["/robots.txt", "/real-robots.txt"]
    assert {r["fetch_status"] for u, r in outcomes.items() if "/private/" in u} == {FS.ROBOTS_DENIED}
    assert {r["fetch_status"] for u, r in outcomes.items() if "/p/" in u} == {FS.OK}


def test_huge_robots_is_read_only_up_to_the_limit(run):
    outcomes = urls_of(run, "robots_huge")
    assert {r["fetch_status"] for u, r in outcomes.items() if "/p/" in u} == {FS.OK}  # the tail is ignored
    assert {r["fetch_status"] for u, r in outcomes.items() if "/private/" in u} == {FS.ROBOTS_DENIED}


def test_big_crawl_delay_defers_the_host(run):
    assert [e["path"] for e in log_of(run, "crawl_delay_big")] == ["/robots.txt"]
    assert {r["fetch_status"] for r in urls_of(run, "crawl_delay_big").values()} == {FS.DEFERRED}
    assert host_row(run, "crawl_delay_big")["deferred"] is True


@pytest.mark.parametrize("name", ["drip", "no_headers"])
def test_slow_servers_are_cut_off_by_the_timeouts(run, name):
    (outcome,) = urls_of(run, name).values()
    assert outcome["fetch_status"] == FS.NETWORK_ERROR and "Timeout" in outcome["error"]
    # cut by the timeout: the drip's page takes a minute, no_headers never answers (a bound far
    # above fetch.total_timeout_s, which a loaded machine's late timers cannot reach)
    assert outcome["elapsed_ms"] < 30_000


@pytest.mark.parametrize("name", ["huge", "gzip_bomb"])
def test_big_and_bomb_bodies_are_truncated_at_the_limit(run, name):
    (outcome,) = urls_of(run, name).values()
    assert outcome["fetch_status"] == FS.OK and outcome["truncated"] is True
    assert outcome["content_length"] == LIMIT


def test_redirects_are_recorded_not_followed(run):
    outcomes = urls_of(run, "redirects")
    base = f"http://{run['web'].hostile_hosts['redirects']}"
    assert outcomes[f"{base}/r2/0"]["fetch_status"] == FS.REDIRECT
    assert outcomes[f"{base}/r2/0"]["redirect_to"].startswith(base)
    assert outcomes[f"{base}/loop/a"]["redirect_to"] == f"{base}/loop/b"
    assert outcomes[f"{base}/offsite"]["redirect_to"] == run["web"].seed_urls()[0] + "p/0.html"
    assert len(log_of(run, "redirects")) == 1 + 5  # robots.txt + one request per URL, no hops followed


def test_retry_after_is_honoured(run):
    entries = log_of(run, "rate_limited")
    for a, b in zip(entries, entries[1:]):
        if a["status"] == 429:
            assert b["ts"] - a["done_ts"] >= 2.0 - 0.05, "request sent before Retry-After elapsed"
    outcomes = urls_of(run, "rate_limited")
    assert any(r["http_status"] == 429 for r in outcomes.values())
    assert any(r["fetch_status"] == FS.OK for r in outcomes.values())


def test_503_without_retry_after_backs_off_exponentially(run):
    entries = [e for e in log_of(run, "unavailable") if e["path"] != "/robots.txt"]
    assert entries[0]["status"] == 503
    gap_after_503 = entries[1]["ts"] - entries[0]["done_ts"]
    assert gap_after_503 >= 1.0 - 0.05  # backoff starts at max(delay, 1 s)
    assert host_row(run, "unavailable")["errors"] >= 1


def test_conditional_get_gives_not_modified_and_a_revisit_record(run):
    outcomes = urls_of(run, "conditional")
    assert {r["fetch_status"] for r in outcomes.values()} == {FS.NOT_MODIFIED}
    r = next(iter(outcomes.values()))
    record = read_record(os.path.join(run["warc_dir"], r["warc_file"]), r["warc_offset"])
    assert record["warc_type"] == "revisit" and record["http_status"] == 304


def test_messy_pages_never_break_parsing(run):
    outcomes = urls_of(run, "messy")
    base = f"http://{run['web'].hostile_hosts['messy']}"
    assert all(r["fetch_status"] == FS.OK and r["parse_error"] is None for r in outcomes.values())
    assert len(outcomes[f"{base}/many-links.html"]["outlinks"]) == CFG["parse.max_outlinks"]
    assert outcomes[f"{base}/image.png"]["outlinks"] == [] and outcomes[f"{base}/doc.pdf"]["outlinks"] == []
    assert outcomes[f"{base}/page.xhtml"]["outlinks"]
    assert outcomes[f"{base}/empty.html"]["content_length"] == 0


def test_error_budget_stops_a_dead_host(run):
    dead = {r["url"]: r for r in run["out"] if r["kind"] == "url" and r["host"] == run["dead"]}
    statuses = sorted(r["fetch_status"] for r in dead.values())
    assert statuses.count(FS.NETWORK_ERROR) == CFG["fetch.max_consecutive_errors"]
    assert statuses.count(FS.NOT_ATTEMPTED) == 6 - CFG["fetch.max_consecutive_errors"]


def test_archived_records_pass_warcio_check_and_read_back(run):
    assert run["files"]
    for name in run["files"]:
        proc = subprocess.run([sys.executable, "-m", "warcio.cli", "check", os.path.join(run["warc_dir"], name)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    ok = [r for r in run["out"] if r["kind"] == "url" and r["fetch_status"] == FS.OK and r["warc_file"]]
    assert ok
    for r in ok[:20]:
        record = read_record(os.path.join(run["warc_dir"], r["warc_file"]), r["warc_offset"])
        assert record["target_uri"] == r["url"] and len(record["payload"]) == r["content_length"]
