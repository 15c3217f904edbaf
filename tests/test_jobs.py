"""The Spark jobs one by one, on real Spark and Delta (one shared session)."""
from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs import fetch, generate, inject, stats, update
from jobs.engine.errors import UserError
from tests.conftest import make_config, write_seeds


def version(spark, path):
    return DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]


def table(spark, path):
    return {r["url"]: r.asDict() for r in spark.read.format("delta").load(path).collect()}


def test_inject_is_idempotent_and_skips_bad_lines(spark, cfg, root, tmp_path, capsys):
    seeds = write_seeds(tmp_path / "seeds.txt", ["http://a.example/", "HTTP://A.example:80/", "bad url",
                                                 "mailto:x@y", "http://b.example/x"])
    from jobs.engine import logs
    logs.setup("deltacrawl inject")  # what the CLI does: our lines to stderr
    first = inject.run(spark, cfg, root, seeds)
    assert (first.inserted, first.rejected, first.duplicates) == (2, 2, 1)
    assert "skipped line 3" in capsys.readouterr().err
    rows = table(spark, root.crawldb)
    assert set(rows) == {"http://a.example/", "http://b.example/x"}
    assert {r["status"] for r in rows.values()} == {"unfetched"}
    assert {r["depth"] for r in rows.values()} == {0}
    v = version(spark, root.crawldb)
    second = inject.run(spark, cfg, root, seeds)
    assert (second.inserted, second.already_known) == (0, 2)
    assert table(spark, root.crawldb) == rows
    assert version(spark, root.crawldb) <= v + 1


def test_inject_without_valid_url_writes_nothing(spark, cfg, root, tmp_path):
    seeds = write_seeds(tmp_path / "seeds.txt", ["junk", "ftp://x/"])
    with pytest.raises(UserError, match="no valid URL"):
        inject.run(spark, cfg, root, seeds)
    assert not DeltaTable.isDeltaTable(spark, root.crawldb)


@pytest.fixture(scope="module")
def empty_tables(spark, tmp_path_factory):
    """A crawl root whose tables are made and empty, once for the module (~2 CPU s a root): the
    tests of the steps after inject start from a copy of it (tables_root)."""
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.tables import ensure_tables
    path = tmp_path_factory.mktemp("jobs-template") / "crawl"
    ensure_tables(spark, CrawlRoot(str(path)))
    return path


@pytest.fixture
def tables_root(empty_tables, root):
    """The test's crawl root (the root fixture's path) as a fresh copy of empty_tables."""
    import shutil
    shutil.copytree(empty_tables, root.root)
    return root


def _inject_hosts(spark, cfg, root, tmp_path, hosts=3, per_host=5, now=None):
    urls = [f"http://h{h}.example/p{p}" for h in range(hosts) for p in range(per_host)]
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", urls), now=now)
    return urls


def test_generate_caps_per_host_and_in_all_and_leases(spark, tables_root, tmp_path):
    root = tables_root
    cfg = make_config(generate__max_urls_per_host=2, generate__top_n=5)
    now = time.time()
    _inject_hosts(spark, cfg, root, tmp_path, now=now - 10)
    result = generate.run(spark, cfg, root, now=now)
    assert result.urls == 5
    fl = spark.read.parquet(root.fetchlist(result.segment_id))
    per_host = {r["host"]: r["n"] for r in fl.groupBy("host").agg(F.count("*").alias("n")).collect()}
    assert max(per_host.values()) <= 2 and sum(per_host.values()) == 5
    rows = table(spark, root.crawldb)
    leased = {u for u, r in rows.items() if r["lease_until"] is not None}
    assert leased == {r["url"] for r in fl.collect()}
    assert {rows[u]["segment_id"] for u in leased} == {result.segment_id}
    # leased URLs are not generated again: segments are disjoint until all 15 are leased
    seen = set(leased)
    for step in range(1, 10):
        nxt = generate.run(spark, cfg, root, now=now + step)
        if nxt.segment_id is None:
            break
        urls = {r["url"] for r in spark.read.parquet(root.fetchlist(nxt.segment_id)).collect()}
        assert urls.isdisjoint(seen)
        seen |= urls
    assert nxt.segment_id is None and len(seen) == 15
    # stats names the segments in flight (leases in force), each with its URLs
    summary = stats.collect_stats(spark, cfg, root, now=now + 20)
    assert summary["leased"] == 15 and summary["due_now"] == 0 and summary["total_urls"] == 15
    assert sum(n for _segment, n, _until in summary["leases"]) == 15
    assert {segment for segment, _n, _until in summary["leases"]} == {
        r["segment_id"] for r in table(spark, root.crawldb).values()}
    assert summary["hosts"] == len(summary["top_hosts"]) and sum(n for _h, n in summary["top_hosts"]) == 15
    # once leases expire, everything is due again
    later = now + float(cfg["generate.lease_s"]) + 10
    assert generate.run(spark, make_config(), root, now=later).urls == 15


