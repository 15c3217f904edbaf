"""Fuzzing of everything that reads what a web server sends, with arbitrary and half-structured
bytes (hypothesis): the URL normaliser, robots.txt handling, the HTML extractor, the sitemap reader
and the WARC writer. None may raise; each returns a value or a recorded reason, and what it
returns keeps its promises (canonical URLs, a finite crawl delay, readable WARC records).

Brief in CI (derandomized, the same examples every run); longer on demand:

    DELTACRAWL_FUZZ_EXAMPLES=20000 DELTACRAWL_FUZZ_RANDOM=1 .venv/bin/python -m pytest -q tests/test_fuzz.py

(DELTACRAWL_FUZZ_RANDOM=1 draws new examples each run instead of CI's fixed ones.) The URL
normaliser's algebraic properties (fixed point, parameters stripped) are in test_urls_property.py.
"""
from __future__ import annotations

import gzip
import math
import os
import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from crawl.config import build_config
from crawl.parse.page import ParseOptions, ParseResult, parse_page
from crawl.fetch.robots import RobotsPolicy, effective_delay, policy_from_fetch
from crawl.parse.sitemaps import parse_sitemap
from crawl.net.urls import InvalidUrl, UrlRules, check_url, host_of, normalize_url
from crawl.fetch.warc import WarcWriter
from crawl.fetch.warc_read import read_record

EXAMPLES = int(os.environ.get("DELTACRAWL_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=not os.environ.get("DELTACRAWL_FUZZ_RANDOM"), database=None,
                deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RULES = UrlRules.from_config(build_config())
PAGE = "http://www.example.com/dir/page.html"


def _mix(*fragments: str) -> st.SearchStrategy[bytes]:
    """Bytes built from the format's own fragments, arbitrary text and arbitrary bytes, in any
    order: closer to a real (or hostile) file than random bytes alone, which rarely get past a
    parser's first check."""
    piece = st.one_of(st.sampled_from(fragments).map(str.encode),
                      st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
                      st.binary(max_size=40))
    return st.one_of(st.binary(max_size=2000), st.lists(piece, max_size=60).map(b"".join))


@st.composite
def _mutated(draw, document: st.SearchStrategy[str]) -> bytes:
    """A well-formed document, then maybe damaged: bytes spliced in, or cut short."""
    data = draw(document).encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=8)) + data[at + draw(st.integers(0, 4)):]
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return data


REFS = st.one_of(st.sampled_from(["/a", "b/c", "../d?x=1&utm_source=y", "http://www.example.com/e",
                                  "//cdn.example.net/f", "https://[::1]:8443/g", "javascript:void(0)",
                                  "mailto:a@b", "#top", "?q=%zz", " /sp ace ", "http://bad host/"]),
                 st.text(max_size=30))


def _assert_canonical(url: str) -> None:
    assert check_url(url, None, RULES) == (url, None), url


# --- URLs -------------------------------------------------------------------------------------

@FUZZ
@given(raw=st.binary(max_size=300), base=st.sampled_from([None, PAGE, "http://[::1]:8080/a/b", "", "x"]))
def test_url_normaliser_takes_any_bytes(raw, base):
    url = raw.decode("utf-8", "surrogateescape")
    canonical, reason = check_url(url, base, RULES)
    assert (canonical is None) != (reason is None)
    if canonical is not None:
        assert normalize_url(canonical, None, RULES) == canonical and host_of(canonical)
    else:
        try:
            normalize_url(url, base, RULES)
        except InvalidUrl as exc:
            assert exc.reason == reason
        else:
            raise AssertionError(f"check_url refused {url!r} ({reason}) but normalize_url accepted it")


# --- robots.txt -------------------------------------------------------------------------------

ROBOTS = ("User-agent: *\n", "User-agent: deltacrawl\n", "user-agent:deltacrawl/1.0\n", "Disallow: /\n",
          "Disallow: /a\n", "Allow: /a/b$\n", "Disallow: /*.php\n", "Disallow: \n", "Crawl-delay: ",
          "Crawl-delay: 5\n", "Crawl-delay: -1\n", "Crawl-delay: 1e400\n", "Crawl-delay: nan\n",
          "Crawl-delay: inf\n", "Crawl-delay: 0x10\n", "Sitemap: ", "Sitemap: http://www.example.com/s.xml\n",
          "Request-rate: 1/5\n", "# comment\n", "\r\n", "\n", "\ufeff", "%2F", "%", "*", "$", ":")
PATHS = st.one_of(st.sampled_from(["/", "/a", "/a/b", "/x.php", "/%7Ea", "/%", "/?q=1"]),
                  st.text(max_size=30).map(lambda t: "/" + t))


