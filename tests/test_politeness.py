from email.utils import formatdate

from crawl.fetch.politeness import adaptive_gap, decayed_backoff, next_backoff, parse_retry_after

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


def test_override_patterns():
    from crawl.fetch.politeness import host_override, override_matches
    assert override_matches("example.com", "example.com:8080") and override_matches("example.com", "EXAMPLE.com")
    assert not override_matches("example.com", "www.example.com")
    assert override_matches("*.example.com", "www.example.com") and override_matches("*.example.com", "example.com")
    assert not override_matches("*.example.com", "badexample.com")
    entries = [{"pattern": "a.example.com", "delay_s": 9.0}, {"pattern": "*.example.com", "delay_s": 0.2}]
    assert host_override("a.example.com", entries)["delay_s"] == 9.0  # first match wins
    assert host_override("b.example.com:81", entries)["delay_s"] == 0.2
    assert host_override("other.org", entries) is None


def test_override_validation():
    import pytest
    from crawl.config import ConfigError, build_config
    cfg = build_config(overrides={"fetch.host_overrides": [{"pattern": " X.com ", "max_concurrency": 2}]})
    assert cfg["fetch.host_overrides"] == [{"pattern": "x.com", "max_concurrency": 2}]
    for bad in ('[{"delay_s": 1}]', '[{"pattern": "x", "max_concurrency": 0}]', '[{"pattern": "x", "delay_s": -1}]',
                '{"pattern": "x"}', "not json"):
        with pytest.raises(ConfigError, match="host_overrides"):
            build_config(overrides={"fetch.host_overrides": bad})
