"""The status model of a URL in the crawldb, and its transitions as pure functions.

Like Nutch's CrawlDatum, every URL has exactly one status:

    unfetched      known, never fetched (injected seed or discovered outlink)
    fetched        last fetch returned 2xx with content
    notmodified    last (conditional) fetch returned 304: content as before
    redirect_temp  last fetch returned 302/303/307; the target is in redirect_to
    redirect_perm  last fetch returned 301/308; the target is in redirect_to
    retry          last fetch failed transiently (network error, 5xx, 429); retried later
    gone           404/410 or another permanent 4xx, or too many transient failures
    robots_denied  robots.txt forbids it for our agent
    blocked_address  the address guard refused its host, address or port (crawl/net/addresses.py):
                   nothing was sent; the reason is in ``error``
    duplicate      its content duplicates another URL's (dup_of); set by dedup

Every status is eligible for generate once next_fetch_at has passed: gone pages are re-checked
with growing intervals until schedule.gone_max_checks, robots_denied, blocked_address and duplicate ones at
schedule.max_interval_s (sites, robots.txt and the canonical page change; update makes a
duplicate due at once when its canonical page no longer holds the content: found gone or
redirected, with changed text, or itself a duplicate). A duplicate that is
re-fetched is a duplicate again only if dedup says so (a 304 keeps it one: nothing changed);
any other answer releases it and clears dup_of. When next_fetch_at passes is the schedule's
business (crawl/crawldb/schedule.py).

A fetch attempt ends in one *fetch outcome* (``FetchStatus``), and ``apply_fetch`` maps the
current state plus that outcome to the new state. Times are epoch seconds (floats).
"""
from __future__ import annotations

import datetime
import email.utils
from dataclasses import dataclass

from typing import Any, Mapping

# the crawldb's status names live in crawl.crawldb.statuses (crawl.crawldb.schedule reads them too)
from crawl.crawldb.statuses import (ALL_STATUSES, BLOCKED_ADDRESS, DUPLICATE, FETCHED,  # noqa: F401
                                    GONE, NOTMODIFIED, REDIRECT_PERM, REDIRECT_TEMP, RETRY,
                                    ROBOTS_DENIED, UNFETCHED)


class FetchStatus:
    """What one fetch attempt of one URL ended in (the ``fetch_status`` column of a segment)."""
    OK = "ok"                         # 2xx, body read
    NOT_MODIFIED = "not_modified"     # 304
    REDIRECT = "redirect"             # 3xx with a usable Location
    NOT_FOUND = "not_found"           # 404, 410
    CLIENT_ERROR = "client_error"     # other 4xx except 429 (and 3xx without a usable Location)
    SERVER_ERROR = "server_error"     # 5xx, 429
    NETWORK_ERROR = "network_error"   # connect, timeout, reset, malformed response
    DNS_ERROR = "dns_error"           # the host's name does not exist, or has no address
    TLS_ERROR = "tls_error"           # the TLS handshake failed: certificate or protocol (crawl/fetch/tls.py)
    ROBOTS_DENIED = "robots_denied"   # robots.txt forbids it: no request was sent
    BLOCKED_ADDRESS = "blocked_address"  # the address guard refused host, address or port: nothing sent
    DEFERRED = "deferred"             # the host was deferred (e.g. Crawl-delay too large): no request
    NOT_ATTEMPTED = "not_attempted"   # the task ran out of time, or the host was stopped for this cycle

    ALL = (OK, NOT_MODIFIED, REDIRECT, NOT_FOUND, CLIENT_ERROR, SERVER_ERROR, NETWORK_ERROR, DNS_ERROR, TLS_ERROR,
           ROBOTS_DENIED, BLOCKED_ADDRESS, DEFERRED, NOT_ATTEMPTED)


PERMANENT_REDIRECT_CODES = (301, 308)


