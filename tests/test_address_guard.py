"""The address guard end to end: a crawl of a small web on allowed test-web addresses whose pages,
redirects, sitemaps and robots.txt point at an "inside" listener on 127.0.0.1 and ::1 (loopback
outside the allow-list) in every spelling, and at a bad port on an allowed address. The listeners
never accept: a connection the crawler made would wait in their backlog, so "zero requests" is
read from the kernel, not from our own logs. Loopback only, even if the guard were broken.

The resolver's part (DNS rebinding) is tested with a stand-in DNS that answers an allowed address
first and a refused one second; no connection is made to any address it names."""
from __future__ import annotations

import asyncio
import socket
import threading
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiohttp.abc import AbstractResolver

from crawl.fetch.guard import GuardedResolver, RefusedAddressError, guarded_socket_factory, refusal_of
from crawl.net.addresses import AddressPolicy
from crawl.tracking import StepFigures, cycle_metrics
from jobs import cli
from tests.conftest import FAST, TEST_WEB_NETWORKS, write_seeds

A, B, C = "127.0.0.2", "127.0.0.3", "127.0.0.4"   # the allowed web (tests.conftest.TEST_WEB_NETWORKS)
BAD_PORT = 6666                                    # on the Fetch standard's bad-port list


class Listener:
    """Listening sockets that never accept: what connected is still in the backlog at the end."""

    def __init__(self, addresses: list[tuple[int, str]], port: int = 0):
        self.sockets = []
        for family, address in addresses:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, port))
            port = s.getsockname()[1]
            s.listen(64)
            s.setblocking(False)
            self.sockets.append(s)
        self.port = port

    def connections(self) -> int:
        n = 0
        for s in self.sockets:
            while True:
                try:
                    conn, _ = s.accept()
                except BlockingIOError:
                    break
                conn.close()
                n += 1
        return n

    def close(self) -> None:
        for s in self.sockets:
            s.close()


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def inside_listener() -> Listener:
    """127.0.0.1 and ::1 on one port (127.0.0.1 alone on a machine without IPv6)."""
    addresses = [(socket.AF_INET, "127.0.0.1")] + ([(socket.AF_INET6, "::1")] if has_ipv6_loopback() else [])
    for _ in range(20):  # ::1 may be taken on the port 127.0.0.1 got
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        try:
            return Listener(addresses, port)
        except OSError:
            continue
    raise RuntimeError("no port free on both 127.0.0.1 and ::1")


def spellings(port: int) -> dict[str, str]:
    """Links to the inside, each spelled its own way (and with its own path, to tell them apart)."""
    return {
        "literal": f"http://127.0.0.1:{port}/literal",
        "decimal": f"http://2130706433:{port}/decimal",
        "hex": f"http://0x7f000001:{port}/hex",
        "octal": f"http://0177.0.0.1:{port}/octal",
        "short": f"http://127.1:{port}/short",
        "mapped": f"http://[::ffff:127.0.0.1]:{port}/mapped",
        "ipv6": f"http://[::1]:{port}/ipv6",
        "localhost": f"http://localhost:{port}/localhost",
    }


