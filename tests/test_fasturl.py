"""crawl/net/_fasturl.c is an exact copy of three Python hot paths; these tests hold it to that.

  plain(raw, based, rules)           == crawl.net.urls._plain_py
  page_links(...)                    == crawl.parse.links._link_loop (with the same resolver)
  Filter(...).reject_reason(url, h)  == crawl.net.filters.LinkFilter._reject_reason_py

on generated input built to cross every boundary of the fast path (the strategies of
tests/test_urls_property.py, plus arbitrary ASCII), and on the corpus of bench/extract.py's
shape. The rest of the suite then runs with the C code in place (crawl.net.urls uses it whenever it
is built), so every normalisation and filter test also tests it.
"""
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.net import filters, urls
from crawl.parse import links
from crawl.net.filters import LinkFilter
from crawl.net.urls import UrlRules
from tests.test_urls_property import (BASE, FIXED, RULES, plain_bases, plain_urls, rules_or_none,
                                      url_shaped)

fast = urls._fast
pytestmark = pytest.mark.skipif(fast is None, reason="crawl.net._fasturl not built or DELTACRAWL_PURE_PYTHON set")

# ASCII with the characters that matter to the fast path over-represented
_URLISH = "abcXYZ019-._~!$&'()*+,;=:@/?#%[]\\ \t\x7f\"<>^`{|}"
ascii_text = st.lists(st.sampled_from(list(_URLISH) + ["%2E", "%2e", "%41", "%C3", "%3D", "//", "../", "./",
                                                      "http://", "https://", "HTTP:", "utm_x=1", "jsessionid=1",
                                                      "&", "?"]), max_size=30).map("".join)


def same_plain(raw: str, base: str | None, rules: UrlRules | None) -> None:
    raw = raw.strip()
    if not raw:
        return
    based = urls._plain_base(base) if base is not None else None
    assert fast.plain(raw, based, rules) == urls._plain_py(raw, based, rules), (raw, base, rules)


@settings(max_examples=1500, **FIXED)
@given(plain_urls(), plain_bases, rules_or_none)
def test_plain_equals_python_on_plain_shapes(ref, base, rules):
    same_plain(ref, base, rules)


@settings(max_examples=500, **FIXED)
@given(url_shaped(), st.sampled_from([None, BASE, "http://a.com", "https://a.com/x/./y/?q=1"]), rules_or_none)
def test_plain_equals_python_on_url_shapes(ref, base, rules):
    same_plain(ref, base, rules)


@settings(max_examples=800, **FIXED)
@given(ascii_text, st.sampled_from([None, BASE, "http://a.com", "https://a.com/x/./y/?q=1", "http://a.com:81/b;sid=1/"]),
       rules_or_none)
def test_plain_equals_python_on_ascii_text(ref, base, rules):
    same_plain(ref, base, rules)


@pytest.mark.parametrize("raw", [
    "http://a.com/" + "a&" * 5000,                    # over MAX_URL_LENGTH: handed to Python
    "http://a.com/?" + "&".join(["b=1", "a=2"] * 1300),  # thousands of query pieces to sort
    "http://" + "a" * 63 + "." + "b" * 64 + "/",     # a label too long
    "http://" + "a" * 63 + ".b/", "http://a.com./x", "http://.a.com/", "http://a.-b.com/", "http://-a.com/",
    "http://a.com:00080/", "http://a.com:65536/", "http://a.com:0/", "https://a.com:443/", "https://a.com:080/",
    "http://a.com/a/b/../../../../c/./d/..", "http://a.com/%7E%2E%41%2F%3d", "http://a.com/ü", "http://a.com/#ü x",
    "mailto:ü", "x:ü", "http:g", "HTTPS://A.COM", "hTtP://a.com/a?", "http://a.com?#", "http://a.com/;jsessionid=1",
])
def test_plain_equals_python_on_edges(raw):
    for rules in (None, RULES):
        for base in (None, BASE):
            based = urls._plain_base(base) if base else None
            assert fast.plain(raw, based, rules) == urls._plain_py(raw, based, rules), raw


def test_plain_refuses_bad_arguments_like_python():
    with pytest.raises(AttributeError):
        fast.plain("http://a.com/?x=1", None, "not rules")
    with pytest.raises(TypeError):
        fast.plain("a", ("x",), None)


hrefs = st.lists(st.one_of(ascii_text, plain_urls(), url_shaped(), st.sampled_from(["", " ", " /a ", "\t/b\n",
                                                                                    "/c\n/d", links._NOFOLLOW])),
                 max_size=30)


