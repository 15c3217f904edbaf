"""Page parsing: a page's bytes to its links, title, text fingerprints and robots directives.

Two layers, and a third in crawl.parse.pool:

  * ``decode_html`` picks the charset (BOM, HTTP header, ``<meta>`` prescan, utf-8, and a
    windows-1252 fallback for undeclared pages that are plainly not utf-8) and never raises;
  * ``parse_page`` decodes, caps element nesting at MAX_NESTING as browsers do (``cap_nesting``:
    lexbor's tree builder is quadratic in the depth), extracts links and robots directives with
    ``crawl.parse.links.extract_links``, reads ``<title>`` and computes the page's text fingerprints
    (crawl/dedup/fingerprint.py), in-process; it never raises either, but it cannot protect the process from a
    page that makes the parser hang, eat all memory or crash in native code;
  * ``crawl.parse.pool.ParserPool`` runs ``parse_page`` in child processes under memory and time
    limits, so that a hostile page cannot turn into a failed Spark task.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from typing import Mapping

from selectolax.lexbor import LexborHTMLParser

from crawl.config import Config
from crawl.dedup.fingerprint import fingerprint, visible_text
from crawl.parse.links import extract_links
from crawl.net.urls import UrlRules

_ERROR_TEXT_LIMIT = 300
_TITLE_LIMIT = 1000
_PRESCAN_BYTES = 4096


# What fetch.content_types and parse.disabled say when a caller builds ParseOptions by hand (the
# crawler itself always builds them from the config, whose defaults are in conf/defaults.toml).
_ALL_TYPES = ("text/html", "application/xhtml+xml", "application/pdf")


@dataclass(frozen=True)
class ParseOptions:
    """What a parser needs besides the page (picklable: it travels to the child with each batch).

    ``content_types`` and ``disabled`` choose the parser in the child (crawl.parse.registry), the
    ``pdf_*`` fields bound the PDF parser (crawl.parse.pdf)."""
    max_outlinks: int
    rules: UrlRules | None = None       # tracking / session parameters to strip (crawl.net.urls)
    agent: str = "deltacrawl"           # our robots product token, for <meta name=...> and X-Robots-Tag
    content_types: tuple[str, ...] = _ALL_TYPES   # media types that are parsed (fetch.content_types)
    disabled: tuple[str, ...] = ()      # parser names turned off (parse.disabled)
    pdf_max_pages: int = 100            # pages of a PDF whose text and links are read
    pdf_max_stream_bytes: int = 64 * 2**20  # decompressed bytes of one PDF stream (a bigger one: parse_error)
    pdf_max_document_bytes: int = 128 * 2**20  # decompressed bytes of all of a PDF's streams together

    @classmethod
    def from_config(cls, cfg: Config) -> "ParseOptions":
        """From a config the loader checked (crawl.config: the media types, parser names and bounds)."""
        parse = cfg.parse
        return cls(parse.max_outlinks, UrlRules.from_config(cfg), cfg.fetch.robots_agent,
                   content_types=tuple(t.strip().lower() for t in cfg.fetch.content_types),
                   disabled=tuple(parse.disabled),
                   pdf_max_pages=parse.pdf_max_pages,
                   pdf_max_stream_bytes=parse.pdf_max_stream_mb * 2**20,
                   pdf_max_document_bytes=parse.pdf_max_document_mb * 2**20)


@dataclass(frozen=True)
class ParseResult:
    outlinks: list[str]
    charset: str              # Python codec name of the encoding actually used ("" if not decoded)
    title: str | None         # whitespace-collapsed <title> text; None when absent or blank
    error: str | None         # None, or "parse_error: <why>"
    canonical: str | None = None   # <link rel=canonical>, a hint (crawl.parse.links)
    noindex: bool = False          # <meta name=robots> or X-Robots-Tag says noindex
    rejected: Mapping[str, int] = field(default_factory=dict)  # links dropped by the extractor, by reason
    text_hash: int | None = None   # crawl.dedup.fingerprint: exact-duplicate key of the normalised text
    simhash: int | None = None     # 64-bit SimHash of the text; None for a page without words
    signature: bytes | None = None # MinHash of the page's word set (near duplicates, trap signal)
    feeds: list[str] = field(default_factory=list)  # RSS/Atom feeds the page announces (crawl.parse.links)


def _exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().rstrip(":")


def _parse_error(why: str, charset: str = "") -> ParseResult:
    return ParseResult([], charset, None, f"parse_error: {why}"[:_ERROR_TEXT_LIMIT])


# --------------------------------------------------------------------------------------------
# Charset detection and decoding
# --------------------------------------------------------------------------------------------

# Labels Python does not know, mapped to one it does (WHATWG Encoding Standard spellings).
_LABEL_ALIASES = {
    "windows-31j": "cp932", "x-sjis": "cp932", "ms932": "cp932", "csshiftjis": "cp932",
    "windows-874": "cp874", "x-mac-cyrillic": "mac-cyrillic", "x-mac-ukrainian": "mac-cyrillic",
    "iso-8859-8-i": "iso8859-8", "csiso88598i": "iso8859-8", "logical": "iso8859-8", "visual": "iso8859-8",
    "x-gbk": "gbk", "ks_c_5601-1987": "cp949", "ks_c_5601-1989": "cp949", "windows-949": "cp949",
    "unicode-1-1-utf-8": "utf-8", "unicode11utf8": "utf-8", "unicode20utf8": "utf-8",
    "x-unicode20utf8": "utf-8", "x-cp1250": "cp1250", "x-cp1251": "cp1251", "x-cp1252": "cp1252",
    "x-cp1253": "cp1253", "x-cp1254": "cp1254", "x-cp1255": "cp1255", "x-cp1256": "cp1256",
    "x-cp1257": "cp1257", "x-cp1258": "cp1258", "x-euc-jp": "euc_jp", "x-x-big5": "big5hkscs",
}
# After codecs.lookup: the encoding browsers really use for that name (WHATWG: latin1 and ascii
# mean windows-1252, Shift_JIS means Windows-31J, and so on).
_SUPERSETS = {
    "ascii": "cp1252", "iso8859-1": "cp1252", "iso8859-9": "cp1254", "iso8859-11": "cp874",
    "tis-620": "cp874", "shift_jis": "cp932", "euc_kr": "cp949", "gb2312": "gbk",
    "big5": "big5hkscs", "utf-16": "utf-16-le",
}
# Only real web encodings are accepted: this keeps out Python's text transforms and
# dangerous or odd codecs (utf-7, idna, unicode_escape, rot-13, ...).
_ALLOWED = frozenset(
    ["utf-8", "utf-16-le", "utf-16-be", "cp866", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic",
     "cp874", "gbk", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949"]
    + [f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)]
    + [f"cp125{n}" for n in range(9)])

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_HEADER_CHARSET_RE = re.compile(r"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;,"']+))""", re.I)
_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_META_RE = re.compile(r"<meta[\s/][^>]*>?", re.I)
_ATTR_RE = re.compile(r"""([^\s=/>]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?""")


