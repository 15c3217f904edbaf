"""Parsing one sitemap file (https://www.sitemaps.org/protocol.html) with bounded cost.

``parse_sitemap`` takes the body of one fetched sitemap file and returns its page URLs (with
``<lastmod>``, or a feed item's date, as epoch seconds) or, for a sitemap index, the URLs of its child sitemaps. The
formats of the protocol that are handled:

  * XML ``<urlset>`` of ``<url><loc>`` (+ optional ``<lastmod>``) and XML ``<sitemapindex>`` of
    ``<sitemap><loc>``, with the sitemaps.org namespace, another one, or none (other elements
    and extensions such as ``image:loc`` are skipped);
  * plain text, one URL per line, UTF-8;
  * RSS 2.0 (``<rss><channel><item><link>`` + ``<pubDate>``, RFC 822) and Atom 1.0 feeds
    (``<feed><entry><link href>`` + ``<updated>``, else ``<published>``, RFC 3339), which the
    protocol also accepts: each item is an entry, its date its lastmod. Unlike a sitemap's
    ``<loc>`` (the protocol asks for full URLs, so a relative one is refused), a feed's link may
    be relative, as sites write them: it is resolved against its base URI, the feed's own URL or
    the nearest ``xml:base`` of the link element and its ancestors (XML Base, which RFC 4287
    section 2 adopts for Atom; honoured in RSS too), itself resolved against the base above it;
  * any of them gzip-compressed (recognised by its magic bytes, RFC 1952, not by file name).

A sitemap is untrusted input, so the work is bounded whatever the file says:

  * at most ``max_bytes`` bytes are decoded: gzip is inflated chunk by chunk with
    ``zlib.decompressobj(...).decompress(data, max_length)``, so a gzip bomb costs at most
    ``max_bytes`` of output (processed 1 MiB at a time), never its full expansion;
  * XML is parsed incrementally (expat through ``xml.etree.ElementTree.XMLParser`` with a
    streaming target: no tree is built, memory stays constant), and a document with a DOCTYPE is
    refused before its internal subset is read (error "doctype not allowed"): sitemaps never need
    one, and entity declarations are how billion-laughs and XXE attacks work;
  * at most ``max_urls`` entries are kept.

When a limit cuts the file (``truncated``), the entries that were complete before the cut are
returned: the ``</url>`` (or end of line) of an entry must have been read, so a URL cut in the
middle is never taken for a real one. The same holds for malformed XML and a damaged gzip
stream: what was read before the error is returned, with ``error`` saying what went wrong.

Nothing here raises: every problem is reported in ``Sitemap.error``.
"""
from __future__ import annotations

import email.utils
import re
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

from crawl.net.urls import BaseUrl, UrlRules, check_url

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20            # decoded bytes handed to the parser at a time
_MAX_FIELD_CHARS = 16384    # text kept of one <loc>/<lastmod>; check_url rejects longer URLs anyway
_MAX_LINE_BYTES = 16384     # a longer line of a text sitemap is skipped (no URL is that long)
_XML_WS = b" \t\r\n"
_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"  # xml:base as expat names it (XML Base, W3C)

# W3C Date and Time Formats (https://www.w3.org/TR/NOTE-datetime), as the protocol requires:
# YYYY, YYYY-MM, YYYY-MM-DD, YYYY-MM-DDThh:mm[:ss[.s+]]TZD with TZD "Z" or +hh:mm / -hh:mm.
# Also accepted because real sitemaps use them: a space for "T", +hhmm, and no TZD (read as UTC).
_W3C_DATETIME_RE = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"([Zz]|[+-]\d{2}:?\d{2})?)?)?)?", re.ASCII)


@dataclass(frozen=True)
class SitemapEntry:
    url: str                  # canonical (crawl.net.urls.check_url)
    lastmod: float | None     # <lastmod> as epoch seconds; None when absent or invalid


