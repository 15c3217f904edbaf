"""Reading an HTTP response body safely: bounded on the wire and after decoding.

aiohttp's own decompression has no output limit, so the fetcher asks for raw bytes
(``auto_decompress=False``) and decodes the content codings itself: gzip and deflate always, br
(RFC 7932) when ``brotli`` is installed and zstd (RFC 9659) when ``zstandard`` is. Every decoder
is fed so that its output stays bounded, so a decompression bomb costs at most about the limit,
never the task's memory. ``accept_encoding`` advertises exactly the codings we can decode. gzip
and deflate are inflated with zlib-ng (the same results as zlib, in about half the CPU:
docs/decisions.md "WARC compression").
"""
from __future__ import annotations

import http

import aiohttp
from zlib_ng import zlib_ng

try:
    import brotli
except ImportError:  # optional: without it "br" is neither advertised nor decoded
    brotli = None
try:
    import zstandard
except ImportError:  # optional: without it "zstd" is neither advertised nor decoded
    zstandard = None

ERROR_TEXT_LIMIT = 300
_CHUNK = 65536
# brotli.Decompressor.process grows its output buffer in steps and stops growing once past
# ``output_buffer_limit``: asking for at most this much per call keeps each call's output
# under about 100 KB whatever the limit.
_BROTLI_STEP = 32768
# zstandard's decompressobj has no output limit, so input is fed in slices small enough that
# their output cannot pass the room left: a zstd block regenerates at most 128 KiB and takes at
# least 4 bytes (an RLE block, RFC 8878 section 3.1.1.2), i.e. at most 2**15 bytes out per byte
# in. The smallest slice lets a bomb pass the limit by at most a few hundred KB.
_ZSTD_RATIO_BITS = 15
_ZSTD_MIN_SLICE = 8
# RFC 9659 section 3: zstd content coding uses windows of at most 8 MB, and a decoder may refuse
# larger ones (which would otherwise cost up to 128 MB of window each).
_ZSTD_MAX_WINDOW = 8 << 20


def causes(exc: BaseException | None, depth: int = 10):
    """``exc``, what it wraps (aiohttp's connector errors keep the OSError as ``os_error``), and its
    cause or context, and so on, at most ``depth`` deep: where a request's failure says why."""
    seen = 0
    while exc is not None and seen < depth:
        yield exc
        os_error = getattr(exc, "os_error", None)
        if isinstance(os_error, BaseException) and os_error is not exc:
            yield os_error
        exc = exc.__cause__ or exc.__context__
        seen += 1


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, short enough for a table column."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:ERROR_TEXT_LIMIT]


def answer_error(code: int, reason: str | None, retry_after: str | None = None) -> str:
    """The error text of an answer that is not content (not 2xx, 304 or a usable redirect), for
    the URL's ``error`` column: "HTTP 503 Service Unavailable, Retry-After 120". The reason phrase
    is the server's (RFC 9110's when it sent none); Retry-After as the server wrote it."""
    phrase = (reason or "").strip()
    if not phrase:
        try:
            phrase = http.HTTPStatus(code).phrase
        except ValueError:
            phrase = ""
    text = f"HTTP {code} {phrase}".rstrip()
    if retry_after is not None and str(retry_after).strip():
        text += f", Retry-After {str(retry_after).strip()}"
    return text[:ERROR_TEXT_LIMIT]


def accept_encoding() -> str:
    """The Accept-Encoding request header: the content codings ``read_body`` can decode."""
    codings = ["gzip", "deflate"]
    if brotli is not None:
        codings.append("br")
    if zstandard is not None:
        codings.append("zstd")
    return ", ".join(codings)


class Body:
    """A response body read under a byte limit, decompressed by us (never more than the limit)."""

    def __init__(self, data: bytes, truncated: bool, encoding_error: str | None = None):
        self.data = data
        self.truncated = truncated
        self.encoding_error = encoding_error


async def read_body(resp: aiohttp.ClientResponse, limit: int) -> Body:
    """Read the body: at most ``limit`` raw bytes and at most ``limit`` decoded bytes.

    A Content-Encoding we cannot decode is passed through as received (as before we knew it).
    """
    encoding = (resp.headers.get("Content-Encoding") or "").strip().lower()
    decoder = _decoder(encoding)
    out = bytearray()
    raw = 0
    try:
        async for chunk in resp.content.iter_chunked(_CHUNK):
            raw += len(chunk)
            if decoder is None:
                out += chunk
            else:
                out += decoder.decode(chunk, limit + 1 - len(out))
            if len(out) > limit or raw > limit:
                return Body(_cut(out, limit), True)
        if decoder is not None and raw:
            out += decoder.flush()
            if not decoder.complete:
                truncated = len(out) > limit
                return Body(_cut(out, limit), truncated, f"incomplete {encoding} body")
    except _DECODE_ERRORS as exc:
        return Body(_cut(out, limit), False, f"bad {encoding} body: {exc}")
    if len(out) > limit:
        return Body(_cut(out, limit), True)
    return Body(bytes(out), False)


