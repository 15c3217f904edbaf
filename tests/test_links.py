"""crawl.parse.links: outlinks, canonical, meta refresh and robots directives of real-world-shaped pages."""
from __future__ import annotations

import random
import time

import pytest

from crawl.parse.links import MAX_FEEDS, PageLinks, extract_links, extract_outlinks
from crawl.net.urls import UrlRules, check_url

PAGE = "http://a.com/dir/page.html"


def links(html, page=PAGE, cap=100, **kw) -> PageLinks:
    return extract_links(html, page, cap, **kw)


# ------------------------------------------------------------------------------ outlinks

def test_relative_absolute_and_area_links():
    html = """<html><body><a href="x.html">x</a><a href="/root">r</a><a href="../up#f">u</a>
    <a href="http://B.com:80/">b</a><map><area href="area.html"></map><a>no href</a></body></html>"""
    assert extract_outlinks(html, PAGE, 100) == ["http://a.com/dir/x.html", "http://a.com/root", "http://a.com/up",
                                                 "http://b.com/", "http://a.com/dir/area.html"]
    assert extract_outlinks(html, PAGE, 100) == links(html).outlinks


def test_relative_reference_forms():
    html = """<a href="../a">1</a><a href="./b">2</a><a href="?q=1">3</a><a href="//other.org/p">4</a>
    <a href="#frag">self</a><a href="">self</a><a href>self</a><a href="page.html">self</a>
    <a href="c/../../d">5</a><a href="HTTPS://X.ORG/%7Euser/">6</a>"""
    result = links(html)
    assert result.outlinks == ["http://a.com/a", "http://a.com/dir/b", "http://a.com/dir/page.html?q=1",
                               "http://other.org/p", "http://a.com/d", "https://x.org/~user/"]
    assert result.rejected == {}  # links to the page itself are not rejections


def test_broken_markup_unclosed_tags_and_unquoted_attributes():
    html = ("<html><head><title>t</title><body><div><p><a href=/one>one<a href=two.html?x=1&y=2>two"
            "<table><tr><td><a href='three' class=x>three</td></tr>"  # unclosed table, unclosed <a>
            "<a href=\"four\"<a href=five>five"                        # attribute run into a tag
            "<<<>>><a HREF=SIX >six</A><!-- <a href=comment> --><a href=seven")  # unterminated tag at EOF
    # Document order is the order of the repaired tree, as in a browser: links left inside a
    # <table> outside any cell are "foster-parented" before the table; a tag cut off by the end
    # of the file is dropped; comments are not markup.
    assert links(html).outlinks == ["http://a.com/one", "http://a.com/dir/two.html?x=1&y=2", "http://a.com/dir/four",
                                    "http://a.com/dir/SIX", "http://a.com/dir/three"]


def test_base_href_absolute_relative_invalid_and_first_wins():
    body = '<a href="y">y</a><a href="/r">r</a><a href="#t">t</a>'
    assert links(f'<head><base href="http://c.com/base/"></head>{body}').outlinks == [
        "http://c.com/base/y", "http://c.com/r", "http://c.com/base/#t".split("#")[0]]
    # A relative base is resolved against the page URL.
    assert links(f'<head><base href="../other/"></head>{body}').outlinks == [
        "http://a.com/other/y", "http://a.com/r", "http://a.com/other/"]
    # The first <base href> counts, wherever it is (HTML LS "document base URL").
    assert links(f'{body}<base href="http://c.com/1/"><base href="http://d.com/2/">').outlinks[0] == "http://c.com/1/y"
    # An invalid or non-http base falls back to the page URL.
    for bad in ("http://[bad/", "javascript:alert(1)", "mailto:x@y"):
        assert links(f'<base href="{bad}">{body}').outlinks == ["http://a.com/dir/y", "http://a.com/r"], bad
    # <base target> without href is not a base URL.
    assert links(f'<base target="_blank">{body}').outlinks == ["http://a.com/dir/y", "http://a.com/r"]


def test_non_http_schemes_dropped_and_counted():
    html = ('<a href="mailto:a@b">m</a><a href="javascript:void(0)">j</a><a href=" JavaScript:x()">j2</a>'
            '<a href="tel:+1555">t</a><a href="data:text/html,hi">d</a><a href="ftp://f.org/x">f</a>'
            '<a href="x">x</a><a href="./x#y">x2</a><a href="#top">self</a>')
    result = links(html)
    assert result.outlinks == ["http://a.com/dir/x"]
    assert result.rejected == {"scheme": 6}


