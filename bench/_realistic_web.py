#!/usr/bin/env python
"""A realistic web on loopback for bench/cost.py (issue 33): pages the size and shape of real ones.

The bundled test web (crawl/devweb) serves ~1 KB pages with a handful of links, which makes every
per-page cost look small. This one serves what a broad crawl meets:

* ``hosts`` hosts x ``pages`` pages (``/p/0.html`` .. ``/p/<pages-1>.html``), host i on its own
  loopback address (crawl.devweb.site.host_address: 127.0.0.2, 127.0.0.3, ...; 127.0.0.0/8 only),
  all on one common port, as DevWeb does;
* bodies whose uncompressed size is lognormal around 50 KB (median 50 KB, sigma 0.6), clamped to
  5..300 KB, with real structure: a head with meta tags, an inline <style> and an inline <script>
  per host (the same on each of its pages, as a site template is), a navigation bar, the article
  (headings, paragraphs, lists, a table, links in the text), a sidebar and footer boilerplate;
* ~90 links a page: mostly same-host (other pages, tag and archive pages, footer pages), about one
  in eight to another host's page;
* served gzip-compressed (``Content-Encoding: gzip``), each body generated and compressed once and
  then cached, so the server's own CPU stays small and equal for every client;
* exactly 3 % of the page URLs answer 404 and 2 % answer 301 (to another page of the same host),
  chosen by the seed; any other path (tag pages, footer pages, sitemaps) answers 404;
* a robots.txt per host that allows the pages (it disallows /search, which no page links to).
* with ``--tls-ca PEM`` (``RealisticWebProcess(..., tls_ca=PEM)``) every host over HTTPS instead, each
  with its own certificate for its IP address from a local CA (crawl/devweb/tls.py ``LocalCA``,
  trustme) whose PEM it writes there; its pages then link ``https://`` URLs.

Everything is deterministic given (hosts, pages, seed). ``RealisticWeb`` is the pure generator;
``main()`` serves it in its own process (bench/cost.py starts it with ``RealisticWebProcess``, so
the server's CPU is never counted as a crawler's). The process prints ``port <n>`` once every
socket listens and the cache is warm, and answers ``GET /_counters`` (and ``/_reset``) on
127.0.0.1:<port> only — an address outside the web's allow-list, so no crawler can reach it: the
counts of page requests by status, robots.txt and other requests, responses sent without gzip,
the connections that carried a request (over HTTPS: its TLS handshakes), and the largest number of requests a host ever had in flight at once (a politeness check:
delay 0 still means one request at a time per host). With ``--log FILE`` (``RealisticWebProcess(...,
request_log=FILE)``) it also appends one JSON line per request: ``host`` (its index), ``path``,
``status``, ``ts`` (the handler's start, ``time.time()``), ``write_ts`` (just before the response
is written) and ``done_ts`` (once the whole response was handed to the socket), from which a run's
politeness can be checked on the server's side; the file is flushed on every ``/_counters`` request. The web runs at a
higher scheduling priority than the crawler where the OS allows it (``WEB_NICE``), with send
buffers that take a whole body, so its stamps lag what happened as little as a loaded machine
allows.
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from crawl.devweb.site import _address_index, host_address  # noqa: E402

MEDIAN_BYTES = 50_000
SIGMA = 0.6
MIN_BYTES, MAX_BYTES = 5_000, 300_000
NOT_FOUND_SHARE, MOVED_SHARE = 0.03, 0.02
# a body is written to the kernel at once (module docstring); the kernel may cap it at net.core.wmem_max
SEND_BUFFER_BYTES = 1 << 20
WEB_NICE = -10  # see main()
GZIP_LEVEL = 6  # what nginx/Apache deployments commonly use; only paid once per body here

_SYLLABLES = ("ka", "lo", "mi", "ne", "ra", "to", "vu", "se", "da", "pi", "an", "el", "or", "us", "in",
              "ber", "tal", "gon", "mer", "sta", "qui", "dor", "fen", "lis", "pra", "com", "ven", "tur")
_FOOTER = ("about", "contact", "privacy", "terms", "careers", "press", "advertise", "help", "sitemap",
           "accessibility", "cookies", "imprint", "newsletter", "rss", "archive")


FUNCTION_WORDS = 120     # shared by every page, as "the", "of", "and" are
VOCABULARY = 40_000      # content words; each page uses its own topic's share of them
TOPIC_WORDS = 2_500


def _vocabulary(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct pseudo-words."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered


def _zipf_cum_weights(n: int) -> list[float]:
    """Cumulative Zipf weights (s = 1) of ranks 1..n: text repeats and compresses like prose."""
    cum, total = [], 0.0
    for rank in range(1, n + 1):
        total += 1.0 / rank
        cum.append(total)
    return cum


class RealisticWeb:
    """The generator: which URL answers what, and each page's HTML. No sockets here."""

    def __init__(self, hosts: int, pages: int, seed: int = 1, port: int = 0, scheme: str = "http"):
        if hosts < 1 or pages < 2:
            raise ValueError("hosts >= 1 and pages >= 2")
        host_address(hosts - 1)  # validates the host count against 127.0.0.0/8
        self.hosts, self.pages, self.seed, self.port = hosts, pages, seed, port
        self.scheme = scheme  # "https": every page URL and link (the bodies' too) names https
        self.addresses = [host_address(i) for i in range(hosts)]
        rng = random.Random(f"realistic-web:{seed}")
        # Every page draws its words from the function words and a topic: TOPIC_WORDS content words
        # of its own, in its own frequency order. Two unrelated pages then share a word set about as
        # much as two unrelated articles do (Jaccard ~0.1), so dedup sees a realistic web, not
        # one where every page is a near copy of every other.
        self.vocabulary = _vocabulary(rng, FUNCTION_WORDS + VOCABULARY)
        self.cum_weights = _zipf_cum_weights(FUNCTION_WORDS + TOPIC_WORDS)
        n = hosts * pages
        order = list(range(n))
        rng.shuffle(order)
        n404, n301 = round(n * NOT_FOUND_SHARE), round(n * MOVED_SHARE)
        self.not_found = set(order[:n404])
        self.moved = set(order[n404:n404 + n301])

    # ------------------------------------------------------------------ what each URL is

    def base(self, host: int) -> str:
        return f"{self.scheme}://{self.addresses[host]}:{self.port}"

    def page_urls(self) -> list[str]:
        """Every page URL, host by host (what bench/cost.py injects)."""
        return [f"{self.base(h)}/p/{k}.html" for h in range(self.hosts) for k in range(self.pages)]

    def page_status(self, host: int, page: int) -> int:
        i = host * self.pages + page
        return 404 if i in self.not_found else 301 if i in self.moved else 200

    def expected_statuses(self) -> dict[str, int]:
        n = self.hosts * self.pages
        return {"200": n - len(self.not_found) - len(self.moved), "301": len(self.moved),
                "404": len(self.not_found)}

    def redirect_target(self, host: int, page: int) -> str:
        return f"{self.base(host)}/p/{(page + 1) % self.pages}.html"

    def robots_txt(self, host: int) -> str:
        return "User-agent: *\nDisallow: /search\nAllow: /\n"

    # ------------------------------------------------------------------ HTML

    def topic(self, rng: random.Random) -> list[str]:
        """A topic's words, most frequent first: the function words, then TOPIC_WORDS content words."""
        picked = rng.sample(range(FUNCTION_WORDS, FUNCTION_WORDS + VOCABULARY), TOPIC_WORDS)
        return self.vocabulary[:FUNCTION_WORDS] + [self.vocabulary[i] for i in picked]

    def _text(self, rng: random.Random, n_words: int, words: list[str] | None = None) -> list[str]:
        """``n_words`` words of ``words`` (a topic; default the function words and the first
        content words) in Zipf frequencies."""
        words = words if words is not None else self.vocabulary[:FUNCTION_WORDS + TOPIC_WORDS]
        return rng.choices(words, cum_weights=self.cum_weights, k=n_words)

    def _host_template(self, host: int) -> tuple[str, str]:
        """The host's inline <style> and <script> (3-8 KB each): shared by its pages, as a CMS
        template's are."""
        rng = random.Random(f"template:{self.seed}:{host}")
        rules = []
        for j in range(rng.randint(40, 110)):
            sel = rng.choice(("div", "p", "a", "ul li", "h2", "section", "nav a", "footer p", "span"))
            rules.append(f".c{host}-{j} {sel}{{margin:{rng.randint(0, 24)}px {rng.randint(0, 24)}px;"
                         f"color:#{rng.randrange(16 ** 6):06x};font-size:{rng.randint(10, 22)}px;"
                         f"line-height:{rng.randint(12, 18) / 10}}}")
        funcs = []
        for j in range(rng.randint(15, 45)):
            a, b = rng.choice(self.vocabulary), rng.choice(self.vocabulary)
            funcs.append(f"function {a}{j}(e,t){{var n=document.querySelectorAll('.c{host}-{j}');"
                         f"for(var i=0;i<n.length;i++){{n[i].dataset.{b}=t+i;}}"
                         f"return e&&e.{a}?e.{a}(t):{rng.randint(0, 999)};}}")
        return "\n".join(rules), "\n".join(funcs)

    def _link(self, rng: random.Random, host: int, page: int) -> str:
        """One article link: another page of this host, one of its tag or archive pages, or
        (15 %) a page of another host."""
        r = rng.random()
        if r < 0.15 and self.hosts > 1:
            other = rng.randrange(self.hosts - 1)
            other += other >= host
            return f"{self.base(other)}/p/{rng.randrange(self.pages)}.html"
        if r < 0.35:
            return f"/tag/{rng.choice(self.vocabulary)}/"
        if r < 0.5:
            return f"/archive/{2015 + rng.randrange(11)}/{1 + rng.randrange(12):02d}/"
        k = rng.randrange(self.pages - 1)
        return f"/p/{k + (k >= page)}.html"

    def html(self, host: int, page: int) -> str:
        rng = random.Random(f"page:{self.seed}:{host}:{page}")
        target = int(min(MAX_BYTES, max(MIN_BYTES, rng.lognormvariate(math.log(MEDIAN_BYTES), SIGMA))))
        style, script = self._host_template(host)
        words = self.topic(rng)
        text = lambda n: self._text(rng, n, words)  # noqa: E731 (the article's words, its topic's)
        title = " ".join(text(8)).capitalize()
        site = " ".join(self._text(random.Random(f"site:{self.seed}:{host}"), 2)).title()
        nav = "".join(f'<li><a href="/p/{k}.html">{w.title()}</a></li>'
                      for k, w in zip(range(min(self.pages, 14)), self._text(random.Random(f"nav:{host}"), 14)))
        nav += '<li><a href="/tag/news/">News</a></li><li><a href="/search?q=">Search</a></li>'
        footer = "".join(f'<li><a href="/{name}.html">{name.title()}</a></li>' for name in _FOOTER)
        head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{title} | {site}</title>"
                f'<meta name="description" content="{" ".join(text(25))}">'
                f'<meta property="og:title" content="{title}"><meta property="og:type" content="article">'
                f'<link rel="canonical" href="{self.base(host)}/p/{page}.html">'
                f"<style>\n{style}\n</style><script>\n{script}\n</script></head>\n<body>"
                f'<header class="site-header"><div class="logo"><a href="/p/0.html">{site}</a></div>'
                f'<nav class="main-nav"><ul>{nav}</ul></nav></header>\n<main><article>'
                f"<h1>{title}</h1><p class=\"byline\">By {' '.join(text(2)).title()} · "
                f"{2020 + page % 6}-{1 + page % 12:02d}-{1 + host % 28:02d}</p>\n")
        tail = ('</article><aside class="sidebar"><h3>Related</h3><ul>'
                + "".join(f'<li><a href="{self._link(rng, host, page)}">{" ".join(text(5))}</a></li>'
                          for _ in range(8))
                + f'</ul></aside></main>\n<footer><ul class="footer-links">{footer}</ul>'
                f"<p>&copy; {2026} {site}. All rights reserved. "
                + " ".join(self._text(random.Random(f"footer:{self.seed}:{host}"), 60))
                + '</p></footer><script>window.dataLayer=window.dataLayer||[];'
                "function gtag(){dataLayer.push(arguments);}gtag('js',new Date());</script></body></html>\n")
        # article links: 60, so ~100 anchors a page with nav (16), sidebar (8) and footer (15), ~85 distinct URLs
        body: list[str] = []
        size = len(head) + len(tail)
        links_left = 60
        paragraphs = 0
        while size < target:
            paragraphs += 1
            if paragraphs % 6 == 0:
                part = f"<h2>{' '.join(text(6)).capitalize()}</h2>"
            elif paragraphs % 11 == 0:
                part = "<ul>" + "".join(f"<li>{' '.join(text(9))}</li>" for _ in range(5)) + "</ul>"
            elif paragraphs % 17 == 0:
                part = "<table>" + "".join("<tr>" + "".join(f"<td>{w}</td>" for w in text(4)) + "</tr>"
                                           for _ in range(6)) + "</table>"
            else:
                para = text(rng.randint(60, 140))
                # spread the article's links over the first ~40 KB, a few per paragraph
                for _ in range(min(links_left, rng.randint(2, 5) if size < 40_000 else 0)):
                    at = rng.randrange(len(para))
                    para[at] = f'<a href="{self._link(rng, host, page)}">{para[at]}</a>'
                    links_left -= 1
                part = "<p>" + " ".join(para).capitalize() + ".</p>"
            body.append(part)
            size += len(part) + 1
        if links_left:  # short pages: the remaining links as a "read more" list, as many templates have
            body.append('<ul class="more">' + "".join(f'<li><a href="{self._link(rng, host, page)}">'
                                                      f"{' '.join(text(4))}</a></li>"
                                                      for _ in range(links_left)) + "</ul>")
        return head + "\n".join(body) + tail


