
import pytest

from crawl.config import build_config
from crawl.net.urls import (MAX_URL_LENGTH, REASONS, BaseUrl, InvalidUrl, UrlRules, check_url, host_bucket, host_of,
                        host_without_port, normalize_url, url_hash)

# the documented defaults (conf/defaults.toml [discovery]), as the fetch task uses them
RULES = UrlRules.from_config(build_config())


@pytest.mark.parametrize("raw,expected", [
    # case: scheme and host lower-cased, path kept
    ("HTTP://Example.COM/Path", "http://example.com/Path"),
    ("HTTP://Example.COM:80/a/../b/./c", "http://example.com/b/c"),
    # IDN hosts -> IDNA (punycode), already-ASCII ACE labels kept
    ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
    ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
    ("http://example.com./", "http://example.com/"),
    # ports: the scheme's default dropped, any other kept, empty port dropped, leading zeros read
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443", "https://example.com/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("http://example.com:8080/x#frag", "http://example.com:8080/x"),
    ("http://example.com:/x", "http://example.com/x"),
    ("http://example.com:0080/x", "http://example.com/x"),
    # userinfo dropped
    ("http://user:pw@example.com/", "http://example.com/"),
    # dot segments (RFC 3986 section 5.2.4), empty segments kept
    ("http://example.com/a/b/../../../c", "http://example.com/c"),
    ("http://example.com/a/./b/.", "http://example.com/a/b/"),
    ("http://example.com/a/b/..", "http://example.com/a/"),
    ("http://example.com/a/%2E%2E/b", "http://example.com/b"),
    ("http://example.com/a//b/../c", "http://example.com/a//c"),
    ("http://example.com/.a/..b/c.", "http://example.com/.a/..b/c."),
    # percent-encoding: unreserved decoded, others kept upper-cased, raw characters encoded
    ("http://example.com/%7euser/a%20b", "http://example.com/~user/a%20b"),
    ("http://example.com/%7Euser/%41%62", "http://example.com/~user/Ab"),
    ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/café", "http://example.com/caf%C3%A9"),
    ("http://example.com/caf%c3%a9", "http://example.com/caf%C3%A9"),
    ("http://example.com/100%", "http://example.com/100%25"),
    ("http://example.com/%zz", "http://example.com/%25zz"),
    ("http://example.com/a\"<>`{}|^[]", "http://example.com/a%22%3C%3E%60%7B%7D%7C%5E%5B%5D"),
    ("http://example.com/?q=a b&r=ü", "http://example.com/?q=a%20b&r=%C3%BC"),
    ("http://example.com/?q=1+2&r=%2b", "http://example.com/?q=1+2&r=%2B"),
    # empty query removed, empty pieces dropped, parameters sorted (duplicates kept)
    ("http://example.com/x?", "http://example.com/x"),
    ("http://example.com/x?&&", "http://example.com/x"),
    ("http://example.com/x?b=2&a=1", "http://example.com/x?a=1&b=2"),
    ("http://example.com/x?b=2&&a=1&", "http://example.com/x?a=1&b=2"),
    ("http://example.com/x?a=2&a=1&a=2", "http://example.com/x?a=1&a=2&a=2"),
    ("http://example.com/x?b&a=&c=3", "http://example.com/x?a=&b&c=3"),
    ("http://example.com/x?B=1&a=1", "http://example.com/x?B=1&a=1"),
    ("http://example.com/a%2Fb?r=1&q=%3d", "http://example.com/a%2Fb?q=%3D&r=1"),
    ("http://example.com/x?q=%7e", "http://example.com/x?q=~"),
    # fragments dropped
    ("http://example.com/x#", "http://example.com/x"),
    ("http://example.com/x?a=1#frag?b=2", "http://example.com/x?a=1"),
    # surrounding white space ignored
    ("  http://example.com/dir/  ", "http://example.com/dir/"),
])
def test_normalize(raw, expected):
    assert normalize_url(raw) == expected
    assert normalize_url(expected) == expected  # idempotent


