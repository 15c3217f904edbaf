import pytest

from crawl.fetch.robots import UNREACHABLE_STATUS, effective_delay, policy_from_fetch

BODY = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n\nUser-agent: deltacrawl\nDisallow: /nodc/\n"


def test_2xx_parsed_for_our_agent():
    p = policy_from_fetch(200, BODY, "deltacrawl", 500_000)
    assert p.allowed("http://a.com/private/x")  # our own group replaces the * group (RFC 9309 2.2.1)
    assert not p.allowed("http://a.com/nodc/x")
    q = policy_from_fetch(200, BODY, "otherbot", 500_000)
    assert not q.allowed("http://a.com/private/x") and q.crawl_delay_s == 2.0


def test_4xx_allows_everything():
    for code in (400, 401, 403, 404, 410):
        p = policy_from_fetch(code, b"garbage", "deltacrawl", 500_000)
        assert p.allow_all and p.allowed("http://a.com/anything")


def test_5xx_429_and_unreachable_disallow_everything():
    for code in (500, 503, 429, UNREACHABLE_STATUS):
        p = policy_from_fetch(code, BODY, "deltacrawl", 500_000)
        assert p.disallow_all and not p.allowed("http://a.com/")


def test_body_is_cut_at_max_bytes():
    body = b"User-agent: *\n" + b"# padding\n" * 100 + b"Disallow: /late/\n"
    assert policy_from_fetch(200, body, "x", 1_000_000).allowed("http://a.com/late/") is False
    assert policy_from_fetch(200, body, "x", 100).allowed("http://a.com/late/") is True


def test_garbage_and_binary_bodies_do_not_crash():
    for body in (b"\x00\xff\xfe" * 1000, b"<html><body>not robots</body></html>", b"", None, "Disallow /x"):
        p = policy_from_fetch(200, body, "deltacrawl", 500_000)
        assert p.allowed("http://a.com/")


def test_effective_delay():
    p = policy_from_fetch(200, b"User-agent: *\nCrawl-delay: 5\n", "x", 1000)
    assert effective_delay(1.0, p) == 5.0
    assert effective_delay(10.0, p) == 10.0
    assert effective_delay(1.0, policy_from_fetch(404, b"", "x", 1000)) == 1.0


def _parser_raises(monkeypatch, exc):
    def parse(text):
        raise exc
    monkeypatch.setattr("crawl.fetch.robots.Protego.parse", parse)


def test_a_parser_failure_fails_closed_and_says_why(monkeypatch):
    # RFC 9309 2.3.1.4: a file we cannot read is treated as complete disallow, never as allow-all
    _parser_raises(monkeypatch, ValueError("hostile pattern"))
    p = policy_from_fetch(200, b"User-agent: *\nDisallow: /\n", "deltacrawl", 500_000)
    assert p.disallow_all and not p.allow_all and not p.allowed("http://a.com/secret")
    assert p.error == "robots.txt unparsable: ValueError: hostile pattern"


def test_memory_error_in_the_parser_is_not_swallowed(monkeypatch):
    _parser_raises(monkeypatch, MemoryError())
    with pytest.raises(MemoryError):
        policy_from_fetch(200, b"User-agent: *\nDisallow: /\n", "deltacrawl", 500_000)