def serve(routes: dict[tuple[str, str], tuple[int, dict, bytes]], port: int, hosts: list[str]) -> list:
    """A plain HTTP server per host address, answering (host, path) from ``routes``."""
    servers = []
    for host in hosts:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self, host=host):  # noqa: N802 (http.server's name)
                status, headers, body = routes.get((host, self.path), (404, {}, b"not here"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers


def test_a_crawl_never_reaches_the_inside(spark, tmp_path, capsys):
    with ExitStack() as stack:
        inside = inside_listener()
        stack.callback(inside.close)
        try:
            bad_port = Listener([(socket.AF_INET, A)], BAD_PORT)
            stack.callback(bad_port.close)
        except OSError:
            bad_port = None  # taken on this machine: the URL's status is still checked
        probe = socket.socket()
        probe.bind((A, 0))
        q = probe.getsockname()[1]
        probe.close()
        p = inside.port
        links = spellings(p)
        html = "".join(f'<a href="{u}">{k}</a>' for k, u in links.items())
        html += f'<a href="http://{A}:{BAD_PORT}/bad-port">bad port</a>'
        page = (200, {"Content-Type": "text/html"}, f"<html><body>{html}</body></html>".encode())
        text = {"Content-Type": "text/plain"}
        sitemap = (f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                   f"<url><loc>http://127.0.0.1:{p}/from-sitemap</loc></url>"
                   f"<url><loc>http://[::1]:{p}/from-sitemap</loc></url></urlset>").encode()
        routes = {
            (A, "/robots.txt"): (200, text, f"User-agent: *\nAllow: /\nSitemap: http://127.0.0.1:{p}/sitemap.xml\n".encode()),
            (A, "/"): page,
            (B, "/robots.txt"): (200, text, b"User-agent: *\nAllow: /\n"),
            (B, "/sitemap.xml"): (200, {"Content-Type": "application/xml"}, sitemap),
            (B, "/"): (200, {"Content-Type": "text/html"}, b"<html><body>b</body></html>"),
            (B, "/hop"): (302, {"Location": f"http://127.0.0.1:{p}/end-of-redirect"}, b""),
            (C, "/robots.txt"): (302, {"Location": f"http://127.0.0.1:{p}/robots.txt"}, b""),
            (C, "/"): (200, {"Content-Type": "text/html"}, b"<html><body>c</body></html>"),
        }
        for server in serve(routes, q, [A, B, C]):
            stack.callback(server.server_close)
            stack.callback(server.shutdown)
        # B/hop redirects inside: fetched in cycle 1, its target (like A's links) refused in cycle 2
        seeds = write_seeds(tmp_path / "seeds.txt", [f"http://{A}:{q}/", f"http://{B}:{q}/hop",
                                                     f"http://{B}:{q}/", f"http://{C}:{q}/",
                                                     f"http://127.0.0.1:{p}/seed"])
        root = str(tmp_path / "crawl")
        conf = [arg for k, v in {**FAST, "fetch.allow_networks": '["127.0.0.2/31", "127.0.0.4/32"]',
                                 "fetch.tasks": 1}.items() for arg in ("--conf", f"{k}={v}")]
        rc = cli.main(["crawl", "--seeds", seeds, "--cycles", "2", "--crawl-root", root, "--mlflow-uri", "off", *conf])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert inside.connections() == 0, "the crawler connected to the inside listener"
        if bad_port is not None:
            assert bad_port.connections() == 0, "the crawler connected to a bad port"

    assert "1 seed(s) point where the address guard refuses to go" in err
    rows = {r["url"]: r for r in spark.read.format("delta").load(f"{root}/crawldb").collect()}
    expected = {f"http://127.0.0.1:{p}/{name}": "loopback" for name in
                ("literal", "decimal", "hex", "octal", "short", "end-of-redirect", "seed")}
    expected.update({f"http://[::ffff:7f00:1]:{p}/mapped": "loopback", f"http://[::1]:{p}/ipv6": "loopback",
                     f"http://localhost:{p}/localhost": "loopback",
                     f"http://{A}:{BAD_PORT}/bad-port": "bad_port"})
    for url, reason in expected.items():
        assert url in rows, (url, sorted(rows))
        assert rows[url]["status"] == "blocked_address", rows[url]
        assert rows[url]["error"].startswith(f"refused address: {reason}: "), rows[url]["error"]
    assert "localhost resolves to" in rows[f"http://localhost:{p}/localhost"]["error"]
    # robots.txt that redirects inside: unreachable, so the host is not crawled (RFC 9309 2.3.1.4)
    hosts = {r["host"]: r for r in spark.read.format("delta").load(f"{root}/hostdb").collect()}
    # sitemaps read only from the host itself, and list only its URLs (sitemaps.org): A's robots.txt
    # Sitemap line and B's sitemap entries that point inside are dropped, and counted, before any guard
    assert not any("from-sitemap" in url for url in rows)
    assert hosts[f"{A}:{q}"]["link_rejects"]["sitemap_other_host"] == 1
    assert hosts[f"{B}:{q}"]["link_rejects"]["sitemap_other_host"] == 2
    assert "refused address: loopback" in hosts[f"{C}:{q}"]["robots_error"]
    assert rows[f"http://{C}:{q}/"]["status"] == "unfetched"
    # what the user sees: the stats report, by reason
    assert "refused by the address guard, by reason" in out
    assert "loopback" in out and "bad_port" in out


class StandInDns(AbstractResolver):
    """Answers a name from a list, one answer per call (a rebinding DNS server)."""

    def __init__(self, answers):
        self.answers = list(answers)

    async def resolve(self, host, port=0, family=socket.AF_INET):
        return [{"hostname": host, "host": a, "port": port, "family": socket.AF_INET6 if ":" in a else socket.AF_INET,
                 "proto": 0, "flags": 0} for a in self.answers.pop(0)]

    async def close(self):
        pass


def test_the_resolver_drops_refused_answers_and_a_rebound_name_cannot_pass():
    async def resolve_twice():
        resolver = GuardedResolver(AddressPolicy(TEST_WEB_NETWORKS),
                                   StandInDns([["93.184.215.14"], ["127.0.0.1"], ["169.254.169.254", "127.0.0.2"]]))
        first = await resolver.resolve("rebind.example", 80)
        with pytest.raises(RefusedAddressError) as info:
            await resolver.resolve("rebind.example", 80)
        mixed = await resolver.resolve("rebind.example", 80)
        return first, info.value, mixed
    first, refused, mixed = asyncio.run(resolve_twice())
    assert [a["host"] for a in first] == ["93.184.215.14"]
    assert refusal_of(refused).reason == "loopback" and "rebind.example resolves to 127.0.0.1" in str(refused)
    assert [a["host"] for a in mixed] == ["127.0.0.2"]  # the refused address is dropped, the allowed one kept


def test_the_socket_factory_refuses_what_no_resolver_saw():
    make = guarded_socket_factory(AddressPolicy(TEST_WEB_NETWORKS))
    for family, address in [(socket.AF_INET, ("127.0.0.1", 80)), (socket.AF_INET6, ("::1", 80, 0, 0)),
                            (socket.AF_INET6, ("::ffff:127.0.0.1", 80, 0, 0))]:
        with pytest.raises(RefusedAddressError):
            make((family, socket.SOCK_STREAM, 6, "", address))
    sock = make((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", 80)))
    sock.close()
    # what aiohappyeyeballs raises when several addresses failed is a plain OSError: still found
    assert refusal_of(OSError("Multiple exceptions: refused address: loopback: ::1 (in ::1/128), "
                              "refused address: loopback: 127.0.0.1 (in 127.0.0.0/8)")).reason == "loopback"


def test_refusals_by_reason_reach_mlflow_metrics():
    fig = StepFigures("fetch", 0.0, 1.0, by_outcome={"blocked_address": 3}, blocked={"loopback": 2, "bad_port": 1})
    metrics = cycle_metrics([fig])
    assert metrics["fetch/outcome/blocked_address"] == 3
    assert metrics["fetch/blocked/loopback"] == 2 and metrics["fetch/blocked/bad_port"] == 1
