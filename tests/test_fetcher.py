"""The fetcher (crawl/fetch/fetcher.py) against the real test web on loopback, without Spark."""
from __future__ import annotations

import socket

import pytest

from crawl.config import build_config
from crawl.fetch.fetcher import fetch_partition
from crawl.crawldb.status import FetchStatus as FS
from crawl.net.urls import host_bucket, host_of, normalize_url, url_hash
from tests.politeness import assert_polite
from tests.conftest import TEST_WEB_NETWORKS

DELAY = 0.2
# a test-web address no test web uses (they start at 127.0.0.2): a closed port there is a dead host
DEAD_ADDRESS = "127.0.0.254"


def cfg(**kw):
    # sitemap reading adds requests per host; it has its own test below
    base = {"fetch.delay_s": DELAY, "fetch.connect_timeout_s": 2.0, "fetch.read_timeout_s": 2.0,
            "fetch.total_timeout_s": 4.0, "sitemaps.enabled": False, "fetch.allow_networks": TEST_WEB_NETWORKS}
    base.update({k.replace("__", "."): v for k, v in kw.items()})
    return build_config(overrides=base)


def rows_for(urls, **extra):
    rows = []
    for u in urls:
        u = normalize_url(u)
        host = host_of(u)
        row = {"url": u, "url_hash": url_hash(u), "host": host, "host_bucket": host_bucket(host, 16),
               "depth": 0, "score": 1.0, "segment_id": "seg", "etag": None, "last_modified": None,
               "robots_status": None, "robots_txt": None, "robots_fetched_at": None}
        row.update(extra)
        if row["robots_status"] is not None:  # a cached answer is the answer of the URL's origin
            row.setdefault("robots_scheme", u.split("://", 1)[0])
        rows.append(row)
    return rows


def host_urls(web, i, pages=4):
    base = web.seed_urls()[i]
    urls = [base] + [f"{base}p/{k}.html" for k in range(pages)]
    if web.has_private(i):
        urls += [f"{base}private/0.html", f"{base}private/1.html"]
    return urls


def kind_index(web, kind):
    return next(i for i in range(len(web.host_names)) if web.robots_kind(i) == kind)


def test_fetches_politely_and_obeys_robots(devweb):
    urls = [u for i in range(4) for u in host_urls(devweb, i)]
    out = fetch_partition(rows_for(urls), cfg())
    url_rows = {r["url"]: r for r in out if r["kind"] == "url"}
    host_rows = [r for r in out if r["kind"] == "host"]
    assert set(url_rows) == {normalize_url(u) for u in urls}
    assert len(host_rows) == 4
    for url, r in url_rows.items():
        if devweb.is_disallowed(url):
            assert r["fetch_status"] == FS.ROBOTS_DENIED
        else:
            assert r["fetch_status"] == FS.OK and r["http_status"] == 200, r
            assert r["content_hash"] and r["content_length"] > 0
            assert set(r["outlinks"]) == set(devweb.outlinks(url)) - {url}
    assert_polite(devweb, devweb.requests(), DELAY)
    delay_host = [h for h in host_rows if devweb.robots_kind(devweb.host_names.index(h["host"])) == "crawl_delay"][0]
    assert delay_host["crawl_delay_s"] == devweb.crawl_delay_s
    missing = [h for h in host_rows if devweb.robots_kind(devweb.host_names.index(h["host"])) == "missing"][0]
    assert missing["robots_status"] == 404 and missing["robots_txt"] is None


def test_cached_robots_is_not_fetched_again(devweb):
    import time
    i = kind_index(devweb, "disallow")
    rows = rows_for(host_urls(devweb, i), robots_status=200, robots_txt="User-agent: *\nDisallow: /p/\n",
                    robots_fetched_at=time.time() - 60)
    out = fetch_partition(rows, cfg())
    paths = [e["path"] for e in devweb.requests()]
    assert "/robots.txt" not in paths
    # the cached policy (not the live one) was obeyed
    assert not any(p.startswith("/p/") for p in paths)
    assert {r["fetch_status"] for r in out if r["kind"] == "url" and "/p/" in r["url"]} == {FS.ROBOTS_DENIED}


