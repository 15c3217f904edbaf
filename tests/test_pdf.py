"""The PDF parser (crawl/parse/pdf.py), type detection and body limits by type
(crawl/parse/registry.py), and PDFs through the fetcher against a loopback web. The PDFs are
built byte by byte (crawl/devweb/pdfs.py, ``make_pdf``, which the test web serves too): nothing
is downloaded."""
from __future__ import annotations

import asyncio

import pytest

from crawl.config import build_config
from crawl.crawldb.status import FetchStatus as FS
from crawl.dedup.fingerprint import fingerprint
from crawl.devweb.pdfs import MIB, assemble, bomb, cycle, deep, make_pdf, many_pages, many_streams, stream
from crawl.fetch.fetcher import fetch_partition
from crawl.parse.page import ParseOptions, parse_page
from crawl.parse import pdf as pdf_module
from crawl.parse.pdf import parse_pdf
from crawl.parse.pool import ParserPool
from crawl.parse.registry import body_limit, detect_media_type, link_header_canonical, parse_document
from tests.fixed_web import FixedWeb
from tests.test_fetcher import cfg as fetch_cfg, rows_for

URL = "http://127.0.0.1:8000/docs/report.pdf"
OPTIONS = ParseOptions(100)


WORDS = "the annual report of the river authority on water quality and flood defences in the valley"
REPORT = make_pdf([([WORDS, "second line of the first page"], ["/about.html", "http://127.0.0.1:8000/data.pdf",
                                                                 "mailto:someone@example.org"]),
                   (["Page two speaks of budgets"], ["https://other.test/x#frag"])],
                  title="River Authority Report 2026")


def test_text_title_and_links_of_a_pdf():
    result = parse_pdf(REPORT, URL, "application/pdf", OPTIONS)
    assert result.error is None
    assert result.title == "River Authority Report 2026"
    assert result.outlinks == ["http://127.0.0.1:8000/about.html", "http://127.0.0.1:8000/data.pdf",
                               "https://other.test/x"]
    assert sum(result.rejected.values()) == 1  # the mailto: link, counted by reason as a page's
    assert result.text_hash is not None and result.simhash is not None and result.signature
    assert parse_document(REPORT, URL, "application/pdf", OPTIONS) == result


def test_title_falls_back_to_the_first_line():
    result = parse_pdf(make_pdf([(["  Minutes of the  meeting ", "more"], [])]), URL, "application/pdf", OPTIONS)
    assert result.error is None and result.title == "Minutes of the meeting"


def test_a_pdf_and_its_html_twin_have_the_same_text_fingerprint():
    pdf = parse_pdf(make_pdf([([WORDS], [])]), URL, "application/pdf", OPTIONS)
    html = parse_page(f"<html><body><p>{WORDS}</p></body></html>".encode(), "http://127.0.0.1:8000/r.html",
                      "text/html", OPTIONS)
    assert pdf.text_hash == html.text_hash == fingerprint(WORDS).text_hash
    assert pdf.simhash == html.simhash


def test_pages_past_the_bound_are_not_read():
    doc = make_pdf([([f"page {i}"], [f"/p{i}.html"]) for i in range(5)])
    result = parse_pdf(doc, URL, "application/pdf", ParseOptions(100, pdf_max_pages=2))
    assert result.error is None and result.outlinks == ["http://127.0.0.1:8000/p0.html", "http://127.0.0.1:8000/p1.html"]
    assert len(parse_pdf(doc, URL, "application/pdf", OPTIONS).outlinks) == 5
    capped = parse_pdf(doc, URL, "application/pdf", ParseOptions(3))
    assert len(capped.outlinks) == 3 and capped.rejected == {"over_cap": 2}


def test_x_robots_tag_applies_to_a_pdf():
    result = parse_pdf(REPORT, URL, "application/pdf", OPTIONS, x_robots_tag="noindex, nofollow")
    assert result.noindex is True and result.outlinks == [] and result.rejected == {"nofollow": 4}
    assert result.text_hash is not None


