"""Tests for the opt-in hostile hosts of the test web (crawl.devweb.hostile, DevWeb(hostile=True)). No Spark needed.

Every behaviour is checked from a plain client (http.client / raw sockets) with short timeouts.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import re
import socket
import threading
import time
import zlib
from collections import deque
from urllib.parse import urljoin, urlsplit

import pytest
from protego import Protego
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from crawl.devweb.hostile import HOSTILE
from crawl.devweb.site import host_address
from crawl.devweb.web import DevWeb

HOSTS = 3
PAGES = 5
UA = "deltacrawl-test/1.0"


class Resp:
    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name: str) -> str | None:
        for k, v in self.headers.items():
            if k.lower() == name.lower():
                return v
        return None

    def links(self, url: str) -> list[str]:
        tree = HTMLParser(self.body.decode("utf-8", "replace"))
        return [urljoin(url, a.attributes["href"]) for a in tree.css("a[href]")]


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 3.0, limit: int | None = None) -> Resp:
    """One GET; no redirects followed, no decoding; reads at most ``limit`` body bytes."""
    u = urlsplit(url)
    assert u.hostname and u.hostname.startswith("127."), url  # loopback only
    conn = http.client.HTTPConnection(u.netloc, timeout=timeout)
    try:
        conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers={"User-Agent": UA, **(headers or {})})
        r = conn.getresponse()
        body = r.read() if limit is None else r.read(limit)
        return Resp(r.status, dict(r.getheaders()), body)
    finally:
        conn.close()


def wait_for(cond, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def entries(dw: DevWeb, name: str, path: str) -> list[dict]:
    return [e for e in dw.requests() if e["host"] == dw.hostile_hosts[name] and e["path"] == path]


@pytest.fixture(scope="module")
def web():
    dw = DevWeb(hosts=HOSTS, pages_per_host=PAGES, port=0, seed=11, crawl_delay_s=0.25, hostile=True)
    dw.start()
    yield dw
    dw.stop()


@pytest.fixture
def noise(caplog):
    """Collects warnings/errors logged by aiohttp or asyncio (from any thread)."""
    caplog.set_level(logging.WARNING)
    yield caplog
    bad = [r for r in caplog.records if r.name.startswith(("aiohttp", "asyncio")) and r.levelno >= logging.WARNING]
    assert not bad, [r.getMessage() for r in bad]


# ---------------------------------------------------------------------- API


def test_names_and_urls(web):
    assert list(web.hostile_hosts) == list(HOSTILE)
    assert len(HOSTILE) == 18
    for j, name in enumerate(HOSTILE):
        assert web.hostile_hosts[name] == f"{host_address(HOSTS + j)}:{web.port}"
        urls = web.hostile_urls(name)
        assert urls, name
        assert all(u.startswith(f"http://{web.hostile_hosts[name]}/") for u in urls)
    # normal hosts unchanged
    assert web.host_names == [f"{host_address(i)}:{web.port}" for i in range(HOSTS)]
    assert web.seed_urls() == [f"http://{h}/" for h in web.host_names]
    assert web.outlinks(web.hostile_urls("traps")[0]) == []
    assert not web.is_disallowed(web.hostile_urls("robots_redirect")[-1])
    with pytest.raises(KeyError):
        web.hostile_urls("nope")


def test_hostile_urls_answer(web):
    """Every seed URL is served (status depends on the behaviour) except the streaming ones."""
    slow = {"drip", "no_headers", "huge"}
    for name in HOSTILE:
        if name in slow or name == "rate_limited":
            continue
        for url in web.hostile_urls(name):
            assert get(url, limit=1 << 16).status in (200, 301, 302, 303, 307, 308, 503), url


def test_hostile_index_links_entry_points(web):
    for name in ("redirects", "messy", "traps", "drip", "robots_500"):
        root = f"http://{web.hostile_hosts[name]}/"
        r = get(root)
        assert r.status == 200
        links = set(r.links(root))
        assert set(web.hostile_urls(name)) - {root} <= links, name


def test_normal_hosts_never_link_to_hostile(web):
    hostile = set(web.hostile_hosts.values())
    seen = set(web.seed_urls())
    q = deque(seen)
    while q:
        u = q.popleft()
        r = get(u)
        assert r.status == 200
        served = {v.split("#")[0] for v in r.links(u)}
        assert served == set(web.outlinks(u))
        for v in served:
            assert urlsplit(v).netloc not in hostile
            if v not in seen and not web.is_disallowed(v):
                seen.add(v)
                q.append(v)


def test_hostile_off_is_unchanged():
    """hostile=False serves no extra host; hostile=True leaves the normal hosts byte-identical."""
    plain = DevWeb(hosts=HOSTS, pages_per_host=PAGES, seed=11).start()
    try:
        assert plain.hostile_hosts == {}
        with pytest.raises(KeyError):
            plain.hostile_urls("drip")
        with pytest.raises(OSError):  # nothing listens on the next address
            socket.create_connection((host_address(HOSTS), plain.port), timeout=1).close()
        urls = [u + p for u in plain.seed_urls() for p in ["", "robots.txt", *(f"p/{k}.html" for k in range(PAGES))]]
        before = {u: (get(u).status, get(u).body, plain.outlinks(u)) for u in urls}
        plain.clear_log()
        get(plain.seed_urls()[0])
        log = plain.requests()
        assert set(log[0]) == {"ts", "host", "scheme", "peer_port", "path", "method", "user_agent", "status", "done_ts"}
        assert log[0]["done_ts"] >= log[0]["ts"]
    finally:
        plain.stop()
    with DevWeb(hosts=HOSTS, pages_per_host=PAGES, seed=11, port=plain.port, hostile=True) as hw:
        assert hw.seed_urls() == plain.seed_urls()
        assert {u: (get(u).status, get(u).body, hw.outlinks(u)) for u in urls} == before


# ---------------------------------------------------------------------- robots.txt


def test_robots_variants(web):
    h = web.hostile_hosts
    assert get(f"http://{h['robots_500']}/robots.txt").status == 500
    assert get(f"http://{h['robots_500']}/p/0.html").status == 200
    assert get(f"http://{h['robots_429']}/robots.txt").status == 429

    r = get(f"http://{h['robots_redirect']}/robots.txt")
    assert r.status == 301 and r.header("Location") == "/real-robots.txt"
    real = get(f"http://{h['robots_redirect']}/real-robots.txt")
    assert real.status == 200
    rp = Protego.parse(real.body.decode())
    assert not rp.can_fetch(f"http://{h['robots_redirect']}/private/0.html", "x")
    assert rp.can_fetch(f"http://{h['robots_redirect']}/p/0.html", "x")

    r = get(f"http://{h['robots_redirect_loop']}/robots.txt")
    assert r.status == 301 and r.header("Location") == "/robots.txt"

    r = get(f"http://{h['crawl_delay_big']}/robots.txt")
    assert Protego.parse(r.body.decode()).crawl_delay("deltacrawl") == 3600

    for name in ("drip", "traps", "rate_limited", "unavailable"):  # other hostile hosts allow everything
        assert get(f"http://{h[name]}/robots.txt").body == b"User-agent: *\nDisallow:\n"


def test_robots_huge(web):
    host = web.hostile_hosts["robots_huge"]
    r = get(f"http://{host}/robots.txt", timeout=5)
    assert r.status == 200 and len(r.body) == 2 * 1024 * 1024
    assert r.body.index(b"Disallow: /p/") >= 600 * 1024
    assert b"\n\n" not in r.body
    head = Protego.parse(r.body[: 500 * 1024].decode())
    assert head.can_fetch(f"http://{host}/p/0.html", "x")
    assert not head.can_fetch(f"http://{host}/private/0.html", "x")
    full = Protego.parse(r.body.decode())
    assert not full.can_fetch(f"http://{host}/p/0.html", "x")
    assert get(f"http://{host}/p/0.html").status == 200


# ---------------------------------------------------------------------- slow / big bodies


def test_drip_drips_and_disconnect_is_clean(web, noise):
    url = web.hostile_urls("drip")[0]
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.netloc, timeout=3)
    conn.request("GET", u.path)
    r = conn.getresponse()
    # headers at once: they are here while the server, by its own log, is still dripping the body
    assert entries(web, "drip", "/slow.html")[-1]["done_ts"] is None
    assert r.status == 200 and r.getheader("Content-Length") == "600"
    first = r.read(1)
    assert first == b"<"
    t1 = time.monotonic()
    got = r.read(5)
    dt = time.monotonic() - t1
    assert got == b"!DOCT" and dt > 0.3  # ~100 ms per byte (a lower bound: a loaded machine only adds)
    conn.close()  # drop mid-drip
    assert wait_for(lambda: entries(web, "drip", "/slow.html")[-1]["done_ts"] is not None, 2.0)
    e = entries(web, "drip", "/slow.html")[-1]
    assert e["status"] == 200 and e["done_ts"] >= e["ts"]
    assert wait_for(lambda: not web._streams, 2.0)


def test_drip_with_a_duration_completes_slowly(web, noise):
    url = web.hostile_urls("drip")[0] + "?s=1"
    t0 = time.monotonic()
    r = get(url, timeout=3.0)
    elapsed = time.monotonic() - t0
    assert r.status == 200 and len(r.body) == 600 and r.body.endswith(b"</html>\n")
    assert elapsed >= 0.8  # ten pieces, 100 ms apart (a lower bound: a loaded machine only adds)
    assert entries(web, "drip", "/slow.html")[-1]["status"] == 200


def test_hang_never_sends_headers(web, noise):
    url = web.hostile_urls("no_headers")[0]
    u = urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=0.5)
    try:
        s.sendall(f"GET {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
        with pytest.raises(socket.timeout):
            s.recv(1)
        assert wait_for(lambda: bool(entries(web, "no_headers", "/hang.html")), 1.0)
        e = entries(web, "no_headers", "/hang.html")[-1]
        assert e["status"] == 0 and e["done_ts"] is None  # still hanging
    finally:
        s.close()
    with pytest.raises((TimeoutError, socket.timeout)):
        get(url, timeout=0.3)
    assert wait_for(lambda: all(e["done_ts"] is not None for e in entries(web, "no_headers", "/hang.html")), 2.0)
    assert wait_for(lambda: not web._streams, 2.0)


def test_huge_is_streamed(web):
    url = web.hostile_urls("huge")[0]
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.netloc, timeout=3)
    try:
        conn.request("GET", u.path)
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Content-Type", "").startswith("text/html")
        assert int(r.getheader("Content-Length")) == 50 * 1024 * 1024
        data = r.read(1024 * 1024)
        assert len(data) == 1024 * 1024 and data.startswith(b"<!DOCTYPE html>")
        e = entries(web, "huge", "/big.html")[-1]
        assert e["done_ts"] is None  # the server is still streaming the rest
    finally:
        conn.close()
    assert wait_for(lambda: entries(web, "huge", "/big.html")[-1]["done_ts"] is not None, 2.0)


def test_gzip_bomb(web):
    r = get(web.hostile_urls("gzip_bomb")[0], timeout=10)
    assert r.status == 200
    assert r.header("Content-Encoding") == "gzip"
    assert r.header("Content-Type").startswith("text/html")
    assert 50_000 < len(r.body) < 200_000
    d = zlib.decompressobj(31)
    out, data = 0, r.body
    cap = 20 * 1024 * 1024  # a careful client stops at a cap
    while data and out < cap:
        chunk = d.decompress(data, 1 << 20)
        out += len(chunk)
        data = d.unconsumed_tail
    assert out >= cap and out > 100 * len(r.body)


# ---------------------------------------------------------------------- redirects


def follow(url: str, max_hops: int = 20) -> tuple[list[int], list[str]]:
    codes, urls = [], [url]
    for _ in range(max_hops):
        r = get(url)
        if r.status not in (301, 302, 303, 307, 308):
            return codes + [r.status], urls
        codes.append(r.status)
        url = urljoin(url, r.header("Location"))
        urls.append(url)
    return codes, urls


def test_redirects(web):
    host = web.hostile_hosts["redirects"]
    seen_codes = set()
    for n in (2, 5, 8):
        codes, urls = follow(f"http://{host}/r{n}/0")
        assert len(codes) == n + 1 and codes[-1] == 200, (n, codes)
        assert urls[-1] == f"http://{host}/final.html"
        seen_codes |= set(codes[:-1])
    assert seen_codes == {301, 302, 303, 307, 308}
    r = get(f"http://{host}/loop/a")
    assert r.status == 302 and r.header("Location") == "/loop/b"
    r = get(f"http://{host}/loop/b")
    assert r.status == 302 and r.header("Location") == "/loop/a"
    codes, _ = follow(f"http://{host}/loop/a", max_hops=10)
    assert codes == [302] * 10
    r = get(f"http://{host}/offsite")
    assert r.status == 302 and r.header("Location") == web.seed_urls()[0] + "p/0.html"
    assert get(f"http://{host}/r2/2").status == 404


# ---------------------------------------------------------------------- status games


def test_rate_limited(web):
    p0, p1, _, date = web.hostile_urls("rate_limited")
    r = get(p0)
    assert r.status == 429 and r.header("Retry-After") == "2"
    r = get(p1)
    assert r.status == 429 and r.header("Retry-After") == "2"
    r = get(date)
    assert r.status == 429
    retry = email.utils.parsedate_to_datetime(r.header("Retry-After"))
    assert re.fullmatch(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT", r.header("Retry-After"))
    # now + 3 s, rounded up to a whole second, by the server's own clock: between the request's
    # arrival and its completion in the server's log
    assert wait_for(lambda: entries(web, "rate_limited", "/date.html")[-1]["done_ts"] is not None, 10.0)
    logged = entries(web, "rate_limited", "/date.html")[-1]
    assert logged["ts"] + 3 <= retry.timestamp() <= logged["done_ts"] + 4
    assert get(f"http://{web.hostile_hosts['rate_limited']}/robots.txt").status == 200
    time.sleep(2.05)
    assert get(p0).status == 200
    assert get(p1).status == 200


def test_unavailable_first_request():
    with DevWeb(hosts=1, pages_per_host=2, hostile=True) as dw:
        assert [get(u).status for u in dw.hostile_urls("unavailable")] == [503, 200, 503]
        assert get(f"http://{dw.hostile_hosts['unavailable']}/robots.txt").status == 200


def test_unavailable(web):
    url = web.hostile_urls("unavailable")[0]
    rs = [get(url) for _ in range(4)]
    statuses = [r.status for r in rs]  # alternates; which comes first depends on earlier requests
    assert statuses in ([503, 200, 503, 200], [200, 503, 200, 503])
    assert all(r.header("Retry-After") is None for r in rs)


def test_conditional(web):
    url = web.hostile_urls("conditional")[0]
    web.clear_log()
    r = get(url)
    assert r.status == 200
    etag, lm = r.header("ETag"), r.header("Last-Modified")
    assert etag and etag.startswith('"') and lm
    assert get(url, {"If-None-Match": etag}).status == 304
    assert get(url, {"If-None-Match": f'"x", W/{etag}'}).status == 304
    assert get(url, {"If-None-Match": '"other"'}).status == 200
    assert get(url, {"If-Modified-Since": lm}).status == 304
    assert get(url, {"If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}).status == 200
    assert get(url, {"If-Modified-Since": "garbage"}).status == 200
    # If-None-Match wins over If-Modified-Since
    assert get(url, {"If-None-Match": '"other"', "If-Modified-Since": lm}).status == 200
    r304 = get(url, {"If-None-Match": etag})
    assert r304.status == 304 and r304.body == b"" and r304.header("ETag") == etag
    other = get(web.hostile_urls("conditional")[1])
    assert other.header("ETag") != etag
    assert sum(e["status"] == 304 for e in web.requests()) == 4


# ---------------------------------------------------------------------- messy content


def test_messy(web):
    host = web.hostile_hosts["messy"]
    root = f"http://{host}/"
    urls = web.hostile_urls("messy")
    assert urls[0] == root
    assert set(urls[1:]) <= set(get(root).links(root))
    page = {urlsplit(u).path: get(u, timeout=5) for u in urls[1:]}
    assert all(r.status == 200 for r in page.values())

    mal = page["/malformed.html"]
    assert mal.header("Content-Type") == "text/html"
    assert HTMLParser(mal.body.decode("utf-8", "replace")).css("a[href]")

    wrong = page["/wrong-charset.html"]
    assert wrong.header("Content-Type") == "text/html; charset=utf-8"
    with pytest.raises(UnicodeDecodeError):
        wrong.body.decode("utf-8")
    assert "café" in wrong.body.decode("cp1252")

    sj = page["/sjis.html"]
    assert sj.header("Content-Type") == "text/html"
    assert b'<meta charset="shift_jis">' in sj.body
    with pytest.raises(UnicodeDecodeError):
        sj.body.decode("utf-8")
    assert "こんにちは" in sj.body.decode("shift_jis")

    assert page["/bom.html"].body.startswith(b"\xef\xbb\xbf<!DOCTYPE")
    assert b"\x00" in page["/nul.html"].body and b"/l/13.html" in page["/nul.html"].body.split(b"\x00", 3)[-1]
    assert page["/empty.html"].body == b"" and page["/empty.html"].header("Content-Length") == "0"

    many = page["/many-links.html"]
    assert many.body.count(b"<a href=") == 100_000
    assert get(f"http://{host}/l/99999.html").status == 200
    assert get(f"http://{host}/l/100000.html").status == 404

    assert page["/image.png"].header("Content-Type") == "image/png"
    assert page["/image.png"].body.startswith(b"\x89PNG\r\n\x1a\n")
    assert page["/doc.pdf"].header("Content-Type") == "application/pdf"
    assert page["/doc.pdf"].body.startswith(b"%PDF-")
    assert page["/page.xhtml"].header("Content-Type") == "application/xhtml+xml"
    assert page["/page.xhtml"].body.startswith(b"<?xml")


# ---------------------------------------------------------------------- traps


def test_traps(web):
    cal, sess, rep = web.hostile_urls("traps")
    r = get(cal)
    assert set(r.links(cal)) >= {cal.replace("2026/11", "2026/12"), cal.replace("2026/11", "2026/10")}
    url, seen = cal, set()
    for _ in range(30):  # forward forever
        r = get(url)
        assert r.status == 200
        seen.add(url)
        url = r.links(url)[0]
    assert len(seen) == 30 and url.endswith("/cal/2029/5")

    url, ids = sess, set()
    for _ in range(20):
        r = get(url)
        assert r.status == 200
        ids.add(urlsplit(url).path.split("/")[2])
        url = r.links(url)[0]
        assert re.search(r"/s/[0-9a-f]+/page$", url)
    assert len(ids) == 20

    url = rep
    for depth in range(1, 25):
        r = get(url)
        assert r.status == 200
        assert urlsplit(url).path == "/" + "a/" * depth
        url = r.links(url)[0]


# ---------------------------------------------------------------------- log and shutdown


def test_log_done_ts(web):
    for e in web.requests():
        if e["done_ts"] is not None:
            assert e["done_ts"] >= e["ts"]
    web.clear_log()
    get(web.hostile_urls("gzip_bomb")[0], timeout=10)
    get(web.seed_urls()[0])
    log = web.requests()
    assert len(log) == 2 and all(e["done_ts"] >= e["ts"] for e in log)
    # sequential requests to one host never overlap
    assert log[0]["done_ts"] <= log[1]["ts"]


def test_log_file_gets_complete_entries(tmp_path):
    path = tmp_path / "requests.jsonl"
    with DevWeb(hosts=1, pages_per_host=2, hostile=True, log_path=str(path)) as dw:
        get(dw.seed_urls()[0])
        get(dw.hostile_urls("redirects")[0])
        u = urlsplit(dw.hostile_urls("drip")[0])
        conn = http.client.HTTPConnection(u.netloc, timeout=2)
        conn.request("GET", u.path)
        conn.getresponse().read(2)
        conn.close()
        assert wait_for(lambda: len(path.read_text().splitlines()) == 3, 2.0)
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert sorted(lines, key=lambda e: e["ts"]) == dw.requests()
        assert all(x["done_ts"] >= x["ts"] for x in lines)


def test_stop_is_fast_with_active_streams(noise):
    dw = DevWeb(hosts=1, pages_per_host=2, hostile=True).start()
    socks = []
    for name, path in (("drip", "/slow.html"), ("no_headers", "/hang.html"), ("huge", "/big.html"),
                       ("drip", "/slow.html")):
        ip, port = dw.hostile_hosts[name].split(":")
        s = socket.create_connection((ip, int(port)), timeout=3)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {ip}\r\n\r\n".encode())
        socks.append(s)
    socks[0].recv(100)  # drip is running
    assert wait_for(lambda: len(dw.requests()) == 4, 2.0)
    stopper = threading.Thread(target=dw.stop)
    stopper.start()
    # stop ends the streams itself: left alone, the drips would take a minute and no_headers forever
    stopper.join(60)
    assert not stopper.is_alive()
    assert all(e["done_ts"] is not None for e in dw.requests())
    for s in socks:  # every connection was closed by the server
        s.settimeout(2)
        try:
            while s.recv(1 << 16):
                pass
        except ConnectionResetError:
            pass
        s.close()
