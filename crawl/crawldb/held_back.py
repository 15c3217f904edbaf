"""Why a URL's host holds it back: the ``held_back`` column of url_state and host_state.

A URL that is not fetched is either not reached yet (``held_back`` NULL: it waits for its turn in
generate's budget) or held back by its host, whose last cycle stopped or rationed it. The fetcher
says why on the segment's host row (``stop_reason``, ``deferred``, ``trap_signal``: crawl/fetch/fetcher.py);
update turns that into one short reason per host (``held_back_rule``, written once over an ops
object, crawl/rule_ops.py) and copies it onto every URL row of the host:

    robots_unreachable  robots.txt answered 5xx/429 or could not be read (RFC 9309: complete disallow)
    robots_unparsable   robots.txt could not be parsed (complete disallow too)
    host_backoff        the server asked to wait (429/503 Retry-After) longer than fetch.max_wait_in_cycle_s
    crawl_delay         its Crawl-delay is above fetch.max_crawl_delay_s (host_state.deferred_until)
    tls_error           TLS handshakes failed (fetch.max_tls_failures a cycle)
    dns_error           its name did not resolve, or the resolver failed
    blocked_address     the address guard refused its name, address or port
    slow_host           its slow answers used up its share of the fetch task (fetch.host_time_factor)
    network_errors      fetch.max_consecutive_errors network errors in a row
    host_stopped        stopped for a reason this list does not name (host_state.stop_reason says it)
    trap_budget         it looked like a crawler trap: its per-cycle budget is lowered (host_state.url_budget)

The first that applies wins, in this order. Two reasons are a URL's own rather than its host's, set
on the segment's URLs the fetch did not attempt (``url_reason_rule``, over the outcome's error):

    robots_unreachable  the robots.txt of the URL's own origin (scheme) failed while the host's other
    robots_unparsable   origin was read: only that origin's URLs are held back (RFC 9309 2.3), the
                        host is not stopped, and its other URLs carry no reason
    time_limit          fetch.time_limit_s cut the fetch task before the URL's turn

A URL's own reason wins over its host's (it is why that URL was not fetched); the next cycle that
reaches the URL replaces it. The column is kept in sync by update, with a cost
bounded by what changes: the segment's own URLs (rewritten anyway) and the URLs it inserts get
their host's reason; the other URLs of a host are rewritten only in the update where the host's
reason changes (set, changed or cleared: host_state.held_back holds the previous one), and only
those whose value differs. A host that generate keeps away (backoff_until, deferred_until) is in
no segment, so its URLs keep the reason until a cycle reaches the host again and finds it well.
Seeds that inject adds for a host already held back take host_state's reason at once (jobs/inject.py).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from crawl.rule_ops import NUMPY_OPS

ROBOTS_UNREACHABLE = "robots_unreachable"
ROBOTS_UNPARSABLE = "robots_unparsable"
HOST_BACKOFF = "host_backoff"
CRAWL_DELAY = "crawl_delay"
TLS_ERROR = "tls_error"
DNS_ERROR = "dns_error"
BLOCKED_ADDRESS = "blocked_address"
SLOW_HOST = "slow_host"
NETWORK_ERRORS = "network_errors"
HOST_STOPPED = "host_stopped"
TRAP_BUDGET = "trap_budget"
TIME_LIMIT = "time_limit"

REASONS = (ROBOTS_UNREACHABLE, ROBOTS_UNPARSABLE, HOST_BACKOFF, CRAWL_DELAY, TLS_ERROR, DNS_ERROR, BLOCKED_ADDRESS,
           SLOW_HOST, NETWORK_ERRORS, HOST_STOPPED, TRAP_BUDGET, TIME_LIMIT)

# How the fetcher's stop_reason starts (crawl/fetch/fetcher.py), and the reason it gives
STOP_REASON_PREFIXES = (
    ("robots.txt unreachable", ROBOTS_UNREACHABLE),
    ("robots.txt unparsable", ROBOTS_UNPARSABLE),
    ("server asked to wait", HOST_BACKOFF),
    ("tls", TLS_ERROR),
    ("dns", DNS_ERROR),
    ("blocked_address", BLOCKED_ADDRESS),
    ("slow", SLOW_HOST),
)
NETWORK_ERRORS_SUFFIX = "network errors in a row"
# How the fetcher words the error of a URL it did not attempt (FetchStatus.NOT_ATTEMPTED) for a
# reason of the URL's own, and the reason it gives
NOT_ATTEMPTED = "not_attempted"  # crawl.crawldb.status.FetchStatus.NOT_ATTEMPTED
URL_ERROR_PREFIXES = (
    ("robots.txt unreachable", ROBOTS_UNREACHABLE),
    ("robots.txt unparsable", ROBOTS_UNPARSABLE),
    ("fetch.time_limit_s", TIME_LIMIT),
)

Host = tuple[int, str]  # (host_bucket, host)


def held_back_rule(stop_reason, deferred, trap_signal, url_budget, ops):
    """The reason (module docstring) a host holds its URLs back after a cycle that reached it,
    or null: ``stop_reason``, ``deferred`` and ``trap_signal`` are the segment's host row,
    ``url_budget`` the host's lowered budget before it (host_state; null: none)."""
    reason = ops.when(ops.not_null(trap_signal) | ops.not_null(url_budget), ops.lit(TRAP_BUDGET), ops.lit(None))
    reason = ops.when(ops.coalesce(deferred, ops.lit(False)), ops.lit(CRAWL_DELAY), reason)
    reason = ops.when(ops.not_null(stop_reason), ops.lit(HOST_STOPPED), reason)
    reason = ops.when(ops.endswith(stop_reason, NETWORK_ERRORS_SUFFIX), ops.lit(NETWORK_ERRORS), reason)
    for prefix, name in reversed(STOP_REASON_PREFIXES):
        reason = ops.when(ops.startswith(stop_reason, prefix), ops.lit(name), reason)
    return reason


