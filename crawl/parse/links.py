"""What a crawler takes from one HTML page: its outlinks and the page's own hints about them.

``extract_links`` parses the page once (selectolax/lexbor, the HTML Living Standard parser, so
broken markup is repaired the way browsers repair it) and walks the link-ish elements in document
order:

  * outlinks: ``<a href>`` and ``<area href>``, resolved against the document base URL (the first
    ``<base href>``, HTML LS section 2.4.1 "document base URL"), normalised with
    ``crawl.net.urls.check_url``, deduplicated, the page itself left out, at most ``max_outlinks``;
  * ``canonical``: the first ``<link rel=canonical>`` in ``<head>`` (RFC 6596), a hint only;
  * ``feeds``: the page's RSS/Atom feeds, ``<link rel=alternate type=application/rss+xml>`` (or
    ``application/atom+xml``), at most ``MAX_FEEDS``: the fetcher reads them like sitemaps
    (crawl/fetch/sitemap_reader.py), their items' dates are change hints;
  * ``refresh``: the target of the first valid ``<meta http-equiv=refresh>`` (HTML LS "shared
    declarative refresh steps"), which browsers follow like a redirect, so it is also the first
    outlink;
  * ``noindex`` / ``nofollow``: robots directives from ``<meta name=robots>``, ``<meta
    name=<our agent>>`` and the ``X-Robots-Tag`` response header, with Google's conventions
    (https://developers.google.com/search/docs/crawling-indexing/robots-meta-tag).

Everything dropped is counted by reason in ``PageLinks.rejected`` (check_url's reason codes,
plus ``nofollow`` and ``over_cap``), so stats can say where links went. Duplicates and links to
the page itself are not rejections and are not counted.

Nothing here raises on page content: any markup, size, NUL bytes or wrong charset gives a result.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from crawl.net.urls import BaseUrl, UrlRules, check_url

# Two queries: the links, and the elements that carry hints about them. (One query for all,
# telling links apart by tag id, walked the tree once but cost more: about 0.1 us per link for
# the test, measured with bench/extract.py.)
_LINKS = "a[href], area[href]"
_HINTS = "link[href], meta, base[href]"
# The feed formats a <link rel=alternate type=...> announces (RSS 2.0, Atom 1.0: RFC 4287 section 7.1).
FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml"})
# Feeds kept of one page: a site has one or two (posts, comments); more is noise.
MAX_FEEDS = 4
_MAX_FEED_HREFS = 16 * MAX_FEEDS  # announcements looked at, duplicates and bad ones included
_ASCII_WS = " \t\n\x0c\r"
_DIGITS = "0123456789"
# Robots directives that take a value ("max-snippet: 20"): a "name:" prefix that is one of these
# is a directive, any other "name:" prefix in X-Robots-Tag names a user agent.
_VALUED_DIRECTIVES = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_AGENT_PREFIX_RE = re.compile(r"\s*([^\s:,]+)\s*:(.*)", re.S)
_TOKEN_SPLIT_RE = re.compile(r"[\s,;]+")
# Hrefs starting with these depend on the base URL's scheme and host only (see _Resolver.new).
# Those recur on every page of a site (navigation, footer), so their check_url result is cached
# across pages; everything else is cached per page only.
_ORIGIN_ONLY_PREFIXES = ("/", "http://", "https://")
# Bounds of that cache: hrefs of at most this many characters; in all at most about this many
# entries (some 30 MB at worst, a few MB for real pages), whole origins dropped least recently
# used first when it is full.
_CACHEABLE_HREF_CHARS = 256
_ORIGIN_CACHE_ENTRIES = 65536
_ORIGIN_CACHES: dict[tuple[str, UrlRules | None], dict[str, tuple[str | None, str | None]]] = {}
_origin_cache_entries = 0  # entries added since the last count (see _origin_cache)


def clear_caches() -> None:
    """Empty the process-wide caches of link resolution (this module's and crawl.net.urls'), as in
    a fresh process: for benchmarks and tests, never needed for correctness."""
    global _origin_cache_entries
    _ORIGIN_CACHES.clear()
    _origin_cache_entries = 0
    import crawl.net.urls
    for value in vars(crawl.net.urls).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


# Stands for a rel=nofollow link in the list of hrefs (never a cache key: no href is it).
_NOFOLLOW = object()


@dataclass(frozen=True)
class PageLinks:
    """The links of one page and its robots hints. ``rejected`` maps a reason code to a count."""
    outlinks: list[str]            # normalised, deduplicated, document order, refresh target first
    canonical: str | None          # <link rel=canonical> target if valid and not the page itself
    refresh: str | None            # <meta http-equiv=refresh> target if valid and not the page itself
    noindex: bool                  # robots meta / X-Robots-Tag says noindex (or none)
    nofollow: bool                 # robots meta / X-Robots-Tag says nofollow (or none): no outlinks
    rejected: dict[str, int] = field(default_factory=dict)
    feeds: list[str] = field(default_factory=list)  # RSS/Atom feeds it announces (none when nofollow)


def extract_outlinks(html: str | bytes, page_url: str, max_outlinks: int) -> list[str]:
    """The outlinks of ``extract_links`` alone (kept for callers that want nothing else)."""
    return extract_links(html, page_url, max_outlinks).outlinks


def extract_links(html: str | bytes, page_url: str, max_outlinks: int, x_robots_tag: str | None = None,
                  rules: UrlRules | None = None, agent: str = "deltacrawl",
                  tree: LexborHTMLParser | None = None) -> PageLinks:
    """Outlinks, canonical, refresh target and robots flags of one page. Never raises on input.

    ``html`` is the decoded page (bytes are decoded as UTF-8 with replacement; callers that know
    the charset decode first, see crawl.parse.page.decode_html). ``x_robots_tag`` is the value of the
    X-Robots-Tag response header; several such headers are joined with ", " (RFC 9110 section
    5.3). ``agent`` is our robots user-agent token, matched case-insensitively.

    A nofollow page gives no outlinks (each of its links is counted as ``nofollow``), but its
    ``canonical`` and ``refresh`` are still reported: they are the page's statements about its own
    address, which the crawler may use (as a redirect or a dedup hint) without following a link.
    A noindex page keeps its outlinks (Google: noindex alone does not stop link discovery).

    Links with ``rel`` containing ``nofollow`` are dropped (``nofollow``); ``sponsored`` and
    ``ugc`` are hints for indexers and are kept. Once ``max_outlinks`` links are kept, the
    remaining link elements are counted as ``over_cap`` without being normalised (so that count
    includes their duplicates and invalid ones: an upper bound, cheap on a page of 100k links).

    ``tree``: the page already parsed from ``html`` (crawl.parse.page parses each page once for its
    links, title and text); it is read, not changed.
    """
    try:
        return _extract_links(html, page_url, max_outlinks, x_robots_tag, rules, agent, tree)
    except MemoryError:
        raise  # a resource limit, not a property of the page: the parser pool reports it
    except Exception as exc:  # lexbor or a URL edge case we did not foresee: count, never fail
        return PageLinks([], None, None, False, False, {f"extract_error:{type(exc).__name__}": 1})


def _extract_links(html: str | bytes, page_url: str, max_outlinks: int, x_robots_tag: str | None,
                   rules: UrlRules | None, agent: str, tree: LexborHTMLParser | None) -> PageLinks:
    if tree is None:
        if isinstance(html, (bytes, bytearray, memoryview)):
            html = bytes(html).decode("utf-8", "replace")
        tree = LexborHTMLParser(html)
    rejected: dict[str, int] = {}
    agent_lc = (agent or "").strip().lower()
    noindex, nofollow = _header_robots(x_robots_tag, agent_lc) if x_robots_tag else (False, False)

    # One pass over the nodes: collect, then resolve once the base URL is known (a <base> may
    # come after the first links; the document base URL is the first <base href> whatever its
    # position, HTML LS section 2.4.1).
    # The href of every <a>/<area> in document order ("" for a missing value), or _NOFOLLOW for
    # one whose rel says nofollow (decided here, while its attributes are at hand).
    hrefs: list[str | object] = []
    base_href = canonical_href = refresh_content = None
    feed_hrefs: list[str] = []
    for node in tree.css(_LINKS):
        attrs = node.attributes
        rel = attrs.get("rel")
        if rel and "nofollow" in rel.lower() and _has_token(rel, "nofollow"):
            hrefs.append(_NOFOLLOW)
        else:
            hrefs.append(attrs.get("href") or "")
    for node in tree.css(_HINTS):
        tag = node.tag
        attrs = node.attributes
        if tag == "meta":
            name = attrs.get("name")
            if name:
                name = name.strip().lower()
                if name == "robots" or name == agent_lc:
                    index_off, follow_off = _robots_tokens(attrs.get("content") or "")
                    noindex, nofollow = noindex or index_off, nofollow or follow_off
            if refresh_content is None:
                equiv = attrs.get("http-equiv")
                if equiv and equiv.strip().lower() == "refresh":
                    content = attrs.get("content")
                    # Browsers act on the first valid one only ("will declaratively refresh").
                    if content is not None and _refresh_url(content) is not None:
                        refresh_content = content
        elif tag == "link":
            # In <body> a canonical is ignored (Google does too): user content must not be able
            # to name another page as this one's canonical.
            if canonical_href is None and _has_token(attrs.get("rel"), "canonical"):
                parent = node.parent
                if parent is not None and parent.tag == "head":
                    canonical_href = attrs.get("href") or ""
            elif (len(feed_hrefs) < _MAX_FEED_HREFS and _has_token(attrs.get("rel"), "alternate")
                  and (attrs.get("type") or "").split(";", 1)[0].strip().lower() in FEED_TYPES):
                feed_hrefs.append(attrs.get("href") or "")
        elif tag == "base" and base_href is None:
            base_href = attrs.get("href")

    # Links are resolved against the canonical page URL: after check_url's normalisation the
    # result is the same as with the raw one, and a canonical base lets _Resolver share results
    # across pages.
    page_key = check_url(page_url, None, rules)[0]
    base, canonical_base = (page_key, True) if page_key is not None else (page_url, False)
    if base_href is not None:
        # The base URL only resolves other URLs, so it is not rewritten by the rules. An invalid
        # (or non-http) base falls back to the page URL.
        base_key = check_url(base_href, base)[0]
        if base_key is not None:
            base, canonical_base = base_key, True
    page_key = page_key or page_url
    resolve = _Resolver(base, canonical_base, rules, rejected)

    canonical = None
    if canonical_href is not None:
        canonical = resolve(canonical_href)
        if canonical == page_key:
            canonical = None
    refresh = None
    if refresh_content is not None:
        target = _refresh_url(refresh_content)
        refresh = resolve(target) if target else None  # "" is a reload of the page itself
        if refresh == page_key:
            refresh = None

    outlinks: list[str] = []
    if nofollow:
        if hrefs:
            rejected["nofollow"] = rejected.get("nofollow", 0) + len(hrefs)
        return PageLinks(outlinks, canonical, refresh, noindex, nofollow, rejected)
    feeds = list(dict.fromkeys(f for f in map(resolve, feed_hrefs) if f is not None))[:MAX_FEEDS]

    # seen: the outlinks so far in document order (a dict keeps insertion order), after the
    # page itself, which is never an outlink.
    seen = {page_key: None}
    if refresh is not None:
        if max_outlinks > 0:
            seen[refresh] = None
        else:
            rejected["over_cap"] = 1
    room = max_outlinks - len(seen) + 1
    _link_loop(hrefs, resolve, seen, room, rejected)
    outlinks = list(seen)
    del outlinks[0]  # the page itself
    return PageLinks(outlinks, canonical, refresh, noindex, nofollow, rejected, feeds)


def _link_loop(hrefs: list[str | object], resolve: "_Resolver", seen: dict[str, None], room: int,
               rejected: dict[str, int]) -> None:
    """For each href in order: stop at the cap (the rest count as over_cap), count a nofollow
    link, resolve the others, count a rejection by its reason, add a new URL to ``seen``."""
    # This runs for every link of every page: the two caches are read inline, and
    # resolve.new() is called only for an href seen neither on this page nor, for an href that
    # needs only the base's origin, on an earlier page of the same origin.
    origin_cache, memo, new = resolve.origin_cache, resolve.memo, resolve.new
    for i, href in enumerate(hrefs):
        if room <= 0:
            rejected["over_cap"] = rejected.get("over_cap", 0) + len(hrefs) - i
            break
        result = origin_cache.get(href) or memo.get(href)
        if result is None:
            if href is _NOFOLLOW:
                rejected["nofollow"] = rejected.get("nofollow", 0) + 1
                continue
            result = new(href)
        url = result[0]
        if url is None:
            reason = result[1]
            rejected[reason] = rejected.get(reason, 0) + 1
        elif url not in seen:
            seen[url] = None
            room -= 1


class _Resolver:
    """check_url(href, base, rules) with a per-page memo (a link repeated on the page costs one
    dict lookup) and, for hrefs that depend on the base's origin only, a process-wide cache per
    origin (navigation and footer links recur on every page of a site). Calling it counts a
    failure in ``rejected``; the extraction loop reads ``origin_cache`` and ``memo`` itself."""

    def __init__(self, base: str, canonical_base: bool, rules: UrlRules | None, rejected: dict[str, int]):
        self.base = base
        self.rules = rules
        self.rejected = rejected
        self.memo: dict[str, tuple[str | None, str | None]] = {}
        base_url = BaseUrl(base, rules)
        self.check = base_url.check
        # A canonical URL is always scheme://host[:port]/path..., so its origin is a prefix.
        scheme, sep, rest = base.partition("://")
        self.origin = f"{scheme}://{rest.split('/', 1)[0]}/" if canonical_base and sep else None
        if self.origin is not None:
            self.origin_cache = _origin_cache(self.origin, rules)
            self.check_origin = BaseUrl(self.origin, rules).check
        else:
            self.origin_cache = {}

    def __call__(self, href: str) -> str | None:
        result = self.origin_cache.get(href) or self.memo.get(href) or self.new(href)
        url, reason = result
        if url is None:
            self.rejected[reason] = self.rejected.get(reason, 0) + 1
        return url

    def new(self, href: str) -> tuple[str | None, str | None]:
        """Resolve an href not in either cache, and remember the result in the right one."""
        global _origin_cache_entries
        if not href.strip(_ASCII_WS):
            # An empty href is a link to the document base URL (HTML LS: "parse the URL ''"),
            # usually the page itself; check_url alone would call it invalid.
            result = self.memo[href] = check_url(self.base, None, self.rules)
            return result
        # WHATWG URL Standard, basic URL parser: tabs and newlines inside a URL are removed
        # (templated hrefs broken across lines are common); check_url would reject them.
        # (isprintable() is False for those and other rare characters: one scan for the test.)
        clean = href if href.isprintable() else href.replace("\t", "").replace("\n", "").replace("\r", "")
        # An absolute URL, a network path ("//host/x") or an absolute path ("/x") resolves the
        # same against the base's scheme://host/ as against the whole base (RFC 3986 section
        # 5.2.2 takes nothing else from it): those are shared by every page of the origin.
        # (Upper-case schemes and leading white space are merely not shared.)
        if (self.origin is not None and clean.startswith(_ORIGIN_ONLY_PREFIXES)
                and len(clean) <= _CACHEABLE_HREF_CHARS):
            result = self.check_origin(clean)
            if _origin_cache_entries < _ORIGIN_CACHE_ENTRIES:  # bounded within one page too
                self.origin_cache[href] = result
                _origin_cache_entries += 1
            else:
                self.memo[href] = result
        else:
            result = self.memo[href] = self.check(clean)
        return result


def _origin_cache(origin: str, rules: UrlRules | None) -> dict[str, tuple[str | None, str | None]]:
    """The process-wide cache of origin-only hrefs for ``origin`` (see _ORIGIN_ONLY_PREFIXES),
    marked most recently used. Once per page, when the entries added since the last count may
    have filled the cache, it is counted and least recently used origins are dropped."""
    global _origin_cache_entries
    key = (origin, rules)
    try:
        cache = _ORIGIN_CACHES.pop(key, None)
    except TypeError:  # unhashable rules: a cache for this page only
        return {}
    if _origin_cache_entries >= _ORIGIN_CACHE_ENTRIES // 4:
        try:
            total = sum(map(len, _ORIGIN_CACHES.values())) + (len(cache) if cache else 0)
            while total > _ORIGIN_CACHE_ENTRIES and _ORIGIN_CACHES:
                total -= len(_ORIGIN_CACHES.pop(next(iter(_ORIGIN_CACHES))))
        except RuntimeError:  # changed by another thread while counted: start again
            _ORIGIN_CACHES.clear()
            total = len(cache) if cache else 0
        if total > _ORIGIN_CACHE_ENTRIES:  # this origin alone is over the bound
            cache = None
        _origin_cache_entries = 0
    if cache is None:
        cache = {}
    _ORIGIN_CACHES[key] = cache  # (re-)inserted last: dicts keep insertion order, so LRU is first
    return cache


def _has_token(value: str | None, token: str) -> bool:
    """``token`` is one of the space-separated, ASCII case-insensitive tokens of ``value``
    (HTML LS "set of space-separated tokens", used by rel)."""
    return bool(value) and token in value.lower().split()


def _robots_tokens(text: str) -> tuple[bool, bool]:
    """(noindex, nofollow) from a robots directive list such as "noindex, nofollow" or "none".
    Unknown tokens and "all" (the default, "no restrictions") change nothing; when directives
    conflict the most restrictive wins (Google's rule)."""
    noindex = nofollow = False
    for token in _TOKEN_SPLIT_RE.split(text.lower()):
        if token == "noindex":
            noindex = True
        elif token == "nofollow":
            nofollow = True
        elif token == "none":
            noindex = nofollow = True
    return noindex, nofollow


def _header_robots(value: str, agent_lc: str) -> tuple[bool, bool]:
    """(noindex, nofollow) for us from an X-Robots-Tag value.

    Directives are comma-separated. ``name: directives`` (a name that is not a valued directive
    such as ``max-snippet``) addresses a user agent: that directive and the following ones, up to
    the next agent prefix, apply to that agent only, which is how Google reads
    ``otherbot: noindex, nofollow``. Directives before any prefix apply to every crawler.
    """
    noindex = nofollow = False
    applies = True
    for item in value.split(","):
        m = _AGENT_PREFIX_RE.match(item)
        if m and m.group(1).lower() not in _VALUED_DIRECTIVES:
            applies = m.group(1).lower() == agent_lc
            item = m.group(2)
        if applies:
            index_off, follow_off = _robots_tokens(item)
            noindex, nofollow = noindex or index_off, nofollow or follow_off
    return noindex, nofollow


def _refresh_url(content: str) -> str | None:
    """The URL string of a ``<meta http-equiv=refresh content=...>`` value, "" when it refreshes
    the page itself, None when the value is invalid (browsers then ignore the element).

    HTML LS section 4.2.5.3, "shared declarative refresh steps": optional whitespace, a delay
    (digits, then digits and dots), then ``;`` or ``,`` or whitespace, then optionally ``url=``
    (case-insensitive, whitespace around ``=``) and an optional quote that ends the URL.
    """
    n = len(content)
    i = _skip(content, 0, _ASCII_WS)
    start = i
    i = _skip(content, i, _DIGITS)
    if i == start and (i >= n or content[i] != "."):
        return None
    i = _skip(content, i, _DIGITS + ".")
    if i < n:
        if content[i] not in ";," + _ASCII_WS:
            return None
        i = _skip(content, i, _ASCII_WS)
        if i < n and content[i] in ";,":
            i += 1
        i = _skip(content, i, _ASCII_WS)
    if i >= n:
        return ""
    url_string = content[i:]
    j = i
    if content[j] in "Uu":
        j += 1
        if not (j < n and content[j] in "Rr"):
            return url_string  # "parse" step with the text as it is
        j += 1
        if not (j < n and content[j] in "Ll"):
            return url_string
        j = _skip(content, j + 1, _ASCII_WS)
        if not (j < n and content[j] == "="):
            return url_string
        j = _skip(content, j + 1, _ASCII_WS)
    # "skip quotes"
    quote = content[j] if j < n and content[j] in "'\"" else ""
    url_string = content[j + len(quote):]
    if quote and quote in url_string:
        url_string = url_string[:url_string.index(quote)]
    return url_string


def _skip(text: str, i: int, chars: str) -> int:
    n = len(text)
    while i < n and text[i] in chars:
        i += 1
    return i
