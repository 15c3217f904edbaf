"""Reading a host's sitemaps inside its fetch task, as ordinary polite requests.

Once per ``sitemaps.ttl_s`` a host's sitemaps are read right after its robots.txt: the
``Sitemap:`` lines of robots.txt (RFC 9309 section 2.2.4 leaves them to the sitemaps
protocol), or ``/sitemap.xml`` when robots.txt names none. Only sitemaps on the host itself
are read — a request to another host from this task would bypass that host's politeness,
which lives in whichever task owns it — and only where robots.txt allows. Index files add
their children to the host's queue, up to ``sitemaps.max_files_per_host`` files; each request
keeps the host's gap like any page. Files are parsed in the guarded parser child
(crawl/parse/sitemaps.py: gzip and size limits, no DOCTYPE), and at most
``sitemaps.max_urls_per_host`` URLs are kept, filtered like links. They leave the task in the
host's row (``sitemap_entries``: url and lastmod) and update inserts the new ones and makes
known ones due when their lastmod is newer than our copy. RSS and Atom feeds are sitemaps too
(crawl/parse/sitemaps.py): those robots.txt lists, and those the host's pages announce
(``add_feeds``), read in the cycle that fetched the page.

A file that cannot be read in full — refused (a DOCTYPE, not a sitemap, malformed XML, a damaged
gzip stream, an HTTP error, a network error) or cut short (the byte limit, which is how a
decompression bomb ends, or more than ``sitemaps.max_urls_per_file`` entries) — counts once in
the host's row (``sitemap_errors``, with ``sitemap_last_error`` saying which file and why); what
was read before the cut is kept. The /sitemap.xml we guess when robots.txt names none is no
problem when it is absent: a non-2xx or HTML answer there means the host has none.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import aiohttp

from crawl.fetch.guard import refusal_of
from crawl.fetch.http import error_text, read_body
from crawl.parse.sitemaps import Sitemap, parse_sitemap
from crawl.net.urls import check_url, host_of

OTHER_HOST = "sitemap_other_host"
ROBOTS_DENIED = "sitemap_robots_denied"
MAX_ERROR_CHARS = 300  # of sitemap_last_error: the file's URL and what went wrong, shortened


class SitemapReader:
    """One host's sitemap work for this cycle (owned by a crawl.fetch.fetcher.HostQueue)."""

    def __init__(self, queue: Any):
        self.host_queue = queue
        self.queue: deque[str] = deque()
        self.planned: set[str] = set()
        self.entries: dict[str, float | None] = {}
        self.read_at: float | None = None
        self.guessed: str | None = None   # /sitemap.xml when robots.txt named no sitemap
        self.problems = 0                 # files refused or cut short (see the module docstring)
        self.last_problem: str | None = None

    def plan(self) -> None:
        """After robots.txt: queue the host's sitemaps if they are due and the host is crawlable."""
        q = self.host_queue
        cfg = q.ctx.cfg
        if not cfg.sitemaps.enabled or not q.pending or q.policy is None:
            return  # deferred, robots.txt unreachable, or nothing to do on this host
        first = q.pending[0]
        if first.get("sitemaps_fetched_at") is not None:
            return  # read within sitemaps.ttl_s (generate passes the time only while fresh)
        recent = q.ctx.earlier.sitemaps_at.get(q.host)
        if recent is not None and time.time() - recent < cfg.sitemaps.ttl_s:
            return  # read by the segment fetched just before, not yet updated (crawl.overlap)
        listed = q.host_row.get("sitemaps") if q.host_row.get("robots_fetched_at") else first.get("sitemaps")
        scheme = first["url"].split("://", 1)[0]
        candidates = list(listed or [])
        if not candidates:
            self.guessed = check_url(f"{scheme}://{q.host}/sitemap.xml")[0]
            candidates = [f"{scheme}://{q.host}/sitemap.xml"]
        self.read_at = time.time()
        for url in candidates:
            self._add(url)

    def add_feeds(self, feeds: list[str]) -> None:
        """RSS/Atom feeds a page of the host announced (crawl.parse.links): read in this cycle like
        its sitemaps (same checks: on the host itself, allowed by robots.txt, each once, within
        sitemaps.max_files_per_host), and their items' dates are lastmod hints. Not held back by
        sitemaps.ttl_s: only a page that was just fetched and parsed (new or changed: a 304 is not
        parsed) names them, and a site that changes is when its feed says what changed."""
        q = self.host_queue
        if feeds and q.ctx.cfg.sitemaps.enabled and q.policy is not None and not q.blocked:
            for url in feeds:
                self._add(url)

    def _add(self, url: str) -> None:
        q = self.host_queue
        canonical, reason = check_url(url, None, q.ctx.links.rules)
        if canonical is None:
            q.links.rejects[f"sitemap_{reason}"] += 1
            return
        if host_of(canonical) != q.host:
            q.links.rejects[OTHER_HOST] += 1
            return
        if not q.policy.allowed(canonical):
            q.links.rejects[ROBOTS_DENIED] += 1
            return
        if canonical in self.planned or len(self.planned) >= int(q.ctx.cfg.sitemaps.max_files_per_host):
            return
        self.planned.add(canonical)
        self.queue.append(canonical)

    async def read_next(self) -> None:
        """Fetch and parse one sitemap file (one request: the scheduler keeps the gap)."""
        q = self.host_queue
        cfg = q.ctx.cfg
        url = self.queue.popleft()
        max_bytes = cfg.sitemaps.max_bytes_per_file
        await q.spaced_send("sitemap", url)
        started = time.monotonic()
        body = b""
        problem: str | None = None  # one per file, the first seen
        cut = False                 # the body was cut at max_bytes: its end is no end of the file
        try:
            async with q.ctx.session.get(url, allow_redirects=False, headers=dict(q.ctx.request_headers)) as resp:
                if url == self.guessed and (not 200 <= resp.status < 300 or
                                            "html" in (resp.headers.get("Content-Type") or "").lower()):
                    pass  # no sitemap at the place we guessed: nothing to read, nothing to count
                elif 200 <= resp.status < 300:
                    read = await read_body(resp, max_bytes)
                    body, cut = read.data, read.truncated
                    if read.encoding_error:
                        problem = read.encoding_error
                    elif cut:
                        problem = f"cut at sitemaps.max_bytes_per_file ({max_bytes} bytes)"
                else:
                    problem = f"HTTP {resp.status}"
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            refusal = refusal_of(exc)
            if refusal is not None:  # the host now resolves to refused addresses: stop it all
                q.block(refusal)
            problem = refusal.message() if refusal is not None else error_text(exc)
        finally:
            q._request_ended(started)
        if body:
            max_urls = cfg.sitemaps.max_urls_per_file
            sitemap = await self._parse(body, url, max_bytes, cut)
            if sitemap.error:
                problem = problem or sitemap.error
            elif sitemap.truncated:
                problem = problem or (f"more than sitemaps.max_urls_per_file ({max_urls}) entries"
                                      if len(sitemap.urls) + len(sitemap.sitemaps) >= max_urls else
                                      f"over sitemaps.max_bytes_per_file ({max_bytes} bytes) once decoded")
        if problem is not None:
            self._problem(url, problem)
        if not body:
            return
        for reason, n in (sitemap.rejected or {}).items():
            q.links.rejects[f"sitemap_{reason}"] += int(n)
        for child in sitemap.sitemaps:
            self._add(child)
        room = cfg.sitemaps.max_urls_per_host - len(self.entries)
        reject_reason = q.ctx.links.filter.reject_reason
        for entry in sitemap.urls:
            if room <= 0:
                q.links.rejects["sitemap_over_cap"] += 1
                continue
            reason = reject_reason(entry.url, q.host)
            if reason is not None:
                q.links.rejects[reason] += 1
                continue
            if entry.url not in self.entries:
                self.entries[entry.url] = entry.lastmod
                room -= 1

    def _problem(self, url: str, text: str) -> None:
        """One file refused or cut short: counted, and the last one's URL and reason kept."""
        self.problems += 1
        self.last_problem = f"{url}: {text}"[:MAX_ERROR_CHARS]

    async def _parse(self, body: bytes, url: str, max_bytes: int, cut: bool) -> Sitemap:
        cfg = self.host_queue.ctx.cfg
        args = (body, url, cfg.sitemaps.max_urls_per_file, max_bytes, self.host_queue.ctx.links.rules, cut)
        parser = self.host_queue.ctx.parser
        if parser is None:
            return parse_sitemap(*args)
        result = await parser.call(parse_sitemap, *args)
        if isinstance(result, Sitemap):
            return result
        return Sitemap([], [], getattr(result, "error", None) or "sitemap parser failed", False, {})

    def summary(self) -> dict[str, Any]:
        """Fields for the host's row of the segment."""
        problems = {"sitemap_errors": self.problems, "sitemap_last_error": self.last_problem}
        if self.read_at is None and not self.entries:
            return {"sitemaps_fetched_at": None, "sitemap_entries": None, **problems}
        # entries of feeds alone (read_at None) leave the sitemaps' own schedule as it was
        return {"sitemaps_fetched_at": self.read_at,
                "sitemap_entries": [{"url": u, "lastmod": m} for u, m in self.entries.items()], **problems}
