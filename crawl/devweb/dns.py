"""The test web's DNS server: a real one, on loopback, answering the test web's names (dnslib).

It serves one zone of A records (name -> loopback address) and, for the tests of a crawler's DNS
handling, names that fail in each way a resolver can meet:

  * any name outside the zone: NXDOMAIN (the name does not exist);
  * ``SILENT`` names: no answer at all (the client times out);
  * ``SERVFAIL`` names: the server fails;
  * names added with ``add(name, ["10.0.0.1"])`` and the like: an answer the crawler's address
    guard must refuse (it never connects to them).

Every query is counted per name and type (``queries``), so tests can check from the server's side
how often a crawler asked. It listens on UDP and TCP of one port (0: a free one).
"""
from __future__ import annotations

import socket
import threading
from collections import Counter
from typing import Iterable

from dnslib import AAAA, QTYPE, RCODE, RR, A
from dnslib.dns import DNSError
from dnslib.server import BaseResolver, DNSLogger, DNSServer

SILENT = "silent"
SERVFAIL = "servfail"
_QUIET = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data", prefix=False)


class _ZoneResolver(BaseResolver):
    def __init__(self, dns: "DevDns"):
        self.dns = dns

    def resolve(self, request, handler):  # noqa: D401 - dnslib's interface
        q = request.q
        name = str(q.qname).rstrip(".").lower()
        qtype = QTYPE[q.qtype]
        with self.dns._lock:
            self.dns.queries[(name, qtype)] += 1
            addresses = self.dns.zone.get(name)
            mode = self.dns.modes.get(name)
        if mode == SILENT:
            raise DNSError("silent name: no answer")  # dnslib's handler then sends nothing
        reply = request.reply()
        if mode == SERVFAIL:
            reply.header.rcode = RCODE.SERVFAIL
        elif addresses is None:
            reply.header.rcode = RCODE.NXDOMAIN
        else:
            for ip in addresses:
                if qtype == "A" and ":" not in ip:
                    reply.add_answer(RR(q.qname, QTYPE.A, rdata=A(ip), ttl=self.dns.ttl_s))
                elif qtype == "AAAA" and ":" in ip:
                    reply.add_answer(RR(q.qname, QTYPE.AAAA, rdata=AAAA(ip), ttl=self.dns.ttl_s))
        return reply


class DevDns:
    """A DNS server on ``address`` (a loopback address) answering ``zone``."""

    def __init__(self, address: str = "127.0.0.1", port: int = 0, ttl_s: int = 3600):
        if not address.startswith("127."):
            raise ValueError("the test web's DNS server listens on loopback only")
        self.address = address
        self.requested_port = port
        self.port = port
        self.ttl_s = ttl_s
        self.zone: dict[str, list[str]] = {}
        self.modes: dict[str, str] = {}
        self.queries: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._servers: list[DNSServer] = []

    def add(self, name: str, addresses: Iterable[str]) -> None:
        with self._lock:
            self.zone[name.lower()] = list(addresses)

    def fail(self, name: str, mode: str) -> None:
        """Make ``name`` fail: SILENT (never answered) or SERVFAIL."""
        if mode not in (SILENT, SERVFAIL):
            raise ValueError(f"unknown failure {mode!r}")
        with self._lock:
            self.modes[name.lower()] = mode

    def queries_for(self, name: str) -> int:
        with self._lock:
            return sum(n for (q, _), n in self.queries.items() if q == name.lower())

    @property
    def server(self) -> str:
        """The server as fetch.dns_servers takes it."""
        return f"{self.address}:{self.port}"

    def start(self) -> "DevDns":
        last: OSError | None = None
        for _ in range(10 if self.requested_port == 0 else 1):
            port = self.requested_port or _free_udp_tcp_port(self.address)
            try:
                udp = DNSServer(_ZoneResolver(self), address=self.address, port=port, logger=_QUIET)
                try:
                    tcp = DNSServer(_ZoneResolver(self), address=self.address, port=port, tcp=True, logger=_QUIET)
                except OSError:
                    udp.server.server_close()
                    raise
            except OSError as exc:
                last = exc
                continue
            self.port = port
            self._servers = [udp, tcp]
            for s in self._servers:
                s.start_thread()
            return self
        assert last is not None
        raise last

    def stop(self) -> None:
        for s in self._servers:
            s.server.shutdown()
            s.server.server_close()
        self._servers = []

    def __enter__(self) -> "DevDns":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_udp_tcp_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]
