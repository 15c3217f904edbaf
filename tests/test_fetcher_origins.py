"""robots.txt per origin (RFC 9309 section 2.3) in the fetcher: one host key served on http://:80
and https://:443 of one loopback address, each origin with robots.txt of its own. Checked from the
servers' own request log."""
from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawl.crawldb.status import FetchStatus as FS
from crawl.devweb.tls import LocalCA
from crawl.fetch.fetcher import fetch_partition
from tests.politeness import TOLERANCE_S
from tests.test_fetcher import cfg, rows_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="binds port 80/443")

ADDRESS = "127.0.0.253"  # a test-web address no other test web uses (DEAD_ADDRESS is .254)
DELAY = 0.1


class OriginPair:
    """http://ADDRESS/ and https://ADDRESS/ (the same host key), each answering from its own table
    {path: (status, headers, body)} (a missing path: 200 with a small page), and one request log."""

    def __init__(self, ca: LocalCA):
        self.routes: dict[str, dict[str, tuple[int, dict[str, str], bytes]]] = {"http": {}, "https": {}}
        self.log: list[dict] = []
        self._lock = threading.Lock()
        self.servers = []
        for scheme, port in (("http", 80), ("https", 443)):
            server = ThreadingHTTPServer((ADDRESS, port), self._handler(scheme))
            if scheme == "https":
                server.socket = ca.server_context([ADDRESS]).wrap_socket(server.socket, server_side=True)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)

    def _handler(self, scheme: str):
        pair = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                with pair._lock:
                    pair.log.append({"ts": time.time(), "scheme": scheme, "path": self.path})
                status, headers, body = pair.routes[scheme].get(self.path, (200, {}, b"<html><body>page</body></html>"))
                self.send_response(status)
                for k, v in {"Content-Type": "text/html", **headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler

    def requests(self, scheme: str | None = None) -> list[tuple[str, str]]:
        return [(e["scheme"], e["path"]) for e in self.log if scheme in (None, e["scheme"])]

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory):
    ca = LocalCA()
    return ca, ca.write_pem(str(tmp_path_factory.mktemp("ca") / "ca.pem"))


@pytest.fixture
def pair(ca_file):
    served = OriginPair(ca_file[0])
    try:
        yield served
    finally:
        served.close()


def robots(text: str) -> tuple[int, dict, bytes]:
    return 200, {"Content-Type": "text/plain"}, text.encode()


def fetch(pair, ca_file, urls, **row_fields):
    return fetch_partition(rows_for(urls, **row_fields), cfg(fetch__delay_s=DELAY, fetch__tls_ca_file=ca_file[1]))


def test_each_scheme_obeys_its_own_robots_txt_and_the_gap_spans_both(pair, ca_file):
    pair.routes["http"]["/robots.txt"] = robots("User-agent: *\nDisallow: /a/\n")
    pair.routes["https"]["/robots.txt"] = robots("User-agent: *\nDisallow: /b/\nCrawl-delay: 0.4\n")
    urls = [f"http://{ADDRESS}/a/1", f"http://{ADDRESS}/b/1", f"https://{ADDRESS}/a/2", f"https://{ADDRESS}/b/2",
            f"http://{ADDRESS}/c/3"]
    out = fetch(pair, ca_file, urls)
    status = {r["url"]: r["fetch_status"] for r in out if r["kind"] == "url"}
    assert status == {urls[0]: FS.ROBOTS_DENIED, urls[1]: FS.OK, urls[2]: FS.OK, urls[3]: FS.ROBOTS_DENIED,
                      urls[4]: FS.OK}
    # each origin's robots.txt once, before that origin's first page
    assert pair.requests() == [("http", "/robots.txt"), ("http", "/b/1"), ("https", "/robots.txt"),
                               ("https", "/a/2"), ("http", "/c/3")]
    # one host key: the gap holds across both schemes, at the largest Crawl-delay once it is read
    ts = [e["ts"] for e in pair.log]
    assert min(b - a for a, b in zip(ts, ts[1:])) >= DELAY - TOLERANCE_S
    assert min(b - a for a, b in zip(ts[2:], ts[3:])) >= 0.4 - TOLERANCE_S
    host = next(r for r in out if r["kind"] == "host")
    assert host["crawl_delay_s"] == 0.4
    other = json.loads(host["robots_other"])
    assert {host["robots_scheme"], other["scheme"]} == {"http", "https"}
    by_scheme = {host["robots_scheme"]: host["robots_txt"], other["scheme"]: other["txt"]}
    assert "Disallow: /a/" in by_scheme["http"] and "Disallow: /b/" in by_scheme["https"]


def test_an_http_robots_redirect_to_the_https_answer_held_reuses_it(pair, ca_file):
    pair.routes["http"]["/robots.txt"] = (301, {"Location": f"https://{ADDRESS}/robots.txt"}, b"")
    pair.routes["https"]["/robots.txt"] = robots("User-agent: *\nAllow: /\n")  # must not be read
    cached_at = time.time() - 60
    urls = [f"http://{ADDRESS}/private/1", f"http://{ADDRESS}/open/1"]
    out = fetch(pair, ca_file, urls, robots_scheme="https", robots_status=200,
                robots_txt="User-agent: *\nDisallow: /private/\n", robots_fetched_at=cached_at)
    status = {r["url"]: r["fetch_status"] for r in out if r["kind"] == "url"}
    assert status == {urls[0]: FS.ROBOTS_DENIED, urls[1]: FS.OK}
    assert pair.requests() == [("http", "/robots.txt"), ("http", "/open/1")]  # no second robots.txt fetch
    host = next(r for r in out if r["kind"] == "host")
    other = json.loads(host["robots_other"])
    answers = {host["robots_scheme"]: (host["robots_txt"], host["robots_fetched_at"]),
               other["scheme"]: (other["txt"], other["fetched_at"])}
    # cached as the http origin's answer too: the https file, as read when https read it
    assert answers["http"] == answers["https"] == ("User-agent: *\nDisallow: /private/\n", cached_at)


def test_a_failing_robots_txt_disallows_its_own_origin_only(pair, ca_file):
    pair.routes["https"]["/robots.txt"] = (503, {}, b"busy")
    urls = [f"https://{ADDRESS}/1", f"http://{ADDRESS}/2", f"https://{ADDRESS}/3"]
    out = fetch(pair, ca_file, urls)
    by_url = {r["url"]: r for r in out if r["kind"] == "url"}
    assert by_url[urls[0]]["fetch_status"] == by_url[urls[2]]["fetch_status"] == FS.NOT_ATTEMPTED
    assert "robots.txt unreachable" in by_url[urls[0]]["error"]
    assert by_url[urls[1]]["fetch_status"] == FS.OK
    assert pair.requests("https") == [("https", "/robots.txt")]
    host = next(r for r in out if r["kind"] == "host")
    assert host["backoff_until"] is None and host["stop_reason"] is None  # the http origin was crawled
