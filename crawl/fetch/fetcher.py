"""The polite fetcher that runs inside one Spark task (``mapPartitions``).

A fetch task owns whole hosts (the job assigns every host to exactly one task), so politeness
needs no coordination with other tasks. Inside the task, the Mercator design:

  * one FIFO of URLs per host (``HostQueue``, the "back queue"); a host matching an entry of
    ``fetch.host_overrides`` gets that entry's delay and, if it allows it, more than one
    connection (``max_concurrency``: starts are then one gap apart);
  * a min-heap of hosts keyed by ``next_allowed_at``: the scheduler pops the host that may be
    contacted soonest, waits until then, and starts ONE request for it; the host goes back on
    the heap only when that request has ended — so there is never more than one request in
    flight per host, and at most ``fetch.max_concurrency`` in the task;
  * the address guard (crawl/net/addresses.py, crawl/fetch/guard.py) judges the host before
    anything is sent and every address the connector resolves or connects to; a refused host's
    URLs end ``blocked_address`` with the reason, and nothing is requested from it;
  * robots.txt is read per origin (RFC 9309 section 2.3: an https:// URL obeys
    https://host/robots.txt): before the first URL of each scheme of the host, that origin's
    robots.txt is fetched (a request like any other, one gap after the last) or taken from the
    hostdb cache while fresh, and every URL is checked against its own origin's policy
    (crawl/fetch/robots.py). The host key's gap holds across both schemes, at the largest
    Crawl-delay of the origins read;
  * the gap after each request is crawl.fetch.politeness.adaptive_gap: at least max(fetch.delay_s,
    Crawl-delay), growing with the server's response time; 429/503 add Retry-After or an
    exponential backoff; a wait longer than ``fetch.max_wait_in_cycle_s`` stops the host for
    this cycle and records ``backoff_until`` in host_state, which generate honours;
  * ``fetch.max_consecutive_errors`` network errors in a row stop the host for this cycle;
  * a fair time share: a host whose slow answers have cost more than ``fetch.host_time_factor``
    times the task's expected span (and more than ``fetch.host_time_floor_s``) is stopped for
    this cycle (stop_reason "slow"), so one dripping server cannot hold the whole step
    (see HostQueue._check_time_share);
  * a Crawl-delay above ``fetch.max_crawl_delay_s`` defers the host (no page requested);
  * after ``fetch.time_limit_s`` no new request starts; every URL not attempted is reported
    as ``not_attempted`` and stays due.

Bodies are read as a stream and cut at the limit of their declared type (``fetch.max_body_bytes``,
``fetch.max_pdf_bytes``, ``fetch.max_other_body_bytes`` for a type not in ``fetch.content_types``;
compressed AND decoded: we decompress ourselves, so a gzip bomb costs at most the limit), written
to WARC (crawl/fetch/warc.py) when an archive is given, and, when their type (the header's, or
sniffed: crawl/parse/registry.py) is in ``fetch.content_types`` and has a parser, parsed in a
guarded child process (crawl/parse/pool.py) when a parser is given, in the task otherwise.
Redirects are not followed inline (as in Nutch with http.redirect.max=0): the target
is recorded in redirect_to and becomes a URL of its own, fetched politely in a later cycle.

Input rows are plain dicts (``FETCHLIST_FIELDS``); output rows are plain dicts with
``kind`` = "url" (one per URL of the input) or "host" (one per host). Times are epoch seconds.
"""
from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import statistics
import time
from collections import OrderedDict, deque
from typing import Any, Iterable, Mapping, Protocol

import aiohttp

from crawl.config import Config
from crawl.crawldb.discovery import HostLinks, TaskLinks
from crawl.fetch.http import ERROR_TEXT_LIMIT, Body, accept_encoding, answer_error, error_text, read_body
from crawl.parse.page import ParseOptions
from crawl.parse.registry import (SNIFF_BYTES, body_limit, declared_media_type, detect_media_type,
                                  link_header_canonical, parse_document, parser_for)
from crawl.fetch.politeness import adaptive_gap, decayed_backoff, host_override, next_backoff, parse_retry_after
from crawl.fetch.requestlog import EarlierRequests, RequestLog
from crawl.fetch.sitemap_reader import SitemapReader
from crawl.fetch.robots import (UNREACHABLE_STATUS, OriginPolicies, RobotsAnswer, RobotsPolicy, answers_of,
                                host_columns, newest_answers, other_origin_robots, policy_from_fetch,
                                redirect_reuse, scheme_of)
from crawl.crawldb.status import FetchStatus, classify_http_status
from crawl.fetch.dns import NAME_MISSING, TaskResolver, dns_error_of, is_ip_literal
from crawl.fetch.guard import GuardedResolver, RefusedAddressError, guarded_socket_factory, refusal_of
from crawl.fetch.tls import ConnectTracker, client_context, tls_failure
from crawl.net.addresses import AddressPolicy, Refusal
from crawl.net.urls import InvalidUrl, host_of, host_without_port, normalize_url

# The typical request time of a task is the median of its last this many request durations.
RECENT_REQUESTS = 1001
# The task's expected span is recomputed at most this often (seconds): it looks at every host.
SPAN_REFRESH_S = 1.0
SLOW_STOP_REASON = "slow"
LOST_ANSWER = ("earlier attempts of this fetch task requested it and died before its answer was recorded, "
               "more than once: not requested again under this lease (it may be what killed them)")
# fetchlist fields about the host, which generate sets on one row of the host (jobs/generate.py)
HOST_FIELDS = ("robots_status", "robots_txt", "robots_fetched_at", "robots_scheme", "robots_other",
               "sitemaps", "sitemaps_fetched_at", "addresses", "addresses_expire_at")

FETCHLIST_FIELDS = ("url", "url_hash", "host", "host_bucket", "depth", "score", "segment_id",
                    "etag", "last_modified", "robots_status", "robots_txt", "robots_fetched_at",
                    "robots_scheme", "robots_other", "backoff_s", "redirect_hops", "sitemaps",
                    "sitemaps_fetched_at", "addresses", "addresses_expire_at")
MAX_ROBOTS_REDIRECTS = 5


class ArchiveError(RuntimeError):
    """The WARC store failed (a full disk, a read-only mount, an object store that refuses): our
    failure, not the site's. It fails the fetch task, so Spark retries it (the retry requests again
    what the dead attempt requested: crawl/fetch/requestlog.py) and, if the store stays broken, the
    fetch step fails with the cause; no URL uses a retry and no host is held responsible."""