# =========================================================================== the server process

class Server:
    """Serves a RealisticWeb from one asyncio loop: every host's socket on the common port, bodies
    gzip-compressed once (at start) and cached, counters on 127.0.0.1:<port>/_counters."""

    def __init__(self, web: RealisticWeb, log_path: str | None = None):
        self.web = web
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.bodies: dict[tuple[int, int], bytes] = {}
        self.robots: dict[int, bytes] = {}
        self.in_flight: Counter = Counter()
        self.reset()

    def reset(self) -> None:
        self.counters: dict[str, Any] = {"page_status": Counter(), "robots": 0, "other": Counter(),
                                         "not_gzip": 0, "max_in_flight_per_host": 0, "page_bytes_sent": 0,
                                         "page_bytes_uncompressed": 0, "connections": 0}
        # connections that carried a request (over https: TLS handshakes), by their address pair;
        # a client port is not reused for the same pair within TIME_WAIT, far longer than a method
        self.connections: set[tuple] = set()

    def warm(self) -> dict[str, Any]:
        """Generate and compress every body once; returns their size figures."""
        raw = gz = 0
        sizes = []
        for h in range(self.web.hosts):
            self.robots[h] = self.web.robots_txt(h).encode()
            for k in range(self.web.pages):
                if self.web.page_status(h, k) == 200:
                    html = self.web.html(h, k).encode()
                    self.bodies[(h, k)] = gzip.compress(html, GZIP_LEVEL, mtime=0)
                    raw += len(html)
                    gz += len(self.bodies[(h, k)])
                    sizes.append(len(html))
        sizes.sort()
        return {"pages_200": len(sizes), "raw_bytes": raw, "gzip_bytes": gz,
                "median_raw_bytes": sizes[len(sizes) // 2] if sizes else 0,
                "min_raw_bytes": sizes[0] if sizes else 0, "max_raw_bytes": sizes[-1] if sizes else 0}

    async def handle(self, request):
        if self.log is None:
            return await self.answer(request)
        ts = time.time()
        resp = await self.answer(request)
        if request.path.startswith("/_"):
            return resp
        # the whole response on the socket before done_ts: the gap to the host's next request is
        # then what the server saw, never more. write_ts is taken just before anything is written
        # (prepare() sends the headers, and all of a response without a body): the response cannot
        # have ended before it, so done_ts - write_ts bounds how late done_ts may be (the event
        # loop or the scheduler holding this coroutine after the write).
        write_ts = time.time()
        await resp.prepare(request)
        await resp.write_eof()
        done_ts = time.time()
        ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
        self.log.write(json.dumps({"host": _address_index(ip), "path": request.path, "status": resp.status,
                                   "ts": ts, "write_ts": write_ts, "done_ts": done_ts}) + "\n")
        return resp

    async def answer(self, request):
        from aiohttp import web
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        ip = sock[0] if sock else ""
        if ip == "127.0.0.1":
            return self.control(request.path)
        host = _address_index(ip)
        if host is None or host >= self.web.hosts:
            return web.Response(status=404, text="not found")
        self.in_flight[host] += 1
        c = self.counters
        pair = (request.transport.get_extra_info("peername"), ip)
        if pair not in self.connections:
            self.connections.add(pair)
            c["connections"] += 1
        c["max_in_flight_per_host"] = max(c["max_in_flight_per_host"], self.in_flight[host])
        try:
            path = request.path
            if path == "/robots.txt":
                c["robots"] += 1
                return web.Response(body=self.robots[host], content_type="text/plain", charset="utf-8")
            page = _page_number(path, self.web.pages)
            if page is None:
                c["other"]["404" if "sitemap" not in path else "sitemap_404"] += 1
                return web.Response(status=404, text="not found")
            status = self.web.page_status(host, page)
            c["page_status"][str(status)] += 1
            if status == 404:
                return web.Response(status=404, text="<html><body><h1>Not found</h1></body></html>",
                                    content_type="text/html")
            if status == 301:
                return web.Response(status=301, headers={"Location": self.web.redirect_target(host, page)})
            body = self.bodies[(host, page)]
            c["page_bytes_sent"] += len(body)
            if "gzip" not in request.headers.get("Accept-Encoding", ""):
                c["not_gzip"] += 1
                plain = gzip.decompress(body)
                c["page_bytes_uncompressed"] += len(plain)
                return web.Response(body=plain, content_type="text/html", charset="utf-8")
            return web.Response(body=body, headers={"Content-Type": "text/html; charset=utf-8",
                                                    "Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
        finally:
            self.in_flight[host] -= 1

    def control(self, path: str):
        from aiohttp import web
        snapshot = json.loads(json.dumps(self.counters))
        if self.log is not None:
            self.log.flush()
        if path == "/_reset":
            self.reset()
        return web.json_response(snapshot)


def _page_number(path: str, pages: int) -> int | None:
    if not (path.startswith("/p/") and path.endswith(".html")):
        return None
    try:
        k = int(path[3:-5])
    except ValueError:
        return None
    return k if 0 <= k < pages else None


async def _serve(web_: RealisticWeb, server: Server, port: int, ready_line: str,
                 tls: dict[str, Any] | None = None) -> None:
    """``tls``: {address: server SSLContext} -- those addresses serve HTTPS (127.0.0.1, the
    counters, stays plain HTTP)."""
    from aiohttp import web
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    socks = []
    for addr in ["127.0.0.1"] + web_.addresses:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted sockets inherit it: a whole gzip body (at most ~100 KB) fits the kernel's send
        # buffer, so a write never waits for the client to read and done_ts is stamped at once
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        s.bind((addr, port))
        port = port or s.getsockname()[1]
        s.setblocking(False)
        socks.append(s)
        await web.SockSite(runner, s, backlog=1024, ssl_context=(tls or {}).get(addr)).start()
    web_.port = port
    print(ready_line.format(port=port), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Serve the realistic web (bench/cost.py starts this).")
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--pages", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", metavar="FILE", help="append one JSON line per request (module docstring)")
    p.add_argument("--tls-ca", metavar="PEM", help="serve every host over HTTPS, each with its own certificate "
                   "for its IP address from a local CA (trustme) whose PEM is written here")
    args = p.parse_args(argv)
    # the web stands for servers on other machines, which our crawler's load does not slow down:
    # ahead of the crawler's processes in the scheduler (where allowed), its request-log stamps lag
    # its sends as little as they can on a loaded machine
    try:
        os.nice(WEB_NICE)
    except OSError:
        pass
    # Bind the port first (bodies hold absolute cross-host links, so they need it), then warm.
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind(("127.0.0.1", args.port))
    port = probe.getsockname()[1]
    probe.close()
    web_ = RealisticWeb(args.hosts, args.pages, args.seed, port, "https" if args.tls_ca else "http")
    tls = None
    if args.tls_ca:  # one certificate per host, for its IP literal, as each site has its own
        from crawl.devweb.tls import LocalCA
        ca = LocalCA()
        ca.write_pem(args.tls_ca)
        tls = {addr: ca.server_context([addr]) for addr in web_.addresses}
    server = Server(web_, args.log)
    t = time.process_time()
    sizes = server.warm()
    print("warm " + json.dumps(dict(sizes, cpu_s=round(time.process_time() - t, 1))), flush=True)
    asyncio.run(_serve(web_, server, port, "port {port}", tls))
    return 0


class RealisticWebProcess:
    """The server in a child process (its own interpreter and GIL, its CPU apart from the crawlers').
    ``web`` is a RealisticWeb with the same parameters and port, for URLs and expected counts."""

    def __init__(self, hosts: int, pages: int, seed: int, log_path: str, start_timeout_s: float = 1800.0,
                 request_log: str | None = None, tls_ca: str | None = None):
        """``tls_ca``: serve HTTPS, the local CA's PEM written to this path (what fetch.tls_ca_file names)."""
        self.stderr = open(log_path, "w", encoding="utf-8")
        self.tls_ca = tls_ca
        self.command = [sys.executable, os.path.abspath(__file__), "--hosts", str(hosts), "--pages", str(pages),
                        "--seed", str(seed)] + (["--log", request_log] if request_log else []) + (
                        ["--tls-ca", tls_ca] if tls_ca else [])
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                     cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
        self.sizes: dict[str, Any] = {}
        deadline = time.monotonic() + start_timeout_s
        port = None
        try:
            while port is None:
                line = self.proc.stdout.readline()
                if not line or time.monotonic() > deadline:
                    raise RuntimeError(f"realistic web did not start; see {log_path}")
                if line.startswith("warm "):
                    self.sizes = json.loads(line[5:])
                elif line.startswith("port "):
                    port = int(line.split()[1])
        except BaseException:
            self.stop()
            raise
        self.port = port
        self.web = RealisticWeb(hosts, pages, seed, port, "https" if tls_ca else "http")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def networks(self) -> list[str]:
        from crawl.net.addresses import networks_of
        return networks_of(self.web.addresses)

    def counters(self, reset: bool = False) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.port}/{'_reset' if reset else '_counters'}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        with opener.open(url, timeout=60) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        from _common import stop_server_process  # bench/ is on sys.path wherever this module is imported
        stop_server_process(self.proc, self.stderr)


if __name__ == "__main__":
    sys.exit(main())
