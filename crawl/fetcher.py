"""The polite fetcher that runs inside one Spark task (``mapPartitions``).

A fetch task owns whole hosts (the job hash-partitions the fetchlist by host), so politeness
needs no coordination with other tasks:

  * one asyncio coroutine per host works through that host's URLs in order: this is the
    Mercator "back queue", and it means at most one request in flight per host;
  * robots.txt is fetched (or taken from the hostdb cache while fresh) before the host's
    first page, and every URL is checked against it (RFC 9309);
  * between the end of one request and the start of the next to the same host we wait at
    least max(fetch.delay_s, robots Crawl-delay); a Crawl-delay above fetch.max_crawl_delay_s
    defers the whole host instead of being ignored;
  * a semaphore caps requests in flight across the task (fetch.max_concurrency);
  * the task stops starting requests after fetch.task_time_limit_s; URLs not reached produce
    no row, stay leased until the lease expires, and are then due again.

Redirects are not followed for pages (as in Nutch with http.redirect.max=0): the target is
recorded in redirect_to and becomes an outlink, so it is normalised, deduplicated and
scheduled politely like any other URL. robots.txt redirects are followed (up to 5 hops).

Input rows are plain dicts (see ``FETCHLIST_FIELDS``); output rows are plain dicts with
``kind`` = "url" (one per attempted URL) or "host" (one per host). Times are epoch seconds.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from typing import Any, Iterable, Mapping

import aiohttp

from crawl.links import extract_outlinks
from crawl.robots import UNREACHABLE_STATUS, RobotsPolicy, effective_delay, policy_from_fetch
from crawl.status import FetchStatus, classify_http_status
from crawl.urls import InvalidUrl, normalize_url

FETCHLIST_FIELDS = ("url", "url_hash", "host", "host_bucket", "depth", "score", "segment_id",
                    "etag", "last_modified", "robots_status", "robots_txt", "robots_fetched_at")
MAX_ROBOTS_REDIRECTS = 5
_ERROR_TEXT_LIMIT = 300


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:_ERROR_TEXT_LIMIT]


class _Budget:
    """Task-wide limits: the deadline and the cap on requests in flight."""

    def __init__(self, cfg: Mapping[str, Any]):
        self.deadline = time.monotonic() + float(cfg["fetch.task_time_limit_s"])
        self.slots = asyncio.Semaphore(int(cfg["fetch.max_concurrency"]))

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """Read at most ``limit`` bytes of the (decoded) body; say whether more was left."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(65536):
        room = limit - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


