"""DevWeb: a deterministic, multi-host local test web served over loopback.

DevWeb generates a small synthetic web site for each of ``hosts`` hosts and
serves all of them from one aiohttp server that runs in a background thread.
The demo, the tests and the benchmarks use it. Everything stays on the
loopback network:

* Host ``i`` (0-based) listens on its own loopback address
  ``host_address(i)``. The addresses start at ``127.0.0.2`` and skip the
  ``.0``, ``.1`` and ``.255`` last octets, so ``i=0 -> 127.0.0.2``,
  ``i=252 -> 127.0.0.254`` and ``i=253 -> 127.0.1.2``. All hosts share one
  port. With ``port=0`` a free port is chosen. Linux routes the whole
  127.0.0.0/8 range to ``lo``, so this needs no setup.
* Host names are ``"ip:port"`` strings (``DevWeb.host_names``).

Site layout of each host::

    /robots.txt           depends on robots_kind(i) = KINDS[i % 4]:
                            "disallow"    -> User-agent: * / Disallow: /private/
                            "crawl_delay" -> User-agent: * / Crawl-delay: <s> / Disallow: /private/
                            "missing"     -> 404
                            "allow_all"   -> User-agent: * / Disallow:
    /                     index, links to /p/0.html and a few other pages
    /p/{k}.html           k in 0..pages_per_host-1
    /private/{k}.html     only on hosts whose robots.txt disallows /private/
    anything else         404 (small HTML body)

Page ``/p/k.html`` has ``links_per_page`` internal links. The first ones
follow a fixed pattern: ``k+1``, ``2k+1`` and ``2k+2``, where those pages
exist. The rest go to random pages. Because of this pattern, every page is
reachable from ``/`` in O(log pages_per_host) hops. The hrefs come in mixed
forms (``3.html``, ``./4.html``, ``../p/5.html``, ``/p/6.html``,
``http://<same host>/p/7.html``), and some carry a ``#fragment``. A page also
has ``cross_host_links`` absolute links to pages of other hosts of the same
DevWeb (only when hosts > 1). On hosts that disallow ``/private/``, the index
and every third page also link into ``/private/``, and the private pages link
back to public ones. A crawler that ignores robots.txt therefore shows up in
the request log. Hosts that do not disallow ``/private/`` never link there.

Determinism: all content (titles, text, link targets and href forms) comes
from ``random.Random`` instances seeded with the string
``"{seed}:{host index}:{page kind}:{page number}"``. The global ``random``
module is never used. Cross-host links embed the port, so two DevWeb
instances with the same parameters (seed, hosts, pages_per_host,
links_per_page, cross_host_links) and the same port serve byte-identical
sites. ``outlinks(url)`` computes the links of a page without a running
server. The port must be known: either ``port != 0`` or ``start()`` was
called.

Sitemaps (opt-in, ``sitemaps=True``)
-------------------------------------
Each host then also has ``orphan_pages`` pages ``/o/{k}.html`` that no page links to: only a
sitemap lists them (``sitemap_only_urls()``), so a crawler finds them only by reading sitemaps.
Per robots kind:

    disallow      robots.txt adds ``Sitemap: http://<host>/sitemap_index.xml``: an index of
                  /sitemap-pages.xml.gz (gzip; every /p/ page, with <lastmod>) and
                  /sitemap-orphans.xml (``sitemap_lastmod`` sets the <lastmod>)
    crawl_delay   robots.txt adds ``Sitemap: http://<host>/sitemap-orphans.xml``
    missing       (no robots.txt) /sitemap.xml lists the orphan pages
    allow_all     robots.txt lists no sitemap; /sitemap.xml lists the orphan pages

Every request is recorded in an in-memory log (``requests()``) and, when
``log_path`` is set, also appended to a JSON-lines file. An entry has ``ts``
(time the handler started), ``host``, ``path``, ``method``, ``user_agent``,
``status`` and ``done_ts`` (time the handler finished or the connection was
dropped; ``None`` while a streamed response is still running). The JSON-lines
file gets an entry once it is complete.

Hostile hosts (opt-in, ``hostile=True``)
----------------------------------------
With ``hostile=True`` the DevWeb also serves one extra host per behaviour in
``HOSTILE``, on the loopback addresses after the normal hosts (host
``hosts + j`` serves ``HOSTILE[j]``) and on the same port.
``hostile_hosts`` maps a behaviour name to its ``"ip:port"``;
``hostile_urls(name)`` gives the absolute URLs to seed for it. Normal hosts
never link to hostile hosts, and ``host_names``, ``seed_urls()``,
``outlinks()`` and ``is_disallowed()`` cover the normal hosts only. Each
hostile host has a ``/`` index that links to its entry points, and generic
pages ``/p/0.html`` .. ``/p/4.html``. Hosts whose behaviour is about robots.txt
(and ``crawl_delay_big``) also have ``/private/0.html`` and ``/private/1.html``.
Unless the behaviour says otherwise, robots.txt allows everything::

    robots_500            robots.txt -> 500
    robots_redirect       robots.txt -> 301 /real-robots.txt (Disallow: /private/)
    robots_redirect_loop  robots.txt -> 301 /robots.txt, forever
    robots_huge           2 MiB robots.txt: Disallow: /private/ at the top,
                          Disallow: /p/ only after 600 KiB (and again later)
    robots_429            robots.txt -> 429
    crawl_delay_big       Crawl-delay: 3600 (and Disallow: /private/)
    drip                  /slow.html: headers at once, then a 600-byte body one
                          byte every 100 ms (60 s); /slow.html?s=N (0 < N <= 60) sends
                          the same body in N x 10 pieces, still one every 100 ms (N s):
                          an answer that completes, slowly, under any read timeout
    no_headers            /hang.html: never answers; the connection is closed
                          after 60 s (logged with status 0)
    huge                  /big.html: 50 MiB text/html, streamed in 64 KiB chunks
    gzip_bomb             /bomb.html: Content-Encoding: gzip, ~100 KB on the wire,
                          ~100 MB once decompressed
    redirects             /rN/0 -> N hops -> /final.html (any N in 1..50; hops use
                          301/302/303/307/308 in turn, relative and absolute
                          Location forms alternate); /loop/a <-> /loop/b (302);
                          /offsite -> 302 to /p/0.html of normal host 0
    rate_limited          every page (not robots.txt) -> 429 Retry-After: 2 unless
                          2 s have passed since the last 429 of that host;
                          /date.html gives Retry-After as an IMF-fixdate (now + 3 s)
    unavailable           pages (not robots.txt) -> 503 on every other request
                          (the first one included), no Retry-After
    conditional           pages carry ETag and Last-Modified and answer 304 to a
                          matching If-None-Match or (without If-None-Match) to an
                          If-Modified-Since not older than Last-Modified
    messy                 /malformed.html, /wrong-charset.html (cp1252 bytes labelled
                          utf-8), /sjis.html (only a <meta charset="shift_jis">),
                          /bom.html, /nul.html, /empty.html (0 bytes),
                          /many-links.html (100,000 links to /l/<i>.html), /image.png,
                          /doc.pdf, /page.xhtml (application/xhtml+xml)
    traps                 /cal/<year>/<month> links to the next and previous months and
                          to its days /cal/<year>/<month>/<day> (1..28), which link to
                          the next day and their month: an exploding, near-identical space;
                          /s/<id>/page links to /s/<new id>/page; /a/ links to a/
                          (/a/a/, /a/a/a/, ...)

Streamed responses (drip, no_headers, huge) end within a moment when the client
disconnects or ``stop()`` is called. Big bodies (gzip bomb, huge robots.txt,
the 100,000-link page) are built once per process, lazily, off the event loop.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import gzip
import hashlib
import json
import math
import random
import re
import signal
import socket
import struct
import threading
import time
import zlib
from typing import Any, Callable
from urllib.parse import urldefrag, urljoin, urlsplit

from aiohttp import web

__all__ = ["DevWeb", "host_address", "KINDS", "HOSTILE"]

KINDS = ("disallow", "crawl_delay", "missing", "allow_all")

HOSTILE = (
    "robots_500", "robots_redirect", "robots_redirect_loop", "robots_huge", "robots_429",
    "crawl_delay_big", "drip", "no_headers", "huge", "gzip_bomb", "redirects",
    "rate_limited", "unavailable", "conditional", "messy", "traps",
)

_PAGE_RE = re.compile(r"^/(p|private|o)/(\d+)\.html$")

_WORDS = (
    "spark delta crawl frontier batch fetch parse robots politeness host page link "
    "anchor index table merge partition shuffle executor driver stage task queue "
    "latency throughput lake parquet schema column vector lambda graph rank score "
    "river mountain forest cloud ocean harbor lantern meadow pebble willow copper "
    "amber cobalt saffron thistle juniper falcon otter badger heron marten lynx "
    "quietly briskly gently rarely often always never slowly swiftly boldly"
).split()


def _make_vocabulary() -> tuple[str, ...]:
    """4,000 pseudo-words (syllables of _WORDS' words glued together, deterministic): distinct
    pages of the test web share few words, as real pages do, so dedup does not see them as
    near copies of each other."""
    rng = random.Random("devweb-vocabulary")
    syllables = sorted({w[i:i + 3] for w in _WORDS for i in range(0, max(1, len(w) - 2), 2)})
    words: set[str] = set(_WORDS)
    while len(words) < 4000:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))))
    return tuple(sorted(words))


_VOCABULARY = _make_vocabulary()

_MAX_PORT_TRIES = 10


def host_address(i: int) -> str:
    """Loopback IPv4 address of host ``i``: 127.0.0.2, ..., 127.0.0.254, 127.0.1.2, ..."""
    if i < 0:
        raise ValueError("host index must be >= 0")
    hi, lo = divmod(i, 253)
    if hi > 255:
        raise ValueError(f"too many hosts for 127.0.0.0/8: {i}")
    return f"127.0.{hi}.{lo + 2}"


def _address_index(ip: str) -> int | None:
    """Inverse of host_address(), or None if ``ip`` is not a DevWeb address."""
    parts = ip.split(".")
    if len(parts) != 4 or parts[0] != "127" or parts[1] != "0":
        return None
    try:
        hi, lo = int(parts[2]), int(parts[3])
    except ValueError:
        return None
    if not (0 <= hi <= 255 and 2 <= lo <= 254):
        return None
    return hi * 253 + (lo - 2)


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class DevWeb:
    """A deterministic multi-host test web on loopback addresses (see the module docstring)."""

    def __init__(
        self,
        hosts: int = 10,
        pages_per_host: int = 20,
        port: int = 0,
        seed: int = 0,
        links_per_page: int = 4,
        cross_host_links: int = 1,
        crawl_delay_s: float = 0.5,
        log_path: str | None = None,
        hostile: bool = False,
        sitemaps: bool = False,
        sitemap_lastmod: str = "2026-01-01",
    ):
        if hosts < 1:
            raise ValueError("hosts must be >= 1")
        if pages_per_host < 1:
            raise ValueError("pages_per_host must be >= 1")
        if links_per_page < 0 or cross_host_links < 0:
            raise ValueError("links_per_page and cross_host_links must be >= 0")
        if not (0 <= port <= 65535):
            raise ValueError("port must be in 0..65535")
        host_address(hosts - 1)  # validates the host count
        if hostile:
            host_address(hosts + len(HOSTILE) - 1)
        self.hosts = hosts
        self.pages_per_host = pages_per_host
        self.requested_port = port
        self.port = port
        self.seed = seed
        self.links_per_page = links_per_page
        self.cross_host_links = cross_host_links
        self.crawl_delay_s = crawl_delay_s
        self.log_path = log_path
        self.private_pages = max(1, pages_per_host // 5)
        self.sitemaps = sitemaps
        self.sitemap_lastmod = sitemap_lastmod
        self.orphan_pages = max(1, pages_per_host // 4) if sitemaps else 0
        self.addresses: list[str] = [host_address(i) for i in range(hosts)]
        self.host_names: list[str] = [f"{a}:{port}" for a in self.addresses] if port else []
        self.hostile = hostile
        self._hostile_addresses: list[str] = (
            [host_address(hosts + j) for j in range(len(HOSTILE))] if hostile else []
        )
        self.hostile_hosts: dict[str, str] = self._hostile_names() if port else {}
        # hostile state, only touched on the event loop thread
        self._last_429: float | None = None
        self._unavailable_count = 0
        self._streams: set[asyncio.BaseTransport] = set()

        self._log: list[dict[str, Any]] = []
        self._log_lock = threading.Lock()
        self._log_file = None
        self._state_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_evt: asyncio.Event | None = None
        self._sockets: list[socket.socket] = []

    # ------------------------------------------------------------------ naming

    @staticmethod
    def host_address(i: int) -> str:
        return host_address(i)

    def host_name(self, i: int) -> str:
        self._need_port()
        return f"{self.addresses[i]}:{self.port}"

    def robots_kind(self, host_index: int) -> str:
        return KINDS[host_index % 4]

    def has_private(self, host_index: int) -> bool:
        """True if the host disallows /private/ in robots.txt (and so has a private area)."""
        return self.robots_kind(host_index) in ("disallow", "crawl_delay")

    def seed_urls(self) -> list[str]:
        self._need_port()
        return [f"http://{a}:{self.port}/" for a in self.addresses]

    def sitemap_only_urls(self) -> list[str]:
        """The pages only a sitemap lists (empty unless ``sitemaps=True``)."""
        self._need_port()
        return [f"http://{a}:{self.port}/o/{k}.html" for a in self.addresses for k in range(self.orphan_pages)]

    def _sitemap(self, host: int, path: str) -> tuple[bytes, str] | None:
        """(body, content type) of a sitemap file of a normal host, or None."""
        if not self.sitemaps:
            return None
        root = f"http://{self.addresses[host]}:{self.port}"
        kind = self.robots_kind(host)

        def urlset(paths: list[str], lastmod: bool = False) -> bytes:
            items = "".join(f"<url><loc>{root}{p}</loc>" + (f"<lastmod>{self.sitemap_lastmod}</lastmod>" if lastmod else "")
                            + "</url>" for p in paths)
            return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/'
                    f'sitemap/0.9">{items}</urlset>\n').encode()

        orphans = [f"/o/{k}.html" for k in range(self.orphan_pages)]
        if path == "/sitemap_index.xml" and kind == "disallow":
            items = "".join(f"<sitemap><loc>{root}{p}</loc></sitemap>"
                            for p in ("/sitemap-pages.xml.gz", "/sitemap-orphans.xml"))
            return ('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="http://www.sitemaps.org/'
                    f'schemas/sitemap/0.9">{items}</sitemapindex>\n').encode(), "application/xml"
        if path == "/sitemap-pages.xml.gz" and kind == "disallow":
            body = urlset([f"/p/{k}.html" for k in range(self.pages_per_host)], lastmod=True)
            return gzip.compress(body, mtime=0), "application/gzip"
        if path == "/sitemap-orphans.xml" and kind in ("disallow", "crawl_delay"):
            return urlset(orphans), "application/xml"
        if path == "/sitemap.xml" and kind in ("missing", "allow_all"):
            return urlset(orphans), "application/xml"
        return None

    def _hostile_names(self) -> dict[str, str]:
        return {name: f"{a}:{self.port}" for name, a in zip(HOSTILE, self._hostile_addresses)}

    def hostile_urls(self, name: str) -> list[str]:
        """Absolute URLs to seed for hostile behaviour ``name`` (needs ``hostile=True``)."""
        self._need_port()
        if not self.hostile:
            raise KeyError(f"DevWeb was created without hostile=True: {name!r}")
        if name not in HOSTILE:
            raise KeyError(f"unknown hostile behaviour {name!r} (one of {', '.join(HOSTILE)})")
        root = f"http://{self.hostile_hosts[name]}"
        return [root + p for p in _hostile_entry_paths(name, self.seed)]

    def _need_port(self) -> None:
        if not self.port:
            raise RuntimeError("DevWeb port unknown: call start() first or pass port != 0")

    def _host_index(self, netloc: str) -> int | None:
        """Host index for an ``ip:port`` netloc of this DevWeb, else None."""
        ip, sep, port = netloc.rpartition(":")
        if not sep or not port.isdigit() or int(port) != self.port:
            return None
        idx = _address_index(ip)
        if idx is None or idx >= self.hosts:
            return None
        return idx

    # ------------------------------------------------------------------ content

    def _rng(self, host: int, kind: str, page: int | str) -> random.Random:
        return random.Random(f"{self.seed}:{host}:{kind}:{page}")

    def _page_href(self, rng: random.Random, host: int, target: str, n: int, base_dir: str) -> str:
        """An href for page /{target}/{n}.html written in a random (valid) form.

        ``base_dir`` is the directory of the linking page: "" for "/", "p" or "private".
        """
        path = f"/{target}/{n}.html"
        forms = [path, f"http://{self.addresses[host]}:{self.port}{path}"]
        if base_dir == "":
            forms += [f"{target}/{n}.html", f"./{target}/{n}.html"]
        elif base_dir == target:
            forms += [f"{n}.html", f"./{n}.html", f"../{target}/{n}.html"]
        else:
            forms += [f"../{target}/{n}.html"]
        href = rng.choice(forms)
        if rng.random() < 0.25:
            href += f"#sec-{rng.randrange(1, 4)}"
        return href

    def _internal_targets(self, rng: random.Random, k: int) -> list[int]:
        n = self.pages_per_host
        want = self.links_per_page
        targets: list[int] = []
        for t in (k + 1, 2 * k + 1, 2 * k + 2):
            if t < n and t not in targets and len(targets) < want:
                targets.append(t)
        pool = [t for t in range(n) if t != k and t not in targets]
        rng.shuffle(pool)
        while len(targets) < want:
            if pool:
                targets.append(pool.pop())
            else:  # tiny sites: repeat targets (with another href form)
                targets.append(rng.randrange(n))
        return targets

    def _links(self, host: int, path: str) -> list[tuple[str, str]] | None:
        """The (href, anchor text) pairs of the page at ``path``, or None if it is not a page."""
        n = self.pages_per_host
        links: list[tuple[str, str]] = []
        if path in ("", "/"):
            rng = self._rng(host, "index", 0)
            links.append((self._page_href(rng, host, "p", 0, ""), "Start here"))
            for t in rng.sample(range(n), min(3, n)):
                links.append((self._page_href(rng, host, "p", t, ""), f"Page {t}"))
            if self.has_private(host):
                t = rng.randrange(self.private_pages)
                links.append((self._page_href(rng, host, "private", t, ""), "Members only"))
            return links
        m = _PAGE_RE.match(path)
        if not m:
            return None
        area, k = m.group(1), int(m.group(2))
        if area == "o":
            return [("/", "Home")] if k < self.orphan_pages else None
        if area == "p":
            if k >= n:
                return None
            rng = self._rng(host, "p", k)
            for t in self._internal_targets(rng, k):
                links.append((self._page_href(rng, host, "p", t, "p"), f"Page {t}"))
            if self.hosts > 1:
                for _ in range(self.cross_host_links):
                    other = rng.randrange(self.hosts - 1)
                    other += other >= host
                    t = rng.randrange(n)
                    url = f"http://{self.addresses[other]}:{self.port}/p/{t}.html"
                    links.append((url, f"Elsewhere: host {other} page {t}"))
            if self.has_private(host) and k % 3 == 0:
                t = rng.randrange(self.private_pages)
                links.append((self._page_href(rng, host, "private", t, "p"), "Members only"))
            return links
        # private area
        if not self.has_private(host) or k >= self.private_pages:
            return None
        rng = self._rng(host, "private", k)
        links.append(("/", "Home"))
        t = rng.randrange(n)
        links.append((self._page_href(rng, host, "p", t, "private"), f"Page {t}"))
        if self.private_pages > 1:
            t = (k + 1) % self.private_pages
            links.append((self._page_href(rng, host, "private", t, "private"), f"Private {t}"))
        return links

    def _render(self, host: int, path: str) -> str | None:
        links = self._links(host, path)
        if links is None:
            return None
        rng = self._rng(host, "text", path)
        words = lambda a, b: " ".join(rng.choice(_VOCABULARY) for _ in range(rng.randint(a, b)))  # noqa: E731
        title = f"Host {host} {path} - {words(2, 4)}"
        paras = [words(12, 40).capitalize() + "." for _ in range(rng.randint(1, 3))]
        body = [f"<h1>{_html_escape(title)}</h1>"]
        body += [f"<p>{_html_escape(p)}</p>" for p in paras]
        body.append("<ul>")
        body += [f'<li><a href="{_html_escape(h)}">{_html_escape(t)}</a></li>' for h, t in links]
        body.append("</ul>")
        body.append(f"<p>{_html_escape(words(6, 20).capitalize())}.</p>")
        return (
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_html_escape(title)}</title>\n</head>\n<body>\n"
            + "\n".join(body)
            + "\n</body>\n</html>\n"
        )

    def robots_txt(self, host_index: int) -> str | None:
        """The robots.txt body of a host, or None when it has none (served as 404)."""
        kind = self.robots_kind(host_index)
        root = f"http://{self.addresses[host_index]}:{self.port}"
        if kind == "disallow":
            extra = f"Sitemap: {root}/sitemap_index.xml\n" if self.sitemaps else ""
            return "User-agent: *\nDisallow: /private/\n" + extra
        if kind == "crawl_delay":
            extra = f"Sitemap: {root}/sitemap-orphans.xml\n" if self.sitemaps else ""
            return f"User-agent: *\nCrawl-delay: {self.crawl_delay_s}\nDisallow: /private/\n" + extra
        if kind == "allow_all":
            return "User-agent: *\nDisallow:\n"
        return None

    def outlinks(self, url: str) -> list[str]:
        """Absolute, fragment-free URLs the page at ``url`` links to (deduplicated, in page order).

        Returns [] for URLs that are not pages of this DevWeb (robots.txt, 404s, other hosts).
        """
        self._need_port()
        parts = urlsplit(url)
        if parts.scheme != "http":
            return []
        host = self._host_index(parts.netloc)
        if host is None:
            return []
        links = self._links(host, parts.path)
        if links is None:
            return []
        out: list[str] = []
        seen: set[str] = set()
        for href, _ in links:
            absu = urldefrag(urljoin(url, href))[0]
            if absu not in seen:
                seen.add(absu)
                out.append(absu)
        return out

    def is_disallowed(self, url: str) -> bool:
        """True if the robots.txt of the url's host disallows it (for every user agent).

        URLs of hosts that are not part of this DevWeb are never disallowed.
        """
        self._need_port()
        parts = urlsplit(url)
        host = self._host_index(parts.netloc)
        if host is None:
            return False
        return self.has_private(host) and (parts.path or "/").startswith("/private/")

    # ------------------------------------------------------------------ log

    def _record(self, entry: dict[str, Any]) -> None:
        """Append ``entry``; it goes to the log file now if complete (done_ts set), else in _finish()."""
        with self._log_lock:
            self._log.append(entry)
            if self._log_file is not None and entry.get("done_ts") is not None:
                self._log_file.write(json.dumps(entry) + "\n")
                self._log_file.flush()

    def _finish(self, entry: dict[str, Any]) -> None:
        """Set done_ts of an entry already passed to _record(), under the lock."""
        with self._log_lock:
            if entry.get("done_ts") is not None:
                return
            entry["done_ts"] = time.time()
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry) + "\n")
                self._log_file.flush()

    def requests(self) -> list[dict]:
        with self._log_lock:
            return [dict(e) for e in self._log]

    def clear_log(self) -> None:
        with self._log_lock:
            self._log.clear()

    # ------------------------------------------------------------------ hostile hosts

    def _entry(self, request: web.Request, ts: float, ip: str, port: int) -> dict[str, Any]:
        return {
            "ts": ts,
            "host": f"{ip}:{port}",
            "path": request.path_qs,
            "method": request.method,
            "user_agent": request.headers.get("User-Agent", ""),
            "status": 0,
            "done_ts": None,
        }

    async def _handle_hostile(self, request: web.Request, name: str, entry: dict[str, Any]) -> web.StreamResponse:
        try:
            got = await self._hostile_response(request, name)
        except BaseException:  # e.g. the client left while a big body was being built
            self._record(entry)
            self._finish(entry)
            raise
        if isinstance(got, web.StreamResponse):
            entry["status"] = got.status
            entry["done_ts"] = time.time()
            self._record(entry)
            return got
        transport = request.transport
        if transport is not None:
            self._streams.add(transport)
        try:
            return await got(request, entry)
        finally:
            self._finish(entry)
            if transport is not None:
                self._streams.discard(transport)

    async def _pause(self, delay: float) -> bool:
        """Sleep ``delay`` seconds; True (early) once the server is stopping."""
        evt = self._stop_evt
        if evt is None or evt.is_set():
            return True
        try:
            await asyncio.wait_for(evt.wait(), delay)
        except asyncio.TimeoutError:
            return False
        return True

    def _hostile_page(self, name: str, path: str) -> web.Response | None:
        """The generic HTML pages of a hostile host ("/", /p/k.html, /private/k.html), else None."""
        if path == "/":
            links = [(p, p) for p in _hostile_entry_paths(name, self.seed) if p != "/"]
            links.append(("/p/0.html", "Page 0"))
            return _html(f"Hostile host: {name}", links)
        m = _PAGE_RE.match(path)
        if not m:
            return None
        area, k = m.group(1), int(m.group(2))
        if area == "p" and k < _HOSTILE_PAGES:
            links = [(f"/p/{(k + 1) % _HOSTILE_PAGES}.html", "Next"), ("/", "Home")]
            if name in _HOSTILE_PRIVATE:
                links.append((f"/private/{k % _HOSTILE_PRIVATE_PAGES}.html", "Members only"))
            return _html(f"{name} page {k}", links)
        if area == "private" and name in _HOSTILE_PRIVATE and k < _HOSTILE_PRIVATE_PAGES:
            return _html(f"{name} private page {k}", [("/", "Home"), ("/p/0.html", "Page 0")])
        return None

    async def _hostile_response(self, request: web.Request, name: str) -> Any:
        """A finished response, or an async callable (request, entry) that streams one."""
        path = request.path
        if path == "/robots.txt":
            return await self._hostile_robots(name)
        if name == "robots_redirect" and path == "/real-robots.txt":
            return _text("User-agent: *\nDisallow: /private/\n")
        if name == "drip" and path == "/slow.html":
            return self._drip
        if name == "no_headers" and path == "/hang.html":
            return self._hang
        if name == "huge" and path == "/big.html":
            return self._huge
        if name == "gzip_bomb" and path == "/bomb.html":
            body = await _cached_async("gzip_bomb", _make_gzip_bomb)
            return web.Response(body=body, headers={"Content-Type": "text/html; charset=utf-8",
                                                    "Content-Encoding": "gzip"})
        if name == "redirects":
            got = self._redirect(request)
            if got is not None:
                return got
        if name == "rate_limited":
            return self._rate_limited(path)
        if name == "unavailable":
            page = self._hostile_page(name, path)
            if page is None:
                return _not_found()
            self._unavailable_count += 1
            if self._unavailable_count % 2 == 1:
                return web.Response(status=503, text="<html><body><h1>503 Service Unavailable</h1></body></html>\n",
                                    content_type="text/html", charset="utf-8")
            return page
        if name == "conditional":
            return self._conditional(request)
        if name == "messy":
            got = await _messy(path)
            if got is not None:
                return got
        if name == "traps":
            got = self._trap(path)
            if got is not None:
                return got
        page = self._hostile_page(name, path)
        return page if page is not None else _not_found()

    async def _hostile_robots(self, name: str) -> web.Response:
        if name == "robots_500":
            return web.Response(status=500, text="Internal Server Error\n")
        if name == "robots_429":
            return web.Response(status=429, text="Too Many Requests\n")
        if name == "robots_redirect":
            return web.Response(status=301, headers={"Location": "/real-robots.txt"})
        if name == "robots_redirect_loop":
            return web.Response(status=301, headers={"Location": "/robots.txt"})
        if name == "robots_huge":
            return web.Response(body=await _cached_async("robots_huge", _make_huge_robots),
                                headers={"Content-Type": "text/plain; charset=utf-8"})
        if name == "crawl_delay_big":
            return _text("User-agent: *\nCrawl-delay: 3600\nDisallow: /private/\n")
        return _text("User-agent: *\nDisallow:\n")

    def _redirect(self, request: web.Request) -> web.Response | None:
        path = request.path
        root = f"http://{self.hostile_hosts['redirects']}"
        if path == "/final.html":
            return _html("Final destination", [("/", "Home")])
        if path == "/offsite":
            return web.Response(status=302, headers={"Location": f"http://{self.addresses[0]}:{self.port}/p/0.html"})
        if path in ("/loop/a", "/loop/b"):
            return web.Response(status=302, headers={"Location": "/loop/b" if path == "/loop/a" else "/loop/a"})
        m = _REDIRECT_RE.match(path)
        if not m:
            return None
        n, i = int(m.group(1)), int(m.group(2))
        if not (1 <= n <= 50 and i < n):
            return None
        target = f"/r{n}/{i + 1}" if i + 1 < n else "/final.html"
        if i % 2 == 1:
            target = root + target
        return web.Response(status=_REDIRECT_CODES[i % len(_REDIRECT_CODES)], headers={"Location": target})

    def _rate_limited(self, path: str) -> web.Response:
        if path == "/date.html":
            page: web.Response | None = _html("Date page", [("/", "Home")])
        else:
            page = self._hostile_page("rate_limited", path)
        if page is None:
            return _not_found()
        now = time.time()
        if self._last_429 is not None and now - self._last_429 >= _RATE_WINDOW_S:
            return page
        self._last_429 = now
        if path == "/date.html":
            retry = email.utils.formatdate(math.ceil(now) + 3, usegmt=True)
        else:
            retry = str(int(_RATE_WINDOW_S))
        return web.Response(status=429, headers={"Retry-After": retry},
                            text="<html><body><h1>429 Too Many Requests</h1></body></html>\n",
                            content_type="text/html", charset="utf-8")

    def _conditional(self, request: web.Request) -> web.Response:
        page = self._hostile_page("conditional", request.path)
        if page is None:
            return _not_found()
        assert isinstance(page.body, bytes)
        etag = '"' + hashlib.sha1(page.body).hexdigest()[:16] + '"'
        headers = {"ETag": etag, "Last-Modified": _LAST_MODIFIED}
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        if inm is not None:
            tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
            fresh = "*" in tags or etag in tags
        elif ims is not None:
            try:
                fresh = email.utils.parsedate_to_datetime(ims).timestamp() >= _LAST_MODIFIED_TS
            except (TypeError, ValueError, IndexError, OverflowError):
                fresh = False
        else:
            fresh = False
        if fresh and request.method in ("GET", "HEAD"):
            return web.Response(status=304, headers=headers)
        page.headers.update(headers)
        return page

    def _trap(self, path: str) -> web.Response | None:
        m = _CAL_RE.match(path)
        if m:
            y, mo = int(m.group(1)), int(m.group(2))
            if not 1 <= mo <= 12:
                return None
            ny, nm = (y, mo + 1) if mo < 12 else (y + 1, 1)
            py, pm = (y, mo - 1) if mo > 1 else (y - 1, 12)
            if m.group(3) is not None:  # a day: next day, and its month
                d = int(m.group(3))
                if not 1 <= d <= 28:
                    return None
                nxt = f"/cal/{y}/{mo}/{d + 1}" if d < 28 else f"/cal/{ny}/{nm}/1"
                return _html(f"Calendar {y}-{mo:02d}-{d:02d}",
                             [(nxt, "Next day"), (f"/cal/{y}/{mo}", "Month"), ("/", "Home")])
            links = [(f"/cal/{ny}/{nm}", "Next month")]
            if py >= 1:
                links.append((f"/cal/{py}/{pm}", "Previous month"))
            links += [(f"/cal/{y}/{mo}/{d}", f"Day {d}") for d in range(1, 29)]
            return _html(f"Calendar {y}-{mo:02d}", links + [("/", "Home")])
        m = _SESSION_RE.match(path)
        if m:
            new = _session_id(f"{self.seed}:{m.group(1)}")
            return _html("Session page", [(f"/s/{new}/page", "Continue"), ("/", "Home")])
        if _REPEAT_RE.match(path):
            depth = path.count("a/")
            return _html(f"Depth {depth}", [("a/", "Deeper"), ("/", "Home")])
        return None

    async def _drip(self, request: web.Request, entry: dict[str, Any]) -> web.StreamResponse:
        body = _DRIP_BODY
        pieces = len(body)
        try:  # ?s=N: the whole body in N seconds (N x 10 pieces, one per interval)
            seconds = float(request.query.get("s", ""))
            if 0 < seconds <= len(body) * _DRIP_INTERVAL_S:
                pieces = max(1, round(seconds / _DRIP_INTERVAL_S))
        except ValueError:
            pass
        size = -(-len(body) // pieces)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/html; charset=utf-8"})
        resp.content_length = len(body)
        entry["status"] = 200
        self._record(entry)
        try:
            await resp.prepare(request)
            for i in range(0, len(body), size):
                if i and await self._pause(_DRIP_INTERVAL_S):
                    _drop(request)
                    break
                await resp.write(body[i:i + size])
        except ConnectionError:  # the client went away
            pass
        return resp

    async def _hang(self, request: web.Request, entry: dict[str, Any]) -> web.StreamResponse:
        self._record(entry)  # status 0: no status line is ever sent
        deadline = time.monotonic() + _HANG_S
        while time.monotonic() < deadline:
            tr = request.transport
            if tr is None or tr.is_closing():
                break
            if await self._pause(min(0.2, max(0.0, deadline - time.monotonic()))):
                break
        _drop(request)
        # the transport is closed: aiohttp fails to send this and ignores that quietly
        return web.Response(status=200)

    async def _huge(self, request: web.Request, entry: dict[str, Any]) -> web.StreamResponse:
        chunk = _huge_chunk()
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/html; charset=utf-8"})
        resp.content_length = _HUGE_BYTES
        entry["status"] = 200
        self._record(entry)
        try:
            await resp.prepare(request)
            sent = 0
            while sent < _HUGE_BYTES:
                if self._stop_evt is None or self._stop_evt.is_set():
                    _drop(request)
                    break
                part = chunk if _HUGE_BYTES - sent >= len(chunk) else chunk[:_HUGE_BYTES - sent]
                await resp.write(part)
                sent += len(part)
        except ConnectionError:
            pass
        return resp

    # ------------------------------------------------------------------ server

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ts = time.time()
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if sockname:
            local_ip, local_port = sockname[0], sockname[1]
        else:  # pragma: no cover - transport already gone
            local_ip, local_port = "", 0
        host = _address_index(local_ip)
        if host is not None and host >= self.hosts:
            j = host - self.hosts
            if self.hostile and j < len(HOSTILE):
                entry = self._entry(request, ts, local_ip, local_port)
                return await self._handle_hostile(request, HOSTILE[j], entry)
            host = None
        path = request.path
        resp: web.Response
        if host is None:
            resp = _not_found()
        elif path == "/robots.txt":
            txt = self.robots_txt(host)
            resp = web.Response(text=txt, content_type="text/plain", charset="utf-8") if txt is not None else _not_found()
        elif (sitemap := self._sitemap(host, path)) is not None:
            resp = web.Response(body=sitemap[0], content_type=sitemap[1])
        else:
            html = self._render(host, path)
            resp = web.Response(text=html, content_type="text/html", charset="utf-8") if html is not None else _not_found()
        self._record({
            "ts": ts,
            "host": f"{local_ip}:{local_port}",
            "path": request.path_qs,
            "method": request.method,
            "user_agent": request.headers.get("User-Agent", ""),
            "status": resp.status,
            "done_ts": time.time(),
        })
        return resp

    def _bind_all(self) -> list[socket.socket]:
        """Bind one listening socket per host address on a common port."""
        tries = _MAX_PORT_TRIES if self.requested_port == 0 else 1
        last_err: OSError | None = None
        for _ in range(tries):
            socks: list[socket.socket] = []
            port = self.requested_port
            try:
                for addr in self.addresses + self._hostile_addresses:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((addr, port))
                    if port == 0:
                        port = s.getsockname()[1]
                    s.setblocking(False)
                self.port = port
                return socks
            except OSError as e:
                for s in socks:
                    s.close()
                last_err = e
                if e.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise
        assert last_err is not None
        raise last_err

    def start(self) -> "DevWeb":
        """Serve in a background daemon thread; returns once every socket is listening."""
        with self._state_lock:
            if self._thread is not None:
                raise RuntimeError("DevWeb already started")
            socks = self._bind_all()
            self._sockets = socks
            self.host_names = [f"{a}:{self.port}" for a in self.addresses]
            self.hostile_hosts = self._hostile_names()
            if self.log_path:
                self._log_file = open(self.log_path, "a", encoding="utf-8")
            ready = threading.Event()
            errors: list[BaseException] = []
            t = threading.Thread(target=self._thread_main, args=(ready, errors),
                                 name=f"devweb-{self.port}", daemon=True)
            self._thread = t
            t.start()
            ready.wait()
            if errors:
                t.join()
                self._thread = None
                self._cleanup_resources()
                raise RuntimeError("DevWeb failed to start") from errors[0]
            return self

    def _thread_main(self, ready: threading.Event, errors: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready, errors))
        except BaseException as e:  # pragma: no cover - defensive
            if not ready.is_set():
                errors.append(e)
        finally:
            ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self._loop = None

    async def _serve(self, ready: threading.Event, errors: list[BaseException]) -> None:
        self._stop_evt = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that disconnects cancels its (streaming) handler
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0,
                               handler_cancellation=True)
        try:
            await runner.setup()
            for s in self._sockets:
                await web.SockSite(runner, s, backlog=512).start()
        except BaseException as e:
            errors.append(e)
            ready.set()
            await runner.cleanup()
            return
        ready.set()
        try:
            await self._stop_evt.wait()
        finally:
            # streamed hostile responses may block in drain(): drop their connections first
            for tr in list(self._streams):
                tr.abort()
            self._streams.clear()
            await runner.cleanup()

    def _cleanup_resources(self) -> None:
        for s in self._sockets:
            try:
                s.close()
            except OSError:  # pragma: no cover
                pass
        self._sockets = []
        with self._log_lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def stop(self) -> None:
        """Stop serving, close every socket and join the thread. Idempotent."""
        with self._state_lock:
            t = self._thread
            if t is None:
                return
            loop, evt = self._loop, self._stop_evt
            if loop is not None and evt is not None:
                try:
                    loop.call_soon_threadsafe(evt.set)
                except RuntimeError:  # loop already closed
                    pass
            t.join()
            self._thread = None
            self._stop_evt = None
            self._cleanup_resources()

    def __enter__(self) -> "DevWeb":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve in the foreground until KeyboardInterrupt or SIGTERM, then stop cleanly.
        Starts the server unless start() was already called (so a caller can print the seeds first)."""
        if self._thread is None:
            self.start()
        done = threading.Event()
        old_term = None
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            old_term = signal.signal(signal.SIGTERM, lambda *_: done.set())
        kinds: dict[str, int] = {}
        for i in range(self.hosts):
            kinds[self.robots_kind(i)] = kinds.get(self.robots_kind(i), 0) + 1
        print(
            f"devweb: serving {self.hosts} hosts x {self.pages_per_host} pages on "
            f"{self.addresses[0]}..{self.addresses[-1]} port {self.port} (seed {self.seed}; robots: "
            + ", ".join(f"{k}={v}" for k, v in kinds.items())
            + "); Ctrl-C to stop",
            flush=True,
        )
        if self.hostile:
            print("devweb: hostile hosts: "
                  + ", ".join(f"{n}={h}" for n, h in self.hostile_hosts.items()), flush=True)
        try:
            while not done.wait(0.5):
                if self._thread is None or not self._thread.is_alive():
                    break
        except KeyboardInterrupt:
            pass
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)
            self.stop()
            print("devweb: stopped", flush=True)


