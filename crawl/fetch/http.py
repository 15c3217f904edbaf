"""Reading an HTTP response body safely: bounded on the wire and after decoding.

aiohttp's own decompression has no output limit, so the fetcher asks for raw bytes
(``auto_decompress=False``) and decodes gzip/deflate here: a decompression bomb costs at most
the limit, never the task's memory. It inflates with zlib-ng (the same results as zlib, in about
half the CPU: BENCHMARKS.md, "Cost per page").
"""
from __future__ import annotations

import aiohttp
from zlib_ng import zlib_ng

ERROR_TEXT_LIMIT = 300
_CHUNK = 65536


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, short enough for a table column."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:ERROR_TEXT_LIMIT]


class Body:
    """A response body read under a byte limit, decompressed by us (never more than the limit)."""

    def __init__(self, data: bytes, truncated: bool, encoding_error: str | None = None):
        self.data = data
        self.truncated = truncated
        self.encoding_error = encoding_error


async def read_body(resp: aiohttp.ClientResponse, limit: int) -> Body:
    """Read the body: at most ``limit`` raw bytes and at most ``limit`` decoded bytes."""
    encoding = (resp.headers.get("Content-Encoding") or "").strip().lower()
    compressed = encoding in ("gzip", "x-gzip", "deflate")
    decompressor = None
    out = bytearray()
    raw = 0
    try:
        async for chunk in resp.content.iter_chunked(_CHUNK):
            raw += len(chunk)
            if not compressed:
                out += chunk
            else:
                data = chunk
                if decompressor is None:
                    decompressor = _decompressor(encoding, data)
                while data and len(out) <= limit:
                    out += decompressor.decompress(data, limit + 1 - len(out))
                    data = decompressor.unconsumed_tail
                    if decompressor.eof and decompressor.unused_data:
                        # gzip allows several members back to back (RFC 1952 section 2.2)
                        data = decompressor.unused_data
                        decompressor = _decompressor(encoding, data)
            if len(out) > limit or raw > limit:
                return Body(bytes(out[:limit]), True)
        if decompressor is not None:
            out += decompressor.flush()
            if not decompressor.eof:
                return Body(bytes(out[:limit]), len(out) > limit, f"incomplete {encoding} body")
    except zlib_ng.error as exc:
        return Body(bytes(out[:limit]), False, f"bad {encoding} body: {exc}")
    if len(out) > limit:
        return Body(bytes(out[:limit]), True)
    return Body(bytes(out), False)


def _decompressor(encoding: str, head: bytes):
    if encoding != "deflate":
        return zlib_ng.decompressobj(wbits=31)
    # RFC 9110 "deflate" means zlib-wrapped, but many servers send raw deflate: look at the header
    zlib_wrapped = len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
    return zlib_ng.decompressobj(wbits=15 if zlib_wrapped else -15)
