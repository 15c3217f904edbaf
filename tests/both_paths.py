"""The two ways update and generate compute what they write (in memory for a small input, by
Spark queries for any input), compared on the real crawls of the tests that use these:
``both_update_paths`` (jobs/update.py: local_sources, spark_sources) and ``both_generate_paths``
(jobs/generate.py: local_fetchlist, spark_fetchlist)."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from crawl.config import with_values
from jobs import generate, update


def _value(v):
    # summed link scores may differ in the last bits: Spark adds them in another order
    return float(f"{v:.12g}") if isinstance(v, float) else v


def table_rows(rows) -> list[tuple]:
    """The rows of a DataFrame (or of a list of tuples or dicts) in a comparable form: sorted,
    floats to 12 significant digits."""
    rows = rows.collect() if hasattr(rows, "collect") else rows
    return sorted((tuple(_value(v) for v in (row.values() if isinstance(row, dict) else row)) for row in rows),
                  key=repr)


@contextlib.contextmanager
def _both_paths(module, chooser: str, local_path: str, spark_path: str, frames: tuple[str, ...],
                local_variants: tuple[dict, ...] = ()) -> Iterator[list[str]]:
    """``module.chooser`` (called by the step's run) replaced: it computes ``local_path`` and
    ``spark_path`` at the same ``now`` (and ``local_path`` again with each of ``local_variants``'
    config overrides), asserts that their DataFrames ``frames`` hold the same rows, and returns
    the local one. Yields the segments checked, so a test can tell it checked some."""
    checked: list[str] = []

    def both(spark, cfg, root, segment_id, now, *read, **kw):  # read: what the step read already, for the local path
        local = getattr(module, local_path)(spark, cfg, root, segment_id, now, *read, **kw)
        assert local is not None, f"segment {segment_id}: the input should be small enough for {local_path}"
        by_spark = getattr(module, spark_path)(spark, cfg, root, segment_id, now, **kw)
        try:
            for name in frames:
                expected = table_rows(getattr(by_spark, name))
                assert table_rows(getattr(local, name)) == expected, (segment_id, name)
                for overrides in local_variants:
                    variant = getattr(module, local_path)(spark, with_values(cfg, overrides), root, segment_id, now, **kw)
                    assert variant is not None and table_rows(getattr(variant, name)) == expected, (segment_id, name, overrides)
        finally:
            by_spark.release()
        checked.append(segment_id)
        return local

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, chooser, both)
        yield checked


def both_update_paths() -> contextlib.AbstractContextManager[list[str]]:
    """Every update.run inside computes its writes both ways, asserts they are the same rows
    (crawldb updates, new URL rows, due-now hints, per-host counts) and writes the in-memory ones."""
    return _both_paths(update, "sources", "local_sources", "spark_sources",
                       ("updates", "new_rows", "hints", "host_counts"))


def both_generate_paths() -> contextlib.AbstractContextManager[list[str]]:
    """Every generate.run inside chooses its fetchlist both ways, asserts they are the same rows
    (robots.txt bodies included) and writes the in-memory one. The in-memory way is checked
    twice: from the crawldb and the hostdb (bodies included) read whole (small tables), and
    from filtered reads, the bodies joined as the rows are written (crawldb.local_read_max_mb = 0)."""
    return _both_paths(generate, "fetchlist", "local_fetchlist", "spark_fetchlist", ("rows",),
                       ({"crawldb.local_read_max_mb": 0},))
