"""crawl.parse.page and crawl.parse.pool: charset decoding, in-process parsing, and the process pool that survives hostile pages.

No Spark. The pool tests use the test hooks in crawl/devweb/parser_hooks.py (``_hostile_page`` dispatches on
the body: b"sleep <s>", b"alloc <bytes>", b"segv", b"exit", b"pid", anything else is a page).
"""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from crawl.devweb.parser_hooks import _hostile_allocate, _hostile_crash, _hostile_page, _hostile_sleep
from crawl.parse.links import extract_outlinks
from crawl.parse.page import ParseResult, decode_html, is_parseable, parse_page
from crawl.parse.pool import ParserPool

PAGE_URL = "http://a.com/dir/page.html"
PAGE = (b"<html><head><title>  Hello \n  &amp; welcome </title></head><body>"
        b'<a href="x.html">x</a><a href="/root">r</a><a href="http://B.com:80/">b</a>'
        b'<a href="mailto:a@b">m</a><a href="x.html#frag">dup</a></body></html>')
MIB = 2**20


def _gone(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


# ------------------------------------------------------------------------------ decode_html

def test_bom_beats_header_beats_meta():
    meta_sjis = '<meta charset="shift_jis"><p>é</p>'
    # BOM wins over a header and a meta that both say something else.
    assert decode_html(b"\xef\xbb\xbf" + meta_sjis.encode("utf-8"), "text/html; charset=iso-8859-1") == (
        meta_sjis, "utf-8")
    utf16 = b"\xff\xfe" + "<p>hé</p>".encode("utf-16-le")
    assert decode_html(utf16, "text/html; charset=utf-8") == ("<p>hé</p>", "utf-16-le")
    # Header wins over meta (latin1 means windows-1252, as in browsers).
    body = '<meta charset="utf-8"><p>café €</p>'.encode("cp1252")
    assert decode_html(body, 'text/html; charset="ISO-8859-1"') == ('<meta charset="utf-8"><p>café €</p>', "cp1252")
    # Meta wins over the default.
    assert decode_html('<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251"), "text/html") == (
        '<meta charset="windows-1251"><p>Привет</p>', "cp1251")


def test_meta_shift_jis_both_forms():
    text = "<html><head>{}</head><body>日本語のページ</body></html>"
    for meta in ('<meta charset="Shift_JIS">',
                 "<META HTTP-EQUIV='Content-Type' CONTENT='text/html; charset=shift_jis'>",
                 '<meta content="text/html;charset=x-sjis" http-equiv="content-type" />'):
        decoded, charset = decode_html(text.format(meta).encode("shift_jis"), None)
        assert "日本語のページ" in decoded
        assert charset == "cp932"  # Shift_JIS as browsers decode it (Windows-31J)


def test_meta_prescan_limits():
    # Inside a comment: ignored; after the first 4 KiB: ignored; utf-16 declared in meta: utf-8.
    assert decode_html(b'<!-- <meta charset="koi8-r"> --><p>\xc3\xa9</p>', None) == (
        '<!-- <meta charset="koi8-r"> --><p>é</p>', "utf-8")
    late = b"<p>" + b" " * 5000 + b'<meta charset="koi8-r"></p>'
    assert decode_html(late, None)[1] == "utf-8"
    assert decode_html(b'<meta charset="utf-16"><p>\xc3\xa9</p>', None) == ('<meta charset="utf-16"><p>é</p>', "utf-8")
    # An unknown label in the first meta does not stop the scan.
    assert decode_html(b'<meta charset="nonsense"><meta charset="koi8-r">', None)[1] == "koi8-r"


def test_wrong_declared_charset_does_not_crash():
    body = "<p>日本語 — ünïcödé</p>".encode("utf-8")
    for header in ("text/html; charset=shift_jis", "text/html; charset=iso-2022-jp", "text/html; charset=utf-16be",
                   "text/html; charset=big5", "text/html; charset=gb18030"):
        text, charset = decode_html(body, header)
        assert isinstance(text, str) and charset


def test_windows_1252_bytes_under_utf8_header_and_undeclared():
    body = "<p>café – naïve résumé</p>".encode("cp1252")
    # Declared utf-8 is obeyed: undecodable bytes become U+FFFD, nothing raises.
    text, charset = decode_html(body, "text/html; charset=utf-8")
    assert charset == "utf-8" and "\ufffd" in text and text.startswith("<p>caf")
    # Undeclared: utf-8 fails on every non-ASCII byte, so windows-1252 is used.
    assert decode_html(body, None) == ("<p>café – naïve résumé</p>", "cp1252")
    assert decode_html(body, "text/html") == ("<p>café – naïve résumé</p>", "cp1252")
    # A utf-8 page with one stray byte, or cut mid-character, stays utf-8.
    good = ("<p>" + "ünïcödé " * 20 + "</p>").encode("utf-8")
    assert decode_html(good + b"\xff", None)[1] == "utf-8"
    assert decode_html(good[:-6] + "é".encode()[:1], None)[1] == "utf-8"


def test_nul_bytes_removed():
    assert decode_html(b"<p>a\x00b</p>\x00", None) == ("<p>ab</p>", "utf-8")
    assert decode_html(b"\xff\xfe" + "<p>ab</p>".encode("utf-16-le"), None) == ("<p>ab</p>", "utf-16-le")


@pytest.mark.parametrize("label", ["bogus-charset", "utf-7", "base64", "rot13", "idna", "unicode_escape",
                                   "x" * 200, "", "  ", "\"\"", "utf-8\x00"])
def test_bogus_or_unsafe_charset_names_fall_back_to_utf8(label):
    body = "<p>é +AGEAYgBj-</p>".encode("utf-8")
    assert decode_html(body, f"text/html; charset={label}") == ("<p>é +AGEAYgBj-</p>", "utf-8")
    assert decode_html(f'<meta charset="{label}">'.encode() + body, None)[1] == "utf-8"


def test_decode_never_raises_on_odd_input():
    assert decode_html(b"", None) == ("", "utf-8")
    assert decode_html(b"", "text/html; charset=") == ("", "utf-8")
    assert decode_html(bytes(range(256)) * 10, "text/html; charset=iso-2022-jp")[1] == "iso2022_jp"
    assert decode_html(b"\xfe\xff\x00", ";;;charset===;")[1] == "utf-16-be"
    assert decode_html(b"<p>x", ";;;charset===;") == ("<p>x", "utf-8")
    text, charset = decode_html(os.urandom(5000), "text/html; charset=gb18030")
    assert isinstance(text, str) and charset == "gb18030"


# ------------------------------------------------------------------------------ parse_page

def test_parse_page_outlinks_title_and_charset():
    result = parse_page(PAGE, PAGE_URL, "text/html; charset=utf-8", 100)
    assert (result.outlinks, result.charset, result.title, result.error) == \
        (extract_outlinks(PAGE, PAGE_URL, 100), "utf-8", "Hello & welcome", None)
    assert result.rejected == {"scheme": 1}  # the mailto: link
    assert result.signature is not None and len(result.signature) == 64 * 8
    assert result.text_hash is not None and result.simhash is not None
    assert result.outlinks == ["http://a.com/dir/x.html", "http://a.com/root", "http://b.com/"]


def test_parse_page_title_missing_or_blank():
    assert parse_page(b"<p>no title</p>", PAGE_URL, None, 10).title is None
    assert parse_page(b"<title> \n </title>", PAGE_URL, None, 10).title is None
    assert len(parse_page(b"<title>" + b"t" * 5000 + b"</title>", PAGE_URL, None, 10).title) == 1000


def test_parse_page_non_utf8_page_links():
    body = '<meta charset="windows-1251"><title>Главная</title><a href="/статья">a</a>'.encode("cp1251")
    result = parse_page(body, "http://ru.example/", None, 10)
    assert result.charset == "cp1251" and result.title == "Главная" and result.error is None
    assert result.outlinks == extract_outlinks(decode_html(body, None)[0], "http://ru.example/", 10)
    assert result.outlinks and "%D1%81" in result.outlinks[0]


def test_parse_page_malformed_html():
    body = (b"<html><a href='/a'<div><a href=\"/b\">b<a href=/c><<<>>><td></tr>"
            b"<a href='/d'>\x00\xff\xfe<table><tr><td><a href='/e'></body></html></html>< a href=/f>"
            b"<title>unclosed title <a href=/g>")  # RCDATA to the end: /g is title text, not a link
    result = parse_page(body, PAGE_URL, "text/html", 100)
    assert result.error is None
    assert result.outlinks == [f"http://a.com/{c}" for c in "abcde"]
    assert result.title == "unclosed title <a href=/g>"


def test_parse_page_zero_bytes_and_no_links_wanted():
    from crawl.dedup.fingerprint import EMPTY_TEXT_HASH
    assert parse_page(b"", PAGE_URL, None, 100) == ParseResult([], "utf-8", None, None, text_hash=EMPTY_TEXT_HASH)
    assert parse_page(PAGE, PAGE_URL, None, 0).outlinks == []


def test_parse_page_100k_links_capped():
    body = "".join(f'<a href="/p{i}">p</a>' for i in range(100_000)).encode()
    result = parse_page(body, PAGE_URL, "text/html", 500)
    assert result.error is None
    assert result.outlinks == [f"http://a.com/p{i}" for i in range(500)]


# ------------------------------------------------------------------------------ is_parseable

def _deepest_depth(tree) -> int:
    depth, node = 0, tree.css_first("a")
    while node is not None:
        depth, node = depth + 1, node.parent
    return depth


def test_deep_nesting_is_capped_before_the_tree_is_built_and_keeps_text_and_links(monkeypatch):
    # 160 KB of unclosed <div>s: lexbor's tree builder costs depth^2 on them (crawl/parse/page.py
    # MAX_NESTING); what matters here is that the tree parse_page builds is bounded, and that
    # nothing a crawl reads from the page is lost
    import crawl.parse.page as page
    from selectolax.lexbor import LexborHTMLParser
    built = []
    monkeypatch.setattr(page, "LexborHTMLParser", lambda html: built.append(LexborHTMLParser(html)) or built[-1])
    tail = "<p>words at the bottom <a href=/deep.html>deep link</a>"
    deep = parse_page(("<html><head><title>Deep</title></head><body>" + "<div>" * 32768 + tail).encode(),
                      "http://a.com/", None, 10)
    assert _deepest_depth(built[-1]) <= 520  # MAX_NESTING (512) + document, html, body, <p>, <a>; the page: 32,768
    flat = parse_page(("<html><head><title>Deep</title></head><body>" + tail).encode(), "http://a.com/", None, 10)
    assert deep.error is None and deep.outlinks == flat.outlinks == ["http://a.com/deep.html"]
    assert deep.title == "Deep" and deep.text_hash == flat.text_hash


def test_cap_nesting_drops_only_the_tags_below_the_cap():
    from crawl.parse.page import cap_nesting
    html = "<div><span><div>t <a href=x><b>y</b></a></div></span></div>"
    assert cap_nesting(html, max_depth=2, min_tags=0) == "<div><span> t <a href=x> y </a> </span></div>"
    assert cap_nesting(html, max_depth=5, min_tags=0) is html  # not that deep: the same string
    listing = "<ul>" + "<li><a href=/x>x</a>" * 5000 + "</ul>"  # many tags, shallow: unchanged
    assert cap_nesting(listing) is listing


@pytest.mark.parametrize("ctype, head, expected", [
    ("text/html", b"", True),
    ("Text/HTML; charset=UTF-8", b"%PDF", True),
    ("application/xhtml+xml", b"<?xml version='1.0'?>", True),
    ("image/png", b"<html>", False),
    ("application/pdf", b"%PDF-1.7", False),
    ("text/plain", b"<html>", False),
    ("application/xml", b"<html>", False),
    (None, b"  \n<!DOCTYPE html><html>", True),
    (None, b"\xef\xbb\xbf\r\n<HTML lang=en>", True),
    ("", b"<body>", True),
    (None, b"\xff\xfe" + "<html>".encode("utf-16-le"), True),
    (None, b"<!-- x -->", True),
    (None, b"\x89PNG\r\n\x1a\n", False),
    (None, b"%PDF-1.4", False),
    (None, b"<?xml version='1.0'?><rss>", False),
    (None, b"<htmlx>", False),
    (None, b"", False),
    (None, b"hello", False),
])
def test_is_parseable(ctype, head, expected):
    assert is_parseable(ctype, head) is expected


# ------------------------------------------------------------------------------ ParserPool

def test_pool_parse_matches_in_process():
    async def run():
        with ParserPool() as pool:
            return await pool.parse(PAGE, PAGE_URL, "text/html", 100)

    result = asyncio.run(run())
    assert result.outlinks == extract_outlinks(PAGE, PAGE_URL, 100)
    assert result == parse_page(PAGE, PAGE_URL, "text/html", 100)


def test_pool_time_limit_kills_worker_and_recovers():
    async def run():
        with ParserPool(time_limit_s=1.0, target=_hostile_page) as pool:
            pid = int((await pool.parse(b"pid", PAGE_URL, None, 10)).title)
            started = time.monotonic()
            hung = await pool.parse(b"sleep 60", PAGE_URL, None, 10)
            elapsed = time.monotonic() - started
            after = await pool.parse(PAGE, PAGE_URL, None, 100)
            new_pid = int((await pool.parse(b"pid", PAGE_URL, None, 10)).title)
            return pid, hung, elapsed, after, new_pid

    pid, hung, elapsed, after, new_pid = asyncio.run(run())
    assert hung == ParseResult([], "", None, "parse_error: timeout after 1s")
    assert 0.9 < elapsed < 50  # cut at the 1 s limit, long before the 60 s sleep would end
    assert after == parse_page(PAGE, PAGE_URL, None, 100)
    assert new_pid != pid and _gone(pid)


def test_pool_memory_blowup_and_recovery():
    async def run():
        with ParserPool(memory_limit_bytes=256 * MIB, target=_hostile_page) as pool:
            small = await pool.parse(b"alloc 1000000", PAGE_URL, None, 10)
            # 512 MiB of untouched calloc memory would succeed without the limit.
            big = await pool.parse(b"alloc %d" % (512 * MIB), PAGE_URL, None, 10)
            after = await pool.parse(PAGE, PAGE_URL, None, 100)
            return small, big, after

    small, big, after = asyncio.run(run())
    assert small.title == "allocated 1000000" and small.error is None
    assert big == ParseResult([], "", None, "parse_error: memory limit exceeded (MemoryError)")
    assert after == parse_page(PAGE, PAGE_URL, None, 100)


@pytest.mark.parametrize("crash", [b"segv", b"exit"])
def test_pool_hard_crash_and_recovery(crash):
    async def run():
        with ParserPool(target=_hostile_page) as pool:
            crashed = await pool.parse(crash, PAGE_URL, None, 10)
            after = await pool.parse(PAGE, PAGE_URL, None, 100)
            return crashed, after

    crashed, after = asyncio.run(run())
    assert crashed == ParseResult([], "", None, "parse_error: worker process died (BrokenProcessPool)")
    assert after == parse_page(PAGE, PAGE_URL, None, 100)


def test_single_purpose_hooks_as_targets():
    async def run():
        out = []
        for target, body in ((_hostile_sleep, b"30"), (_hostile_allocate, b""), (_hostile_crash, b"")):
            with ParserPool(time_limit_s=0.5, memory_limit_bytes=256 * MIB, target=target) as pool:
                out.append((await pool.parse(body, PAGE_URL, None, 10)).error)
        return out

    assert asyncio.run(run()) == ["parse_error: timeout after 0.5s",
                                  "parse_error: memory limit exceeded (MemoryError)",
                                  "parse_error: worker process died (BrokenProcessPool)"]


def test_concurrent_parses_all_complete():
    pages = [(f'<title>p{i}</title><a href="/p{i}">x</a><a href="/common">c</a>'.encode(), f"http://h{i % 7}.com/")
             for i in range(60)]

    async def run():
        with ParserPool(workers=2) as pool:
            return await asyncio.gather(*(pool.parse(body, url, "text/html", 10) for body, url in pages))

    results = asyncio.run(run())
    assert results == [parse_page(body, url, "text/html", 10) for body, url in pages]
    assert all(r.error is None for r in results)


def test_concurrent_hostile_pages_do_not_spoil_the_others():
    # One page hangs; a page running next to it when its worker pool is killed is retried. The
    # innocent page (2 s of work, from 2.5 s) is in flight when the hung one's 4 s run out, and its
    # retry has twice its work in hand: a loaded machine's late timers do not make it a timeout.
    async def delayed(pool, delay, body):
        await asyncio.sleep(delay)
        return await pool.parse(body, PAGE_URL, None, 100)

    async def run():
        with ParserPool(workers=2, time_limit_s=4.0, target=_hostile_page) as pool:
            return await asyncio.gather(delayed(pool, 0, b"sleep 60"), delayed(pool, 2.5, b"sleep 2"),
                                        *(delayed(pool, 0.1 * i, PAGE) for i in range(20)))

    hung, innocent, *normal = asyncio.run(run())
    assert hung.error == "parse_error: timeout after 4s"
    assert innocent == ParseResult([], "utf-8", "slept 2", None)
    assert normal == [parse_page(PAGE, PAGE_URL, None, 100)] * 20


def test_cancelled_call_does_not_leave_a_runaway_worker():
    async def run():
        with ParserPool(time_limit_s=30, target=_hostile_page) as pool:
            pid = int((await pool.parse(b"pid", PAGE_URL, None, 10)).title)
            task = asyncio.ensure_future(pool.parse(b"sleep 60", PAGE_URL, None, 10))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            after = await pool.parse(PAGE, PAGE_URL, None, 100)
            return pid, after

    pid, after = asyncio.run(run())
    assert _gone(pid)
    assert after == parse_page(PAGE, PAGE_URL, None, 100)


def test_pool_survives_across_event_loops_and_close_is_idempotent():
    pool = ParserPool(target=_hostile_page)
    try:
        pid = int(asyncio.run(pool.parse(b"pid", PAGE_URL, None, 10)).title)
        assert int(asyncio.run(pool.parse(b"pid", PAGE_URL, None, 10)).title) == pid  # same worker, kept alive
        assert asyncio.run(pool.parse(PAGE, PAGE_URL, None, 100)) == parse_page(PAGE, PAGE_URL, None, 100)
    finally:
        pool.close()
    pool.close()
    assert _gone(pid)
    assert asyncio.run(pool.parse(PAGE, PAGE_URL, None, 100)) == ParseResult([], "", None,
                                                                              "parse_error: parser pool closed")


def test_pool_rejects_targets_a_child_cannot_import():
    with pytest.raises(TypeError):
        ParserPool(target=lambda *args: None)
    with pytest.raises(ValueError):
        ParserPool(workers=0)


# -- BatchingParser: many pages per round trip, a hostile one isolated -----------------------

def test_batching_parser_matches_parse_page_and_isolates_hostile_pages():
    from crawl.devweb.parser_hooks import _hostile_batch, _hostile_page
    from crawl.parse.page import parse_page
    from crawl.parse.pool import BatchingParser, ParserPool

    pages = [(f'<html><title>t{i}</title><a href="/p{i}">x</a><a href="q{i}">y</a></html>'.encode(),
              f"http://a.example/d/{i}.html", "text/html", 100) for i in range(40)]
    hostile = [(b"sleep 30", "http://a.example/s", "text/html", 100),
               (b"alloc 4000000000", "http://a.example/m", "text/html", 100),
               (b"segv", "http://a.example/c", "text/html", 100)]

    async def go():
        pool = ParserPool(workers=1, memory_limit_bytes=512 * 2**20, time_limit_s=2.0, target=_hostile_page)
        with BatchingParser(pool, max_batch=16, batch_target=_hostile_batch, single_target=_hostile_page) as parser:
            return await asyncio.gather(*(parser.parse(*args) for args in pages[:20] + hostile + pages[20:]))

    results = asyncio.run(go())
    normal = results[:20] + results[23:]
    assert [r.outlinks for r in normal] == [parse_page(*args).outlinks for args in pages]
    assert all(r.error is None for r in normal)
    assert all(r.error and r.error.startswith("parse_error") for r in results[20:23])


def test_a_text_extraction_failure_is_the_pages_parse_error_not_a_silent_empty_text(monkeypatch):
    """A page whose text cannot be extracted keeps its links, and says why it has no text (it is
    then never compared for duplicates): parse_error in its segment row and the crawldb."""
    import crawl.parse.page as page

    def broken(html, tree=None, collapse_whitespace=True):
        raise ValueError("lexbor said no")
    monkeypatch.setattr(page, "visible_text", broken)
    result = page.parse_page(b'<html><body><a href="/x">x</a>text</body></html>', "http://a.example/", "text/html", 10)
    assert result.outlinks == ["http://a.example/x"]
    assert result.error == "parse_error: text extraction failed: ValueError: lexbor said no"
    assert result.text_hash is None and result.simhash is None
