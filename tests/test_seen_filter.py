"""jobs/engine/seen_filter.py on a real crawldb: the seen-URL filter is stored in the crawl root, used as
it is while the crawldb is unchanged, brought up to date from the Change Data Feed when URLs were
inserted, and built again from the whole table whenever that would not be exact: rows removed,
change data missing, a broken or foreign file, a filter grown too full."""
from __future__ import annotations

import os

from delta.tables import DeltaTable

from crawl.config import with_values
from crawl.net.bloom import BloomFilter
from jobs import inject
from jobs.engine import seen_filter as seen_filter_module
from jobs.engine.logs import step_logger
from jobs.engine.seen_filter import seen_filter, usable
from jobs.engine.tables import latest_snapshot
from tests.conftest import write_seeds


def crawldb_urls(spark, root) -> set[str]:
    return {r["url"] for r in spark.read.format("delta").load(root.crawldb).select("url").collect()}


def stored(root) -> list[str]:
    folder = os.path.join(root.root, "seen_filter")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def table_and_version(spark, root) -> tuple[str, int]:
    snapshot = latest_snapshot(spark, root.crawldb)
    return str(snapshot.metadata().id()), int(snapshot.version())


def add_seeds(spark, cfg, root, tmp_path, name: str, urls: list[str]) -> None:
    inject.run(spark, cfg, root, write_seeds(tmp_path / f"{name}.txt", urls))


def same_bits_as_one_process_build(seen, urls: set[str]) -> bool:
    bloom = BloomFilter.from_bytes(seen.data)
    local = BloomFilter(bloom.num_bits, bloom.num_hashes)
    local.add_many(sorted(urls))
    return local.to_bytes()[24:] == seen.data[24:]


def append_urls(spark, root, urls: list[str]) -> None:
    """New crawldb rows, copies of an existing row under other URLs, appended (a plain Delta write)."""
    from pyspark.sql import functions as F
    template = spark.read.format("delta").load(root.crawldb).limit(1)
    rows = template.crossJoin(spark.createDataFrame([(u,) for u in urls], "new_url string"))
    rows.withColumn("url", F.col("new_url")).drop("new_url").write.format("delta").mode("append").save(root.crawldb)


def test_stored_filter_is_reused_updated_or_built_again(spark, cfg, root, tmp_path):
    add_seeds(spark, cfg, root, tmp_path, "a", [f"http://a{i}.test/" for i in range(5)])
    assert seen_filter(spark, root, with_values(cfg, {"discovery.bloom_fpr": 0.0})) is None and stored(root) == []  # off
    first = seen_filter(spark, root, cfg)
    table, version = table_and_version(spark, root)
    folder = os.path.join(root.root, "seen_filter")
    assert (first.how, first.why, first.version, first.urls) == ("built", "none stored", version, 5)
    assert stored(root) == [f"{table}-{version:020d}.bloom"]
    assert same_bits_as_one_process_build(first, crawldb_urls(spark, root))

    again = seen_filter(spark, root, cfg)  # nothing changed: the stored filter as it is, nothing written
    assert (again.how, again.data, stored(root)) == ("stored", first.data, [f"{table}-{version:020d}.bloom"])

    # inject's MERGE: three new URLs and one known; exactly the three are added, as a full build of
    # the same shape has them
    add_seeds(spark, cfg, root, tmp_path, "b", ["http://a0.test/", "http://b0.test/", "http://b1.test/x",
                                                "http://b2.test/"])
    updated = seen_filter(spark, root, cfg)
    assert (updated.how, updated.added, updated.urls) == ("updated", 3, 8)
    assert updated.version == table_and_version(spark, root)[1] > version
    assert same_bits_as_one_process_build(updated, crawldb_urls(spark, root))
    assert len(stored(root)) == 2

    append_urls(spark, root, ["http://c0.test/"])
    newest = seen_filter(spark, root, cfg)
    assert (newest.how, newest.added, newest.urls) == ("updated", 1, 9)
    assert stored(root) == [f"{table}-{v:020d}.bloom" for v in (updated.version, newest.version)]  # two kept
    assert same_bits_as_one_process_build(newest, crawldb_urls(spark, root))

    # a row removed from the crawldb: the stored filter would still drop its rediscovery
    DeltaTable.forPath(spark, root.crawldb).delete("url = 'http://c0.test/'")
    rebuilt = seen_filter(spark, root, cfg)
    assert rebuilt.how == "built" and "removed 1 crawldb rows" in rebuilt.why and rebuilt.urls == 8
    assert "http://c0.test/" not in BloomFilter.from_bytes(rebuilt.data)
    assert same_bits_as_one_process_build(rebuilt, crawldb_urls(spark, root))

    # a broken file (a writer that died, a disk error)
    with open(os.path.join(folder, stored(root)[-1]), "r+b") as fh:
        fh.truncate(100)
    broken = seen_filter(spark, root, cfg)
    assert broken.how == "built" and "unreadable" in broken.why and broken.urls == 8

    # change data not recorded for a version (the feed turned off for a while)
    spark.sql(f"ALTER TABLE delta.`{root.crawldb}` SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    append_urls(spark, root, ["http://e0.test/"])
    spark.sql(f"ALTER TABLE delta.`{root.crawldb}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    no_feed = seen_filter(spark, root, cfg)
    assert no_feed.how == "built" and "no change data" in no_feed.why and no_feed.urls == 9
    assert same_bits_as_one_process_build(no_feed, crawldb_urls(spark, root))

    # grown too full for the configured rate: a bigger one is built
    version = table_and_version(spark, root)[1]
    tiny = BloomFilter(64, 1)
    tiny.add_many(sorted(crawldb_urls(spark, root)))
    with open(os.path.join(folder, f"{table}-{version:020d}.bloom"), "wb") as fh:
        fh.write(tiny.to_bytes())
    grown = seen_filter(spark, root, cfg)
    assert grown.how == "built" and "false-positive" in grown.why and grown.nbytes > tiny.nbytes

    # another table's filter (the crawldb deleted and made again) is never taken for this one's
    with open(os.path.join(folder, f"00000000-0000-0000-0000-000000000000-{version + 5:020d}.bloom"), "wb") as fh:
        fh.write(BloomFilter(64, 1).to_bytes())
    mine = seen_filter(spark, root, cfg)
    assert mine.how == "stored" and mine.data == grown.data


def test_a_filter_too_small_to_use_is_not_used(spark, cfg, root, tmp_path, monkeypatch, caplog):
    """Capped by discovery.bloom_max_mb, a filter would drop a growing share of new links as known:
    past MAX_USABLE_FACTOR x bloom_fpr it is left out, with a warning."""
    overfull = BloomFilter(64, 1)
    overfull.add_many(f"http://x{i}.test/" for i in range(100))
    assert not usable(overfull, 0.01) and usable(BloomFilter.for_capacity(100, 0.01), 0.01)

    add_seeds(spark, cfg, root, tmp_path, "g", ["http://g0.test/"])
    monkeypatch.setattr(seen_filter_module, "MAX_USABLE_FACTOR", 0.0)  # no filter is good enough
    logger = step_logger("fetch")  # our loggers may not propagate (jobs/engine/logs.py setup)
    logger.addHandler(caplog.handler)
    try:
        assert seen_filter(spark, root, cfg) is None
    finally:
        logger.removeHandler(caplog.handler)
    assert any("not used this cycle" in r.getMessage() for r in caplog.records)
    assert len(stored(root)) == 1  # still stored: later cycles add to it
