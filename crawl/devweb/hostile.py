"""DevWeb's hostile hosts: one extra host per misbehaviour, their entry paths and handlers.

``HostileHosts`` is a mixin of ``crawl.devweb.web.DevWeb``: its handlers use the server's
request log (``_record``, ``_finish``), its stop event and the hostile state DevWeb's
constructor sets up. The big canned bodies they serve come from ``crawl.devweb.hostile_bodies``.

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
    duplicates            /d/0.html ... /d/5.html: 0, 1 and 2 have the same article text
                          under different navigation (exact duplicates of the text), 3 is
                          0 with one word changed (a near duplicate), 4 and 5 stand alone
    pdfs                  a small site of PDFs (crawl/devweb/pdfs.py): URI link annotations,
                          pages only a PDF links to, a PDF served as application/octet-stream,
                          an HTML page with a PDF's text (twins), a PNG and five hostile PDFs
                          (bomb, page-tree cycle, truncated, 200,000 pages, many streams); no /p/ pages

Streamed responses (drip, no_headers, huge) end within a moment when the client
disconnects or ``stop()`` is called. Big bodies (gzip bomb, huge robots.txt,
the 100,000-link page) are built once per process, lazily, off the event loop.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import math
import re
import time
from typing import Any

from aiohttp import web

from crawl.devweb import pdfs
from crawl.devweb.hostile_bodies import (_BOM, _DRIP_BODY, _HUGE_BYTES, _MALFORMED, _MANY_LINKS, _NUL, _PDF,
                                         _SJIS, _WRONG_CHARSET, _XHTML, _cached, _cached_async, _huge_chunk,
                                         _make_gzip_bomb, _make_huge_robots, _make_many_links, _make_png)
from crawl.devweb.site import _PAGE_RE, DOMAIN, _html_escape, netloc_of

HOSTILE = (
    "robots_500", "robots_redirect", "robots_redirect_loop", "robots_huge", "robots_429",
    "crawl_delay_big", "drip", "no_headers", "huge", "gzip_bomb", "redirects",
    "rate_limited", "unavailable", "conditional", "messy", "traps", "duplicates", "pdfs",
)

_HOSTILE_PAGES = 5
_HOSTILE_PRIVATE_PAGES = 2
_HOSTILE_PRIVATE = frozenset({"robots_500", "robots_redirect", "robots_redirect_loop", "robots_huge",
                              "robots_429", "crawl_delay_big"})
_DRIP_INTERVAL_S = 0.1
_HANG_S = 60.0
_RATE_WINDOW_S = 2.0
_LAST_MODIFIED = "Thu, 01 Jan 2026 00:00:00 GMT"
_LAST_MODIFIED_TS = email.utils.parsedate_to_datetime(_LAST_MODIFIED).timestamp()
_REDIRECT_CODES = (301, 302, 303, 307, 308)
_REDIRECT_RE = re.compile(r"/r(\d{1,3})/(\d{1,3})")
_CAL_RE = re.compile(r"/cal/(\d{1,5})/(\d{1,2})(?:/(\d{1,2}))?")
_SESSION_RE = re.compile(r"/s/([A-Za-z0-9_-]{1,64})/page")
_REPEAT_RE = re.compile(r"/(a/)+")
_LEAF_RE = re.compile(r"/l/(\d{1,6})\.html")

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
    if name == "duplicates":
        return ["/d/0.html"]  # it links to the others
    if name == "pdfs":
        return list(pdfs.ENTRY_PATHS)
    raise KeyError(name)  # pragma: no cover


def _not_found() -> web.Response:
    return web.Response(
        status=404,
        text="<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
        "<body><h1>404 Not Found</h1></body></html>\n",
        content_type="text/html",
        charset="utf-8",
    )


def _html(title: str, links: list[tuple[str, str]]) -> web.Response:
    items = "".join(f'<li><a href="{_html_escape(h)}">{_html_escape(t)}</a></li>\n' for h, t in links)
    return web.Response(
        text=f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_html_escape(title)}</title>\n</head>\n<body>\n<h1>{_html_escape(title)}</h1>\n"
        f"<ul>\n{items}</ul>\n</body>\n</html>\n",
        content_type="text/html", charset="utf-8")


_DUP_RE = re.compile(r"/d/([0-5])\.html")
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "xe", "zu", "pa", "de")


def _article(variant: int) -> str:
    """240 pseudo-words of article text; variant 0 is the shared one, 3 differs from it in one
    word, 4 and 5 are texts of their own."""
    text = 0 if variant in (0, 1, 2, 3) else variant
    words = []
    for i in range(240):
        digest = hashlib.sha256(f"duplicates:{text}:{i}".encode()).digest()
        words.append("".join(_SYLLABLES[b % len(_SYLLABLES)] for b in digest[:3]))
    if variant == 3:
        words[120] = "different"
    return " ".join(words)


def _duplicate_page(path: str) -> web.Response | None:
    m = _DUP_RE.fullmatch(path)
    if m is None:
        return None
    k = int(m.group(1))
    # the navigation differs on every page, the article text does not: dedup compares the text
    nav = "".join(f'<li><a href="/d/{j}.html">copy {j}</a></li>' for j in range(6) if j != k)
    return web.Response(
        text=f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Copy {k}</title></head>"
             f"<body><nav><ul>{nav}</ul></nav><article><p>{_article(k)}</p></article></body></html>\n",
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


def hostile_dns_name(behaviour: str) -> str:
    """The name of a hostile (or bad-certificate) host in the named test web."""
    return f"{behaviour.replace('_', '-')}.{DOMAIN}"


class HostileHosts:
    """What the hostile hosts serve; a mixin of DevWeb (see the module docstring)."""

    def _hostile_names(self) -> dict[str, str]:
        if self.named:
            return {name: netloc_of(hostile_dns_name(name), self.https_port, 443) for name in HOSTILE[:len(self._hostile_addresses)]}
        return {name: f"{a}:{self.port}" for name, a in zip(HOSTILE, self._hostile_addresses)}

    def hostile_urls(self, name: str) -> list[str]:
        """Absolute URLs to seed for hostile behaviour ``name`` (needs ``hostile=True``)."""
        self._need_port()
        if not self.hostile:
            raise KeyError(f"DevWeb was created without hostile=True: {name!r}")
        if name not in HOSTILE:
            raise KeyError(f"unknown hostile behaviour {name!r} (one of {', '.join(HOSTILE)})")
        root = f"{self.scheme}://{self.hostile_hosts[name]}"
        return [root + p for p in _hostile_entry_paths(name, self.seed)]

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
        m = _PAGE_RE.fullmatch(path)
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
        if name == "duplicates":
            got = _duplicate_page(path)
            if got is not None:
                return got
        if name == "pdfs":
            got = await asyncio.get_running_loop().run_in_executor(None, pdfs.pdf_document, path)
            return _raw(*got) if got is not None else _not_found()
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
        root = f"{self.scheme}://{self.hostile_hosts['redirects']}"
        if path == "/final.html":
            return _html("Final destination", [("/", "Home")])
        if path == "/offsite":
            return web.Response(status=302, headers={"Location": f"{self.origin(0)}/p/0.html"})
        if path in ("/loop/a", "/loop/b"):
            return web.Response(status=302, headers={"Location": "/loop/b" if path == "/loop/a" else "/loop/a"})
        m = _REDIRECT_RE.fullmatch(path)
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
        m = _CAL_RE.fullmatch(path)
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
        m = _SESSION_RE.fullmatch(path)
        if m:
            new = _session_id(f"{self.seed}:{m.group(1)}")
            return _html("Session page", [(f"/s/{new}/page", "Continue"), ("/", "Home")])
        if _REPEAT_RE.fullmatch(path):
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
    m = _LEAF_RE.fullmatch(path)
    if m and int(m.group(1)) < _MANY_LINKS:
        return _html(f"Leaf {int(m.group(1))}", [])
    return None