def test_a_pdf_without_a_cross_reference_table_is_read():
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               stream(b"BT /F1 12 Tf 10 100 Td (no xref here) Tj ET", compress=False),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    result = parse_pdf(assemble(objects, xref=False), URL, "application/pdf", OPTIONS)
    assert result.error is None and result.title == "no xref here"


HOSTILE = {
    "bomb": bomb(8),              # one stream inflating to 8 MiB, over the 1 MiB limit below
    "deep": deep(100_000),        # arrays nested 100,000 deep
    "cycle": cycle(),             # the page tree's kid points back at its parent
    "pages": many_pages(200_000),  # 200,000 page entries, over pypdf's 100,000
    "truncated": REPORT[: len(REPORT) // 3],
    "garbage": b"%PDF-1.4\n" + bytes(range(256)) * 64,
    "empty": b"%PDF-",
}
BOUNDED = ParseOptions(100, pdf_max_stream_bytes=MIB)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_pdf_is_a_parse_error(name):
    result = parse_pdf(HOSTILE[name], URL, "application/pdf", BOUNDED)
    assert result.error is not None and result.error.startswith("parse_error: pdf: ")
    assert result.text_hash is None and result.simhash is None
    assert parse_document(HOSTILE[name], URL, "application/octet-stream", BOUNDED) == result


def test_the_test_webs_pdf_host_is_what_its_link_graph_says():
    """crawl/devweb/pdfs.py: what the parser makes of each document of the ``pdfs`` host, with the
    default options, is what its oracle (LINKS, PdfSite) says: the links, the twin's text, which
    documents are parse errors."""
    from crawl.devweb import pdfs
    options = ParseOptions.from_config(build_config())
    site = pdfs.PdfSite("https://pdfs.example.test")
    got = {path: parse_document(body, site.url(path), ctype, options) for path, (body, ctype) in pdfs.pdf_site().items()}
    assert set(got) == set(pdfs.LINKS)
    for path, result in got.items():
        if path == "/picture":
            assert result.error == "parse_error: no parser for image/png"
        elif path in pdfs.HOSTILE_PDFS:
            assert result.error.startswith("parse_error: pdf: ") and result.text_hash is None, (path, result.error)
        else:
            assert result.error is None and result.text_hash is not None, path
            assert result.outlinks == site.outlinks(site.url(path)), path
    assert got["/report.pdf"].text_hash == got["/twin.html"].text_hash == fingerprint(pdfs.TWIN_TEXT).text_hash
    others = [r.text_hash for p, r in got.items() if p not in ("/report.pdf", "/twin.html") and r.text_hash]
    assert len(set(others)) == len(others) and got["/report.pdf"].text_hash not in others
    simhashes = [r.simhash for p, r in got.items() if p != "/twin.html" and r.simhash is not None]
    assert min(bin((a ^ b) & (2**64 - 1)).count("1") for i, a in enumerate(simhashes) for b in simhashes[i + 1:]) > 3
    assert "LimitReachedError" in got["/hostile/bomb.pdf"].error  # the stream bound, not a crash


def test_the_stream_limit_is_what_stops_the_bomb():
    result = parse_pdf(bomb(2), URL, "application/pdf", ParseOptions(100, pdf_max_stream_bytes=4 * MIB))
    assert result.error is None and result.text_hash is not None
    assert "LimitReachedError" in parse_pdf(bomb(2), URL, "application/pdf", BOUNDED).error


def test_the_documents_streams_together_are_bounded():
    """parse.pdf_max_document_mb: three object streams of 2 MiB each, every one under a 4 MiB
    stream bound, are 6 MiB together: over a 5 MiB document bound, within an 8 MiB one."""
    doc = many_streams(3, 2)
    small = ParseOptions(100, pdf_max_stream_bytes=4 * MIB, pdf_max_document_bytes=5 * MIB)
    result = parse_pdf(doc, URL, "application/pdf", small)
    assert result.error is not None and result.text_hash is None
    assert "LimitReachedError" in result.error and "pdf_max_document_mb" in result.error, result.error
    assert pdf_module._BUDGET.get() is None  # the budget ends with the document
    roomy = ParseOptions(100, pdf_max_stream_bytes=4 * MIB, pdf_max_document_bytes=8 * MIB)
    assert parse_pdf(doc, URL, "application/pdf", roomy).error is None
    # each document has its own budget: the same document twice in a row is read twice
    assert parse_pdf(doc, URL, "application/pdf", roomy).error is None
    # the stream bound is not what stops it: one stream of 2 MiB alone passes a 5 MiB document bound
    assert parse_pdf(many_streams(1, 2), URL, "application/pdf", small).error is None


def test_the_document_bound_comes_from_the_config():
    assert ParseOptions.from_config(build_config()).pdf_max_document_bytes == 128 * MIB
    options = ParseOptions.from_config(build_config(overrides={"parse.pdf_max_document_mb": 5}))
    assert options.pdf_max_document_bytes == 5 * MIB
    assert parse_pdf(many_streams(3, 2), URL, "application/pdf", options).error is not None


def test_hostile_pdfs_in_the_guarded_child_cost_a_parse_error_each():
    async def run():
        with ParserPool(workers=1, memory_limit_bytes=1024 * MIB, time_limit_s=60.0) as pool:
            results = [await pool.parse(HOSTILE[name], URL, "application/pdf", BOUNDED) for name in sorted(HOSTILE)]
            return results, await pool.parse(REPORT, URL, "application/pdf", BOUNDED)

    results, after = asyncio.run(run())
    assert all(r.error and r.error.startswith("parse_error: pdf: ") for r in results), results
    assert after == parse_pdf(REPORT, URL, "application/pdf", BOUNDED) and after.error is None


@pytest.mark.parametrize("ctype, head, expected", [
    ("application/pdf", b"", "application/pdf"),
    ("Application/PDF; name=x.pdf", b"<html>", "application/pdf"),
    ("application/octet-stream", b"%PDF-1.7\n", "application/pdf"),
    (None, b"%PDF-1.4", "application/pdf"),
    ("unknown/unknown", b"\r\n\x00junk%PDF-1.5", "application/pdf"),
    ("application/octet-stream", b"<html><body>", "application/octet-stream"),
    (None, b"  <!DOCTYPE html><html>", "text/html"),
    ("", b"<body>", "text/html"),
    (None, b"\x89PNG\r\n\x1a\n", ""),
    ("image/png", b"%PDF-1.4", "image/png"),
    ("text/html; charset=utf-8", b"%PDF-1.4", "text/html"),
    ("text/plain", b"<html>", "text/plain"),
])
def test_detect_media_type(ctype, head, expected):
    assert detect_media_type(ctype, head) == expected


def test_body_limits_by_declared_type():
    cfg = build_config(overrides={"fetch.max_body_bytes": 1000, "fetch.max_pdf_bytes": 5000,
                                  "fetch.max_other_body_bytes": 10})
    options = ParseOptions.from_config(cfg)
    assert body_limit(cfg, "text/html; charset=utf-8", options) == 1000
    assert body_limit(cfg, "application/pdf", options) == 5000
    assert body_limit(cfg, "application/octet-stream", options) == 5000
    assert body_limit(cfg, None, options) == 5000
    assert body_limit(cfg, "image/png", options) == 10
    no_pdf = build_config(overrides={"fetch.max_body_bytes": 1000, "fetch.max_pdf_bytes": 5000,
                                     "fetch.max_other_body_bytes": 10, "fetch.content_types": ["text/html"]})
    options = ParseOptions.from_config(no_pdf)
    assert body_limit(no_pdf, "application/pdf", options) == 10
    assert body_limit(no_pdf, None, options) == 1000
    assert detect_media_type("application/pdf", b"") == "application/pdf"
    assert parse_document(REPORT, URL, "application/pdf", options).error == "parse_error: no parser for application/pdf"


@pytest.fixture(scope="module")
def pdf_web():
    web = FixedWeb(hosts=1).start()
    try:
        yield web
    finally:
        web.stop()


@pytest.mark.parametrize("isolate", [False, True])
def test_the_fetcher_parses_pdfs_by_type(pdf_web, isolate):
    web = pdf_web
    base = web.base(0)
    linked = make_pdf([(["A document only another PDF links to"], [])])
    urls = {
        "report": web.put(0, "/report.pdf", make_pdf([([WORDS], ["/only-from-pdf.html", "/linked.pdf"])],
                                                     title="Report"), "application/pdf"),
        "linked": web.put(0, "/linked.pdf", linked, "application/pdf"),
        "octet": web.put(0, "/download", make_pdf([(["served as octets"], ["/via-octets.html"])]),
                         "application/octet-stream"),
        "twin": web.put(0, "/twin.html", f"<html><body><p>{WORDS}</p></body></html>", "text/html"),
        "image": web.put(0, "/big.png", b"\x89PNG\r\n\x1a\n" + bytes(300_000), "image/png"),
        "bomb": web.put(0, "/bomb.pdf", HOSTILE["bomb"], "application/pdf"),
        "cycle": web.put(0, "/cycle.pdf", HOSTILE["cycle"], "application/pdf"),
    }
    cfg = fetch_cfg(parse__pdf_max_stream_mb=1, fetch__max_other_body_bytes=1000)
    rows = rows_for(urls.values())
    if isolate:
        with ParserPool(workers=1, memory_limit_bytes=1024 * MIB, time_limit_s=60.0) as pool:
            out = fetch_partition(rows, cfg, parser=pool)
    else:
        out = fetch_partition(rows, cfg)
    got = {r["url"]: r for r in out if r["kind"] == "url"}
    by = {name: got[url] for name, url in urls.items()}
    assert all(r["fetch_status"] == FS.OK for r in by.values())
    report = by["report"]
    assert report["parse_error"] is None and report["text_hash"] is not None and report["simhash"] is not None
    assert set(report["outlinks"]) == {f"{base}/only-from-pdf.html", f"{base}/linked.pdf"}
    assert report["text_hash"] == by["twin"]["text_hash"]  # the HTML twin: a duplicate pair
    assert by["linked"]["parse_error"] is None and by["linked"]["text_hash"] is not None
    octet = by["octet"]
    assert octet["content_type"] == "application/pdf"  # sniffed, and recorded as such
    assert octet["outlinks"] == [f"{base}/via-octets.html"] and octet["parse_error"] is None
    image = by["image"]
    assert image["truncated"] is True and image["content_length"] == 1000
    assert image.get("parse_error") is None and image.get("text_hash") is None and image["content_type"] == "image/png"
    for name in ("bomb", "cycle"):
        assert by[name]["parse_error"].startswith("parse_error: pdf: "), by[name]
        assert by[name]["text_hash"] is None


def _encrypted(user_password: str) -> bytes:
    import io
    from pypdf import PdfWriter
    writer = PdfWriter()
    writer.add_blank_page(100, 100)
    writer.add_metadata({"/Title": "Locked"})
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_encrypted_pdfs_are_read_when_no_password_is_needed():
    assert parse_pdf(_encrypted(""), URL, "application/pdf", OPTIONS).title == "Locked"
    locked = parse_pdf(_encrypted("secret"), URL, "application/pdf", OPTIONS)
    assert locked.error == "parse_error: pdf: ValueError: encrypted (a password is needed to read it)"


@pytest.mark.parametrize("header, expected", [
    ('<https://127.0.0.1:8000/docs/report-final.pdf>; rel="canonical"', "https://127.0.0.1:8000/docs/report-final.pdf"),
    ('</a.html>; rel=preload; as=style, <final.pdf?utm_source=x>; REL="Canonical"', "http://127.0.0.1:8000/docs/final.pdf"),
    ('<report.pdf>; rel="canonical"', None),            # the document itself
    ('<https://127.0.0.1:8000/x>; rel="alternate"', None),
    ('<javascript:alert(1)>; rel=canonical', None),
    ("rel=canonical", None), ("", None), (None, None),
])
def test_link_header_canonical(header, expected):
    from crawl.net.urls import UrlRules
    rules = UrlRules.from_config(build_config())
    assert link_header_canonical(header, URL, rules) == expected


def test_the_fetcher_takes_a_pdfs_canonical_from_its_link_header():
    from aiohttp import web as aioweb

    async def handler(request):
        return aioweb.Response(body=REPORT, headers={"Content-Type": "application/pdf",
                                                     "Link": '</canonical/report.pdf>; rel="canonical"'})

    async def robots(request):
        return aioweb.Response(text="User-agent: *\nAllow: /\n", content_type="text/plain")

    async def run():
        app = aioweb.Application()
        app.router.add_get("/robots.txt", robots)
        app.router.add_get("/{tail:.*}", handler)
        runner = aioweb.AppRunner(app, access_log=None)
        await runner.setup()
        site = aioweb.TCPSite(runner, "127.0.0.78", 0)
        await site.start()
        try:
            port = site._server.sockets[0].getsockname()[1]
            url = f"http://127.0.0.78:{port}/report.pdf"
            rows = rows_for([url])
            out = await asyncio.get_running_loop().run_in_executor(None, fetch_partition, rows, fetch_cfg())
            return port, {r["url"]: r for r in out if r["kind"] == "url"}[url]
        finally:
            await runner.cleanup()

    port, row = asyncio.run(run())
    canonical = f"http://127.0.0.78:{port}/canonical/report.pdf"
    assert row["parse_error"] is None and row["canonical"] == canonical and canonical in row["outlinks"]


_PLAIN = make_pdf([([WORDS, "second line"], ["/a.html", "http://127.0.0.1:8000/b.pdf"]), (["two"], ["/c"])],
                  title="Plain")


@pytest.mark.parametrize("seed", range(3))
def test_damaged_pdfs_never_raise(seed):
    # A document damaged the ways transfers and bad writers damage them (cut, bytes flipped,
    # bytes dropped or repeated): always a ParseResult, and either read or a pdf parse_error.
    import random
    rnd = random.Random(seed)
    for _ in range(25):
        data = bytearray(_PLAIN)
        for _ in range(rnd.randint(1, 4)):
            at = rnd.randrange(len(data))
            kind = rnd.choice(("cut", "flip", "drop", "repeat"))
            if kind == "cut":
                del data[at:]
                data += b"\n"
            elif kind == "flip":
                data[at] ^= 1 << rnd.randrange(8)
            elif kind == "drop":
                del data[at:at + rnd.randint(1, 50)]
            else:
                data[at:at] = data[at:at + rnd.randint(1, 50)] * rnd.randint(2, 50)
        result = parse_document(bytes(data), URL, "application/pdf", BOUNDED)
        assert result.error is None or result.error.startswith("parse_error: pdf: "), result.error
        assert all(u.startswith("http") for u in result.outlinks)


def test_stats_show_urls_by_content_type_with_their_parse_errors():
    from crawl.report import format_stats
    stats = {"crawl_root": "/c", "version": 0, "total_urls": 10, "hosts": 1, "due_now": 0, "leased": 0,
             "max_depth": 1, "by_status": [("fetched", 10)], "by_http_status": [(200, 10)], "top_hosts": [],
             "by_content_type": [("text/html", 6, 0), ("application/pdf", 3, 2), ("image/png", 1, 0)]}
    text = format_stats(stats)
    assert "by content type (url_state.content_type), with parse errors\n" in text
    assert "  application/pdf (2 parse errors)           3   30.0%\n" in text
    assert "  text/html                                  6   60.0%\n" in text
    assert "by content type" not in format_stats({**stats, "by_content_type": []})