def test_invalid_links_counted_under_check_url_reason():
    hrefs = ["http://[bad/", "http://", "http://a.com:99999/", "http://exa mple.com/"]
    html = "".join(f'<a href="{h}">l</a>' for h in hrefs) + '<a href="http://[bad/">again</a>'
    expected: dict[str, int] = {}
    for h in hrefs + ["http://[bad/"]:
        url, reason = check_url(h, PAGE)
        assert url is None
        expected[reason] = expected.get(reason, 0) + 1
    result = links(html)
    assert result.outlinks == [] and result.rejected == expected


def test_tabs_and_newlines_inside_href_are_removed():
    # WHATWG URL Standard: ASCII tab and newline are stripped from URLs before parsing.
    assert links('<a href="/long/\npath\t/x\r\n">l</a>').outlinks == ["http://a.com/long/path/x"]


def test_rel_nofollow_token_list():
    html = ('<a href="/1" rel="nofollow noopener">1</a><a href="/2" rel="NoFollow">2</a>'
            '<a href="/3" rel="noopener noreferrer">3</a><a href="/4" rel="nofollowed">4</a>'
            '<a href="/5" rel="ugc sponsored">5</a><a href="/6" rel=" external\tnofollow ">6</a>'
            '<area href="/7" rel="nofollow">')
    result = links(html)
    assert result.outlinks == ["http://a.com/3", "http://a.com/4", "http://a.com/5"]
    assert result.rejected == {"nofollow": 4}
    assert not result.nofollow  # rel=nofollow concerns one link, not the page


def test_duplicates_page_itself_and_order():
    html = ('<a href="b">1</a><a href="a">2</a><a href="b#x">dup</a><a href="http://A.com:80/dir/a">dup</a>'
            f'<a href="{PAGE}">self</a><a href="page.html#top">self</a><a href="c">3</a>')
    assert links(html).outlinks == ["http://a.com/dir/b", "http://a.com/dir/a", "http://a.com/dir/c"]
    # The page URL is compared in canonical form.
    assert links('<a href="/dir/page.html">s</a><a href="/x">x</a>', page="HTTP://A.COM:80/dir/./page.html#f"
                 ).outlinks == ["http://a.com/x"]


def test_cap_counts_overflow():
    html = "".join(f'<a href="/p{i}">p</a>' for i in range(1000))
    result = links(html, cap=10)
    assert result.outlinks == [f"http://a.com/p{i}" for i in range(10)]
    assert result.rejected == {"over_cap": 990}
    assert links(html, cap=0).outlinks == []
    assert links(html, cap=1000).rejected == {}


def test_rules_are_applied_to_links():
    rules = UrlRules(tracking_params=("utm_*",), session_params=("jsessionid",))
    hrefs = ["/a?utm_source=x&id=1", "b;jsessionid=ABC?x=1", "http://o.org/?utm_medium=m"]
    html = "".join(f'<a href="{h}">l</a>' for h in hrefs)
    expected = [check_url(h, PAGE, rules)[0] for h in hrefs]
    assert links(html, rules=rules).outlinks == expected


def test_same_href_on_pages_of_different_hosts_resolves_per_page():
    # Root-relative and absolute hrefs are cached across pages by origin: never across hosts/schemes.
    html = '<a href="/nav">n</a><a href="http://x.org/p">x</a><a href="//cdn.org/i">c</a>'
    assert links(html, page="http://a.com/1").outlinks == ["http://a.com/nav", "http://x.org/p", "http://cdn.org/i"]
    assert links(html, page="https://b.com:8443/2").outlinks == [
        "https://b.com:8443/nav", "http://x.org/p", "https://cdn.org/i"]
    assert links(html, page="http://a.com/3").outlinks == ["http://a.com/nav", "http://x.org/p", "http://cdn.org/i"]


def test_nofollow_links_after_the_cap_count_as_over_cap():
    html = '<a href="/1">1</a><a href="/2" rel="nofollow">2</a><a href="/3">3</a><a href="/4" rel="nofollow">4</a>'
    assert links(html, cap=2).rejected == {"nofollow": 1, "over_cap": 1}
    assert links(html, cap=1).rejected == {"over_cap": 3}
    assert links(html, cap=2).outlinks == ["http://a.com/1", "http://a.com/3"]


