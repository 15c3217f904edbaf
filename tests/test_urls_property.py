"""Property tests of crawl.net.urls: for any input, check_url never raises, and a URL it returns is a
fixed point (normalising it again with the same rules gives it back), ASCII, fragment-free and
free of every parameter the rules strip. Derandomized, so CI runs the same examples each time."""
import re
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from crawl.config import build_config
from crawl.net.urls import MAX_URL_LENGTH, REASONS, InvalidUrl, UrlRules, check_url, normalize_url

RULES = UrlRules.from_config(build_config())
BASE = "https://www.example.com/dir/page.html?q=1"
# derandomize: the same examples on every run; database=None: no .hypothesis/ in the work tree;
# no deadline: a loaded 2-core CI machine must not turn slowness into failures.
# a % in a canonical URL always starts an upper-case escape of a byte that is no unreserved character
_ESCAPE_RE = re.compile(r"%(?![0-9A-F]{2})|%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2[DE]|5F|7E)")
FIXED = dict(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _is_stripped(name: str, patterns: tuple[str, ...]) -> bool:
    """An independent (loop-based) reading of the pattern rules, to check the compiled one."""
    name = name.lower()
    return any(name.startswith(p[:-1].lower()) if p.endswith("*") else name == p.lower() for p in patterns)


def assert_canonical(url: str, base: str | None, rules: UrlRules | None) -> None:
    """The properties every input must satisfy."""
    canonical, reason = check_url(url, base, rules)
    event(reason or "canonical")
    try:
        direct = normalize_url(url, base, rules)
    except InvalidUrl as exc:  # only ever InvalidUrl, with a known reason: nothing is masked
        assert (canonical, reason) == (None, exc.reason)
        assert reason in REASONS
        return
    assert (canonical, reason) == (direct, None)
    assert canonical.startswith(("http://", "https://"))
    assert canonical.isascii() and canonical.isprintable() and " " not in canonical
    assert len(canonical) <= MAX_URL_LENGTH
    assert "#" not in canonical
    assert not _ESCAPE_RE.search(canonical), "percent-encoding not normalised"
    assert check_url(canonical, None, rules) == (canonical, None), "not idempotent"
    assert check_url(canonical, base, rules) == (canonical, None), "absolute URL changed by its base"
    parts = urlsplit(canonical)
    assert parts.path.startswith("/")
    assert "/./" not in parts.path + "/" and "/../" not in parts.path + "/"
    if parts.query:
        pieces = parts.query.split("&")
        assert "" not in pieces and pieces == sorted(pieces)
    if rules is not None:
        query_names = [p.partition("=")[0] for p in parts.query.split("&")] if parts.query else []
        assert not [n for n in query_names if _is_stripped(n, rules.tracking_params + rules.session_params)]
        path_params = [p.partition("=")[0] for seg in parts.path.split("/") for p in seg.split(";")[1:]]
        assert not [n for n in path_params if _is_stripped(n, rules.session_params)]


rules_or_none = st.sampled_from([None, RULES, UrlRules(("A*", "b"), ("S", "x*"))])


@settings(max_examples=400, **FIXED)
@given(st.text(), st.sampled_from([None, BASE]), rules_or_none)
def test_any_text(text, base, rules):
    assert_canonical(text, base, rules)


@settings(max_examples=150, **FIXED)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(list(":/?#[]@%.;=&")), max_size=30))
def test_any_text_after_a_scheme(text):
    assert_canonical("http://" + text, None, RULES)
    assert_canonical("https:" + text, BASE, None)


def _case_variants(words):
    """Each word, lower, upper or mixed case (names are matched case-insensitively)."""
    return st.sampled_from(words).flatmap(
        lambda w: st.sampled_from([w, w.upper(), w.title(), w.swapcase()]))


def _chars_except(delimiters):
    """Any character but the component's delimiters and controls (test_any_text covers those,
    which would otherwise get most examples rejected before the interesting steps)."""
    return st.characters(codec="utf-8", exclude_categories=["Cc"], exclude_characters=delimiters)


