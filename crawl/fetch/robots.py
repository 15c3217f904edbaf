"""robots.txt policy per RFC 9309 (protego parses; status handling and caching are ours).

How a fetch result becomes a policy (RFC 9309 section 2.3.1):
  * 2xx                    -> parse the body (first ``max_bytes`` bytes, section 2.5).
  * 4xx ("unavailable")    -> no restrictions: everything allowed. 429 is the exception: a
                              server asking us to slow down is treated as unreachable, which
                              is the polite reading (as Google does).
  * 5xx, network error     -> "unreachable": everything disallowed until the next attempt.
  * 2xx the parser rejects -> "unparsable": everything disallowed too, with ``error`` saying why.
                              protego is lenient, so this is a bug or a hostile file; allowing
                              everything would crawl what the file may forbid, so we fail closed
                              as for an unreachable file (section 2.3.1.4). MemoryError is not
                              caught: the task (or the parser child) is out of memory, and that is
                              not the file's verdict.
Redirects are followed by the fetcher (at least five hops, section 2.3.1.2) before this is
called; a redirect chain that does not end is a network error.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from protego import Protego

from crawl.fetch.http import error_text

UNREACHABLE_STATUS = -1  # robots_status recorded when no HTTP answer was obtained
MAX_SITEMAPS = 50


@dataclass(frozen=True)
class RobotsPolicy:
    status: int                  # HTTP status of the robots.txt fetch, or UNREACHABLE_STATUS
    allow_all: bool
    disallow_all: bool
    crawl_delay_s: float | None
    _parser: Protego | None = None
    agent: str = "*"
    sitemaps: tuple[str, ...] = ()
    error: str | None = None     # why the file could not be parsed (then disallow_all)

    def allowed(self, url: str) -> bool:
        if self.disallow_all:
            return False
        if self.allow_all or self._parser is None:
            return True
        return bool(self._parser.can_fetch(url, self.agent))


def policy_from_fetch(status: int, body: bytes | str | None, agent: str, max_bytes: int) -> RobotsPolicy:
    """Build the policy for an agent from a robots.txt fetch (status code and body)."""
    if status == UNREACHABLE_STATUS or status == 429 or status >= 500:
        return RobotsPolicy(status=status, allow_all=False, disallow_all=True, crawl_delay_s=None, agent=agent)
    if 400 <= status < 500 or not (200 <= status < 300):
        return RobotsPolicy(status=status, allow_all=True, disallow_all=False, crawl_delay_s=None, agent=agent)
    if body is None:
        body = b""
    if isinstance(body, str):
        body = body.encode("utf-8", "replace")
    text = body[:max_bytes].decode("utf-8", "replace")
    try:
        parser = Protego.parse(text)
        delay = parser.crawl_delay(agent)
        crawl_delay = float(delay) if delay is not None and float(delay) >= 0 else None
    except MemoryError:
        raise
    except Exception as exc:  # a hostile file must never crash a fetch task, nor open the host
        return RobotsPolicy(status=status, allow_all=False, disallow_all=True, crawl_delay_s=None, agent=agent,
                            error=f"robots.txt unparsable: {error_text(exc)}")
    try:  # Sitemap lines are kept for discovery (RFC 9309 section 2.2.4)
        sitemaps = tuple(str(s)[:2048] for s in itertools.islice(parser.sitemaps, MAX_SITEMAPS))
    except MemoryError:
        raise
    except Exception:  # the rules are read: a broken Sitemap line costs only the sitemaps
        sitemaps = ()
    return RobotsPolicy(status=status, allow_all=False, disallow_all=False, crawl_delay_s=crawl_delay,
                        _parser=parser, agent=agent, sitemaps=sitemaps)


def effective_delay(configured_delay_s: float, policy: RobotsPolicy) -> float:
    """Gap between two requests to a host: the larger of our delay and the robots Crawl-delay."""
    if policy.crawl_delay_s is None:
        return configured_delay_s
    return max(configured_delay_s, policy.crawl_delay_s)
