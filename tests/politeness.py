"""Checks of politeness made from the test web's own request log (the server's side)."""
from __future__ import annotations

from collections import defaultdict

# Timestamps are taken by the server at arrival; the fetcher waits from the END of one request
# to the start of the next, so arrivals can only be further apart. Allow clock granularity only.
TOLERANCE_S = 0.005


def requests_by_host(log):
    by_host = defaultdict(list)
    for entry in log:
        by_host[entry["host"]].append(entry)
    return by_host


def assert_polite(web, log, delay_s: float, robots_per_host: int = 1):
    """``robots_per_host``: how many fetch runs may each have asked a host for robots.txt (more
    than one only where a run died before its answers were stored: the run after it asks again)."""
    assert log, "the server saw no request at all"
    for host, entries in requests_by_host(log).items():
        # a named web's plain-HTTP origins (they only redirect) are hosts of their own
        index = web.host_names.index(host) if host in web.host_names else None
        assert entries[0]["path"] == "/robots.txt", f"{host}: first request was {entries[0]['path']}"
        # cached in the hostdb between cycles: fetched once per host for the whole run
        assert sum(e["path"] == "/robots.txt" for e in entries) <= robots_per_host, f"{host}: robots.txt fetched again"
        for e in entries:
            url = f"{e.get('scheme', 'http')}://{host}{e['path']}"
            assert not web.is_disallowed(url), f"disallowed {url} was requested"
            assert "deltacrawl" in e["user_agent"]
        expected = delay_s
        if index is not None and web.robots_kind(index) == "crawl_delay":
            expected = max(delay_s, web.crawl_delay_s)
        gaps = [b["ts"] - a["ts"] for a, b in zip(entries, entries[1:])]
        if gaps:
            assert min(gaps) >= expected - TOLERANCE_S, f"{host}: gap {min(gaps):.3f}s < {expected}s"