def _not_found() -> web.Response:
    return web.Response(
        status=404,
        text="<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
        "<body><h1>404 Not Found</h1></body></html>\n",
        content_type="text/html",
        charset="utf-8",
    )


# ---------------------------------------------------------------------- hostile content

_HOSTILE_PAGES = 5
_HOSTILE_PRIVATE_PAGES = 2
_HOSTILE_PRIVATE = frozenset({"robots_500", "robots_redirect", "robots_redirect_loop", "robots_huge",
                              "robots_429", "crawl_delay_big"})
_DRIP_INTERVAL_S = 0.1
_DRIP_BYTES = 600  # 60 s at one byte per 100 ms
_HANG_S = 60.0
_HUGE_BYTES = 50 * 1024 * 1024
_HUGE_CHUNK = 64 * 1024
_BOMB_BYTES = 100 * 1024 * 1024
_ROBOTS_HUGE_BYTES = 2 * 1024 * 1024
_ROBOTS_TAIL_AT = 600 * 1024
_MANY_LINKS = 100_000
_RATE_WINDOW_S = 2.0
_LAST_MODIFIED = "Thu, 01 Jan 2026 00:00:00 GMT"
_LAST_MODIFIED_TS = email.utils.parsedate_to_datetime(_LAST_MODIFIED).timestamp()
_REDIRECT_CODES = (301, 302, 303, 307, 308)
_REDIRECT_RE = re.compile(r"^/r(\d{1,3})/(\d{1,3})$")
_CAL_RE = re.compile(r"^/cal/(\d{1,5})/(\d{1,2})(?:/(\d{1,2}))?$")
_SESSION_RE = re.compile(r"^/s/([A-Za-z0-9_-]{1,64})/page$")
_REPEAT_RE = re.compile(r"^/(a/)+$")
_LEAF_RE = re.compile(r"^/l/(\d{1,6})\.html$")