schemes = st.sampled_from(["http", "https", "HTTP", "HttpS", "ftp", "mailto", "javascript", ""])
labels = st.one_of(
    st.sampled_from(["example", "www", "com", "de", "xn--bcher-kva", "a-b", "a_b", "-x", "x-", "123",
                     "Bücher", "例え", "テスト", "ÄÖÜ", "straße", "ﬁ", "xn--ü", "", "a" * 63, "a" * 64]),
    st.text(alphabet=st.characters(categories=["Ll", "Lu", "Lo", "Nd"]) | st.just("-"), min_size=1, max_size=12))
hosts = st.builds(lambda ls, dot: ".".join(ls) + dot, st.lists(labels, min_size=1, max_size=4),
                  st.sampled_from(["", "", ".", "。"]))
ports = st.sampled_from(["", "", ":", ":80", ":443", ":8080", ":0080", ":0", ":99999", ":x"])
userinfo = st.sampled_from(["", "", "user@", "user:pw@"])
segments = st.one_of(
    st.sampled_from([".", "..", "", "%7e", "%7E", "%2f", "%2F", "%41", "%2E", "%2e%2E", "%zz", "%", "%4",
                     "a b", "ü", "é%C3%A9", "~", "a;b", ";jsessionid=1", "x;JSESSIONID=abc;v=1",
                     "..;jsessionid=2", ".;sid=3", "p;s=1;xx=2", "%3B", "?", "#"]),
    st.text(alphabet=_chars_except("/?#"), max_size=8))
param_names = st.one_of(
    _case_variants(["utm_source", "utm_", "gclid", "fbclid", "phpsessid", "jsessionid", "aspsessionidXYZ",
                    "sid", "a1", "b", "s", "xyz", "id", "page", "q", "utm%5Fsource"]),
    st.text(alphabet=_chars_except("&=#"), max_size=6))
param_values = st.text(alphabet=_chars_except("&#"), max_size=6)
params = st.one_of(st.builds(lambda n, v: f"{n}={v}", param_names, param_values), param_names, st.just(""))
queries = st.one_of(st.just(None), st.lists(params, max_size=6).map("&".join))
fragments = st.one_of(st.just(None), st.text(max_size=8))


@st.composite
def url_shaped(draw):
    """A string built from URL components, each valid or broken in the ways links are."""
    path = "/".join(draw(st.lists(segments, max_size=6)))
    query, fragment = draw(queries), draw(fragments)
    tail = path + (f"?{query}" if query is not None else "") + (f"#{fragment}" if fragment is not None else "")
    form = draw(st.sampled_from(["absolute", "absolute", "network", "root", "relative"]))
    if form == "absolute":
        return f"{draw(schemes)}://{draw(userinfo)}{draw(hosts)}{draw(ports)}/{tail}"
    if form == "network":
        return f"//{draw(hosts)}{draw(ports)}/{tail}"
    return ("/" if form == "root" else "") + tail


@settings(max_examples=600, **FIXED)
@given(url_shaped(), st.sampled_from([None, BASE, "http://Bücher.example:8080/a;jsessionid=1/b/"]), rules_or_none)
def test_url_shaped(url, base, rules):
    assert_canonical(url, base, rules)


@settings(max_examples=150, **FIXED)
@given(st.lists(params, max_size=6), st.randoms(use_true_random=False))
def test_query_order_does_not_matter(pieces, rnd):
    shuffled = list(pieces)
    rnd.shuffle(shuffled)
    for rules in (None, RULES):
        assert check_url("http://a.com/p?" + "&".join(pieces), None, rules) == \
            check_url("http://a.com/p?" + "&".join(shuffled), None, rules)


