"""Per-host caps as Spark Columns: the value of a ``fetch.host_overrides`` key for the row's host
(first matching entry that sets it), or the configured default. generate caps a host's URLs per
cycle with per_host_cap; update's discovery caps a host's total with discovery.host_total_cap.

The same rule for one host in Python is crawl.fetch.politeness.override_value (the driver-side
paths use it); tests/test_update_plan.py holds the two equal.
"""
from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F


def host_name_col() -> Column:
    """The host without its port, lower-case (what fetch.host_overrides patterns match)."""
    return F.lower(F.regexp_replace(F.col("host"), r":[0-9]+$", ""))


def override_cap(cfg: Mapping[str, Any], key: str, default: int) -> Column:
    """``default``, or ``key`` of the first fetch.host_overrides entry matching the row's host that sets it."""
    name = host_name_col()
    cap = F.lit(int(default))
    # CASE WHEN is first-match-wins, like crawl.fetch.politeness.host_override: build it back to front
    for entry in reversed(list(cfg["fetch.host_overrides"])):
        if key not in entry:
            continue
        pattern = entry["pattern"]
        if pattern.startswith("*."):
            domain = pattern[2:]
            matches = (name == domain) | name.endswith("." + domain)
        else:
            matches = name == pattern
        cap = F.when(matches, F.lit(int(entry[key]))).otherwise(cap)
    return cap


def per_host_cap(cfg: Mapping[str, Any]) -> Column:
    """generate.max_urls_per_host, or the first matching override's max_urls_per_cycle."""
    return override_cap(cfg, "max_urls_per_cycle", int(cfg["generate.max_urls_per_host"]))
