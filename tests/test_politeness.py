from email.utils import formatdate

from crawl.politeness import adaptive_gap, decayed_backoff, next_backoff, parse_retry_after

NOW = 1_800_000_000.0


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after("120", NOW) == 120.0
    assert parse_retry_after(" 0 ", NOW) == 0.0
    assert abs(parse_retry_after(formatdate(NOW + 30, usegmt=True), NOW) - 30.0) < 1.0
    assert parse_retry_after(formatdate(NOW - 30, usegmt=True), NOW) == 0.0  # in the past: no wait


def test_retry_after_garbage():
    for value in (None, "", "soon", "-5", "1.5", "Mon, 99 Foo 2026"):
        assert parse_retry_after(value, NOW) is None


def test_adaptive_gap_follows_response_time_within_bounds():
    assert adaptive_gap(1.0, 5.0, 0.05, 30.0) == 1.0          # fast server: the minimum
    assert adaptive_gap(1.0, 5.0, 2.0, 30.0) == 10.0          # slow server: 5 x duration
    assert adaptive_gap(1.0, 5.0, 60.0, 30.0) == 30.0         # capped
    assert adaptive_gap(40.0, 5.0, 60.0, 30.0) == 40.0        # never below the robots minimum
    assert adaptive_gap(0.0, 0.0, 1.0, 30.0) == 0.0           # factor 0: off


def test_backoff_doubles_to_a_cap_and_decays():
    assert next_backoff(0.0, 1.0, 100.0) == 1.0
    assert next_backoff(1.0, 1.0, 100.0) == 2.0
    assert next_backoff(64.0, 1.0, 100.0) == 100.0
    assert decayed_backoff(8.0) == 4.0
    assert decayed_backoff(1.5) == 0.0
