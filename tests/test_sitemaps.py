"""crawl.parse.sitemaps: sitemap files as found in the wild, and as an attacker would write them."""
from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from datetime import datetime, timezone

import pytest

from crawl.parse.sitemaps import Sitemap, SitemapEntry, parse_sitemap, parse_w3c_datetime
from crawl.net.urls import UrlRules, check_url

HOME = "http://a.com/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
MIB = 2**20


def parse(body: bytes | str, url: str = HOME, max_urls: int = 1000, max_bytes: int = MIB, **kw) -> Sitemap:
    return parse_sitemap(body.encode() if isinstance(body, str) else body, url, max_urls, max_bytes, **kw)


def urlset(*entries: str, ns: str = NS) -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>\n' + "\n".join(entries) + "\n</urlset>\n"


def url(loc: str, lastmod: str | None = None, extra: str = "") -> str:
    mod = f"<lastmod>{lastmod}</lastmod>" if lastmod is not None else ""
    return f"<url><loc>{loc}</loc>{mod}<changefreq>daily</changefreq>{extra}</url>"


def ts(*args) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


# ------------------------------------------------------------------------------ urlset

@pytest.mark.parametrize("ns", [NS, "", 'xmlns="http://www.google.com/schemas/sitemap/0.84"',
                                'xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"'])
def test_urlset_with_and_without_namespace(ns):
    body = urlset(url("http://a.com/"), url("http://a.com/p?id=1&amp;x=2", "2005-01-01"), ns=ns)
    if ns.startswith("xmlns:sm"):  # prefixed elements
        for tag in ("urlset", "url", "loc", "lastmod", "changefreq"):
            body = body.replace(f"<{tag}", f"<sm:{tag}").replace(f"</{tag}>", f"</sm:{tag}>")
    expected = [SitemapEntry("http://a.com/", None), SitemapEntry("http://a.com/p?id=1&x=2", ts(2005, 1, 1))]
    assert parse(body) == Sitemap(expected, [], None, False, {})


def test_real_world_shape_extensions_whitespace_cdata_bom():
    body = ("\ufeff\n\n" + urlset(
        url("  \n http://a.com/1 \n ", extra=(
            '<image:image><image:loc>http://a.com/img.jpg</image:loc></image:image>'
            '<xhtml:link rel="alternate" hreflang="de" href="http://a.com/de/1"/>')),
        "<url><loc><![CDATA[http://a.com/2?a=1&b=2]]></loc></url>",
        "<!-- a comment --><url><priority>0.5</priority><loc>http://a.com/3</loc></url>",
        ns=NS + ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
                ' xmlns:xhtml="http://www.w3.org/1999/xhtml"'))
    result = parse(body)
    assert [e.url for e in result.urls] == ["http://a.com/1", "http://a.com/2?a=1&b=2", "http://a.com/3"]
    assert result.error is None


def test_loc_normalised_with_rules_invalid_and_missing_counted():
    rules = UrlRules(tracking_params=("utm_*",))
    locs = ["http://a.com/x?utm_source=feed&amp;id=1", "/relative", "javascript:x", "http://a.com:99999/"]
    body = urlset(*(url(loc) for loc in locs), "<url><lastmod>2020</lastmod></url>", url(""))
    result = parse(body, rules=rules)
    kept = check_url(locs[0].replace("&amp;", "&"), None, rules)[0]
    assert [e.url for e in result.urls] == [kept] == ["http://a.com/x?id=1"]
    expected = {"no_loc": 2}
    for loc in locs[1:]:
        reason = check_url(loc, None, rules)[1]
        expected[reason] = expected.get(reason, 0) + 1
    assert result.rejected == expected


def test_duplicates_kept_once_first_lastmod_wins():
    result = parse(urlset(url("http://a.com/1", "2001"), url("http://A.com:80/1#f", "2002"), url("http://a.com/2")))
    assert result.urls == [SitemapEntry("http://a.com/1", ts(2001, 1, 1)), SitemapEntry("http://a.com/2", None)]


