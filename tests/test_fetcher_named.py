"""The fetcher on the named test web, as the internet looks: HTTPS on host names through a DNS
server on loopback, every TLS and DNS failure kind, addresses reused from host_state, and our own
failures (a broken WARC store, a broken parser) kept apart from the site's."""
from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from crawl.config import build_config
from crawl.crawldb.status import FetchStatus as FS
from crawl.devweb.web import DNS_FAILURES, DevWeb
from crawl.fetch.fetcher import ArchiveError, fetch_hosts
from crawl.net.urls import host_of
from tests.politeness import assert_polite
from tests.test_fetcher import rows_for

DELAY = 0.2


@pytest.fixture(scope="module")
def named():
    web = DevWeb(hosts=3, pages_per_host=6, seed=3, crawl_delay_s=0.3, named=True).start()
    yield web
    web.stop()


def cfg_for(web, **kw):
    base = build_config()
    values = {**web.crawl_config(base), "fetch.delay_s": DELAY, "fetch.connect_timeout_s": 2.0,
              "fetch.read_timeout_s": 2.0, "fetch.total_timeout_s": 4.0, "sitemaps.enabled": False,
              "fetch.dns_timeout_s": 1.0}
    values.update({k.replace("__", "."): v for k, v in kw.items()})
    return build_config(overrides=values)


def fetch(rows, cfg, **kw):
    return asyncio.run(fetch_hosts(rows, cfg, **kw))


def split(out):
    urls = {r["url"]: r for r in out if r["kind"] == "url"}
    hosts = {r["host"]: r for r in out if r["kind"] == "host"}
    return urls, hosts


def test_https_pages_by_name_politely(named):
    named.clear_log()
    urls = [u + p for u in named.seed_urls() for p in ("", "p/0.html", "p/1.html", "p/2.html")]
    out, hosts = split(fetch(rows_for(urls), cfg_for(named)))
    assert all(r["fetch_status"] == FS.OK for r in out.values()), {u: (r["fetch_status"], r["error"]) for u, r in out.items()}
    assert all(u.startswith("https://site") for u in out)
    log = named.requests()
    assert all(e["scheme"] == "https" for e in log)
    assert_polite(named, log, DELAY)
    for row in hosts.values():
        assert row["addresses"] and row["addresses"][0].startswith("127.0.0.")
        assert row["dns_queries"] == 2  # A and AAAA, once for the whole task
        assert row["tls_error"] is None and row["dns_error"] is None
    # keep-alive: a host's robots.txt and its pages share one connection (one TLS handshake)
    connections = Counter(e["host"] for e in {(e["host"], e["peer_port"]): e for e in log}.values())
    assert max(connections.values()) == 1, connections


def test_known_addresses_cost_no_query(named):
    urls = [named.seed_urls()[0]]
    _, hosts = split(fetch(rows_for(urls), cfg_for(named)))
    row = hosts[host_of(urls[0])]
    name = host_of(urls[0]).split(":")[0]
    before = named.dns.queries_for(name)
    again = rows_for(urls, addresses=row["addresses"], addresses_expire_at=row["addresses_expire_at"])
    out, hosts = split(fetch(again, cfg_for(named)))
    assert out[urls[0]]["fetch_status"] == FS.OK
    assert named.dns.queries_for(name) == before  # within its TTL: no query at the DNS server
    assert hosts[host_of(urls[0])]["dns_queries"] == 0
    # an expired answer is asked again
    expired = rows_for(urls, addresses=row["addresses"], addresses_expire_at=1.0)
    fetch(expired, cfg_for(named))
    assert named.dns.queries_for(name) == before + 2


def test_every_tls_failure_is_recorded_and_nothing_is_fetched(named):
    named.clear_log()
    bad = named.bad_certificate_urls()
    urls = [u + p for u in bad.values() for p in ("", "p/1.html", "p/2.html")]
    out, hosts = split(fetch(rows_for(urls), cfg_for(named)))
    kinds = {"tls_expired": "expired", "tls_wrong_name": "name_mismatch", "tls_untrusted": "untrusted_issuer",
             "tls_handshake_hang": "handshake_timeout", "tls_plain_http": "protocol_error"}
    for kind, url in bad.items():
        host = hosts[host_of(url)]
        assert host["tls_error"].startswith(f"TLS {kinds[kind]}:"), (kind, host["tls_error"])
        assert host["backoff_until"] is not None  # backs off across cycles
        for p in ("", "p/1.html", "p/2.html"):
            row = out[url + p]
            assert row["fetch_status"] in (FS.NOT_ATTEMPTED, FS.TLS_ERROR)
            assert f"TLS {kinds[kind]}" in row["error"]
        assert host["requests"] <= 2  # tried a bounded number of times, not once per URL
    assert named.requests() == []  # nothing was fetched over a bad certificate


