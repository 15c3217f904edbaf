import pytest

from crawl.net import filters
from crawl.config import build_config
from crawl.net.filters import LinkFilter, registrable_domain
from crawl.net.urls import normalize_url


def make(**overrides):
    values = dict(schemes=["http", "https"], max_url_length=200, max_path_depth=5, max_segment_repeats=2,
                  deny_extensions=["png", "PDF", ".zip"], include_patterns=[], exclude_patterns=[], scope="any")
    values.update(overrides)
    return LinkFilter(**values)


def test_reasons_are_the_exported_constants_in_check_order():
    assert filters.REASONS == (filters.SCHEME, filters.TOO_LONG, filters.SCOPE, filters.PATH_DEPTH,
                               filters.EXTENSION, filters.REPEATING_PATH, filters.EXCLUDED, filters.NOT_INCLUDED)
    assert len(set(filters.REASONS)) == len(filters.REASONS)


def test_from_config_defaults_keep_ordinary_links():
    lf = LinkFilter.from_config(build_config())
    assert lf.reject_reason("https://example.com/", "example.com") is None
    assert lf.reject_reason("https://other.org/a/b/page.html?x=1", "example.com") is None
    assert lf.reject_reason("https://other.org/logo.png", "example.com") == filters.EXTENSION


def test_from_config_reads_overrides():
    cfg = build_config(overrides={"discovery.scope": "host", "discovery.exclude_patterns": ["/private/"]})
    lf = LinkFilter.from_config(cfg)
    assert lf.scope == "host"
    assert lf.reject_reason("https://b.com/", "a.com") == filters.SCOPE
    assert lf.reject_reason("https://a.com/private/x", "a.com") == filters.EXCLUDED


@pytest.mark.parametrize("url", ["ftp://example.com/", "mailto:someone@example.com", "javascript:void(0)",
                                 "data:text/html,hi", "example.com/no-scheme", "://example.com/"])
def test_scheme_not_allowed(url):
    assert make().reject_reason(url, "example.com") == filters.SCHEME


def test_scheme_allowlist_is_configurable():
    lf = make(schemes=["https"])
    assert lf.reject_reason("http://example.com/", "example.com") == filters.SCHEME
    assert lf.reject_reason("https://example.com/", "example.com") is None


def test_too_long_is_strictly_greater_than_the_limit():
    base = "https://example.com/"
    lf = make(max_url_length=len(base) + 10)
    assert lf.reject_reason(base + "a" * 10, "example.com") is None
    assert lf.reject_reason(base + "a" * 11, "example.com") == filters.TOO_LONG


def test_path_depth_counts_non_empty_segments():
    lf = make(max_path_depth=3)
    assert lf.reject_reason("https://e.com/a/b/c", "e.com") is None
    assert lf.reject_reason("https://e.com/a/b/c/", "e.com") is None  # trailing slash adds no segment
    assert lf.reject_reason("https://e.com/a/b/c/d", "e.com") == filters.PATH_DEPTH
    assert lf.reject_reason("https://e.com/a/b/c/d/", "e.com") == filters.PATH_DEPTH
    # slashes in the query are not path segments
    assert lf.reject_reason("https://e.com/a?next=/b/c/d/e/f", "e.com") is None
    # empty segments (not produced by the normaliser) do not count
    assert lf.reject_reason("https://e.com//a//b//c//", "e.com") is None


@pytest.mark.parametrize("path, rejected", [
    ("/a/a/", False),
    ("/a/a/a/", True),
    ("/a/a/a", True),
    ("/x/a/a/y/a/a/", False),          # two runs of two, never three in a row
    ("/a/b/a/b/", False),
    ("/a/b/a/b/a/b/", True),
    ("/a/b/a/b/a/", False),            # two and a half copies
    ("/x/a/b/c/a/b/c/", False),
    ("/x/a/b/c/a/b/c/a/b/c/", True),
    ("/x/a/b/c/a/b/c/a/b/c/y/z", True),
    ("/a/b/c/d/a/b/c/d/a/b/c/d/", False),  # period 4 is beyond MAX_REPEAT_PERIOD
    ("/2024/01/01/2024/01/", False),
    ("/a/b/c/", False),
    ("/", False),
])
def test_repeating_path(path, rejected):
    lf = make(max_path_depth=24)
    reason = lf.reject_reason("https://e.com" + path, "e.com")
    assert reason == (filters.REPEATING_PATH if rejected else None)


