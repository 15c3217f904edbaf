"""Politeness arithmetic: gaps between requests, Retry-After, backoff. Pure functions.

The gap after a request to a host (Heritrix's "politeness delay"):

    gap = min(max(min_gap, delay_factor x last_duration), max(min_gap, max_delay))
    min_gap = max(fetch.delay_s, robots Crawl-delay, per-host override)

so a server that slows down is asked less often, and the gap shrinks back as it recovers,
never below the configured and robots minimums. A 429/503 adds a penalty: Retry-After when
the server gives one (RFC 9110 section 10.2.3: delay-seconds or an HTTP-date), else the
previous penalty doubled (exponential backoff), capped.
"""
from __future__ import annotations

from email.utils import parsedate_to_datetime
from typing import Any

from crawl.net.urls import host_without_port
from crawl.rule_ops import NUMPY_OPS


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header value, or None if absent or unparseable."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # HTTP-dates are GMT (RFC 9110 section 5.6.7)
        from datetime import timezone
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now)


def adaptive_gap(min_gap: float, delay_factor: float, last_duration: float, max_delay: float) -> float:
    """The gap before the next request to a host, given how long the last one took."""
    ceiling = max(min_gap, max_delay)
    return min(max(min_gap, delay_factor * max(0.0, last_duration)), ceiling)


def next_backoff(previous: float, base: float, cap: float) -> float:
    """Exponential backoff: double the previous penalty (starting at ``base``), at most ``cap``."""
    if previous <= 0:
        return min(base, cap)
    return min(previous * 2.0, cap)


def decayed_backoff(previous: float) -> float:
    """After a good answer the penalty halves, and vanishes once it is small."""
    half = previous / 2.0
    return half if half >= 1.0 else 0.0


OVERRIDE_KEYS = {"delay_s": float, "max_concurrency": int, "max_urls_per_cycle": int, "max_urls_total": int}


def host_name(host: str) -> str:
    """The host key's name: lower-case, without the port (what override patterns match;
    jobs.engine.host_caps.host_name_col in Spark)."""
    return host_without_port(host).lower()


def pattern_matches_rule(pattern: str, name, ops=NUMPY_OPS):
    """``example.com`` matches the host name (``name``: lower-case, without the port) itself;
    ``*.example.com`` also every subdomain. One definition for a host in Python and for a
    Column of host names (``ops`` = jobs.engine.column_ops.COLUMN_OPS: generate's caps)."""
    pattern = pattern.strip().lower()
    if pattern.startswith("*."):
        domain = pattern[2:]
        return (name == domain) | ops.endswith(name, "." + domain)
    return name == pattern


def override_rule(overrides: list[dict], key: str, default: int, name, ops=NUMPY_OPS):
    """``key`` of the first entry of ``overrides`` (fetch.host_overrides) that sets it and whose
    pattern matches the host name ``name``, else ``default`` (a CASE WHEN, first match wins)."""
    value = ops.lit(int(default))
    for entry in reversed(list(overrides)):  # built back to front: the first match is outermost
        if key in entry:
            value = ops.when(pattern_matches_rule(entry["pattern"], name, ops), ops.lit(int(entry[key])), value)
    return value


def override_matches(pattern: str, host: str) -> bool:
    """``example.com`` matches that host on any port; ``*.example.com`` also every subdomain."""
    return bool(pattern_matches_rule(pattern, host_name(host)))


def host_override(host: str, overrides: list[dict]) -> dict | None:
    """The first entry of ``fetch.host_overrides`` whose pattern matches ``host``, if any."""
    for entry in overrides:
        if override_matches(entry["pattern"], host):
            return entry
    return None


def override_value(cfg: Any, key: str, default: int, host: str) -> int:
    """``key`` of the first fetch.host_overrides entry matching ``host`` that sets it, else
    ``default``: override_rule for one host (jobs.engine.host_caps.override_cap is the same rule
    as a Spark Column). ``cfg`` is a crawl.config.Config (not imported here: crawl.config imports
    this module to check fetch.host_overrides at load)."""
    return int(override_rule(cfg.fetch.host_overrides, key, default, host_name(host)))


def validate_overrides(overrides: object) -> list[dict]:
    """Check the shape of ``fetch.host_overrides``; raise ValueError with a clear message."""
    if not isinstance(overrides, list):
        raise ValueError("must be a list of tables")
    checked = []
    for i, entry in enumerate(overrides):
        if not isinstance(entry, dict) or not isinstance(entry.get("pattern"), str) or not entry["pattern"].strip():
            raise ValueError(f"entry {i} needs a pattern string")
        unknown = set(entry) - set(OVERRIDE_KEYS) - {"pattern"}
        if unknown:
            raise ValueError(f"entry {i} has unknown keys {sorted(unknown)} (allowed: pattern, {', '.join(OVERRIDE_KEYS)})")
        clean = {"pattern": entry["pattern"].strip().lower()}
        for key, kind in OVERRIDE_KEYS.items():
            if key in entry:
                value = entry[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
                        (kind is int and (int(value) != value or value < 1)):
                    raise ValueError(f"entry {i}: {key} must be a {'positive integer' if kind is int else 'number >= 0'}")
                clean[key] = kind(value)
        checked.append(clean)
    return checked