def test_results_do_not_depend_on_the_cross_page_cache(monkeypatch):
    """The per-origin cache is a memo only: cold, warm, evicted or disabled, the same links."""
    from crawl.parse import links as links_module
    pages = [(f"http://s{i % 3}.org/d{i % 2}/p{i}.html",
              "".join(f'<a href="{h}">x</a>' for h in ("/nav", "/nav?b=2&a=1&utm_source=x", f"/p{i}", "rel",
                                                       "http://o.org/x", "//cdn.org/y", "../up", "/p1",
                                                       "HTTP://S0.ORG/", "mailto:a@b", "/caf%C3%A9", "/café")))
             for i in range(12)]
    rules = UrlRules(("utm_*",), ())
    links_module.clear_caches()
    cold = [extract_links(h, u, 100, rules=rules) for u, h in pages]
    warm = [extract_links(h, u, 100, rules=rules) for u, h in pages]
    monkeypatch.setattr(links_module, "_ORIGIN_CACHE_ENTRIES", 4)  # evicts all the time
    links_module.clear_caches()
    evicted = [extract_links(h, u, 100, rules=rules) for u, h in pages]
    assert cold == warm == evicted
    assert sum(map(len, links_module._ORIGIN_CACHES.values())) <= 2 * 4 + 12  # bounded (a page may add a few)
    # and every outlink is exactly what check_url says for its href and the page URL
    for (url, html), result in zip(pages, cold):
        hrefs = [h.split('"')[0] for h in html.split('href="')[1:]]
        expected = []
        for href in hrefs:
            canonical = check_url(href, url, rules)[0]
            if canonical is not None and canonical != check_url(url, None, rules)[0] and canonical not in expected:
                expected.append(canonical)
        assert result.outlinks == expected


# ------------------------------------------------------------------------------ hostile input

def test_wrong_charset_bytes_nul_bytes_and_garbage_never_raise():
    # Latin-1 bytes where UTF-8 is expected: decoded with replacement, the link survives.
    result = links("<a href='caf\xe9.html'>caf\xe9</a><a href='ok'>".encode("latin-1"))
    assert result.outlinks == ["http://a.com/dir/caf%EF%BF%BD.html", "http://a.com/dir/ok"]
    assert links(b"<a href='a\x00b'>\x00</a>\x00<a href=c>").outlinks == [
        "http://a.com/dir/a%EF%BF%BDb", "http://a.com/dir/c"]
    assert links("<a href='\ud800x'>lone surrogate</a><a href=ok>").outlinks[-1] == "http://a.com/dir/ok"
    assert links(b"\xff\xfe\x00garbage").outlinks == []
    assert links("").outlinks == [] and links(b"").rejected == {}
    rng = random.Random(7)
    for _ in range(200):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
        result = links(b"<a href='" + blob + b"'>" + blob + b"<meta http-equiv=refresh content='" + blob + b"'>",
                       x_robots_tag=blob.decode("latin-1"))
        assert isinstance(result, PageLinks)


def test_bad_page_url_does_not_raise():
    for page in ("", "not a url", "mailto:x@y", "http://[bad/"):
        result = links('<a href="http://ok.org/x">x</a><a href="rel">r</a>', page=page)
        assert "http://ok.org/x" in result.outlinks


def test_huge_document_is_linear():
    """Linear, not quadratic, in a wide document's size: a 4x larger page costs well under 16x the
    CPU time (CPU time of this process, best of 3: a ratio, so a loaded machine cannot fail it).
    (Deep nesting is another matter: lexbor parses n unclosed <div>s in O(n^2), 3.3 s for 20,000;
    the parser's child process and parse.time_limit_s bound that, tests/test_parse.py.)"""
    def page(n):
        return "<html><body>" + "<div><p>text <b>bold</b></p></div>" * n + "".join(
            f'<a href="/p{i}">p</a>' for i in range(n)) + "</body></html>"

    def cpu_seconds(html):
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            result = links(html, cap=500)
            best = min(best, time.process_time() - start)
        return best, result
    small, _ = cpu_seconds(page(5000))
    large, result = cpu_seconds(page(20000))
    assert len(result.outlinks) == 500 and result.rejected == {"over_cap": 19500}
    assert large < 8 * max(small, 0.01), (small, large)  # linear: ~4x; quadratic: ~16x


# ------------------------------------------------------------------------------ canonical

