"""Overlapping cycles (crawl.overlap, issue 33): segment N is fetched while N - 1 is deduplicated
and updated and N + 1 generated. A real crawl of the test web over loopback HTTP, killed -9 in a
fetch and finished by the next crawl, whose own cycles overlap: checked from the server's log
(politeness across segments fetched back to back and across the kill, robots.txt at most twice
per host: the dead run's answer is lost) and from the crawl root (segments disjoint while leased, every one updated, counts
consistent). The kill is also the one of a fetch's driver once a task has closed a WARC file
(issue 35, item 2; tests/test_kill.py kills the cycle's other steps): the fetch that finishes the
segment removes the dead run's complete files and requests the dead run's pages once more."""
from __future__ import annotations

import glob
import os
from collections import Counter

from crawl.devweb.web import DevWeb
from jobs import cli
from jobs.engine.crawl_root import CrawlRoot, list_segments, path_exists
from tests.conftest import write_seeds
from tests.politeness import assert_polite

DELAY_S = 1.0  # a segment's fetch lasts seconds after its first WARC file is closed: the kill lands in it
CYCLES = 2  # the second crawl's own: the second is generated beside the first's fetch and fetched beside its update


def test_an_overlapped_crawl_killed_in_a_fetch_is_finished_by_the_next_crawl_whose_cycles_overlap(
        spark, tmp_path, capsys, monkeypatch):
    """Crash safety across the overlap (issue 49, item 8): `deltacrawl crawl --overlap` killed -9
    (driver, JVM and workers) while a segment's fetch is under way (a task has closed a WARC file,
    its results are not committed), the one before or after it possibly in flight too. The same command
    run again finds the dead driver's segments (their owner's process is gone: no waiting for the
    lease), finishes them, fetch, dedup and update, one line each, before its own cycles, which have
    URLs to generate ("nothing due" was what it said before). A fetchlist whose lease the kill
    left uncommitted is named and left alone. Then every other segment is updated, no URL is
    leased, every table is consistent (no URL twice, host counts as the crawldb implies, the WARC
    index naming complete records) and the hosts' gaps held from the server's side across the kill
    too. The second crawl's own cycles overlap (each segment's dedup begins while the next one is
    fetched) and its consecutive segments are disjoint (N + 1 is generated while N's URLs are
    leased). The fetch that finishes a dead segment (issue 35, item 2) removes the dead run's
    complete WARC files (no result names them, nothing would index them) and requests the dead
    run's pages once more (their answers died with it: issue 32, finding 5), so every URL of the
    segment ends with a result, and every WARC file left is indexed. (That a segment fetched
    before the previous one's update asks for robots.txt no more: the test below.)

    (One crawl root for the kill and the overlap: the overlap's checks hold for any crawl, and a
    crawl of its own cost a second run of the same cycles. One kill for a crawl's and a fetch's
    driver dying in a fetch: tests/test_kill.py's own killed fetch cost a cold JVM of its own.)"""
    from pyspark.sql import functions as F

    from jobs import fetch
    from tests.test_fetcher import host_urls
    from tests.test_kill import DELTACRAWL, assert_every_table, leased, run_and_kill, step_cli
    web = DevWeb(hosts=3, pages_per_host=16, port=0, seed=5, crawl_delay_s=0.0, links_per_page=3)
    web.start()
    try:
        root = CrawlRoot(str(tmp_path / "crawl"))
        # one task, one file per page (a file is closed when the next page is written), polite gaps:
        # seconds pass between the first closed file and the end of the fetch
        settings = dict(fetch__delay_s=DELAY_S, generate__top_n=6, generate__max_urls_per_host=2,
                        fetch__tasks=1, warc__max_file_bytes=1, sitemaps__enabled="false", mlflow__tracking_uri="off")
        options, env = step_cli(root, tmp_path, **settings)
        segments_dir = os.path.dirname(root.local_path(root.segment("20000101000000-000000")))

        warc_files = os.path.join(root.warc_dir, "*.warc.gz")

        def fetching() -> bool:  # a segment's fetch has closed a WARC file and not committed
            if not glob.glob(warc_files):
                return False
            for log in glob.glob(os.path.join(segments_dir, "*", "requests", "*.log")):
                segment = log.split(os.sep)[-3]
                try:
                    if os.path.getsize(log) and not os.path.exists(os.path.join(segments_dir, segment, "fetched",
                                                                                "_SUCCESS")):
                        return True
                except OSError:  # removed since it was listed
                    pass
            return False

        # many pages seeds: the second generate, beside the first fetch, has URLs to lease, and so
        # have the second crawl's cycles after the dead driver's two segments (6 URLs each)
        seeds = write_seeds(tmp_path / "seeds.txt", [u for i in range(3) for u in host_urls(web, i, pages=12)])
        assert run_and_kill([DELTACRAWL, "crawl", "--overlap", "--seeds", seeds, "--cycles", "2", *options],
                            fetching, env) == "killed"
        dead_warcs = {os.path.basename(p) for p in glob.glob(warc_files)}  # complete files of the dead run
        assert dead_warcs
        # the dead driver's segments holding a lease; a kill before the next segment's lease
        # committed leaves a fetchlist holding none, which fetch refuses and the rerun leaves
        held = set(leased(spark, root).values())
        dead = [s for s in list_segments(spark, root) if path_exists(spark, root.fetchlist(s))
                and not path_exists(spark, root.updated_marker(s))]
        finished = [s for s in dead if s in held]
        assert finished and any(not path_exists(spark, root.fetched(s) + "/_SUCCESS") for s in finished)
        capsys.readouterr()

        fetched_by = {}  # the fetch results of the second crawl, by segment (fetch.run itself runs)
        real_fetch = fetch.run

        def fetch_run(*args, **kwargs):
            result = real_fetch(*args, **kwargs)
            fetched_by[result.segment_id] = result
            return result
        monkeypatch.setattr(fetch, "run", fetch_run)
        assert cli.main(["crawl", "--overlap", "--seeds", seeds, "--cycles", str(CYCLES), *options]) == 0
        monkeypatch.undo()
        _, err = capsys.readouterr()
        assert "nothing due" not in err and f"cycle {CYCLES}/{CYCLES} done" in err, err
        for s in dead:  # one line each
            assert sum(f"segment {s}: its crawl driver is gone" in line for line in err.splitlines()) == 1, err
        segments = [s for s in list_segments(spark, root) if path_exists(spark, root.fetchlist(s))]
        assert set(dead) < set(segments)
        assert {s for s in segments if not path_exists(spark, root.updated_marker(s))} == set(dead) - set(finished)
        assert spark.read.format("delta").load(root.crawldb).filter("lease_until IS NOT NULL").count() == 0
        assert_every_table(spark, root)

        # the dead run's complete WARC files removed by the fetch that finished its segment, its
        # pages requested once more at most, every URL of the segment with a result
        assert not dead_warcs & set(os.listdir(root.warc_dir))
        assert sum(fetched_by[s].warc_removed for s in finished if s in fetched_by) >= len(dead_warcs)
        pages = Counter(f"http://{e['host']}{e['path']}" for e in web.requests() if e["path"] != "/robots.txt")
        assert max(pages.values()) <= 2, [u for u, n in pages.items() if n > 2]
        for s in finished:
            fetchlist = {r["url"] for r in spark.read.parquet(root.fetchlist(s)).collect()}
            outcomes = {r["url"]: r["fetch_status"] for r in spark.read.parquet(root.fetched(s))
                        .filter(F.col("kind") == "url").collect()}
            assert sorted(outcomes) == sorted(fetchlist) and "not_attempted" not in outcomes.values(), outcomes
        index_files = {r["warc_file"] for r in spark.read.format("delta").load(root.warc_index).collect()}
        assert index_files == set(os.listdir(root.warc_dir))  # every WARC file indexed

        # the second crawl's own cycles: fetched, disjoint while leased, overlapping
        own = [s for s in segments if s not in dead]
        assert len(own) == CYCLES
        for s in own:
            assert path_exists(spark, root.fetched(s) + "/_SUCCESS")
        urls = [{r["url"] for r in spark.read.parquet(root.fetchlist(s)).select("url").collect()} for s in own]
        for a, b in zip(urls, urls[1:]):
            assert a and not a & b  # N + 1 was generated while N's URLs were leased
        rows = spark.read.format("delta").load(root.cycles).collect()
        (crawl_id,) = {r["crawl_id"] for r in rows if (r["cycle"], r["step"]) == (CYCLES, "update")}
        steps = {(r["cycle"], r["step"]): r for r in rows if r["crawl_id"] == crawl_id}
        for k in range(1, CYCLES):
            fetch_next = steps[(k + 1, "fetch")]
            assert steps[(k, "dedup")]["started_at"].timestamp() < (
                fetch_next["started_at"].timestamp() + fetch_next["seconds"])

        # politeness from the server's side, across segments and the kill. A kill that lands after
        # the first segment's fetch has asked for robots.txt loses that answer with the rest of the
        # dead run's (tests/test_kill.py): the second crawl asks again. The gaps must hold either way.
        assert_polite(web, web.requests(), DELAY_S, robots_per_host=2)
    finally:
        web.stop()