def _resolve_label(label: str | None) -> str | None:
    """A charset label -> an allowed Python codec name, or None if unknown/unsupported."""
    if not label:
        return None
    name = label.strip().strip("\"'").strip().lower()
    if not name or len(name) > 40:
        return None
    name = _LABEL_ALIASES.get(name, name)
    try:
        name = codecs.lookup(name).name
    except (LookupError, ValueError, TypeError):
        return None
    name = _SUPERSETS.get(name, name)
    return name if name in _ALLOWED else None


def _header_charset(content_type_header: str | None) -> str | None:
    if not content_type_header:
        return None
    m = _HEADER_CHARSET_RE.search(content_type_header)
    if not m:
        return None
    return _resolve_label(next(g for g in m.groups() if g is not None))


def _meta_charset(head: bytes) -> str | None:
    """Simplified HTML-standard prescan: the first <meta> outside comments in ``head`` that
    names a supported charset, either as ``charset=`` or as ``http-equiv=Content-Type`` with
    ``content="...; charset=..."``."""
    text = _COMMENT_RE.sub("", head.decode("latin-1"))
    for tag in _META_RE.finditer(text):
        attrs: dict[str, str] = {}
        for m in _ATTR_RE.finditer(tag.group(0)[5:]):
            name = m.group(1).lower()
            if name not in attrs:
                attrs[name] = next((g for g in m.groups()[1:] if g is not None), "")
        label = None
        if "charset" in attrs:
            label = attrs["charset"]
        elif attrs.get("http-equiv", "").strip().lower() == "content-type" and "content" in attrs:
            cm = _HEADER_CHARSET_RE.search(attrs["content"])
            label = next(g for g in cm.groups() if g is not None) if cm else None
        if label is not None and label.strip().lower() == "x-user-defined":
            return "cp1252"
        charset = _resolve_label(label)
        if charset is not None:
            # A page cannot declare UTF-16 in its own ASCII-compatible bytes: the standard says utf-8.
            return "utf-8" if charset.startswith("utf-16") else charset
    return None


def _decode_default(body: bytes) -> tuple[str, str]:
    """No usable declaration: utf-8, unless that produces many errors, then windows-1252.

    "Many" means more than one decoding error per 10 non-ASCII bytes: windows-1252 text fails on
    nearly every non-ASCII byte, while a utf-8 page with a stray bad byte, or cut off mid-character
    by the body size limit, stays utf-8.
    """
    text = body.decode("utf-8", "replace")
    bad = text.count("\ufffd") - body.count(b"\xef\xbf\xbd")
    if bad > 0:
        non_ascii = len(body) - len(body.translate(None, bytes(range(128, 256))))
        if bad * 10 > non_ascii:
            return body.decode("cp1252", "replace"), "cp1252"
    return text, "utf-8"