def test_a_cached_robots_txt_adds_no_wait_before_the_first_page(devweb):
    """A host whose robots.txt answer is cached and which nobody contacted lately is asked for its
    first page at once: no request was made, so there is no gap to keep. Before, every segment
    waited one delay per host before its first page (the time limit below then ends the fetch with
    the page not attempted)."""
    import time
    i = kind_index(devweb, "missing")
    rows = rows_for(host_urls(devweb, i, pages=0), robots_status=404, robots_fetched_at=time.time() - 60)
    out = fetch_partition(rows, cfg(fetch__delay_s=60.0, fetch__time_limit_s=10.0))
    assert [r["fetch_status"] for r in out if r["kind"] == "url"] == [FS.OK]


def test_a_cached_crawl_delay_counts_from_the_last_contact_of_the_segment_before(devweb):
    """The cached robots.txt's Crawl-delay (above fetch.delay_s) is kept after the last request the
    segment fetched before sent (jobs/fetch.py recent_contacts), checked from the server's log."""
    import time
    i = kind_index(devweb, "missing")
    host = host_of(normalize_url(devweb.seed_urls()[i]))
    ended = time.time()
    rows = rows_for(host_urls(devweb, i, pages=0), robots_status=200, robots_txt="User-agent: *\nCrawl-delay: 1.5\n",
                    robots_fetched_at=ended - 60)
    out = fetch_partition(rows, cfg(), recent={host: {"ended": ended, "gap": DELAY}})
    assert [r["fetch_status"] for r in out if r["kind"] == "url"] == [FS.OK]
    assert [e["ts"] - ended for e in devweb.requests()][0] >= 1.5


def test_large_crawl_delay_defers_the_host(devweb):
    i = kind_index(devweb, "crawl_delay")
    out = fetch_partition(rows_for(host_urls(devweb, i)), cfg(fetch__max_crawl_delay_s=0.1))
    assert {r["fetch_status"] for r in out if r["kind"] == "url"} == {FS.DEFERRED}
    assert [e["path"] for e in devweb.requests()] == ["/robots.txt"]
    assert [r["deferred"] for r in out if r["kind"] == "host"] == [True]


