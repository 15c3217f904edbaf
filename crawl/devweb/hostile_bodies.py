"""Canned bodies of the hostile hosts (crawl.devweb.hostile), as bytes; no server here.

The drip page, the huge page's 64 KiB chunk, the gzip bomb, the 2 MiB robots.txt, the
100,000-link page and the messy pages (malformed HTML, cp1252 bytes labelled utf-8, Shift_JIS
named only by a <meta>, a BOM, NUL bytes, a PNG, a PDF, XHTML). The big ones are built once per
process, lazily and off the event loop (``_cached`` / ``_cached_async``).
"""

from __future__ import annotations

import asyncio
import struct
import threading
import zlib
from typing import Callable

_DRIP_BYTES = 600  # 60 s at one byte per 100 ms
_HUGE_BYTES = 50 * 1024 * 1024
_HUGE_CHUNK = 64 * 1024
_BOMB_BYTES = 100 * 1024 * 1024
_ROBOTS_HUGE_BYTES = 2 * 1024 * 1024
_ROBOTS_TAIL_AT = 600 * 1024
_MANY_LINKS = 100_000


_CACHE: dict[str, bytes] = {}
_CACHE_LOCK = threading.Lock()


def _cached(key: str, make: Callable[[], bytes]) -> bytes:
    with _CACHE_LOCK:
        got = _CACHE.get(key)
        if got is None:
            got = _CACHE[key] = make()
        return got


async def _cached_async(key: str, make: Callable[[], bytes]) -> bytes:
    """_cached(), building the value in a worker thread so the event loop keeps serving."""
    got = _CACHE.get(key)
    if got is not None:
        return got
    return await asyncio.get_running_loop().run_in_executor(None, _cached, key, make)


def _make_drip_body() -> bytes:
    head = b'<!DOCTYPE html>\n<html><head><title>Slow page</title></head><body>\n<p><a href="/">Home</a></p>\n<p>'
    tail = b"</p>\n</body></html>\n"
    return head + b"." * (_DRIP_BYTES - len(head) - len(tail)) + tail


_DRIP_BODY = _make_drip_body()


def _huge_chunk() -> bytes:
    def make() -> bytes:
        line = b"<p>huge page filler text: spark delta crawl frontier batch fetch parse</p>\n"
        head = b"<!DOCTYPE html>\n<html><head><title>Huge page</title></head><body>\n"
        body = head + line * (_HUGE_CHUNK // len(line) + 1)
        return body[:_HUGE_CHUNK]
    return _cached("huge_chunk", make)


def _make_gzip_bomb() -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
    head = b"<!DOCTYPE html>\n<html><head><title>Bomb</title></head><body>\n"
    out = [comp.compress(head)]
    block = b" " * (1 << 20)
    for _ in range(_BOMB_BYTES // len(block)):
        out.append(comp.compress(block))
    out.append(comp.flush())
    return b"".join(out)


def _make_huge_robots() -> bytes:
    """2 MiB: Disallow: /private/ first; Disallow: /p/ only from 600 KiB on (at 600 KiB, 1 MiB, the end)."""
    out = bytearray(b"User-agent: *\nDisallow: /private/\n")
    n = 0

    def pad_to(limit: int) -> None:  # comment lines up to exactly ``limit`` bytes
        nonlocal n
        while len(out) < limit:
            line = b"# filler %07d: this robots.txt is far larger than 500 KiB\n" % n
            n += 1
            room = limit - len(out)
            # never a blank line (legacy parsers end a group there): the last line is >= "#\n"
            out.extend(line if len(line) + 1 < room else b"#" * (room - 1) + b"\n")

    rule = b"Disallow: /p/\n"
    for at in (_ROBOTS_TAIL_AT, 1024 * 1024, _ROBOTS_HUGE_BYTES - len(rule)):
        pad_to(at)
        out.extend(rule)
    assert len(out) == _ROBOTS_HUGE_BYTES
    return bytes(out)


def _make_many_links() -> bytes:
    head = b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>100,000 links</title></head><body>\n'
    links = b"".join(b'<a href="/l/%d.html">link %d</a>\n' % (i, i) for i in range(_MANY_LINKS))
    return head + links + b"</body></html>\n"


def _make_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


_PDF = (b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
        b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >> endobj\n"
        b"trailer << /Root 1 0 R >>\n%%EOF\n")

_MALFORMED = (
    b"<html><head><title>Messy <b>page</title>\n<body><p>Unclosed paragraph <div><span>nested "
    b"<a href=\"/l/1.html\">one\n<a href='/l/2.html'>two</a <a href=/l/3.html>three</a>\n"
    b"<<<>>> &&&; &nbsp &#xZZZZ; &#99999999; </p></p></div></table></td></tr>\n"
    b"<a href=\"javascript:alert(1)\">js</a> <a href=\"mailto:nobody@localhost\">mail</a> "
    b"<a href=\"\">empty</a> <a href=\"   /l/4.html  \">spaced</a> <a href=\"http://[::1\">broken</a>\n"
    b"<a href=\"/l/5.html\" href=\"/l/6.html\">double href</a> <a>no href</a> <A HREF=\"/L/7.HTML\">caps</A>\n"
    b"<script>document.write(\"<a href='/l/8.html'>\");</script> <style>a{}</style>\n"
    b"\xff\xfe garbage bytes \x80\x81 <![CDATA[ x ]]> <?php echo 1; ?>\n"
    b"<!-- unterminated comment <a href=\"/l/9.html\">hidden</a>\n"
)

_WRONG_CHARSET = (
    "<!DOCTYPE html>\n<html><head><title>Caf\u00e9 \u201cquotes\u201d</title></head><body>\n"
    "<p>Na\u00efve caf\u00e9 \u2013 \u201csmart quotes\u201d \u2026 \u20ac5</p>\n"
    "<a href=\"/l/10.html\">next</a>\n</body></html>\n"
).encode("cp1252")

_SJIS = (
    "<!DOCTYPE html>\n<html><head><meta charset=\"shift_jis\"><title>\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8</title>"
    "</head><body>\n<p>\u3053\u3093\u306b\u3061\u306f\u4e16\u754c</p>\n"
    "<a href=\"/l/11.html\">\u6b21\u3078</a>\n</body></html>\n"
).encode("shift_jis")

_BOM = b"\xef\xbb\xbf" + (
    "<!DOCTYPE html>\n<html><head><title>BOM \u00fcber</title></head><body>\n"
    "<p>Starts with a UTF-8 byte order mark: \u00fcber \u2713</p>\n<a href=\"/l/12.html\">next</a>\n</body></html>\n"
).encode("utf-8")

_NUL = (b"<!DOCTYPE html>\n<html><head><title>NUL\x00bytes</title></head><body>\x00\x00\n"
        b"<p>before\x00after</p>\n<a href=\"/l/13.html\">after a nul</a>\x00\n</body></html>\n")

_XHTML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">\n'
    b"<head><title>XHTML page</title></head>\n<body><p>Served as application/xhtml+xml.</p>\n"
    b'<a href="/l/14.html">next</a><br/></body>\n</html>\n'
)