def decode_html(body: bytes, content_type_header: str | None) -> tuple[str, str]:
    """Charset by precedence: BOM, then HTTP header charset, then <meta charset> / <meta http-equiv=Content-Type>
    in the first 4 KiB (HTML standard prescan, simplified), then utf-8; unknown/bogus charset names fall back to
    utf-8 (and windows-1252 when utf-8 decoding has many errors); undecodable bytes replaced, never raises.
    Returns (text, charset_used). NUL bytes removed.

    A bogus name is skipped like a missing one (a bogus header charset lets <meta> decide, as in
    browsers). A declared charset is obeyed even if the bytes disagree (windows-1252 bytes under
    ``charset=utf-8`` decode as utf-8 with replacement characters); only the undeclared default
    falls back to windows-1252. ``charset_used`` is the Python codec name (e.g. "utf-8", "cp1252",
    "cp932" for Shift_JIS, "utf-16-le"), so ``body.decode(charset_used, "replace")`` reproduces it.
    """
    try:
        body = bytes(body or b"")
        for bom, charset in _BOMS:
            if body.startswith(bom):
                text, used = body[len(bom):].decode(charset, "replace"), charset
                break
        else:
            charset = _header_charset(content_type_header) or _meta_charset(body[:_PRESCAN_BYTES])
            if charset is None:
                text, used = _decode_default(body)
            else:
                text, used = body.decode(charset, "replace"), charset
        return text.replace("\x00", ""), used
    except Exception:  # a codec bug or MemoryError: last resort, then give up quietly
        try:
            return bytes(body or b"").decode("utf-8", "replace").replace("\x00", ""), "utf-8"
        except Exception:  # recorded: the empty text gives the page no fingerprint
            return "", "utf-8"


# --------------------------------------------------------------------------------------------
# Content type check and in-process parse
# --------------------------------------------------------------------------------------------

_PARSEABLE_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_UNKNOWN_TYPES = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})
# WHATWG MIME Sniffing, "identifying a resource with an unknown MIME type": HTML patterns,
# each followed by a tag-terminating byte (space or ">").
_HTML_SNIFF = (b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div",
               b"<font", b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--")
_SNIFF_WS = b" \t\n\r\x0c"


def is_parseable(content_type_header: str | None, body_head: bytes) -> bool:
    """True only for text/html and application/xhtml+xml, or (no usable content type) a body that
    starts like HTML after whitespace and a BOM (WHATWG MIME sniffing patterns). The HTML parser's
    own test; the fetcher asks crawl.parse.registry (detect_media_type, parser_for), which knows
    every type that has a parser."""
    try:
        media = (content_type_header or "").split(";", 1)[0].strip().lower()
        if media not in _UNKNOWN_TYPES:
            return media in _PARSEABLE_TYPES
        return sniffs_as_html(bytes(body_head or b"")[:1024])
    except Exception:  # recorded: not sniffed as HTML, so the page is stored and not parsed
        return False


def sniffs_as_html(head: bytes) -> bool:
    """The first bytes of a body start like HTML after a BOM and whitespace (the WHATWG MIME
    sniffing patterns for HTML)."""
    for bom, charset in _BOMS:
        if head.startswith(bom):
            head = head[len(bom):]
            if charset != "utf-8":
                head = head.decode(charset, "replace").encode("utf-8", "replace")
            break
    head = head.lstrip(_SNIFF_WS).lower()
    return any(head.startswith(p) and head[len(p):len(p) + 1] in (b" ", b">") for p in _HTML_SNIFF)


# Element nesting is capped before lexbor builds the tree, as browsers cap it (Blink's HTML parser:
# 512, kMaximumHTMLParserDOMTreeDepth). Why: for every block start tag (div, section, ul, ...)
# the tree builder looks down the stack of open elements for a <p> to close (HTML LS 13.2.6.4.7,
# "has a p element in button scope"), so N nested blocks cost N^2 steps in lexbor itself: a
# 160 KB page of 32,768 unclosed <div>s took 1.7 s to parse here (17 s on a loaded machine), the
# rest of parse_page 0.05 s. At depth 512 that page parses in a few hundredths of a second.
MAX_NESTING = 512
# Pages with fewer tags are not scanned: even nested to the last tag they parse in ~0.03 s, and
# they are most pages (the scan costs ~1 ms per 1,000 tags, a quarter of parse_page's time).
_NESTING_SCAN_MIN_TAGS = 8 * MAX_NESTING
# Tags that never deepen the stack: void elements, and those a sibling of their kind (or their
# parent's end) closes implicitly, so a page of unclosed <p>/<li>/<td> is not counted as deep.
_FLAT_TAGS = frozenset(
    "area base br col embed hr img input link meta param source track wbr keygen "
    "p li dd dt option optgroup tr td th thead tbody tfoot caption colgroup rb rp rt rtc "
    "h1 h2 h3 h4 h5 h6 html head body".split())
# Kept whatever their depth: what links, robots directives, <title> and the visible text are read
# from, and the elements whose content is hidden from page_text (removing their tags would show it).
_KEEP_TAGS = frozenset("a area base link meta title script style noscript template svg math textarea iframe "
                       "noembed noframes xmp plaintext select".split())
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)[^>]*>")