@pytest.mark.parametrize("head, expected", [
    ('<link rel="canonical" href="/dir/main.html">', "http://a.com/dir/main.html"),
    ('<link rel="canonical" href="main.html?a=1">', "http://a.com/dir/main.html?a=1"),
    ('<link REL="Canonical" href="https://www.a.com/x">', "https://www.a.com/x"),
    ('<link rel="alternate canonical" href="/c">', "http://a.com/c"),
    ('<link rel="canonical" href="http://A.com:80/dir/page.html#top">', None),   # the page itself
    ('<link rel="canonical" href="">', None),                                    # the page itself
    ('<link rel="canonical" href="javascript:x">', None),                        # invalid
    ('<link rel="canonical">', None),                                            # no href
    ('<link rel="alternate" href="/alt">', None),
    ('<link rel="canonical" href="/first"><link rel="canonical" href="/second">', "http://a.com/first"),
    ('<base href="http://b.com/x/"><link rel="canonical" href="c">', "http://b.com/x/c"),
])
def test_canonical(head, expected):
    assert links(f"<html><head>{head}</head><body><a href='l'>l</a></body></html>").canonical == expected


def test_canonical_in_body_is_ignored():
    html = '<html><head></head><body><p><link rel="canonical" href="/hijack"></p></body></html>'
    assert links(html).canonical is None
    # ... but a <link> before <body> is in <head> even when the markup forgot the <head> tag.
    assert links('<link rel=canonical href=/c><p>text').canonical == "http://a.com/c"


def test_canonical_equal_to_page_after_rules():
    rules = UrlRules(tracking_params=("utm_*",))
    html = '<head><link rel="canonical" href="/dir/page.html"></head>'
    assert links(html, page="http://a.com/dir/page.html?utm_source=x", rules=rules).canonical is None


def test_feeds_announced_by_alternate_links():
    html = ("<head><link rel='alternate' type='application/rss+xml' href='/feed.xml'>"
            "<link rel='Alternate Feed' type='application/atom+xml; charset=utf-8' href='http://a.com/atom?utm_source=x'>"
            "<link rel='alternate' type='text/html' href='/fr/'><link rel='alternate' hreflang='de' href='/de/'>"
            "<link rel='stylesheet' type='application/rss+xml' href='/not-a-feed'>"
            "<link rel='alternate' type='application/rss+xml' href='/feed.xml'>"
            "<link rel='alternate' type='application/rss+xml' href='javascript:x'></head>"
            "<body><link rel='alternate' type='application/rss+xml' href='/comments.rss'><a href='/x'>x</a></body>")
    found = links(html, rules=UrlRules(tracking_params=("utm_*",)))
    assert found.feeds == ["http://a.com/feed.xml", "http://a.com/atom", "http://a.com/comments.rss"]
    assert found.outlinks == ["http://a.com/x"]  # a feed is read as a sitemap, not crawled as a page
    many = "".join(f"<link rel=alternate type=application/rss+xml href=/f{i}.xml>" for i in range(10))
    assert len(links(many).feeds) == MAX_FEEDS
    assert links("<meta name=robots content=nofollow>" + many).feeds == []


# ------------------------------------------------------------------------------ meta refresh

@pytest.mark.parametrize("content, expected", [
    ("5; url=/next", "http://a.com/next"),
    ("0;URL='http://x.com/a'", "http://x.com/a"),
    ("3,url=&quot;b&quot; trailing", "http://a.com/dir/b"),
    ("0; /plain", "http://a.com/plain"),
    ("  7 ; Url = 'q r' ", "http://a.com/dir/q%20r"),
    ("1.5;url=c", "http://a.com/dir/c"),
    (".5 url=d", "http://a.com/dir/d"),
    ("0; 'quoted'", "http://a.com/dir/quoted"),
    ("0;urx=e", "http://a.com/dir/urx=e"),      # not "url=": the whole rest is the URL
    ("0; url=", None),                          # reload of the page itself
    ("5", None),
    ("0; url=page.html", None),
    ("url=/x", None),                           # no delay: invalid, ignored
    ("5x; url=/x", None),                       # junk after the delay: invalid
    ("0; url=javascript:alert(1)", None),
    ("", None),
])
def test_meta_refresh(content, expected):
    html = f'<html><head><meta http-equiv="Refresh" content="{content}"></head><body><a href="/z">z</a></body></html>'
    result = links(html)
    assert result.refresh == expected
    assert result.outlinks == ([expected] if expected else []) + ["http://a.com/z"]


def test_meta_refresh_first_valid_wins_and_counts_toward_cap():
    html = ('<meta http-equiv=REFRESH content="nonsense"><meta http-equiv=refresh content="0;url=/r1">'
            '<meta http-equiv=refresh content="0;url=/r2"><a href="/r1">dup</a><a href="/a">a</a>')
    result = links(html, cap=1)
    assert result.refresh == "http://a.com/r1"
    assert result.outlinks == ["http://a.com/r1"] and result.rejected == {"over_cap": 2}


