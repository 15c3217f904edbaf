"""An operator's identity: the crawler says who runs it before it visits anyone else's host.

A site owner who sees an unwelcome crawler reads its User-Agent to find whom to ask to stop.
The shipped ``fetch.user_agent`` names deltacrawl's project page, which nobody running a crawl
reads, so (as Nutch refuses to fetch until ``http.agent.name`` is set) seeds and hints naming
a host that is not a loopback IP literal are refused until ``fetch.user_agent`` is changed and
names a contact of the operator's own: a URL (``http(s)://…``) or an e-mail address. A host
*name* needs one even when it resolves to loopback (``localhost``, ``*.test``): the rule is
judged from the URL as written, before any lookup. Loopback IP literals (127.0.0.0/8, ``::1``,
``::ffff:127.x.x.x``) reach only this machine, which is what the bundled test web serves on.
"""
from __future__ import annotations

import re
from functools import cache
from typing import Iterable

from crawl.config import load_defaults
from crawl.net.addresses import parse_address
from crawl.net.urls import host_without_port

# A contact the User-Agent names: an http(s) URL with a host, or an e-mail address (a domain
# without a dot, such as ops@localhost, counts: the rule asks for a contact, not a valid route).
_URL_RE = re.compile(r"https?://[^\s/;()<>\"']+[^\s;()<>\"']*", re.ASCII | re.IGNORECASE)
_EMAIL_RE = re.compile(r"[\w.+-]+@[A-Za-z0-9](?:[\w-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[\w-]*[A-Za-z0-9])?)*",
                       re.ASCII)
EXAMPLE_OPTION = "--conf 'fetch.user_agent=mycrawler/1.0 (+https://example.org/crawler; ops@example.org)'"


def is_loopback_literal(host_key: str) -> bool:
    """``host_key`` (``host``, ``host:port``, ``[v6]:port``) is a loopback IP address written as such."""
    address = parse_address(host_without_port(host_key))
    if address is None:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1 to the socket
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def contacts_of(user_agent: str) -> list[str]:
    """The URLs and e-mail addresses a User-Agent names, in order (trailing dots and commas cut)."""
    urls = list(_URL_RE.finditer(user_agent))
    emails = [m for m in _EMAIL_RE.finditer(user_agent)  # user@host inside a URL is the URL's
              if not any(u.start() <= m.start() < u.end() for u in urls)]
    return [m.group().rstrip(".,") for m in sorted(urls + emails, key=lambda m: m.start())]


@cache
def shipped_user_agent() -> str:
    """``fetch.user_agent`` as conf/defaults.toml ships it."""
    return load_defaults()["fetch.user_agent"]


def is_shipped_user_agent(user_agent: str) -> bool:
    return user_agent.strip() == shipped_user_agent().strip()


def _same(contact: str) -> str:
    return contact.rstrip("/").lower()


def identity_refusal(host_keys: Iterable[str], user_agent: str) -> str | None:
    """None if ``user_agent`` may go to every host of ``host_keys`` (see the module docstring), else
    the one line that says why not and what to set. A contact of the shipped agent (the project's
    page) is not the operator's."""
    others = sorted({h for h in host_keys if not is_loopback_literal(h)})
    if not others:
        return None
    shipped = {_same(c) for c in contacts_of(shipped_user_agent())}
    if any(_same(c) not in shipped for c in contacts_of(user_agent)):
        return None
    if is_shipped_user_agent(user_agent):
        problem = "fetch.user_agent is the shipped default"
    else:
        problem = f"fetch.user_agent {user_agent.strip()!r} names no contact of yours"
    where = others[0] + (f" and {len(others) - 1} more" if len(others) > 1 else "")
    return (f"{problem}: set it to name you and a contact (a URL or e-mail) before crawling hosts that are not "
            f"loopback IP literals ({where}), e.g. {EXAMPLE_OPTION}")
