"""Discovery through the real jobs, 3 cycles over the test web with sitemaps and the trap host:
normal hosts are covered in full (sitemap-only pages included), the trap host stays within its
caps and gets its budget lowered, rejected links are counted by reason, and the seen-URL
filter keeps known links out of the segment.

These crawls write what update and generate compute for small inputs (in memory). That Spark's
way computes the same rows is checked by tests/test_both_paths_property.py (sitemap lastmod
hints, lowered budgets and per-host total budgets among its cases) and on the crawl of the
hostile web in tests/test_e2e.py, not again on these crawls."""
from __future__ import annotations

from collections import Counter

import pytest

from crawl.devweb.web import DevWeb
from jobs import crawl_cycles as crawl_job
from jobs import stats
from jobs.engine.crawl_root import CrawlRoot
from tests.conftest import make_config, write_seeds
from tests.politeness import assert_polite

CYCLES = 3
PER_CYCLE = 20     # generate.max_urls_per_host: more than a normal host has
TOTAL = 60         # discovery.max_urls_per_host_total


@pytest.fixture(scope="module")
def crawled(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("discovery")
    # two normal hosts: a cross-host link each way, sitemap-only pages on both
    web = DevWeb(hosts=2, pages_per_host=8, port=0, seed=3, crawl_delay_s=0.2, sitemaps=True,
                 hostile=True).start()
    try:
        seeds = web.seed_urls() + web.hostile_urls("traps")
        cfg = make_config(generate__max_urls_per_host=PER_CYCLE, discovery__max_urls_per_host_total=TOTAL,
                          discovery__trap_min_pages=4, fetch__delay_s=0.05)
        root = CrawlRoot(str(tmp / "crawl"))
        result = crawl_job.run(spark, cfg, root, write_seeds(tmp / "seeds.txt", seeds), CYCLES)
        assert result.cycles_run == CYCLES
        log = web.requests()
    finally:
        web.stop()
    rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    hosts = {r["host"]: r for r in spark.read.format("delta").load(root.hostdb).collect()}
    return web, cfg, root, rows, hosts, log


def test_normal_hosts_are_covered_in_full_including_sitemap_only_pages(crawled):
    web, _cfg, _root, rows, _hosts, _log = crawled
    normal = set(web.host_names)
    fetched = {u for u, r in rows.items() if r["host"] in normal and r["status"] == "fetched"}
    orphans = set(web.sitemap_only_urls())
    assert orphans and orphans <= fetched, sorted(orphans - fetched)
    pages = {f"http://{h}/p/{k}.html" for h in normal for k in range(web.pages_per_host)}
    assert pages <= fetched
    assert all(rows[u]["depth"] == 1 for u in orphans)  # found through a sitemap, not a link


def test_the_trap_host_stays_within_its_caps_and_its_budget_is_lowered(crawled):
    web, _cfg, _root, rows, hosts, log = crawled
    trap = web.hostile_hosts["traps"]
    known = [u for u, r in rows.items() if r["host"] == trap]
    assert len(known) <= TOTAL + 3  # + the seeds, injected outside the discovery budget
    requests = Counter(e["host"] for e in log if e["path"] not in ("/robots.txt", "/sitemap.xml"))
    assert requests[trap] <= CYCLES * PER_CYCLE
    host = hosts[trap]
    assert host["trap_signal"] is not None or host["url_budget"] is not None
    assert host["url_budget"] is not None and host["url_budget"] < PER_CYCLE
    assert (host["link_rejects"] or {}).get("repeating_path", 0) >= 1  # /a/a/a/ never queued
    assert not any("/a/a/a/" in u for u in known)
    for h in web.host_names:  # normal hosts never look like traps
        assert hosts[h]["url_budget"] is None, h


def test_politeness_holds_while_reading_sitemaps(crawled):
    web, cfg, _root, _rows, _hosts, log = crawled
    assert_polite(web, [e for e in log if e["host"] in set(web.host_names)], float(cfg["fetch.delay_s"]))
    sitemap_paths = {e["path"] for e in log if "sitemap" in e["path"]}
    assert {"/sitemap_index.xml", "/sitemap-pages.xml.gz", "/sitemap-orphans.xml", "/sitemap.xml"} <= sitemap_paths
    # each host's sitemaps are read once per sitemaps.ttl_s, not every cycle
    per_host = Counter((e["host"], e["path"]) for e in log if "sitemap" in e["path"])
    assert max(per_host.values()) == 1


def test_stats_show_links_by_reason_and_trap_hosts(crawled, spark, capsys):
    web, cfg, root, _rows, _hosts, _log = crawled
    summary = stats.run(spark, cfg, root)
    out = capsys.readouterr().out
    reasons = dict(summary["hostdb"]["link_rejects"])
    assert reasons.get("known", 0) > 0          # the seen-URL filter dropped known links
    assert reasons.get("repeating_path", 0) > 0
    assert "links dropped, by reason" in out and "looked like traps" in out
    links = summary["hostdb"]["links"]
    assert links["found"] > links["kept"] > 0


def test_a_newer_sitemap_lastmod_makes_a_fetched_page_due_again(spark, tmp_path):
    import time
    tomorrow = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86400))
    web = DevWeb(hosts=1, pages_per_host=3, port=0, seed=4, sitemaps=True, sitemap_lastmod=tomorrow).start()
    try:
        cfg = make_config(fetch__delay_s=0.0, sitemaps__ttl_s=0)  # read the sitemaps every cycle
        root = CrawlRoot(str(tmp_path / "crawl"))
        page = f"http://{web.host_name(0)}/p/0.html"  # listed with <lastmod> in the gzip sitemap
        seeds = write_seeds(tmp_path / "seeds.txt", web.seed_urls() + [page])
        result = crawl_job.run(spark, cfg, root, seeds, 2)  # cycle 1 fetches it, cycle 2's sitemap says it changed
        assert result.cycles_run == 2
    finally:
        web.stop()
    rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    assert rows[page]["status"] == "fetched" and rows[page]["fetch_count"] == 1
    gap = (rows[page]["next_fetch_at"] - rows[page]["last_fetched_at"]).total_seconds()
    assert gap < float(cfg["schedule.min_interval_s"])  # due again now, not on its schedule
    orphan = web.sitemap_only_urls()[0]  # listed without <lastmod>: keeps its schedule
    assert rows[orphan]["status"] == "fetched"
    assert (rows[orphan]["next_fetch_at"] - rows[orphan]["last_fetched_at"]).total_seconds() >= float(
        cfg["schedule.min_interval_s"])
