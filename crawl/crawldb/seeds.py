"""Seed file parsing.

Format: one URL per line; blank lines and lines starting with ``#`` are ignored; anything after
the first whitespace on a line is ignored (room for per-seed metadata later). Each URL is
normalised; bad lines are collected with their line number and reason, never fatal here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from crawl.net.urls import InvalidUrl, normalize_url


@dataclass
class SeedParse:
    urls: list[str] = field(default_factory=list)          # normalised, unique, in file order
    rejected: list[tuple[int, str, str]] = field(default_factory=list)  # (line number, text, reason)
    duplicates: int = 0


def parse_seed_lines(lines: Iterable[str], max_url_length: int | None = None) -> SeedParse:
    """``max_url_length``: the longest normalised URL kept (discovery.max_url_length, the limit
    links have; crawl.net.urls.MAX_URL_LENGTH caps every URL in any case)."""
    result = SeedParse()
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        text = line.strip().lstrip("\ufeff")
        if not text or text.startswith("#"):
            continue
        token = text.split()[0]
        try:
            url = normalize_url(token)
        except InvalidUrl as exc:
            result.rejected.append((number, token[:200], str(exc)))
            continue
        if max_url_length is not None and len(url) > max_url_length:
            result.rejected.append((number, token[:200], f"too_long: {len(url)} characters, more than "
                                                         f"discovery.max_url_length ({max_url_length})"))
            continue
        if url in seen:
            result.duplicates += 1
            continue
        seen.add(url)
        result.urls.append(url)
    return result


class SeedFileEncodingError(ValueError):
    """The seeds file is not UTF-8 text (a UTF-16 or UTF-32 file, or not text at all): one message
    for the file, not a "bad URL" per line."""


_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"),
         (b"\xfe\xff", "UTF-16"), (b"\xff\xfe", "UTF-16"))
# Bytes text does not hold: C0 controls but TAB, LF, FF and CR, and DEL.
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\f\r") + b"\x7f"
# A file whose first bytes are this much control bytes or invalid UTF-8 is data, not text (a
# stray bad byte in a text file is far below; random, compressed or executable bytes far above).
BINARY_SHARE = 0.1


def _utf16_without_bom(head: bytes) -> bool:
    """ASCII-range text written as UTF-16 without a byte-order mark: one byte of (nearly) every
    pair is NUL, and the other (nearly) never is."""
    for zeros, chars in ((head[1::2], head[0::2]), (head[0::2], head[1::2])):
        if len(zeros) >= 2 and zeros.count(0) >= 0.9 * len(zeros) and chars.count(0) <= 0.1 * len(chars):
            return True
    return False


def check_encoding(head: bytes) -> None:
    """Refuse what is plainly not UTF-8 text from its first bytes: a UTF-16/32 byte-order mark,
    UTF-16 without one, or data that is not text at all (BINARY_SHARE of control bytes and
    invalid UTF-8). A stray bad byte only spoils its own line."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            raise SeedFileEncodingError(f"is {name} text ({name} byte-order mark found), not UTF-8: "
                                        f"save it as UTF-8")
    if _utf16_without_bom(head):
        raise SeedFileEncodingError("is UTF-16 without a byte-order mark (every other byte is NUL), not UTF-8 "
                                    "text: save it as UTF-8")
    if not head:
        return
    odd = len(head) - len(head.translate(None, _CONTROL_BYTES)) + head.decode("utf-8", "replace").count("\ufffd")
    if odd >= BINARY_SHARE * len(head):
        raise SeedFileEncodingError(f"is not a text file ({odd:,} of its first {len(head):,} bytes are control "
                                    f"bytes or invalid UTF-8): a seeds file is UTF-8 text, one URL per line")


def read_seed_file(path: str, max_url_length: int | None = None) -> SeedParse:
    """Parse a local seeds file; raises OSError if it cannot be read, SeedFileEncodingError if it
    is not UTF-8 text."""
    with open(path, "rb") as raw:
        check_encoding(raw.read(4096))
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_seed_lines(fh, max_url_length)