# ------------------------------------------------------------------------------ lastmod

@pytest.mark.parametrize("text, expected", [
    ("1997", ts(1997, 1, 1)),
    ("1997-07", ts(1997, 7, 1)),
    ("1997-07-16", ts(1997, 7, 16)),
    ("1997-07-16T19:20+01:00", ts(1997, 7, 16, 18, 20)),
    ("1997-07-16T19:20:30+01:00", ts(1997, 7, 16, 18, 20, 30)),
    ("1997-07-16T19:20:30.45+01:00", ts(1997, 7, 16, 18, 20, 30) + 0.45),
    ("1997-07-16T19:20:30.123456789Z", ts(1997, 7, 16, 19, 20, 30) + 0.123456),
    ("2004-12-23T18:00:15-05:30", ts(2004, 12, 23, 23, 30, 15)),
    ("2004-12-23t18:00:15z", ts(2004, 12, 23, 18, 0, 15)),
    ("  2004-12-23T18:00:15+00:00\n", ts(2004, 12, 23, 18, 0, 15)),
    # Lenient, because real sitemaps write them: no zone (UTC), +hhmm, a space for T.
    ("2004-12-23T18:00:15", ts(2004, 12, 23, 18, 0, 15)),
    ("2004-12-23T18:00:15+0200", ts(2004, 12, 23, 16, 0, 15)),
    ("2004-12-23 18:00:15Z", ts(2004, 12, 23, 18, 0, 15)),
    # Invalid -> None.
    ("", None), ("yesterday", None), ("2004-13-01", None), ("2004-02-30", None), ("2004-12-23T25:00Z", None),
    ("2004-12-23T18Z", None), ("2004-12-23T18:00:60Z", None), ("2004-12-23T18:00+24:00", None),
    ("2004-12-23T18:00+05:60", None), ("0000", None),
    ("04-12-23", None), ("2004-12-23T18:00:15+00:00 extra", None), ("Thu, 23 Dec 2004 18:00:15 GMT", None),
    ("2004-1-2", None), ("１９９７", None),
])
def test_lastmod_formats(text, expected):
    entry = parse(urlset(url("http://a.com/x", text))).urls[0]
    if expected is None:
        assert parse_w3c_datetime(text) is None and entry.lastmod is None
    else:
        assert parse_w3c_datetime(text) == entry.lastmod == pytest.approx(expected)


# ------------------------------------------------------------------------------ index

def test_sitemap_index():
    body = (f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex {NS}>'
            "<sitemap><loc>http://a.com/sitemap1.xml.gz</loc><lastmod>2004-10-01T18:23:17+00:00</lastmod></sitemap>"
            "<sitemap><loc>http://a.com/sitemap2.xml.gz</loc></sitemap>"
            "<sitemap><loc>http://other.com/sitemap3.xml</loc></sitemap>"
            "<sitemap><loc>https://a.com/sitemap4.xml</loc></sitemap>"  # other scheme: other "host"
            "<url><loc>http://a.com/not-here</loc></url>"              # <url> has no place in an index
            "</sitemapindex>")
    result = parse(body)
    assert result == Sitemap([], ["http://a.com/sitemap1.xml.gz", "http://a.com/sitemap2.xml.gz"], None, False,
                             {"other_host": 2})


def test_other_host_scheme_and_port_dropped():
    body = urlset(url("http://a.com/ok"), url("http://www.a.com/x"), url("https://a.com/x"), url("http://a.com:8080/x"),
                  url("http://b.com/x"), url("HTTP://A.COM:80/ok2"))
    result = parse(body)
    assert [e.url for e in result.urls] == ["http://a.com/ok", "http://a.com/ok2"]
    assert result.rejected == {"other_host": 4}
    assert [e.url for e in parse(body, url="http://a.com:8080/sitemap.xml").urls] == ["http://a.com:8080/x"]


