"""crawl.fetch.sitemap_reader against a loopback web serving sitemaps as attackers and careless
sites write them: what it refuses or cuts is counted on the host's row, what it could read is kept."""
from __future__ import annotations

import gzip

from crawl.fetch.fetcher import fetch_partition
from tests.fixed_web import FixedWeb
from tests.test_fetcher import cfg, rows_for

MAX_BYTES = 4096
MAX_URLS = 20
BILLION_LAUGHS = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                  '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
                  "<urlset><url><loc>http://x/&lol2;</loc></url></urlset>")


def urlset(locs: list[str], pad: str = "") -> str:
    return "<urlset>" + "".join(f"<url><loc>{loc}</loc></url>{pad}" for loc in locs) + "</urlset>"


def test_refused_and_cut_sitemaps_are_counted_on_the_host_row_and_relative_feed_links_kept():
    with FixedWeb(hosts=2) as web:
        base = web.base(0)
        xml = "application/xml"
        files = {
            "/doctype.xml": BILLION_LAUGHS,
            # a decompression bomb: ~1 KB on the wire, 1 MiB once inflated; the entry before the cut counts
            "/bomb.xml.gz": gzip.compress(f"<urlset><url><loc>{base}/bomb-ok</loc></url>".encode()
                                          + b" " * 2**20 + b"</urlset>"),
            "/many.xml": urlset([f"{base}/many/{i}" for i in range(MAX_URLS + 10)]),
            # over the byte limit on the wire: the entries complete before the cut count, the cut one not
            "/cut.xml": urlset([f"{base}/cut/{i}" for i in range(12)], pad=" " * 500),
            "/missing.xml": None,  # 404
            "/broken.xml": f"<urlset><url><loc>{base}/broken-ok</loc></url><url><loc>oops</url>",
            "/feed.xml": ('<rss version="2.0"><channel><title>news</title>'
                          "<item><link>/news/1</link></item><item><link>2.html</link></item></channel></rss>"),
        }
        for path, body in files.items():
            if body is not None:
                web.put(0, path, body, "application/gzip" if path.endswith(".gz") else xml)
        web.put(0, "/robots.txt", "User-agent: *\nAllow: /\n" + "".join(f"Sitemap: {base}{p}\n" for p in files),
                "text/plain")
        web.put(0, "/", "<html><body>home</body></html>")
        web.put(1, "/", "<html><body>home</body></html>")  # no sitemap listed; /sitemap.xml is 404
        out = fetch_partition(rows_for([base + "/", web.base(1) + "/"]),
                              cfg(sitemaps__enabled=True, sitemaps__max_bytes_per_file=MAX_BYTES,
                                  sitemaps__max_urls_per_file=MAX_URLS))
        requested = {e["path"] for e in web.requests()}
    hosts = {r["host"]: r for r in out if r["kind"] == "host"}
    row = hosts[base.split("//")[1]]
    # doctype, bomb, many, cut, missing, broken: one each; the feed is read whole
    assert row["sitemap_errors"] == 6, row["sitemap_last_error"]
    assert row["sitemap_last_error"].startswith(f"{base}/broken.xml: malformed xml")
    assert set(files) <= requested
    entries = {e["url"] for e in row["sitemap_entries"]}
    assert {f"{base}/bomb-ok", f"{base}/broken-ok", f"{base}/news/1", f"{base}/2.html"} <= entries
    assert len([u for u in entries if "/many/" in u]) == MAX_URLS
    cut = sorted(int(u.rsplit("/", 1)[1]) for u in entries if "/cut/" in u)
    assert cut and cut == list(range(len(cut))) and len(cut) < 12
    assert not [u for u in entries if "//x/" in u or u.endswith("/oops")]
    # the /sitemap.xml guessed for a host that lists none is no error when it is absent
    other = hosts[web.base(1).split("//")[1]]
    assert "/sitemap.xml" in requested
    assert other["sitemap_errors"] == 0 and other["sitemap_last_error"] is None
