"""Hostile parse targets for ParserPool(target=...) and BatchingParser: test hooks, never used by
the crawler.

They misbehave on command (hang, allocate, crash) so the tests can show that ParserPool turns each
into a parse_error and recovers. A ParserPool child looks its target up by reference (pickle), so
they must be module-level functions of an importable module: this one, next to the test web's
other hostile things. ``_hostile_page`` and ``_hostile_batch`` hand any other body to the real
``parse_page``.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

from crawl.parse.page import ParseResult, parse_page


def _hostile_sleep(body: bytes, url: str, content_type_header: str | None, max_outlinks: Any = 0,
        x_robots_tag: str | None = None) -> ParseResult:
    """TEST HOOK: hang for float(body) seconds (default an hour)."""
    time.sleep(float(body or b"3600"))
    return ParseResult([], "utf-8", f"slept {float(body or b'3600'):g}", None)


def _hostile_allocate(body: bytes, url: str, content_type_header: str | None, max_outlinks: Any = 0,
        x_robots_tag: str | None = None) -> ParseResult:
    """TEST HOOK: allocate int(body) bytes (default 16 GiB) in one block. bytes(n) is calloc'd
    and never touched, so even without a limit this costs address space, not RAM."""
    block = bytes(int(body or str(16 * 2**30)))
    return ParseResult([], "utf-8", f"allocated {len(block)}", None)


def _hostile_crash(body: bytes, url: str, content_type_header: str | None, max_outlinks: Any = 0,
        x_robots_tag: str | None = None) -> ParseResult:
    """TEST HOOK: die like a native crash: SIGSEGV, or os._exit(70) when body == b"exit"."""
    if body == b"exit":
        os._exit(70)
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)
    return ParseResult([], "utf-8", None, None)


def _hostile_page(body: bytes, url: str, content_type_header: str | None, max_outlinks: Any = 0,
        x_robots_tag: str | None = None) -> ParseResult:
    """TEST HOOK: one target for both hostile and normal pages, so one pool can be shown to recover.
    b"sleep <s>", b"alloc <bytes>", b"segv", b"exit" misbehave, b"pid" reports the worker's pid
    in ``title``; any other body goes to parse_page."""
    cmd, _, arg = body.partition(b" ")
    if cmd == b"sleep":
        return _hostile_sleep(arg, url, content_type_header, max_outlinks)
    if cmd == b"alloc":
        return _hostile_allocate(arg, url, content_type_header, max_outlinks)
    if cmd in (b"segv", b"exit"):
        return _hostile_crash(cmd, url, content_type_header, max_outlinks)
    if cmd == b"pid":
        return ParseResult([], "utf-8", str(os.getpid()), None)
    return parse_page(body, url, content_type_header, max_outlinks, x_robots_tag)


def _hostile_batch(items: list[tuple]) -> list[ParseResult]:
    """TEST HOOK: parse_batch with the hostile commands of _hostile_page."""
    return [_hostile_page(*item) for item in items]