def test_invalid_sitemap_url():
    result = parse(urlset(url("http://a.com/")), url="not a url")
    assert result.urls == [] and result.error.startswith("invalid sitemap url")


# ------------------------------------------------------------------------------ limits

def test_max_urls_cap():
    body = urlset(*(url(f"http://a.com/{i}") for i in range(100)))
    result = parse(body, max_urls=10)
    assert [e.url for e in result.urls] == [f"http://a.com/{i}" for i in range(10)]
    assert result.truncated and result.error is None
    exact = parse(body, max_urls=100)
    assert len(exact.urls) == 100 and not exact.truncated
    assert parse(body, max_urls=0).urls == [] and parse(body, max_urls=0).truncated


def test_max_bytes_keeps_complete_entries_only():
    body = urlset(*(url(f"http://a.com/page-{i}") for i in range(100))).encode()
    cut = body.index(b"http://a.com/page-50<") + len(b"http://a.com/page-5")  # inside the 51st <loc>
    result = parse(body, max_bytes=cut)
    assert [e.url for e in result.urls] == [f"http://a.com/page-{i}" for i in range(50)]
    assert result.truncated and result.error is None
    # Cut just after a complete </url>: that entry counts.
    cut = body.index(b"</url>", body.index(b"page-50<")) + len(b"</url>")
    assert len(parse(body, max_bytes=cut).urls) == 51
    assert not parse(body, max_bytes=len(body)).truncated


def test_gzip_detected_by_magic_not_name():
    body = urlset(url("http://a.com/1"), url("http://a.com/2")).encode()
    for name in ("http://a.com/sitemap.xml", "http://a.com/sitemap.xml.gz"):
        assert [e.url for e in parse(gzip.compress(body), url=name).urls] == ["http://a.com/1", "http://a.com/2"]
        assert len(parse(body, url=name).urls) == 2  # not gzip, whatever the name says