@settings(max_examples=500, **FIXED)
@given(st.lists(segments, max_size=6), queries, fragments, rules_or_none)
def test_path_and_query(path_segments, query, fragment, rules):
    """Path and query normalisation on a valid host: every example reaches the interesting steps."""
    url = "http://a.com/" + "/".join(path_segments)
    url += (f"?{query}" if query is not None else "") + (f"#{fragment}" if fragment is not None else "")
    assert_canonical(url, None, rules)


# --------------------------------------------------------------------------- links as pages hold them
# The URLs below are built from the characters links mostly hold, and a quarter of them get one
# unusual character or escape, so both sides of every boundary are generated (dot segments, path
# parameters, ports, host shapes, schemes, escapes).

from crawl.net import urls as _urls  # noqa: E402

_PLAIN = "abcxyzABZ019-._~!$&'()*+,;=:@"
_SPECIAL = list("%/?#[]\\ü \"<>^`{|}") + ["\x7f", "\u00a0", "\ud800"]
# escapes kept as they are (upper-case hex of a byte that is no unreserved character)
_KEPT_ESCAPES = ["%20", "%C3", "%A9", "%3D", "%26", "%3F", "%23", "%25", "%2F", "%3B", "%00", "%7F", "%FF"]
plain_text = st.lists(st.sampled_from(list(_PLAIN) * 3 + _KEPT_ESCAPES), max_size=8).map("".join)
plain_segments = st.one_of(st.sampled_from([".", "..", "", "a", "index.html", "a;jsessionid=1", "b;SID=2;v=3",
                                            ".;sid=1", "..;x=1", "x:y", "@"]), plain_text)
plain_queries = st.one_of(st.just(None), st.lists(
    st.one_of(st.sampled_from(["utm_source=x", "UTM_Medium=y", "gclid=1", "a=1", "b=2", "b", "", "q=a?b",
                               "a=1&b", "s=1", "x1=y", "SID", "sid=", "utm_", "q=a%26b", "utm%5Fx=1",
                               "aspsessionidAB=1", "=x"]), plain_text), max_size=5).map("&".join))
plain_hosts = st.one_of(st.sampled_from(["example.com", "Example.COM", "www.a-b.co.uk", "a_b.de", "x", "-x.com",
                                         "a..b", "a.", "xn--bcher-kva.example", "127.0.0.1", "a" * 64 + ".com"]),
                        st.lists(st.text(alphabet="abzZ09-_", min_size=1, max_size=5), min_size=1, max_size=3)
                        .map(lambda labels: ".".join(labels + ["com"])))
plain_ports = st.sampled_from([""] * 12 + [":80", ":443", ":8080", ":0080", ":0", ":65535", ":65536", ":99999",
                               ":", ":x", ":123456"])


@st.composite
def plain_urls(draw, absolute_only=False):
    """A reference or a base: plain most of the time, with the odd character that is not."""
    path = "/".join(draw(st.lists(plain_segments, max_size=5)))
    query, fragment = draw(plain_queries), draw(st.one_of(st.just(None), plain_text))
    tail = path + (f"?{query}" if query is not None else "") + (f"#{fragment}" if fragment is not None else "")
    forms = ["absolute"] if absolute_only else ["absolute", "network", "root", "relative", "relative",
                                                "dots", "query", "fragment", "scheme_like"]
    form = draw(st.sampled_from(forms))
    if form == "absolute":
        scheme = draw(st.sampled_from(["http", "https"] * 4 + ["HTTP", "Https", "ftp"]))
        url = f"{scheme}://{draw(plain_hosts)}{draw(plain_ports)}" + ("/" if draw(st.booleans()) else "") + tail
    elif form == "network":
        url = f"//{draw(plain_hosts)}{draw(plain_ports)}/{tail}"
    elif form == "root":
        url = "/" + tail
    elif form == "dots":
        url = draw(st.sampled_from(["../", "./", "../../", ".", "..", "..//", "./../"])) + tail
    elif form == "query":
        url = "?" + (query or "")
    elif form == "fragment":
        url = "#" + (fragment or "")
    elif form == "scheme_like":
        url = draw(st.sampled_from(["mailto:", "javascript:", "http:", "https:", "a:", "tel:", "HTTP:", "hTTps:",
                                    "x+y.z-1:", "1a:", "a b:", "data:", "ü:"])) + tail
    else:
        url = tail
    return _spoil(draw, url)