class HostFetcher:
    """Fetches the URLs of one host, politely, in one coroutine."""

    def __init__(self, host: str, rows: list[Mapping[str, Any]], session: aiohttp.ClientSession,
                 cfg: Mapping[str, Any], budget: _Budget):
        self.host = host
        self.rows = rows
        self.session = session
        self.cfg = cfg
        self.budget = budget
        self.delay_s = float(cfg["fetch.delay_s"])
        self.last_end: float | None = None  # monotonic time the previous request to this host ended
        first = rows[0]
        self.host_row: dict[str, Any] = {
            "kind": "host", "host": host, "host_bucket": first["host_bucket"],
            "segment_id": first["segment_id"], "robots_status": None, "robots_txt": None,
            "robots_fetched_at": None, "crawl_delay_s": None, "deferred": False,
            "requests": 0, "pages_fetched": 0, "errors": 0, "last_fetch_at": None,
            "robots_error": None,
        }

    async def _wait_turn(self) -> None:
        if self.last_end is not None:
            gap = self.last_end + self.delay_s - time.monotonic()
            if gap > 0:
                await asyncio.sleep(gap)

    def _done(self) -> None:
        self.last_end = time.monotonic()
        self.host_row["requests"] += 1
        self.host_row["last_fetch_at"] = time.time()

    async def _robots(self) -> RobotsPolicy:
        agent = self.cfg["fetch.robots_agent"]
        max_bytes = int(self.cfg["fetch.robots_max_bytes"])
        first = self.rows[0]
        cached_at = first.get("robots_fetched_at")
        if (first.get("robots_status") is not None and cached_at is not None
                and time.time() - cached_at < float(self.cfg["fetch.robots_ttl_s"])):
            self.host_row["robots_status"] = first["robots_status"]
            return policy_from_fetch(first["robots_status"], first.get("robots_txt"), agent, max_bytes)

        scheme = first["url"].split("://", 1)[0]
        url = f"{scheme}://{self.host}/robots.txt"
        status, body = UNREACHABLE_STATUS, b""
        try:
            for _hop in range(MAX_ROBOTS_REDIRECTS + 1):
                await self._wait_turn()
                async with self.budget.slots:
                    try:
                        async with self.session.get(url, allow_redirects=False) as resp:
                            location = resp.headers.get("Location")
                            if 300 <= resp.status < 400 and location:
                                url = normalize_url(location, base=url)
                                continue
                            status = resp.status
                            body, _ = await _read_limited(resp, max_bytes)
                            break
                    finally:
                        self._done()
            # a chain longer than MAX_ROBOTS_REDIRECTS leaves status unreachable
        except (InvalidUrl, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            status, body = UNREACHABLE_STATUS, b""
            self.host_row["robots_error"] = _error_text(exc)
        self.host_row.update(robots_status=status, robots_fetched_at=time.time(),
                             robots_txt=body.decode("utf-8", "replace") if 200 <= status < 300 else None)
        return policy_from_fetch(status, body, agent, max_bytes)

    def _outcome(self, row: Mapping[str, Any], fetch_status: str, **fields: Any) -> dict[str, Any]:
        out = {"kind": "url", "url": row["url"], "url_hash": row["url_hash"], "host": self.host,
               "host_bucket": row["host_bucket"], "depth": row["depth"], "score": row["score"],
               "segment_id": row["segment_id"], "fetch_status": fetch_status, "http_status": None,
               "fetched_at": time.time(), "elapsed_ms": None, "content_type": None,
               "content_length": None, "truncated": False, "content_hash": None, "etag": None,
               "last_modified": None, "redirect_to": None, "error": None, "outlinks": []}
        out.update(fields)
        return out

    async def _fetch_page(self, row: Mapping[str, Any]) -> dict[str, Any]:
        url = row["url"]
        headers = {}
        if row.get("etag"):
            headers["If-None-Match"] = row["etag"]
        if row.get("last_modified"):
            headers["If-Modified-Since"] = row["last_modified"]
        await self._wait_turn()
        async with self.budget.slots:
            started = time.monotonic()
            try:
                async with self.session.get(url, allow_redirects=False, headers=headers) as resp:
                    code = resp.status
                    location = resp.headers.get("Location")
                    redirect_to = None
                    if 300 <= code < 400 and code != 304 and location:
                        try:
                            redirect_to = normalize_url(location, base=url)
                        except InvalidUrl:
                            redirect_to = None
                    fetch_status = classify_http_status(code, has_location=redirect_to is not None)
                    fields: dict[str, Any] = {"http_status": code,
                                              "content_type": resp.headers.get("Content-Type"),
                                              "etag": resp.headers.get("ETag"),
                                              "last_modified": resp.headers.get("Last-Modified")}
                    if fetch_status == FetchStatus.OK:
                        body, truncated = await _read_limited(resp, int(self.cfg["fetch.max_body_bytes"]))
                        fields.update(content_length=len(body), truncated=truncated,
                                      content_hash=hashlib.sha1(body).hexdigest())
                        ctype = (fields["content_type"] or "").lower()
                        if "html" in ctype or (not ctype and body.lstrip()[:1] == b"<"):
                            fields["outlinks"] = extract_outlinks(body, url, int(self.cfg["parse.max_outlinks"]))
                    elif fetch_status == FetchStatus.REDIRECT:
                        fields["redirect_to"] = redirect_to
                        fields["outlinks"] = [redirect_to]
                    elif 300 <= code < 400 and code != 304:
                        fields["error"] = f"redirect without a usable Location: {location!r}"[:_ERROR_TEXT_LIMIT]
                    if fetch_status == FetchStatus.SERVER_ERROR:
                        self.host_row["errors"] += 1
                    elif fetch_status == FetchStatus.OK:
                        self.host_row["pages_fetched"] += 1
                    fields["elapsed_ms"] = int((time.monotonic() - started) * 1000)
                    return self._outcome(row, fetch_status, **fields)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, UnicodeError) as exc:
                self.host_row["errors"] += 1
                return self._outcome(row, FetchStatus.NETWORK_ERROR, error=_error_text(exc),
                                     elapsed_ms=int((time.monotonic() - started) * 1000))
            finally:
                self._done()

    async def run(self) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        if self.budget.expired():
            return results
        policy = await self._robots()
        self.host_row["crawl_delay_s"] = policy.crawl_delay_s
        self.delay_s = effective_delay(float(self.cfg["fetch.delay_s"]), policy)
        if policy.crawl_delay_s is not None and policy.crawl_delay_s > float(self.cfg["fetch.max_crawl_delay_s"]):
            self.host_row["deferred"] = True
            results.extend(self._outcome(row, FetchStatus.DEFERRED,
                                         error=f"Crawl-delay {policy.crawl_delay_s}s above fetch.max_crawl_delay_s")
                           for row in self.rows)
            return results
        if policy.disallow_all:
            # robots.txt unreachable (5xx, 429, network error): RFC 9309 2.3.1.4 says assume
            # complete disallow. No page is requested, and the URLs are retried later rather
            # than marked robots_denied, because the cause is transient.
            fs = FetchStatus.NETWORK_ERROR if policy.status == UNREACHABLE_STATUS else FetchStatus.SERVER_ERROR
            reason = self.host_row.get("robots_error") or f"HTTP {policy.status}"
            results.extend(self._outcome(row, fs, error=f"robots.txt unreachable ({reason}): host not crawled")
                           for row in self.rows)
            return results
        for row in self.rows:
            if self.budget.expired():
                break  # not attempted: no row, the lease expires and the URL is due again
            if not policy.allowed(row["url"]):
                results.append(self._outcome(row, FetchStatus.ROBOTS_DENIED, http_status=None))
                continue
            results.append(await self._fetch_page(row))
        return results


