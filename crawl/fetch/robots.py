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

One robots.txt per origin (section 2.3: scheme, host and port). A host key (crawl.net.urls
host_of: default ports elided) names at most two origins, http and https, and keeps one policy
for each (``OriginPolicies``); politeness stays per host key. The hostdb caches both answers on
the host's row: robots_status, robots_txt, robots_fetched_at and robots_error describe the origin
``robots_scheme`` names, and ``robots_other`` (JSON) the other one (``RobotsAnswer``,
``answers_of``, ``host_columns``). A row without robots_scheme (written before origins were told
apart) holds no answer.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

from protego import Protego

from crawl.fetch.http import error_text
from crawl.net.urls import host_of

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


def scheme_of(url: str) -> str:
    """The scheme of a normalised URL (lower case, as crawl.net.urls writes it)."""
    return url.split("://", 1)[0]


class OriginPolicies(dict):
    """{scheme: RobotsPolicy} of one host key: each URL is judged by its own origin's policy; a URL
    of an origin whose robots.txt was not read is not allowed (nothing is requested before its
    robots.txt: the fetcher reads it first, so only a sitemap listed for the other origin meets this)."""

    def allowed(self, url: str) -> bool:
        policy = self.get(scheme_of(url))
        return policy is not None and policy.allowed(url)

    def crawl_delay_s(self) -> float | None:
        """The largest Crawl-delay of the origins read: the host key's gap holds for both schemes."""
        delays = [p.crawl_delay_s for p in self.values() if p.crawl_delay_s is not None]
        return max(delays) if delays else None


@dataclass(frozen=True)
class RobotsAnswer:
    """One origin's robots.txt answer as the hostdb caches it."""
    scheme: str
    status: int                  # HTTP status, or UNREACHABLE_STATUS
    txt: str | None              # the body of a 2xx (up to fetch.robots_max_bytes), else None
    fetched_at: float            # epoch seconds
    error: str | None = None     # why it was unreachable or unparsable

    def usable(self, now: float, ttl_s: float) -> bool:
        """Reused instead of asking again: a definite answer (2xx or 4xx but 429) read within
        ``ttl_s``. After a failure (5xx, 429, no answer) the origin is asked again."""
        return 200 <= self.status < 500 and self.status != 429 and now - self.fetched_at < ttl_s

    def policy(self, agent: str, max_bytes: int) -> RobotsPolicy:
        return policy_from_fetch(self.status, self.txt, agent, max_bytes)

    def to_json(self) -> str:
        return json.dumps({"scheme": self.scheme, "status": self.status, "txt": self.txt,
                           "fetched_at": self.fetched_at, "error": self.error}, ensure_ascii=False)


def answer_from_json(text: str | None) -> RobotsAnswer | None:
    """A ``robots_other`` value, or None when absent or not one of ours (never raises: a damaged
    cache costs one more robots.txt request)."""
    if not text:
        return None
    try:
        d = json.loads(text)
        answer = RobotsAnswer(str(d["scheme"]), int(d["status"]), d.get("txt"), float(d["fetched_at"]), d.get("error"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if answer.txt is not None and not isinstance(answer.txt, str) or not math.isfinite(answer.fetched_at):
        return None
    return answer


def answers_of(row: Mapping[str, Any]) -> dict[str, RobotsAnswer]:
    """The answers a fetchlist carrier row, host_state row or fetched host row caches, by scheme
    (the columns of ``host_columns``). Without robots_scheme (a row from before origins were told
    apart) it caches none: the host's origins are read again once."""
    out: dict[str, RobotsAnswer] = {}
    scheme, status, at = row.get("robots_scheme"), row.get("robots_status"), row.get("robots_fetched_at")
    if scheme and status is not None and at is not None:
        out[scheme] = RobotsAnswer(scheme, int(status), row.get("robots_txt"), float(at), row.get("robots_error"))
    other = answer_from_json(row.get("robots_other"))
    if other is not None and other.scheme not in out:
        out[other.scheme] = other
    return out


def host_columns(answers: Mapping[str, RobotsAnswer]) -> dict[str, Any]:
    """The host row's robots columns for ``answers``: the origin read last in robots_status,
    robots_txt, robots_fetched_at, robots_error and robots_scheme, the other one (if any) in
    robots_other."""
    ordered = sorted(answers.values(), key=lambda a: (-a.fetched_at, a.scheme))
    if not ordered:
        return {"robots_status": None, "robots_txt": None, "robots_fetched_at": None, "robots_error": None,
                "robots_scheme": None, "robots_other": None}
    first = ordered[0]
    return {"robots_status": first.status, "robots_txt": first.txt, "robots_fetched_at": first.fetched_at,
            "robots_error": first.error, "robots_scheme": first.scheme,
            "robots_other": ordered[1].to_json() if len(ordered) > 1 else None}


def newest_answers(*sources: Mapping[str, RobotsAnswer]) -> dict[str, RobotsAnswer]:
    """Per origin, the most recently read answer of ``sources``."""
    out: dict[str, RobotsAnswer] = {}
    for answers in sources:
        for scheme, answer in answers.items():
            if scheme not in out or answer.fetched_at > out[scheme].fetched_at:
                out[scheme] = answer
    return out


def other_origin_robots(url: str, host: str, scheme: str) -> str | None:
    """The scheme of the other origin of ``host`` when ``url`` (a robots.txt redirect target of
    ``scheme``'s origin) is that origin's own robots.txt, else None: http://x/robots.txt -> 301
    https://x/robots.txt, the ordinary move of a site to https."""
    other = scheme_of(url)
    if other == scheme or other not in ("http", "https"):
        return None
    try:
        same_host = host_of(url) == host
    except ValueError:
        return None
    return other if same_host and url == f"{other}://{host}/robots.txt" else None


def redirect_reuse(scheme: str, host: str, target: str, answers: Mapping[str, RobotsAnswer], now: float,
                   ttl_s: float) -> RobotsAnswer | None:
    """``scheme``'s robots.txt redirects to ``target``: when that is the other origin's robots.txt
    and its answer is held (usable), that answer is this origin's too (RFC 9309 2.3.1.2: a
    redirect's target answers for the origin asked), kept as read when the other origin read it:
    no second full fetch of the same file. None: follow the redirect."""
    other = other_origin_robots(target, host, scheme)
    held = answers.get(other) if other is not None else None
    if held is None or not held.usable(now, ttl_s):
        return None
    return replace(held, scheme=scheme)