@FUZZ
@given(body=_mix(*ROBOTS), status=st.sampled_from([200, 200, 200, 204, 301, 404, 429, 500, 503, 599, -1, 0]),
       paths=st.lists(PATHS, max_size=5), configured=st.sampled_from([0.0, 0.2, 5.0]))
def test_robots_takes_any_file(body, status, paths, configured):
    policy = policy_from_fetch(status, body, "deltacrawl", 500_000)
    assert isinstance(policy, RobotsPolicy)
    delay = policy.crawl_delay_s
    event("rules" if policy._parser is not None else "allow all" if policy.allow_all else "disallow all")
    assert delay is None or (math.isfinite(delay) and delay >= 0), delay
    gap = effective_delay(configured, policy)
    assert math.isfinite(gap) and gap >= configured
    for path in paths:
        assert policy.allowed("http://www.example.com" + path) in (True, False)
    for sitemap in policy.sitemaps:
        assert isinstance(sitemap, str) and len(sitemap) <= 2048


# --- HTML -------------------------------------------------------------------------------------

HTML = ("<html>", "<head>", "<body>", "</a>", "<a href=\"", "<a href='", "<a href=", "\">", "'>", ">",
        "<base href=\"http://other.example/x/\">", "<base href=\"javascript:x\">", "<meta charset=\"utf-16\">",
        "<meta charset=shift_jis>", "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=koi8-r\">",
        "<meta name=\"robots\" content=\"nofollow\">", "<meta name=robots content=noindex>",
        "<link rel=\"canonical\" href=\"", "<title>", "</title>", "<script>", "</script>", "<!--", "-->",
        "<a rel=nofollow href=\"/n\">", "<area href=\"/area\">", "<iframe src=\"/f\">", "http://",
        "https://www.example.com/", "//cdn.example.net/", "../", "./", "?", "#", "&amp;", "&#0;", "&#x110000;",
        "<svg><a xlink:href=\"/svg\">", "<template><a href=\"/t\"></template>", "\x00", "\ufeff", "é", "\u2603")
CONTENT_TYPES = st.one_of(st.none(), st.sampled_from(["text/html", "text/html; charset=utf-8",
                                                      "text/html; charset=\"x-unknown\"", "text/html; charset=utf-7",
                                                      "text/html; charset=rot13", "application/xhtml+xml",
                                                      "text/html;charset=", "text/plain"]), st.text(max_size=40))


def _page(hrefs: list[str], title: str) -> str:
    anchors = "".join(f'<a href="{h}">{h}</a> ' for h in hrefs)
    return f"<html><head><title>{title}</title></head><body><p>words {title}</p>{anchors}</body></html>"


@FUZZ
@given(body=st.one_of(_mix(*HTML), _mutated(st.builds(_page, st.lists(REFS, max_size=8), st.text(max_size=20)))), content_type=CONTENT_TYPES, x_robots=st.one_of(st.none(), st.text(max_size=30)),
       max_outlinks=st.sampled_from([0, 1, 5, 1000]))
def test_html_extractor_takes_any_page(body, content_type, x_robots, max_outlinks):
    result = parse_page(body, PAGE, content_type, ParseOptions(max_outlinks, RULES, "deltacrawl"), x_robots)
    assert isinstance(result, ParseResult)
    event("links" if result.outlinks else "error" if result.error else "no links")
    assert result.error is None or result.error.startswith("parse_error: ")
    assert isinstance(result.charset, str)
    assert len(result.outlinks) <= max_outlinks and len(set(result.outlinks)) == len(result.outlinks)
    for link in result.outlinks:
        _assert_canonical(link)
    if result.canonical is not None:
        _assert_canonical(result.canonical)
    assert result.title is None or (isinstance(result.title, str) and result.title == result.title.strip(" "))
    assert all(isinstance(k, str) and v > 0 for k, v in result.rejected.items())
    if result.error is None and result.simhash is not None:
        assert 0 <= result.simhash < 2**64 or -2**63 <= result.simhash < 2**63


# --- sitemaps ---------------------------------------------------------------------------------

SITEMAP_URL = "http://www.example.com/sitemap.xml"
SITEMAP = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<?xml version=\"1.0\" encoding=\"latin-1\"?>",
           "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">", "</urlset>", "<sitemapindex>",
           "</sitemapindex>", "<url>", "</url>", "<sitemap>", "</sitemap>", "<loc>", "</loc>", "<lastmod>",
           "</lastmod>", "2024-01-02", "2024-01-02T03:04:05+01:00", "9999-99-99", "http://www.example.com/",
           "http://www.example.com/a?b=1&amp;c=2", "http://other.example/", "https://www.example.com/",
           "<!DOCTYPE x [<!ENTITY e \"ee\">]>", "&e;", "&lt;", "<![CDATA[", "]]>", "<!--", "-->", "\n", "\r\n",
           "\x00", "\ufeff", "<image:image>", "</image:image>")


