"""deltacrawl maintain on a real crawl root (real Spark and Delta, the bundled test web on loopback).

One crawl root for the module: a cycle two days ago (segment "old", updated), then a segment
generated now and not fetched ("live": in flight). The tests run in file order on it."""
from __future__ import annotations

import os
import shutil
import time

import pytest
from delta.tables import DeltaTable

from crawl.config import ConfigError
from jobs import cli, dedup, fetch, generate, hint, inject, maintain, update
from jobs.engine.errors import UserError
from jobs.engine.crawl_root import list_segments
from jobs.engine.tables import table_exists
from tests.conftest import FAST, make_config, write_seeds

DAY = 86400
# short retentions so that this test's own files are vacuumed and its 2-day-old segment expires
MAINTAIN = dict(maintain__quiet_s=0.0, maintain__vacuum_retain_hours=0, maintain__unsafe_short_retention=True,
                maintain__log_retain_days=1, maintain__segment_retain_days=1, generate__max_urls_per_host=2,
                # these tables are tiny: without this their MERGEs rewrite files and leave no deletion
                # vector for maintain to purge (conf/defaults.toml, crawldb.deletion_vectors_min_mb)
                crawldb__deletion_vectors_min_mb=0.0)


def maintain_cfg(**extra):
    return make_config(**{**MAINTAIN, **extra})


@pytest.fixture(scope="module")
def crawled(spark, tmp_path_factory):
    from crawl.devweb.web import DevWeb
    from jobs.engine.crawl_root import CrawlRoot
    tmp = tmp_path_factory.mktemp("maintain")
    root = CrawlRoot(str(tmp / "crawl"))
    web = DevWeb(hosts=3, pages_per_host=6, port=0, seed=11, crawl_delay_s=0.0)
    web.start()
    cfg = maintain_cfg()
    t0 = time.time()
    try:
        inject.run(spark, cfg, root, write_seeds(tmp / "seeds.txt", web.seed_urls()), now=t0 - 3 * DAY)
        old = generate.run(spark, cfg, root, now=t0 - 2 * DAY).segment_id
        fetch.run(spark, cfg, root, old)
        dedup.run(spark, cfg, root, old)
        update.run(spark, cfg, root, old, now=t0 - 2 * DAY)
        live = generate.run(spark, cfg, root, now=t0).segment_id
        assert old and live
        # two pushes of hints, not consumed yet: two small files of the hint inbox for maintain to
        # compact, which the next generate still reads (test_a_cycle_still_works_after_maintain)
        for i, url in enumerate(web.seed_urls()[:2]):
            hint.run(spark, cfg, root, write_seeds(tmp / f"hints{i}.txt", [url]), now=t0 - 60 + i)
        yield {"root": root, "web": web, "old": old, "live": live, "t0": t0, "tmp": tmp}
    finally:
        web.stop()


def contents(spark, root):
    """Every table's rows, in a comparable form."""
    return {name: sorted(map(repr, spark.read.format("delta").load(path).collect()))
            for name, path in maintain.maintained_tables(root) if table_exists(spark, path)}


def versions(spark, root):
    return {name: DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
            for name, path in maintain.maintained_tables(root) if table_exists(spark, path)}


def files_on_disk(path):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


def test_config_keeps_deltas_safety_limit_unless_told():
    with pytest.raises(ConfigError, match="unsafe_short_retention"):
        make_config(maintain__vacuum_retain_hours=24)
    with pytest.raises(ConfigError, match="log_retain_days"):
        make_config(maintain__vacuum_retain_hours=24 * 40, maintain__log_retain_days=30)
    assert make_config(maintain__vacuum_retain_hours=24, maintain__unsafe_short_retention=True)


def test_refuses_while_a_segment_is_in_flight(spark, crawled):
    root = crawled["root"]
    before = versions(spark, root)
    with pytest.raises(UserError, match=f"segment {crawled['live']} is in flight"):
        maintain.run(spark, maintain_cfg(), root)
    assert versions(spark, root) == before


def test_refuses_after_a_recent_step_commit_through_the_cli(spark, crawled, capsys):
    root = crawled["root"]
    conf = [a for k, v in {**FAST, "maintain.quiet_s": 3600}.items() for a in ("--conf", f"{k}={v}")]
    capsys.readouterr()
    # lease expiry is not the point here: the crawldb was just written by generate
    assert cli.main(["maintain", "--crawl-root", root.root, *conf]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("deltacrawl maintain:")]
    assert len(errors) == 1 and errors[0].startswith("deltacrawl maintain: error: refusing to maintain")
    assert "in flight" in errors[0] and "(and 2 more)" in errors[0]  # + crawldb and hostdb written just now


def indexed_files(spark, root):
    return {r["warc_file"] for r in spark.read.format("delta").load(root.warc_index).collect()}


