"""update dies midway, is run again: every table takes the segment's write exactly once, and the
hosts' url_count stays what the crawldb implies (issue 14, item 2). The failure is raised inside
the step's own writes (real Spark and Delta; the commits that happened before it are real)."""
from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from jobs import fetch, generate, inject, update
from tests.conftest import write_seeds


def crawldb_counts(spark, root):
    return {r["host"]: r["n"] for r in spark.read.format("delta").load(root.crawldb)
            .groupBy("host").agg(F.count("*").alias("n")).collect()}


def hostdb(spark, root):
    return {r["host"]: r.asDict() for r in spark.read.format("delta").load(root.hostdb).collect()}


def assert_consistent(spark, root):
    """url_count is the host's crawldb rows; the WARC index has each record once."""
    hosts = hostdb(spark, root)
    assert {h: r["url_count"] for h, r in hosts.items()} == crawldb_counts(spark, root)
    index = spark.read.format("delta").load(root.warc_index)
    assert index.count() == index.select("warc_file", "warc_offset").distinct().count()


def fetched_segment(spark, cfg, root):
    segment = generate.run(spark, cfg, root).segment_id
    fetch.run(spark, cfg, root, segment)
    return segment


class Boom(RuntimeError):
    pass


def fail(*_args, **_kwargs):
    raise Boom("the driver died here")


def test_update_dying_after_some_commits_is_completed_by_a_rerun(spark, cfg, root, tmp_path, devweb, monkeypatch):
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", devweb.seed_urls()[:3]))
    assert_consistent(spark, root)  # seeds are counted
    first = fetched_segment(spark, cfg, root)

    # 1. the crawldb and warc_index commits happen, the hostdb's does not
    with monkeypatch.context() as patch:
        patch.setattr(update, "merge_hostdb", fail)
        with pytest.raises(Boom):
            update.run(spark, cfg, root, first)
    crawldb_after_first = crawldb_counts(spark, root)
    assert sum(crawldb_after_first.values()) > 3  # the segment's new URLs are in
    index_rows = spark.read.format("delta").load(root.warc_index).count()
    assert index_rows == 3
    # the re-run sees those URLs as known; url_count must count them all the same
    again = update.run(spark, cfg, root, first)
    assert not again.already_applied and again.new_urls == 0  # the crawldb had them already
    assert crawldb_counts(spark, root) == crawldb_after_first
    assert spark.read.format("delta").load(root.warc_index).count() == index_rows
    assert_consistent(spark, root)
    requests_after_first = {h: r["requests"] for h, r in hostdb(spark, root).items()}

    # 2. A's crawldb and hostdb commits happen, not its index append; then B is updated; then A again
    a = fetched_segment(spark, cfg, root)
    with monkeypatch.context() as patch:
        patch.setattr(update, "append_warc_index", fail)
        with pytest.raises(Boom):
            update.run(spark, cfg, root, a)
    requests_after_a = {h: r["requests"] for h, r in hostdb(spark, root).items()}
    assert sum(requests_after_a.values()) > sum(requests_after_first.values())
    update.run(spark, cfg, root, a)  # completes A: only the index append was missing
    requests_done_a = {h: r["requests"] for h, r in hostdb(spark, root).items()}
    assert requests_done_a == requests_after_a  # A's counters were not added a second time
    b = fetched_segment(spark, cfg, root)
    update.run(spark, cfg, root, b)
    requests_after_b = {h: r["requests"] for h, r in hostdb(spark, root).items()}
    os.remove(root.updated_marker(a))  # as if A's marker had never been written
    update.run(spark, cfg, root, a)
    assert {h: r["requests"] for h, r in hostdb(spark, root).items()} == requests_after_b
    assert_consistent(spark, root)
    segments = {r["segment_id"] for r in spark.read.format("delta").load(root.warc_index).collect()}
    assert segments == {first, a, b}
