"""End to end: `deltacrawl crawl` for 3 cycles over the bundled test web (10 hosts, loopback),
checked from the crawldb (everything reachable was fetched) and from the server's request log
(robots.txt first, nothing disallowed, never faster than the configured delay)."""
from __future__ import annotations

from jobs import cli
from tests.conftest import FAST, write_seeds
from tests.politeness import assert_polite

CYCLES = 3


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


def test_three_cycles_over_the_test_web(spark, devweb, tmp_path, capsys):
    seeds = write_seeds(tmp_path / "seeds.txt", devweb.seed_urls())
    root = str(tmp_path / "crawl")
    conf = [arg for k, v in FAST.items() for arg in ("--conf", f"{k}={v}")]
    rc = cli.main(["crawl", "--seeds", seeds, "--cycles", str(CYCLES), "--crawl-root", root, *conf])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "by status" in out and "top 10 hosts" in out and out.count("crawl: cycle") == CYCLES

    rows = {r["url"]: r for r in spark.read.format("delta").load(f"{root}/crawldb").collect()}
    expected = reachable(devweb, devweb.seed_urls(), CYCLES)
    fetched = {u for u, r in rows.items() if r["status"] == "fetched"}
    denied = {u for u, r in rows.items() if r["status"] == "robots_denied"}
    assert fetched == {u for u in expected if not devweb.is_disallowed(u)}
    assert denied == {u for u in expected if devweb.is_disallowed(u)}
    assert denied, "the test web should have led the crawler to some disallowed pages"
    assert all(rows[u]["http_status"] == 200 and rows[u]["depth"] < CYCLES for u in fetched)
    # what is left is exactly the next BFS level, unfetched and due
    assert {u for u, r in rows.items() if r["status"] == "unfetched"} == reachable(devweb, devweb.seed_urls(), CYCLES + 1) - expected
    assert all(r["lease_until"] is None for r in rows.values())

    log = devweb.requests()
    assert_polite(devweb, log, float(FAST["fetch.delay_s"]))
    assert {e["host"] for e in log} == set(devweb.host_names)
    pages = [e for e in log if e["path"] != "/robots.txt"]
    assert len(pages) == len(fetched)  # every page requested exactly once