@pytest.mark.parametrize("raw,expected", [
    # tracking parameters (utm_* is a prefix pattern)
    ("http://example.com/x?utm_source=news&id=3", "http://example.com/x?id=3"),
    ("http://example.com/x?id=3&utm_medium=email&utm_campaign=spring", "http://example.com/x?id=3"),
    ("http://example.com/x?gclid=abc&b=2&fbclid=IwAR0&a=1", "http://example.com/x?a=1&b=2"),
    ("http://example.com/x?UTM_Source=a&GCLID=b", "http://example.com/x"),
    ("http://example.com/x?utm_source", "http://example.com/x"),
    ("http://example.com/x?utm%5Fsource=a&k=v", "http://example.com/x?k=v"),
    # names that merely contain or extend an exact name are kept
    ("http://example.com/x?gclid2=a&my_utm_source=b&sids=c", "http://example.com/x?gclid2=a&my_utm_source=b&sids=c"),
    # a value that looks like a tracking name is kept
    ("http://example.com/x?ref=utm_source", "http://example.com/x?ref=utm_source"),
    # session ids in the query, case-insensitive, prefix patterns
    ("http://example.com/x?PHPSESSID=0123abc&page=2", "http://example.com/x?page=2"),
    ("http://example.com/x?phpsessid=0123abc", "http://example.com/x"),
    ("http://example.com/x?ASPSESSIONIDQASDRTB=FOO&sid=1&a=1", "http://example.com/x?a=1"),
    # session ids as path parameters
    ("http://example.com/page;jsessionid=ABC?x=1", "http://example.com/page?x=1"),
    ("http://example.com/page;JSESSIONID=ABC", "http://example.com/page"),
    ("http://example.com/a;jsessionid=1/b.jsp;jsessionid=2", "http://example.com/a/b.jsp"),
    ("http://example.com/page;v=2;jsessionid=ABC;lang=en", "http://example.com/page;v=2;lang=en"),
    ("http://example.com/a/.;jsessionid=1/b", "http://example.com/a/b"),
    ("http://example.com/a/b/..;jsessionid=1/c", "http://example.com/a/c"),
    # tracking names are not session ids: kept as path parameters
    ("http://example.com/page;utm_source=a", "http://example.com/page;utm_source=a"),
    # with a fragment and a sorted, emptied query
    ("http://example.com/page;jsessionid=ABC?utm_source=x&&gclid=y#top", "http://example.com/page"),
])
def test_normalize_with_rules(raw, expected):
    assert normalize_url(raw, rules=RULES) == expected
    assert normalize_url(expected, rules=RULES) == expected


def test_rules_are_only_applied_when_given():
    url = "http://example.com/page;jsessionid=ABC?utm_source=x&b=1"
    assert normalize_url(url) == "http://example.com/page;jsessionid=ABC?b=1&utm_source=x"
    assert check_url(url) == (normalize_url(url), None)
    assert check_url(url, rules=RULES) == ("http://example.com/page?b=1", None)


def test_rule_patterns():
    rules = UrlRules(tracking_params=["Ref*", "x"], session_params=["S"])  # lists are accepted too
    assert rules.tracking_params == ("Ref*", "x")
    assert hash(rules) == hash(UrlRules(("Ref*", "x"), ("S",)))
    assert normalize_url("http://a.com/p;s=1;t=2?ref=1&referrer=2&x=3&xy=4&s=5&r=6", rules=rules) == \
        "http://a.com/p;t=2?r=6&xy=4"
    assert normalize_url("http://a.com/?a*=1&a=2", rules=UrlRules(("a**",))) == "http://a.com/?a=2"
    assert normalize_url("http://a.com/p;s=1?b=1", rules=UrlRules()) == "http://a.com/p;s=1?b=1"


def test_relative_resolution():
    assert normalize_url("../x.html", base="http://a.com/p/q/r.html") == "http://a.com/p/x.html"
    assert normalize_url("//b.com/y", base="https://a.com/") == "https://b.com/y"
    assert normalize_url("y", base="http://a.com") == "http://a.com/y"
    assert normalize_url("HTTPS://B.com/", base="http://a.com/") == "https://b.com/"
    assert normalize_url("?b=1&a=2", base="http://a.com/p?z=9") == "http://a.com/p?a=2&b=1"
    assert normalize_url("#top", base="http://a.com/p?z=9") == "http://a.com/p?z=9"
    assert normalize_url("?", base="http://a.com/p?z=9") == "http://a.com/p"
    assert normalize_url("a//b/../c", base="http://a.com/d/") == "http://a.com/d/a//c"
    assert normalize_url("x?utm_source=1", base="http://a.com/d;jsessionid=1/", rules=RULES) == "http://a.com/d/x"


# RFC 3986 section 5.4: every example whose target is an http URL
RFC3986_BASE = "http://a/b/c/d;p?q"


