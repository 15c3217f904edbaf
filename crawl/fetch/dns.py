"""DNS for one fetch task: a caching resolver that knows each answer's lifetime and why a name failed.

aiohttp's own resolver keeps answers in a per-connector cache that dies with the task, and turns a
name that does not exist into an anonymous connection error. Here:

  * ``fetch.dns_servers`` empty: the system's resolver (``getaddrinfo``: /etc/hosts, nsswitch,
    resolv.conf), whose answers carry no TTL, so they are kept ``fetch.dns_min_ttl_s``.
    Otherwise those servers (``"ip"`` or ``"ip:port"``) through c-ares (aiodns, what aiohttp's
    AsyncResolver uses), asking A and AAAA side by side; an answer lives its smallest record TTL,
    clamped to [``fetch.dns_min_ttl_s``, ``fetch.dns_max_ttl_s``] (a TTL of seconds would cost a
    query per page; one of weeks would keep a moved host's old address).
  * Answers the crawl already holds (host_state.addresses until addresses_expire_at, carried on
    the fetchlist) are ``remember``-ed first: a known host within its TTL costs no query.
  * One query per name in flight (later askers wait for it), at most ``fetch.dns_max_in_flight``
    names resolving at once; the fetcher resolves its hosts ahead of their turn (``prefetch``).
  * A failure is an ``Answer`` with ``error`` set, of a kind: ``nxdomain`` (the name does not
    exist: the URLs use a retry and, after schedule.max_retries cycles, are gone), ``no_address``
    (the name exists but has no A/AAAA record: the same), ``timeout`` and ``servfail`` (the
    resolver or the zone is in trouble: the host backs off, nothing is used up). A failed name is
    not asked again within the task.

The address guard (crawl/fetch/guard.py) still judges every address this returns, and the socket
each connection opens.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from aiohttp.abc import AbstractResolver, ResolveResult

from crawl.config import Config
from crawl.fetch.http import causes

NXDOMAIN, NO_ADDRESS, TIMEOUT, SERVFAIL, ERROR = "nxdomain", "no_address", "timeout", "servfail", "error"
# kinds after which the name is taken not to exist (the URLs move towards gone); every other kind
# is trouble on the way to an answer (the host backs off, the URLs stay due)
NAME_MISSING = (NXDOMAIN, NO_ADDRESS)


@dataclass(frozen=True)
class Answer:
    addresses: tuple[str, ...]
    expires_at: float               # epoch seconds
    error: str | None = None        # one of the kinds above, or None
    detail: str = ""

    def message(self, name: str) -> str:
        return f"DNS {self.error}: {name}" + (f" ({self.detail})" if self.detail else "")


class DnsError(OSError):
    """A name that did not resolve (raised from ``resolve``; the fetcher records ``answer.error``)."""

    def __init__(self, name: str, answer: Answer):
        super().__init__(answer.message(name))
        self.answer = answer


def dns_error_of(exc: BaseException | None) -> Answer | None:
    """The DNS failure behind an exception a request raised (aiohttp wraps it), or None."""
    return next((e.answer for e in causes(exc) if isinstance(e, DnsError)), None)


def parse_servers(servers: Iterable[str]) -> list[str]:
    """``fetch.dns_servers`` as c-ares takes them ("ip" or "ip:port", IPv6 as "[ip]:port");
    ValueError names a bad entry."""
    out = []
    for entry in servers:
        text = str(entry).strip()
        host, port = text, None
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else None
        elif text.count(":") == 1:
            host, port = text.split(":")
        try:
            ip = ipaddress.ip_address(host)
            if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError
        except ValueError:
            raise ValueError(f"fetch.dns_servers: {entry!r} is not an IP address with an optional :port") from None
        if port is None:
            out.append(str(ip))
        else:
            out.append(f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}")
    return out


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        return False


class TaskResolver(AbstractResolver):
    """The resolver of one fetch task (see the module docstring); also aiohttp's resolver."""

    def __init__(self, cfg: Mapping[str, Any]):
        cfg = Config.of(cfg)
        self.servers = parse_servers(cfg.fetch.dns_servers)
        self.timeout_s = cfg.fetch.dns_timeout_s
        self.min_ttl_s = cfg.fetch.dns_min_ttl_s
        self.max_ttl_s = max(self.min_ttl_s, cfg.fetch.dns_max_ttl_s)
        self.answers: dict[str, Answer] = {}
        self.queries: Counter[str] = Counter()  # queries sent per name (A and AAAA count as one each)
        self._pending: dict[str, asyncio.Future] = {}
        self._slots = asyncio.Semaphore(max(1, cfg.fetch.dns_max_in_flight))
        self._cares: Any = None

    def remember(self, name: str, addresses: Iterable[str] | None, expires_at: float | None) -> None:
        """An answer the crawl holds from an earlier fetch (host_state), while it lives."""
        addresses = tuple(addresses or ())
        if addresses and expires_at is not None and expires_at > time.time():
            self.answers.setdefault(name.lower(), Answer(addresses, float(expires_at)))

    def known(self, name: str) -> Answer | None:
        answer = self.answers.get(name.lower())
        if answer is not None and answer.error is None and answer.expires_at <= time.time():
            return None
        return answer

    async def lookup(self, name: str) -> Answer:
        """The name's answer: held, being asked, or asked now. Never raises for a DNS failure."""
        key = name.lower()
        held = self.known(key)
        if held is not None:
            return held
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._ask(key))
            self._pending[key] = pending
        try:
            return await asyncio.shield(pending)
        finally:
            if pending.done():
                self._pending.pop(key, None)

    async def prefetch(self, names: Iterable[str]) -> None:
        """Resolve ``names`` ahead of their turn (bounded by the in-flight limit inside ``_ask``)."""
        wanted = [n for n in dict.fromkeys(n.lower() for n in names) if not is_ip_literal(n)]
        await asyncio.gather(*(self.lookup(n) for n in wanted), return_exceptions=True)

    async def _ask(self, name: str) -> Answer:
        async with self._slots:
            held = self.known(name)  # answered while this waited for a slot
            if held is not None:
                return held
            try:
                answer = await (self._ask_servers(name) if self.servers else self._ask_system(name))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a resolver bug must not lose the host: it is an answer too
                answer = Answer((), time.time() + self.min_ttl_s, ERROR, f"{type(exc).__name__}: {exc}"[:200])
        self.answers[name] = answer
        return answer

    def _expiry(self, ttl: float | None) -> float:
        ttl = self.min_ttl_s if ttl is None else min(max(float(ttl), self.min_ttl_s), self.max_ttl_s)
        return time.time() + ttl

    async def _ask_system(self, name: str) -> Answer:
        self.queries[name] += 1
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(name, 0, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG), self.timeout_s)
        except asyncio.TimeoutError:
            return Answer((), self._expiry(None), TIMEOUT, f"no answer within {self.timeout_s:g}s")
        except socket.gaierror as exc:
            kind = {socket.EAI_NONAME: NXDOMAIN, socket.EAI_AGAIN: TIMEOUT}.get(exc.errno, ERROR)
            if getattr(socket, "EAI_NODATA", None) == exc.errno:
                kind = NO_ADDRESS
            return Answer((), self._expiry(None), kind, str(exc.strerror or exc))
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            return Answer((), self._expiry(None), NO_ADDRESS)
        return Answer(addresses, self._expiry(None))

    async def _ask_servers(self, name: str) -> Answer:
        import aiodns
        import pycares
        if self._cares is None:
            self._cares = aiodns.DNSResolver(nameservers=self.servers, timeout=self.timeout_s, tries=2)
        codes = pycares.errno
        results = await asyncio.gather(*(self._query(name, qtype) for qtype in ("A", "AAAA")),
                                       return_exceptions=True)
        addresses: list[str] = []
        ttls: list[int] = []
        errors: list[int] = []
        for result in results:
            if isinstance(result, BaseException):
                errors.append(result.args[0] if isinstance(result, aiodns.error.DNSError) and result.args else -1)
                continue
            for record in getattr(result, "answer", ()):
                addr = getattr(getattr(record, "data", None), "addr", None)
                if addr:
                    addresses.append(str(addr))
                    ttls.append(int(record.ttl))
        if addresses:
            return Answer(tuple(dict.fromkeys(addresses)), self._expiry(min(ttls)))
        expiry = self._expiry(None)
        if codes.ARES_ENOTFOUND in errors:
            return Answer((), expiry, NXDOMAIN, "the name does not exist")
        if all(e == codes.ARES_ENODATA for e in errors) or not errors:
            return Answer((), expiry, NO_ADDRESS, "no A or AAAA record")
        if codes.ARES_ETIMEOUT in errors or codes.ARES_ECONNREFUSED in errors:
            return Answer((), expiry, TIMEOUT, f"no answer from {', '.join(self.servers)}")
        if codes.ARES_ESERVFAIL in errors or codes.ARES_EREFUSED in errors:
            return Answer((), expiry, SERVFAIL, "the server failed or refused the query")
        return Answer((), expiry, ERROR, f"c-ares error {errors[0]}")

    async def _query(self, name: str, qtype: str) -> Any:
        self.queries[name] += 1
        return await self._cares.query_dns(name, qtype)

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if is_ip_literal(host):
            ip = host.strip("[]")
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            return [ResolveResult(hostname=host, host=ip, port=port, family=fam, proto=0,
                                  flags=socket.AI_NUMERICHOST)]
        answer = await self.lookup(host)
        if answer.error is not None:
            raise DnsError(host, answer)
        out = []
        for ip in answer.addresses:
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            if family in (socket.AF_INET, socket.AF_INET6) and family != fam:
                continue
            out.append(ResolveResult(hostname=host, host=ip, port=port, family=fam, proto=0,
                                     flags=socket.AI_NUMERICHOST))
        if not out:
            raise DnsError(host, Answer((), answer.expires_at, NO_ADDRESS, f"no address of family {family!r}"))
        return out

    async def close(self) -> None:
        if self._cares is not None:
            await self._cares.close()  # a coroutine since aiodns 4
            self._cares = None