_MESSY_PATHS = ("/malformed.html", "/wrong-charset.html", "/sjis.html", "/bom.html", "/nul.html",
                "/empty.html", "/many-links.html", "/image.png", "/doc.pdf", "/page.xhtml")


def _session_id(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


def _hostile_entry_paths(name: str, seed: int) -> list[str]:
    """Paths (on the behaviour's host) a test should seed; see DevWeb.hostile_urls()."""
    if name in _HOSTILE_PRIVATE:
        return ["/", "/p/0.html", "/p/1.html", "/private/0.html"]
    if name == "drip":
        return ["/slow.html"]
    if name == "no_headers":
        return ["/hang.html"]
    if name == "huge":
        return ["/big.html"]
    if name == "gzip_bomb":
        return ["/bomb.html"]
    if name == "redirects":
        return ["/r2/0", "/r5/0", "/r8/0", "/loop/a", "/offsite"]
    if name == "rate_limited":
        return ["/p/0.html", "/p/1.html", "/p/2.html", "/date.html"]
    if name in ("unavailable", "conditional"):
        return ["/p/0.html", "/p/1.html", "/p/2.html"]
    if name == "messy":
        return ["/", *_MESSY_PATHS]
    if name == "traps":
        return ["/cal/2026/11", f"/s/{_session_id(f'{seed}:traps')}/page", "/a/"]
    raise KeyError(name)  # pragma: no cover


def _html(title: str, links: list[tuple[str, str]]) -> web.Response:
    items = "".join(f'<li><a href="{_html_escape(h)}">{_html_escape(t)}</a></li>\n' for h, t in links)
    return web.Response(
        text=f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_html_escape(title)}</title>\n</head>\n<body>\n<h1>{_html_escape(title)}</h1>\n"
        f"<ul>\n{items}</ul>\n</body>\n</html>\n",
        content_type="text/html", charset="utf-8")