@pytest.mark.parametrize("ref,expected", [
    ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"), ("/g", "http://a/g"),
    ("//g", "http://g/"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q"), ("g#s", "http://a/b/c/g"), ("g?y#s", "http://a/b/c/g?y"),
    (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"), ("g;x?y#s", "http://a/b/c/g;x?y"),
    (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"), ("../", "http://a/b/"),
    ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"), ("../../g", "http://a/g"),
    # 5.4.2 abnormal examples
    ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"),
    ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"), ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"), ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"), ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "http://a/b/c/g"), ("g#s/../x", "http://a/b/c/g"),
    ("http:g", "http://a/b/c/g"),  # the non-strict (backward compatible) reading, as browsers do
])
def test_rfc3986_reference_resolution(ref, expected):
    assert normalize_url(ref, base=RFC3986_BASE) == expected


@pytest.mark.parametrize("raw,reason,message", [
    ("", "empty", "empty"), ("   ", "empty", "empty"),
    ("mailto:a@b.c", "scheme", "unsupported scheme"), ("javascript:alert(1)", "scheme", "scheme"),
    ("not a url", "scheme", "scheme"), ("ftp://a.com/", "scheme", "scheme"), ("g:h", "scheme", "scheme"),
    ("http://", "no_host", "no host"), ("http://:80/", "no_host", "no host"),
    ("http://a.com:99999/", "bad_port", "port"), ("http://a.com:0/", "bad_port", "port"),
    ("http://a.com:8o/", "bad_port", "port"), ("http://a.com:80:80/", "bad_port", "port"),
    ("http://a\nb.com/", "control_chars", "control"), ("http://a.com/\tx", "control_chars", "control"),
    ("http://a.com/\x00", "control_chars", "control"), ("http://a.com/\x7f", "control_chars", "control"),
    ("http://exa mple.com/", "bad_host", "invalid host"), ("http://a..b/", "bad_host", "invalid host"),
    ("http://-a.com/", "bad_host", "invalid host"), ("http://ex%2Fmple.com/", "bad_host", "invalid host"),
    ("http://" + "a" * 64 + ".com/", "bad_host", "invalid host"), ("http://[fe80::1%25eth0]/", "bad_host", "invalid host"),
    ("http://[v1.x]/", "bad_host", "invalid host"), ("http://[::1]:0/", "bad_port", "port"),
    ("http://[1.2.3.4]/", "unparseable", "unparseable"),
    ("http://[bad/", "unparseable", "unparseable"),
    ("http://a.com/" + "a" * MAX_URL_LENGTH, "too_long", "longer"),
    ("http://a.com/" + "ü" * (MAX_URL_LENGTH // 4), "too_long", "normalised"),  # fits raw, not encoded
    ("http://a.com/\ud800", "undecodable", "undecodable"),
])
def test_invalid(raw, reason, message):
    with pytest.raises(InvalidUrl, match=message) as info:
        normalize_url(raw)
    assert info.value.reason == reason
    assert reason in REASONS
    assert check_url(raw) == (None, reason)


@pytest.mark.parametrize("raw,base,expected", [
    # where the WHATWG parser (what browsers request) differs from our earlier RFC 3986 normaliser;
    # docs/urls.md says why each is kept
    ("http://example.com/a\\b", None, "http://example.com/a/b"),           # was /a%5Cb
    ("http:///x", None, "http://x/"),                                       # was no_host
    ("http:g", "https://example.com/d/p", "http://g/"),                     # was no_host
    ("http://ex%41mple.com/", None, "http://example.com/"),                 # was bad_host
    ("http://0x7f.1/", None, "http://127.0.0.1/"),                          # was host 0x7f.1
    ("http://2130706433/", None, "http://127.0.0.1/"),                      # was host 2130706433
    ("http://example.com/?a='b'", None, "http://example.com/?a=%27b%27"),   # was ?a='b'
    ("http://example.com/%2e%2E/x/./%2E", None, "http://example.com/x/"),   # was /x/ too, after decoding
    ("http://example.com/a/%2e%2e;x=1/", None, "http://example.com/a/..;x=1/"),
    ("http://fa\u00df.de/", None, "http://xn--fa-hia.de/"),                # IDNA2003 said fass.de
    ("http://[::ffff:1.2.3.4]/", None, "http://[::ffff:102:304]/"),         # both RFC 5952 forms
])
def test_whatwg_differences(raw, base, expected):
    assert normalize_url(raw, base) == expected == normalize_url(expected)


def test_dns_lengths_are_kept_to():
    label = "a" * 63
    assert check_url(f"http://{label}.com/") == (f"http://{label}.com/", None)
    assert check_url(f"http://a{label}.com/") == (None, "bad_host")
    name = ".".join([label] * 4)  # 255 characters
    assert check_url(f"http://{name}/") == (None, "bad_host")


def test_check_url_never_raises():
    assert check_url(None) == (None, "unparseable")  # type: ignore[arg-type]
    assert check_url(b"http://a.com/") == (None, "unparseable")  # type: ignore[arg-type]
    assert check_url("x", base="http://a.com:99999/") == (None, "bad_port")
    assert check_url("x", base="") == (None, "scheme")


def test_surrogate_escaped_bytes_are_kept():
    # bytes that were not UTF-8 (decoded with surrogateescape) are encoded back to themselves
    raw = b"http://a.com/caf\xe9".decode("utf-8", "surrogateescape")
    assert normalize_url(raw) == "http://a.com/caf%E9"


@pytest.mark.parametrize("raw,expected", [
    ("http://[::1]:8080/", "http://[::1]:8080/"),
    ("HTTP://[2001:DB8:0:0:0:0:0:1]:80/a/../b?z=1&a=2", "http://[2001:db8::1]/b?a=2&z=1"),
    ("https://[::1]:443", "https://[::1]/"),
    ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"),  # RFC 5952 allows either form; one is kept
])
def test_ipv6_literal_hosts(raw, expected):
    assert normalize_url(raw) == expected == normalize_url(expected)
    assert check_url(raw) == (expected, None)


def test_ipv6_literal_hosts_as_base_keys_and_rules():
    from crawl.net.filters import registrable_domain
    from crawl.fetch.fetcher import _ip_of
    from crawl.fetch.politeness import override_matches
    from crawl.crawldb.seeds import parse_seed_lines

    assert check_url("../c?x", base="http://[::1]:8080/a/b") == ("http://[::1]:8080/c?x", None)
    assert BaseUrl("http://[::1]:8080/a/b").check("//[::2]/d") == ("http://[::2]/d", None)
    assert host_of("http://[::1]:8080/x") == "[::1]:8080" and host_of("http://[::1]/") == "[::1]"
    assert host_without_port("[::1]:8080") == "[::1]" == host_without_port("[::1]")
    assert registrable_domain("[::1]") == "[::1]"
    assert override_matches("[::1]", "[::1]:8080") and not override_matches("[::2]", "[::1]:8080")
    assert (_ip_of("[::1]:8080"), _ip_of("127.0.0.2:81"), _ip_of("3com.com")) == ("::1", "127.0.0.2", None)
    seeds = parse_seed_lines(["http://[::1]:8080/", "http://[::1]:8080", "http://[zz::1]/"])
    assert seeds.urls == ["http://[::1]:8080/"] and seeds.duplicates == 1
    assert [reason for _n, _t, reason in seeds.rejected] == [
        "unparseable URL ('zz::1' does not appear to be an IPv4 or IPv6 address)"]


def test_keys_are_stable():
    assert host_of("http://a.com:81/x") == "a.com:81"
    assert url_hash("http://a.com/") == url_hash("http://a.com/")
    assert url_hash("http://a.com/") != url_hash("http://a.com/x")
    # stable across runs and machines: pinned values
    assert host_bucket("a.com", 16) == host_bucket("a.com", 16)
    assert all(0 <= host_bucket(f"h{i}.com", 16) < 16 for i in range(200))
    assert len({host_bucket(f"h{i}.com", 16) for i in range(200)}) == 16


def test_rules_pickle_by_value():
    """UrlRules keeps a hash and compiled matchers; a copy in another process rebuilds both."""
    import pickle
    copy = pickle.loads(pickle.dumps(RULES))
    assert copy == RULES and hash(copy) == hash(RULES)
    assert check_url("http://a.com/?utm_source=1&b=2", None, copy) == ("http://a.com/?b=2", None)


def test_check_url_never_raises_even_with_odd_arguments():
    for rules in (object(), {"tracking_params": ()}, "utm_*"):
        assert check_url("http://a.com/x?utm_source=1", None, rules)[0] in (None, "http://a.com/x?utm_source=1")
        assert check_url("/x", "http://a.com/", rules)[1] in (None, "unparseable")
    for base in (object(), b"http://a.com/", 42):
        assert check_url("/x", base)[0] is None
        assert check_url("http://a.com/y", base) == ("http://a.com/y", None)


def test_requote_is_skipped_exactly_when_it_would_change_nothing():
    """_requote runs only where its search finds something to rewrite: every escape and every
    character it leaves alone, and none it rewrites, passes the search unseen."""
    from crawl.net import urls
    for code in range(0x80):
        for text in (f"%{code:02X}", f"%{code:02x}", chr(code), f"a%{code:X}"):
            for rewrite, search in ((urls._PATH_REWRITE_RE, urls._PATH_REQUOTE_RE),
                                    (urls._QUERY_REWRITE_RE, urls._QUERY_REQUOTE_RE)):
                changes = urls._requote(text, rewrite) != text
                assert bool(search.search(text)) == changes, (text, rewrite.pattern)


def test_a_host_with_a_trailing_newline_is_not_a_host():
    # the host rule is checked with fullmatch: "$" would let "a.com\n" through (WHATWG strips
    # newlines from URLs, so this guards the rule itself)
    from crawl.net.urls import _canonical_host
    assert _canonical_host("a.com") == "a.com" and _canonical_host("a.com\n") is None
