"""Snapshots built ahead: while fetch waits on hosts, the driver builds the table snapshots dedup
and update read next (jobs/engine/tables.snapshots_built_meanwhile, used by jobs/crawl_cycles.py)."""
from __future__ import annotations

import threading
import time

import pytest

from pyspark.sql import Row

from jobs.engine.tables import build_snapshots, snapshots_built_meanwhile


def _jobs_of(spark, call) -> int:
    """How many Spark jobs ``call`` ran."""
    sc = spark.sparkContext
    group = f"test-snapshots-{time.monotonic_ns()}"
    sc.setJobGroup(group, "test")
    try:
        call()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def _new_version(spark, path: str, n: int) -> None:
    spark.createDataFrame([Row(k=i, v=str(i)) for i in range(n)]).write.format("delta").mode("append").save(path)


def test_a_read_after_the_snapshot_was_built_ahead_runs_no_job_to_build_it(spark, tmp_path):
    ahead, plain = str(tmp_path / "ahead"), str(tmp_path / "plain")
    for path in (ahead, plain):
        _new_version(spark, path, 3)
        _new_version(spark, path, 2)  # a version this session has not read yet
    with snapshots_built_meanwhile(spark, [ahead]):
        pass
    read = lambda path: spark.read.format("delta").load(path).inputFiles()  # noqa: E731
    first = _jobs_of(spark, lambda: read(plain))  # Delta builds the new version's snapshot, then lists
    again = _jobs_of(spark, lambda: read(plain))  # only lists the files of the snapshot it holds
    assert first > again
    assert _jobs_of(spark, lambda: read(ahead)) == again
    assert spark.read.format("delta").load(ahead).count() == 5


def test_missing_and_foreign_tables_are_left_to_the_step_that_reads_them(spark, tmp_path):
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not a table")
    table = str(tmp_path / "table")
    _new_version(spark, table, 1)
    # no exception, and the tables after a bad one are still built
    build_snapshots(spark, [str(tmp_path / "missing"), str(tmp_path / "foreign"), table])
    read = lambda: spark.read.format("delta").load(table).inputFiles()  # noqa: E731
    assert _jobs_of(spark, read) == _jobs_of(spark, read)  # the first read built nothing


def test_the_body_failing_does_not_wait_for_the_snapshots(spark, tmp_path):
    """A fetch that fails (or is interrupted) ends the crawl at once, not after the snapshots."""
    release = threading.Event()
    safety = threading.Timer(120, release.set)  # so that a wrong implementation fails, not hangs
    safety.start()

    def paths():
        release.wait()  # the building thread is held here until the body has failed
        yield str(tmp_path / "missing")

    try:
        with pytest.raises(RuntimeError, match="fetch failed"):
            with snapshots_built_meanwhile(spark, paths()):
                raise RuntimeError("fetch failed")
        assert not release.is_set()  # the failure came back while the building still waited
        assert any(t.name == "deltacrawl-snapshots" and t.is_alive() for t in threading.enumerate())
    finally:
        release.set()
        safety.cancel()