def test_tls_failure_of_pages_is_bounded_per_cycle(named):
    """robots.txt answered from the cache: the pages' own handshakes fail, max_tls_failures of them."""
    url = named.bad_certificate_urls()["tls_expired"]
    urls = [url] + [f"{url}p/{k}.html" for k in range(5)]
    rows = rows_for(urls, robots_status=404, robots_fetched_at=9e9)
    out, hosts = split(fetch(rows, cfg_for(named, fetch__max_tls_failures=2)))
    statuses = Counter(r["fetch_status"] for r in out.values())
    assert statuses == {FS.TLS_ERROR: 2, FS.NOT_ATTEMPTED: 4}, statuses
    assert hosts[host_of(url)]["stop_reason"].startswith("tls")


def test_tls_verify_off_fetches_what_a_browser_would_show(named):
    url = named.bad_certificate_urls()["tls_untrusted"]
    out, hosts = split(fetch(rows_for([url]), cfg_for(named, fetch__tls_verify=False)))
    assert out[url]["fetch_status"] == FS.OK and hosts[host_of(url)]["tls_error"] is None


@pytest.mark.parametrize("kind,status", [("nxdomain", FS.DNS_ERROR), ("timeout", FS.NOT_ATTEMPTED),
                                         ("servfail", FS.NOT_ATTEMPTED), ("private", FS.BLOCKED_ADDRESS),
                                         ("metadata", FS.BLOCKED_ADDRESS)])
def test_every_dns_failure_is_a_status(named, kind, status):
    name = DNS_FAILURES[kind]
    urls = [f"https://{name}/", f"https://{name}/a.html"]
    out, hosts = split(fetch(rows_for(urls), cfg_for(named)))
    assert {r["fetch_status"] for r in out.values()} == {status}
    host = hosts[name]
    if kind in ("private", "metadata"):
        assert host["stop_reason"].startswith("blocked_address")  # never connected: the guard refused it
        assert host["requests"] == 0
    else:
        assert host["dns_error"].startswith(f"DNS {kind}") and host["requests"] == 0
        assert (host["backoff_until"] is not None) == (kind != "nxdomain")
    assert named.dns.queries_for(name) <= 4 * 3  # bounded: at most A + AAAA, two tries, per run


def test_a_failing_warc_store_fails_the_task_not_the_site(named):
    """Our disk filling up must never count against a host or move a URL towards gone: the task
    fails (Spark retries it) and no row is reported at all."""
    class BrokenStore:
        writes = 0

        def write_exchange(self, *a, **kw):
            BrokenStore.writes += 1
            if BrokenStore.writes > 2:
                raise OSError(30, "Read-only file system")
            from types import SimpleNamespace
            return SimpleNamespace(warc_file="f", offset=0, length=1, payload_digest=None)

        write_revisit = write_exchange

    urls = [u + p for u in named.seed_urls() for p in ("", "p/0.html")]
    with pytest.raises(ArchiveError, match="Read-only file system"):
        fetch(rows_for(urls), cfg_for(named), archive=BrokenStore())


def test_an_internal_error_leaves_the_url_due_and_the_host_uncharged(named):
    class BrokenParser:
        async def parse(self, *a, **kw):
            raise RuntimeError("a bug in our plumbing")

        async def call(self, fn, *a):
            return fn(*a)

    urls = [named.seed_urls()[1] + p for p in ("", "p/0.html", "p/1.html", "p/2.html", "p/3.html", "p/4.html")]
    out, hosts = split(fetch(rows_for(urls), cfg_for(named), parser=BrokenParser()))
    assert {r["fetch_status"] for r in out.values()} == {FS.NOT_ATTEMPTED}
    assert all("internal error" in r["error"] and "a bug in our plumbing" in r["error"] for r in out.values())
    host = hosts[host_of(urls[0])]
    assert host["errors"] == 0 and host["stop_reason"] is None  # six failures, none the host's


def test_warc_records_say_how_the_page_came(named, tmp_path):
    """WARC-IP-Address is the address the name resolved to and was connected; an https response
    also carries WARC-Protocol and WARC-Cipher-Suite."""
    import glob

    from warcio.archiveiterator import ArchiveIterator

    from crawl.fetch.warc import WarcWriter
    url = named.seed_urls()[2]
    with WarcWriter(str(tmp_path), "TEST-named-00000-0", 1 << 20, {"operator": "tests"}) as archive:
        out, _ = split(fetch(rows_for([url]), cfg_for(named), archive=archive))
    assert out[url]["fetch_status"] == FS.OK
    responses = []
    for path in glob.glob(str(tmp_path / "*.warc.gz")):
        with open(path, "rb") as fh:
            responses += [r.rec_headers for r in ArchiveIterator(fh) if r.rec_type == "response"]
    assert len(responses) == 1
    headers = responses[0]
    assert headers.get_header("WARC-IP-Address") == named.addresses[2]
    assert headers.get_header("WARC-Protocol", "").startswith("tls/1.")
    assert headers.get_header("WARC-Cipher-Suite")
