"""URL normalisation and the stable keys derived from a URL (host, url_hash, host_bucket).

One canonical form per URL, so the crawldb never holds the same address twice. In order:

1. the URL is parsed, and a reference resolved against its base, by the WHATWG URL Standard's
   parser (crawl/net/whatwg.py: ada, the parser of Node.js): what a browser would request.
   That lower-cases scheme and host, converts an internationalised host to its ASCII form
   (IDNA, UTS 46), reads IPv4 addresses in every form browsers accept, drops the default port,
   makes an empty path "/", removes dot-segments (also percent-encoded ones), turns "\\" into
   "/" and percent-encodes what must be;
2. the userinfo and the fragment are dropped, and a trailing "." of a host name;
3. percent-encoding is normalised byte-exactly (RFC 3986 section 6.2.2.2): %XX of an unreserved
   character is decoded, every other one upper-cased, and the characters RFC 3986 does not allow
   in a path or query (WHATWG leaves some, such as "|" and "[") are encoded;
4. with ``UrlRules``, session-id path parameters (``/page;jsessionid=ABC``) are removed (and the
   dot-segments that uncovers);
5. the query is split on ``&``, empty pieces dropped, tracking and session-id parameters
   removed (with ``UrlRules``) and the rest sorted; an empty query is dropped.

Steps 4 and 5 are not equivalences: a server may in principle tell ``?a=1&b=2`` from
``?b=2&a=1``. They are the usual crawler trade-off (Nutch's querystring normaliser sorts the
query, its regex normaliser and Heritrix's canonicalisation rules strip session ids): in practice
the variants name one page, and keeping them apart multiplies the crawldb. Where this differs
from the earlier RFC 3986 normaliser of our own (a few rare URL shapes; the rest keep their
canonical form, so their url_hash), docs/urls.md lists each difference.

Only http and https are crawlable; anything else is rejected with a short stable reason code
(``InvalidUrl.reason``, one of ``REASONS``) that stats count. A URL with control characters is
rejected before parsing (WHATWG would delete tabs and newlines silently; crawl/parse/links.py
does that for hrefs, where it is what browsers do). Every step is idempotent, so
``normalize_url(normalize_url(u)) == normalize_url(u)`` (a property test checks it).
``BaseUrl(base, rules).check(href)`` is ``check_url(href, base, rules)`` with the base prepared
once, for the links of one page.
"""
from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import string
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

