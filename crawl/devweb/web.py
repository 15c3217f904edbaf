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
* ``named=True`` makes it look like the internet: every host is served by **name** over
  **HTTPS** (``https://site3.devweb.test:PORT/``; hostile hosts ``redirects.devweb.test`` and the
  like) on ``https_port``, with a certificate from a local CA made at start
  (``crawl.devweb.tls``, its PEM in ``ca_file``), and over plain HTTP on ``port``, where every
  request is redirected to https (the ordinary case on the web). The names are answered by a real
  DNS server on loopback (``crawl.devweb.dns``, ``dns.server``), which also serves names that
  fail (NXDOMAIN, silence, SERVFAIL) or point at refused addresses (``DNS_FAILURES``); five more
  hosts fail TLS in each way (``crawl.devweb.tls.BAD_CERTIFICATES``). ``crawl_config()`` gives
  what a crawl of it sets: the DNS server, the CA file, the allowed networks, a user agent.
  With ports 80 and 443 (root only), http and https URLs share one host key, as on the web.

This module is the server: ``DevWeb`` itself (the sockets, the background
thread, start/stop, ``serve_forever``) and its request log. What the hosts
serve lives next to it, in mixins DevWeb inherits:

* ``crawl.devweb.site``: the generated sites of the normal hosts (site
  layout, robots.txt, sitemaps, determinism; ``outlinks()`` without a server);
* ``crawl.devweb.hostile``: the opt-in hostile hosts (``hostile=True``), one
  per behaviour in ``HOSTILE``; the big canned bodies they serve are built in
  ``crawl.devweb.hostile_bodies``.

