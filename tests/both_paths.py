"""The two ways update and generate compute what they write (in memory for a small input, by
Spark queries for any input), compared on the real crawls of the tests that use these:
``both_update_paths`` (jobs/update.py: local_sources, spark_sources) and ``both_generate_paths``
(jobs/generate.py: local_fetchlist, spark_fetchlist)."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from jobs import generate, update


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


@contextlib.contextmanager
def both_generate_paths() -> Iterator[list[str]]:
    """Every generate.run inside chooses its fetchlist both ways at the same ``now``, asserts they
    are the same rows (robots.txt bodies included) and writes the in-memory one. Yields the
    segments checked."""
    checked: list[str] = []

    def fetchlist(spark, cfg, root, segment_id, now):
        local = generate.local_fetchlist(spark, cfg, root, segment_id, now)
        assert local is not None, "the due URLs should be few enough for generate.local_fetchlist"
        by_spark = generate.spark_fetchlist(spark, cfg, root, segment_id, now)
        try:
            assert _rows(local.rows) == _rows(by_spark.rows), segment_id
        finally:
            by_spark.release()
        checked.append(segment_id)
        return local

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(generate, "fetchlist", fetchlist)
        yield checked