def _text(body: str) -> web.Response:
    return web.Response(text=body, content_type="text/plain", charset="utf-8")


def _raw(body: bytes, content_type: str) -> web.Response:
    return web.Response(body=body, headers={"Content-Type": content_type})


def _drop(request: web.Request) -> None:
    """Close the client connection without sending (anything more)."""
    tr = request.transport
    if tr is not None and not tr.is_closing():
        tr.abort()


_CACHE: dict[str, bytes] = {}
_CACHE_LOCK = threading.Lock()


def _cached(key: str, make: Callable[[], bytes]) -> bytes:
    with _CACHE_LOCK:
        got = _CACHE.get(key)
        if got is None:
            got = _CACHE[key] = make()
        return got


async def _cached_async(key: str, make: Callable[[], bytes]) -> bytes:
    """_cached(), building the value in a worker thread so the event loop keeps serving."""
    got = _CACHE.get(key)
    if got is not None:
        return got
    return await asyncio.get_running_loop().run_in_executor(None, _cached, key, make)


def _make_drip_body() -> bytes:
    head = b'<!DOCTYPE html>\n<html><head><title>Slow page</title></head><body>\n<p><a href="/">Home</a></p>\n<p>'
    tail = b"</p>\n</body></html>\n"
    return head + b"." * (_DRIP_BYTES - len(head) - len(tail)) + tail