def _spoil(draw, url: str) -> str:
    """A quarter of the URLs get one unusual character or escape."""
    if draw(st.integers(0, 3)) != 3:  # (hypothesis favours 0: that is the unspoilt URL)
        return url
    at = draw(st.integers(0, len(url)))
    return url[:at] + draw(st.sampled_from(_SPECIAL + ["%2e", "%2E", "%41", "%7E", "%5F", "%c3", "%zz", "%4"])) + url[at:]


plain_bases = st.one_of(plain_urls(absolute_only=True),
                        st.sampled_from([BASE, "http://Bücher.example:8080/a;jsessionid=1/b/", "https://a.com",
                                         "https://a.com?x=1", "http://a.com/b/c?d=e#f", "http://u@a.com/x"]))


def assert_link_canonical(ref: str, base: str | None, rules: UrlRules | None) -> None:
    """A link's properties, and BaseUrl (the base prepared once) giving check_url's answer."""
    assert_canonical(ref, base, rules)
    if base is not None:
        assert _urls.BaseUrl(base, rules).check(ref) == check_url(ref, base, rules)


@settings(max_examples=800, **FIXED)
@given(plain_urls(), plain_bases, rules_or_none)
def test_links_against_a_base(ref, base, rules):
    assert_link_canonical(ref, base, rules)


@settings(max_examples=300, **FIXED)
@given(plain_urls(absolute_only=True), rules_or_none)
def test_links_without_a_base(url, rules):
    assert_link_canonical(url, None, rules)


@settings(max_examples=300, **FIXED)
@given(plain_bases, rules_or_none)
def test_bases_as_links(base, rules):
    """Every base is also a reference (absolute, or resolved against itself)."""
    assert_link_canonical(base, None, rules)
    assert_link_canonical(base, base, rules)


def test_dot_segments_exhaustively():
    """Every relative path of up to 4 segments made of dot-segments, empty segments and path
    parameters that become dot-segments once stripped (".;sid=1" followed by "..", say): the
    result has no dot-segment left and is a fixed point. (Exhaustive, because random draws
    rarely hit the 3-4 segment combinations that matter.)"""
    import itertools
    parts = [".", "..", "", "a", ".;sid=1", "..;x=1", "b;sid=2", "%2e", ".%2E"]
    bases = ["https://a.com/d/e/f.html", "https://a.com/d//e/", "https://a.com"]
    for n in range(1, 5):
        for combo in itertools.product(parts, repeat=n):
            path = "/".join(combo)
            if not path:
                continue
            for base in bases:
                for rules in (RULES, UrlRules(("A*", "b"), ("S", "x*")), None):
                    url, _reason = check_url(path, base, rules)
                    if url is None:  # "//." and the like: a network-path reference to host "."
                        continue
                    segments = urlsplit(url).path.split("/")
                    assert "." not in segments and ".." not in segments, (path, base, rules, url)
                    assert normalize_url(url, None, rules) == url, (path, base, rules)


@settings(max_examples=400, **FIXED)
@given(st.sampled_from(["http://", "https://", "HTTP://", "ftp://", ""]),
       st.text(alphabet=st.sampled_from(list("aZ09.-_:~%!$&'()*+,;=/?#@[]\\ \t\n\x7fü")), max_size=20))
def test_host_of_is_urlsplit_netloc(prefix, rest):
    from crawl.net.urls import host_of
    url = prefix + rest
    try:
        expected = urlsplit(url).netloc
    except ValueError:
        with pytest.raises(ValueError):
            host_of(url)
        return
    assert host_of(url) == expected
