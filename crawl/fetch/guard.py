"""The address guard where connections are made: aiohttp's resolver and socket factory.

crawl/net/addresses.py decides; this module enforces it on the address the fetcher actually
connects to, as Stripe's Smokescreen does, so checking a URL's host first and connecting later
leaves no gap for DNS rebinding (a name that answers a public address to the check and a private
one to the connection):

  * ``GuardedResolver`` wraps aiohttp's resolver and drops every refused address from a name's
    answer; a name whose every address is refused fails with ``RefusedAddressError``. aiohttp
    caches what the resolver returned, so a cached answer was filtered too.
  * ``guarded_socket_factory`` is given to the connector (aiohttp's ``socket_factory``, which
    aiohappyeyeballs calls for every address it tries): it refuses to create a socket for a
    refused address, whatever produced it — an IP literal never reaches a resolver, and the
    factory sees the exact sockaddr the kernel would connect to.

A refusal surfaces from ``session.get`` as an aiohttp ClientConnectorError whose cause chain holds
a RefusedAddressError; ``refusal_of`` finds it, so the fetcher records ``blocked_address`` (and
the reason) instead of a transient network error that would be retried.
"""
from __future__ import annotations

import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from crawl.fetch.http import causes
from crawl.net.addresses import MESSAGE_PREFIX, AddressPolicy, Refusal, parse_address, reason_of_message


class RefusedAddressError(OSError):
    """A connection the address guard refused (never retried: the policy will not change)."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.message())
        self.refusal = refusal


def refusal_of(exc: BaseException | None) -> Refusal | None:
    """The guard's refusal behind an exception raised by a request, or None."""
    for cause in causes(exc):
        if isinstance(cause, RefusedAddressError):
            return cause.refusal
        text = str(cause)
        if MESSAGE_PREFIX in text:
            # aiohappyeyeballs joins the errors of several addresses into one plain OSError
            # ("Multiple exceptions: refused address: loopback: ..., ..."): the text still says it
            message = text[text.index(MESSAGE_PREFIX):]
            reason = reason_of_message(message)
            if reason is not None:
                return Refusal(reason, message[len(MESSAGE_PREFIX):].split(":", 1)[-1].strip())
    return None


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, minus the addresses the policy refuses."""

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None):
        self.policy = policy
        self.inner = inner if inner is not None else DefaultResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        answers = await self.inner.resolve(host, port, family)
        kept, first_refusal = [], None
        for answer in answers:
            refusal = self.policy.address_refusal(answer["host"])
            if refusal is None:
                kept.append(answer)
            elif first_refusal is None:
                first_refusal = refusal
        if not kept and first_refusal is not None:
            raise RefusedAddressError(Refusal(first_refusal.reason, f"{host} resolves to {first_refusal.detail}"))
        return kept

    async def close(self) -> None:
        await self.inner.close()


def guarded_socket_factory(policy: AddressPolicy):
    """A socket factory (aiohttp's ``socket_factory``) that refuses sockets to refused addresses."""
    def make_socket(addr_info: Any) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        if family in (socket.AF_INET, socket.AF_INET6):
            refusal = policy.address_refusal(parse_address(sockaddr[0]) or str(sockaddr[0]))
            if refusal is not None:
                raise RefusedAddressError(refusal)
        return socket.socket(family=family, type=type_, proto=proto)
    return make_socket
