"""PDF documents: their text, title and links, through pypdf (pure Python), with bounds.

``parse_pdf`` has parse_page's signature and result (crawl.parse.registry), so a PDF gets the
same text fingerprints (text_hash, simhash, signature) and its links go through the same
normalisation and filters as a page's. It reads:

  * the text of the first ``ParseOptions.pdf_max_pages`` pages (pypdf's extract_text);
  * the title: the document information dictionary's /Title, else the first line of text;
  * the links: the URI actions of the pages' link annotations (``/Annots``, ``/Subtype /Link``,
    ``/A << /S /URI /URI (...) >>``), resolved against the document's URL, at most
    ``max_outlinks`` of them, in page order;
  * robots directives from the X-Robots-Tag header (a PDF has no <meta>).

Bounds. pypdf's own limits are set per call (pypdf.apply_configuration): a stream may decompress
to at most ``pdf_max_stream_bytes`` (every filter: Flate, LZW, run length, Brotli, JBIG2) and
pypdf's parse-work budgets stay on; a page tree of more than 100,000 entries or deeper than 100
levels is refused, a cycle in it is detected; the external jbig2dec program is never called.
pypdf has no bound on a whole document, so ``_counted`` adds one: every stream it decodes is
counted against ``pdf_max_document_bytes`` (per call, in a context variable), and the decode that
takes the total past it raises, so a document of many streams each under the stream bound (each
kept decoded by pypdf once read) holds at most that much plus one stream. The
guarded child (crawl.parse.pool) adds the wall-clock and memory limits. Anything pypdf raises
(a bomb, a truncated file, nesting past Python's recursion limit, garbage) ends as the result's
``parse_error``; the links and text read before it are kept, but no fingerprint is made of a
partial text.
"""
from __future__ import annotations

import contextvars
import io
import logging
import re

import pypdf.filters
from pypdf import PdfReader, apply_configuration
from pypdf.errors import LimitReachedError

from crawl.dedup.fingerprint import fingerprint
from crawl.net.urls import check_url
from crawl.parse.links import _header_robots
from crawl.parse.page import _ERROR_TEXT_LIMIT, _TITLE_LIMIT, ParseOptions, ParseResult, _exc_text, _parse_error

# pypdf logs a warning for every repair it makes in non-strict mode: noise from other people's files.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# Text kept per document (characters): beyond the fingerprint's own cut (SIMHASH_MAX_CHARS).
MAX_TEXT_CHARS = 2_000_000
# Annotations looked at per page (a page of a million annotations is not a document).
MAX_ANNOTATIONS_PER_PAGE = 10_000
_WS_RE = re.compile(r"\s+")


def _configuration(options: ParseOptions) -> dict:
    limit = int(options.pdf_max_stream_bytes)
    return dict(zlib_maximum_output_length=limit, lzw_maximum_output_length=limit,
                run_length_maximum_output_length=limit, brotli_maximum_output_length=limit,
                jbig2_maximum_output_length=limit, array_based_stream_maximum_output_length=limit,
                image_maximum_buffer_size=limit, stream_decoding_work_maximum_length=4 * limit,
                page_tree_maximum_entries=100_000, page_tree_maximum_depth=100,
                page_tree_maximum_page_entries=100_000, jbig2dec_binary=None)


class _Budget:
    """Decompressed bytes one document may still take (``pdf_max_document_bytes``)."""

    def __init__(self, limit: int):
        self.limit, self.used = int(limit), 0


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("deltacrawl_pdf_budget", default=None)


def _counted(decode):
    """pypdf's stream decoder (every stream's get_data goes through it: contents, object streams,
    fonts, images), counting its output against the current document's budget."""
    def decode_stream_data(stream):
        data = decode(stream)
        budget = _BUDGET.get()
        if budget is not None:
            budget.used += len(data)
            if budget.used > budget.limit:
                raise LimitReachedError(f"the document's streams decompress to more than {budget.limit} bytes "
                                        f"(parse.pdf_max_document_mb)")
        return data
    decode_stream_data.counts_document_bytes = True
    return decode_stream_data


# pypdf looks the function up in its module at each call (StreamObject.get_data), so this wraps it
# for every reader in the process; outside parse_pdf (no budget set) it only decodes.
if not getattr(pypdf.filters.decode_stream_data, "counts_document_bytes", False):
    pypdf.filters.decode_stream_data = _counted(pypdf.filters.decode_stream_data)


def _text_of(value) -> str | None:
    """A PDF string (text or bytes) as str, or None."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def _uris(page) -> list[str]:
    """The URIs of a page's link annotations, in order."""
    annots = page.get("/Annots")
    if annots is None:
        return []
    annots = annots.get_object()
    if not isinstance(annots, list):
        return []
    uris = []
    for annot in annots[:MAX_ANNOTATIONS_PER_PAGE]:
        annot = annot.get_object()
        if not hasattr(annot, "get") or annot.get("/Subtype") != "/Link":
            continue
        action = annot.get("/A")
        action = action.get_object() if action is not None else None
        if not hasattr(action, "get") or action.get("/S") != "/URI":
            continue
        uri = _text_of(action.get("/URI"))
        if uri is not None:
            uris.append(uri.strip())
    return uris


