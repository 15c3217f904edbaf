"""Real kill -9 of a step's driver (issue 14): `deltacrawl generate` killed while it writes its
segment, `deltacrawl update` killed right after its first Delta commit; (issue 35) `deltacrawl
dedup` killed at its first commit. Each is followed by the recovery a user would run, and a check
of every table: no URL lost or leased twice, host counters equal to what the crawldb implies, the
WARC index naming only complete records, and every WARC file indexed. The kills are steps of one
cycle, each step killed in turn and recovered before the next one is (each kill a cold JVM of its
own; the recovery runs in the tests' session). A fetch's driver killed after a task closed a WARC
file (issue 35, item 2) is tests/test_crawl_overlap.py's kill, a crawl's driver in a fetch: one
cold JVM for both; here the cycle's fetch runs in the tests' session. (A killed fetch worker:
tests/test_fetch_retry.py.)"""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from pyspark.sql import functions as F

from crawl.devweb.web import DevWeb
from crawl.fetch.warc_read import read_record
from jobs import dedup, fetch, generate, inject, update
from jobs.engine.errors import UserError
from jobs.engine.crawl_root import list_segments
from jobs.engine.tables import ensure_dedup_tables, table_version
from tests.conftest import FAST, make_config, write_seeds
from tests.test_fetcher import host_urls
from tests.test_update_recovery import assert_consistent

DELTACRAWL = os.path.join(os.path.dirname(sys.executable), "deltacrawl")


