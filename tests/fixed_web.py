"""A small loopback web with fixed content, for tests that need validators and feeds: host ``i``
listens on 127.0.0.(2 + i) (never any other address), all hosts on one free port.

``FixedWeb.put(host, path, body, content_type, last_modified)`` sets what a path answers (200, with a
strong ``ETag`` of the body and a ``Last-Modified``, fixed unless given, none when None; a request whose ``If-None-Match`` names the
ETag gets 304, RFC 9110 §13.1.2); ``/robots.txt`` allows everything unless put; any other path is
404. Every request is logged (``requests()``): ``ts``, ``host`` ("ip:port"), ``path``, ``status``,
``inm`` and ``ims`` (the validator headers as received).
"""
from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from typing import Any

from aiohttp import web

LAST_MODIFIED = "Thu, 01 Jan 2026 00:00:00 GMT"


class FixedWeb:
    def __init__(self, hosts: int = 1):
        if not 1 <= hosts <= 253:
            raise ValueError("hosts must be in 1..253")
        self.addresses = [f"127.0.0.{2 + i}" for i in range(hosts)]
        self.port = 0
        self._content: dict[tuple[int, str], tuple[bytes, str, str | None]] = {}
        self._log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def base(self, host: int) -> str:
        return f"http://{self.addresses[host]}:{self.port}"

    def put(self, host: int, path: str, body: str | bytes, content_type: str = "text/html",
            last_modified: str | None = LAST_MODIFIED) -> str:
        """Serve ``body`` at ``path`` of ``host``; returns the page's URL."""
        data = body.encode() if isinstance(body, str) else body
        with self._lock:
            self._content[(host, path)] = (data, content_type, last_modified)
        return self.base(host) + path

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self._log]

    async def _handle(self, request: web.Request) -> web.Response:
        ts = time.time()
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        ip = sockname[0] if sockname else ""
        host = self.addresses.index(ip) if ip in self.addresses else None
        with self._lock:
            found = self._content.get((host, request.path)) if host is not None else None
        inm = request.headers.get("If-None-Match")
        if found is not None:
            data, ctype, modified = found
            etag = '"' + hashlib.sha1(data).hexdigest()[:16] + '"'
            headers = {"ETag": etag, **({"Last-Modified": modified} if modified else {})}
            if inm is not None and etag in {t.strip().removeprefix("W/") for t in inm.split(",")}:
                resp = web.Response(status=304, headers=headers)
            else:
                resp = web.Response(body=data, headers={**headers, "Content-Type": ctype})
        elif host is not None and request.path == "/robots.txt":
            resp = web.Response(text="User-agent: *\nAllow: /\n", content_type="text/plain")
        else:
            resp = web.Response(status=404, text="not found")
        with self._lock:
            self._log.append({"ts": ts, "host": f"{ip}:{self.port}", "path": request.path_qs,
                              "status": resp.status, "inm": inm,
                              "ims": request.headers.get("If-Modified-Since")})
        return resp

    def start(self) -> "FixedWeb":
        for _ in range(10):  # one free port that every host address can bind
            socks: list[socket.socket] = []
            try:
                port = 0
                for addr in self.addresses:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(s)
                    s.bind((addr, port))
                    port = s.getsockname()[1]
                    s.setblocking(False)
                self._sockets, self.port = socks, port
                break
            except OSError:
                for s in socks:
                    s.close()
        if not self._sockets:
            raise RuntimeError("could not bind the fixed web's addresses on one port")
        ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(ready)), name="fixed-web",
                                        daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the fixed web did not start")
        return self

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        try:
            for s in self._sockets:
                await web.SockSite(runner, s).start()
            ready.set()
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
        self._thread = None
        for s in self._sockets:
            s.close()
        self._sockets = []

    def __enter__(self) -> "FixedWeb":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