def url_reason_rule(fetch_status, error, host_reason, ops):
    """The reason on a URL of the segment: its own (``URL_ERROR_PREFIXES``) when the fetch did not
    attempt it (``fetch_status``, ``error``: its outcome), else its host's ``host_reason``."""
    own = ops.lit(None)
    for prefix, name in reversed(URL_ERROR_PREFIXES):
        own = ops.when(ops.startswith(error, prefix), ops.lit(name), own)
    own = ops.when(ops.coalesce(fetch_status == ops.lit(NOT_ATTEMPTED), ops.lit(False)), own, ops.lit(None))
    return ops.coalesce(own, host_reason)


def rewrite_rule(host_changed, url_held_back, host_held_back, ops):
    """A URL not in the segment gets its host's new reason written: the host's reason changed in
    this update (``host_changed``) and the URL's own value differs (null and null: the same)."""
    return host_changed & differs_rule(url_held_back, host_held_back, ops)


def differs_rule(a, b, ops):
    """Two nullable values differ (a null and a value differ; two nulls do not): SQL's
    ``NOT (a <=> b)``, never null."""
    same = (ops.is_null(a) & ops.is_null(b)) | (ops.not_null(a) & ops.not_null(b) & (a == b))
    return ops.when(same, ops.lit(False), ops.lit(True))


def changed_rule(previous, reason, last_segment_id, segment_id: str, ops):
    """The host's reason changed in this update: host_state.held_back (``previous``) differs from
    the new one, or the hostdb already took this segment (``last_segment_id``: a re-run of an
    update that died midway; the previous value is gone, so every URL of the host is checked)."""
    rerun = ops.not_null(last_segment_id) & (last_segment_id == ops.lit(segment_id))
    return differs_rule(previous, reason, ops) | rerun


# -- the driver's path (jobs/update.py local_sources) --------------------------------------------

def host_reasons(host_rows: Iterable[Mapping[str, Any]], previous: Mapping[Host, Mapping[str, Any]]) -> dict[Host, str | None]:
    """held_back_rule of each host row of the segment; ``previous``: the hosts' host_state rows."""
    out = {}
    for h in host_rows:
        key = (h["host_bucket"], h["host"])
        old = previous.get(key) or {}
        out[key] = held_back_rule(h.get("stop_reason"), h.get("deferred"), h.get("trap_signal"),
                                  old.get("url_budget"), NUMPY_OPS)
    return out


def changed_hosts(reasons: Mapping[Host, str | None], previous: Mapping[Host, Mapping[str, Any]],
                  segment_id: str) -> dict[Host, str | None]:
    """The hosts whose reason changed in this update (changed_rule), with their new reason."""
    out = {}
    for key, reason in reasons.items():
        old = previous.get(key) or {}
        if changed_rule(old.get("held_back"), reason, old.get("last_segment_id"), segment_id, NUMPY_OPS):
            out[key] = reason
    return out


def rewrites(rows: Iterable[Mapping[str, Any]], changed: Mapping[Host, str | None],
             attempted: set[tuple[int, str]]) -> list[tuple[int, int, str, str | None]]:
    """(host_bucket, url_hash, url, held_back) of the crawldb ``rows`` (of the changed hosts) to
    rewrite: not attempted in the segment (``attempted``: (url_hash, url)), rewrite_rule."""
    out = []
    for r in rows:
        key = (r["host_bucket"], r["host"])
        if key not in changed or (r["url_hash"], r["url"]) in attempted:
            continue
        if rewrite_rule(True, r.get("held_back"), changed[key], NUMPY_OPS):
            out.append((r["host_bucket"], r["url_hash"], r["url"], changed[key]))
    return out


def with_reasons(updates: list[dict[str, Any]], new_rows: list[dict[str, Any]], reasons: Mapping[Host, str | None],
                 previous: Mapping[Host, Mapping[str, Any]], outcomes: Iterable[Mapping[str, Any]] = ()) -> None:
    """Set ``held_back`` on the segment's updated rows (url_reason_rule: their own reason from
    their ``outcomes`` row, else their host's new one) and on the new rows (the new reason of a
    host in the segment, else host_state's), in place."""
    by_url = {(o["url_hash"], o["url"]): o for o in outcomes}
    for row in updates:
        outcome = by_url.get((row["url_hash"], row["url"])) or {}
        row["held_back"] = url_reason_rule(outcome.get("fetch_status"), outcome.get("error"),
                                           reasons.get((row["host_bucket"], row["host"])), NUMPY_OPS)
    for row in new_rows:
        key = (row["host_bucket"], row["host"])
        row["held_back"] = reasons[key] if key in reasons else (previous.get(key) or {}).get("held_back")
