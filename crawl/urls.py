"""URL normalisation and the stable keys derived from a URL (host, url_hash, host_bucket).

One canonical form per URL, so the crawldb never holds the same address twice:
scheme and host lower-cased, default port dropped, IDNA host, dot-segments removed
(RFC 3986 section 5.2.4), percent-encoding normalised, fragment dropped, empty path -> "/".
Only http and https are crawlable; anything else is rejected with a reason.
"""
from __future__ import annotations

import hashlib
import posixpath
import re
import string
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urljoin, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Characters left as they are when re-quoting a path or query (RFC 3986 reserved + unreserved).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_QUERY_SAFE = "/:@!$&'()*+,;=-._~?"
_HOST_RE = re.compile(r"^[a-z0-9.\-_]+$")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_HEX = frozenset(string.hexdigits)
# An absolute cap, whatever the config says (discovery.max_url_length is the configurable filter).
MAX_URL_LENGTH = 8192


class InvalidUrl(ValueError):
    """The string is not a crawlable http(s) URL; the message says why, ``reason`` names the
    rule (a short stable code, counted in stats)."""

    def __init__(self, message: str, reason: str = "invalid"):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class UrlRules:
    """Config-driven parts of normalisation: query/path parameters to strip. Patterns are
    matched case-insensitively; a trailing ``*`` matches a prefix (``utm_*``)."""
    tracking_params: tuple[str, ...] = ()
    session_params: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "UrlRules":
        return cls(tuple(cfg["discovery.tracking_params"]), tuple(cfg["discovery.session_params"]))


def _requote(part: str, safe: str) -> str:
    """RFC 3986 section 6.2.2 normalisation of a path or query, byte-exact:
    %XX of an unreserved character is decoded, every other %XX is kept (upper-cased: an encoded
    delimiter stays distinct from the raw one, and non-UTF-8 bytes are never reinterpreted), a
    stray % becomes %25, and characters outside ``safe`` are UTF-8 percent-encoded (bytes that
    arrived undecodable, as surrogate escapes, are encoded back to themselves)."""
    out: list[str] = []
    i, n = 0, len(part)
    while i < n:
        ch = part[i]
        if ch == "%":
            hexpair = part[i + 1:i + 3]
            if len(hexpair) == 2 and all(c in _HEX for c in hexpair):
                decoded = chr(int(hexpair, 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + hexpair.upper())
                i += 3
                continue
            out.append("%25")
        elif ch in _UNRESERVED or ch in safe:
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape")))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    if not path:
        return "/"
    trailing = path.endswith("/") or path.endswith("/.") or path.endswith("/..")
    normalised = posixpath.normpath(path)
    if normalised.startswith("//"):
        normalised = "/" + normalised.lstrip("/")
    if normalised == ".":
        normalised = "/"
    if trailing and not normalised.endswith("/"):
        normalised += "/"
    return normalised


def normalize_url(url: str, base: str | None = None, rules: UrlRules | None = None) -> str:
    """Return the canonical form of ``url`` (resolved against ``base`` if given) or raise InvalidUrl."""
    try:
        return _normalize(url, base)
    except UnicodeError as exc:  # e.g. a lone surrogate that is no escaped byte
        raise InvalidUrl(f"undecodable characters ({exc.reason})", "undecodable") from None


def check_url(url: str, base: str | None = None, rules: UrlRules | None = None) -> tuple[str | None, str | None]:
    """``(canonical, None)`` or ``(None, reason)``: normalize_url that never raises."""
    try:
        return normalize_url(url, base, rules), None
    except InvalidUrl as exc:
        return None, exc.reason
    except Exception:  # normalisation must never take a task down; count it instead
        return None, "unparseable"


def _normalize(url: str, base: str | None) -> str:
    if not isinstance(url, str):
        raise InvalidUrl("not a string")
    raw = url.strip()
    if not raw:
        raise InvalidUrl("empty URL")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw):
        raise InvalidUrl("URL contains control characters")
    if base is not None:
        try:
            raw = urljoin(base, raw)
        except ValueError as exc:  # e.g. "http://[bad/": an unbalanced IPv6 bracket
            raise InvalidUrl(f"unparseable URL ({exc})") from None
    if len(raw) > MAX_URL_LENGTH:
        raise InvalidUrl(f"URL longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise InvalidUrl(f"unparseable URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidUrl(f"unsupported scheme '{scheme or '(none)'}'")
    hostname = parts.hostname
    if not hostname:
        raise InvalidUrl("URL has no host")
    hostname = hostname.rstrip(".")
    try:
        host = hostname.encode("idna").decode("ascii").lower().rstrip(".")
    except UnicodeError:
        raise InvalidUrl(f"invalid host name '{hostname!r}'") from None
    if not _HOST_RE.match(host) or ".." in host or host.startswith("-"):
        raise InvalidUrl(f"invalid host name '{hostname}'")
    netloc = host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        if port == 0:
            raise InvalidUrl("port 0 is not a valid port")
        netloc = f"{host}:{port}"
    path = _remove_dot_segments(_requote(parts.path, _PATH_SAFE))
    query = _requote(parts.query, _QUERY_SAFE) if parts.query else ""
    return urlunsplit((scheme, netloc, path, query, ""))


def host_of(url: str) -> str:
    """The host key of a normalised URL: ``host`` or ``host:port`` (the politeness unit)."""
    return urlsplit(url).netloc


def _hash64(text: str) -> int:
    """A stable signed 64-bit hash (the same on every machine and Python run, unlike hash())."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


def url_hash(url: str) -> int:
    return _hash64(url)


def host_bucket(host: str, buckets: int) -> int:
    """Stable bucket of a host in [0, buckets): the crawldb's partition column."""
    return _hash64(host) % buckets