def run_loop(loop, page_hrefs, base, rules, room):
    resolver = links._Resolver(base, True, rules, {})
    seen = {"https://www.example.com/dir/page.html?q=1": None}
    if loop == "c":
        left = fast.page_links(page_hrefs, resolver.based, rules, seen, room, resolver.rejected, resolver.cached,
                               links._NOFOLLOW)
    else:
        links._link_loop(page_hrefs, resolver, seen, room, resolver.rejected)
        left = None
    return list(seen), resolver.rejected, left


@settings(max_examples=400, **FIXED)
@given(hrefs, st.sampled_from([BASE, "https://a.com/", "http://a.com:8080/x/y"]), rules_or_none,
       st.integers(0, 12))
def test_page_links_equals_the_python_loop(page_hrefs, base, rules, room):
    links.clear_caches()
    c_seen, c_rejected, left = run_loop("c", page_hrefs, base, rules, room)
    links.clear_caches()
    py_seen, py_rejected, _ = run_loop("py", page_hrefs, base, rules, room)
    assert c_seen == py_seen
    assert c_rejected == py_rejected
    assert left == room - (len(c_seen) - 1)


def test_extract_links_same_with_and_without_c(monkeypatch):
    """Whole pages of the benchmark's shape give the same PageLinks either way."""
    import os
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    sys.path.insert(0, bench)
    try:
        from extract import generate_corpus
    finally:
        sys.path.remove(bench)
    corpus = generate_corpus(40, 7)
    with_c = [links.extract_links(p["html"], p["url"], 100, None, RULES) for p in corpus]
    monkeypatch.setattr(links, "_fast", None)
    links.clear_caches()
    without = [links.extract_links(p["html"], p["url"], 100, None, RULES) for p in corpus]
    assert with_c == without
    assert sum(len(p.outlinks) for p in with_c) > 1000


FILTERS = [
    dict(),
    dict(scope="host", max_path_depth=2, max_segment_repeats=1),
    dict(scope="domain", deny_extensions=[], exclude_patterns=["/private/", "(?i)LOGIN"]),
    dict(include_patterns=[r"\.html$", "(a)"], max_url_length=40, schemes=["https"]),
    dict(max_segment_repeats=3, max_path_depth=30, deny_extensions=["gz"]),
]


def make_filter(**overrides):
    values = dict(schemes=["http", "https"], max_url_length=200, max_path_depth=5, max_segment_repeats=2,
                  deny_extensions=["png", "PDF", ".zip", "tar.gz"], include_patterns=[], exclude_patterns=[],
                  scope="any")
    values.update(overrides)
    return LinkFilter(**values)


filter_urls = st.one_of(
    plain_urls(absolute_only=True).map(lambda u: urls.check_url(u)[0] or u),
    st.builds(lambda scheme, host, segs, ext, q: f"{scheme}://{host}/{'/'.join(segs)}{ext}{q}",
              st.sampled_from(["http", "https", "ftp", "HTTP", ""]),
              st.sampled_from(["a.com", "www.a.com", "b.a.com", "a.co.uk", "x.a.co.uk", "a.com:8080", "1.2.3.4"]),
              st.lists(st.sampled_from(["a", "b", "c", "", "a.b", "x.PNG", "login", "private"]), max_size=9),
              st.sampled_from(["", ".html", ".Png", ".pdf", ".tar.gz", "."]),
              st.sampled_from(["", "?a=1", "?x.png", "?/a/a/a"])),
    # a block of 1-3 segments repeated back to back: the repeating_path check's every period
    st.builds(lambda head, block, times, tail: "https://a.com/" + "/".join(head + block * times + tail),
              st.lists(st.sampled_from(["a", "x", "y"]), max_size=2),
              st.lists(st.sampled_from(["a", "b", "c", "a.b"]), min_size=1, max_size=3), st.integers(1, 4),
              st.lists(st.sampled_from(["a", "b", "z"]), max_size=2)),
    ascii_text, st.text(max_size=20))


@settings(max_examples=600, **FIXED)
@given(filter_urls, st.sampled_from(["a.com", "www.a.com", "a.com:8080", "b.org", "x.a.co.uk"]))
def test_filter_equals_python(url, source_host):
    for overrides in FILTERS:
        lf = make_filter(**overrides)
        assert lf.reject_reason(url, source_host) == lf._reject_reason_py(url, source_host), (url, overrides)


def test_filter_is_the_c_one_and_pickles():
    lf = make_filter(**FILTERS[2])
    assert lf.reject_reason.__self__.__class__ is fast.Filter
    copy = pickle.loads(pickle.dumps(lf))
    assert copy.reject_reason("https://a.com/private/x", "a.com") == filters.EXCLUDED
    assert copy.reject_reason("https://b.com/x", "a.com") == filters.SCOPE
    assert copy.reject_reason("https://www.a.com/x", "a.com") is None
