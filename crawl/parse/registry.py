"""Parsers by media type: which parser reads an answer, and what type the answer is.

A parser is a module-level function with ``crawl.parse.page.parse_page``'s signature::

    parse(body: bytes, url: str, content_type_header: str | None, options: ParseOptions,
          x_robots_tag: str | None) -> ParseResult

(the answer's bytes, its URL, its Content-Type header, the limits and options of the crawl, its
X-Robots-Tag header in; title, text fingerprints, links, canonical, robots directives and a
parse error out), so dedup, discovery and the crawldb need nothing per type. It is described by
a ``ParserSpec``: its name, the media types it claims and a priority. Two are built in: ``html``
(``parse_page``) and ``pdf`` (``crawl.parse.pdf.parse_pdf``). A package adds one through an
entry point of the group ``deltacrawl.parsers`` whose object is a ParserSpec (or anything with
``media_types``, ``parse`` and optionally ``priority``); docs/parsers.md has a worked example.

``parse_document`` is what the fetcher runs, in the guarded child of crawl.parse.pool like the
HTML parse before it: it detects the type (``detect_media_type``), picks the enabled parser of
the highest priority for it and calls it; whatever that parser does, the result is a ParseResult
(an exception is a parse_error). A parser is run by reference, so the child imports it too.
"""
from __future__ import annotations

import importlib.metadata
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from crawl.config import Config
from crawl.net.urls import check_url
from crawl.parse.page import (_UNKNOWN_TYPES, ParseOptions, ParseResult, _exc_text, sniffs_as_html,
                              _parse_error, parse_page)

ENTRY_POINT_GROUP = "deltacrawl.parsers"
PDF = "application/pdf"
HTML_TYPES = ("text/html", "application/xhtml+xml")
# Declared types that say nothing about the content: the bytes decide (the %PDF- signature).
# Only the unknown ones (_UNKNOWN_TYPES, as the WHATWG rules) are also sniffed for HTML: a server
# that says application/octet-stream does not mean a page to be rendered.
_GENERIC_TYPES = frozenset(_UNKNOWN_TYPES | {"application/octet-stream", "binary/octet-stream",
                                             "application/x-download", "application/force-download",
                                             "application/download"})
# Acrobat accepts the %PDF- header anywhere in the first 1,024 bytes (junk before it is common).
_PDF_SIGNATURE = b"%PDF-"
_PDF_SIGNATURE_WITHIN = 1024
SNIFF_BYTES = 1024


@dataclass(frozen=True)
class ParserSpec:
    """A parser and what it claims. ``parse`` must be a module-level function of an importable
    module (it is pickled by reference to run in the parser child). Higher ``priority`` wins
    among the enabled parsers of one type; the built-in ones have priority 0."""
    name: str
    media_types: tuple[str, ...]
    parse: Callable[..., ParseResult]
    priority: int = 0
    origin: str = "built-in"    # "built-in", or the distribution that installed it


def _parse_pdf(body: bytes, url: str, content_type_header: str | None, options: ParseOptions,
               x_robots_tag: str | None = None) -> ParseResult:
    from crawl.parse.pdf import parse_pdf  # imported on first use: pypdf is not needed for HTML
    return parse_pdf(body, url, content_type_header, options, x_robots_tag)


BUILT_IN = (ParserSpec("html", HTML_TYPES, parse_page), ParserSpec("pdf", (PDF,), _parse_pdf))


# --------------------------------------------------------------------------------------------
# Installed parsers (entry points)
# --------------------------------------------------------------------------------------------

_lock = threading.Lock()
_installed: tuple[tuple[ParserSpec, ...], tuple[tuple[str, str], ...]] | None = None


def _spec_of(entry_point: Any) -> ParserSpec:
    obj = entry_point.load()
    dist = getattr(getattr(entry_point, "dist", None), "name", None) or "?"
    types = getattr(obj, "media_types", None)
    parse = getattr(obj, "parse", None)
    if isinstance(types, str):
        types = (types,)
    if not types or not all(isinstance(t, str) and "/" in t for t in types) or not callable(parse):
        raise TypeError("needs media_types (a list of type/subtype) and a parse function")
    priority = getattr(obj, "priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an int, got {priority!r}")
    return ParserSpec(str(getattr(obj, "name", None) or entry_point.name),
                      tuple(t.strip().lower() for t in types), parse, priority, dist)


