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
import threading
import time
from typing import Any, Mapping

from aiohttp import web

from crawl.devweb.hostile import HOSTILE, HostileHosts, _not_found
from crawl.devweb.site import KINDS, GeneratedSite, _address_index, host_address

__all__ = ["DevWeb", "host_address", "KINDS", "HOSTILE"]

_MAX_PORT_TRIES = 10


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

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], log_path: str | None = None) -> "DevWeb":
        """The bundled test web as the devweb.* options describe it (not started); ValueError
        names an unknown behaviour in devweb.hostile."""
        unknown = [name for name in cfg["devweb.hostile"] if name not in HOSTILE]
        if unknown:
            raise ValueError(f"devweb.hostile: unknown behaviour {unknown[0]!r} (one of {', '.join(HOSTILE)})")
        web = cls(hosts=int(cfg["devweb.hosts"]), pages_per_host=int(cfg["devweb.pages_per_host"]),
                  port=int(cfg["devweb.port"]), seed=int(cfg["devweb.seed"]),
                  crawl_delay_s=float(cfg["devweb.crawl_delay_s"]), log_path=log_path,
                  hostile=bool(cfg["devweb.hostile"]))
        web.seeded_hostile = tuple(cfg["devweb.hostile"])
        return web

    def demo_seed_urls(self) -> list[str]:
        """The seeds of a demo crawl: every host's home page, and the entry pages of the hostile
        behaviours chosen by devweb.hostile (from_config)."""
        return self.seed_urls() + [u for name in self.seeded_hostile for u in self.hostile_urls(name)]

    def networks(self) -> list[str]:
        """CIDR strings covering exactly this web's addresses (its hosts and hostile hosts): what a
        crawl of it puts in fetch.allow_networks, since the address guard refuses loopback."""
        from crawl.net.addresses import networks_of
        return networks_of(self.addresses + self._hostile_addresses)

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
