"""Per-host caps as Spark Columns: the value of a ``fetch.host_overrides`` key for the row's host
(first matching entry that sets it), or the configured default. generate caps a host's URLs per
cycle with per_host_cap; update's discovery caps a host's total with discovery.host_total_cap.

The same rule for one host in Python is crawl.fetch.politeness.override_value (the driver-side
paths use it); tests/test_rule_ops.py holds the two equal.
"""
from __future__ import annotations


from pyspark.sql import Column
from pyspark.sql import functions as F

from crawl.config import Config
from crawl.fetch.politeness import override_rule
from jobs.engine.column_ops import COLUMN_OPS


def host_name_col() -> Column:
    """The host without its port, lower-case (what fetch.host_overrides patterns match)."""
    return F.lower(F.regexp_replace(F.col("host"), r":[0-9]+$", ""))


def override_cap(cfg: Config, key: str, default: int) -> Column:
    """``default``, or ``key`` of the first fetch.host_overrides entry matching the row's host that
    sets it (crawl.fetch.politeness.override_rule, as a Column)."""
    return override_rule(cfg.fetch.host_overrides, key, default, host_name_col(), COLUMN_OPS)


def per_host_cap(cfg: Config) -> Column:
    """generate.max_urls_per_host, or the first matching override's max_urls_per_cycle."""
    return override_cap(cfg, "max_urls_per_cycle", cfg.generate.max_urls_per_host)