def installed_parsers(refresh: bool = False) -> tuple[tuple[ParserSpec, ...], tuple[tuple[str, str], ...]]:
    """(the parsers: built-in, then installed ones by entry point name; the entry points that
    could not be loaded, as (name, why)). Read once per process (``refresh`` reads again): a
    parser package that fails to import is reported here and by `deltacrawl parsers`, and
    otherwise skipped, so it cannot stop a crawl."""
    global _installed
    with _lock:
        if _installed is None or refresh:
            specs: list[ParserSpec] = list(BUILT_IN)
            broken: list[tuple[str, str]] = []
            try:
                entry_points = sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
                                      key=lambda ep: ep.name)
            except Exception as exc:  # reported: a broken metadata file somewhere on the path
                entry_points, broken = [], [("(entry points)", _exc_text(exc))]
            seen = {spec.name for spec in specs}
            for ep in entry_points:
                try:
                    spec = _spec_of(ep)
                    if spec.name in seen:
                        raise ValueError(f"a parser named {spec.name!r} is already installed")
                except Exception as exc:  # reported by `deltacrawl parsers`; the others still work
                    broken.append((ep.name, _exc_text(exc)))
                    continue
                seen.add(spec.name)
                specs.append(spec)
            _installed = (tuple(specs), tuple(broken))
            _registries.clear()
        return _installed


class ParserRegistry:
    """The enabled parsers, by media type."""

    def __init__(self, parsers: Iterable[ParserSpec], disabled: Iterable[str] = ()):
        self.disabled = frozenset(disabled)
        self.parsers = tuple(p for p in parsers if p.name not in self.disabled)
        by_type: dict[str, list[ParserSpec]] = {}
        for spec in self.parsers:
            for media in spec.media_types:
                by_type.setdefault(media, []).append(spec)
        # highest priority first; among equals, a built-in one, then by name
        self._by_type = {media: sorted(specs, key=lambda s: (-s.priority, s.origin != "built-in", s.name))[0]
                         for media, specs in by_type.items()}

    def for_type(self, media_type: str | None) -> ParserSpec | None:
        return self._by_type.get((media_type or "").lower())

    def types(self) -> list[str]:
        return sorted(self._by_type)


_registries: dict[frozenset[str], ParserRegistry] = {}


def registry_for(options: ParseOptions) -> ParserRegistry:
    """The registry of the installed parsers less ``options.disabled`` (kept per process)."""
    key = frozenset(options.disabled)
    registry = _registries.get(key)
    if registry is None:
        registry = _registries[key] = ParserRegistry(installed_parsers()[0], key)
    return registry


# --------------------------------------------------------------------------------------------
# Type detection
# --------------------------------------------------------------------------------------------

def declared_media_type(content_type_header: str | None) -> str:
    """The type/subtype of a Content-Type header, lower case ("" when missing)."""
    return (content_type_header or "").split(";", 1)[0].strip().lower()


def detect_media_type(content_type_header: str | None, body_head: bytes) -> str:
    """The media type of an answer: the Content-Type header's, unless that is missing or generic
    (application/octet-stream, unknown/unknown, ...); then the bytes decide: "application/pdf" for
    the %PDF- signature in the first 1,024 bytes, "text/html" for the WHATWG HTML patterns (only
    for a missing or unknown type, as crawl.parse.page.is_parseable), else the declared type
    ("" when there was none). Never raises."""
    try:
        media = declared_media_type(content_type_header)
        if media not in _GENERIC_TYPES:
            return media
        head = bytes(body_head or b"")[:SNIFF_BYTES]
        if _PDF_SIGNATURE in head[:_PDF_SIGNATURE_WITHIN]:
            return PDF
        if media in _UNKNOWN_TYPES and sniffs_as_html(head):
            return "text/html"
        return media
    except Exception:  # recorded: the declared type stands, so the answer is stored and not parsed
        return declared_media_type(content_type_header) if isinstance(content_type_header, str) else ""


def parser_for(media_type: str, options: ParseOptions) -> ParserSpec | None:
    """The parser that reads answers of ``media_type`` under ``options`` (fetch.content_types,
    parse.disabled), or None: the answer is stored and not parsed."""
    if media_type not in options.content_types:
        return None
    return registry_for(options).for_type(media_type)


