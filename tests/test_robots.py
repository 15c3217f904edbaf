import pytest

from crawl.fetch.robots import (UNREACHABLE_STATUS, RobotsAnswer, answer_from_json, answers_of, effective_delay,
                                host_columns, policy_from_fetch, redirect_reuse)

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


# -- one answer per origin (RFC 9309 2.3) ---------------------------------------------------------

HTTPS = RobotsAnswer("https", 200, "User-agent: *\nDisallow: /x/\n", 1000.0)
HTTP = RobotsAnswer("http", 404, None, 900.0, None)


def test_both_origins_round_trip_through_the_host_columns():
    columns = host_columns({"http": HTTP, "https": HTTPS})
    assert columns["robots_scheme"] == "https" and columns["robots_fetched_at"] == 1000.0  # the newest first
    assert answers_of(columns) == {"http": HTTP, "https": HTTPS}
    assert host_columns({"http": HTTP})["robots_other"] is None
    assert answers_of(host_columns({})) == {}


def test_a_row_from_before_origins_caches_nothing():
    assert answers_of({"robots_status": 200, "robots_txt": "", "robots_fetched_at": 1000.0}) == {}
    for damaged in ("{", "[]", '{"scheme": "http"}', '{"scheme": "http", "status": 200, "fetched_at": "NaN"}'):
        assert answer_from_json(damaged) is None


def test_answers_are_reused_while_definite_and_fresh():
    assert HTTPS.usable(now=1050.0, ttl_s=100.0) and not HTTPS.usable(now=1100.0, ttl_s=100.0)
    for status in (500, 429, UNREACHABLE_STATUS):
        assert not RobotsAnswer("http", status, None, 1000.0).usable(now=1001.0, ttl_s=100.0)


def test_a_redirect_to_the_other_origins_robots_txt_reuses_its_answer():
    held = {"https": HTTPS}
    reused = redirect_reuse("http", "a.com", "https://a.com/robots.txt", held, now=1050.0, ttl_s=100.0)
    assert reused == RobotsAnswer("http", 200, HTTPS.txt, 1000.0)
    # not: another host, another path, an answer gone stale, or none held
    assert redirect_reuse("http", "a.com", "https://www.a.com/robots.txt", held, 1050.0, 100.0) is None
    assert redirect_reuse("http", "a.com", "https://a.com/r/robots.txt", held, 1050.0, 100.0) is None
    assert redirect_reuse("http", "a.com", "https://a.com/robots.txt", held, 1200.0, 100.0) is None
    assert redirect_reuse("http", "a.com", "https://a.com/robots.txt", {}, 1050.0, 100.0) is None