def _cut(out: bytearray, limit: int) -> bytes:
    """The first ``limit`` bytes, with one copy (``bytes(out[:limit])`` makes two)."""
    del out[limit:]
    return bytes(out)


# Every decoder has ``decode(data, room)``: the output of ``data``, at most about ``room`` bytes
# (once it has given ``room`` bytes the caller truncates, so the rest of ``data`` may be
# dropped); ``flush()``: what is left once all input is in; ``complete``: the stream ended
# properly.

class _ZlibDecoder:
    """gzip, several members allowed (RFC 1952 section 2.2), or deflate."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        self.inflater = None

    def decode(self, data: bytes, room: int) -> bytearray:
        out = bytearray()
        while data and len(out) < room:
            if self.inflater is None or self.inflater.eof:
                self.inflater = self._inflater(data)
            out += self.inflater.decompress(data, room - len(out))
            data = self.inflater.unconsumed_tail
            if self.inflater.eof and self.inflater.unused_data:
                data = self.inflater.unused_data  # the next gzip member
        return out

    def flush(self) -> bytes:
        return self.inflater.flush() if self.inflater is not None else b""

    @property
    def complete(self) -> bool:
        return self.inflater is not None and self.inflater.eof

    def _inflater(self, head: bytes):
        if self.encoding != "deflate":
            return zlib_ng.decompressobj(wbits=31)
        # RFC 9110 "deflate" means zlib-wrapped, but many servers send raw deflate: look at the header
        zlib_wrapped = len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        return zlib_ng.decompressobj(wbits=15 if zlib_wrapped else -15)


class _BrotliDecoder:
    """br (RFC 7932): the decompressor bounds its own output and keeps input it has not used."""

    def __init__(self):
        self.decompressor = brotli.Decompressor()

    def decode(self, data: bytes, room: int) -> bytearray:
        out = bytearray()
        d = self.decompressor
        while len(out) < room:
            step = min(room - len(out), _BROTLI_STEP)
            if not d.can_accept_more_data():  # output still pending from input already given
                piece = d.process(b"", output_buffer_limit=step)
                if not piece:
                    raise brotli.error("decoder made no progress")
            elif data:
                piece = d.process(data, output_buffer_limit=step)
                data = b""
            else:
                break
            out += piece
        return out

    def flush(self) -> bytes:
        return b""

    @property
    def complete(self) -> bool:
        return self.decompressor.is_finished()


class _ZstdDecoder:
    """zstd (RFC 8878, RFC 9659): one or more frames (skippable ones too), with or without a
    content size, fed in slices so that the output stays bounded (see ``_ZSTD_RATIO_BITS``)."""

    def __init__(self):
        self.context = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
        self.frame = None

    def decode(self, data: bytes, room: int) -> bytearray:
        out = bytearray()
        view = memoryview(data)
        pos = 0
        while pos < len(view) and len(out) < room:
            if self.frame is None or self.frame.eof:
                self.frame = self.context.decompressobj()
            piece = view[pos:pos + max(_ZSTD_MIN_SLICE, (room - len(out)) >> _ZSTD_RATIO_BITS)]
            out += self.frame.decompress(piece)
            # a frame that ended inside the slice leaves the rest for the next frame
            pos += len(piece) - (len(self.frame.unused_data) if self.frame.eof else 0)
        return out

    def flush(self) -> bytes:
        return b""

    @property
    def complete(self) -> bool:
        return self.frame is not None and self.frame.eof


_DECODE_ERRORS: tuple[type[BaseException], ...] = (zlib_ng.error,)
if brotli is not None:
    _DECODE_ERRORS += (brotli.error,)
if zstandard is not None:
    _DECODE_ERRORS += (zstandard.ZstdError,)


def _decoder(encoding: str) -> _ZlibDecoder | _BrotliDecoder | _ZstdDecoder | None:
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _ZlibDecoder(encoding)
    if encoding == "br" and brotli is not None:
        return _BrotliDecoder()
    if encoding == "zstd" and zstandard is not None:
        return _ZstdDecoder()
    return None
