"""A changing web on loopback for bench/freshness.py: pages whose content changes as Poisson
processes with known, seeded change times, served with strong validators and 304s.

Everything stays on loopback: host ``i`` listens on ``127.0.0.(2 + i)`` (at most 253 hosts, so
127.0.0.2 … 127.0.0.254 and never any other address), all hosts on one port.

The pages (``ChangingWeb.pages``, a list of ``Page``), per host, in this order:

* ``home``      ``/``: links to every important page of its host, the first normal pages and
                the next host's home (so the hosts form a ring);
* ``important`` ``/imp/<k>.html``: linked from the home page; each links to a slice of the
                host's normal pages;
* ``normal``    ``/n/<k>.html``: linked from an important page (and from home for the first
                few); each links to two other normal pages, and some start a deep chain;
* ``deep``      ``/deep/<c>/<j>.html``: reachable ONLY through a chain: normal page →
                ``/deep/<c>/0.html`` → ``/deep/<c>/1.html`` → … (``chain_length`` links deep).

Links never change between versions; only the text does.

Change model. Each page has a mean time between changes: log-uniform in
[``min_change_s``, ``max_change_s``] (10 s … 2 h by default) for 1 − ``never_share`` of the pages,
infinite (never changes) for the rest, drawn from ``seed`` independently of the kind. Its change
times are precomputed at construction (cumulative sums of Exp(mean) gaps, up to ``horizon_s``
after the web's clock zero ``t0``, which ``start()`` sets to the start time), so the version live
at any time is known exactly: version v is live on [change_v, change_{v+1}) with change_0 = −∞
(version 0 was live before the web started). Version 0's age at t0 (what its Last-Modified says)
follows the same process: the time back to a Poisson process's last event is Exp(mean), so it
is drawn from Exp(mean) (its own stream of ``seed``; the change times do not depend on it); a
page that never changes is a day old.

HTTP. ``GET`` of a page answers 200 with the live version's body, a strong ``ETag``
``"<page>-<version>"`` and ``Last-Modified`` = the version's change time (version 0: its age
before t0, above), or 304 (RFC 9110 §13.1: ``If-None-Match`` is evaluated first and, when present, decides;
otherwise ``If-Modified-Since`` gives 304 when the live version's Last-Modified, in whole seconds,
is not later than it). ``/robots.txt`` allows everything; every other path is 404 (the crawler
asks ``/sitemap.xml`` once per host).

The request log. Every request is one entry, in memory (``requests()``) and, with ``log_path``,
one JSON line: ``ts`` (handler start, epoch s), ``done_ts`` (handler end), ``host``, ``path``,
``page`` (index into ``pages``, or null), ``conditional`` (either validator header present),
``inm``, ``ims`` (the header values), ``status`` and ``version`` (the version live at ``ts``; for a
304 that is the version the client holds). bench/freshness.py scores a crawl from this log only.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("home", "important", "normal", "deep")
MAX_HOSTS = 253          # 127.0.0.2 … 127.0.0.254
_VOCABULARY_SIZE = 4000
_OLD_VERSION_AGE_S = 86400.0


def host_address(i: int) -> str:
    """The loopback address of host ``i`` (0-based): 127.0.0.2 … 127.0.0.254."""
    if not 0 <= i < MAX_HOSTS:
        raise ValueError(f"host index must be in 0..{MAX_HOSTS - 1}")
    return f"127.0.0.{2 + i}"


@dataclass
class Page:
    index: int
    host: int
    path: str
    kind: str
    mean_change_s: float          # inf: never changes
    change_times: np.ndarray      # seconds after t0 at which versions 1, 2, … go live
    first_age_s: float = _OLD_VERSION_AGE_S  # how long before t0 version 0 went live
    links: list[tuple[int, str]] = field(default_factory=list)  # (host, path)

    def version_at(self, rel_t: float) -> int:
        """The version live ``rel_t`` seconds after t0."""
        return int(np.searchsorted(self.change_times, rel_t, side="right"))


def _words(seed: int) -> list[str]:
    rng = np.random.default_rng([seed, 7])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(_VOCABULARY_SIZE)]


class ChangingWeb:
    """The pages, their change times and the server (see the module docstring)."""

    def __init__(self, pages: int = 320, hosts: int = 8, seed: int = 1, min_change_s: float = 10.0,
                 max_change_s: float = 7200.0, never_share: float = 0.2, horizon_s: float = 6 * 3600.0,
                 important_share: float = 0.1, deep_share: float = 0.2, chain_length: int = 4,
                 log_path: str | None = None):
        if not 1 <= hosts <= MAX_HOSTS:
            raise ValueError(f"hosts must be in 1..{MAX_HOSTS}")
        if pages < 4 * hosts:
            raise ValueError("need at least 4 pages per host")
        if not 0 < min_change_s < max_change_s:
            raise ValueError("need 0 < min_change_s < max_change_s")
        self.seed, self.hosts, self.horizon_s = seed, hosts, horizon_s
        self.min_change_s, self.max_change_s, self.never_share = min_change_s, max_change_s, never_share
        self.chain_length = chain_length
        self.log_path = log_path
        self.addresses = [host_address(i) for i in range(hosts)]
        self.port = 0
        self.t0 = 0.0
        self._vocab = _words(seed)
        self.pages: list[Page] = []
        self._by_path: dict[tuple[int, str], int] = {}
        self._build(pages, important_share, deep_share)
        self._log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._log_file = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_evt: asyncio.Event | None = None
        self._sockets: list[socket.socket] = []

    # ------------------------------------------------------------------ the pages

    def _build(self, total: int, important_share: float, deep_share: float) -> None:
        rng = np.random.default_rng([self.seed, 1])
        per_host = [total // self.hosts + (1 if h < total % self.hosts else 0) for h in range(self.hosts)]
        layout: list[tuple[int, str, str]] = []
        for h, n in enumerate(per_host):
            n_imp = max(1, int(round(important_share * n)))
            n_deep = int(round(deep_share * n)) // self.chain_length * self.chain_length
            n_norm = n - 1 - n_imp - n_deep
            if n_norm < 1:
                raise ValueError("too few pages per host for this layout")
            host_pages = [(h, "/", "home")]
            host_pages += [(h, f"/imp/{k}.html", "important") for k in range(n_imp)]
            host_pages += [(h, f"/n/{k}.html", "normal") for k in range(n_norm)]
            host_pages += [(h, f"/deep/{c}/{j}.html", "deep") for c in range(n_deep // self.chain_length)
                           for j in range(self.chain_length)]
            layout += host_pages
        n = len(layout)
        never = rng.random(n) < self.never_share
        means = np.exp(rng.uniform(math.log(self.min_change_s), math.log(self.max_change_s), n))
        for i, (h, path, kind) in enumerate(layout):
            mean = math.inf if never[i] else float(means[i])
            times = np.empty(0)
            if math.isfinite(mean):
                prng = np.random.default_rng([self.seed, 2, i])
                count = int(self.horizon_s / mean * 1.5) + 20
                times = np.cumsum(prng.exponential(mean, count))
                while times[-1] < self.horizon_s:
                    times = np.concatenate([times, times[-1] + np.cumsum(prng.exponential(mean, count))])
                times = times[times < self.horizon_s]
            self._by_path[(h, path)] = i
            age = (float(np.random.default_rng([self.seed, 3, i]).exponential(mean)) if math.isfinite(mean)
                   else _OLD_VERSION_AGE_S)
            self.pages.append(Page(i, h, path, kind, mean, times, age))
        # links (fixed for every version)
        for h in range(self.hosts):
            idx = [p for p in self.pages if p.host == h]
            imp = [p for p in idx if p.kind == "important"]
            norm = [p for p in idx if p.kind == "normal"]
            deep = [p for p in idx if p.kind == "deep"]
            home = idx[0]
            home.links = [(h, p.path) for p in imp] + [(h, p.path) for p in norm[:3]]
            if self.hosts > 1:
                home.links.append(((h + 1) % self.hosts, "/"))
            for k, p in enumerate(imp):  # normal pages split between the important pages
                p.links = [(h, q.path) for q in norm[k::len(imp)]] + [(h, "/")]
            for k, p in enumerate(norm):
                p.links = [(h, norm[(k + 1) % len(norm)].path), (h, norm[(k + 7) % len(norm)].path)]
            chains = len(deep) // self.chain_length
            for c in range(chains):  # chain c starts at normal page c (spread over the normal pages)
                head = norm[(c * len(norm)) // max(chains, 1)]
                head.links.append((h, f"/deep/{c}/0.html"))
                for j in range(self.chain_length - 1):
                    self.pages[self._by_path[(h, f"/deep/{c}/{j}.html")]].links = [(h, f"/deep/{c}/{j + 1}.html")]

    def url(self, page: Page | int) -> str:
        p = self.pages[page] if isinstance(page, int) else page
        return f"http://{self.addresses[p.host]}:{self.port}{p.path}"

    def seeds(self) -> list[str]:
        return [self.url(p) for p in self.pages if p.kind == "home"]

    def networks(self) -> list[str]:
        """CIDRs covering exactly this web's addresses, for fetch.allow_networks."""
        from crawl.net.addresses import networks_of
        return networks_of(self.addresses)

    def version_change_time(self, page: Page, version: int) -> float:
        """Seconds after t0 at which ``version`` went live (version 0: its age before t0)."""
        return -page.first_age_s if version == 0 else float(page.change_times[version - 1])

    def etag(self, page: Page, version: int) -> str:
        return f'"{page.index}-{version}"'

    def last_modified(self, page: Page, version: int) -> str:
        return email.utils.formatdate(self.t0 + self.version_change_time(page, version), usegmt=True)

    def body(self, page: Page, version: int) -> bytes:
        """The page's HTML at ``version``: a page-unique text, a version-unique text, its links."""
        vocab = self._vocab
        base = np.random.default_rng([self.seed, 3, page.index]).integers(0, len(vocab), 80)
        ver = np.random.default_rng([self.seed, 4, page.index, version]).integers(0, len(vocab), 60)
        links = "".join(f'<li><a href="http://{self.addresses[h]}:{self.port}{p}">{p}</a></li>'
                        for h, p in page.links)
        text = " ".join(vocab[i] for i in base)
        news = " ".join(vocab[i] for i in ver)
        return (f"<!doctype html><html><head><title>{page.kind} {page.index}</title></head><body>"
                f"<h1>{page.kind} page {page.index}</h1><p>{text}</p><p>Version {version}: {news}</p>"
                f"<ul>{links}</ul></body></html>").encode()

    # ------------------------------------------------------------------ HTTP

    def _answer(self, page: Page, now: float, inm: str | None, ims: str | None) -> tuple[int, int]:
        """(status, live version) for a GET of ``page`` at epoch ``now`` with these validators."""
        version = page.version_at(now - self.t0)
        if inm is not None:  # RFC 9110 §13.1.2 (weak comparison), §13.2.2: If-None-Match decides
            tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
            return (304 if "*" in tags or self.etag(page, version) in tags else 200), version
        if ims is not None:
            try:
                since = email.utils.parsedate_to_datetime(ims).timestamp()
            except (TypeError, ValueError, IndexError):
                return 200, version
            modified = math.floor(self.t0 + self.version_change_time(page, version))
            return (304 if modified <= since else 200), version
        return 200, version

    async def _handle(self, request):
        from aiohttp import web
        ts = time.time()
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        ip = sockname[0] if sockname else ""
        host = self.addresses.index(ip) if ip in self.addresses else None
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        idx = self._by_path.get((host, request.path)) if host is not None else None
        version = None
        if idx is not None and request.method in ("GET", "HEAD"):
            page = self.pages[idx]
            status, version = self._answer(page, ts, inm, ims)
            headers = {"ETag": self.etag(page, version), "Last-Modified": self.last_modified(page, version)}
            if status == 304:
                resp = web.Response(status=304, headers=headers)
            else:
                resp = web.Response(body=self.body(page, version), content_type="text/html",
                                    charset="utf-8", headers=headers)
        elif host is not None and request.path == "/robots.txt":
            resp = web.Response(text="User-agent: *\nAllow: /\n", content_type="text/plain")
        else:
            resp = web.Response(status=404, text="not found")
        entry = {"ts": ts, "done_ts": time.time(), "host": f"{ip}:{self.port}", "path": request.path_qs,
                 "page": idx, "conditional": inm is not None or ims is not None, "inm": inm, "ims": ims,
                 "status": resp.status, "version": version}
        with self._lock:
            self._log.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry) + "\n")
                self._log_file.flush()
        return resp

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self._log]

    # ------------------------------------------------------------------ server

    def start(self) -> "ChangingWeb":
        """Bind every host address on one free port, set t0 = now and serve in a daemon thread."""
        for _ in range(10):
            socks: list[socket.socket] = []
            port = 0
            try:
                for addr in self.addresses:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((addr, port))
                    port = s.getsockname()[1]
                    s.setblocking(False)
                break
            except OSError:
                for s in socks:
                    s.close()
                socks = []
        if not socks:
            raise RuntimeError("could not bind the changing web's addresses on one port")
        self._sockets, self.port = socks, port
        if self.log_path:
            self._log_file = open(self.log_path, "a", encoding="utf-8")
        self.t0 = time.time()
        ready = threading.Event()
        errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._thread_main, args=(ready, errors),
                                        name="changing-web", daemon=True)
        self._thread.start()
        ready.wait()
        if errors:
            raise RuntimeError("changing web failed to start") from errors[0]
        return self

    def _thread_main(self, ready: threading.Event, errors: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready, errors))
        except BaseException as e:  # pragma: no cover - defensive
            errors.append(e)
        finally:
            ready.set()
            loop.close()

    async def _serve(self, ready: threading.Event, errors: list[BaseException]) -> None:
        from aiohttp import web
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

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop_evt is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop_evt.set)
            except RuntimeError:
                pass
        self._thread.join(timeout=30)
        self._thread = None
        for s in self._sockets:
            s.close()
        self._sockets = []
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "ChangingWeb":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