def test_repeating_path_limit_is_configurable():
    assert make(max_segment_repeats=1).reject_reason("https://e.com/a/a/", "e.com") == filters.REPEATING_PATH
    assert make(max_segment_repeats=3).reject_reason("https://e.com/a/a/a/", "e.com") is None
    assert make(max_segment_repeats=3).reject_reason("https://e.com/a/a/a/a/", "e.com") == filters.REPEATING_PATH


def test_repeating_path_ignores_the_query():
    assert make().reject_reason("https://e.com/p?x=/a/a/a/a/", "e.com") is None


@pytest.mark.parametrize("url, rejected", [
    ("https://e.com/logo.png", True),
    ("https://e.com/logo.PNG", True),
    ("https://e.com/doc.pdf", True),              # deny list entry "PDF"
    ("https://e.com/a.zip?download=1", True),     # query ignored; deny list entry ".zip"
    ("https://e.com/page.html?img=x.png", False),
    ("https://e.com/images.png/", False),         # last segment is empty: a directory
    ("https://e.com/archive.zip.html", False),
    ("https://e.com/png", False),
    ("https://e.com/file.", False),
    ("https://e.com/", False),
])
def test_extension(url, rejected):
    assert make().reject_reason(url, "e.com") == (filters.EXTENSION if rejected else None)


def test_exclude_and_include_patterns():
    lf = make(include_patterns=[r"^https://e\.com/docs/", r"/blog/\d+"], exclude_patterns=[r"\?print=", "/docs/old/"])
    assert lf.reject_reason("https://e.com/docs/a", "e.com") is None
    assert lf.reject_reason("https://x.org/blog/2024", "e.com") is None
    assert lf.reject_reason("https://e.com/shop/", "e.com") == filters.NOT_INCLUDED
    # excludes win over includes
    assert lf.reject_reason("https://e.com/docs/old/a", "e.com") == filters.EXCLUDED
    assert lf.reject_reason("https://e.com/docs/a?print=1", "e.com") == filters.EXCLUDED
    assert lf.reject_reason("https://e.com/shop/?print=1", "e.com") == filters.EXCLUDED


def test_patterns_with_groups_and_global_flags_keep_their_meaning():
    # These cannot go into the combined alternation: a numbered back-reference would shift,
    # and (?i) is only allowed at the start of a whole expression.
    lf = make(exclude_patterns=["/nothing-here/", r"/(\w+)/\1/", "(?i)/PRIVATE/"],
              include_patterns=["(?i)EXAMPLE", r"(?P<n>\d)x(?P=n)"])
    assert lf.reject_reason("https://example.com/ab/ab/", "example.com") == filters.EXCLUDED
    assert lf.reject_reason("https://example.com/ab/cd/", "example.com") is None
    assert lf.reject_reason("https://example.com/private/", "example.com") == filters.EXCLUDED
    assert lf.reject_reason("https://e.com/7x7", "e.com") is None
    assert lf.reject_reason("https://e.com/7x8", "e.com") == filters.NOT_INCLUDED


def test_scope_any_keeps_other_hosts():
    assert make(scope="any").reject_reason("https://other.org/", "example.com") is None


def test_scope_host_compares_host_and_port():
    lf = make(scope="host")
    assert lf.reject_reason("https://example.com/a", "example.com") is None
    assert lf.reject_reason("https://www.example.com/a", "example.com") == filters.SCOPE
    assert lf.reject_reason("http://example.com:8080/a", "example.com:8080") is None
    assert lf.reject_reason("http://example.com:8080/a", "example.com") == filters.SCOPE
    assert lf.reject_reason("http://example.com/a", "example.com:8080") == filters.SCOPE
    assert lf.reject_reason("http://example.com?q=1", "example.com") is None  # no path at all


@pytest.mark.parametrize("url, source, kept", [
    ("https://www.example.com/", "example.com", True),
    ("https://a.b.example.com/", "www.example.com", True),
    ("https://example.com:8443/", "www.example.com", True),     # ports ignored
    ("https://www.example.com/", "www.example.com:8080", True),
    ("https://example.org/", "example.com", False),
    ("https://evil-example.com/", "example.com", False),
    ("https://news.bbc.co.uk/", "www.bbc.co.uk", True),
    ("https://www.other.co.uk/", "www.bbc.co.uk", False),
    ("https://shop.example.com.au/", "example.com.au", True),
    ("https://a.example.de/", "b.example.de", True),
    ("http://10.0.0.2/", "10.0.0.1", False),                     # IP addresses compare whole
    ("http://10.0.0.1:81/", "10.0.0.1", True),
    ("http://localhost:8000/", "localhost:9000", True),          # single label, ports ignored
    ("http://intranet/", "localhost", False),
])
def test_scope_domain(url, source, kept):
    assert make(scope="domain").reject_reason(url, source) == (None if kept else filters.SCOPE)


