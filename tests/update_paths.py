"""update's two ways to compute its writes (jobs/update.py: local_sources, in memory for a small
segment; spark_sources, Spark queries for any segment), compared on the real crawls of the tests
that use ``both_update_paths``."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from jobs import update


def _value(v):
    # summed link scores may differ in the last bits: Spark adds them in another order
    return float(f"{v:.12g}") if isinstance(v, float) else v


def _rows(df) -> list[tuple]:
    return sorted((tuple(_value(v) for v in row) for row in df.collect()), key=repr)


@contextlib.contextmanager
def both_update_paths() -> Iterator[list[str]]:
    """Every update.run inside computes its writes both ways at the same ``now``, asserts they
    are the same rows (crawldb updates, new URL rows, due-now hints, per-host counts) and writes
    the in-memory ones. Yields the segments checked, so a test can tell it checked some."""
    checked: list[str] = []

    def sources(spark, cfg, root, segment_id, now):
        local = update.local_sources(spark, cfg, root, segment_id, now)
        assert local is not None, f"segment {segment_id} should be small enough for update.local_sources"
        by_spark = update.spark_sources(spark, cfg, root, segment_id, now)
        try:
            for name in ("updates", "new_rows", "hints", "host_counts"):
                assert _rows(getattr(local, name)) == _rows(getattr(by_spark, name)), (segment_id, name)
        finally:
            by_spark.release()
        checked.append(segment_id)
        return local

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(update, "sources", sources)
        yield checked
