"""Reading bodies (crawl/fetch/http.py) as a real aiohttp server on loopback sends them: the content
codings br and zstd beside gzip, bombs cut at the limit, damaged and cut streams, and the
Accept-Encoding the fetcher sends."""
from __future__ import annotations

import asyncio
import threading
import tracemalloc

import aiohttp
import pytest
from aiohttp import web

from crawl.fetch import http
from crawl.fetch.fetcher import fetch_partition
from crawl.fetch.http import accept_encoding, read_body
from tests.test_fetcher import cfg, rows_for

brotli = pytest.importorskip("brotli")
zstandard = pytest.importorskip("zstandard")

MIB = 1 << 20
PAGE = b"<html><body>" + b"".join(b"<p>paragraph %d of a page</p>\n" % i for i in range(3000)) + b"</body></html>"
SKIPPABLE = (0x184D2A50).to_bytes(4, "little") + (4).to_bytes(4, "little") + b"skip"  # RFC 8878 3.1.2


def _zstd_unsized(data: bytes, **params) -> bytes:
    """A zstd frame without a content size, as a streaming server writes it."""
    compressor = zstandard.ZstdCompressor(**params).compressobj()
    return compressor.compress(data) + compressor.flush()


def _brotli_bomb(size: int) -> bytes:
    compressor, zeros = brotli.Compressor(quality=1), bytes(MIB)
    return b"".join(compressor.process(zeros) for _ in range(size // MIB)) + compressor.finish()


# (Content-Encoding, body on the wire) per path
BODIES = {
    "/page/br": ("br", brotli.compress(PAGE)),
    # three frames: one with a content size, a skippable one, one without a content size
    "/page/zstd": ("zstd", zstandard.ZstdCompressor().compress(PAGE[:5000]) + SKIPPABLE
                   + _zstd_unsized(PAGE[5000:])),
    "/page/gzip": ("gzip", None),  # filled below: the gzip path is unchanged, here for comparison
    "/bomb/br": ("br", _brotli_bomb(256 * MIB)),  # 256 MiB of zeros in ~50 KB
    "/bomb/zstd": ("zstd", zstandard.ZstdCompressor().compress(bytes(16 * MIB)) * 16),  # 256 MiB in ~9 KB
    "/bad/br": ("br", b"this is not compressed at all " * 20),
    "/bad/zstd": ("zstd", b"this is not compressed at all " * 20),
    "/cut/br": ("br", brotli.compress(PAGE)[:200]),
    "/cut/zstd": ("zstd", _zstd_unsized(PAGE)[:200]),
    # a 16 MiB window: RFC 9659 section 3 allows 8 MB, so it is refused rather than allocated
    "/wide/zstd": ("zstd", _zstd_unsized(PAGE * 300, compression_params=zstandard.ZstdCompressionParameters(
        window_log=24))),
}


class CodingWeb:
    """Serves BODIES on one loopback address in a thread of its own and records the
    Accept-Encoding of every request."""

    def __init__(self, address: str):
        self.address, self.port = address, 0
        self.accept_encodings: list[tuple[str, str | None]] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _handle(self, request: web.Request) -> web.Response:
        self.accept_encodings.append((request.path, request.headers.get("Accept-Encoding")))
        if request.path not in BODIES:
            return web.Response(status=404, text="not found")
        coding, body = BODIES[request.path]
        return web.Response(body=body, headers={"Content-Type": "text/plain", "Content-Encoding": coding})

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.address, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def url(self, path: str) -> str:
        return f"http://{self.address}:{self.port}{path}"

    def __enter__(self) -> "CodingWeb":
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module")
def coding_web():
    import gzip
    BODIES["/page/gzip"] = ("gzip", gzip.compress(PAGE))
    with CodingWeb("127.0.0.77") as server:  # inside the fetcher's allowed test networks
        yield server


def get_body(url: str, limit: int) -> http.Body:
    async def go():
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            async with session.get(url) as resp:
                return await read_body(resp, limit)
    return asyncio.run(go())


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_a_page_is_decoded(coding_web, coding):
    body = get_body(coding_web.url(f"/page/{coding}"), MIB)
    assert (body.data, body.truncated, body.encoding_error) == (PAGE, False, None)


@pytest.mark.parametrize("coding", ["br", "zstd"])
def test_a_bomb_is_cut_at_the_limit_and_costs_about_the_limit(coding_web, coding):
    tracemalloc.start()
    try:
        body = get_body(coding_web.url(f"/bomb/{coding}"), MIB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (len(body.data), body.truncated, body.encoding_error) == (MIB, True, None)
    assert body.data == bytes(MIB)
    # what was decoded, a copy of it to return and one decoder step: never the 256 MiB
    assert peak < 4 * MIB, peak


@pytest.mark.parametrize("coding", ["br", "zstd"])
def test_damaged_and_cut_streams_are_errors(coding_web, coding):
    bad = get_body(coding_web.url(f"/bad/{coding}"), MIB)
    assert bad.encoding_error.startswith(f"bad {coding} body: ") and not bad.truncated
    cut = get_body(coding_web.url(f"/cut/{coding}"), MIB)
    assert cut.encoding_error == f"incomplete {coding} body" and not cut.truncated
    assert PAGE.startswith(cut.data)


def test_a_zstd_window_over_8_mb_is_refused(coding_web):
    body = get_body(coding_web.url("/wide/zstd"), 64 * MIB)
    assert body.encoding_error.startswith("bad zstd body: ") and body.data == b""


def test_a_coding_without_its_package_is_neither_advertised_nor_decoded(coding_web, monkeypatch):
    assert accept_encoding() == "gzip, deflate, br, zstd"
    monkeypatch.setattr(http, "brotli", None)
    assert accept_encoding() == "gzip, deflate, zstd"
    body = get_body(coding_web.url("/page/br"), MIB)
    assert (body.data, body.encoding_error) == (BODIES["/page/br"][1], None)  # passed through as sent
    monkeypatch.setattr(http, "zstandard", None)
    assert accept_encoding() == "gzip, deflate"


@pytest.mark.parametrize("coding", ["br", "zstd"])
def test_the_fetcher_advertises_and_decodes_br_and_zstd(coding_web, coding):
    coding_web.accept_encodings.clear()
    rows = fetch_partition(rows_for([coding_web.url(f"/page/{coding}")]), cfg(fetch__delay_s=0.0))
    row = next(r for r in rows if r["kind"] == "url")
    assert (row["content_length"], row["truncated"], row["error"]) == (len(PAGE), False, None)
    seen = dict(coding_web.accept_encodings)
    assert seen["/robots.txt"] == seen[f"/page/{coding}"] == "gzip, deflate, br, zstd"