def _resolve(hrefs: list[str], url: str, options: ParseOptions, rejected: dict[str, int]) -> list[str]:
    """Normalised, deduplicated, in order, at most max_outlinks (the page itself left out);
    rejections counted by reason as the HTML extractor counts them."""
    seen: dict[str, None] = {}
    for i, href in enumerate(hrefs):
        if len(seen) >= options.max_outlinks:
            rejected["over_cap"] = rejected.get("over_cap", 0) + len(hrefs) - i
            break
        target, reason = check_url(href, url, options.rules)
        if target is None:
            rejected[reason or "invalid"] = rejected.get(reason or "invalid", 0) + 1
        elif target != url:
            seen.setdefault(target, None)
    return list(seen)


def _with_startxref(body: bytes) -> bytes:
    """``body``, with a ``startxref`` pointing nowhere appended when its end has none (a file cut
    short, or written by hand without a cross-reference table): pypdf then rebuilds the table by
    scanning for objects, as it does for a wrong offset, instead of refusing the file."""
    if b"startxref" in body[-2048:]:
        return body
    return body + b"\nstartxref\n0\n%%EOF\n"


def _title(reader, text: str) -> str | None:
    try:
        meta = reader.metadata
        title = _text_of(meta.get("/Title")) if meta is not None else None
    except Exception:  # recorded: a broken info dictionary only loses its title; the first line stands in
        title = None
    title = _WS_RE.sub(" ", title or "").strip()
    if not title:
        first = next((line for line in text.splitlines() if line.strip()), "")
        title = _WS_RE.sub(" ", first).strip()
    return title[:_TITLE_LIMIT] or None


def parse_pdf(body: bytes, url: str, content_type_header: str | None, options: ParseOptions | int,
              x_robots_tag: str | None = None) -> ParseResult:
    """Text, title, links and fingerprints of a PDF (see the module docstring). Never raises."""
    try:
        if not isinstance(options, ParseOptions):
            options = ParseOptions(int(options))
        noindex, nofollow = (_header_robots(x_robots_tag, options.agent.lower())
                             if x_robots_tag else (False, False))
        texts: list[str] = []
        hrefs: list[str] = []
        error = None
        reader = None
        budget = _BUDGET.set(_Budget(options.pdf_max_document_bytes))
        try:
            with apply_configuration(**_configuration(options)):
                try:
                    reader = PdfReader(io.BytesIO(_with_startxref(bytes(body))), strict=False)
                    if reader.is_encrypted and not reader.decrypt(""):
                        raise ValueError("encrypted (a password is needed to read it)")
                    chars = 0
                    for number, page in enumerate(reader.pages):
                        if number >= options.pdf_max_pages or chars >= MAX_TEXT_CHARS:
                            break
                        hrefs += _uris(page)
                        text = page.extract_text() or ""
                        texts.append(text)
                        chars += len(text)
                except (MemoryError, RecursionError) as exc:
                    error = "recursion limit exceeded" if isinstance(exc, RecursionError) else None
                    if error is None:
                        raise
                except Exception as exc:  # recorded: the document's parse_error; what was read stands
                    error = _exc_text(exc)
                text = "\n".join(texts)[:MAX_TEXT_CHARS]
                title = _title(reader, text) if reader is not None else None
        finally:
            _BUDGET.reset(budget)
        rejected: dict[str, int] = {}
        if nofollow:
            outlinks = []
            if hrefs:
                rejected["nofollow"] = len(hrefs)
        else:
            outlinks = _resolve(hrefs, url, options, rejected)
        if error is not None:
            return ParseResult(outlinks, "", title, f"parse_error: pdf: {error}"[:_ERROR_TEXT_LIMIT],
                               noindex=noindex, rejected=rejected)
        fp = fingerprint(text)
        return ParseResult(outlinks, "", title, None, noindex=noindex, rejected=rejected,
                           text_hash=fp.text_hash, simhash=fp.simhash if fp.words else None,
                           signature=fp.signature)
    except MemoryError:
        return _parse_error("memory limit exceeded (MemoryError)")
    except RecursionError:
        return _parse_error("recursion limit exceeded")
    except Exception as exc:  # recorded: the document's parse_error
        return _parse_error(f"pdf: {_exc_text(exc)}")


def peak_rss_bytes() -> int:
    """This process's peak resident set size in bytes (Linux's VmHWM, else getrusage's
    ru_maxrss): run in the guarded parser child (``ParserPool.call(peak_rss_bytes)``) it is the
    most memory the child has held since it started, what tests/test_pdf_memory.py compares with
    ``parse.memory_limit_mb``."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # no /proc: getrusage below
        pass
    import resource
    import sys
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