class InternalError(RuntimeError):
    """Our own code failed while handling an answer (parse plumbing, a bug): the URL is reported
    not_attempted with the cause (it stays due, no retry used) and the host is not charged."""


class Archive(Protocol):
    """Where response bodies go (crawl.fetch.warc.WarcWriter)."""
    def write_exchange(self, url: str, request_headers: list[tuple[str, str]], status: int, reason: str,
                       response_headers: list[tuple[str, str]], body: bytes, fetched_at: float,
                       ip: str | None = None, truncated: str | None = None,
                       tls: tuple[str, str] | None = None) -> Any: ...
    def write_revisit(self, url: str, request_headers: list[tuple[str, str]], status: int, reason: str,
                      response_headers: list[tuple[str, str]], fetched_at: float,
                      refers_to_record_id: str | None, refers_to_date: float | None,
                      refers_to_uri: str | None, payload_digest: str | None) -> Any: ...


class Parser(Protocol):
    """Turns a body into outlinks and fingerprints, by its media type (crawl.parse.pool.BatchingParser /
    ParserPool, running crawl.parse.registry.parse_document)."""
    async def parse(self, body: bytes, url: str, content_type_header: str | None, options: ParseOptions,
                    x_robots_tag: str | None = None) -> Any: ...
    async def call(self, fn: Any, *args: Any) -> Any: ...