def test_generate_ranks_by_score(spark, tables_root, tmp_path):
    root = tables_root
    cfg = make_config(generate__max_urls_per_host=1)
    now = time.time()
    _inject_hosts(spark, cfg, root, tmp_path, hosts=1, per_host=4, now=now - 10)
    DeltaTable.forPath(spark, root.crawldb).update("url = 'http://h0.example/p2'", {"score": F.lit(9.0)})
    result = generate.run(spark, cfg, root, now=now)
    assert [r["url"] for r in spark.read.parquet(root.fetchlist(result.segment_id)).collect()] == ["http://h0.example/p2"]


def test_generate_nothing_due_writes_no_segment_and_update_refuses_an_unfetched_or_unknown_segment(
        spark, cfg, tables_root, tmp_path):
    """One injected URL serves both (an inject each cost a test ~6 CPU s): not due yet, generate
    writes no segment; due, its segment, not fetched, is refused by update, and an unknown segment
    by update and fetch."""
    root = tables_root
    now = time.time()
    _inject_hosts(spark, cfg, root, tmp_path, hosts=1, per_host=1, now=now)
    assert generate.run(spark, cfg, root, now=now - 100).segment_id is None
    from jobs.engine.crawl_root import list_segments
    assert list_segments(spark, root) == []
    # due now: a segment, which update refuses until it is fetched
    seg = generate.run(spark, cfg, root).segment_id
    assert seg is not None
    with pytest.raises(UserError, match="has not been fetched"):
        update.run(spark, cfg, root, seg)
    with pytest.raises(UserError, match="no segment"):
        update.run(spark, cfg, root, "20990101000000-ffffff")
    with pytest.raises(UserError, match="no segment"):
        fetch.run(spark, cfg, root, "20990101000000-ffffff")


def test_generate_without_crawldb_is_a_user_error(spark, cfg, root):
    with pytest.raises(UserError, match="no crawldb"):
        generate.run(spark, cfg, root)


