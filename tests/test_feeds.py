"""RSS/Atom feeds as change hints, over real HTTP (issue 32, "Change hints"): a feed a page
announces is read in the same cycle like a sitemap (crawl/fetch/sitemap_reader.py); its items add
new URLs (relative links resolved against the feed's URL, issue 49), and an item dated after our
copy makes a known URL due, exactly as a sitemap lastmod. A sitemap the reader refuses is counted
in host_state and shown by stats."""
from __future__ import annotations

import email.utils
import math
import time

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs import fetch, generate, inject, stats, update
from tests.conftest import make_config, write_seeds
from tests.fixed_web import FixedWeb
from tests.test_update_recovery import assert_consistent

OLD = "Wed, 01 Jan 2020 00:00:00 GMT"


def rss(items: list[tuple[str, str]]) -> str:
    body = "".join(f"<item><title>{link}</title><link>{link}</link><pubDate>{date}</pubDate></item>"
                   for link, date in items)
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>news</title>{body}</channel></rss>'


def home(version: int) -> str:
    return ("<html><head><link rel='alternate' type='application/rss+xml' title='news' href='/feed.xml'></head>"
            f"<body><p>version {version}</p><a href='/a.html'>a</a> <a href='/b.html'>b</a></body></html>")


def cycle(spark, cfg, root) -> tuple[fetch.FetchResult, set[str]]:
    segment = generate.run(spark, cfg, root).segment_id
    assert segment is not None
    chosen = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
    fetched = fetch.run(spark, cfg, root, segment)
    update.run(spark, cfg, root, segment)
    return fetched, chosen


def host_row(spark, root) -> dict:
    (row,) = spark.read.format("delta").load(root.hostdb).collect()
    return row.asDict()


def test_a_feed_announced_by_a_page_adds_urls_and_makes_changed_ones_due(spark, root, tmp_path):
    web = FixedWeb(hosts=1).start()
    try:
        start = web.put(0, "/", home(1))
        a, b = (web.put(0, p, f"<html><body>{p}</body></html>") for p in ("/a.html", "/b.html"))
        only_in_feed = web.put(0, "/news/1.html", "<html><body>news</body></html>")
        # its link is relative, as sites write them: resolved against the feed's URL
        feed = web.put(0, "/feed.xml", rss([(a, OLD), ("news/1.html", OLD)]), "application/rss+xml")
        # robots.txt names a sitemap the reader refuses (a DOCTYPE: the entity attacks' way in)
        bad = web.put(0, "/bad-sitemap.xml", '<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY x "y">]><urlset/>',
                      "application/xml")
        web.put(0, "/robots.txt", f"User-agent: *\nAllow: /\nSitemap: {bad}\n", "text/plain")
        cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1)
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", [start]))

        fetched, chosen = cycle(spark, cfg, root)  # the home page, then the feed it announces
        assert chosen == {start}
        assert sum(e["path"] == "/feed.xml" for e in web.requests()) == 1
        known = {r["url"] for r in spark.read.format("delta").load(root.crawldb).collect()}
        assert only_in_feed in known  # a URL only the feed names
        assert fetched.sitemap_errors == 1 and "sitemap files refused or cut short: 1" in fetched.summary()
        host = host_row(spark, root)
        assert host["sitemap_errors"] == 1 and host["sitemap_last_error"] == f"{bad}: doctype not allowed"

        _, chosen = cycle(spark, cfg, root)
        assert chosen == {a, b, only_in_feed}
        assert generate.run(spark, cfg, root).segment_id is None  # all fetched: nothing due

        # the site changes: a new post on the home page, and the feed dates /a.html after our copy
        changed_at = email.utils.formatdate(math.ceil(time.time()) + 1, usegmt=True)
        time.sleep(1.5)
        web.put(0, "/", home(2))
        web.put(0, "/feed.xml", rss([(a, changed_at), ("news/1.html", OLD)]), "application/rss+xml")
        # the home page's own schedule brings it round (a page that changes is refetched first)
        DeltaTable.forPath(spark, root.crawldb).update(F.col("url") == start, {"next_fetch_at": "timestamp'2000-01-01'"})
        fetched, chosen = cycle(spark, cfg, root)
        assert chosen == {start}
        assert sum(e["path"] == "/feed.xml" for e in web.requests()) == 2  # read again: the page changed
        assert fetched.sitemap_errors == 0  # the sitemaps wait for sitemaps.ttl_s; the feed is fine
        # after the three cycles (the feed read twice, /a.html's new date taken in):
        assert_consistent(spark, root)
        assert feed not in {r["url"] for r in spark.read.format("delta").load(root.crawldb).collect()}
        # host_state keeps the count over all cycles and the last problem; stats shows both
        host = host_row(spark, root)
        assert host["sitemap_errors"] == 1 and host["sitemap_last_error"] == f"{bad}: doctype not allowed"
        summary = stats.collect_stats(spark, cfg, root)
        assert summary["hostdb"]["sitemap_errors"] == 1
        assert summary["hostdb"]["sitemap_problem_hosts"] == [(host["host"], f"1 files, last: {bad}: doctype not allowed")]
        assert "sitemap and feed files refused or cut short (all cycles): 1" in stats.format_stats(summary)

        # the next cycle's segment (not fetched: what it would fetch is what is checked)
        segment = generate.run(spark, cfg, root).segment_id
        chosen = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
        assert chosen == {a}  # due through the feed's date; /b.html and the old item are not
    finally:
        web.stop()
