"""Seed file parsing.

Format: one URL per line; blank lines and lines starting with ``#`` are ignored; anything after
the first whitespace on a line is ignored (room for per-seed metadata later). Each URL is
normalised; bad lines are collected with their line number and reason, never fatal here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from crawl.urls import InvalidUrl, normalize_url


@dataclass
class SeedParse:
    urls: list[str] = field(default_factory=list)          # normalised, unique, in file order
    rejected: list[tuple[int, str, str]] = field(default_factory=list)  # (line number, text, reason)
    duplicates: int = 0


def parse_seed_lines(lines: Iterable[str]) -> SeedParse:
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
        if url in seen:
            result.duplicates += 1
            continue
        seen.add(url)
        result.urls.append(url)
    return result


def read_seed_file(path: str) -> SeedParse:
    """Parse a local seeds file; raises OSError if it cannot be read."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_seed_lines(fh)