Every request is recorded in an in-memory log (``requests()``) and, when
``log_path`` is set, also appended to a JSON-lines file. An entry has ``ts``
(time the handler started), ``host``, ``path``, ``method``, ``user_agent``,
``status`` and ``done_ts`` (time the handler finished or the connection was
dropped; ``None`` while a streamed response is still running). The JSON-lines
file gets an entry once it is complete.
"""

from __future__ import annotations

import asyncio
import errno
import json
import signal
import socket
import sys
import threading
import time
from typing import Any

from aiohttp import web

from crawl.config import Config
from crawl.devweb import devweb_user_agent
from crawl.devweb.dns import SERVFAIL, SILENT, DevDns
from crawl.devweb.hostile import HOSTILE, HostileHosts, _not_found, hostile_dns_name
from crawl.devweb.site import DOMAIN, KINDS, GeneratedSite, _address_index, host_address, netloc_of
from crawl.devweb.tls import BAD_CERTIFICATES, LocalCA

__all__ = ["DevWeb", "host_address", "KINDS", "HOSTILE", "BAD_CERTIFICATES", "DNS_FAILURES"]

# names of the named test web's DNS server that fail, by how: a crawl must record each, and never
# connect to the last two (the address guard refuses what they resolve to)
DNS_FAILURES = {"nxdomain": f"missing.{DOMAIN}", "timeout": f"silent.{DOMAIN}", "servfail": f"servfail.{DOMAIN}",
                "private": f"private.{DOMAIN}", "metadata": f"metadata.{DOMAIN}"}

_MAX_PORT_TRIES = 10


class _Silent(asyncio.Protocol):
    """A TLS handshake that never ends: the connection is accepted and nothing is ever sent."""

    def __init__(self, streams: set):
        self.streams = streams

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.streams.add(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.streams.discard(self.transport)


class DevWeb(GeneratedSite, HostileHosts):
    """A deterministic multi-host test web on loopback addresses (see the module docstrings of
    crawl.devweb.web, crawl.devweb.site and crawl.devweb.hostile)."""

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
        named: bool = False,
        https_port: int = 0,
        dns_port: int = 0,
    ):
        if hosts < 1:
            raise ValueError("hosts must be >= 1")
        if pages_per_host < 1:
            raise ValueError("pages_per_host must be >= 1")
        if links_per_page < 0 or cross_host_links < 0:
            raise ValueError("links_per_page and cross_host_links must be >= 0")
        if not (0 <= port <= 65535) or not (0 <= https_port <= 65535):
            raise ValueError("port must be in 0..65535")
        if named and port and port == https_port:
            raise ValueError("the named test web needs two ports: http and https")
        host_address(hosts - 1)  # validates the host count
        if hostile:
            host_address(hosts + len(HOSTILE) - 1)
        self.hosts = hosts
        self.pages_per_host = pages_per_host
        self.requested_port = port
        self.port = port
        self.named = named
        self.requested_https_port = https_port
        self.https_port = https_port
        self.dns: DevDns | None = DevDns(port=dns_port) if named else None
        self.ca_file: str | None = None  # the local CA's PEM (named: written by start())
        self._tls_dir: Any = None
        self._https_sockets: list[socket.socket] = []
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
        # the hosts that fail TLS, one per kind (named only)
        self._tls_addresses: list[str] = (
            [host_address(hosts + len(HOSTILE) + j) for j in range(len(BAD_CERTIFICATES))] if named else [])
        self.host_names: list[str] = ([self.host_name(i) for i in range(hosts)]
                                      if port and (https_port or not named) else [])
        self.hostile = hostile
        self.seeded_hostile: tuple[str, ...] = ()  # behaviours a demo crawl seeds (from_config)
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

    def _log_host(self, ip: str, port: int) -> str:
        """The host key a request log entry names: ``ip:port``, or, in the named test web, the
        host's key as the crawler sees it for the scheme of the port asked (name[:port])."""
        name = self.dns_name(ip) if self.named else None
        if name is None:
            return f"{ip}:{port}"
        return netloc_of(name, port, 443 if port == self.https_port else 80)

    def dns_name(self, ip: str) -> str | None:
        """The name of the host listening on ``ip`` in the named test web."""
        i = _address_index(ip)
        if i is None:
            return None
        if i < self.hosts:
            return f"site{i}.{DOMAIN}"
        j = i - self.hosts
        if j < len(self._hostile_addresses):
            return hostile_dns_name(HOSTILE[j])
        j = i - self.hosts - len(HOSTILE)
        if self.named and 0 <= j < len(BAD_CERTIFICATES):
            return hostile_dns_name(BAD_CERTIFICATES[j])
        return None

    def _entry(self, request: web.Request, ts: float, ip: str, port: int) -> dict[str, Any]:
        return {
            "ts": ts,
            "host": self._log_host(ip, port),
            "scheme": "https" if self.named and port == self.https_port else "http",
            # the client's port: one per connection, so a log tells how often a crawler connected
            "peer_port": (request.transport.get_extra_info("peername") or (None, None))[1] if request.transport else None,
            "path": request.path_qs,
            "method": request.method,
            "user_agent": request.headers.get("User-Agent", ""),
            "status": 0,
            "done_ts": None,
        }

    # ------------------------------------------------------------------ server

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ts = time.time()
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if sockname:
            local_ip, local_port = sockname[0], sockname[1]
        else:  # pragma: no cover - transport already gone
            local_ip, local_port = "", 0
        host = _address_index(local_ip)
        name = self.dns_name(local_ip) if self.named else None
        if name is not None and local_port == self.port:
            # the named web's plain-HTTP origins redirect every request to https, robots.txt too
            entry = self._entry(request, ts, local_ip, local_port)
            entry.update(status=301, done_ts=time.time())
            self._record(entry)
            target = f"https://{netloc_of(name, self.https_port, 443)}{request.path_qs}"
            return web.Response(status=301, headers={"Location": target})
        if host is not None and host >= self.hosts + len(self._hostile_addresses):
            resp = web.Response(text="<html><title>bad certificate host</title><p>never fetched with "
                                "verification on</p></html>", content_type="text/html")
            entry = self._entry(request, ts, local_ip, local_port)
            entry.update(status=resp.status, done_ts=time.time())
            self._record(entry)
            return resp
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
        entry = self._entry(request, ts, local_ip, local_port)
        entry.update(status=resp.status, done_ts=time.time())
        self._record(entry)
        return resp

    def _bind_all(self) -> list[socket.socket]:
        """Bind one listening socket per host address on a common port (and, named, a second one
        per address on the https port)."""
        every = self.addresses + self._hostile_addresses + self._tls_addresses
        plain = self._bind_port(self.requested_port, every)
        self.port = plain[0].getsockname()[1]
        if not self.named:
            return plain
        try:
            secure = self._bind_port(self.requested_https_port, every, avoid=self.port)
        except OSError:
            for s in plain:
                s.close()
            raise
        self.https_port = secure[0].getsockname()[1]
        self._https_sockets = secure
        return plain + secure

    def _bind_port(self, requested: int, addresses: list[str], avoid: int = -1) -> list[socket.socket]:
        tries = _MAX_PORT_TRIES if requested == 0 else 1
        last_err: OSError | None = None
        for _ in range(tries):
            socks: list[socket.socket] = []
            port = requested
            try:
                for addr in addresses:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((addr, port))
                    if port == 0:
                        port = s.getsockname()[1]
                        if port == avoid:
                            raise OSError(errno.EADDRINUSE, "the test web's other port")
                    s.setblocking(False)
                return socks
            except OSError as e:
                for s in socks:
                    s.close()
                last_err = e
                if e.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise
        assert last_err is not None
        raise last_err

    @classmethod
    def from_config(cls, cfg: Config, log_path: str | None = None) -> "DevWeb":
        """The bundled test web as the devweb.* options describe it (not started); ValueError
        names an unknown behaviour in devweb.hostile."""
        options = cfg.devweb
        unknown = [name for name in options.hostile if name not in HOSTILE]
        if unknown:
            raise ValueError(f"devweb.hostile: unknown behaviour {unknown[0]!r} (one of {', '.join(HOSTILE)})")
        web = cls(hosts=options.hosts, pages_per_host=options.pages_per_host,
                  port=options.port, seed=options.seed,
                  crawl_delay_s=options.crawl_delay_s, log_path=log_path,
                  hostile=bool(options.hostile), named=options.named,
                  https_port=options.https_port, dns_port=options.dns_port)
        web.seeded_hostile = tuple(options.hostile)
        return web

    def crawl_config(self, cfg: Config) -> dict[str, Any]:
        """The options a crawl of this web sets over ``cfg``: its networks allowed through the
        address guard (which refuses loopback), a user agent naming the test web when ``cfg`` has
        the shipped one, and, named, its DNS server and its CA."""
        out: dict[str, Any] = {"fetch.allow_networks": [*cfg.fetch.allow_networks, *self.networks()],
                               "fetch.user_agent": devweb_user_agent(cfg.fetch.user_agent)}
        if self.named:
            out["fetch.dns_servers"] = [*cfg.fetch.dns_servers, self.dns.server]
            out["fetch.tls_ca_file"] = self.ca_file
        return out

    def demo_seed_urls(self) -> list[str]:
        """The seeds of a demo crawl: every host's home page, and the entry pages of the hostile
        behaviours chosen by devweb.hostile (from_config)."""
        return self.seed_urls() + [u for name in self.seeded_hostile for u in self.hostile_urls(name)]

    def networks(self) -> list[str]:
        """CIDR strings covering exactly this web's addresses (its hosts and hostile hosts): what a
        crawl of it puts in fetch.allow_networks, since the address guard refuses loopback."""
        from crawl.net.addresses import networks_of
        return networks_of(self.addresses + self._hostile_addresses + self._tls_addresses)

    def start(self) -> "DevWeb":
        """Serve in a background daemon thread; returns once every socket is listening."""
        with self._state_lock:
            if self._thread is not None:
                raise RuntimeError("DevWeb already started")
            socks = self._bind_all()
            self._sockets = socks
            if self.named:
                self._start_names()
            self.host_names = [self.host_name(i) for i in range(self.hosts)]
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

    def _start_names(self) -> None:
        """The named web's local CA (its PEM written to a temporary folder: ``ca_file``), its server
        contexts, and its DNS server with every name, good and failing."""
        import tempfile
        self._tls_dir = tempfile.TemporaryDirectory(prefix="deltacrawl-devweb-ca-")
        ca = LocalCA()
        self.ca_file = ca.write_pem(f"{self._tls_dir.name}/devweb-ca.pem")
        good = [n for n in (self.dns_name(a) for a in self.addresses + self._hostile_addresses) if n]
        self._good_context = ca.server_context(good)
        self._bad_contexts = {a: (kind, ca.bad_context(kind, hostile_dns_name(kind)))
                              for kind, a in zip(BAD_CERTIFICATES, self._tls_addresses)}
        dns = self.dns
        for a in self.addresses + self._hostile_addresses + self._tls_addresses:
            dns.add(self.dns_name(a), [a])
        dns.add(DNS_FAILURES["private"], ["10.0.0.1"])
        dns.add(DNS_FAILURES["metadata"], ["169.254.169.254"])
        dns.fail(DNS_FAILURES["timeout"], SILENT)
        dns.fail(DNS_FAILURES["servfail"], SERVFAIL)
        try:
            dns.start()
        except OSError:
            self._tls_dir.cleanup()
            raise

    def bad_certificate_urls(self) -> dict[str, str]:
        """{kind: home page URL} of the hosts that fail TLS (named only)."""
        return {kind: f"https://{netloc_of(hostile_dns_name(kind), self.https_port, 443)}/"
                for kind in BAD_CERTIFICATES} if self.named else {}

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
            secure = set(id(s) for s in self._https_sockets)
            for s in self._sockets:
                if id(s) not in secure:
                    await web.SockSite(runner, s, backlog=512).start()
                    continue
                kind, bad = self._bad_contexts.get(s.getsockname()[0], (None, None))
                if kind == "tls_handshake_hang":  # accepts, then never says a word
                    await asyncio.get_running_loop().create_server(lambda: _Silent(self._streams), sock=s)
                elif kind == "tls_plain_http":  # plain HTTP where TLS is expected
                    await web.SockSite(runner, s, backlog=512).start()
                else:
                    await web.SockSite(runner, s, backlog=512, ssl_context=bad or self._good_context).start()
        except BaseException as e:  # handed to start(), which raises it
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
        if self.dns is not None:
            self.dns.stop()
        if self._tls_dir is not None:
            self._tls_dir.cleanup()
            self._tls_dir = None
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
            f"{self.addresses[0]}..{self.addresses[-1]} port {self.port}"
            + (f" (https {self.https_port} as {self.host_names[0]} ..., DNS {self.dns.server})" if self.named else "")
            + f" (seed {self.seed}; robots: "
            + ", ".join(f"{k}={v}" for k, v in kinds.items())
            + "); Ctrl-C to stop",
            file=sys.stderr, flush=True,
        )
        if self.hostile:
            print("devweb: hostile hosts: "
                  + ", ".join(f"{n}={h}" for n, h in self.hostile_hosts.items()), file=sys.stderr, flush=True)
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
            print("devweb: stopped", file=sys.stderr, flush=True)