def classify_http_status(code: int, has_location: bool = False) -> str:
    """Map an HTTP status code to a FetchStatus."""
    if 200 <= code < 300:
        return FetchStatus.OK
    if code == 304:
        return FetchStatus.NOT_MODIFIED
    if 300 <= code < 400:
        return FetchStatus.REDIRECT if has_location else FetchStatus.CLIENT_ERROR
    if code in (404, 410):
        return FetchStatus.NOT_FOUND
    if code == 429 or 500 <= code < 600:
        return FetchStatus.SERVER_ERROR
    if 400 <= code < 500:
        return FetchStatus.CLIENT_ERROR
    return FetchStatus.NETWORK_ERROR  # 1xx or nonsense: the exchange did not work


def new_url_state(url: str, host: str, bucket: int, url_key: int, depth: int, score: float,
                  now: float, redirect_hops: int = 0, inlinks: int = 0,
                  discovered_segment: str | None = None) -> dict[str, Any]:
    """The row of a URL the crawldb has never seen: unfetched and due now. ``inlinks``: how many
    pages of the segment that discovered it link to it; ``discovered_segment``: that segment
    (None for a seed)."""
    return {
        "url": url, "url_hash": url_key, "host": host, "host_bucket": bucket,
        "status": UNFETCHED, "depth": depth, "score": score,
        "discovered_at": now, "last_fetched_at": None, "next_fetch_at": now,
        "fetch_interval_s": None, "retries": 0, "http_status": None,
        "etag": None, "last_modified": None, "content_hash": None, "content_type": None,
        "simhash": None, "change_count": 0, "fetch_count": 0, "dup_of": None,
        "lease_until": None, "segment_id": None,
        "warc_file": None, "warc_offset": None, "warc_length": None,
        "redirect_to": None, "error": None, "parse_error": None, "redirect_hops": redirect_hops,
        "inlinks": inlinks, "canonical_url": None, "noindex": None, "text_hash": None,
        "observed_count": 0, "first_observed_at": None, "last_observed_at": None, "last_changed_at": None,
        "gone_checks": 0, "discovered_segment": discovered_segment,
        "unchanged_s": None, "change_span_s": None, "exposure_changes": None, "refresh_value": None, "refresh_slope": None,
        "held_back": None,
    }


def lease(state: Mapping[str, Any], segment_id: str, now: float, lease_s: float) -> dict[str, Any]:
    """generate: hand the URL to a segment until ``now + lease_s``."""
    new = dict(state)
    new["lease_until"] = now + lease_s
    new["segment_id"] = segment_id
    return new


def is_due(state: Mapping[str, Any], now: float) -> bool:
    """Eligible for generate: next_fetch_at passed (whatever the status: crawl.crawldb.statuses), not
    under a live lease."""
    if state["next_fetch_at"] is None or state["next_fetch_at"] > now:
        return False
    lease_until = state.get("lease_until")
    return lease_until is None or lease_until <= now


@dataclass(frozen=True)
class SchedulePolicy:
    """What apply_fetch schedules by: the [schedule] options and what update fitted to the crawl
    (crawl.crawldb.schedule_fit.Fitted). Picklable: update's Spark path ships it to its tasks."""
    options: Any  # the [schedule] section (crawl.config.Config.schedule)
    fetch_value_s: float  # μ: options.fetch_value_s, or update's fit of it to the budget
    rate_prior: Any = None  # fitted change-rate prior (numpy array); None: log-uniform
    information_horizon_s: float = 0.0  # 0: what a fetch teaches is not valued


def schedule_policy(cfg: Mapping[str, Any], fitted: Any = None) -> SchedulePolicy:
    """The policy of ``cfg``'s schedule.* options with ``fitted`` (a schedule_fit.Fitted; None
    when nothing is fitted: the options as they are)."""
    from crawl.config import Config
    options = Config.of(cfg).schedule
    if fitted is None:
        return SchedulePolicy(options, options.fetch_value_s)
    mu = options.fetch_value_s if fitted.fetch_value_s is None else fitted.fetch_value_s
    return SchedulePolicy(options, mu, fitted.rate_prior, fitted.information_horizon_s)


