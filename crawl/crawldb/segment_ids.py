"""Segment ids: the UTC second generate made the segment, then random hex
(``20261129120000-a1b2c3``), so they sort by time and concurrent generators never collide."""
from __future__ import annotations

import calendar
import secrets
import time


def new_segment_id(now: float) -> str:
    """Sortable by time, unique across concurrent generators."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def segment_time(segment_id: str) -> float:
    """When generate made the segment (epoch seconds, whole): the time its id starts with."""
    return float(calendar.timegm(time.strptime(segment_id[:14], "%Y%m%d%H%M%S")))