def group_by_host(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[str, list[Mapping[str, Any]]]":
    groups: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for row in rows:
        groups.setdefault(row["host"], []).append(row)
    return groups


async def fetch_hosts(rows: Iterable[Mapping[str, Any]], cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Fetch every URL of ``rows`` (any number of hosts), politely; return url and host rows."""
    groups = group_by_host(rows)
    if not groups:
        return []
    budget = _Budget(cfg)
    timeout = aiohttp.ClientTimeout(total=float(cfg["fetch.total_timeout_s"]),
                                    connect=float(cfg["fetch.connect_timeout_s"]),
                                    sock_read=float(cfg["fetch.read_timeout_s"]))
    connector = aiohttp.TCPConnector(limit=int(cfg["fetch.max_concurrency"]), limit_per_host=1,
                                     ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     headers={"User-Agent": cfg["fetch.user_agent"]},
                                     cookie_jar=aiohttp.DummyCookieJar()) as session:
        fetchers = [HostFetcher(host, host_rows, session, cfg, budget) for host, host_rows in groups.items()]
        per_host = await asyncio.gather(*(f.run() for f in fetchers), return_exceptions=True)
    out: list[dict[str, Any]] = []
    for fetcher, result in zip(fetchers, per_host):
        if isinstance(result, BaseException):
            # A bug or an unforeseen failure in one host must not lose the other hosts' work:
            # that host's URLs produce no rows (their leases expire) and the host row says why.
            fetcher.host_row["robots_error"] = _error_text(result)
            fetcher.host_row["errors"] += 1
        else:
            out.extend(result)
        out.append(fetcher.host_row)
    return out


def fetch_partition(rows: Iterable[Mapping[str, Any]], cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Entry point for one Spark task: run the event loop over this partition's hosts."""
    return asyncio.run(fetch_hosts(list(rows), cfg))