def _changed(state: Mapping[str, Any], outcome: Mapping[str, Any]) -> bool:
    """Did the content change? Compared on the normalised text's hash when both fetches have
    one (markup, dates and counters do not count as changes), else on the bytes' hash."""
    old_text, new_text = state.get("text_hash"), outcome.get("text_hash")
    if old_text is not None and new_text is not None:
        return old_text != new_text
    old, new = state.get("content_hash"), outcome.get("content_hash")
    return old is not None and new is not None and old != new


def http_date_epoch(value: str | None) -> float | None:
    """An HTTP date (Last-Modified; RFC 9110 §5.6.7, the three formats it accepts) as epoch
    seconds; None when absent or unparsable (a server's bad header is not our error)."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:  # RFC 850 and asctime dates are GMT
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    try:
        return parsed.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _observe(new: dict[str, Any], state: Mapping[str, Any], at: float, changed: bool,
             policy: SchedulePolicy, modified_at: float | None = None) -> None:
    """A 2xx or 304: fold it into the URL's change history (Last-Modified, as epoch seconds in
    ``modified_at``, narrows it: schedule.record_exposure), schedule the next fetch and store what
    that fetch will buy (refresh_value, refresh_slope: generate ranks by them)."""
    from crawl.crawldb import schedule
    first = state.get("first_observed_at")
    observed = int(state.get("observed_count") or 0)
    count, changes, first, last, last_changed = schedule.record_observation(
        observed, int(state.get("change_count") or 0),
        first, state.get("last_observed_at"), state.get("last_changed_at"), at, changed)
    unchanged_s, change_span_s = state.get("unchanged_s"), state.get("change_span_s")
    if observed > 1 and (unchanged_s is None or change_span_s is None):
        # a URL recorded before the exposure columns existed: start from its counts' estimate
        _, u, cbar, _ = schedule.exposure(observed, int(state.get("change_count") or 0),
                                           state.get("first_observed_at"), state.get("last_observed_at"))
        unchanged_s, change_span_s = float(u), float(cbar) * int(state.get("change_count") or 0)
    unchanged_s, change_span_s, exposure_changes = schedule.record_exposure(
        unchanged_s, change_span_s, observed, state.get("first_observed_at"), state.get("last_observed_at"), at,
        changed and observed > 0, modified_at, max_age_credit_s=policy.options.prior_max_change_s,
        exposure_changes=state.get("exposure_changes"), change_count=int(state.get("change_count") or 0))
    importance = schedule.importance(float(state.get("score") or 0.0), int(state.get("depth") or 0),
                                     score_exponent=policy.options.score_exponent,
                                     depth_decay=policy.options.depth_decay,
                                     score_floor=policy.options.score_floor)
    interval, value, slope = schedule.next_interval_and_value(
        count, changes, first, last, importance, fetch_value_s=policy.fetch_value_s,
        min_interval_s=policy.options.min_interval_s, max_interval_s=policy.options.max_interval_s,
        prior_min_change_s=policy.options.prior_min_change_s,
        prior_max_change_s=policy.options.prior_max_change_s,
        unchanged_s=unchanged_s, change_span_s=change_span_s, exposure_changes=exposure_changes,
        rate_prior=policy.rate_prior,
        information_horizon_s=policy.information_horizon_s,
        information_max_changes=policy.options.information_max_changes)
    new.update(observed_count=int(count), change_count=int(changes), first_observed_at=first,
               last_observed_at=last, last_changed_at=last_changed, next_fetch_at=at + float(interval),
               fetch_interval_s=int(round(float(interval))), unchanged_s=unchanged_s, change_span_s=change_span_s,
               exposure_changes=exposure_changes, refresh_value=float(value), refresh_slope=float(slope))


def _gone(new: dict[str, Any], state: Mapping[str, Any], at: float, policy: SchedulePolicy) -> None:
    """A gone answer: re-checked with growing intervals, then kept as gone (never due)."""
    from crawl.crawldb import schedule
    checks = int(state.get("gone_checks") or 0) + 1
    interval = schedule.gone_interval(checks, policy.options.gone_interval_s,
                                      policy.options.max_interval_s, policy.options.gone_max_checks)
    new.update(status=GONE, gone_checks=checks,
               next_fetch_at=None if interval is None else at + float(interval),
               fetch_interval_s=None if interval is None else int(interval))


def _fixed(new: dict[str, Any], at: float, interval_s: float) -> None:
    new.update(next_fetch_at=at + interval_s, fetch_interval_s=int(interval_s))


def apply_fetch(state: Mapping[str, Any], outcome: Mapping[str, Any], policy: SchedulePolicy) -> dict[str, Any]:
    """update: the new state of a URL after one fetch outcome.

    ``outcome`` holds fetch_status, http_status, fetched_at, content_hash, content_type, etag,
    last_modified, redirect_to, error (and optionally parse_error, warc_file, warc_offset,
    warc_length, canonical, noindex, text_hash, simhash). ``policy``: the schedule's options
    and fitted values (``schedule_policy``). When the URL is due again (crawl/crawldb/schedule.py):

      2xx, 304        the change history is updated (a 304 or the same text: unchanged) and
                      the interval follows from the estimated change rate and importance;
      3xx, robots     schedule.max_interval_s (the target is crawled as a URL of its own;
                      robots.txt itself is re-read daily);
      blocked_address schedule.max_interval_s (a config change or the name's DNS may allow it later);
      404/410, 4xx    gone, re-checked after schedule.gone_interval_s, doubling, until
                      schedule.gone_max_checks answers in a row: then never due again;
      5xx, network,   retry after schedule.retry_interval_s, doubling; after
      dns, tls
                      schedule.max_retries in a row: gone, as above.

    The lease is always released: the segment is done with the URL.
    """
    fs = outcome["fetch_status"]
    if fs == FetchStatus.NOT_MODIFIED and state.get("content_hash") is None:
        # "not modified" compared with nothing we hold: a server error, retried later
        outcome = dict(outcome, fetch_status=FetchStatus.SERVER_ERROR,
                       error="304 Not Modified for a URL without a stored copy")
        fs = FetchStatus.SERVER_ERROR
    at = outcome["fetched_at"]
    longest = policy.options.max_interval_s
    new = dict(state)
    new["lease_until"] = None

    if fs in (FetchStatus.DEFERRED, FetchStatus.NOT_ATTEMPTED):
        # No request was sent: the URL stays as it was and is due again; a host's deferral or
        # backoff (host_state.deferred_until / backoff_until) keeps generate away meanwhile.
        return new

    new["last_fetched_at"] = at
    new["dup_of"] = None  # a duplicate is released by any answer but a 304 (mark_duplicate sets it)
    new["http_status"] = outcome.get("http_status")
    new["error"] = outcome.get("error")

    if fs in (FetchStatus.ROBOTS_DENIED, FetchStatus.BLOCKED_ADDRESS):
        new["status"] = fs  # the crawldb status has the outcome's name
        _fixed(new, at, longest)
        return new

    if fs in (FetchStatus.SERVER_ERROR, FetchStatus.NETWORK_ERROR, FetchStatus.DNS_ERROR, FetchStatus.TLS_ERROR):
        from crawl.crawldb import schedule
        retries = int(state.get("retries") or 0) + 1
        new["retries"] = retries
        interval = schedule.retry_interval(retries, policy.options.retry_interval_s,
                                           policy.options.max_retries, longest)
        if interval is None:
            _gone(new, state, at, policy)
        else:
            new["status"] = RETRY
            _fixed(new, at, float(interval))
        return new

    # Every other outcome is a definite answer from the server.
    new["retries"] = 0
    new["fetch_count"] = int(state.get("fetch_count") or 0) + 1

    if fs in (FetchStatus.NOT_FOUND, FetchStatus.CLIENT_ERROR):
        _gone(new, state, at, policy)
        return new
    new["gone_checks"] = 0
    if fs == FetchStatus.OK:
        _observe(new, state, at, _changed(state, outcome), policy, http_date_epoch(outcome.get("last_modified")))
        new.update(status=FETCHED, content_hash=outcome.get("content_hash"), content_type=outcome.get("content_type"),
                   etag=outcome.get("etag"), last_modified=outcome.get("last_modified"),
                   redirect_to=None, parse_error=outcome.get("parse_error"),
                   canonical_url=outcome.get("canonical"), noindex=outcome.get("noindex"),
                   text_hash=outcome.get("text_hash"), simhash=outcome.get("simhash"))
        if outcome.get("warc_file"):  # where the last full response is archived
            new.update(warc_file=outcome["warc_file"], warc_offset=outcome.get("warc_offset"),
                       warc_length=outcome.get("warc_length"))
    elif fs == FetchStatus.NOT_MODIFIED:
        _observe(new, state, at, False, policy,
                 http_date_epoch(outcome.get("last_modified") or state.get("last_modified")))
        if state.get("status") == DUPLICATE:  # the same content as when dedup judged it
            new["dup_of"] = state.get("dup_of")
            _fixed(new, at, longest)
        else:
            new["status"] = NOTMODIFIED
        if outcome.get("etag"):
            new["etag"] = outcome["etag"]
        if outcome.get("last_modified"):
            new["last_modified"] = outcome["last_modified"]
    elif fs == FetchStatus.REDIRECT:
        code = outcome.get("http_status")
        new["status"] = REDIRECT_PERM if code in PERMANENT_REDIRECT_CODES else REDIRECT_TEMP
        new["redirect_to"] = outcome.get("redirect_to")
        _fixed(new, at, longest)
    else:
        raise ValueError(f"unknown fetch status {fs!r}")
    return new


def mark_duplicate(state: Mapping[str, Any], canonical_url: str, policy: SchedulePolicy) -> dict[str, Any]:
    """dedup, applied by update after apply_fetch: the URL's content duplicates
    ``canonical_url``'s. It is re-checked after schedule.max_interval_s (its own change rate
    does not matter while it is a copy), from the fetch that found it a duplicate."""
    new = dict(state)
    new.update(status=DUPLICATE, dup_of=canonical_url)
    _fixed(new, float(new["last_fetched_at"]), policy.options.max_interval_s)
    return new


def discovered_links(outcome: Mapping[str, Any], factor: float, max_depth: int,
                     max_redirects: int) -> list[tuple[str, int, float, int]]:
    """update: (url, depth, score share, redirect_hops) for each outlink of one fetch outcome.

    A redirect's target is its only outlink and carries the chain length so far: a chain longer
    than ``max_redirects`` hops stops there (a loop stops by itself: its URLs are known).
    Links past ``max_depth`` hops from a seed are dropped. The page's score is shared by all its
    links within the crawl's rules (``outlinks_total``, known ones included), not only the new
    ones sent here; a segment without the count shares it among these."""
    links = outcome.get("outlinks") or []
    depth = int(outcome["depth"]) + 1
    if not links or depth > max_depth:
        return []
    hops = 0
    if outcome.get("fetch_status") == FetchStatus.REDIRECT:
        hops = int(outcome.get("redirect_hops") or 0) + 1
        if hops > max_redirects:
            return []
    share = outlink_score(outcome["score"], max(int(outcome.get("outlinks_total") or 0), len(links)), factor)
    return [(link, depth, share, hops) for link in links]


def outlink_score(parent_score: float, n_outlinks: int, factor: float) -> float:
    """OPIC-like share of a page's score passed to each outlink (damped by ``factor``)."""
    if n_outlinks <= 0:
        return 0.0
    return float(parent_score) * factor / n_outlinks