def test_gzip_multi_member_damaged_and_cut():
    text = b"".join(b"http://a.com/%d\n" % i for i in range(1000))
    members = gzip.compress(text[:5000]) + gzip.compress(text[5000:])  # RFC 1952: a series of members
    assert len(parse(members).urls) == 1000
    assert len(parse(members + b"trailing junk").urls) == 1000
    packed = gzip.compress(text)
    cut = parse(packed[:len(packed) // 2])
    assert cut.error == "gzip stream ends early" and 0 < len(cut.urls) < 1000
    assert all(e.url == f"http://a.com/{i}" for i, e in enumerate(cut.urls))  # no half-read URL
    damaged = bytearray(packed)
    damaged[len(packed) // 2:len(packed) // 2 + 16] = b"\xff" * 16
    result = parse(bytes(damaged))
    assert result.error.startswith(("bad gzip data", "gzip stream ends early"))
    assert parse(b"\x1f\x8b garbage").error.startswith("bad gzip data")


def test_gzip_bomb_costs_at_most_max_bytes():
    # ~100 MiB of XML whitespace in ~100 KiB of gzip, built one 1 MiB block at a time.
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [deflate.compress(urlset(url("http://a.com/1")).replace("</urlset>", "").encode())]
    block = b" " * MIB
    parts += [deflate.compress(block) for _ in range(100)]
    parts += [deflate.compress(b"</urlset>"), deflate.flush()]
    bomb = b"".join(parts)
    del parts, block
    assert len(bomb) < 200_000
    tracemalloc.start()
    try:
        start = time.perf_counter()
        result = parse(bomb, max_bytes=MIB)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.truncated and result.error is None
    assert result.urls == [SitemapEntry("http://a.com/1", None)]
    assert peak < 8 * MIB, peak
    assert elapsed < 30  # a guard against runaway work, not a speed check (bench/ measures speed)


def test_long_text_line_is_skipped():
    body = b"http://a.com/1\n" + b"http://a.com/" + b"x" * (3 * MIB) + b"\nhttp://a.com/2\n"
    result = parse(body, max_bytes=8 * MIB)
    assert [e.url for e in result.urls] == ["http://a.com/1", "http://a.com/2"]
    assert result.rejected == {"line_too_long": 1}


# ------------------------------------------------------------------------------ hostile XML

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<urlset><url><loc>http://a.com/&lol9;</loc></url></urlset>"""
XXE = """<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>http://a.com/&xxe;</loc></url></urlset>"""
EXTERNAL_DTD = '<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "http://evil.example/x.dtd"><urlset></urlset>'
HTML_PAGE = "<!DOCTYPE html><html><body><a href='http://a.com/x'>soft 404</a></body></html>"


@pytest.mark.parametrize("body", [BILLION_LAUGHS, XXE, EXTERNAL_DTD, HTML_PAGE])
def test_doctype_rejected(body):
    for data in (body.encode(), gzip.compress(body.encode())):
        assert parse(data) == Sitemap([], [], "doctype not allowed", False, {})


def test_undeclared_entity_and_not_a_sitemap():
    assert parse(urlset(url("http://a.com/&nbsp;"))).error.startswith("malformed xml: undefined entity")
    assert parse("<html><body>oops</body></html>").error == "not a sitemap: root element <html>"


def test_malformed_xml_keeps_what_came_before():
    body = urlset(url("http://a.com/1"), url("http://a.com/2")).replace("</urlset>", "") + \
        "<url><loc>http://a.com/3</loc></url><url><loc>http://a.com/4</oops></url>"
    result = parse(body)
    assert [e.url for e in result.urls] == ["http://a.com/1", "http://a.com/2", "http://a.com/3"]
    assert result.error.startswith("malformed xml: mismatched tag")
    unfinished = parse(urlset(url("http://a.com/1")).replace("</urlset>", ""))
    assert [e.url for e in unfinished.urls] == ["http://a.com/1"]
    assert unfinished.error.startswith("malformed xml: no element found")


# ------------------------------------------------------------------------------ text sitemaps

def test_text_sitemap():
    body = ("\ufeffhttp://a.com/1\r\n\n  http://a.com/2  \nhttp://other.com/3\nnot a url\n"
            "http://a.com/caf\u00e9\nhttp://a.com/last")
    result = parse(body)
    assert [e.url for e in result.urls] == ["http://a.com/1", "http://a.com/2", "http://a.com/caf%C3%A9",
                                            "http://a.com/last"]
    assert all(e.lastmod is None for e in result.urls)
    assert result.rejected == {"other_host": 1, check_url("not a url")[1]: 1}
    assert result.error is None and not result.truncated


def test_text_sitemap_cut_by_max_bytes_drops_partial_line():
    body = b"http://a.com/first\nhttp://a.com/second-and-longer\n"
    result = parse(body, max_bytes=len(b"http://a.com/first\nhttp://a.com/sec"))
    assert [e.url for e in result.urls] == ["http://a.com/first"] and result.truncated


# ------------------------------------------------------------------------------ never raises

@pytest.mark.parametrize("body", [b"", b"   \n\t ", gzip.compress(b"", mtime=0), b"\x00\x01\x02", b"<", b"<?xml",
                                  b"\xff\xfe<\x00u\x00", "<urlset>\ud800</urlset>".encode("utf-8", "surrogatepass"),
                                  b"<urlset><url><loc>" + b"x" * 100000 + b"</loc></url></urlset>"])
def test_garbage_never_raises(body):
    result = parse(body)
    assert isinstance(result, Sitemap)
    assert result.urls == [] and result.sitemaps == []


def test_empty_body_is_an_error():
    assert parse(b"").error == "empty body"
    assert parse(b" \n ").error == "empty body"
    assert parse(gzip.compress(b"")).error == "empty body"


def test_utf16_xml_sitemap():
    body = urlset(url("http://a.com/ü")).replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    assert [e.url for e in parse(body).urls] == ["http://a.com/%C3%BC"]


@pytest.mark.parametrize("encoding, error", [
    ("x-no-such-charset", "unknown XML encoding 'x-no-such-charset' in the XML declaration"),
    ("hex", "unknown XML encoding 'hex' in the XML declaration"),  # a codec, but bytes to bytes
    ("utf-32", "unsupported XML encoding 'utf-32' (multi-byte encodings are not supported)"),
])
def test_an_encoding_expat_cannot_use_is_named_not_an_internal_error(encoding, error):
    body = urlset(url("http://a.com/x")).replace('encoding="UTF-8"', f'encoding="{encoding}"')
    result = parse(body)
    assert result.error == error and result.urls == []


def test_rss_items_are_entries_with_their_pubdate():
    rss = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>
  <title>news</title><link>http://a.com/</link><atom:link href="http://a.com/feed.xml" rel="self"/>
  <item><title>one</title><link> http://a.com/one?utm_source=rss </link><pubDate>Fri, 04 Dec 2026 10:00:00 GMT</pubDate></item>
  <item><link>http://a.com/two</link><pubDate>Thu, 03 Dec 2026 12:30:00 +0100</pubDate><guid>x</guid></item>
  <item><link>http://a.com/three</link><pubDate>yesterday</pubDate></item>
  <item><link>http://b.com/elsewhere</link></item>
  <item><title>no link</title></item>
</channel></rss>"""
    result = parse(rss, rules=UrlRules(tracking_params=("utm_*",)))
    assert result.urls == [SitemapEntry("http://a.com/one", datetime(2026, 12, 4, 10, tzinfo=timezone.utc).timestamp()),
                           SitemapEntry("http://a.com/two", datetime(2026, 12, 3, 11, 30, tzinfo=timezone.utc).timestamp()),
                           SitemapEntry("http://a.com/three", None)]
    assert result.error is None and result.rejected == {"other_host": 1, "no_loc": 1}
    assert parse(gzip.compress(rss.encode())).urls[1].url == "http://a.com/two"


def test_atom_entries_use_the_alternate_link_and_updated_else_published():
    atom = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><link href="http://a.com/" /><updated>2026-12-04T00:00:00Z</updated>
  <entry><link rel="edit" href="http://a.com/edit/1"/><link href="http://a.com/1"/><published>2026-12-01T00:00:00Z</published>
         <updated>2026-12-02T08:00:00+02:00</updated></entry>
  <entry><link rel="alternate" type="text/html" href="http://a.com/2"/><published>2026-12-01</published></entry>
  <entry><link rel="enclosure" href="http://a.com/2.mp3"/></entry>
</feed>"""
    result = parse(atom)
    assert result.urls == [SitemapEntry("http://a.com/1", datetime(2026, 12, 2, 6, tzinfo=timezone.utc).timestamp()),
                           SitemapEntry("http://a.com/2", datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp())]
    assert result.rejected == {"no_loc": 1}


def test_feeds_keep_the_sitemap_safety():
    bomb = BILLION_LAUGHS.replace("<urlset><url><loc>http://a.com/&lol9;</loc></url></urlset>",
                                  "<rss><channel><item><link>http://a.com/&lol9;</link></item></channel></rss>")
    assert "<rss>" in bomb and parse(bomb) == Sitemap([], [], "doctype not allowed", False, {})
    many = "<rss><channel>" + "".join(f"<item><link>http://a.com/{i}</link></item>" for i in range(50)) + "</channel></rss>"
    capped = parse(many, max_urls=10)
    assert len(capped.urls) == 10 and capped.truncated


def test_relative_rss_links_resolve_against_the_feed_url():
    rss = """<rss version="2.0"><channel><title>news</title><link>/</link>
  <item><link>/one</link><pubDate>Fri, 04 Dec 2026 10:00:00 GMT</pubDate></item>
  <item><link>two.html</link></item>
  <item><link>../three?x=1#top</link></item>
  <item><link>//a.com/four</link></item>
  <item><link>//b.com/elsewhere</link></item>
  <item><link>javascript:void(0)</link></item>
</channel></rss>"""
    result = parse(rss, url="http://a.com/news/feed.xml")
    assert [e.url for e in result.urls] == ["http://a.com/one", "http://a.com/news/two.html",
                                            "http://a.com/three?x=1", "http://a.com/four"]
    assert result.urls[0].lastmod == datetime(2026, 12, 4, 10, tzinfo=timezone.utc).timestamp()
    assert result.rejected == {"other_host": 1, check_url("javascript:void(0)")[1]: 1}


def test_relative_atom_links_resolve_against_the_feed_url_and_xml_base():
    atom = """<feed xmlns="http://www.w3.org/2005/Atom" xml:base="/blog/">
  <entry><link href="2026/one"/><updated>2026-12-02T08:00:00Z</updated></entry>
  <entry xml:base="archive/"><link href="two"/></entry>
  <entry><link xml:base="/other/" href="three"/></entry>
  <entry xml:base="http://a.com/abs/"><link href="four"/></entry>
  <entry xml:base="http://b.com/"><link href="five"/></entry>
  <entry><link rel="edit" href="edit/6"/><link href="/six"/></entry>
</feed>"""
    result = parse(atom, url="http://a.com/feeds/atom.xml")
    assert [e.url for e in result.urls] == ["http://a.com/blog/2026/one", "http://a.com/blog/archive/two",
                                            "http://a.com/other/three", "http://a.com/abs/four", "http://a.com/six"]
    assert result.urls[0].lastmod == datetime(2026, 12, 2, 8, tzinfo=timezone.utc).timestamp()
    assert result.rejected == {"other_host": 1}
    # without xml:base, the feed's own URL is the base
    plain = parse(atom.replace(' xml:base="/blog/"', ""), url="http://a.com/feeds/atom.xml")
    assert plain.urls[0].url == "http://a.com/feeds/2026/one"


def test_rss_xml_base_is_honoured_and_a_bad_one_ignored():
    rss = """<rss version="2.0" xmlns:xml="http://www.w3.org/XML/1998/namespace"><channel xml:base="http://a.com/c/">
  <item><link>one</link></item>
  <item xml:base="sub/"><link>two</link></item>
  <item xml:base="http://[bad"><link>three</link></item>
</channel></rss>"""
    result = parse(rss, url="http://a.com/feed.xml")
    assert [e.url for e in result.urls] == ["http://a.com/c/one", "http://a.com/c/sub/two", "http://a.com/c/three"]


def test_sitemap_loc_stays_absolute_only_whatever_xml_base_says():
    body = ('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xml:base="http://a.com/">'
            "<url><loc>/relative</loc></url><url><loc>http://a.com/abs</loc></url></urlset>")
    result = parse(body)
    assert [e.url for e in result.urls] == ["http://a.com/abs"]
    assert result.rejected == {check_url("/relative")[1]: 1}
    index = '<sitemapindex><sitemap><loc>child.xml</loc></sitemap></sitemapindex>'
    assert parse(index).sitemaps == [] and parse(index).rejected == {check_url("child.xml")[1]: 1}


def test_a_body_cut_by_the_reader_drops_its_last_incomplete_entry():
    text = b"http://a.com/1\nhttp://a.com/2\nhttp://a.com/3-cut-in-the-midd"
    assert [e.url for e in parse(text).urls][-1] == "http://a.com/3-cut-in-the-midd"
    cut = parse(text, cut=True)
    assert [e.url for e in cut.urls] == ["http://a.com/1", "http://a.com/2"] and cut.truncated and cut.error is None
    xml = urlset(url("http://a.com/1"), url("http://a.com/2")).encode()[:-5]  # inside </urlset>
    cut = parse(xml, cut=True)
    assert [e.url for e in cut.urls] == ["http://a.com/1", "http://a.com/2"] and cut.truncated and cut.error is None
    zipped = parse(gzip.compress(urlset(url("http://a.com/1")).encode())[:-12], cut=True)
    assert zipped.truncated