@pytest.mark.parametrize("host, domain", [
    ("example.com", "example.com"),
    ("www.example.com", "example.com"),
    ("a.b.c.example.com", "example.com"),
    ("www.example.co.uk", "example.co.uk"),
    ("example.co.uk", "example.co.uk"),
    ("www.example.com.au", "example.com.au"),
    ("www.example.de", "example.de"),
    ("www.example.info", "example.info"),
    ("192.168.1.10", "192.168.1.10"),
    ("[::1]", "[::1]"),
    ("localhost", "localhost"),
    ("WWW.Example.COM", "example.com"),
    # where the old last-two-labels approximation was wrong (Public Suffix List)
    ("www.abc.de", "abc.de"),
    ("user.github.io", "user.github.io"),
    ("a.b.blogspot.com", "b.blogspot.com"),
    ("www.example.ac.jp", "example.ac.jp"),
    ("www.example.xn--fiqs8s", "example.xn--fiqs8s"),
    ("co.uk", "co.uk"),
    ("example.com.", "example.com"),
    ("foo.unknowntld", "foo.unknowntld"),
])
def test_registrable_domain(host, domain):
    assert registrable_domain(host) == domain


def test_checks_run_cheapest_first():
    lf = make(scope="host", max_url_length=60, exclude_patterns=["x"])
    # scheme beats length
    assert lf.reject_reason("ftp://e.com/" + "x" * 100, "e.com") == filters.SCHEME
    # length beats scope
    assert lf.reject_reason("https://o.com/" + "x" * 100, "e.com") == filters.TOO_LONG
    # scope beats everything path-related
    assert lf.reject_reason("https://o.com/x/x/x/x/x/x/x.png", "e.com") == filters.SCOPE
    assert lf.reject_reason("https://e.com/x/x/x/x/x/x/x.png", "e.com") == filters.PATH_DEPTH
    assert lf.reject_reason("https://e.com/x/x/x.png", "e.com") == filters.EXTENSION
    assert lf.reject_reason("https://e.com/x/x/x/", "e.com") == filters.REPEATING_PATH
    assert lf.reject_reason("https://e.com/x/", "e.com") == filters.EXCLUDED


def test_works_on_normaliser_output():
    lf = LinkFilter.from_config(build_config(overrides={"discovery.scope": "domain"}))
    url = normalize_url("../../Images/./LOGO.PNG#top", base="HTTPS://WWW.Example.COM:443/a/b/c/page")
    assert url == "https://www.example.com/a/Images/LOGO.PNG"
    assert lf.reject_reason(url, "example.com") == filters.EXTENSION
    url = normalize_url("/a/a/a/", base="http://Example.com:8080/")
    assert lf.reject_reason(url, "example.com:8080") == filters.REPEATING_PATH


@pytest.mark.parametrize("kwargs, message", [
    ({"scope": "site"}, "scope must be one of any, host, domain"),
    ({"include_patterns": ["ok", "("]}, "include_patterns: invalid regular expression '\\('"),
    ({"exclude_patterns": ["[a-"]}, "exclude_patterns: invalid regular expression '\\[a-'"),
    ({"exclude_patterns": "abc"}, "exclude_patterns must be a list of strings"),
    ({"include_patterns": [3]}, "include_patterns must be a list of strings"),
    ({"schemes": []}, "schemes must be a non-empty list"),
    ({"max_url_length": 0}, "max_url_length must be an integer >= 1"),
    ({"max_path_depth": -1}, "max_path_depth must be an integer >= 0"),
    ({"max_segment_repeats": 0}, "max_segment_repeats must be an integer >= 1"),
    ({"max_segment_repeats": True}, "max_segment_repeats must be an integer"),
    ({"deny_extensions": ["png", ""]}, "empty extension"),
])
def test_invalid_values_raise_a_clear_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def test_invalid_pattern_in_config_names_the_pattern():
    # (build_config may report it first: crawl.config validates [discovery] with a LinkFilter)
    with pytest.raises(ValueError, match=r"'\(unclosed'"):
        LinkFilter.from_config(build_config(overrides={"discovery.exclude_patterns": ["/ok/", "(unclosed"]}))
