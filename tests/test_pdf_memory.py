"""The guarded parser child's memory on hostile PDFs, measured: its peak resident set size
(crawl.parse.pdf.peak_rss_bytes, read in the child itself) after parsing every hostile document
stays under parse.memory_limit_mb, with the shipped bounds, and the bounds are what keep it
there: every document ends as the bound's parse error in the same child (no MemoryError, no
dead or replaced worker). Without the document bound, one of them takes the child to the limit."""
from __future__ import annotations

import asyncio
import dataclasses

from crawl.config import build_config
from crawl.devweb import pdfs
from crawl.devweb.pdfs import MIB, bomb, many_streams
from crawl.parse.page import ParseOptions
from crawl.parse.pdf import peak_rss_bytes
from crawl.parse.pool import ParserPool, _child_ping

URL = "http://127.0.0.1:8000/hostile.pdf"
# 20 object streams of 60 MiB: each under the 64 MiB stream bound, 1.2 GiB together
STREAMS = many_streams(20, 60)


def _hostile() -> dict[str, bytes]:
    docs = {path: body for path, (body, _ctype) in pdfs.pdf_site().items() if path in pdfs.HOSTILE_PDFS}
    docs["bomb(600)"] = bomb(600)
    docs["streams(20 x 60 MiB)"] = STREAMS
    return docs


async def _parse_all(options: ParseOptions, limit: int, docs: dict[str, bytes]):
    # time is not under test here: a limit far above what a loaded machine needs
    with ParserPool(workers=1, memory_limit_bytes=limit, time_limit_s=120.0) as pool:
        before = await pool.call(_child_ping)
        results = {name: await pool.parse(body, URL, "application/pdf", options) for name, body in docs.items()}
        after = await pool.call(_child_ping)
        peak = await pool.call(peak_rss_bytes)
    return before, after, results, peak


def test_hostile_pdfs_keep_the_parser_child_under_its_memory_limit():
    cfg = build_config()
    options = ParseOptions.from_config(cfg)
    limit = int(cfg["parse.memory_limit_mb"]) * MIB
    before, after, results, peak = asyncio.run(_parse_all(options, limit, _hostile()))
    for name, result in results.items():
        assert result.error is not None and result.error.startswith("parse_error: pdf: "), (name, result.error)
        assert "memory" not in result.error.lower() and "died" not in result.error, (name, result.error)
    assert "pdf_max_document_mb" in results["streams(20 x 60 MiB)"].error
    assert isinstance(before, int) and before == after  # one child parsed them all: none was replaced
    assert isinstance(peak, int) and 0 < peak < limit, (peak, limit)
    print(f"parser child peak RSS {peak / MIB:.0f} MiB of parse.memory_limit_mb {limit // MIB}")


def test_without_the_document_bound_many_streams_reach_the_memory_limit():
    """What the test above would see without parse.pdf_max_document_mb: the 1.2 GiB of streams
    run the child into its address-space limit (a MemoryError, still a parse error, but the bound
    that keeps memory down is the limit itself)."""
    cfg = build_config()
    options = dataclasses.replace(ParseOptions.from_config(cfg), pdf_max_document_bytes=2**40)
    limit = int(cfg["parse.memory_limit_mb"]) * MIB
    _before, _after, results, _peak = asyncio.run(
        _parse_all(options, limit, {"streams": STREAMS}))
    error = results["streams"].error or ""
    assert "memory" in error.lower() or "died" in error, error