def _closed_port():
    s = socket.socket()
    s.bind((DEAD_ADDRESS, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_dead_host_backs_off_instead_of_crashing(devweb):
    dead = f"http://{DEAD_ADDRESS}:{_closed_port()}/"
    urls = [dead, dead + "a.html"] + host_urls(devweb, kind_index(devweb, "allow_all"), pages=1)
    out = fetch_partition(rows_for(urls), cfg())
    by_url = {r["url"]: r for r in out if r["kind"] == "url"}
    assert by_url[dead]["fetch_status"] == FS.NOT_ATTEMPTED and "robots.txt unreachable" in by_url[dead]["error"]
    assert by_url[dead + "a.html"]["fetch_status"] == FS.NOT_ATTEMPTED
    dead_host = [r for r in out if r["kind"] == "host" and r["host"] == dead.split("/")[2]][0]
    assert dead_host["backoff_until"] is not None and dead_host["robots_status"] == -1
    assert sum(r["fetch_status"] == FS.OK for r in by_url.values()) == 2  # the live host is unaffected


def test_not_found_page(devweb):
    base = devweb.seed_urls()[kind_index(devweb, "allow_all")]
    out = fetch_partition(rows_for([base + "nope.html"]), cfg())
    r = [r for r in out if r["kind"] == "url"][0]
    assert r["fetch_status"] == FS.NOT_FOUND and r["http_status"] == 404


def test_time_limit_reports_the_rest_as_not_attempted(devweb):
    i = kind_index(devweb, "allow_all")
    urls = host_urls(devweb, i, pages=8)
    out = fetch_partition(rows_for(urls), cfg(fetch__time_limit_s=0.5, fetch__delay_s=0.3))
    rows = [r for r in out if r["kind"] == "url"]
    assert len(rows) == len(urls)  # every URL ends in a recorded outcome
    attempted = [r for r in rows if r["fetch_status"] == FS.OK]
    assert 1 <= len(attempted) < len(urls)
    assert {r["fetch_status"] for r in rows} - {FS.OK} == {FS.NOT_ATTEMPTED}
    assert len([e for e in devweb.requests() if e["path"] != "/robots.txt"]) == len(attempted)


def test_empty_partition():
    assert fetch_partition([], cfg()) == []


@pytest.mark.parametrize("concurrency", [1, 8])
def test_one_request_in_flight_per_host(devweb, concurrency):
    urls = [u for i in range(3) for u in host_urls(devweb, i, pages=3)]
    fetch_partition(rows_for(urls), cfg(fetch__max_concurrency=concurrency, fetch__delay_s=0.05))
    assert_polite(devweb, devweb.requests(), 0.05)


def test_host_override_delay_and_concurrency(devweb, tmp_path):
    from crawl.fetch.requestlog import RequestLog
    i = kind_index(devweb, "allow_all")
    host = devweb.host_names[i]
    j = kind_index(devweb, "disallow")
    overrides = [{"pattern": host.split(":")[0], "delay_s": 0.05, "max_concurrency": 2}]
    urls = host_urls(devweb, i, pages=6) + host_urls(devweb, j, pages=2)
    with RequestLog(str(tmp_path), "run", 0, 0) as sent:
        out = fetch_partition(rows_for(urls), cfg(fetch__host_overrides=overrides, fetch__delay_s=0.3),
                              request_log=sent)
    hosts = {r["host"]: r for r in out if r["kind"] == "host"}
    assert hosts[host]["override_pattern"] == host.split(":")[0] and hosts[host]["min_delay_s"] == 0.05
    assert hosts[devweb.host_names[j]]["override_pattern"] is None
    log = devweb.requests()
    fast = [e for e in log if e["host"] == host]
    slow = [e for e in log if e["host"] == devweb.host_names[j]]
    # starts on the overridden host are at least its own delay apart (as sent: with two connections,
    # arrivals at the server can come closer by the jitter of a loaded machine), and the server
    # never sees more than 2 in flight
    starts = [float(line.split("\t")[0]) for line in open(sent.path) if f"\t{host}\t" in line]
    assert len(starts) == len(fast) and min(b - a for a, b in zip(starts, starts[1:])) >= 0.05 - 0.005
    for e in fast:
        overlapping = [o for o in fast if o["ts"] < e["done_ts"] and o["done_ts"] > e["ts"]]
        assert len(overlapping) <= 2
    assert_polite(devweb, slow, 0.3)  # the others keep the global delay


def test_a_cached_robots_failure_is_not_reused(devweb):
    import time
    i = kind_index(devweb, "disallow")
    rows = rows_for(host_urls(devweb, i, pages=1), robots_status=503, robots_txt=None,
                    robots_fetched_at=time.time() - 60)
    out = fetch_partition(rows, cfg())
    assert devweb.requests()[0]["path"] == "/robots.txt"  # asked again
    assert {r["fetch_status"] for r in out if r["kind"] == "url"} == {FS.OK, FS.ROBOTS_DENIED}


def test_a_robots_parser_failure_fails_closed_and_is_recorded(devweb, monkeypatch):
    def parse(text):
        raise ValueError("hostile pattern")
    monkeypatch.setattr("crawl.fetch.robots.Protego.parse", parse)
    i = kind_index(devweb, "disallow")
    urls = host_urls(devweb, i, pages=2)
    out = fetch_partition(rows_for(urls), cfg())
    # the server saw the robots.txt request and nothing else: not /private/, not any page
    assert [e["path"] for e in devweb.requests()] == ["/robots.txt"]
    url_rows = [r for r in out if r["kind"] == "url"]
    assert len(url_rows) == len(urls) and {r["fetch_status"] for r in url_rows} == {FS.NOT_ATTEMPTED}
    assert all(r["error"].startswith("robots.txt unparsable: ValueError") for r in url_rows)
    [host] = [r for r in out if r["kind"] == "host"]
    assert host["robots_error"] == "robots.txt unparsable: ValueError: hostile pattern"
    assert host["stop_reason"] == "robots.txt unparsable" and host["backoff_until"] is not None


class _BrokenParser:
    async def parse(self, body, url, content_type_header, max_outlinks):
        raise RuntimeError("parser exploded")


def test_an_internal_failure_still_gives_every_url_a_row(devweb):
    urls = host_urls(devweb, kind_index(devweb, "allow_all"), pages=2)
    out = fetch_partition(rows_for(urls), cfg(), parser=_BrokenParser())
    rows = [r for r in out if r["kind"] == "url"]
    assert sorted(r["url"] for r in rows) == sorted(normalize_url(u) for u in urls)
    assert all("internal error" in r["error"] for r in rows)


@pytest.mark.parametrize("encoding", ["gzip-multi", "gzip-cut", "deflate-raw", "deflate-zlib"])
def test_read_body_decodes_what_servers_send(encoding):
    import asyncio
    import zlib

    from crawl.fetch.http import read_body
    payload = b"<html>" + b"x" * 5000 + b"</html>"

    def gz(data):
        c = zlib.compressobj(wbits=31)
        return c.compress(data) + c.flush()
    if encoding == "gzip-multi":
        wire, header, expect = gz(payload[:2000]) + gz(payload[2000:]), "gzip", (payload, None)
    elif encoding == "gzip-cut":
        wire, header, expect = gz(payload)[:40], "gzip", (None, "incomplete gzip body")
    elif encoding == "deflate-raw":
        c = zlib.compressobj(wbits=-15)
        wire, header, expect = c.compress(payload) + c.flush(), "deflate", (payload, None)
    else:
        wire, header, expect = zlib.compress(payload), "deflate", (payload, None)

    class Content:
        async def iter_chunked(self, n):
            for i in range(0, len(wire), 7):
                yield wire[i:i + 7]

    class Resp:
        headers = {"Content-Encoding": header}
        content = Content()

    body = asyncio.run(read_body(Resp(), 1 << 20))
    if expect[0] is not None:
        assert body.data == expect[0] and body.encoding_error is None
    else:
        assert body.encoding_error == expect[1]


def test_sitemaps_are_read_politely_after_robots_and_their_urls_reported():
    from crawl.devweb.web import DevWeb
    with DevWeb(hosts=4, pages_per_host=6, port=0, seed=2, crawl_delay_s=0.2, sitemaps=True) as web:
        rows = rows_for([f"http://{h}/" for h in web.host_names])
        out = fetch_partition(rows, cfg(sitemaps__enabled=True))
        log = web.requests()
        web.clear_log()
        # hosts whose sitemaps were read recently (generate passes the time) are not asked again
        again = rows_for([f"http://{h}/" for h in web.host_names], sitemaps_fetched_at=1.0)
        fetch_partition(again, cfg(sitemaps__enabled=True))
        assert not [e for e in web.requests() if "sitemap" in e["path"]]
    hosts = {r["host"]: r for r in out if r["kind"] == "host"}
    for i, h in enumerate(web.host_names):
        entries = {e["url"]: e["lastmod"] for e in hosts[h]["sitemap_entries"]}
        orphans = {u for u in web.sitemap_only_urls() if f"//{h}/" in u}
        assert orphans <= set(entries), (web.robots_kind(i), entries)
        assert hosts[h]["sitemaps_fetched_at"] is not None
        if web.robots_kind(i) == "disallow":  # index -> gzip child with <lastmod> + orphans file
            assert len(entries) == len(orphans) + 6
            assert entries[f"http://{h}/p/0.html"] is not None
    paths = [e["path"] for e in log]
    assert "/sitemap-pages.xml.gz" in paths and "/sitemap.xml" in paths
    from tests.politeness import assert_polite
    assert_polite(web, log, DELAY)


def test_a_host_with_two_connections_has_its_sends_spaced_not_only_its_starts(tmp_path):
    """The scheduler spaces the starts of a multi-connection host's steps a gap apart; a step that
    reaches its send late (a busy event loop) must not bring two sends closer than the gap."""
    import asyncio
    import time

    from crawl.fetch.fetcher import HostQueue, TaskContext
    from crawl.fetch.requestlog import RequestLog
    host = "two.example"
    conf = cfg(fetch__host_overrides=[{"pattern": host, "delay_s": 0.2, "max_concurrency": 2}])
    with RequestLog(str(tmp_path), "run", 0, 0) as sent:
        queue = HostQueue(host, rows_for([f"http://{host}/a", f"http://{host}/b"]), TaskContext(conf, None, None, None,
                                                                                               request_log=sent))
        assert queue.slots == 2

        async def two_late_steps():  # both steps reach their send at once, as after a stall
            await asyncio.gather(queue.spaced_send("page", f"http://{host}/a"),
                                 queue.spaced_send("page", f"http://{host}/b"))
        started = time.time()
        asyncio.run(two_late_steps())
    times = [float(line.split("\t")[0]) for line in open(sent.path)]
    assert len(times) == 2 and times[0] >= started and times[1] - times[0] >= 0.2