from crawl.net import whatwg

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_RE = re.compile(r"[a-z0-9.\-_]+")  # fullmatch: "$" would pass a trailing newline
# Any C0 control or DEL: never part of a URL (RFC 3986 section 2).
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# A scheme at the start of a reference (RFC 3986 section 3.1).
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# Characters that arrived as undecodable bytes (decoded with surrogateescape): written back as
# the bytes' percent-escapes, never reinterpreted.
_ESCAPED_BYTE_RE = re.compile("[\udc80-\udcff]")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# What _requote rewrites: a % (with or without two hex digits), or a run of characters outside
# the allowed set (RFC 3986 unreserved + sub-delims + ":" "@" "/", plus "?" in a query).
_PATH_REWRITE_RE = re.compile(r"%(?:[0-9A-Fa-f]{2})?|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
_QUERY_REWRITE_RE = re.compile(r"%(?:[0-9A-Fa-f]{2})?|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")
# What _requote would change: a "%" that is no escape, an escape in lower-case hex or of an
# unreserved character (%2D %2E %30-%39 %41-%5A %5F %61-%7A %7E), a character outside the
# allowed set. Most paths and queries hold none, and one search is cheaper than the rewrite.
_CANONICAL_ESCAPE = r"%(?![0-9A-F]{2})|%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2[DE]|5F|7E)"
_PATH_REQUOTE_RE = re.compile(rf"{_CANONICAL_ESCAPE}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]")
_QUERY_REQUOTE_RE = re.compile(rf"{_CANONICAL_ESCAPE}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]")
_BYTE_ESCAPES = tuple(f"%{b:02X}" for b in range(256))
# An absolute cap, whatever the config says (discovery.max_url_length is the configurable filter).
MAX_URL_LENGTH = 8192

# Every InvalidUrl.reason the normaliser produces; stats count rejections under these names.
REASONS = ("empty", "control_chars", "too_long", "unparseable", "scheme", "no_host", "bad_host",
           "bad_port", "undecodable")


class InvalidUrl(ValueError):
    """The string is not a crawlable http(s) URL; the message says why, ``reason`` names the
    rule (a short stable code from ``REASONS``, counted in stats)."""

    def __init__(self, message: str, reason: str = "invalid"):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class UrlRules:
    """Config-driven parts of normalisation: parameters to strip.

    ``tracking_params`` are removed from the query; ``session_params`` from the query and from
    path-segment parameters (``/page;jsessionid=ABC``). A pattern matches a parameter name
    case-insensitively; a trailing ``*`` makes it a prefix (``utm_*`` matches ``utm_source``),
    any other ``*`` is literal."""
    tracking_params: tuple[str, ...] = ()
    session_params: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Lists (from TOML) become tuples so the rules stay hashable (links.py keys caches by them).
        for name in ("tracking_params", "session_params"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        # Compiled once per rules value and kept on the instance: the normaliser needs them for
        # every URL with a query, and the generated dataclass __hash__ rehashes both tuples on
        # every call (a lookup keyed by the rules would cost more than the lookup saves).
        object.__setattr__(self, "_matchers", (_compile_patterns(self.tracking_params + self.session_params),
                                               _compile_patterns(self.session_params)))
        object.__setattr__(self, "_hash", hash((self.tracking_params, self.session_params)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # By value: the cached hash and the compiled matchers are rebuilt where it is unpickled
        # (str hashes differ between processes; the matchers are closures).
        return (type(self), (self.tracking_params, self.session_params))

    @classmethod
    def from_config(cls, cfg: Any) -> "UrlRules":
        """The rules of a crawl.config.Config's [discovery] section (crawl.config is not imported
        here: it imports this module, through the link filter, to check a config at load)."""
        return cls(tuple(cfg.discovery.tracking_params), tuple(cfg.discovery.session_params))


NameMatcher = Callable[[str], bool]


def _compile_patterns(patterns: tuple[str, ...]) -> NameMatcher | None:
    """A predicate on a lower-cased parameter name: one set lookup for the exact names plus one
    ``str.startswith`` over all prefixes, instead of a loop over the patterns per parameter."""
    lowered = [p.lower() for p in patterns]
    exact = frozenset(p for p in lowered if not p.endswith("*"))
    prefixes = tuple(p[:-1] for p in lowered if p.endswith("*"))
    if not exact and not prefixes:
        return None
    if not prefixes:
        return exact.__contains__
    return lambda name: name in exact or name.startswith(prefixes)


def _param_matchers(rules: UrlRules) -> tuple[NameMatcher | None, NameMatcher | None]:
    """(query matcher: tracking + session names, path-parameter matcher: session names only),
    compiled when the rules were made."""
    return rules._matchers  # type: ignore[attr-defined]


def _requote_match(match: re.Match[str]) -> str:
    text = match.group()
    if text[0] == "%":
        if len(text) == 1:
            return "%25"
        decoded = chr(int(text[1:], 16))
        return decoded if decoded in _UNRESERVED else text.upper()
    return "".join(_BYTE_ESCAPES[b] for b in text.encode("utf-8"))


def _requote(part: str, rewrite: re.Pattern[str]) -> str:
    """RFC 3986 section 6.2.2.2 normalisation of a path or query, byte-exact:
    %XX of an unreserved character is decoded, every other %XX is kept (upper-cased: an encoded
    delimiter stays distinct from the raw one, and non-UTF-8 bytes are never reinterpreted), a
    stray % becomes %25, and characters outside the allowed set are UTF-8 percent-encoded."""
    return rewrite.sub(_requote_match, part)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 on an absolute path (or ""), which becomes "/". Empty segments are
    kept: ``/a//b`` and ``/a/b`` may be different resources."""
    if "/." not in path:  # fast path: no "." or ".." segment can occur
        return path or "/"
    segments = path.split("/")  # segments[0] == "" (the path is absolute)
    output: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if segments[-1] in (".", ".."):  # "/a/b/.." -> "/a/": the last segment becomes empty
        output.append("")
    return "/" + "/".join(output)


def _strip_path_params(path: str, is_session: NameMatcher) -> str:
    """Drop ``;name=value`` path-segment parameters whose name is a session id
    (``/page;jsessionid=ABC`` -> ``/page``; RFC 3986 section 3.3 allows such parameters in
    every segment, servlet containers put the session id there)."""
    segments = path.split("/")
    for i, segment in enumerate(segments):
        if ";" in segment:
            head, *params = segment.split(";")
            kept = [p for p in params if not is_session(p.partition("=")[0].lower())]
            if len(kept) != len(params):
                segments[i] = ";".join([head, *kept])
    return "/".join(segments)


def _normalize_query(query: str, is_stripped: NameMatcher | None) -> str:
    """Split on "&", drop empty pieces and stripped parameters, sort the rest (code-point order,
    which is byte order: the pieces are ASCII after _requote; duplicates are kept)."""
    if "&" not in query and is_stripped is None:
        return query
    pieces = [p for p in query.split("&") if p]
    if is_stripped is not None:
        pieces = [p for p in pieces if not is_stripped(p.partition("=")[0].lower())]
    pieces.sort()
    return "&".join(pieces)


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8 for the parser; characters that stand for undecodable bytes
    (surrogateescape) become those bytes' %XX escapes first. Any other lone surrogate raises
    UnicodeEncodeError (reason "undecodable")."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ESCAPED_BYTE_RE.sub(lambda m: _BYTE_ESCAPES[ord(m.group()) - 0xDC00], text).encode("utf-8")


@functools.lru_cache(maxsize=256)
def _base_bytes(base: str) -> bytes | None:
    """A base URL as the parser takes it, or None when it is no valid absolute URL (references
    are then parsed on their own). Cached: the links of a page share their base."""
    try:
        encoded = _utf8(base.strip())
    except UnicodeError:
        return None
    return encoded if whatwg.can_parse(encoded) else None


@functools.lru_cache(maxsize=4096)
def _canonical_host(host: str) -> str | None:
    """The host as the canonical URL writes it, or None when it is not one we accept. An IPv6
    address is written in RFC 5952's text (zone ids never parse); an IPv4 address WHATWG already
    wrote as a dotted quad. A domain is kept to letters, digits, ".", "-" and "_" (WHATWG also
    passes "!", "$" and others that no DNS name holds), to DNS lengths (labels up to 63
    characters, names up to 253: WHATWG does not check them, a resolver does), without empty
    labels or a leading "-", and without a trailing "." (``example.com.`` is ``example.com``).
    Cached: the links of a page mostly share a few hosts."""
    if host.startswith("["):
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    host = host.rstrip(".")
    if (not host or len(host) > 253 or not _HOST_RE.fullmatch(host) or ".." in host or host.startswith("-")
            or (len(host) > 63 and max(map(len, host.split("."))) > 63)):
        return None
    return host


def _refusal(raw: str, base: bytes | None, base_text: Any = None) -> InvalidUrl:
    """Why the WHATWG parser refused ``raw``, in our reason codes (urlsplit tells the parts apart
    well enough to name the rule). ``base_text``: the base as given, when it could not serve as
    one (a relative reference is then refused for what is wrong with the base)."""
    match = _SCHEME_RE.match(raw)
    scheme = match.group(1).lower() if match else ""
    if scheme and scheme not in _DEFAULT_PORTS:
        return InvalidUrl(f"unsupported scheme '{scheme}'", "scheme")
    if not scheme and base is None:
        if isinstance(base_text, str) and base_text.strip():
            return _refusal(base_text.strip(), None)
        return InvalidUrl("unsupported scheme '(none)'", "scheme")
    if scheme and raw[len(scheme) + 1:].startswith("//"):
        target = raw
    elif raw.startswith("//"):
        target = f"http:{raw}"
    elif not scheme:
        return InvalidUrl("unparseable URL (relative reference)", "unparseable")
    else:  # "http:x" against a base of another scheme, or without a base
        return InvalidUrl("URL has no host", "no_host")
    try:
        parts = urlsplit(target)
        hostname = parts.hostname
    except ValueError as exc:  # e.g. "http://[bad/": an unbalanced IPv6 bracket
        return InvalidUrl(f"unparseable URL ({exc})", "unparseable")
    if not hostname:
        return InvalidUrl("URL has no host", "no_host")
    try:
        host_ok = "[" in parts.netloc or _canonical_host(hostname.encode("idna").decode("ascii")) is not None
        parts.port  # noqa: B018 - reading it raises ValueError for a port out of range
    except UnicodeError:
        host_ok = False
    except ValueError as exc:
        if host_ok:
            return InvalidUrl(f"invalid port ({exc})", "bad_port")
    return InvalidUrl(f"invalid host name '{hostname}'", "bad_host")


def _canonical(url: Any, base: bytes | None, rules: UrlRules | None, base_text: Any = None) -> str:
    """The canonical form of ``url`` against a base prepared by _base_bytes (``base_text``: the
    base as given, for the message when it was no valid base); raises InvalidUrl or
    UnicodeError."""
    if url.__class__ is not str:
        if not isinstance(url, str):
            raise InvalidUrl("not a string", "unparseable")
        url = str(url)
    raw = url.strip()
    if not raw:
        raise InvalidUrl("empty URL", "empty")
    if len(raw) > MAX_URL_LENGTH:  # before any parsing: huge inputs cost nothing more
        raise InvalidUrl(f"URL longer than {MAX_URL_LENGTH} characters", "too_long")
    if _CONTROL_RE.search(raw):
        raise InvalidUrl("URL contains control characters", "control_chars")
    # an absolute http(s) URL takes nothing from the base: not parsing the base saves a third
    absolute = raw[:8].lower().startswith(("http://", "https://"))
    parts = whatwg.parse(_utf8(raw), None if absolute else base)
    if parts is None:
        raise _refusal(raw, base, base_text)
    scheme = parts.scheme
    if scheme not in _DEFAULT_PORTS:
        raise InvalidUrl(f"unsupported scheme '{scheme}'", "scheme")
    if not parts.host:
        raise InvalidUrl("URL has no host", "no_host")
    host = _canonical_host(parts.host)
    if host is None:
        raise InvalidUrl(f"invalid host name '{parts.host}'", "bad_host")
    if parts.port is not None:
        if parts.port == 0:
            raise InvalidUrl("invalid port (0)", "bad_port")
        host = f"{host}:{parts.port}"

    query_matcher = path_matcher = None
    if rules is not None:
        query_matcher, path_matcher = _param_matchers(rules)
    path = parts.path
    if _PATH_REQUOTE_RE.search(path):
        path = _requote(path, _PATH_REWRITE_RE)
    if path_matcher is not None and ";" in path:
        # then dot-segments again: a segment like ".;jsessionid=1" is one once stripped
        path = _remove_dot_segments(_strip_path_params(path, path_matcher))
    query = parts.query
    if query:
        if _QUERY_REQUOTE_RE.search(query):
            query = _requote(query, _QUERY_REWRITE_RE)
        query = _normalize_query(query, query_matcher)
    canonical = f"{scheme}://{host}{path}?{query}" if query else f"{scheme}://{host}{path}"
    if len(canonical) > MAX_URL_LENGTH:  # percent-encoding can triple a length
        raise InvalidUrl(f"URL longer than {MAX_URL_LENGTH} characters once normalised", "too_long")
    return canonical


def normalize_url(url: str, base: str | None = None, rules: UrlRules | None = None) -> str:
    """Return the canonical form of ``url`` (resolved against ``base`` if given; tracking and
    session-id parameters stripped if ``rules`` is given) or raise InvalidUrl."""
    try:
        return _canonical(url, _base_bytes(base) if isinstance(base, str) else None, rules, base)
    except UnicodeError as exc:  # e.g. a lone surrogate that is no escaped byte
        raise InvalidUrl(f"undecodable characters ({getattr(exc, 'reason', exc)})", "undecodable") from None


def check_url(url: str, base: str | None = None, rules: UrlRules | None = None) -> tuple[str | None, str | None]:
    """``(canonical, None)`` or ``(None, reason)``: normalize_url that never raises."""
    return _check(url, _base_bytes(base) if isinstance(base, str) else None, rules, base)


class BaseUrl:
    """One base URL against which many references are checked: ``BaseUrl(base, rules).check(href)``
    is ``check_url(href, base, rules)``, with the base prepared once (the links of a page share
    one base)."""
    __slots__ = ("base", "rules", "_base")

    def __init__(self, base: str, rules: UrlRules | None = None):
        self.base = base
        self.rules = rules
        self._base = _base_bytes(base) if isinstance(base, str) else None

    def check(self, url: str) -> tuple[str | None, str | None]:
        return _check(url, self._base, self.rules, self.base)


def _check(url: Any, base: bytes | None, rules: UrlRules | None, base_text: Any) -> tuple[str | None, str | None]:
    try:
        return _canonical(url, base, rules, base_text), None
    except InvalidUrl as exc:
        return None, exc.reason
    except UnicodeError:
        return None, "undecodable"
    except Exception:  # normalisation must never take a task down; count it instead
        return None, "unparseable"


# A netloc that urlsplit returns as it is: no "?" or "#" (which end it), no white space or
# controls (which it deletes), no userinfo or brackets, ASCII.
_SIMPLE_NETLOC_RE = re.compile(r"[A-Za-z0-9.\-_:~%!$&'()*+,;=]*")


def host_of(url: str) -> str:
    """The host key of a normalised URL: ``host`` or ``host:port`` (the politeness unit)."""
    # A canonical URL is "scheme://netloc" followed by "/", "?" or nothing: its netloc without
    # urlsplit (which costs ~1 us, and this runs for every kept link). Anything else: urlsplit.
    if url.startswith(("http://", "https://")):
        start = url.index("//") + 2
        end = url.find("/", start)
        if end < 0:
            end = len(url)
        netloc = url[start:end]
        if _SIMPLE_NETLOC_RE.fullmatch(netloc):
            return netloc
    return urlsplit(url).netloc


def host_without_port(host_key: str) -> str:
    """``example.com:8080`` -> ``example.com``; ``[::1]:8080`` -> ``[::1]``."""
    if host_key.startswith("["):
        return host_key[:host_key.find("]") + 1] or host_key
    colon = host_key.rfind(":")
    return host_key[:colon] if colon >= 0 else host_key


def _hash64(text: str) -> int:
    """A stable signed 64-bit hash (the same on every machine and Python run, unlike hash())."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


def url_hash(url: str) -> int:
    return _hash64(url)


def host_bucket(host: str, buckets: int) -> int:
    """Stable bucket of a host in [0, buckets): the crawldb's partition column."""
    return _hash64(host) % buckets
