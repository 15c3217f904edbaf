"""PDFs for the test web, built byte by byte (no writer library: nothing to install), and the
``pdfs`` hostile host's small site of them.

The builders (``make_pdf``, ``assemble``, ``stream`` and the hostile documents) are what
tests/test_pdf.py checks the PDF parser (crawl.parse.pdf) with; ``PDF_SITE`` is what the
``pdfs`` host serves (crawl.devweb.hostile), and ``PdfSite`` its link graph for an oracle
(``outlinks``/``is_disallowed``, as DevWeb has for its normal hosts), so a crawl of it is checked
against the site itself.

The ``pdfs`` host::

    /                     HTML index: links to every document below except /linked.pdf and
                          the /only-from-pdf/ pages
    /report.pdf           application/pdf, title "River Authority Report 2026", text TWIN_TEXT;
                          URI link annotations to /only-from-pdf/0.html and /linked.pdf
    /linked.pdf           a PDF only /report.pdf links to; links to /only-from-pdf/1.html
    /download             a PDF served as application/octet-stream (sniffed by its %PDF-);
                          links to /only-from-pdf/2.html
    /twin.html            HTML whose text is TWIN_TEXT: /report.pdf's twin (a duplicate pair)
    /only-from-pdf/K.html HTML pages (K = 0, 1, 2) no HTML page links to
    /picture              a 1x1 PNG, image/png: fetched, not parsed (a path without the .png
                          extension discovery drops)
    /hostile/bomb.pdf     one stream inflating to 96 MiB (over parse.pdf_max_stream_mb's 64)
    /hostile/cycle.pdf    a page tree whose kid points back at its parent
    /hostile/truncated.pdf  /report.pdf's first third
    /hostile/pages.pdf    a page tree of 200,000 page entries (over pypdf's 100,000 bound)
    /hostile/streams.pdf  four object streams of 40 MiB each: every one under the stream bound,
                          160 MiB together (over parse.pdf_max_document_mb's 128)

Every PDF ends as a recorded parse error (the five under /hostile/) or with its text fingerprinted.
"""
from __future__ import annotations

import threading
import zlib
from typing import Callable
from urllib.parse import urlsplit

MIB = 2**20


def _pdf_string(text: str) -> bytes:
    return b"(" + text.encode("latin-1").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def assemble(objects: list[bytes], root: int = 1, info: int | None = None, xref: bool = True) -> bytes:
    """A PDF file of ``objects`` (object n is objects[n-1]) with a cross-reference table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    if not xref:
        return bytes(out) + b"trailer << /Root %d 0 R >>\n%%%%EOF\n" % root
    start = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer << /Size %d /Root %d 0 R" % (len(objects) + 1, root)
    out += (b" /Info %d 0 R" % info if info else b"") + b" >>\nstartxref\n%d\n%%%%EOF\n" % start
    return bytes(out)


def stream(data: bytes, compress: bool = True) -> bytes:
    """A stream object's body holding ``data`` (Flate-compressed unless ``compress`` is False)."""
    if compress:
        data = zlib.compress(data)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def make_pdf(pages: list[tuple[list[str], list[str]]], title: str | None = None) -> bytes:
    """A PDF whose page i shows the lines pages[i][0] and has a URI link annotation for each of
    pages[i][1]; ``title`` goes into the document information dictionary."""
    # 1 catalog, 2 page tree, 3 font, 4 info, then per page: page, contents, annotations
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
                            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
                            b"<< /Title " + _pdf_string(title or "") + b" >>" if title else b"<< >>"]
    kids = []
    for lines, links in pages:
        page_no = len(objects) + 1
        kids.append(b"%d 0 R" % page_no)
        annots = []
        for i, link in enumerate(links):
            annots.append(b"<< /Type /Annot /Subtype /Link /Rect [72 %d 300 %d] /Border [0 0 0] "
                          b"/A << /S /URI /URI %s >> >>" % (100 + 20 * i, 115 + 20 * i, _pdf_string(link)))
        content = b"BT /F1 12 Tf 14 TL 72 720 Td " + b" ".join(_pdf_string(line) + b" Tj T*" for line in lines) + b" ET"
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> /Annots [%s] >>"
                       % (page_no + 1, b" ".join(b"%d 0 R" % (page_no + 2 + i) for i in range(len(annots)))))
        objects.append(stream(content))
        objects.extend(annots)
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(kids)
    return assemble(objects, info=4)