def test_fetch_update_cycles_update_idempotence_and_robots_cache(spark, cfg, tables_root, tmp_path, devweb):
    """A cycle, fetch and update run again, the WARC files read back; then a second cycle, which
    reads robots.txt from the hostdb instead of asking the hosts again."""
    root = tables_root
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", devweb.seed_urls()[:4]))
    seg = generate.run(spark, cfg, root).segment_id
    fetched = fetch.run(spark, cfg, root, seg)
    assert fetched.urls == 4 and fetched.hosts == 4 and fetched.by_fetch_status == {"ok": 4}
    # fetch again before update (an Airflow retry after the driver died past its commit): nothing
    # is requested again under the same lease, the results stay (issue 35)
    requests = len(devweb.requests())
    again = fetch.run(spark, cfg, root, seg)
    assert len(devweb.requests()) == requests and again.already_fetched
    assert (again.urls, again.by_fetch_status) == (4, {"ok": 4}) and "update" in again.summary()
    first = update.run(spark, cfg, root, seg)
    assert first.updated == 4 and first.new_urls > 0
    rows = table(spark, root.crawldb)
    for seed in devweb.seed_urls()[:4]:
        r = rows[seed]
        assert r["status"] == "fetched" and r["http_status"] == 200 and r["lease_until"] is None
        assert r["content_hash"] and r["last_fetched_at"] and r["next_fetch_at"] > r["last_fetched_at"]
    outlinks = {u for s in devweb.seed_urls()[:4] for u in devweb.outlinks(s)}
    assert outlinks <= set(rows)
    assert {rows[u]["depth"] for u in outlinks} == {1}
    assert {rows[u]["status"] for u in outlinks} == {"unfetched"}
    hosts = {r["host"]: r.asDict() for r in spark.read.format("delta").load(root.hostdb).collect()}
    assert len(hosts) == 4 and all(h["robots_fetched_at"] is not None for h in hosts.values())
    per_host = {}
    for r in rows.values():
        per_host[r["host"]] = per_host.get(r["host"], 0) + 1
    assert {h: r["url_count"] for h, r in hosts.items()} == per_host  # seeds and new URLs, counted
    assert sum(h["requests"] for h in hosts.values()) == 12  # robots.txt, /sitemap.xml, one page per host

    crawl_v, host_v = version(spark, root.crawldb), version(spark, root.hostdb)
    again = update.run(spark, cfg, root, seg)
    assert again.already_applied
    assert (version(spark, root.crawldb), version(spark, root.hostdb)) == (crawl_v, host_v)
    # even if the marker is lost (job died after the MERGEs), a re-run changes no row
    import shutil
    shutil.rmtree(root.updated_marker(seg), ignore_errors=True)
    if os.path.exists(root.updated_marker(seg)):
        os.remove(root.updated_marker(seg))
    hosts_before = spark.read.format("delta").load(root.hostdb).collect()
    index_v = version(spark, root.warc_index)
    update.run(spark, cfg, root, seg)
    assert table(spark, root.crawldb) == rows
    assert sorted(map(str, spark.read.format("delta").load(root.hostdb).collect())) == sorted(map(str, hosts_before))
    # each table had the segment's write already: none of them took a new commit
    assert (version(spark, root.crawldb), version(spark, root.hostdb), version(spark, root.warc_index)) == \
        (crawl_v, host_v, index_v)

    with pytest.raises(UserError, match="already updated"):
        fetch.run(spark, cfg, root, seg)

    # every fetched page is archived, indexed, and can be read back by seeking to its offset
    import io
    from jobs import warc_get
    index = spark.read.format("delta").load(root.warc_index).collect()
    assert {r["url"] for r in index} == set(devweb.seed_urls()[:4])
    assert {r["warc_file"] for r in index} == set(os.listdir(root.warc_dir))  # no WARC file without index rows
    buf = io.BytesIO()
    assert warc_get.run(spark, cfg, root, devweb.seed_urls()[0], out=buf) == 0
    assert b"WARC-Type: response" in buf.getvalue() and b"<html" in buf.getvalue().lower()
    assert rows[devweb.seed_urls()[0]]["warc_file"] == [r for r in index if r["url"] == devweb.seed_urls()[0]][0]["warc_file"]
    assert all(r["warc_uri"] == os.path.join(root.warc_dir, r["warc_file"]) for r in index)
    assert warc_get.run(spark, cfg, root, devweb.seed_urls()[0] + "never-fetched", out=io.BytesIO()) == 1
    # rows indexed before warc_uri existed are found under <crawl_root>/warc
    DeltaTable.forPath(spark, root.warc_index).update(set={"warc_uri": F.lit(None).cast("string")})
    old_row = io.BytesIO()
    assert warc_get.run(spark, cfg, root, devweb.seed_urls()[0], out=old_row) == 0
    assert old_row.getvalue() == buf.getvalue()
    # a file that is gone is a one-line user error
    os.rename(os.path.join(root.warc_dir, index[0]["warc_file"]), os.path.join(root.warc_dir, "moved-away"))
    with pytest.raises(UserError, match=r"WARC file .* is missing; the index says"):
        warc_get.run(spark, cfg, root, index[0]["url"], out=io.BytesIO())

    summary = stats.collect_stats(spark, cfg, root)
    assert summary["total_urls"] == len(rows)
    assert dict(summary["by_status"])["fetched"] == 4
    assert dict(summary["by_http_status"])[200] == 4
    assert summary["due_now"] == len(rows) - 4

    # a second cycle: the hosts of the first one are not asked for robots.txt again (its generate
    # and fetch are where that shows: its update, which every multi-cycle crawl runs, is left out)
    seg2 = generate.run(spark, cfg, root).segment_id
    fetch.run(spark, cfg, root, seg2)
    robots = Counter(e["host"] for e in devweb.requests() if e["path"] == "/robots.txt")
    assert set(robots.values()) == {1}  # once per host, not once per cycle
    # the cached robots.txt rides on one fetchlist row per host, not on each of its URLs
    fetchlist = spark.read.parquet(root.fetchlist(seg2)).collect()
    # the first cycle's hosts that have a body (one of the four has none: its robots.txt is a 404)
    cached = {h for h in {r["host"] for r in fetchlist} & set(hosts) if hosts[h]["robots_txt"] is not None}
    assert len(cached) == 3
    carriers = [r["host"] for r in fetchlist if r["robots_txt"] is not None]
    assert sorted(carriers) == sorted(cached) and len(fetchlist) > len(carriers)