@dataclass(frozen=True)
class Sitemap:
    """One parsed sitemap file. ``rejected`` maps a reason code (check_url's, ``other_host``,
    ``no_loc``, ``line_too_long``) to a count."""
    urls: list[SitemapEntry]          # pages (<urlset> or text sitemap), document order, no duplicates
    sitemaps: list[str]               # child sitemaps (<sitemapindex>), document order, no duplicates
    error: str | None                 # None, or why (part of) the file could not be read
    truncated: bool                   # max_urls or max_bytes cut the file short
    rejected: dict[str, int] = field(default_factory=dict)


def parse_sitemap(body: bytes, sitemap_url: str, max_urls: int, max_bytes: int,
                  rules: UrlRules | None = None, cut: bool = False) -> Sitemap:
    """Parse one sitemap file. Never raises.

    ``body`` is the response body as received (gzip or not); ``sitemap_url`` is where it was
    fetched from. Each ``<loc>`` (or line) is normalised with ``check_url(loc, None, rules)`` (a
    feed's link with its base URI in place of None: see the module docstring); per the protocol, URLs and child sitemaps must be on the sitemap's own scheme, host and port,
    others are dropped as ``other_host``. (The protocol also limits URLs to the sitemap's
    directory and lets robots.txt vouch for sitemaps on other hosts; neither is applied here.)
    ``max_urls`` bounds urls + sitemaps together; ``max_bytes`` the decoded size. ``cut``: the body
    is only the start of the file (the reader's byte limit stopped it), so it is ``truncated`` and
    its last line or element, perhaps incomplete, is not taken.
    """
    try:
        return _parse_sitemap(body, sitemap_url, max_urls, max_bytes, rules, cut)
    except MemoryError:
        return Sitemap([], [], "memory limit exceeded (MemoryError)", False, {})
    except Exception as exc:  # a bug or a codec surprise: report it, never fail the task
        return Sitemap([], [], f"internal error: {type(exc).__name__}: {exc}"[:300], False, {})


def parse_w3c_datetime(text: str) -> float | None:
    """A W3C datetime (the format of ``<lastmod>``) as epoch seconds, or None if it is not one.
    A date alone means midnight UTC; a time without a zone is read as UTC."""
    m = _W3C_DATETIME_RE.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, tzd = m.groups()
    try:
        tz = timezone.utc
        if tzd and tzd not in ("Z", "z"):
            digits = tzd[1:].replace(":", "")
            if int(digits[2:]) > 59:
                return None
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            tz = timezone(-offset if tzd[0] == "-" else offset)
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        return datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
                        int(second or 0), micro, tzinfo=tz).timestamp()
    except (ValueError, OverflowError):  # month 13, hour 25, zone +25:00, year 0 ...
        return None


# --------------------------------------------------------------------------------------------

class _Stop(Exception):
    """Stops the parser: the entry cap was reached, or the document is refused."""

    def __init__(self, error: str | None = None):
        super().__init__(error)
        self.error = error


class _Collector:
    """Checks entries as the parsers find them and keeps the good ones (cap, host, duplicates)."""

    def __init__(self, origin: str, max_urls: int, rules: UrlRules | None):
        self.origin = origin
        self.max_urls = max_urls
        self.rules = rules
        self.urls: list[SitemapEntry] = []
        self.sitemaps: list[str] = []
        self.seen: set[str] = set()
        self.rejected: dict[str, int] = {}
        self.truncated = False
        self._base: BaseUrl | None = None  # the last base a feed link was resolved against (entries share it)

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def add(self, is_sitemap: bool, loc: str | None, lastmod: str | None,
            parse_date: Callable[[str], float | None] = parse_w3c_datetime, base: str | None = None) -> None:
        """``base``: the URL a relative ``loc`` is resolved against (feeds only; None: absolute only)."""
        if not loc:
            self.reject("no_loc")
            return
        if base is None:
            url, reason = check_url(loc, None, self.rules)
        else:
            if self._base is None or self._base.base != base:
                self._base = BaseUrl(base, self.rules)
            url, reason = self._base.check(loc)
        if url is None:
            self.reject(reason or "invalid")
            return
        if not url.startswith(self.origin):
            self.reject("other_host")
            return
        if url in self.seen:
            return
        if len(self.seen) >= self.max_urls:
            self.truncated = True
            raise _Stop()
        self.seen.add(url)
        if is_sitemap:
            self.sitemaps.append(url)
        else:
            self.urls.append(SitemapEntry(url, parse_date(lastmod) if lastmod else None))