def _urlset(entries: list[tuple[str, str]], index: bool) -> str:
    outer, inner = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    items = "".join(f"<{inner}><loc>{loc}</loc><lastmod>{mod}</lastmod></{inner}>" for loc, mod in entries)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<{outer} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{items}</{outer}>")


SITEMAP_LOCS = st.one_of(REFS.map(lambda r: "http://www.example.com/" + r.lstrip("/")), REFS)
LASTMODS = st.one_of(st.sampled_from(["2024-01-02", "2024-01-02T03:04:05+01:00", "2024-13-45", ""]),
                     st.text(max_size=25))
SITEMAPS = st.builds(_urlset, st.lists(st.tuples(SITEMAP_LOCS, LASTMODS), max_size=6), st.booleans())
TEXT_SITEMAPS = st.lists(SITEMAP_LOCS, max_size=6).map("\n".join)


@FUZZ
@given(body=st.one_of(_mix(*SITEMAP), _mutated(SITEMAPS), _mutated(TEXT_SITEMAPS)), gzipped=st.booleans(), max_urls=st.sampled_from([0, 3, 50_000, 50_000]),
       max_bytes=st.sampled_from([10, 1000, 10_000_000, 10_000_000]))
def test_sitemap_reader_takes_any_file(body, gzipped, max_urls, max_bytes):
    if gzipped:
        body = gzip.compress(body)[: len(body) + 30]  # sometimes cut short, as a dropped connection does
    sitemap = parse_sitemap(body, SITEMAP_URL, max_urls, max_bytes, RULES)
    event("entries" if sitemap.urls or sitemap.sitemaps else "error" if sitemap.error else "empty")
    assert sitemap.error is None or isinstance(sitemap.error, str)
    assert len(sitemap.urls) + len(sitemap.sitemaps) <= max_urls
    urls = [entry.url for entry in sitemap.urls]
    assert len(set(urls)) == len(urls) and len(set(sitemap.sitemaps)) == len(sitemap.sitemaps)
    for url in urls + sitemap.sitemaps:
        _assert_canonical(url)
        assert url.startswith("http://www.example.com/")  # the sitemap's own scheme, host and port
    for entry in sitemap.urls:
        assert entry.lastmod is None or math.isfinite(entry.lastmod)
    assert all(isinstance(k, str) and v > 0 for k, v in sitemap.rejected.items())


# --- WARC -------------------------------------------------------------------------------------

HEADER = st.tuples(st.one_of(st.text(max_size=20), st.binary(max_size=20)),
                   st.one_of(st.text(max_size=60), st.binary(max_size=60), st.none(), st.integers()))
EXCHANGE = st.fixed_dictionaries({
    "url": st.one_of(st.sampled_from([PAGE, "http://[::1]:8080/x", "https://a.example/?q=é"]),
                     st.text(max_size=60)),
    "request": st.lists(HEADER, max_size=4), "response": st.lists(HEADER, max_size=6),
    "status": st.one_of(st.integers(-5, 1000), st.text(max_size=5)),
    "reason": st.one_of(st.text(max_size=20), st.none()),
    "body": st.binary(max_size=3000),
    "fetched_at": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
    "ip": st.one_of(st.none(), st.text(max_size=20)),
    "truncated": st.one_of(st.none(), st.sampled_from(["length", "time"]), st.text(max_size=10)),
})


@FUZZ
@given(exchanges=st.lists(EXCHANGE, min_size=1, max_size=4), max_file_bytes=st.sampled_from([1, 4096, 1 << 30]))
def test_warc_writer_takes_any_exchange(exchanges, max_file_bytes):
    with tempfile.TemporaryDirectory() as folder:
        with WarcWriter(folder, "FUZZ-part-00000", max_file_bytes, {"operator": "fuzz"}) as writer:
            locations = [writer.write_exchange(e["url"], e["request"], e["status"], e["reason"], e["response"],
                                               e["body"], e["fetched_at"], ip=e["ip"], truncated=e["truncated"])
                         for e in exchanges]
        files = sorted(os.listdir(folder))
        assert files and not any(name.endswith(".open") for name in files)
        records = 0
        for name in files:  # every file reads back whole with warcio, record after record
            with open(os.path.join(folder, name), "rb") as fh:
                for record in ArchiveIterator(fh):
                    record.content_stream().read()
                    records += 1
        assert records == len(files) + 2 * len(exchanges)  # a warcinfo per file, request + response each
        for exchange, location in zip(exchanges, locations):
            record = read_record(os.path.join(folder, location.warc_file), location.offset)
            assert record["warc_type"] == "response"
            if location.payload_digest is not None:  # an http(s) target: the payload is the body as given
                assert record["payload"] == exchange["body"]