def test_meta_refresh_to_invalid_target_is_counted():
    assert links('<meta http-equiv=refresh content="0;url=mailto:x@y">').rejected == {"scheme": 1}


# ------------------------------------------------------------------------------ robots directives

HTML_WITH_HINTS = ('<html><head>{meta}<link rel=canonical href="/canon"><meta http-equiv=refresh content="0;url=/next">'
                   '</head><body><a href="/a">a</a><a href="/b">b</a></body></html>')


@pytest.mark.parametrize("meta, noindex, nofollow", [
    ('<meta name="robots" content="noindex">', True, False),
    ('<meta name="robots" content="nofollow">', False, True),
    ('<meta name="robots" content="noindex, nofollow">', True, True),
    ('<meta name="robots" content="none">', True, True),
    ('<meta name="robots" content="all">', False, False),
    ('<meta name="robots" content="index, follow">', False, False),
    ('<META NAME="ROBOTS" CONTENT="NoIndex,NOFOLLOW">', True, True),
    ('<meta name="robots" content="max-snippet:-1, noindex">', True, False),
    ('<meta name="deltacrawl" content="nofollow">', False, True),
    ('<meta name="DeltaCrawl" content="none">', True, True),
    ('<meta name="googlebot" content="noindex, nofollow">', False, False),   # another crawler's
    ('<meta name="robots" content="noindex"><meta name="deltacrawl" content="nofollow">', True, True),
    ('<meta name="description" content="noindex nofollow">', False, False),
])
def test_meta_robots(meta, noindex, nofollow):
    result = links(HTML_WITH_HINTS.format(meta=meta))
    assert (result.noindex, result.nofollow) == (noindex, nofollow)
    # Canonical and refresh are reported either way; nofollow only empties the outlinks.
    assert result.canonical == "http://a.com/canon" and result.refresh == "http://a.com/next"
    if nofollow:
        assert result.outlinks == [] and result.rejected == {"nofollow": 2}
    else:
        assert result.outlinks == ["http://a.com/next", "http://a.com/a", "http://a.com/b"]


@pytest.mark.parametrize("header, noindex, nofollow", [
    ("noindex", True, False),
    ("nofollow", False, True),
    ("NOINDEX, NOFOLLOW", True, True),
    ("none", True, True),
    ("all", False, False),
    ("noarchive, nofollow", False, True),
    ("deltacrawl: nofollow", False, True),
    ("DeltaCrawl : noindex", True, False),
    ("googlebot: noindex", False, False),
    ("googlebot: noindex, nofollow", False, False),             # both for googlebot (Google's reading)
    ("googlebot: noindex, deltacrawl: nofollow", False, True),
    ("deltacrawl: none, googlebot: all", True, True),
    ("nofollow, googlebot: noindex", False, True),              # unprefixed before a prefix: everyone
    ("unavailable_after: 25 Jun 2010 15:00:00 PST", False, False),
    ("max-snippet: 20, noindex", True, False),
    ("", False, False),
    (None, False, False),
])
def test_x_robots_tag(header, noindex, nofollow):
    result = links(HTML_WITH_HINTS.format(meta=""), x_robots_tag=header)
    assert (result.noindex, result.nofollow) == (noindex, nofollow)
    assert len(result.outlinks) == (0 if nofollow else 3)


def test_agent_token_is_configurable():
    assert links(HTML_WITH_HINTS.format(meta=""), x_robots_tag="mybot: nofollow", agent="MyBot").nofollow
    assert not links(HTML_WITH_HINTS.format(meta=""), x_robots_tag="deltacrawl: nofollow", agent="MyBot").nofollow
    assert links(HTML_WITH_HINTS.format(meta='<meta name="mybot" content="noindex">'), agent="mybot").noindex


def test_header_and_meta_combine_most_restrictive():
    result = links(HTML_WITH_HINTS.format(meta='<meta name="robots" content="all">'), x_robots_tag="noindex")
    assert result.noindex and not result.nofollow


def test_a_tree_parsed_once_gives_the_same_links():
    from selectolax.lexbor import LexborHTMLParser
    html = ('<html><head><base href="/d/"><link rel=canonical href="/c"></head><body>'
            '<a href="x">x</a><a href="../y?utm_source=z&b=1&a=2">y</a><a rel=nofollow href="/n">n</a></body></html>')
    tree = LexborHTMLParser(html)
    assert extract_links(html, "http://h.com/p/q", 50, tree=tree) == extract_links(html, "http://h.com/p/q", 50)
    assert tree.css_first("a").attributes["href"] == "x"  # read, not changed
