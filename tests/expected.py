"""What a crawl of the bundled test web must hold, worked out from the web itself (its link graph,
its robots.txt rules and its own request log), so a crawl is checked against the web rather than
against another crawl."""
from __future__ import annotations

from collections import Counter


def reachable(web, seeds, cycles):
    """URLs a crawler reaches in `cycles` cycles: BFS levels 0..cycles-1; disallowed pages are
    reached (and recorded robots_denied) but contribute no outlinks."""
    levels, seen = [list(seeds)], set(seeds)
    for _ in range(cycles - 1):
        nxt = []
        for url in levels[-1]:
            if web.is_disallowed(url):
                continue
            for link in web.outlinks(url):
                if link not in seen:
                    seen.add(link)
                    nxt.append(link)
        levels.append(nxt)
    return seen


def assert_breadth_first(rows, web, seeds, cycles):
    """``rows`` (url -> crawldb row) after ``cycles`` cycles from ``seeds``: every page within
    reach fetched (HTTP 200; a page dedup found to repeat another's text is fetched too, status
    duplicate) or, if disallowed, recorded robots_denied; exactly the next level left unfetched;
    no lease left. Returns the fetched URLs."""
    expected = reachable(web, seeds, cycles)
    fetched = {u for u, r in rows.items() if r["status"] in ("fetched", "duplicate")}
    denied = {u for u, r in rows.items() if r["status"] == "robots_denied"}
    assert fetched == {u for u in expected if not web.is_disallowed(u)}
    assert denied == {u for u in expected if web.is_disallowed(u)}
    assert all(rows[u]["http_status"] == 200 and rows[u]["depth"] < cycles for u in fetched)
    unfetched = {u for u, r in rows.items() if r["status"] == "unfetched"}
    assert unfetched == reachable(web, seeds, cycles + 1) - expected
    assert all(r["lease_until"] is None for r in rows.values())
    return fetched


def assert_hosts_and_index(rows, hosts, index, log):
    """The hostdb (host -> row) and the WARC index (its rows) against the crawldb (url -> row) and
    the server's request log of the whole crawl: each host's request count and robots.txt answer
    as the server saw them, its fetched pages and URLs as the crawldb has them, and one 200
    text/html record per fetched page."""
    by_host = Counter(e["host"] for e in log)
    assert set(hosts) == set(by_host)
    for host, h in hosts.items():
        robots = [e["status"] for e in log if e["host"] == host and e["path"] == "/robots.txt"]
        assert robots and str(h["robots_status"]) == str(robots[-1]), (host, h["robots_status"], robots)
        assert h["requests"] == by_host[host], (host, h["requests"], by_host[host])
        mine = [r for r in rows.values() if r["host"] == host]
        assert h["url_count"] == len(mine), host
        assert h["pages_fetched"] == sum(r["status"] == "fetched" for r in mine), host
    fetched = {u for u, r in rows.items() if r["status"] == "fetched"}
    assert sorted((r["url"], r["http_status"], r["mime"]) for r in index) == \
        sorted((u, 200, "text/html") for u in fetched)