def run_and_kill(argv: list[str], when, env: dict[str, str], timeout: float = 900) -> str:
    """Start a deltacrawl step in a process group of its own (its Python driver, JVM and Python
    workers) and kill -9 the whole group as soon as ``when()`` is true. Returns "killed", or
    "finished" when the step ended before the moment came."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if when():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return "killed"
            if proc.poll() is not None:
                return "finished"
            time.sleep(0.01)
        raise AssertionError(f"{argv[1]} neither reached the moment nor ended in {timeout} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def step_cli(root, tmp_path, **overrides) -> tuple[list[str], dict[str, str]]:
    """(the options, the environment) for a deltacrawl step on ``root`` with FAST and ``overrides``."""
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("DELTACRAWL_VERBOSE", None)
    settings = {**FAST, **{k.replace("__", "."): v for k, v in overrides.items()}}
    return ["--crawl-root", root.root] + [arg for k, v in settings.items() for arg in ("--conf", f"{k}={v}")], env


def next_commit(path: str):
    """When the Delta table at ``path`` has a version beyond its newest one now."""
    log = os.path.join(path, "_delta_log", f"{len(glob.glob(os.path.join(path, '_delta_log', '*.json'))):020d}.json")
    return lambda: os.path.exists(log)


def leased(spark, root) -> dict[str, str]:
    return {r["url"]: r["segment_id"] for r in spark.read.format("delta").load(root.crawldb)
            .filter(F.col("lease_until").isNotNull()).select("url", "segment_id").collect()}


def assert_every_table(spark, root):
    """No URL twice in the crawldb, url_count what the crawldb implies, and every WARC index row
    pointing at a complete record of its URL."""
    crawldb = spark.read.format("delta").load(root.crawldb)
    assert crawldb.count() == crawldb.select("url").distinct().count()
    assert_consistent(spark, root)
    for r in spark.read.format("delta").load(root.warc_index).collect():
        record = read_record(os.path.join(root.local_path(root.warc_dir), r["warc_file"]), r["warc_offset"])
        assert record["target_uri"] == r["url"]


def test_each_step_of_a_cycle_killed_in_turn_then_recovered_leaves_every_table_consistent(
        spark, root, tmp_path):
    """One cycle over a small web, each step but the fetch killed -9 in its own cold process at the
    moment that tests its crash safety, then run again the way a user would:

    1. generate, as soon as its segment folder appears (the fetchlist being written, the lease not
       yet committed, or just committed: any moment must leave the crawldb consistent);
    2. fetch, not killed here (tests/test_crawl_overlap.py kills a fetch once a task has closed a
       WARC file, issue 35, item 2): every URL ends with a result;
    3. dedup, when dedup/pages or dedup/bands takes the segment's write (issue 35, item 3): update
       refuses the segment until dedup has run again, and then the segment's canonical pages all
       have their band rows;
    4. update, right after its first commit (the crawldb, hostdb or index: they run side by side):
       run again, every result is applied once."""
    web = DevWeb(hosts=2, pages_per_host=12, port=0, seed=5, crawl_delay_s=0.4)
    web.start()
    try:
        urls = [u for i in range(2) for u in host_urls(web, i, pages=8) if not web.is_disallowed(u)]
        # one task, one file per page (a file is closed when the next page is written)
        settings = dict(fetch__delay_s=0.3, fetch__tasks=1, sitemaps__enabled=False, warc__max_file_bytes=1)
        cfg = make_config(**settings)
        opts, env = step_cli(root, tmp_path, **settings)
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", urls))

        # 1. generate, killed as soon as its segment folder appears
        segments_dir = os.path.join(root.root, "segments")
        outcome = run_and_kill([DELTACRAWL, "generate", *opts],
                               lambda: bool(glob.glob(os.path.join(segments_dir, "*", "fetchlist"))), env)
        assert outcome == "killed"
        [killed] = list_segments(spark, root)
        held = leased(spark, root)
        if os.path.exists(root.leased_marker(killed)):  # the kill came after the lease committed
            segment = killed
        else:  # the usual case: an orphan fetchlist. fetch refuses it; generate again leases anew
            assert set(held.values()) <= {killed}
            if not held:
                with pytest.raises(UserError, match="holds no lease"):
                    fetch.run(spark, cfg, root, killed)
            segment = generate.run(spark, cfg, root).segment_id
        fetchlist = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
        if segment != killed:
            # a URL is leased to one segment only; whatever the killed one holds is not handed out twice
            assert fetchlist and not fetchlist & {u for u, s in held.items() if s == killed}
            assert set(leased(spark, root).values()) <= {killed, segment}

        # 2. fetch (its kill: tests/test_crawl_overlap.py)
        result = fetch.run(spark, cfg, root, segment)
        assert result.warc_removed == 0
        pages = Counter(f"http://{e['host']}{e['path']}" for e in web.requests() if e["path"] != "/robots.txt")
        assert max(pages.values()) <= 2, [u for u, n in pages.items() if n > 2]
        outcomes = {r["url"]: r["fetch_status"] for r in spark.read.parquet(root.fetched(segment))
                    .filter(F.col("kind") == "url").collect()}
        assert sorted(outcomes) == sorted(fetchlist) and "not_attempted" not in outcomes.values(), outcomes

        # 3. dedup, killed when dedup/pages or dedup/bands takes the segment's write
        ensure_dedup_tables(spark, root)  # so that the segment's writes are the next commits
        commits = [next_commit(root.dedup_pages), next_commit(root.dedup_bands)]
        outcome = run_and_kill([DELTACRAWL, "dedup", segment, *opts], lambda: any(c() for c in commits), env)
        # (a cold dedup commits dedup/bands ~0.5 s after dedup/pages, and its marker after that)
        assert outcome == "killed" and not os.path.exists(root.deduped_marker(segment))
        with pytest.raises(UserError, match=f"run 'deltacrawl dedup {segment}' first"):
            update.run(spark, cfg, root, segment)
        dedup.run(spark, cfg, root, segment)

        # 4. update, killed right after its first commit, then run again by the user
        versions = {path: table_version(spark, path) for path in (root.crawldb, root.hostdb)}
        logs = {path: os.path.join(path, "_delta_log", f"{v + 1:020d}.json") for path, v in versions.items()}
        index_before = len(glob.glob(os.path.join(root.warc_index, "_delta_log", "*.json")))
        outcome = run_and_kill([DELTACRAWL, "update", segment, *opts],
                               lambda: any(os.path.exists(p) for p in logs.values())
                               or len(glob.glob(os.path.join(root.warc_index, "_delta_log", "*.json"))) > index_before,
                               env)
        assert outcome == "killed"
        assert not os.path.exists(root.updated_marker(segment))
        result = update.run(spark, cfg, root, segment)
        assert not result.already_applied
        assert os.path.exists(root.updated_marker(segment))

        assert_every_table(spark, root)
        fetched = {r["url"]: r for r in spark.read.parquet(root.fetched(segment)).filter(F.col("kind") == "url").collect()}
        rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
        for url, r in fetched.items():  # every result applied once, every outlink known
            assert rows[url]["segment_id"] == segment and rows[url]["lease_until"] is None
            assert set(r["outlinks"] or []) <= set(rows)
        assert {u for u, r in fetched.items() if r["fetch_status"] == "ok"} == {
            u for u in fetched if rows[u]["status"] == "fetched"}
        index = spark.read.format("delta").load(root.warc_index).filter(F.col("segment_id") == segment).count()
        assert index == sum(1 for r in fetched.values() if r["warc_file"])
        index_files = {r["warc_file"] for r in spark.read.format("delta").load(root.warc_index).collect()}
        assert index_files == set(os.listdir(root.warc_dir))  # every WARC file indexed
        with_text = {u for u, r in fetched.items()
                     if r["fetch_status"] == "ok" and r["simhash"] is not None and r["text_hash"] is not None}
        dups = {r["url"] for r in spark.read.parquet(root.dedup_result(segment)).collect()}
        canonical = {r["url"] for r in spark.read.format("delta").load(root.dedup_pages)
                     .filter(F.col("segment_id") == segment).collect()}
        banded = {r["url"] for r in spark.read.format("delta").load(root.dedup_bands).collect()}
        assert canonical and canonical == with_text - dups and canonical <= banded
    finally:
        web.stop()
