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

Every request is recorded in an in-memory log (``requests()``) and, when
``log_path`` is set, also appended to a JSON-lines file.
"""

from __future__ import annotations

import asyncio
import errno
import json
import random
import re
import signal
import socket
import threading
import time
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from aiohttp import web

__all__ = ["DevWeb", "host_address", "KINDS"]

KINDS = ("disallow", "crawl_delay", "missing", "allow_all")

_PAGE_RE = re.compile(r"^/(p|private)/(\d+)\.html$")

_WORDS = (
    "spark delta crawl frontier batch fetch parse robots politeness host page link "
    "anchor index table merge partition shuffle executor driver stage task queue "
    "latency throughput lake parquet schema column vector lambda graph rank score "
    "river mountain forest cloud ocean harbor lantern meadow pebble willow copper "
    "amber cobalt saffron thistle juniper falcon otter badger heron marten lynx "
    "quietly briskly gently rarely often always never slowly swiftly boldly"
).split()

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
        self.addresses: list[str] = [host_address(i) for i in range(hosts)]
        self.host_names: list[str] = [f"{a}:{port}" for a in self.addresses] if port else []

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
        words = lambda a, b: " ".join(rng.choice(_WORDS) for _ in range(rng.randint(a, b)))  # noqa: E731
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
        if kind == "disallow":
            return "User-agent: *\nDisallow: /private/\n"
        if kind == "crawl_delay":
            return f"User-agent: *\nCrawl-delay: {self.crawl_delay_s}\nDisallow: /private/\n"
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
        with self._log_lock:
            self._log.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry) + "\n")
                self._log_file.flush()

    def requests(self) -> list[dict]:
        with self._log_lock:
            return [dict(e) for e in self._log]

    def clear_log(self) -> None:
        with self._log_lock:
            self._log.clear()

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
            host = None
        path = request.path
        resp: web.Response
        if host is None:
            resp = _not_found()
        elif path == "/robots.txt":
            txt = self.robots_txt(host)
            resp = web.Response(text=txt, content_type="text/plain", charset="utf-8") if txt is not None else _not_found()
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
                for addr in self.addresses:
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
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
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