class TaskContext:
    """What every host of one task shares."""

    def __init__(self, cfg: Mapping[str, Any], session: aiohttp.ClientSession,
                 archive: Archive | None, parser: Parser | None, links: TaskLinks | None = None,
                 request_log: RequestLog | None = None, addresses: AddressPolicy | None = None,
                 resolver: TaskResolver | None = None, connects: ConnectTracker | None = None):
        cfg = Config.of(cfg)
        self.cfg = cfg
        self.resolver = resolver if resolver is not None else TaskResolver(cfg)
        self.connects = connects if connects is not None else ConnectTracker()
        self.addresses = addresses if addresses is not None else AddressPolicy.from_config(cfg)
        self.request_log = request_log
        self.earlier = request_log.earlier if request_log is not None else EarlierRequests()
        self.session = session
        self.archive = archive
        self.parser = parser
        self.links = links if links is not None else TaskLinks(cfg)
        self.parse_options = ParseOptions.from_config(cfg)
        self.deadline = time.monotonic() + cfg.fetch.time_limit_s
        self.request_headers = [("User-Agent", cfg.fetch.user_agent),
                                ("Accept-Encoding", accept_encoding()),
                                ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5")]
        self.hosts: list[HostQueue] = []  # every host of the task (HostQueue adds itself)
        self.recent_durations: deque[float] = deque(maxlen=RECENT_REQUESTS)
        self._span: tuple[float, float] | None = None  # (computed at, expected span)

    def sent(self, kind: str, queue: "HostQueue", url: str) -> None:
        """A request of ``queue``'s host is about to be sent: log it (crawl/fetch/requestlog.py)."""
        if self.request_log is not None:
            self.request_log.sent(kind, queue.host, url, queue.min_gap)

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def expected_span_s(self) -> float:
        """Seconds the task's longest host would take at the task's typical request time: max over
        hosts still crawled of URLs x (typical request + the gap after it) / connections. It is what
        politeness makes the task last when answers are ordinary; one slow host barely moves it (the
        typical time is a median), while a task whose hosts are all slow gets a long span."""
        now = time.monotonic()
        if self._span is not None and now - self._span[0] < SPAN_REFRESH_S:
            return self._span[1]
        typical = statistics.median(self.recent_durations) if self.recent_durations else 0.0
        factor, max_delay = self.cfg.fetch.delay_factor, self.cfg.fetch.max_delay_s
        span = 0.0
        for q in self.hosts:
            if q.host_row["deferred"] or q.host_row["stop_reason"] is not None:
                continue  # fetches nothing more this cycle
            per_request = typical + adaptive_gap(q.min_gap, factor, typical, max_delay)
            span = max(span, q.planned * per_request / q.slots)
        self._span = (now, span)
        return span


class HostQueue:
    """One host's back queue and politeness state; ``step()`` performs at most one request."""

    def __init__(self, host: str, rows: list[Mapping[str, Any]], ctx: TaskContext):
        self.host = host
        # generate puts the host's cached robots.txt and sitemap fields on its best row only: that
        # row goes first (robots and sitemap planning read pending[0]); a host without a cache has
        # none, and the order stays
        rows = list(rows)
        carrier = next((i for i, r in enumerate(rows) if any(r.get(c) is not None for c in HOST_FIELDS)), 0)
        if carrier:
            rows.insert(0, rows.pop(carrier))
        self.pending: deque[Mapping[str, Any]] = deque(rows)
        self.ctx = ctx
        cfg = ctx.cfg
        self.override = host_override(host, list(cfg.fetch.host_overrides)) or {}
        self.base_delay = float(self.override.get("delay_s", cfg.fetch.delay_s))
        self.slots = int(self.override.get("max_concurrency", 1))
        self.active = 0
        self.in_heap = True
        self.min_gap = self.base_delay
        self.gap = self.min_gap
        self.penalty = float(rows[0].get("backoff_s") or 0.0)  # carried over from earlier cycles
        self.planned = len(rows)
        # seconds this host has cost beyond its politeness minimum: its requests' durations plus
        # what the adaptive gaps after them added to min_gap (not Crawl-delay, not fetch.delay_s)
        self.slow_s = 0.0
        # the wall clock first: a pause between the two readings (a GC pause, a loaded machine) then
        # makes the wait after an earlier contact below longer, never shorter
        wall_now = time.time()
        self.next_allowed = time.monotonic()
        # when (time.monotonic()) the host's last request known to us ended: ours, or an earlier
        # attempt's or segment's (below); None: none known. A Crawl-delay learned from robots.txt
        # (fetched or cached) counts from it.
        self.last_end: float | None = None
        self.last_send = float("-inf")  # when this task last sent a request to the host (spaced_send)
        # an earlier attempt of this task (or run of this fetch) that died may have contacted the
        # host moments ago: its last request counts as ours, at the largest gap it kept (a
        # Crawl-delay is only known again once robots.txt is read), and as ending as late as it
        # may have (crawl/fetch/requestlog.py). Every later start is at least min_gap after
        # something that came after that request.
        earlier_at = ctx.earlier.last_contact(host, cfg.fetch.total_timeout_s)
        if earlier_at is not None:
            earlier_gap = max(self.min_gap, ctx.earlier.gap_s.get(host, 0.0))
            since = max(0.0, wall_now - earlier_at)
            self.last_end = self.next_allowed - since
            self.next_allowed += max(0.0, earlier_gap - since)
        # one robots.txt policy per origin (scheme) of the host key, and the answers they come from:
        # the hostdb's cache (on the carrier row), the segments fetched just before (crawl.overlap),
        # and what this task reads. ``robots_changed``: the host row carries them all to the hostdb.
        self.policies: OriginPolicies = OriginPolicies()
        cached = answers_of(rows[0])
        recent = ctx.earlier.robots.get(host, {})
        self.answers: dict[str, RobotsAnswer] = newest_answers(cached, recent)
        self.robots_changed = self.answers != cached
        self._reading: set[str] = set()  # origins whose robots.txt a step is reading now
        self.consecutive_errors = 0
        self.results: list[dict[str, Any]] = []
        self.links: HostLinks = ctx.links.for_host(host)
        self.sitemaps = SitemapReader(self)
        self.blocked = False
        self.halted = False  # stopped before any request: its name did not resolve (_resolve)
        self.resolved = False
        self.tls_failures = 0  # failed TLS handshakes this cycle (fetch.max_tls_failures)
        first = rows[0]
        self.host_row: dict[str, Any] = {
            "kind": "host", "host": host, "host_bucket": first["host_bucket"],
            "segment_id": first["segment_id"], "robots_status": None, "robots_txt": None,
            "robots_fetched_at": None, "robots_error": None, "robots_scheme": None, "robots_other": None,
            "crawl_delay_s": None, "sitemaps": None,
            # the host name's addresses and when they expire (crawl/fetch/dns.py), the queries this
            # task sent for it, and why the last DNS or TLS attempt failed (None: it did not)
            "addresses": None, "addresses_expire_at": None, "dns_queries": 0, "dns_error": None,
            "tls_error": None,
            "deferred": False, "backoff_until": None, "backoff_s": None, "stop_reason": None,
            "requests": 0, "pages_fetched": 0, "errors": 0, "last_fetch_at": None,
            "mean_response_ms": None, "override_pattern": self.override.get("pattern"),
            "min_delay_s": None,
        }
        self._durations: list[float] = []
        self._ended_for: float | None = None  # start time of the last request already accounted for
        ctx.hosts.append(self)
        refusal = ctx.addresses.host_refusal(host, first["url"].split("://", 1)[0])
        if refusal is not None:
            self.block(refusal)

    # -- bookkeeping -------------------------------------------------------------------------
    @property
    def policy(self) -> OriginPolicies | None:
        """The policies of the origins read so far (each URL judged by its own), None before any."""
        return self.policies or None

    @property
    def done(self) -> bool:
        return (not self.pending and (bool(self.policies) or self.blocked or self.halted)
                and not self.sitemaps.queue)

    @property
    def can_start_more(self) -> bool:
        """Another request may start before this one ends (only with a max_concurrency override)."""
        return (self.active < self.slots and bool(self.pending)
                and scheme_of(self.pending[0]["url"]) in self.policies)

    def _outcome(self, row: Mapping[str, Any], fetch_status: str, **fields: Any) -> dict[str, Any]:
        out = {"kind": "url", "url": row["url"], "url_hash": row["url_hash"], "host": self.host,
               "host_bucket": row["host_bucket"], "depth": row["depth"], "score": row["score"],
               "segment_id": row["segment_id"], "fetch_status": fetch_status, "http_status": None,
               "fetched_at": time.time(), "elapsed_ms": None, "content_type": None,
               "content_length": None, "truncated": False, "content_hash": None, "etag": None,
               "last_modified": None, "redirect_to": None, "error": None, "outlinks": [],
               "outlinks_total": None, "parse_error": None, "warc_file": None, "warc_offset": None, "warc_length": None,
               "payload_digest": None, "redirect_hops": row.get("redirect_hops"), "canonical": None,
               "noindex": None, "text_hash": None, "simhash": None, "signature": None}
        out.update(fields)
        return out

    def give_up(self, fetch_status: str, reason: str) -> None:
        """Report every URL still queued as not fetched in this cycle (they stay due)."""
        self.sitemaps.queue.clear()
        while self.pending:
            self.results.append(self._outcome(self.pending.popleft(), fetch_status, error=reason))

    def block(self, refusal: Refusal) -> None:
        """The address guard refused this host (its name, address or port): none of its URLs is
        requested, each records blocked_address and the reason, and the host row says so."""
        self.blocked = True
        self.host_row["stop_reason"] = f"{FetchStatus.BLOCKED_ADDRESS}: {refusal.reason}"
        self.give_up(FetchStatus.BLOCKED_ADDRESS, refusal.message()[:ERROR_TEXT_LIMIT])

    def _stop_for_cycle(self, reason: str, backoff_s: float | None = None, detail: str | None = None) -> None:
        self.host_row["stop_reason"] = reason
        if backoff_s:
            self.host_row["backoff_until"] = time.time() + backoff_s
        self.give_up(FetchStatus.NOT_ATTEMPTED,
                     f"host stopped for this cycle: {reason}" + (f" ({detail})" if detail else ""))

    def _check_time_share(self) -> None:
        """Stop the host for this cycle once its slow answers have used up its share of the task.

        share = max(fetch.host_time_floor_s, fetch.host_time_factor x TaskContext.expected_span_s())

        and the host is charged ``slow_s``: the time its requests took, plus what the adaptive gaps
        after them added above its minimum gap. Sleeping for politeness (fetch.delay_s, Crawl-delay,
        Retry-After) is never charged, so a polite host with a long Crawl-delay is never stopped;
        an ordinary host (answers near the task's typical time) costs at most the expected span,
        so a factor >= 1 leaves it alone. A host whose answers drip costs many times that and is
        stopped after a bounded share; its remaining URLs stay due (not_attempted). The rule only
        ever ends a host early: it never shortens a gap."""
        cfg = self.ctx.cfg
        factor = cfg.fetch.host_time_factor
        if factor <= 0 or not self.pending or self.host_row["stop_reason"] is not None:
            return
        floor = cfg.fetch.host_time_floor_s
        if self.slow_s <= floor:
            return
        span = self.ctx.expected_span_s()
        share = max(floor, factor * span)
        if self.slow_s > share:
            self._stop_for_cycle(SLOW_STOP_REASON, detail=(
                f"{self.slow_s:.1f}s of slow answers over {self.host_row['requests']} requests, more than "
                f"its share {share:.1f}s = max(fetch.host_time_floor_s, fetch.host_time_factor x "
                f"expected task span {span:.1f}s)"))

    def _request_ended(self, started: float) -> None:
        self._ended_for = started
        ended = time.monotonic()
        duration = ended - started
        self._durations.append(duration)
        self.ctx.recent_durations.append(duration)
        self.host_row["requests"] += 1
        self.host_row["last_fetch_at"] = time.time()
        self.last_end = ended
        self.gap = adaptive_gap(self.min_gap, self.ctx.cfg.fetch.delay_factor, duration,
                                self.ctx.cfg.fetch.max_delay_s)
        self.slow_s += duration + max(0.0, self.gap - self.min_gap)
        self.next_allowed = ended + self.gap + self.penalty

    def _penalise(self, retry_after: float | None) -> None:
        """A 429/503: wait Retry-After (capped) or back off exponentially."""
        cfg = self.ctx.cfg
        cap = cfg.fetch.max_backoff_s
        if retry_after is not None:
            self.penalty = min(retry_after, cap)
        else:
            self.penalty = next_backoff(self.penalty, max(self.min_gap, 1.0), cap)
        self.host_row["backoff_s"] = self.penalty
        self.next_allowed = time.monotonic() + max(self.gap, self.penalty)
        if self.penalty > cfg.fetch.max_wait_in_cycle_s:
            self._stop_for_cycle(f"server asked to wait {self.penalty:.0f}s", backoff_s=self.penalty)

    def finish(self) -> dict[str, Any]:
        if self._durations:
            self.host_row["mean_response_ms"] = 1000.0 * sum(self._durations) / len(self._durations)
        if self.host_row["backoff_s"] is None:
            self.host_row["backoff_s"] = self.penalty  # what is left of it carries to the next cycle
        self.host_row.update(self.links.summary())
        self.host_row.update(self.sitemaps.summary())
        return self.host_row

    # -- the work ----------------------------------------------------------------------------
    async def spaced_send(self, kind: str, url: str) -> None:
        """Log a request of this host just before it is sent. With several connections (a
        max_concurrency override) the scheduler spaces the starts of steps a gap apart, but a step
        can reach its send a few ms late on a loaded machine: the sends themselves are spaced
        here too, so the host never sees two requests closer than its gap."""
        if self.slots > 1:
            wait = self.last_send + self.gap + self.penalty - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        self.last_send = time.monotonic()
        self.ctx.sent(kind, self, url)

    async def step(self) -> None:
        """Do the next piece of work: robots.txt, or one page (skipping robots-denied URLs).
        The scheduler counts the request as active when it launches this."""
        try:
            if self.resolved or await self._resolve():
                await self._step()
                self._check_time_share()
        finally:
            self.active -= 1

    async def _resolve(self) -> bool:
        """Resolve the host's name before its first request (ahead of its turn: fetch_hosts starts
        every name's lookup at once, within fetch.dns_max_in_flight). False: the host is done for
        this cycle — its name does not exist (the URLs use a retry: dns_error), the resolver failed
        (the host backs off; the URLs stay due), or every address it has is refused (the guard:
        blocked_address, never connected)."""
        self.resolved = True
        name = host_without_port(self.host).strip("[]")
        if is_ip_literal(name):
            return True
        resolver = self.ctx.resolver
        answer = await resolver.lookup(name)
        self.host_row["dns_queries"] = resolver.queries.get(name.lower(), 0)
        if answer.error is None:
            self.host_row.update(addresses=list(answer.addresses), addresses_expire_at=answer.expires_at)
            refusals = [self.ctx.addresses.address_refusal(a) for a in answer.addresses]
            if all(r is not None for r in refusals):
                first = refusals[0]
                self.block(Refusal(first.reason, f"{name} resolves to {first.detail}"))
                return False
            return True
        message = answer.message(name)
        self.host_row["dns_error"] = message[:ERROR_TEXT_LIMIT]
        self.halted = True
        if answer.error in NAME_MISSING:
            self.host_row["stop_reason"] = f"dns {answer.error}"
            self.give_up(FetchStatus.DNS_ERROR, message[:ERROR_TEXT_LIMIT])
        else:
            self._back_off(f"dns {answer.error}", message)
        return False

    def _back_off(self, stop_reason: str, detail: str) -> None:
        """Stop the host for this cycle and keep generate away from it for a while that doubles with
        every failure in a row (fetch.robots_retry_s up to fetch.max_backoff_s): its robots.txt, DNS
        or TLS failed. Its URLs stay due, no retry used."""
        cfg = self.ctx.cfg
        previous = float(self.pending[0].get("backoff_s") or 0.0) if self.pending else 0.0
        backoff = next_backoff(previous, cfg.fetch.robots_retry_s, cfg.fetch.max_backoff_s)
        self.host_row.update(backoff_until=time.time() + backoff, backoff_s=backoff, stop_reason=stop_reason)
        self.give_up(FetchStatus.NOT_ATTEMPTED, f"{detail}: host not crawled"[:ERROR_TEXT_LIMIT])

    def connection_failure(self, exc: BaseException, url: str, started: float) -> tuple[str | None, str]:
        """(kind, text) of a failed request: kind "tls" or "dns" when the handshake or the name
        failed (noted on the host row), None for any other network error; text for the error column."""
        answer = dns_error_of(exc)
        if answer is not None:
            message = answer.message(host_without_port(self.host))
            self.host_row["dns_error"] = message[:ERROR_TEXT_LIMIT]
            return "dns", message[:ERROR_TEXT_LIMIT]
        https = url.startswith("https:")
        explicit = host_of(url).rpartition(":")[2]
        port = int(explicit) if explicit.isdigit() else (443 if https else 80)
        name = host_without_port(self.host).strip("[]")
        addresses = self.host_row.get("addresses") or ([name] if is_ip_literal(name) else [])
        failure = tls_failure(exc, https, self.ctx.connects.reached_since(addresses, port, started))
        if failure is not None:
            text = f"TLS {failure[0]}: {failure[1]}"[:ERROR_TEXT_LIMIT]
            self.host_row["tls_error"] = text
            return "tls", text
        return None, error_text(exc)

    async def _step(self) -> None:
        if self.pending and scheme_of(self.pending[0]["url"]) not in self.policies:
            scheme = scheme_of(self.pending[0]["url"])
            if scheme in self._reading:
                # another connection of this host is reading it (a max_concurrency override): come
                # back a gap later, not at once (its end sets next_allowed anew)
                self.next_allowed = max(self.next_allowed, time.monotonic() + self.min_gap)
                return
            self._reading.add(scheme)
            try:
                await self._robots(scheme)
            finally:
                self._reading.discard(scheme)
            policy = self.policies.get(scheme)
            if policy is not None and not policy.disallow_all and self.sitemaps.read_at is None:
                self.sitemaps.plan()  # after the first origin that may be crawled
            return
        if self.sitemaps.queue:
            await self.sitemaps.read_next()
            return
        # a page an attempt that died requested is requested again (with the crawldb's validators,
        # like any page): its answer died with that attempt. Not after repeated deaths
        # (crawl/fetch/requestlog.py, MAX_LOST_REQUESTS).
        earlier = self.ctx.earlier
        while self.pending:
            row = self.pending[0]
            if earlier.given_up(row["url"]):
                self.pending.popleft()
                self.results.append(self._outcome(row, FetchStatus.NOT_ATTEMPTED, error=LOST_ANSWER))
                continue
            policy = self.policies.get(scheme_of(row["url"]))
            if policy is None:
                return  # the next step reads that origin's robots.txt first (one gap later)
            if policy.allowed(row["url"]):
                break
            self.pending.popleft()
            self.results.append(self._outcome(row, FetchStatus.ROBOTS_DENIED))
        if self.pending:
            await self._fetch_page(self.pending.popleft())

    async def _robots(self, scheme: str) -> None:
        """The policy of the host's ``scheme`` origin: its cached answer while fresh, else its
        robots.txt read now (redirects followed hop by hop, each a request one gap after the last).
        A redirect to the other origin's robots.txt, whose answer this task holds, ends there: that
        answer stands for both (the ordinary http -> https move of a site), and an answer read
        through such a redirect is the other origin's too."""
        cfg = self.ctx.cfg
        agent = cfg.fetch.robots_agent
        max_bytes = cfg.fetch.robots_max_bytes
        ttl_s = cfg.fetch.robots_ttl_s
        held = self.answers.get(scheme)
        if held is not None and held.usable(time.time(), ttl_s):
            if self.robots_changed:  # read by a segment fetched just before, not updated yet
                self._record_robots()
            self._apply_policy(scheme, held.policy(agent, max_bytes), held)
            return
        origin_url = url = f"{scheme}://{self.host}/robots.txt"
        status, body, error = UNREACHABLE_STATUS, b"", None
        reused: RobotsAnswer | None = None
        started = time.monotonic()
        try:
            for hop in range(MAX_ROBOTS_REDIRECTS + 1):
                if hop:  # each hop is a request too: keep the gap
                    await asyncio.sleep(self.min_gap)
                    hop_refusal = self.ctx.addresses.host_refusal(host_of(url), url.split("://", 1)[0])
                    if hop_refusal is not None:  # a redirect into a refused address or port
                        raise RefusedAddressError(hop_refusal)
                self.ctx.sent("robots", self, url)
                async with self.ctx.session.get(url, allow_redirects=False) as resp:
                    location = resp.headers.get("Location")
                    if 300 <= resp.status < 400 and location:
                        url = normalize_url(location, base=url)
                        reused = redirect_reuse(scheme, self.host, url, self.answers, time.time(), ttl_s)
                        if reused is not None:
                            break
                        continue
                    status = resp.status
                    body = (await read_body(resp, max_bytes)).data
                    break
            else:
                error = f"more than {MAX_ROBOTS_REDIRECTS} redirects"
        except (InvalidUrl, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            refusal = refusal_of(exc)
            if refusal is not None and url == origin_url:
                # the host itself resolves only to refused addresses: no page of it is requested
                self.block(refusal)
                return
            # a redirect into a refused address is an unreachable robots.txt: complete disallow
            status, body, reused = UNREACHABLE_STATUS, b"", None
            error = refusal.message() if refusal is not None else self.connection_failure(exc, url, started)[1]
        finally:
            if self._ended_for != started:
                self._request_ended(started)
        if reused is not None:
            answer, policy = reused, reused.policy(agent, max_bytes)
        else:
            policy = policy_from_fetch(status, body, agent, max_bytes)
            answer = RobotsAnswer(scheme, status, body.decode("utf-8", "replace") if 200 <= status < 300 else None,
                                  time.time(), policy.error or error)
            other = other_origin_robots(url, self.host, scheme)
            if other is not None and status != UNREACHABLE_STATUS and not (
                    other in self.answers and self.answers[other].usable(answer.fetched_at, ttl_s)):
                # the chain ended at the other origin's own robots.txt: its answer too
                self.answers[other] = RobotsAnswer(other, status, answer.txt, answer.fetched_at, answer.error)
        self.answers[scheme] = answer
        self.robots_changed = True
        self._record_robots()
        self._apply_policy(scheme, policy, answer)

    def _record_robots(self) -> None:
        """The host row carries every origin's answer this task holds (the hostdb's robots cache
        of the host: crawl.fetch.robots.host_columns) and the Sitemap lines of them all."""
        cfg = self.ctx.cfg
        agent, max_bytes = cfg.fetch.robots_agent, cfg.fetch.robots_max_bytes
        self.host_row.update(host_columns(self.answers))
        sitemaps: list[str] = []
        for answer in sorted(self.answers.values(), key=lambda a: (-a.fetched_at, a.scheme)):
            policy = self.policies.get(answer.scheme) or answer.policy(agent, max_bytes)
            sitemaps += [u for u in policy.sitemaps if u not in sitemaps]
        self.host_row["sitemaps"] = sitemaps or None

    def _apply_policy(self, scheme: str, policy: RobotsPolicy, answer: RobotsAnswer) -> None:
        cfg = self.ctx.cfg
        self.policies[scheme] = policy
        if self.host_row["robots_status"] is None:
            self.host_row["robots_status"] = answer.status  # (a cached answer: the first origin's)
        # the gap holds for the host key across both schemes: the largest Crawl-delay read
        delay = self.policies.crawl_delay_s()
        self.host_row["crawl_delay_s"] = delay
        self.min_gap = max(self.base_delay, delay) if delay is not None else self.base_delay
        self.host_row["min_delay_s"] = self.min_gap
        self.gap = max(self.gap, self.min_gap)
        if self.last_end is not None:
            # the policy's gap (a Crawl-delay) after the host's last request: robots.txt's own,
            # or, when the answer was cached, the last one known; no wait when none is known
            self.next_allowed = max(self.next_allowed, self.last_end + self.min_gap)
        if policy.crawl_delay_s is not None and policy.crawl_delay_s > cfg.fetch.max_crawl_delay_s:
            # one origin's Crawl-delay is the gap of the host key: the whole host waits
            self.host_row["deferred"] = True
            self.give_up(FetchStatus.DEFERRED,
                         f"Crawl-delay {policy.crawl_delay_s}s above fetch.max_crawl_delay_s")
        elif policy.disallow_all:
            # robots.txt unreachable (5xx, 429, network error) or unparsable (the parser raised):
            # RFC 9309 2.3.1.4 says assume complete disallow, of that origin. None of its pages is
            # requested; its URLs stay due without using up their retries (not marked
            # robots_denied either: the cause may be transient). The other origin's URLs go on;
            # when no origin of the host could be read, the host backs off
            # (host_state.backoff_until) so generate leaves it alone meanwhile.
            if policy.error:  # e.g. "robots.txt unparsable: ValueError: ..."
                stop_reason, detail = "robots.txt unparsable", policy.error
            else:
                stop_reason = "robots.txt unreachable"
                detail = f"{stop_reason} ({answer.error or f'HTTP {policy.status}'})"
            self.host_row["robots_error"] = self.host_row["robots_error"] or answer.error or policy.error
            if all(p.disallow_all for p in self.policies.values()) and all(
                    scheme_of(r["url"]) == scheme for r in self.pending):
                self._back_off(stop_reason, detail)
            else:
                self._give_up_origin(scheme, f"{detail}: the host's {scheme}:// URLs not crawled")

    def _give_up_origin(self, scheme: str, reason: str) -> None:
        """Report the queued URLs of one origin as not fetched in this cycle (they stay due)."""
        keep: deque[Mapping[str, Any]] = deque()
        for row in self.pending:
            if scheme_of(row["url"]) == scheme:
                self.results.append(self._outcome(row, FetchStatus.NOT_ATTEMPTED, error=reason[:ERROR_TEXT_LIMIT]))
            else:
                keep.append(row)
        self.pending = keep

    async def _fetch_page(self, row: Mapping[str, Any]) -> None:
        cfg = self.ctx.cfg
        url = row["url"]
        headers = dict(self.ctx.request_headers)
        if row.get("etag"):
            headers["If-None-Match"] = row["etag"]
        if row.get("last_modified"):
            headers["If-Modified-Since"] = row["last_modified"]
        await self.spaced_send("page", url)
        started = time.monotonic()
        try:
            async with self.ctx.session.get(url, allow_redirects=False, headers=headers) as resp:
                outcome = await self._handle_response(row, resp, headers, started)
        except (asyncio.CancelledError, ArchiveError):
            raise  # the WARC store failed: the task fails and Spark retries it (ArchiveError)
        except Exception as exc:  # recorded: an outcome for the URL, ours or the site's (below)
            if self._ended_for != started:
                self._request_ended(started)
            if isinstance(exc, InternalError) or not isinstance(
                    exc, (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, UnicodeError)):
                # our own code failed, not the site: the URL stays due without using a retry, and
                # nothing counts against the host
                cause = exc.__cause__ if isinstance(exc, InternalError) and exc.__cause__ is not None else exc
                self.results.append(self._outcome(row, FetchStatus.NOT_ATTEMPTED,
                                                  error=f"internal error: {error_text(cause)}"))
                return
            refusal = refusal_of(exc)
            if refusal is not None:  # the name now resolves to refused addresses (DNS rebinding)
                self.pending.appendleft(row)
                self.block(refusal)
                return
            self.host_row["errors"] += 1
            kind, text = self.connection_failure(exc, url, started)
            elapsed_ms = int((time.monotonic() - started) * 1000)
            if kind == "tls":
                # a bad certificate or handshake is the host's, not the page's: a few tries a cycle
                self.tls_failures += 1
                self.results.append(self._outcome(row, FetchStatus.TLS_ERROR, error=text, elapsed_ms=elapsed_ms))
                if self.tls_failures >= cfg.fetch.max_tls_failures:
                    self._back_off("tls " + text.split(":", 1)[0].split()[-1], text)
                return
            if kind == "dns":
                self.results.append(self._outcome(row, FetchStatus.DNS_ERROR, error=text, elapsed_ms=elapsed_ms))
                self._back_off("dns", text)
                return
            self.consecutive_errors += 1
            self.results.append(self._outcome(row, FetchStatus.NETWORK_ERROR, error=text, elapsed_ms=elapsed_ms))
            if self.consecutive_errors >= cfg.fetch.max_consecutive_errors:
                self._stop_for_cycle(f"{self.consecutive_errors} network errors in a row")
            return
        self.consecutive_errors = 0
        self.results.append(outcome)
        if outcome["http_status"] in (429, 503):
            self.host_row["errors"] += 1
            self._penalise(parse_retry_after(outcome.pop("_retry_after", None), time.time()))
        else:
            outcome.pop("_retry_after", None)
            if outcome["fetch_status"] == FetchStatus.SERVER_ERROR:
                self.host_row["errors"] += 1
            if self.penalty:
                self.penalty = decayed_backoff(self.penalty)

    async def _handle_response(self, row: Mapping[str, Any], resp: aiohttp.ClientResponse,
                               request_headers: dict[str, str], started: float) -> dict[str, Any]:
        cfg = self.ctx.cfg
        url = row["url"]
        code = resp.status
        location = resp.headers.get("Location")
        redirect_to = None
        if 300 <= code < 400 and code != 304 and location:
            try:
                redirect_to = normalize_url(location, base=url)
            except InvalidUrl:
                redirect_to = None
            if redirect_to == url:
                redirect_to = None  # a redirect to itself is a loop: no usable target
        fetch_status = classify_http_status(code, has_location=redirect_to is not None)
        # the connection it came over, for the WARC records: aiohttp may have released it to its
        # pool already (a small body read with the headers); its protocol still holds the transport
        protocol = resp.connection.protocol if resp.connection is not None else getattr(resp, "_protocol", None)
        transport = getattr(protocol, "transport", None)
        peer = transport.get_extra_info("peername") if transport is not None else None
        connection = (str(peer[0]) if peer else _ip_of(self.host), _tls_of(transport))
        ctype = resp.headers.get("Content-Type")
        fields: dict[str, Any] = {"http_status": code, "content_type": ctype,
                                  "etag": resp.headers.get("ETag"),
                                  "last_modified": resp.headers.get("Last-Modified"),
                                  "_retry_after": resp.headers.get("Retry-After")}
        limit = body_limit(cfg, ctype, self.ctx.parse_options)  # by declared type: a PDF may be larger than a page
        body = await read_body(resp, limit) if fetch_status != FetchStatus.NOT_MODIFIED else None
        self._request_ended(started)
        fetched_at = time.time()
        fields["fetched_at"] = fetched_at
        fields["elapsed_ms"] = int((time.monotonic() - started) * 1000)
        if body is not None:
            fields.update(content_length=len(body.data), truncated=body.truncated)
            if body.encoding_error:
                fields["error"] = body.encoding_error[:ERROR_TEXT_LIMIT]
        if fetch_status == FetchStatus.OK:
            fields["content_hash"] = hashlib.sha1(body.data).hexdigest()
            self.host_row["pages_fetched"] += 1
            media = detect_media_type(ctype, body.data[:SNIFF_BYTES])
            if media and media != declared_media_type(ctype):
                fields["content_type"] = media  # sniffed: the header was missing or generic
            if parser_for(media, self.ctx.parse_options) is not None:
                try:
                    await self._parse(url, int(row["depth"]), body.data, ctype, fields,
                                      ", ".join(resp.headers.getall("X-Robots-Tag", [])) or None,
                                      ", ".join(resp.headers.getall("Link", [])) or None)
                except (asyncio.CancelledError, ArchiveError):
                    raise
                except Exception as exc:  # the parser reports bad pages in its result: this is ours
                    raise InternalError(f"parsing {url}: {error_text(exc)}") from exc
        elif fetch_status == FetchStatus.REDIRECT:
            fields["redirect_to"] = redirect_to
            fields["outlinks"] = self.links.keep([redirect_to], int(row["depth"]))
            fields["outlinks_total"] = self.links.in_scope
        elif 300 <= code < 400 and code != 304:
            fields["error"] = f"redirect without a usable Location: {location!r}"[:ERROR_TEXT_LIMIT]
        elif fetch_status != FetchStatus.NOT_MODIFIED:
            # not content: the answer itself is the error (a 429/503 with its Retry-After), so a
            # query over url_state says why without the WARC record; a decoding failure follows it
            text = answer_error(code, resp.reason, fields["_retry_after"])
            if fields.get("error"):
                text = f"{text}; {fields['error']}"
            fields["error"] = text[:ERROR_TEXT_LIMIT]
        self._archive(row, resp, request_headers, body, fetched_at, fields, connection)
        return self._outcome(row, fetch_status, **fields)

    async def _parse(self, url: str, depth: int, body: bytes, ctype: str | None, fields: dict[str, Any],
                     x_robots_tag: str | None, link_header: str | None = None) -> None:
        options = self.ctx.parse_options
        if self.ctx.parser is not None:
            result = await self.ctx.parser.parse(body, url, ctype, options, x_robots_tag)
        else:  # in-process (parse.isolate = false): the same parser, no child
            result = parse_document(body, url, ctype, options, x_robots_tag)
        links = self.links
        links.add_rejects(result.rejected)
        candidates = list(result.outlinks)
        canonical = result.canonical
        if canonical is None and link_header:  # Link: <...>; rel="canonical", the way a PDF names one
            canonical = link_header_canonical(link_header, url, options.rules)
        if canonical and canonical not in candidates:
            candidates.append(canonical)  # a hint: crawled as a URL of its own
        fields["outlinks"] = links.keep(candidates, depth)
        fields["outlinks_total"] = links.in_scope
        self.sitemaps.add_feeds(result.feeds)  # read next, like sitemaps: their dates are change hints
        fields["canonical"] = canonical
        fields["noindex"] = bool(result.noindex)
        fields["parse_error"] = result.error
        links.add_signature(result.signature)
        fields["text_hash"] = result.text_hash
        fields["simhash"] = result.simhash
        fields["signature"] = result.signature

    def _archive(self, row: Mapping[str, Any], resp: aiohttp.ClientResponse, request_headers: dict[str, str],
                 body: Body | None, fetched_at: float, fields: dict[str, Any],
                 connection: tuple[str | None, tuple[str, str] | None]) -> None:
        """Write the exchange to the WARC store; ``connection``: (IP address, TLS) it came over."""
        archive = self.ctx.archive
        if archive is None:
            return
        try:
            self._write_records(archive, row, resp, request_headers, body, fetched_at, fields, connection)
        except Exception as exc:
            raise ArchiveError(f"the WARC store failed: {error_text(exc)}") from exc

    def _write_records(self, archive: Archive, row: Mapping[str, Any], resp: aiohttp.ClientResponse,
                       request_headers: dict[str, str], body: Body | None, fetched_at: float,
                       fields: dict[str, Any], connection: tuple[str | None, tuple[str, str] | None]) -> None:
        req = list(request_headers.items())
        res = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
        ip, tls = connection
        if body is None:  # 304
            loc = archive.write_revisit(row["url"], req, resp.status, resp.reason or "", res, fetched_at,
                                        None, row.get("last_fetched_at"), row["url"], None)
        else:
            loc = archive.write_exchange(row["url"], req, resp.status, resp.reason or "", res, body.data,
                                         fetched_at, ip=ip, truncated="length" if body.truncated else None,
                                         tls=tls)
        fields.update(warc_file=loc.warc_file, warc_offset=loc.offset, warc_length=loc.length,
                      payload_digest=loc.payload_digest)


def _tls_of(transport: Any) -> tuple[str, str] | None:
    """(WARC-Protocol, WARC-Cipher-Suite) of an https connection: ("tls/1.3", "TLS_AES_256_GCM_SHA384")."""
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    version = (ssl_object.version() or "").lower().replace("tlsv", "tls/")
    cipher = ssl_object.cipher()
    return version, (cipher[0] if cipher else "")


def _ip_of(host_key: str) -> str | None:
    """The IP address a host key names (WARC-IP-Address), or None for a host name."""
    name = host_without_port(host_key)
    if name.startswith("["):
        return name[1:-1]
    return name if name[-1:].isdigit() else None


def group_by_host(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[str, list[Mapping[str, Any]]]":
    groups: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for row in rows:
        groups.setdefault(row["host"], []).append(row)
    return groups


async def run_queues(queues: list[HostQueue], ctx: TaskContext) -> None:
    """The scheduler: a min-heap of hosts by next_allowed_at, at most max_concurrency in flight."""
    order = itertools.count()
    heap = [(q.next_allowed, next(order), q) for q in queues if not q.done]
    heapq.heapify(heap)
    in_flight: dict[asyncio.Task, HostQueue] = {}
    slots = ctx.cfg.fetch.max_concurrency
    while heap or in_flight:
        if ctx.expired():
            break
        timeout = None
        if heap and len(in_flight) < slots:
            wait = heap[0][0] - time.monotonic()
            if wait <= 0:
                _, _, queue = heapq.heappop(heap)
                queue.in_heap = False
                if queue.active >= queue.slots:
                    continue  # all its connections are busy: it is queued again when one ends
                queue.active += 1
                in_flight[asyncio.ensure_future(queue.step())] = queue
                if queue.slots > 1 and queue.can_start_more:
                    # a host allowed several connections: the next start is one gap later
                    heapq.heappush(heap, (time.monotonic() + queue.gap + queue.penalty, next(order), queue))
                    queue.in_heap = True
                continue
            timeout = min(wait, max(0.0, ctx.deadline - time.monotonic()))
        elif not in_flight:
            break
        if not in_flight:
            await asyncio.sleep(timeout)
            continue
        done, _ = await asyncio.wait(in_flight, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            queue = in_flight.pop(task)
            exc = task.exception()
            if isinstance(exc, ArchiveError):
                for other in in_flight:
                    other.cancel()
                await asyncio.gather(*in_flight, return_exceptions=True)
                raise exc
            if exc is not None:
                # a bug or unforeseen failure in one host must not lose the other hosts' work
                queue.host_row["robots_error"] = queue.host_row["robots_error"] or error_text(exc)
                queue.host_row["errors"] += 1
                queue.give_up(FetchStatus.NOT_ATTEMPTED, f"internal error: {error_text(exc)}")
            elif not queue.done and not queue.in_heap:
                heapq.heappush(heap, (queue.next_allowed, next(order), queue))
                queue.in_heap = True
    if in_flight:  # the time limit fired: let the requests under way end (bounded by their timeouts)
        await asyncio.wait(in_flight)
    for queue in queues:
        queue.give_up(FetchStatus.NOT_ATTEMPTED, "fetch.time_limit_s reached")


async def fetch_hosts(rows: Iterable[Mapping[str, Any]], cfg: Mapping[str, Any],
                      archive: Archive | None = None, parser: Parser | None = None,
                      bloom: Any = None, request_log: RequestLog | None = None,
                      recent: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Fetch every URL of ``rows`` (any number of hosts), politely; return url and host rows.
    ``recent``: what the segments fetched just before know of a host (requestlog.EarlierRequests
    note_recent: when its last request ended, its gap, its robots.txt answer)."""
    groups = group_by_host(rows)
    if not groups:
        return []
    cfg = Config.of(cfg)
    timeout = aiohttp.ClientTimeout(total=cfg.fetch.total_timeout_s,
                                    connect=cfg.fetch.connect_timeout_s,
                                    sock_read=cfg.fetch.read_timeout_s)
    per_host = max([1] + [int(o.get("max_concurrency", 1)) for o in cfg.fetch.host_overrides])
    addresses = AddressPolicy.from_config(cfg)
    resolver = TaskResolver(cfg)
    for host_rows in groups.values():
        for r in host_rows:  # generate puts the host's known addresses on one of its rows
            if r.get("addresses"):
                resolver.remember(host_without_port(r["host"]).strip("[]"), r["addresses"], r.get("addresses_expire_at"))
    connects = ConnectTracker()
    guarded = guarded_socket_factory(addresses)
    # the guard is enforced where connections are made: on every resolved and connected address.
    # DNS answers are kept by TaskResolver (with their TTLs, for host_state), not aiohttp's cache.
    # An idle connection is kept fetch.keepalive_s, longer than a host's usual gap, so a host's
    # pages share one connection (one TLS handshake) within its turn.
    connector = aiohttp.TCPConnector(limit=cfg.fetch.max_concurrency, limit_per_host=per_host,
                                     use_dns_cache=False, enable_cleanup_closed=True,
                                     keepalive_timeout=cfg.fetch.keepalive_s,
                                     resolver=GuardedResolver(addresses, resolver),
                                     ssl=client_context(cfg),
                                     socket_factory=lambda info: connects.wrap(guarded(info)))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False,
                                     headers={"User-Agent": cfg.fetch.user_agent, "Accept-Encoding": accept_encoding()},
                                     cookie_jar=aiohttp.DummyCookieJar()) as session:
        ctx = TaskContext(cfg, session, archive, parser, TaskLinks(cfg, bloom), request_log, addresses,
                          resolver, connects)
        if recent:
            ctx.earlier.note_recent(recent)
        queues = [HostQueue(host, host_rows, ctx) for host, host_rows in groups.items()]
        # names are resolved ahead of their hosts' turns, at most fetch.dns_max_in_flight at once
        ahead = asyncio.ensure_future(resolver.prefetch(host_without_port(q.host).strip("[]") for q in queues))
        try:
            await run_queues(queues, ctx)
        finally:
            ahead.cancel()
            await asyncio.gather(ahead, return_exceptions=True)
            await resolver.close()
    out: list[dict[str, Any]] = []
    for queue in queues:
        out.extend(queue.results)
        out.append(queue.finish())
    return out


def fetch_partition(rows: Iterable[Mapping[str, Any]], cfg: Mapping[str, Any],
                    archive: Archive | None = None, parser: Parser | None = None,
                    bloom: Any = None, request_log: RequestLog | None = None,
                    recent: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Entry point for one Spark task: run the event loop over this partition's hosts.
    ``bloom`` (crawl.net.bloom.BloomFilter) drops outlinks the crawldb already knows; ``request_log``
    (crawl.fetch.requestlog) records each request and says what earlier attempts sent; ``recent``
    what the segments fetched just before sent (fetch_hosts)."""
    return asyncio.run(fetch_hosts(list(rows), cfg, archive, parser, bloom, request_log, recent))