def cap_nesting(html: str, max_depth: int = MAX_NESTING, min_tags: int = _NESTING_SCAN_MIN_TAGS) -> str:
    """``html`` with the start and end tags of elements nested deeper than ``max_depth`` replaced
    by a space: their content (text, links) stays where it was, one level up. The depth is
    estimated from the tags alone (no tree is built): each start tag not in _FLAT_TAGS opens a
    level until its end tag. A page no deeper than that is returned as it is (the same object).
    A space where a tag was splits text as page_text's joining of text nodes already does. A page
    with at most ``min_tags`` "<" is not scanned."""
    if html.count("<") <= max(max_depth, min_tags):
        return html
    open_tags: dict[str, int] = {}
    dropped: dict[str, int] = {}
    depth = 0
    cuts: list[tuple[int, int]] = []
    for match in _TAG_RE.finditer(html):
        name = match.group(2).lower()
        if name in _FLAT_TAGS:
            continue
        if not match.group(1):  # a start tag
            if match.group(0).endswith("/>") and name not in _KEEP_TAGS:
                continue  # <x/>: no level (HTML ignores the slash on non-void elements; rare)
            if depth >= max_depth and name not in _KEEP_TAGS:
                dropped[name] = dropped.get(name, 0) + 1
                cuts.append(match.span())
            else:
                open_tags[name] = open_tags.get(name, 0) + 1
                depth += 1
        elif dropped.get(name):  # the end of a dropped element (the innermost of its name)
            dropped[name] -= 1
            cuts.append(match.span())
        elif open_tags.get(name):
            open_tags[name] -= 1
            depth -= 1
    if not cuts:
        return html
    parts, at = [], 0
    for start, end in cuts:
        parts.append(html[at:start])
        at = end
    parts.append(html[at:])
    return " ".join(parts)


def _title(tree: LexborHTMLParser) -> str | None:
    node = tree.css_first("title")
    if node is None:
        return None
    title = re.sub(r"[\t\n\x0c\r ]+", " ", node.text(deep=True) or "").strip(" ")
    return title[:_TITLE_LIMIT] or None


def parse_page(body: bytes, url: str, content_type_header: str | None, options: ParseOptions | int,
               x_robots_tag: str | None = None) -> ParseResult:
    """In-process parse (decode_html + crawl.parse.links.extract_links + <title> + fingerprints).
    ``options`` may be a plain int: ParseOptions(max_outlinks=options). Never raises."""
    charset = ""
    try:
        if not isinstance(options, ParseOptions):
            options = ParseOptions(int(options))
        text, charset = decode_html(body, content_type_header)
        tree = LexborHTMLParser(cap_nesting(text))  # parsed once: links and title read it, page_text strips it
        links = extract_links(text, url, options.max_outlinks, x_robots_tag, options.rules, options.agent, tree)
        title = _title(tree)
        try:
            fp = fingerprint(visible_text(text, tree, collapse_whitespace=False))  # fingerprint ignores runs of it
        except (MemoryError, RecursionError):
            raise
        except Exception as exc:  # recorded: the links stand, the page's parse_error says why it has no text
            error = f"parse_error: text extraction failed: {_exc_text(exc)}"[:_ERROR_TEXT_LIMIT]
            return ParseResult(links.outlinks, charset, title, error, canonical=links.canonical,
                               noindex=links.noindex, rejected=dict(links.rejected), feeds=links.feeds)
        return ParseResult(links.outlinks, charset, title, None, canonical=links.canonical,
                           noindex=links.noindex, rejected=dict(links.rejected), text_hash=fp.text_hash,
                           simhash=fp.simhash if fp.words else None, signature=fp.signature,
                           feeds=links.feeds)
    except MemoryError:
        return _parse_error("memory limit exceeded (MemoryError)", charset)
    except RecursionError:
        return _parse_error("recursion limit exceeded", charset)
    except Exception as exc:  # recorded: the page's parse_error
        return _parse_error(_exc_text(exc), charset)