def test_fetch_tasks_write_warc_files_to_s3(spark, cfg, devweb, moto_s3):
    """The fetch tasks get the S3 store in their closure (settings, no client: each makes its
    own) and upload their WARC files; every fetched row points at a complete object, read back by
    a ranged GET as warc-get reads it."""
    from crawl.net.urls import host_bucket, host_of, url_hash
    from crawl.fetch.warc_store import S3WarcStore, sweep_unfinished, warc_store
    from crawl.fetch.warc_read import read_record_at
    from jobs.engine.schemas import FETCHLIST_SCHEMA
    from tests.s3server import aws_environ, new_bucket
    seg = "20261201000000-5e5e5e"
    fetchlist = spark.createDataFrame(  # what generate would write, without the Delta jobs
        [{"url": u, "url_hash": url_hash(u), "host": host_of(u), "host_bucket": host_bucket(host_of(u), 16),
          "depth": 0, "score": 1.0, "segment_id": seg} for u in devweb.seed_urls()[:4]], FETCHLIST_SCHEMA)
    bucket = new_bucket(moto_s3)
    # the AWS variables only here, on the driver: the executors know the store by its settings
    store = warc_store(f"s3a://{bucket}/crawl/warc", cfg, aws_environ(moto_s3))
    assert isinstance(store, S3WarcStore)
    fetched = fetch.fetch_segment(spark, fetchlist, cfg, fetch.FetchRun(fetch.new_run_id(), store, None)).collect()
    pages = [r for r in fetched if r["kind"] == "url"]
    assert len(pages) == 4 and all(r["fetch_status"] == "ok" and r["warc_file"] for r in pages)
    listing = store.client.list_objects_v2(Bucket=bucket, Prefix="crawl/warc/")
    objects = {o["Key"].rsplit("/", 1)[1] for o in listing.get("Contents", [])}
    assert objects == {r["warc_file"] for r in pages} and all(f"-{seg}-" in name for name in objects)
    assert "Uploads" not in store.client.list_multipart_uploads(Bucket=bucket, Prefix="crawl/warc/")
    assert sweep_unfinished(store, segment_id=seg) == 0
    for r in pages:
        record = read_record_at(store.uri(r["warc_file"]), r["warc_offset"], r["warc_length"], settings=store.settings)
        assert record["target_uri"] == r["url"] and record["http_status"] == 200
        assert b"<html" in record["payload"].lower()