def test_dry_run_changes_nothing(spark, crawled, capsys):
    root = crawled["root"]
    stale = os.path.join(root.warc_dir, "DELTACRAWL-x-0-0-20200101000000-00000.warc.gz.open")
    with open(stale, "wb") as fh:
        fh.write(b"half a record")
    old_time = crawled["t0"] - 2 * DAY
    os.utime(stale, (old_time, old_time))
    # complete files nothing indexes (issue 35): one a dead task attempt of the updated segment
    # closed, one of the live segment (in flight now: left alone; abandoned once its lease ends)
    indexed = sorted(indexed_files(spark, root))
    for segment, task in ((crawled["old"], 7), (crawled["live"], 0)):
        path = os.path.join(root.warc_dir, f"DELTACRAWL-{segment}-{task:05d}-1-20200101000000-00000.warc.gz")
        shutil.copy(os.path.join(root.warc_dir, indexed[0]), path)
        os.utime(path, (old_time, old_time))  # older than generate.lease_s: no fetch can still name it
    before, before_versions, before_files = contents(spark, root), versions(spark, root), files_on_disk(root.root)
    result = maintain.run(spark, maintain_cfg(), root, dry_run=True)
    assert result.blockers and "in flight" in result.blockers[0]
    plans = {s.segment_id: s for s in result.segments}
    assert plans[crawled["old"]].state == "updated" and plans[crawled["old"]].delete
    assert plans[crawled["live"]].state == "in_flight" and not plans[crawled["live"]].delete
    assert result.leftovers == 1 and getattr(result, "unindexed", None) == 1
    crawldb = next(t for t in result.tables if t.name == "crawldb")
    assert crawldb.files_after is None and crawldb.files_vacuumed > 0
    print(maintain.format_result(result))
    assert "would refuse" in capsys.readouterr().out
    assert versions(spark, root) == before_versions
    assert files_on_disk(root.root) == before_files
    assert contents(spark, root) == before
    crawled["contents"] = before  # what the next test starts from: read once, not again


def test_maintain_compacts_purges_vacuums_and_expires(spark, crawled):
    root, t0 = crawled["root"], crawled["t0"]
    cfg = maintain_cfg()
    # the rows as the dry run found and left them (read here when that test did not run)
    before = crawled.pop("contents", None) or contents(spark, root)
    stats_before = {name: maintain.file_stats(spark, path) for name, path in maintain.maintained_tables(root)
                    if table_exists(spark, path)}
    assert stats_before["crawldb"][2] > 0  # the MERGEs left deletion vectors
    # an hour after the live segment's lease ended: it is abandoned (not in flight), but younger
    # than maintain.segment_retain_days, so it stays
    later = t0 + float(cfg["generate.lease_s"]) + 60
    result = maintain.run(spark, cfg, root, now=later)
    print(maintain.format_result(result))
    assert contents(spark, root) == before
    by_name = {t.name: t for t in result.tables}
    assert set(by_name) == set(stats_before) >= {"crawldb", "hostdb", "warc_index", "dedup/pages", "dedup/bands",
                                                  "hints"}
    assert by_name["hints"].files_after < by_name["hints"].files_before
    crawldb = by_name["crawldb"]
    assert crawldb.files_after < crawldb.files_before and crawldb.dvs_purged == stats_before["crawldb"][2]
    assert crawldb.files_vacuumed > 0 and crawldb.properties_set
    assert sum(t.files_after for t in result.tables) < sum(t.files_before for t in result.tables)
    for name, path in maintain.maintained_tables(root):
        if table_exists(spark, path):
            files, _, dvs = maintain.file_stats(spark, path)
            assert dvs == 0, name
            detail = DeltaTable.forPath(spark, path).detail().collect()[0]
            assert detail["properties"]["delta.checkpointInterval"] == "10"
            assert detail["properties"]["delta.deletedFileRetentionDuration"] == "interval 0 hours"
            # VACUUM left exactly the files of the newest version
            data = [f for f in files_on_disk(path) if "_delta_log" not in f and not f.endswith(".crc")]
            assert len(data) == files, name
            assert any(f.endswith(".checkpoint.parquet") for f in os.listdir(os.path.join(path, "_delta_log")))
    assert result.segments_removed == [crawled["old"]]
    assert list_segments(spark, root) == [crawled["live"]]
    assert result.leftovers == 1 and not any(f.endswith(".open") for f in os.listdir(root.warc_dir))
    # the updated segment's unindexed file and the abandoned segment's: removed; the indexed ones stay
    assert set(os.listdir(root.warc_dir)) == indexed_files(spark, root) and result.unindexed == 2
    # maintain's own commits (OPTIMIZE, VACUUM, ...) do not count as a step's for maintain.quiet_s
    now = time.time()
    newest_commit_age = now - DeltaTable.forPath(spark, root.crawldb).detail().collect()[0]["lastModified"].timestamp()
    assert maintain._last_step_commit_age(spark, root.crawldb, now, 1e9) > newest_commit_age + 1
    # run again right away: nothing left to purge, no property to set, the same rows
    again = maintain.run(spark, cfg, root, now=later)
    assert all(t.dvs_purged == 0 and not t.properties_set for t in again.tables)
    assert contents(spark, root) == before


def test_a_cycle_still_works_after_maintain(spark, crawled):
    root, live = crawled["root"], crawled["live"]
    cfg = maintain_cfg()
    # the live segment's lease is still in force in real time: fetch and update it now
    fetched = fetch.run(spark, cfg, root, live)
    assert fetched.urls > 0
    result = update.run(spark, cfg, root, live)
    assert result.updated == fetched.urls
    # the hints pushed before maintain compacted and vacuumed their inbox are all read
    from jobs.engine.hint_inbox import consume_hints
    assert consume_hints(spark, cfg, root).hinted == 2
    generate.run(spark, cfg, root)  # runs on the compacted, vacuumed crawldb (due URLs or none)