def parse_rfc822_datetime(text: str) -> float | None:
    """An RFC 822 date (RSS 2.0's ``pubDate``, with RFC 1123's four-digit years) as epoch seconds,
    or None if it is not one. A date without a zone ("-0000") is read as UTC."""
    try:
        when = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.timestamp()
    except (ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class _Format:
    """Where one XML format keeps its entries: the entry element and its depth, and the role of
    each child element read ("loc": the URL; "date" and, when absent, "date2": the entry's date;
    "href": the URL in an Atom ``<link href>``)."""
    entry: str
    depth: int
    fields: dict[str, str]
    is_index: bool = False
    parse_date: Callable[[str], float | None] = parse_w3c_datetime
    relative: bool = False  # links may be relative (feeds); a sitemap's <loc> must be a full URL


# By root element. RSS and Atom are sitemaps too (the protocol accepts RSS 2.0 and Atom 1.0 feeds):
# an item's link is a URL, its date (RSS pubDate; Atom updated, else published) its lastmod.
_FORMATS = {
    "urlset": _Format("url", 2, {"loc": "loc", "lastmod": "date"}),
    "sitemapindex": _Format("sitemap", 2, {"loc": "loc", "lastmod": "date"}, is_index=True),
    "rss": _Format("item", 3, {"link": "loc", "pubDate": "date"}, parse_date=parse_rfc822_datetime,
                   relative=True),  # rss/channel/item
    "feed": _Format("entry", 2, {"link": "href", "updated": "date", "published": "date2"},
                    relative=True),  # RFC 4287 dates
}


class _XmlTarget:
    """ElementTree parser target that streams entries to a _Collector instead of building a tree.

    Only the fields of _FORMATS directly inside an entry (``url`` in a ``urlset``, ``sitemap``
    in a ``sitemapindex``, ``item`` in an RSS channel, ``entry`` in an Atom feed) are read,
    whatever their namespace; deeper elements, such as the ``image:loc`` of Google's image
    extension, are skipped by depth.
    """

    def __init__(self, collector: _Collector, document_url: str):
        self.collector = collector
        self.document_url = document_url
        self.bases: list[str] = []           # a feed's base URI per open element (XML Base)
        self.field_base: str | None = None   # the base of the field being read
        self.depth = 0
        self.format: _Format | None = None   # from the root element
        self.in_entry = False
        self.field: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.values: dict[str, str] = {}

    def doctype(self, name, pubid, system) -> None:
        # Called by expat at "<!DOCTYPE", before any entity declaration is read.
        raise _Stop("doctype not allowed")

    def start(self, tag: str, attrib) -> None:
        self.depth += 1
        local = tag.rpartition("}")[2]
        if self.depth == 1:
            self.format = _FORMATS.get(local)
            if self.format is None:
                raise _Stop(f"not a sitemap: root element <{local[:50]}>")
        fmt = self.format
        if fmt.relative:
            self._push_base(attrib.get(_XML_BASE))
        if self.depth == 1:
            return
        if self.depth == fmt.depth and local == fmt.entry:
            self.in_entry, self.values = True, {}
        elif self.depth == fmt.depth + 1 and self.in_entry:
            role = fmt.fields.get(local)
            if role == "href":
                # an Atom entry's page: its first link whose rel is "alternate" (the default, RFC 4287 4.2.7.2)
                if (attrib.get("rel") or "alternate").strip() == "alternate" and "loc" not in self.values:
                    self.values["loc"] = (attrib.get("href") or "")[:_MAX_FIELD_CHARS].strip()
                    self.values["base"] = self.bases[-1] if fmt.relative else None
            elif role is not None:
                self.field, self.parts, self.size = role, [], 0
                self.field_base = self.bases[-1] if fmt.relative else None

    def _push_base(self, xml_base: str | None) -> None:
        """The element's base URI: its xml:base resolved against its parent's, else the parent's
        (the document's URL at the root). An xml:base that is no usable URL is ignored."""
        parent = self.bases[-1] if self.bases else self.document_url
        if xml_base is not None:
            resolved, _ = check_url(xml_base[:_MAX_FIELD_CHARS].strip(), parent)
            parent = resolved or parent
        self.bases.append(parent)

    def data(self, text: str) -> None:
        if self.field is not None and self.size <= _MAX_FIELD_CHARS:
            self.parts.append(text)
            self.size += len(text)

    def end(self, tag: str) -> None:
        fmt = self.format
        if fmt is not None and self.depth == fmt.depth + 1 and self.field is not None:
            if self.field not in self.values:  # the first one counts
                self.values[self.field] = "".join(self.parts).strip()
                if self.field == "loc":
                    self.values["base"] = self.field_base
            self.field = None
        elif fmt is not None and self.depth == fmt.depth and self.in_entry:
            self.in_entry = False
            date = self.values.get("date") or self.values.get("date2")
            self.collector.add(fmt.is_index, self.values.get("loc"), date, fmt.parse_date, self.values.get("base"))
        if fmt is not None and fmt.relative:
            self.bases.pop()
        self.depth -= 1

    def close(self) -> None:
        return None


class _TextSink:
    """A text sitemap: one URL per line. Only complete lines are used (see feed/finish)."""

    def __init__(self, collector: _Collector):
        self.collector = collector
        self.pending = b""
        self.skipping = False   # inside an over-long line, until its end

    def feed(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        lines[0] = self.pending + lines[0]
        self.pending = lines.pop()
        for line in lines:
            if self.skipping:
                self.skipping = False
                continue
            self._line(line)
        if len(self.pending) > _MAX_LINE_BYTES:
            if not self.skipping:
                self.collector.reject("line_too_long")
            self.pending, self.skipping = b"", True

    def finish(self, complete: bool) -> None:
        """The last line counts only if the file was read to its end (not cut by max_bytes)."""
        if complete and not self.skipping:
            self._line(self.pending)
        self.pending = b""

    def _line(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").strip()
        if text:
            self.collector.add(False, text, None)


# The encoding an XML declaration names (in an ASCII-compatible document; expat reads UTF-16 itself).
_XML_ENCODING_RE = re.compile(rb"""\s*<\?xml\s[^>]*?encoding\s*=\s*["']([^"']{0,64})["']""")


def _encoding_refusal(head: bytes, exc: Exception) -> str | None:
    """The error for a document whose declared encoding expat cannot use, or None when ``exc``
    is not about that. expat asks Python's codecs for the declared name: an unknown name is a
    LookupError (so is a bytes-to-bytes codec such as "hex"), a multi-byte codec other than
    UTF-8/UTF-16 a ValueError, a codec that fails on its own a UnicodeError."""
    declared = _XML_ENCODING_RE.match(head)
    if declared is None:
        return None
    name = declared.group(1).decode("ascii", "replace")
    if type(exc) is LookupError:  # not its subclasses KeyError and IndexError: those are bugs
        return f"unknown XML encoding {name!r} in the XML declaration"
    if isinstance(exc, UnicodeError) or str(exc) == "multi-byte encodings are not supported":
        return f"unsupported XML encoding {name!r} ({exc})"
    return None


class _XmlSink:
    def __init__(self, collector: _Collector, document_url: str):
        self.parser = ET.XMLParser(target=_XmlTarget(collector, document_url))
        self.head: bytes | None = None  # the start of the document, for its XML declaration

    def feed(self, chunk: bytes) -> None:
        if self.head is None:
            self.head = chunk[:256]
        try:
            self.parser.feed(chunk)
        except (LookupError, ValueError) as exc:
            refusal = _encoding_refusal(self.head, exc)
            if refusal is None:
                raise
            raise _Stop(refusal) from None

    def finish(self, complete: bool) -> None:
        if complete:  # a cut document would only add "no element found"
            self.parser.close()


class _Decoder:
    """The decoded body in chunks, at most ``max_bytes`` in total.

    Sets ``truncated`` when there was more, and ``error`` when a gzip stream is damaged or ends
    early. A gzip file may hold several members, decoded one after the other (RFC 1952 section
    2.2); bytes after the last member are ignored, as gzip(1) does.
    """

    def __init__(self, body: bytes, max_bytes: int, cut: bool = False):
        self.body = body
        self.max_bytes = max(0, int(max_bytes))
        self.cut = cut
        self.truncated = False
        self.error: str | None = None

    def chunks(self) -> Iterator[bytes]:
        if self.body[:2] == _GZIP_MAGIC:
            yield from self._gunzip()
            self.truncated = self.truncated or self.cut
            return
        size = len(self.body)
        for start in range(0, min(size, self.max_bytes), _CHUNK):
            yield self.body[start:min(start + _CHUNK, self.max_bytes)]
        self.truncated = size > self.max_bytes or self.cut

    def _gunzip(self) -> Iterator[bytes]:
        room = self.max_bytes
        data = self.body
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: gzip header and trailer
        while True:
            try:
                # max_length bounds the output of this call; the input not yet used waits in
                # unconsumed_tail. Asking for one byte past the room tells a cut from an exact fit.
                out = inflater.decompress(data, min(_CHUNK, room + 1))
            except zlib.error as exc:
                self.error = f"bad gzip data: {exc}"
                return
            data = inflater.unconsumed_tail
            if len(out) > room:
                self.truncated = True
                if room:
                    yield out[:room]
                return
            if out:
                room -= len(out)
                yield out
            if inflater.eof:
                data = inflater.unused_data
                if data[:2] != _GZIP_MAGIC:
                    return
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif not out and not data:
                self.error = "gzip stream ends early"
                return


def _parse_sitemap(body: bytes, sitemap_url: str, max_urls: int, max_bytes: int,
                   rules: UrlRules | None, cut: bool) -> Sitemap:
    home, reason = check_url(sitemap_url)
    if home is None:
        return Sitemap([], [], f"invalid sitemap url ({reason})", False, {})
    # A canonical URL is scheme://host[:port]/path, so "same scheme, host and port" is this prefix.
    scheme, _, rest = home.partition("://")
    collector = _Collector(f"{scheme}://{rest.split('/', 1)[0]}/", int(max_urls), rules)
    decoder = _Decoder(bytes(body or b""), max_bytes, cut)
    sink: _XmlSink | _TextSink | None = None
    head = b""
    error: str | None = None
    try:
        for chunk in decoder.chunks():
            if sink is None:
                # XML or text is decided by the first byte that is not whitespace or a BOM.
                head += chunk
                if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 BOM: only XML can be that
                    sink, chunk = _XmlSink(collector, home), head
                else:
                    # Leading blank lines would make expat refuse the "<?xml" declaration; the
                    # protocol asks for UTF-8, so a UTF-8 BOM can go too.
                    chunk = (head[3:] if head[:3] == b"\xef\xbb\xbf" else head).lstrip(_XML_WS)
                    if not chunk:
                        continue
                    sink = _XmlSink(collector, home) if chunk[:1] == b"<" else _TextSink(collector)
                head = b""
            sink.feed(chunk)
        if sink is None:
            error = decoder.error or "empty body"
        else:
            sink.finish(not decoder.truncated and decoder.error is None)
            error = decoder.error
    except _Stop as stop:
        error = stop.error
    except ET.ParseError as exc:
        error = f"malformed xml: {exc}"
    return Sitemap(collector.urls, collector.sitemaps, error, decoder.truncated or collector.truncated,
                   collector.rejected)
