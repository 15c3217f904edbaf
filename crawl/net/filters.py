"""Link filters: which normalised outlinks the crawler keeps ([discovery] in conf/defaults.toml).

``LinkFilter.reject_reason(url, source_host)`` returns None to keep a link, or one stable reason
code (the module constants below, all listed in REASONS) that callers count in stats.

The input is a URL already normalised by crawl.net.urls: ``scheme://host[:port]/path[?query]``,
lower-case scheme and host, no fragment. That is what lets the checks use plain string
operations instead of urlsplit: this runs for every outlink of every page (~100k links/s per
core are needed), so each check is a few C-level string calls.

Checks run cheapest first, and the first failing one names the reason:

  scheme          the scheme is not in ``schemes``
  too_long        longer than ``max_url_length`` characters
  scope           outside the source page's host or registrable domain (``scope``); early because
                  it is a string comparison and, in a scoped crawl, rejects most outlinks
  path_depth      more than ``max_path_depth`` non-empty path segments
  extension       the last path segment's extension is in ``deny_extensions`` (case-insensitive)
  repeating_path  one segment, or a run of 2 or 3 segments, occurs back to back more than
                  ``max_segment_repeats`` times (/a/a/a/, /a/b/a/b/a/b/: the classic crawler trap of
                  relative links that resolve one level deeper on every page)
  excluded        an exclude pattern matches (re.search on the whole URL); excludes win
  not_included    include patterns are given and none matches
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterable

from publicsuffixlist import PublicSuffixList

from crawl.net.urls import host_without_port

SCHEME = "scheme"
TOO_LONG = "too_long"
SCOPE = "scope"
PATH_DEPTH = "path_depth"
EXTENSION = "extension"
REPEATING_PATH = "repeating_path"
EXCLUDED = "excluded"
NOT_INCLUDED = "not_included"
# Every reason reject_reason can return, in the order the checks run.
REASONS = (SCHEME, TOO_LONG, SCOPE, PATH_DEPTH, EXTENSION, REPEATING_PATH, EXCLUDED, NOT_INCLUDED)

SCOPES = ("any", "host", "domain")
# Longest run of segments that repeating_path looks for (/a/b/c/a/b/c/...): longer periods are
# rare in traps and would make the check quadratic-ish for little gain.
MAX_REPEAT_PERIOD = 3
# Bound on the per-filter cache of host -> registrable domain (a fetch task sees a few thousand
# hosts; the bound only guards against a pathological page linking to millions).
_DOMAIN_CACHE_SIZE = 65536

_Search = Callable[[str], Any]


@functools.lru_cache(maxsize=1)
def _public_suffixes() -> PublicSuffixList:
    """The Public Suffix List as bundled with the publicsuffixlist package (its version is the
    list's date): loaded once per process (~0.1 s), never fetched from the network."""
    return PublicSuffixList()


def registrable_domain(host: str) -> str:
    """The registrable domain of a host name (no port): the public suffix it is under (Public
    Suffix List, ICANN and private sections) plus one label: www.example.co.uk -> example.co.uk,
    a.b.example.com -> example.com, user.github.io -> user.github.io (github.io is a suffix under
    which each user owns a site). IP addresses, single-label hosts and hosts that are themselves a
    public suffix (co.uk, localhost) are returned whole. A TLD the list does not know counts as a
    suffix of one label.
    """
    host = host.lower().rstrip(".")
    if host.startswith("["):  # IPv6 literal
        return host
    labels = host.split(".")
    # A numeric last label means an IPv4 address (no TLD is numeric: WHATWG URL host parsing).
    if len(labels) < 2 or labels[-1].isdigit():
        return host
    return _public_suffixes().privatesuffix(host) or host


def _repeats_too_often(segments: list[str], max_repeats: int) -> bool:
    """True if a block of 1..MAX_REPEAT_PERIOD segments occurs back to back more than
    ``max_repeats`` times.

    For a period p, a run of r consecutive positions j with segments[j] == segments[j - p]
    covers p + r segments of period p, i.e. 1 + r // p copies of the block; so more than
    ``max_repeats`` copies means a run of at least ``max_repeats * p`` matches. One linear pass
    per period, no slicing.
    """
    n = len(segments)
    for period in range(1, MAX_REPEAT_PERIOD + 1):
        need = max_repeats * period
        if period + need > n:
            break  # longer periods need even more segments
        run = 0
        for j in range(period, n):
            if segments[j] == segments[j - period]:
                run += 1
                if run >= need:
                    return True
            else:
                run = 0
    return False


def _compile_patterns(patterns: Iterable[str], key: str) -> tuple[_Search | None, tuple[_Search, ...]]:
    """Compile ``patterns`` into one combined alternation (one regex scan per URL instead of one
    per pattern) plus the few that cannot be combined, returned as bound ``search`` methods.

    A pattern stays separate when wrapping it changes its meaning or fails: capturing groups
    (numbered back-references would shift in the alternation) and global inline flags such as
    ``(?i)``, which Python 3.11 only accepts at the very start of a whole expression.
    """
    combinable: list[str] = []
    separate: list[_Search] = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ValueError(f"{key}: patterns must be strings, got {pattern!r}")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{key}: invalid regular expression {pattern!r}: {exc}") from None
        try:
            wrapped_ok = compiled.groups == 0 and re.compile(f"(?:{pattern})").groups == 0
        except re.error:
            wrapped_ok = False
        if wrapped_ok:
            combinable.append(pattern)
        else:
            separate.append(compiled.search)
    combined = None
    if combinable:
        try:
            combined = re.compile("|".join(f"(?:{p})" for p in combinable)).search
        except re.error:  # not expected after the per-pattern check; never lose a pattern though
            separate = [re.compile(p).search for p in combinable] + separate
    return combined, tuple(separate)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_strings(name: str, values: Any) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of strings, got {values!r}")
    values = list(values)
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a list of strings, got {value!r} in it")
    return values


class LinkFilter:
    """Decides which normalised outlinks are kept; immutable after construction, so one
    instance is shared by every host of a fetch task (the domain cache is only a memo)."""

    def __init__(self, schemes: Iterable[str], max_url_length: int, max_path_depth: int,
                 max_segment_repeats: int, deny_extensions: Iterable[str],
                 include_patterns: Iterable[str], exclude_patterns: Iterable[str], scope: str):
        schemes = _check_strings("schemes", schemes)
        if not schemes or any(not s for s in schemes):
            raise ValueError(f"schemes must be a non-empty list of scheme names, got {schemes!r}")
        self._schemes = frozenset(s.lower() for s in schemes)
        self._max_url_length = _check_int("max_url_length", max_url_length, 1)
        self._max_path_depth = _check_int("max_path_depth", max_path_depth, 0)
        self._max_segment_repeats = _check_int("max_segment_repeats", max_segment_repeats, 1)
        extensions = set()
        for ext in _check_strings("deny_extensions", deny_extensions):
            ext = ext.strip().lstrip(".").lower()  # ".PNG" in a site file means png
            if not ext:
                raise ValueError("deny_extensions must not contain an empty extension")
            extensions.add(ext)
        self._deny_extensions = frozenset(extensions)
        include_patterns = _check_strings("include_patterns", include_patterns)
        exclude_patterns = _check_strings("exclude_patterns", exclude_patterns)
        self._include, self._include_rest = _compile_patterns(include_patterns, "include_patterns")
        self._has_include = self._include is not None or bool(self._include_rest)
        self._exclude, self._exclude_rest = _compile_patterns(exclude_patterns, "exclude_patterns")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")
        self._scope = scope
        self._domains: dict[str, str] = {}
        self._args = (schemes, max_url_length, max_path_depth, max_segment_repeats, sorted(extensions),
                      include_patterns, exclude_patterns, scope)

    def __reduce__(self):
        # by its arguments: the compiled patterns are rebuilt where it is unpickled
        return (type(self), self._args)

    @classmethod
    def from_config(cls, cfg: Any) -> "LinkFilter":
        """The filter described by the [discovery] section of a crawl.config.Config (not imported
        here: crawl.config imports this module to check a config at load)."""
        discovery = cfg.discovery
        return cls(schemes=discovery.schemes,
                   max_url_length=discovery.max_url_length,
                   max_path_depth=discovery.max_path_depth,
                   max_segment_repeats=discovery.max_segment_repeats,
                   deny_extensions=discovery.deny_extensions,
                   include_patterns=discovery.include_patterns,
                   exclude_patterns=discovery.exclude_patterns,
                   scope=discovery.scope)

    @property
    def scope(self) -> str:
        return self._scope

    def _domain_of(self, host_key: str) -> str:
        """registrable_domain of a host key (port dropped), memoised: a page's links mostly
        point at a handful of hosts."""
        domain = self._domains.get(host_key)
        if domain is None:
            if len(self._domains) >= _DOMAIN_CACHE_SIZE:
                self._domains.clear()
            domain = self._domains[host_key] = registrable_domain(host_without_port(host_key))
        return domain

    def reject_reason(self, url: str, source_host: str) -> str | None:
        """None to keep ``url``, else the reason code (one of REASONS) it is dropped for.

        ``url`` is normalised by crawl.net.urls; ``source_host`` is the host key (``host`` or
        ``host:port``, as crawl.net.urls.host_of returns) of the page the link is on.
        """
        # String methods with start/end bounds read the URL in place: no slice is made but the
        # netloc (for scope) and the path when its segments are needed. (A memo of verdicts per
        # URL did not pay: measured with bench/extract.py, a bounded one was slower than none.)
        sep = url.find("://")
        if sep <= 0 or url[:sep] not in self._schemes:
            return SCHEME
        end = len(url)
        if end > self._max_url_length:
            return TOO_LONG

        host_start = sep + 3
        query = url.find("?", host_start)
        if query >= 0:
            end = query
        path_start = url.find("/", host_start, end)
        if path_start < 0:  # "http://host" or "http://host?q": not normalised, but harmless
            path_start = end

        scope = self._scope
        if scope != "any":
            netloc = url[host_start:path_start]
            if scope == "host":
                if netloc != source_host:
                    return SCOPE
            elif netloc != source_host and self._domain_of(netloc) != self._domain_of(source_host):
                return SCOPE

        slashes = url.count("/", path_start, end)
        # Each non-empty segment follows a "/", so the slash count bounds the segment count and
        # the exact count is only needed for the rare long path.
        segments = None
        if slashes > self._max_path_depth:
            segments = [s for s in url[path_start:end].split("/") if s]
            if len(segments) > self._max_path_depth:
                return PATH_DEPTH

        if self._deny_extensions:
            dot = url.rfind(".", path_start, end)  # in the last segment if after its last "/"
            if dot > url.rfind("/", path_start, end) and url[dot + 1:end].lower() in self._deny_extensions:
                return EXTENSION

        # More than max_segment_repeats copies need more than that many segments.
        if slashes > self._max_segment_repeats:
            if segments is None:
                segments = url[path_start:end].strip("/").split("/")
                if "" in segments:  # "//" cannot survive normalisation, but be exact anyway
                    segments = [s for s in segments if s]
            # All segments distinct (the usual case) means nothing repeats: one C-level check.
            if len(set(segments)) < len(segments) and \
                    _repeats_too_often(segments, self._max_segment_repeats):
                return REPEATING_PATH

        return self._pattern_reason(url)

    def _pattern_reason(self, url: str) -> str | None:
        """The include/exclude part of reject_reason."""
        if self._exclude is not None and self._exclude(url):
            return EXCLUDED
        for search in self._exclude_rest:
            if search(url):
                return EXCLUDED
        if self._has_include:
            if self._include is not None and self._include(url):
                return None
            for search in self._include_rest:
                if search(url):
                    return None
            return NOT_INCLUDED
        return None
