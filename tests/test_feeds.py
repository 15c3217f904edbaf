"""RSS/Atom feeds as change hints, over real HTTP (issue 32, "Change hints"): a feed a page
announces is read in the same cycle like a sitemap (crawl/fetch/sitemap_reader.py); its items add
new URLs, and an item dated after our copy makes a known URL due, exactly as a sitemap lastmod."""
from __future__ import annotations

import email.utils
import math
import time

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs import fetch, generate, inject, update
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


def cycle(spark, cfg, root) -> tuple[str, set[str]]:
    segment = generate.run(spark, cfg, root).segment_id
    assert segment is not None
    chosen = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
    fetch.run(spark, cfg, root, segment)
    update.run(spark, cfg, root, segment)
    return segment, chosen


def test_a_feed_announced_by_a_page_adds_urls_and_makes_changed_ones_due(spark, root, tmp_path):
    web = FixedWeb(hosts=1).start()
    try:
        start = web.put(0, "/", home(1))
        a, b = (web.put(0, p, f"<html><body>{p}</body></html>") for p in ("/a.html", "/b.html"))
        only_in_feed = web.put(0, "/news/1.html", "<html><body>news</body></html>")
        feed = web.put(0, "/feed.xml", rss([(a, OLD), (only_in_feed, OLD)]), "application/rss+xml")
        cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1)
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", [start]))

        _, chosen = cycle(spark, cfg, root)  # the home page, then the feed it announces
        assert chosen == {start}
        assert sum(e["path"] == "/feed.xml" for e in web.requests()) == 1
        known = {r["url"] for r in spark.read.format("delta").load(root.crawldb).collect()}
        assert only_in_feed in known  # a URL only the feed names

        _, chosen = cycle(spark, cfg, root)
        assert chosen == {a, b, only_in_feed}
        assert generate.run(spark, cfg, root).segment_id is None  # all fetched: nothing due

        # the site changes: a new post on the home page, and the feed dates /a.html after our copy
        changed_at = email.utils.formatdate(math.ceil(time.time()) + 1, usegmt=True)
        time.sleep(1.5)
        web.put(0, "/", home(2))
        web.put(0, "/feed.xml", rss([(a, changed_at), (only_in_feed, OLD)]), "application/rss+xml")
        # the home page's own schedule brings it round (a page that changes is refetched first)
        DeltaTable.forPath(spark, root.crawldb).update(F.col("url") == start, {"next_fetch_at": "timestamp'2000-01-01'"})
        _, chosen = cycle(spark, cfg, root)
        assert chosen == {start}
        assert sum(e["path"] == "/feed.xml" for e in web.requests()) == 2  # read again: the page changed

        segment = generate.run(spark, cfg, root).segment_id
        chosen = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
        assert chosen == {a}  # due through the feed's date; /b.html and the old item are not
        fetch.run(spark, cfg, root, segment)
        update.run(spark, cfg, root, segment)
        assert_consistent(spark, root)
        assert feed not in {r["url"] for r in spark.read.format("delta").load(root.crawldb).collect()}
    finally:
        web.stop()
