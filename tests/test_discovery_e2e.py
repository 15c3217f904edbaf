"""Discovery through the real jobs, 3 cycles over the test web with sitemaps and the trap host:
normal hosts are covered in full (sitemap-only pages included), the trap host stays within its
caps and gets its budget lowered, rejected links are counted by reason, and the seen-URL
filter keeps known links out of the segment. Then one cycle more on a copy of that crawl, its
sitemaps read again and dating the pages tomorrow: a newer sitemap lastmod makes a fetched page
due again.

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


# the module's crawl: more than a normal host has per cycle, a total cap the trap host reaches
CRAWL = dict(generate__max_urls_per_host=PER_CYCLE, discovery__max_urls_per_host_total=TOTAL,
             discovery__trap_min_pages=4, fetch__delay_s=0.05)


@pytest.fixture(scope="module")
def crawled(spark, tmp_path_factory):
    """The module's crawl (CYCLES cycles) and what the tests read of it; its test web keeps serving
    until the module ends (test_a_newer_sitemap_lastmod_makes_a_fetched_page_due_again crawls a
    copy of the root one cycle more), ``log`` is its request log of the crawl's cycles alone,
    ``summary`` the stats the crawl closed with (jobs/stats.py, as `deltacrawl stats` of the root)."""
    tmp = tmp_path_factory.mktemp("discovery")
    # two normal hosts: a cross-host link each way, sitemap-only pages on both
    web = DevWeb(hosts=2, pages_per_host=8, port=0, seed=3, crawl_delay_s=0.2, sitemaps=True,
                 hostile=True).start()
    try:
        seeds = web.seed_urls() + web.hostile_urls("traps")
        cfg = make_config(**CRAWL)
        root = CrawlRoot(str(tmp / "crawl"))
        result = crawl_job.run(spark, cfg, root, write_seeds(tmp / "seeds.txt", seeds), CYCLES)
        assert result.cycles_run == CYCLES
        log = web.requests()
        rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
        hosts = {r["host"]: r for r in spark.read.format("delta").load(root.hostdb).collect()}
        yield web, cfg, root, rows, hosts, log, result.stats
    finally:
        web.stop()


def test_normal_hosts_are_covered_in_full_including_sitemap_only_pages(crawled):
    web, _cfg, _root, rows, _hosts, _log, _summary = crawled
    normal = set(web.host_names)
    fetched = {u for u, r in rows.items() if r["host"] in normal and r["status"] == "fetched"}
    orphans = set(web.sitemap_only_urls())
    assert orphans and orphans <= fetched, sorted(orphans - fetched)
    pages = {f"http://{h}/p/{k}.html" for h in normal for k in range(web.pages_per_host)}
    assert pages <= fetched
    assert all(rows[u]["depth"] == 1 for u in orphans)  # found through a sitemap, not a link


def test_the_trap_host_stays_within_its_caps_and_its_budget_is_lowered(crawled):
    web, _cfg, _root, rows, hosts, log, _summary = crawled
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
    web, cfg, _root, _rows, _hosts, log, _summary = crawled
    assert_polite(web, [e for e in log if e["host"] in set(web.host_names)], float(cfg["fetch.delay_s"]))
    sitemap_paths = {e["path"] for e in log if "sitemap" in e["path"]}
    assert {"/sitemap_index.xml", "/sitemap-pages.xml.gz", "/sitemap-orphans.xml", "/sitemap.xml"} <= sitemap_paths
    # each host's sitemaps are read once per sitemaps.ttl_s, not every cycle
    per_host = Counter((e["host"], e["path"]) for e in log if "sitemap" in e["path"])
    assert max(per_host.values()) == 1


def test_stats_show_links_by_reason_and_trap_hosts(crawled):
    # the stats the crawl printed at its end (stats.run on its root, what `deltacrawl stats` shows)
    _web, _cfg, _root, _rows, _hosts, _log, summary = crawled
    out = stats.format_stats(summary)
    reasons = dict(summary["hostdb"]["link_rejects"])
    assert reasons.get("known", 0) > 0          # the seen-URL filter dropped known links
    assert reasons.get("repeating_path", 0) > 0
    assert "links dropped, by reason" in out and "looked like traps" in out
    links = summary["hostdb"]["links"]
    assert links["found"] > links["kept"] > 0


def test_a_newer_sitemap_lastmod_makes_a_fetched_page_due_again(crawled, spark, tmp_path):
    """One cycle more on a copy of the module's crawl, its sitemaps read again (sitemaps.ttl_s 0)
    and now dating the /p/ pages tomorrow: a page the crawl fetched (once) is due again at once,
    not on its schedule; an orphan its sitemap lists without <lastmod> keeps its schedule."""
    import shutil
    import time

    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from jobs import fetch, generate, update
    web, _cfg, module_root, module_rows, _hosts, _log, _summary = crawled
    assert web.robots_kind(0) == "disallow"  # host 0's sitemap index lists the gzip sitemap, with <lastmod>
    page = f"http://{web.host_name(0)}/p/0.html"  # listed with <lastmod> in the gzip sitemap
    orphan = web.sitemap_only_urls()[0]  # host 0's, listed without <lastmod>
    assert module_rows[page]["status"] == "fetched" and module_rows[page]["fetch_count"] == 1
    root = CrawlRoot(str(tmp_path / "crawl"))
    shutil.copytree(module_root.root, root.root)
    web.sitemap_lastmod = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86400))  # tomorrow
    cfg = make_config(**CRAWL, sitemaps__ttl_s=0)  # read the sitemaps every cycle
    # host 0 comes round: the crawl fetched all its pages, so its home page is made due by hand
    DeltaTable.forPath(spark, root.crawldb).update(F.col("url") == web.seed_urls()[0],
                                                   {"next_fetch_at": "timestamp'2000-01-01'"})
    segment = generate.run(spark, cfg, root).segment_id
    assert segment is not None
    chosen = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
    assert web.seed_urls()[0] in chosen and page not in chosen
    fetch.run(spark, cfg, root, segment)  # reads host 0's sitemaps again: they say /p/0.html changed
    update.run(spark, cfg, root, segment)
    rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    assert rows[page]["status"] == "fetched" and rows[page]["fetch_count"] == 1
    gap = (rows[page]["next_fetch_at"] - rows[page]["last_fetched_at"]).total_seconds()
    assert gap < float(cfg["schedule.min_interval_s"])  # due again now, not on its schedule
    assert rows[orphan]["status"] == "fetched"
    assert (rows[orphan]["next_fetch_at"] - rows[orphan]["last_fetched_at"]).total_seconds() >= float(
        cfg["schedule.min_interval_s"])