_DRIP_BODY = _make_drip_body()


def _huge_chunk() -> bytes:
    def make() -> bytes:
        line = b"<p>huge page filler text: spark delta crawl frontier batch fetch parse</p>\n"
        head = b"<!DOCTYPE html>\n<html><head><title>Huge page</title></head><body>\n"
        body = head + line * (_HUGE_CHUNK // len(line) + 1)
        return body[:_HUGE_CHUNK]
    return _cached("huge_chunk", make)


def _make_gzip_bomb() -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
    head = b"<!DOCTYPE html>\n<html><head><title>Bomb</title></head><body>\n"
    out = [comp.compress(head)]
    block = b" " * (1 << 20)
    for _ in range(_BOMB_BYTES // len(block)):
        out.append(comp.compress(block))
    out.append(comp.flush())
    return b"".join(out)


def _make_huge_robots() -> bytes:
    """2 MiB: Disallow: /private/ first; Disallow: /p/ only from 600 KiB on (at 600 KiB, 1 MiB, the end)."""
    out = bytearray(b"User-agent: *\nDisallow: /private/\n")
    n = 0

    def pad_to(limit: int) -> None:  # comment lines up to exactly ``limit`` bytes
        nonlocal n
        while len(out) < limit:
            line = b"# filler %07d: this robots.txt is far larger than 500 KiB\n" % n
            n += 1
            room = limit - len(out)
            # never a blank line (legacy parsers end a group there): the last line is >= "#\n"
            out.extend(line if len(line) + 1 < room else b"#" * (room - 1) + b"\n")

    rule = b"Disallow: /p/\n"
    for at in (_ROBOTS_TAIL_AT, 1024 * 1024, _ROBOTS_HUGE_BYTES - len(rule)):
        pad_to(at)
        out.extend(rule)
    assert len(out) == _ROBOTS_HUGE_BYTES
    return bytes(out)


def _make_many_links() -> bytes:
    head = b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>100,000 links</title></head><body>\n'
    links = b"".join(b'<a href="/l/%d.html">link %d</a>\n' % (i, i) for i in range(_MANY_LINKS))
    return head + links + b"</body></html>\n"


def _make_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


_PDF = (b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
        b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >> endobj\n"
        b"trailer << /Root 1 0 R >>\n%%EOF\n")

_MALFORMED = (
    b"<html><head><title>Messy <b>page</title>\n<body><p>Unclosed paragraph <div><span>nested "
    b"<a href=\"/l/1.html\">one\n<a href='/l/2.html'>two</a <a href=/l/3.html>three</a>\n"
    b"<<<>>> &&&; &nbsp &#xZZZZ; &#99999999; </p></p></div></table></td></tr>\n"
    b"<a href=\"javascript:alert(1)\">js</a> <a href=\"mailto:nobody@localhost\">mail</a> "
    b"<a href=\"\">empty</a> <a href=\"   /l/4.html  \">spaced</a> <a href=\"http://[::1\">broken</a>\n"
    b"<a href=\"/l/5.html\" href=\"/l/6.html\">double href</a> <a>no href</a> <A HREF=\"/L/7.HTML\">caps</A>\n"
    b"<script>document.write(\"<a href='/l/8.html'>\");</script> <style>a{}</style>\n"
    b"\xff\xfe garbage bytes \x80\x81 <![CDATA[ x ]]> <?php echo 1; ?>\n"
    b"<!-- unterminated comment <a href=\"/l/9.html\">hidden</a>\n"
)

_WRONG_CHARSET = (
    "<!DOCTYPE html>\n<html><head><title>Caf\u00e9 \u201cquotes\u201d</title></head><body>\n"
    "<p>Na\u00efve caf\u00e9 \u2013 \u201csmart quotes\u201d \u2026 \u20ac5</p>\n"
    "<a href=\"/l/10.html\">next</a>\n</body></html>\n"
).encode("cp1252")

_SJIS = (
    "<!DOCTYPE html>\n<html><head><meta charset=\"shift_jis\"><title>\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8</title>"
    "</head><body>\n<p>\u3053\u3093\u306b\u3061\u306f\u4e16\u754c</p>\n"
    "<a href=\"/l/11.html\">\u6b21\u3078</a>\n</body></html>\n"
).encode("shift_jis")

_BOM = b"\xef\xbb\xbf" + (
    "<!DOCTYPE html>\n<html><head><title>BOM \u00fcber</title></head><body>\n"
    "<p>Starts with a UTF-8 byte order mark: \u00fcber \u2713</p>\n<a href=\"/l/12.html\">next</a>\n</body></html>\n"
).encode("utf-8")

_NUL = (b"<!DOCTYPE html>\n<html><head><title>NUL\x00bytes</title></head><body>\x00\x00\n"
        b"<p>before\x00after</p>\n<a href=\"/l/13.html\">after a nul</a>\x00\n</body></html>\n")

_XHTML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">\n'
    b"<head><title>XHTML page</title></head>\n<body><p>Served as application/xhtml+xml.</p>\n"
    b'<a href="/l/14.html">next</a><br/></body>\n</html>\n'
)


async def _messy(path: str) -> web.Response | None:
    if path == "/":
        return _html("Messy pages", [(p, p.lstrip("/")) for p in _MESSY_PATHS])
    if path == "/malformed.html":
        return _raw(_MALFORMED, "text/html")
    if path == "/wrong-charset.html":
        return _raw(_WRONG_CHARSET, "text/html; charset=utf-8")
    if path == "/sjis.html":
        return _raw(_SJIS, "text/html")
    if path == "/bom.html":
        return _raw(_BOM, "text/html")
    if path == "/nul.html":
        return _raw(_NUL, "text/html; charset=utf-8")
    if path == "/empty.html":
        return _raw(b"", "text/html; charset=utf-8")
    if path == "/many-links.html":
        return _raw(await _cached_async("many_links", _make_many_links), "text/html; charset=utf-8")
    if path == "/image.png":
        return _raw(_cached("png", _make_png), "image/png")
    if path == "/doc.pdf":
        return _raw(_PDF, "application/pdf")
    if path == "/page.xhtml":
        return _raw(_XHTML, "application/xhtml+xml")
    m = _LEAF_RE.match(path)
    if m and int(m.group(1)) < _MANY_LINKS:
        return _html(f"Leaf {int(m.group(1))}", [])
    return None