def _inflating(head: bytes, chunk: bytes, count: int) -> bytes:
    """A zlib stream that inflates to ``head`` + ``count`` x ``chunk``: the chunk is compressed
    once and its raw deflate block repeated (compressing 96 MiB would take seconds)."""
    def block(data: bytes) -> bytes:  # raw deflate, flushed: byte-aligned, no reference outside
        z = zlib.compressobj(9, zlib.DEFLATED, -15)
        return z.compress(data) + z.flush(zlib.Z_FULL_FLUSH)

    adler = zlib.adler32(head)
    for _ in range(count):
        adler = zlib.adler32(chunk, adler)
    return (b"\x78\xda" + block(head) + block(chunk) * count + b"\x03\x00"  # an empty final block
            + adler.to_bytes(4, "big"))


def bomb(inflated_mib: int) -> bytes:
    """A one-page PDF whose content stream inflates to about ``inflated_mib`` MiB."""
    data = _inflating(b"BT /F1 12 Tf 10 10 Td\n", b"(" + b"A" * (MIB - 10) + b") Tj\n", inflated_mib)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    return assemble(objects)


def many_streams(count: int, inflated_mib: int) -> bytes:
    """A PDF of ``count`` pages, each page object alone in an object stream padded to about
    ``inflated_mib`` MiB: every stream stays under a per-stream bound bigger than that, the
    document's streams together inflate to ``count`` x ``inflated_mib`` MiB. The reader inflates
    each object stream to find its page (the padding is never parsed), so nothing but the
    document's total stops it (a cross-reference stream, PDF 1.5, locates the pages)."""
    pages = [4 + count + i for i in range(count)]
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}

    def put(number: int, body: bytes) -> None:
        offsets[number] = len(out)
        out.extend(b"%d 0 obj\n" % number + body + b"\nendobj\n")

    put(1, b"<< /Type /Catalog /Pages 2 0 R >>")
    put(2, b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % p for p in pages) + b"] /Count %d >>" % count)
    put(3, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, page in enumerate(pages):
        header = b"%d 0 " % page
        body = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Resources << /Font << /F1 3 0 R >> >> >>\n"
        # (padding of blanks would be skipped byte by byte in Python, looking for a "stream" keyword)
        data = _inflating(header + body, b"x" * MIB, inflated_mib)
        put(4 + i, b"<< /Type /ObjStm /N 1 /First %d /Length %d /Filter /FlateDecode >>\nstream\n"
            % (len(header), len(data)) + data + b"\nendstream")
    xref_number = 4 + 2 * count
    offsets[xref_number] = len(out)
    entries = [b"\x00" + (0).to_bytes(4, "big") + (65535).to_bytes(2, "big")]
    for number in range(1, xref_number + 1):
        if number in pages:  # in object stream number - count, at index 0
            entries.append(b"\x02" + (number - count).to_bytes(4, "big") + (0).to_bytes(2, "big"))
        else:
            entries.append(b"\x01" + offsets[number].to_bytes(4, "big") + (0).to_bytes(2, "big"))
    table = b"".join(entries)
    out += (b"%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n"
            % (xref_number, xref_number + 1, len(table)) + table + b"\nendstream\nendobj\n")
    out += b"startxref\n%d\n%%%%EOF\n" % offsets[xref_number]
    return bytes(out)


def deep(depth: int) -> bytes:
    """A PDF whose catalog holds arrays nested ``depth`` deep."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R /Deep " + b"[" * depth + b"]" * depth + b" >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"]
    return assemble(objects)


def cycle() -> bytes:
    """A PDF whose page tree has a kid that points back at its parent."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>",
               b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>"]
    return assemble(objects)


def many_pages(count: int) -> bytes:
    """A PDF whose page tree lists the same page ``count`` times (about 6 bytes an entry)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + b"3 0 R " * count + b"] /Count %d >>" % count,
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"]
    return assemble(objects)


# The test web's 1x1 PNG comes from hostile_bodies; the rest of the site is built here.
TWIN_TEXT = "the annual report of the river authority on water quality and flood defences in the valley"
REPORT_TITLE = "River Authority Report 2026"
ONLY_FROM_PDF = 3  # /only-from-pdf/0.html .. /only-from-pdf/2.html
HOSTILE_PDFS = ("/hostile/bomb.pdf", "/hostile/cycle.pdf", "/hostile/truncated.pdf", "/hostile/pages.pdf",
                "/hostile/streams.pdf")
PDFS = ("/report.pdf", "/linked.pdf", "/download")  # the documents whose text is read
ENTRY_PATHS = ("/", "/report.pdf", "/download")  # what a crawl of the host is seeded with

# path -> the paths it links to (PDFs through their link annotations)
LINKS: dict[str, tuple[str, ...]] = {
    "/": ("/report.pdf", "/download", "/twin.html", "/picture", *HOSTILE_PDFS),
    "/report.pdf": ("/only-from-pdf/0.html", "/linked.pdf"),
    "/linked.pdf": ("/only-from-pdf/1.html",),
    "/download": ("/only-from-pdf/2.html",),
    "/twin.html": (),
    "/picture": (),
    **{p: () for p in HOSTILE_PDFS},
    **{f"/only-from-pdf/{k}.html": ("/",) for k in range(ONLY_FROM_PDF)},
}


def _html(title: str, body: str) -> bytes:
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n"
            f"</head>\n<body>\n{body}</body>\n</html>\n").encode("utf-8")


def _report() -> bytes:
    return make_pdf([([TWIN_TEXT], list(LINKS["/report.pdf"]))], title=REPORT_TITLE)


def _png() -> bytes:
    from crawl.devweb.hostile_bodies import _make_png
    return _make_png()


_HTML = "text/html; charset=utf-8"
# path -> (a function making its body, its Content-Type): each made on its first request only
_DOCUMENTS: dict[str, tuple[Callable[[], bytes], str]] = {
    "/": (lambda: _html("Documents", "<h1>Documents</h1>\n<ul>\n" + "".join(
        f'<li><a href="{p}">{p.lstrip("/")}</a></li>\n' for p in LINKS["/"]) + "</ul>\n"), _HTML),
    "/report.pdf": (_report, "application/pdf"),
    "/linked.pdf": (lambda: make_pdf([(["A document only another document links to"], list(LINKS["/linked.pdf"]))],
                                     title="Annex"), "application/pdf"),
    "/download": (lambda: make_pdf([(["Minutes of the board, downloaded as octets"], list(LINKS["/download"]))]),
                  "application/octet-stream"),
    # the twin: only TWIN_TEXT as text (no title, no navigation), so its fingerprint is the PDF's
    "/twin.html": (lambda: f"<html><body><p>{TWIN_TEXT}</p></body></html>\n".encode(), _HTML),
    "/picture": (_png, "image/png"),
    "/hostile/bomb.pdf": (lambda: bomb(96), "application/pdf"),
    "/hostile/cycle.pdf": (cycle, "application/pdf"),
    "/hostile/truncated.pdf": (lambda: _report()[: len(_report()) // 3], "application/pdf"),
    "/hostile/pages.pdf": (lambda: many_pages(200_000), "application/pdf"),
    "/hostile/streams.pdf": (lambda: many_streams(4, 40), "application/pdf"),
    # three pages no HTML page links to, with texts unlike each other's (not near duplicates)
    **{f"/only-from-pdf/{k}.html": (lambda text=text: _html(
        text.capitalize(), f"<h1>{text.capitalize()}</h1>\n<p><a href=\"/\">Documents</a></p>\n"), _HTML)
       for k, text in enumerate(("minutes of the spring meeting held by the board in march",
                                 "a map of every measuring station along the upper river",
                                 "next year's budget for dykes, pumps and sluice gates"))},
}
assert set(_DOCUMENTS) == set(LINKS)

_MADE: dict[str, bytes] = {}
_MADE_LOCK = threading.Lock()


def pdf_document(path: str) -> tuple[bytes, str] | None:
    """(body, Content-Type) of ``path`` on the ``pdfs`` host, None if it has none; each body is
    made once per process (the bomb takes ~0.1 s)."""
    got = _DOCUMENTS.get(path)
    if got is None:
        return None
    make, ctype = got
    with _MADE_LOCK:
        if path not in _MADE:
            _MADE[path] = make()
        return _MADE[path], ctype


def pdf_site() -> dict[str, tuple[bytes, str]]:
    """path -> (body, Content-Type) of every document of the ``pdfs`` host."""
    return {path: pdf_document(path) for path in _DOCUMENTS}  # type: ignore[misc]


class PdfSite:
    """The ``pdfs`` host's link graph at ``root`` (e.g. "https://pdfs.example.test"), in the shape
    tests/expected.py's oracle reads: ``outlinks(url)`` and ``is_disallowed(url)``."""

    def __init__(self, root: str):
        self.root = root.rstrip("/")
        # none of DevWeb's normal hosts (tests/politeness.py: no crawl delay of its own)
        self.host_names: list[str] = []

    def url(self, path: str) -> str:
        return self.root + path

    def seed_urls(self) -> list[str]:
        return [self.url(p) for p in ENTRY_PATHS]

    def outlinks(self, url: str) -> list[str]:
        return [self.url(p) for p in LINKS.get(urlsplit(url).path or "/", ())]

    def is_disallowed(self, url: str) -> bool:
        return False