def body_limit(cfg: Mapping[str, Any], content_type_header: str | None, options: ParseOptions) -> int:
    """Bytes of an answer's body to read, by its declared type: fetch.max_pdf_bytes for a PDF,
    fetch.max_body_bytes for another type in fetch.content_types, the larger of the two for a
    missing or generic type (sniffing decides what it is), fetch.max_other_body_bytes for a type
    that is not wanted (stored with its body cut there, not parsed)."""
    cfg = Config.of(cfg)
    media = declared_media_type(content_type_header)
    wanted = options.content_types
    pdf = cfg.fetch.max_pdf_bytes if PDF in wanted else 0
    if media in _GENERIC_TYPES:
        return max(cfg.fetch.max_body_bytes, pdf)
    if media == PDF and pdf:
        return pdf
    if media in wanted:
        return cfg.fetch.max_body_bytes
    return cfg.fetch.max_other_body_bytes


_LINK_VALUE_RE = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]*)*)")
_REL_RE = re.compile(r"""(?:^|;)\s*rel\s*=\s*(?:"([^"]*)"|([^\s;"]+))""", re.I)


def link_header_canonical(link_header: str | None, url: str, rules: Any = None) -> str | None:
    """The target of the first ``rel=canonical`` in an HTTP ``Link`` header (RFC 8288 syntax,
    RFC 6596; how a PDF or any other non-HTML answer names its canonical URL), resolved
    against ``url`` and normalised; None when there is none, it is invalid or it is ``url``
    itself. Never raises."""
    try:
        if not link_header or len(link_header) > 8192:
            return None
        for match in _LINK_VALUE_RE.finditer(link_header):
            rel = _REL_RE.search(match.group(2) or "")
            if rel and "canonical" in (rel.group(1) or rel.group(2) or "").lower().split():
                target, _reason = check_url(match.group(1).strip(), url, rules)
                return target if target != url else None
        return None
    except Exception:  # recorded: no canonical hint, which is what most answers have
        return None


def parse_document(body: bytes, url: str, content_type_header: str | None, options: ParseOptions | int,
                   x_robots_tag: str | None = None) -> ParseResult:
    """Detect the type, run its parser. Never raises; a parser that raises or returns something
    else than a ParseResult gives a parse_error naming it."""
    name = "?"
    try:
        if not isinstance(options, ParseOptions):
            options = ParseOptions(int(options))
        media = detect_media_type(content_type_header, body[:SNIFF_BYTES])
        spec = parser_for(media, options)
        if spec is None:
            return _parse_error(f"no parser for {media or 'an answer without a type'}")
        name = spec.name
        result = spec.parse(body, url, content_type_header, options, x_robots_tag)
        if not isinstance(result, ParseResult):
            return _parse_error(f"parser {name} returned {type(result).__name__}, not ParseResult")
        return result
    except MemoryError:
        return _parse_error("memory limit exceeded (MemoryError)")
    except RecursionError:
        return _parse_error(f"parser {name}: recursion limit exceeded")
    except Exception as exc:  # recorded: the answer's parse_error
        return _parse_error(f"parser {name}: {_exc_text(exc)}")


def parse_documents(items: list[tuple]) -> list[ParseResult]:
    """Runs in a child: parse_document over a batch (crawl.parse.pool.BatchingParser)."""
    return [parse_document(*item) for item in items]


# --------------------------------------------------------------------------------------------
# `deltacrawl parsers`
# --------------------------------------------------------------------------------------------

def describe(cfg: Mapping[str, Any] | None = None) -> list[str]:
    """One line per installed parser (name, priority, origin, types, on/off under ``cfg``), and
    one per entry point that could not be loaded."""
    parsers, broken = installed_parsers()
    cfg = Config.of(cfg) if cfg is not None else None
    disabled = set(cfg.parse.disabled) if cfg is not None else set()
    wanted = {str(t).lower() for t in cfg.fetch.content_types} if cfg is not None else None
    lines = []
    for spec in parsers:
        state = "off (parse.disabled)" if spec.name in disabled else "on"
        types = ", ".join(t if wanted is None or t in wanted else f"{t} (not in fetch.content_types)"
                          for t in spec.media_types)
        lines.append(f"{spec.name}\tpriority {spec.priority}\t{spec.origin}\t{state}\t{types}")
    lines += [f"{name}\tBROKEN\t{why}" for name, why in broken]
    return lines