def test_a_segment_fetched_right_after_another_keeps_the_gap_and_the_robots_txt(spark, root, tmp_path):
    """What makes the overlap polite (jobs/fetch.py recent_contacts): segment 2 is generated before
    segment 1's update and fetched the moment segment 1's fetch ends. Its first request to the host
    still waits the host's gap after segment 1's last one (the request log covers one segment's
    attempts only; before, the steps between two fetches happened to make the gap), and it does not
    ask for robots.txt or the sitemap again (segment 1 read them; the hostdb learns of them only at
    segment 1's update)."""
    from jobs import fetch, generate, inject
    from tests.conftest import make_config
    from tests.fixed_web import FixedWeb
    delay = 4.0  # longer than a fetch step takes to start
    web = FixedWeb(hosts=1).start()
    try:
        # a page per segment: the gap that matters is the one between them
        pages = [web.put(0, f"/p{i}.html", f"<html><body>page {i}</body></html>") for i in range(2)]
        cfg = make_config(fetch__delay_s=delay, fetch__delay_factor=0, fetch__tasks=1,
                          generate__top_n=1, generate__max_urls_per_host=1, generate__fill_budget="false")
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", pages))
        first = generate.run(spark, cfg, root).segment_id
        second = generate.run(spark, cfg, root).segment_id  # the other one: the first is leased
        assert first and second
        fetch.run(spark, cfg, root, first)
        fetch.run(spark, cfg, root, second)
        log = sorted(web.requests(), key=lambda e: e["ts"])
        assert [e["path"] for e in log].count("/robots.txt") == 1
        assert [e["path"] for e in log].count("/sitemap.xml") == 1
        paths = [e["path"] for e in log if e["path"] not in ("/robots.txt", "/sitemap.xml")]
        assert sorted(paths) == ["/p0.html", "/p1.html"]
        gaps = [b["ts"] - a["ts"] for a, b in zip(log, log[1:])]
        assert min(gaps) >= delay - 0.05, gaps  # request starts; every request here is short
    finally:
        web.stop()
