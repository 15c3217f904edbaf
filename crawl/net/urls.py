"""URL normalisation and the stable keys derived from a URL (host, url_hash, host_bucket).

One canonical form per URL, so the crawldb never holds the same address twice. In order:

1. a reference is resolved against its base (RFC 3986 section 5.2.2);
2. scheme and host are lower-cased (section 6.2.2.1), an internationalised host is converted
   to its ASCII form (IDNA, RFC 3490), the default port and any userinfo are dropped and an
   empty path becomes "/" (section 6.2.3);
3. percent-encoding is normalised byte-exactly (section 6.2.2.2);
4. with ``UrlRules``, session-id path parameters (``/page;jsessionid=ABC``) are removed;
5. dot-segments are removed (section 5.2.4);
6. the query is split on ``&``, empty pieces dropped, tracking and session-id parameters
   removed (with ``UrlRules``) and the rest sorted; an empty query and the fragment are dropped.

Steps 4 and 6 are not RFC 3986 equivalences: a server may in principle tell ``?a=1&b=2`` from
``?b=2&a=1``. They are the usual crawler trade-off (Nutch's querystring normaliser sorts the
query, its regex normaliser and Heritrix's canonicalisation rules strip session ids): in practice
the variants name one page, and keeping them apart multiplies the crawldb.

Only http and https are crawlable; anything else is rejected with a short stable reason code
(``InvalidUrl.reason``, one of ``REASONS``) that stats count. Every step is idempotent, so
``normalize_url(normalize_url(u)) == normalize_url(u)`` (a property test checks it).

Speed: this runs for every link of every page. Most links are "plain" (ASCII, nothing to
percent-encode, lower-case http(s), a simple host), and for those a fast path gives the same
string with one regex and a few string operations instead of urlsplit and the requoting regexes
(about 1 us instead of 8 us per link; tests/test_urls_property.py checks on generated URLs that
it always agrees with the general path, byte for byte). ``BaseUrl(base, rules).check(href)`` is
``check_url(href, base, rules)`` with the base split once, for the links of one page. The fast
path also exists in C (crawl/net/_fasturl.c, built by setup.py when a compiler is at hand), about
0.2 us per link; ``_plain`` is that copy when it is built and ``_plain_py`` otherwise, and
tests/test_fasturl.py holds the two to the same answers.
"""
from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import string
from dataclasses import dataclass
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from crawl import native

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_RE = re.compile(r"^[a-z0-9.\-_]+$")
# Any C0 control or DEL: never part of a URL (RFC 3986 section 2), and urlsplit would otherwise
# silently delete tab/newline and so change what the string says.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# What _requote rewrites: a % (with or without two hex digits), or a run of characters outside
# the allowed set (RFC 3986 unreserved + sub-delims + ":" "@" "/", plus "?" in a query).
_PATH_REWRITE_RE = re.compile(r"%(?:[0-9A-Fa-f]{2})?|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
_QUERY_REWRITE_RE = re.compile(r"%(?:[0-9A-Fa-f]{2})?|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")
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
        object.__setattr__(self, "_query_hint", _compile_query_hint(self.tracking_params + self.session_params))
        object.__setattr__(self, "_query_strip", _compile_query_strip(self.tracking_params + self.session_params))
        object.__setattr__(self, "_fast", (*_fast_names(self.session_params),
                                           *_fast_names(self.tracking_params + self.session_params)))
        object.__setattr__(self, "_hash", hash((self.tracking_params, self.session_params)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # By value: the cached hash and the compiled matchers are rebuilt where it is unpickled
        # (str hashes differ between processes; the matchers are closures).
        return (type(self), (self.tracking_params, self.session_params))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "UrlRules":
        return cls(tuple(cfg["discovery.tracking_params"]), tuple(cfg["discovery.session_params"]))


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


def _fast_names(patterns: tuple[str, ...]) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """(exact names, prefixes of the ``*`` patterns), lower-cased, as ASCII bytes for
    crawl.net._fasturl, which matches ASCII names only. Patterns that are not ASCII once lower-cased,
    or hold "=", are left out: they can match no ASCII parameter name."""
    lowered = [p.lower() for p in patterns]
    usable = [p for p in lowered if p.isascii() and "=" not in p]
    return (tuple(p.encode("ascii") for p in usable if not p.endswith("*")),
            tuple(p[:-1].encode("ascii") for p in usable if p.endswith("*")))


def _escaped_patterns(patterns: tuple[str, ...], names_only: bool = False) -> tuple[list[str], list[str]]:
    """(exact names, prefixes of the ``*`` patterns), lower-cased and regex-escaped. With
    ``names_only``, patterns holding "=" or "&" are left out: they can match no parameter name."""
    lowered = [p.lower() for p in patterns if not (names_only and ("=" in p or "&" in p))]
    return ([re.escape(p) for p in lowered if not p.endswith("*")],
            [re.escape(p[:-1]) for p in lowered if p.endswith("*")])


def _compile_query_hint(patterns: tuple[str, ...]) -> Callable[[str], Any] | None:
    """A regex search that finds every ASCII query in which some parameter name may match
    ``patterns`` (it may also find some in which none does), so the fast path splits and
    filters only those queries. Built from the lower-cased patterns under IGNORECASE: for an
    ASCII name, ``name.lower() == pattern.lower()`` (or startswith) implies a match."""
    pattern = _alternatives(*_escaped_patterns(patterns), exact_end="(?=[=&]|$)")
    return re.compile(f"(?:^|&)(?:{pattern})", re.IGNORECASE).search if pattern else None


def _compile_query_strip(patterns: tuple[str, ...]) -> Callable[[str], Any] | None:
    """A regex match that, on an ASCII query piece, says exactly what the query matcher says of
    the piece's name: the lower-cased patterns under IGNORECASE and ASCII (so only ASCII letters
    fold, as str.lower() does on an ASCII name)."""
    pattern = _alternatives(*_escaped_patterns(patterns, names_only=True), exact_end="(?:=|\\Z)")
    return re.compile(pattern, re.IGNORECASE | re.ASCII).match if pattern else None


def _alternatives(exact: list[str], prefixes: list[str], exact_end: str) -> str | None:
    """A regex alternation: each exact name followed by ``exact_end``, or any prefix; None if
    there are no patterns."""
    alternatives = []
    if exact:
        alternatives.append(f"(?:{'|'.join(exact)}){exact_end}")
    if prefixes:
        alternatives.append(f"(?:{'|'.join(prefixes)})")
    return "|".join(alternatives) or None


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
    # surrogateescape: bytes that arrived undecodable are encoded back to themselves; any other
    # lone surrogate raises UnicodeEncodeError (reason "undecodable").
    return "".join(_BYTE_ESCAPES[b] for b in text.encode("utf-8", "surrogateescape"))


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


@functools.lru_cache(maxsize=4096)
def _ascii_host(hostname: str) -> str | None:
    """The lower-case ASCII (IDNA) form of a host name, or None if it is not a valid one.
    Cached: the links of a page mostly share a few hosts."""
    hostname = hostname.rstrip(".")
    try:
        host = hostname.encode("idna").decode("ascii").lower().rstrip(".")
    except UnicodeError:
        return None
    if not _HOST_RE.match(host) or ".." in host or host.startswith("-"):
        return None
    return host


@functools.lru_cache(maxsize=256)
def _ip_literal(hostname: str) -> str | None:
    """``[address]`` in RFC 5952's canonical text (lower case, zeros compressed) for the host of a
    bracketed IP literal (urlsplit strips the brackets), or None when it is not an IPv6 address.
    Zone identifiers (``fe80::1%25eth0``) name an interface of one machine, so they are refused."""
    try:
        address = ipaddress.IPv6Address(hostname)
    except ValueError:  # also "v1.x" IPvFuture literals, which no HTTP client speaks
        return None
    if address.scope_id:
        return None
    return f"[{address.compressed}]"


def _resolve(ref: str, base: str) -> str:
    """RFC 3986 section 5.2.2: the target of reference ``ref`` relative to ``base``, as a string
    still to be normalised (dot-segments are removed later, for every URL alike)."""
    if ref[:8].lower().startswith(("http://", "https://")):  # fast path: already absolute
        return ref
    parts = urlsplit(ref)
    based = urlsplit(base)
    if parts.scheme:
        if parts.scheme != based.scheme or ref[len(parts.scheme) + 1:].startswith("//"):
            return ref
        # "http:g" against an http base is relative: the non-strict parse of section 5.2.2,
        # which browsers apply to http(s) too.
        ref = ref[len(parts.scheme) + 1:]
        parts = urlsplit(ref)
    if ref.startswith("//"):  # network-path reference
        return f"{based.scheme}:{ref}"
    path, query = parts.path, parts.query
    if not path:
        path = based.path
        # "?" alone defines an empty query (none after normalisation); no "?" keeps the base's
        if "?" not in ref.partition("#")[0]:
            query = based.query
    elif not path.startswith("/"):  # merge (section 5.2.3)
        path = (based.path[:based.path.rfind("/") + 1] or "/") + path
    return f"{based.scheme}://{based.netloc}{path}" + (f"?{query}" if query else "")


# ---------------------------------------------------------------------------------------------
# The fast path: most links on real pages are plain ASCII made of characters that need no
# percent-encoding, with a lower-case http(s) scheme and a simple host. For those, splitting
# with one regex and resolving with string operations gives exactly what urlsplit, _resolve and
# _requote give (tests/test_urls_property.py compares both paths on generated URLs), at a
# fraction of the cost. Anything else takes the general path below.
#
# Characters that _requote leaves alone in a path (RFC 3986 unreserved, sub-delims, ":", "@",
# "/"), and in a query also "?"; and the percent-escapes it leaves alone: upper-case hex of a
# byte that is no unreserved character (%2D %2E %30-%39 %41-%5A %5F %61-%7A %7E are decoded).
_PLAIN_PATH = r"A-Za-z0-9\-._~!$&'()*+,;=:@/"
_PLAIN_ESCAPE = r"%(?:[0189A-F][0-9A-F]|2[0-9A-CF]|3[A-F]|40|5[B-E]|60|7[B-DF])"
_PLAIN_PATH_RUN = rf"[{_PLAIN_PATH}]*(?:{_PLAIN_ESCAPE}[{_PLAIN_PATH}]*)*"
_PLAIN_QUERY_RUN = rf"[{_PLAIN_PATH}?]*(?:{_PLAIN_ESCAPE}[{_PLAIN_PATH}?]*)*"
# After the path: an optional query, an optional fragment (dropped, so any character but the
# controls _normalize rejects). The path either is empty or starts with "/", as urlsplit's path
# does after a netloc; path and query exclude "?" and "#" where urlsplit would split.
_PLAIN_TAIL = rf"(?:\?({_PLAIN_QUERY_RUN}))?(?:#[^\x00-\x1f\x7f]*)?"
# scheme (lower-case, so urlsplit's lower-casing is a no-op), host (no userinfo, brackets or
# non-ASCII; _ascii_host validates it), port (digits only), path, query.
_PLAIN_ABSOLUTE_RE = re.compile(
    rf"(https?)://([A-Za-z0-9.\-_]+)(?::([0-9]{{1,5}}))?((?:/{_PLAIN_PATH_RUN})?){_PLAIN_TAIL}")
_PLAIN_RELATIVE_RE = re.compile(rf"({_PLAIN_PATH_RUN}){_PLAIN_TAIL}")
# What urlsplit takes for a scheme before a ":" (then lower-cased).
_URLSPLIT_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# A reference and its base longer than this together take the general path, which checks the
# resolved length; below it the resolved URL cannot exceed MAX_URL_LENGTH.
_PLAIN_MAX_CHARS = MAX_URL_LENGTH - 64


@functools.lru_cache(maxsize=4096)
def _plain_origin(scheme: str, host: str, port: str | None) -> str | None:
    """``scheme://host[:port]`` in canonical form, exactly as _normalize would write it for this
    netloc, or None when _normalize would reject it (then the general path says why)."""
    ascii_host = _ascii_host(host.lower())
    if ascii_host is None:
        return None
    if port is None:
        return f"{scheme}://{ascii_host}"
    number = int(port)  # urlsplit's .port: leading zeros read, 0..65535
    if number == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{ascii_host}"
    if number == 0 or number > 65535:
        return None
    return f"{scheme}://{ascii_host}:{number}"


@functools.lru_cache(maxsize=256)
def _plain_base(base: str) -> tuple[str, str, str, str, int] | None:
    """(canonical origin, scheme, path, query, length) of a plain base URL: what _resolve takes
    from urlsplit(base); None when the base is not plain. Cached: the links of a page share it."""
    match = _PLAIN_ABSOLUTE_RE.fullmatch(base)
    if match is None:
        return None
    scheme, host, port, path, query = match.groups()
    origin = _plain_origin(scheme, host, port)
    if origin is None:
        return None
    return origin, scheme, path, query or "", len(base)


def _plain_canonical(raw: str, base: str | None, rules: UrlRules | None) -> str | None:
    """normalize_url(raw, base, rules) for a plain reference (see above), "" when the general
    path would reject it for its scheme (javascript:, mailto:, ...), or None when ``raw`` is not
    plain, or anything about it is unusual: the caller then takes the general path. Never raises
    and never returns anything but the general path's answer. ``raw`` is stripped, non-empty
    and at most MAX_URL_LENGTH characters long."""
    return _plain(raw, _plain_base(base) if base.__class__ is str else None, rules)


def _plain_py(raw: str, based: tuple[str, str, str, str, int] | None, rules: UrlRules | None) -> str | None:
    """_plain_canonical with the base already split by _plain_base (None: no plain base).
    ``_plain`` is this function, or its exact copy in C (crawl/net/_fasturl.c) when that is built."""
    if raw.startswith(("http://", "https://")):  # absolute: _resolve returns it as it is
        match = _PLAIN_ABSOLUTE_RE.fullmatch(raw)
        if match is None:
            return None
        scheme, host, port, path, query = match.groups()
        origin = _plain_origin(scheme, host, port)
        if origin is None:
            return None
    elif based is None or len(raw) + based[4] > _PLAIN_MAX_CHARS:
        return None
    elif raw[0] == "/" and raw[1:2] != "/":  # absolute path: only the base's origin counts
        match = _PLAIN_RELATIVE_RE.fullmatch(raw)
        if match is None:
            return None
        path, query = match.groups()
        origin = based[0]
    elif raw[1:2] == "/" and raw[0] == "/":  # network-path reference: the base's scheme
        match = _PLAIN_ABSOLUTE_RE.fullmatch(f"{based[1]}:{raw}")
        if match is None:
            return None
        scheme, host, port, path, query = match.groups()
        origin = _plain_origin(scheme, host, port)
        if origin is None:
            return None
    else:
        colon = raw.find(":")
        # A ":" before any "/", "?" or "#" may end a scheme ("mailto:", "http:g").
        if colon >= 0 and raw.find("/", 0, colon) < 0 and raw.find("?", 0, colon) < 0 \
                and raw.find("#", 0, colon) < 0:
            return _plain_scheme(raw, colon, based, rules)
        match = _PLAIN_RELATIVE_RE.fullmatch(raw)
        if match is None:
            return None
        path, query = match.groups()
        origin, _scheme, base_path, base_query, _length = based
        # RFC 3986 section 5.2.2, as _resolve: no path takes the base's (and its query when
        # the reference has no "?"); a relative path is merged with the base's directory.
        if not path:
            path = base_path
            if query is None:
                query = base_query
        elif path[0] == "." and "/." not in base_path:
            path = _merge_dotted(base_path[:base_path.rfind("/") + 1] or "/", path)
        else:
            path = (base_path[:base_path.rfind("/") + 1] or "/") + path
    path_matcher = query_strip = None
    if rules is not None:
        path_matcher = rules._matchers[1]  # type: ignore[attr-defined]
        if path_matcher is not None and ";" in path:
            path = _strip_path_params(path, path_matcher)
        query_strip = rules._query_strip  # type: ignore[attr-defined]
    if "/." in path:  # _remove_dot_segments' own test, without the call for the usual path
        path = _remove_dot_segments(path)
    elif not path:
        path = "/"
    if query:
        # _normalize_query: split on "&", drop empty pieces and stripped parameters, sort.
        if "&" in query:
            pieces = query.split("&")
            if query_strip is not None and rules._query_hint(query):  # type: ignore[union-attr]
                pieces = [p for p in pieces if p and not query_strip(p)]
            elif "" in pieces:
                pieces = [p for p in pieces if p]
            pieces.sort()
            query = "&".join(pieces)
        elif query_strip is not None and query_strip(query):
            query = ""
        canonical = f"{origin}{path}?{query}" if query else f"{origin}{path}"
    else:
        canonical = f"{origin}{path}"
    return canonical if len(canonical) <= MAX_URL_LENGTH else None


def _plain_scheme(raw: str, colon: int, based: tuple[str, str, str, str, int],
                  rules: UrlRules | None) -> str | None:
    """_plain for a reference that starts with what urlsplit takes for a scheme, against a plain
    (so http or https) base: "" when the general path is sure to reject it with "scheme"
    (javascript:, mailto:, tel:, data: ...: _resolve returns it as it is and nothing before the
    scheme check can fail), the fast path for an upper-case HTTP://, None for anything else."""
    scheme = raw[:colon]
    if not _URLSPLIT_SCHEME_RE.fullmatch(scheme):
        return None
    lowered = scheme.lower()
    if lowered == "http" or lowered == "https":
        # urlsplit lower-cases the scheme and changes nothing else; "http:g" is relative
        return _plain_py(lowered + raw[colon:], based, rules) if raw.startswith("//", colon + 1) else None
    if raw.startswith("//", colon + 1) or _CONTROL_RE.search(raw):  # a netloc may be unparseable
        return None
    return ""


_fast = native.load("_fasturl")
if _fast is not None:
    _fast.set_fallback(_plain_py)  # it hands non-ASCII references to the Python code
_plain = _fast.plain if _fast is not None else _plain_py


def _merge_dotted(base_dir: str, ref_path: str) -> str:
    """base_dir + ref_path, its dot-segments removed when that can be done with slicing: for a
    reference path starting with "." and a base directory ("/" or "/a/b/") without dot segments,
    leading "../" drop a directory and leading "./" nothing (the usual relative links). Anything
    else (a dot segment later on, "." or ".." alone) is returned merged only: dot-segments are
    then removed after path parameters are stripped, as on the general path (".;sid=1" is one)."""
    rest = ref_path
    ups = 0
    while True:
        if rest.startswith("../"):
            ups += 1
            rest = rest[3:]
        elif rest.startswith("./"):
            rest = rest[2:]
        else:
            break
    if rest.startswith(".") or "/." in rest:
        return base_dir + ref_path
    while ups and base_dir != "/":
        base_dir = base_dir[:base_dir.rfind("/", 0, -1) + 1]
        ups -= 1
    return base_dir + rest


def normalize_url(url: str, base: str | None = None, rules: UrlRules | None = None) -> str:
    """Return the canonical form of ``url`` (resolved against ``base`` if given; tracking and
    session-id parameters stripped if ``rules`` is given) or raise InvalidUrl."""
    try:
        return _normalize(url, base, rules)
    except UnicodeError as exc:  # e.g. a lone surrogate that is no escaped byte
        raise InvalidUrl(f"undecodable characters ({getattr(exc, 'reason', exc)})", "undecodable") from None


def check_url(url: str, base: str | None = None, rules: UrlRules | None = None) -> tuple[str | None, str | None]:
    """``(canonical, None)`` or ``(None, reason)``: normalize_url that never raises."""
    if url.__class__ is str:  # the fast path first, without the calls in between
        raw = url.strip()
        if raw and len(raw) <= MAX_URL_LENGTH:
            try:
                canonical = _plain(raw, _plain_base(base) if base.__class__ is str else None, rules)
            except Exception:  # e.g. rules that are no UrlRules: the general path says why
                canonical = None
            if canonical:
                return canonical, None
            if canonical is not None:  # "": a scheme other than http(s)
                return None, "scheme"
    return _check_general(url, base, rules)


class BaseUrl:
    """One base URL against which many references are checked: ``BaseUrl(base, rules).check(href)``
    is ``check_url(href, base, rules)``, with the base split once (the links of a page share
    one base)."""
    __slots__ = ("base", "rules", "_based")

    def __init__(self, base: str, rules: UrlRules | None = None):
        self.base = base
        self.rules = rules
        self._based = _plain_base(base) if base.__class__ is str else None

    def check(self, url: str) -> tuple[str | None, str | None]:
        if url.__class__ is str:
            raw = url.strip()
            if raw and len(raw) <= MAX_URL_LENGTH:
                try:
                    canonical = _plain(raw, self._based, self.rules)
                except Exception:  # e.g. rules that are no UrlRules: the general path says why
                    canonical = None
                if canonical:
                    return canonical, None
                if canonical is not None:  # "": a scheme other than http(s)
                    return None, "scheme"
        return _check_general(url, self.base, self.rules)


def _check_general(url: str, base: str | None, rules: UrlRules | None) -> tuple[str | None, str | None]:
    """check_url without the fast path."""
    try:
        return _normalize(url, base, rules, plain=False), None
    except InvalidUrl as exc:
        return None, exc.reason
    except UnicodeError:
        return None, "undecodable"
    except Exception:  # normalisation must never take a task down; count it instead
        return None, "unparseable"


def _normalize(url: str, base: str | None, rules: UrlRules | None, plain: bool = True) -> str:
    if not isinstance(url, str):
        raise InvalidUrl("not a string", "unparseable")
    raw = url.strip()
    if not raw:
        raise InvalidUrl("empty URL", "empty")
    if len(raw) > MAX_URL_LENGTH:  # before any parsing: huge inputs cost nothing more
        raise InvalidUrl(f"URL longer than {MAX_URL_LENGTH} characters", "too_long")
    if plain:
        canonical = _plain_canonical(raw, base, rules)
        if canonical:  # ("" says the scheme is rejected: the general path says it in words)
            return canonical
    return _normalize_general(raw, base, rules)


def _normalize_general(raw: str, base: str | None, rules: UrlRules | None) -> str:
    """_normalize for any stripped, non-empty ``raw`` of at most MAX_URL_LENGTH characters."""
    if _CONTROL_RE.search(raw):
        raise InvalidUrl("URL contains control characters", "control_chars")
    try:
        if base is not None:
            raw = _resolve(raw, base)
            if len(raw) > MAX_URL_LENGTH:
                raise InvalidUrl(f"URL longer than {MAX_URL_LENGTH} characters", "too_long")
        parts = urlsplit(raw)
    except ValueError as exc:  # e.g. "http://[bad/": an unbalanced IPv6 bracket
        raise InvalidUrl(f"unparseable URL ({exc})", "unparseable") from None
    scheme = parts.scheme  # urlsplit lower-cases it
    if scheme not in _DEFAULT_PORTS:
        raise InvalidUrl(f"unsupported scheme '{scheme or '(none)'}'", "scheme")
    hostname = parts.hostname
    if not hostname:
        raise InvalidUrl("URL has no host", "no_host")
    host = _ip_literal(hostname) if "[" in parts.netloc else _ascii_host(hostname)
    if host is None:
        raise InvalidUrl(f"invalid host name '{hostname}'", "bad_host")
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidUrl(f"invalid port ({exc})", "bad_port") from None
    netloc = host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        if port == 0:
            raise InvalidUrl("invalid port (0)", "bad_port")
        netloc = f"{host}:{port}"

    query_matcher = path_matcher = None
    if rules is not None:
        query_matcher, path_matcher = _param_matchers(rules)
    path = _requote(parts.path, _PATH_REWRITE_RE)
    if path_matcher is not None and ";" in path:
        path = _strip_path_params(path, path_matcher)
    # after stripping, so a segment like ".;jsessionid=1" is removed as the dot-segment it is
    path = _remove_dot_segments(path)
    query = parts.query
    if query:
        query = _normalize_query(_requote(query, _QUERY_REWRITE_RE), query_matcher)
    canonical = f"{scheme}://{netloc}{path}?{query}" if query else f"{scheme}://{netloc}{path}"
    if len(canonical) > MAX_URL_LENGTH:  # percent-encoding can triple a length
        raise InvalidUrl(f"URL longer than {MAX_URL_LENGTH} characters once normalised", "too_long")
    return canonical


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
