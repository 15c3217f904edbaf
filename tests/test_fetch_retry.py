"""A fetch task that dies is retried, and the retry is safe (issue 14, item 1) and loses nothing
(issue 32, finding 5): the request log (crawl/fetch/requestlog.py) read and written; a retried
attempt against the real test web keeping the gap to the dead attempt's last request and requesting
its lost pages again; and a real kill -9 of the pyspark worker in the middle of a refetch cycle's
fetch, followed by update and a check of every table and of the server's own request log."""
from __future__ import annotations

import glob
import os
import signal
import threading
import time
from collections import Counter

from crawl.devweb.web import DevWeb
from crawl.fetch.fetcher import LOST_ANSWER, fetch_partition
from crawl.fetch.requestlog import RequestLog, log_name, read_earlier
from crawl.crawldb.status import FetchStatus as FS
from crawl.fetch.warc_read import read_record
from tests.conftest import make_config, write_seeds
from tests.politeness import TOLERANCE_S, requests_by_host
from tests.test_fetcher import cfg as fetcher_cfg
from tests.test_fetcher import host_urls, rows_for


def test_request_log_round_trip(tmp_path):
    folder = str(tmp_path / "requests")
    with RequestLog(folder, "20260101000000-aaaaaa", 3, 0) as first:
        assert first.earlier.files == 0 and not first.earlier.pages
        first.sent("robots", "h:1", "http://h:1/robots.txt", 0.5)
        first.sent("page", "h:1", "http://h:1/a", 2.0)
        first.sent("sitemap", "h:2", "http://h:2/sitemap.xml", 1.0)
    with open(first.path, "ab") as fh:  # the writer died in the middle of a line
        fh.write(b"1.0\tpage\th:1\t9.0\thttp://h:1/torn")
    (tmp_path / "requests" / "notes.txt").write_text("1.0\tpage\th:1\t9.0\thttp://h:1/foreign\n")
    second = RequestLog(folder, "20260101000000-aaaaaa", 3, 1)
    second.sent("page", "h:1", "http://h:1/b")
    second.close()
    seen = second.earlier
    assert seen.files == 1 and seen.pages == {"http://h:1/a": 1}  # not its own, not torn, not foreign
    assert set(seen.last_at) == {"h:1", "h:2"} and time.time() - 60 < seen.last_at["h:1"] <= time.time()
    assert seen.gap_s == {"h:1": 2.0, "h:2": 1.0}
    # a later run reads both; once a run has completed, its pages count for timing only
    later = read_earlier(folder, None)
    assert later.pages == {"http://h:1/a": 1, "http://h:1/b": 1}
    assert not later.given_up("http://h:1/a")
    done = read_earlier(folder, None, completed_run="20260101000000-aaaaaa")
    assert not done.pages and set(done.last_at) == {"h:1", "h:2"}
    assert log_name("r", 7, 2) == "r-00007-2.log"


def test_the_last_logged_request_counts_as_under_way_until_the_log_is_read():
    """A logged send may not have reached the server before its attempt died: its contact is the
    moment the retry read the log, unless the request must have ended (timed out) before that."""
    from crawl.fetch.requestlog import EarlierRequests
    now = time.time()
    earlier = EarlierRequests(last_at={"recent": now - 1.0, "old": now - 100.0}, read_at=now)
    assert earlier.last_contact("recent", 60.0) == now
    assert earlier.last_contact("old", 60.0) == now - 40.0
    assert earlier.last_contact("never", 60.0) is None


def test_a_retried_attempt_keeps_the_gap_and_requests_the_lost_pages_again(tmp_path):
    """Two attempts died (their logs written here): the first requested robots.txt and two pages
    of each host a moment ago, the second the first of those pages again. The retry waits out each
    host's gap from that moment, requests again the page one attempt died with (its answer was
    lost), leaves the page two attempts died with (a suspect) due, and fetches the rest."""
    delay = 1.0
    web = DevWeb(hosts=4, pages_per_host=6, port=0, seed=3, crawl_delay_s=1.5)
    web.start()
    try:
        hosts = [0, 1, 2, 3]
        urls = [u for i in hosts for u in host_urls(web, i, pages=3)]
        rows = rows_for(urls)
        folder = str(tmp_path / "requests")
        suspects, lost = set(), set()

        def gap_of(host):  # what the dead attempt knew once it had read robots.txt
            index = web.host_names.index(host)
            return max(delay, web.crawl_delay_s) if web.robots_kind(index) == "crawl_delay" else delay

        with RequestLog(folder, "run", 0, 0) as dead, RequestLog(folder, "run", 0, 1) as second:
            for i in hosts:
                host = web.host_names[i]
                dead.sent("robots", host, f"http://{host}/robots.txt", delay)
                first, other = [r["url"] for r in rows if r["host"] == host][:2]
                for url in (first, other):
                    dead.sent("page", host, url, gap_of(host))
                second.sent("page", host, first, gap_of(host))
                suspects.add(first)
                lost.add(other)
        last_logged = read_earlier(folder).last_at
        assert set(last_logged) == {web.host_names[i] for i in hosts}
        time.sleep(0.6)  # the dead attempts' last requests may have been under way until they died
        retry = RequestLog(folder, "run", 0, 2)
        assert retry.earlier.pages == {**{u: 2 for u in suspects}, **{u: 1 for u in lost}}
        out = fetch_partition(rows, fetcher_cfg(fetch__delay_s=delay), request_log=retry)
        retry.close()
    finally:
        web.stop()
    by_url = {r["url"]: r for r in out if r["kind"] == "url"}
    assert set(by_url) == {r["url"] for r in rows}
    for url in suspects:
        assert by_url[url]["fetch_status"] == FS.NOT_ATTEMPTED and by_url[url]["error"] == LOST_ANSWER
    assert all(r["fetch_status"] != FS.NOT_ATTEMPTED for u, r in by_url.items() if u not in suspects), by_url
    assert all(by_url[u]["fetch_status"] == FS.OK for u in lost)
    log = web.requests()
    seen_paths = Counter(f"http://{e['host']}{e['path']}" for e in log)
    assert not suspects & set(seen_paths), "a page two attempts died with was requested again"
    assert lost <= set(seen_paths), "a page whose answer died with an attempt was not requested again"
    assert max(seen_paths.values()) == 1
    for host, entries in requests_by_host(log).items():
        gap = gap_of(host)
        # the retry's first request (robots.txt, before it knows the Crawl-delay again): at least
        # the gap the dead attempt kept after the dead attempt's last request
        assert entries[0]["ts"] >= last_logged[host] + gap - TOLERANCE_S, host
        # ... and after the moment the dead attempt's last request may have reached the server:
        # the retry only knows it had died by the time it read the log
        assert entries[0]["ts"] >= retry.earlier.read_at + gap - TOLERANCE_S, host
        gaps = [b["ts"] - a["ts"] for a, b in zip(entries, entries[1:])]
        assert not gaps or min(gaps) >= gap - TOLERANCE_S, (host, gaps)
    # the retry's own log names every request it sent (robots.txt and pages), each once
    own = [line.split("\t") for line in open(retry.path).read().splitlines()]
    assert Counter(kind for _t, kind, _h, _gap, _u in own) == Counter(
        "robots" if e["path"] == "/robots.txt" else "page" for e in log)


def _request_logs(root, segment: str) -> dict[str, list[str]]:
    """Every attempt's request log of the segment, for a failure's message."""
    return {os.path.basename(p): open(p).read().splitlines() for p in sorted(glob.glob(
        os.path.join(root.request_log_dir(segment), "*.log")))}


def _worker_holding(pattern: str) -> int | None:
    """The pid of the process (a pyspark worker) with a file matching ``pattern`` open."""
    wanted = set(glob.glob(pattern))
    if not wanted:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    return int(pid)
        except OSError:
            continue
    return None


def test_killed_fetch_worker_is_retried_and_loses_nothing(spark, root, tmp_path):
    """kill -9 of the Python worker running a fetch task of a refetch cycle, after it has
    requested a few pages (issue 32, finding 5): Spark retries the task; the retry writes its own
    WARC files, requests again the pages whose answers died with the worker, conditionally (the
    crawldb's ETag), and keeps every gap; every URL of the segment ends with a result whose WARC
    record is readable; update then leaves the crawldb, the hostdb counters and the WARC index
    consistent, with every page fetched or not modified."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from jobs import fetch, generate, inject, update
    from tests.fixed_web import FixedWeb
    from tests.test_update_recovery import assert_consistent

    delay = 0.3
    web = FixedWeb(hosts=2).start()
    try:
        urls = [web.put(h, f"/p/{k}.html", f"<html><body><p>page {h}/{k}</p></body></html>")
                for h in range(2) for k in range(10)]
        cfg = make_config(fetch__delay_s=delay, fetch__tasks=1, sitemaps__enabled=False)
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", urls))
        first = generate.run(spark, cfg, root).segment_id
        fetch.run(spark, cfg, root, first)
        update.run(spark, cfg, root, first)
        etags = {r["url"]: r["etag"] for r in spark.read.format("delta").load(root.crawldb).collect()}
        assert set(etags) == set(urls) and all(etags.values())  # validators to send next time
        DeltaTable.forPath(spark, root.crawldb).update(set={"next_fetch_at": "timestamp'2000-01-01'"})
        before = len(web.requests())

        segment = generate.run(spark, cfg, root).segment_id
        logs = os.path.join(root.request_log_dir(segment), "*-00000-0.log")
        outcome: dict = {}
        runner = threading.Thread(target=lambda: outcome.update(result=fetch.run(spark, cfg, root, segment)),
                                  daemon=True)
        runner.start()
        killed = None
        deadline = time.monotonic() + 600
        while killed is None and runner.is_alive() and time.monotonic() < deadline:
            pages = sum(line.split(b"\t")[1] == b"page" for path in glob.glob(logs)
                        for line in open(path, "rb").read().splitlines())
            pid = _worker_holding(logs) if pages >= 3 else None
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed = pid
            time.sleep(0.05)
        runner.join(timeout=900)
        assert killed is not None, "the fetch ended before its worker could be killed"
        assert "result" in outcome, "fetch failed: the killed task was not retried"

        log = web.requests()[before:]
        page_requests = [e for e in log if e["path"] != "/robots.txt"]
        # every request of the refetch cycle, the dead attempt's and the retry's, was conditional
        assert page_requests and all(e["inm"] == etags[f"http://{e['host']}{e['path']}"] for e in page_requests)
        assert all(e["status"] == 304 for e in page_requests)
        dead_log = "".join(open(path).read() for path in glob.glob(logs))
        repeated = {u for u, n in Counter(f"http://{e['host']}{e['path']}" for e in page_requests).items() if n > 1}
        assert max(Counter(f"http://{e['host']}{e['path']}" for e in page_requests).values()) <= 2
        assert all(url in dead_log for url in repeated), (repeated, _request_logs(root, segment))
        for host, entries in requests_by_host(log).items():
            gaps = [b["ts"] - a["ts"] for a, b in zip(entries, entries[1:])]
            assert not gaps or min(gaps) >= delay - TOLERANCE_S, (
                host, [(e["path"], round(e["ts"] - entries[0]["ts"], 4)) for e in entries],
                _request_logs(root, segment))

        fetched = spark.read.parquet(root.fetched(segment)).filter(F.col("kind") == "url").collect()
        assert sorted(r["url"] for r in fetched) == sorted(urls)  # each URL once: one attempt's rows
        assert {r["fetch_task"] for r in fetched} == {"0.1"}  # the retry's rows
        # nothing lost: the pages the dead attempt requested have their answers too
        assert {r["fetch_status"] for r in fetched} == {FS.NOT_MODIFIED}, [
            (r["url"], r["fetch_status"], r["error"]) for r in fetched if r["fetch_status"] != FS.NOT_MODIFIED]
        for r in fetched:
            assert "-00000-1-" in r["warc_file"]  # the retry's own WARC files
            record = read_record(os.path.join(root.local_path(root.warc_dir), r["warc_file"]), r["warc_offset"])
            assert record["target_uri"] == r["url"]
        assert not glob.glob(os.path.join(root.local_path(root.warc_dir), "*.open"))  # the dead one's swept

        update.run(spark, cfg, root, segment)
        rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
        assert all(rows[u]["status"] == "notmodified" and rows[u]["lease_until"] is None for u in urls)
        assert_consistent(spark, root)
    finally:
        web.stop()


def test_stale_request_logs_on_local_disks_are_swept(tmp_path):
    from crawl.fetch.requestlog import sweep_stale
    for name in ("old", "fresh", "current"):
        with RequestLog(str(tmp_path / name), "run", 0, 0) as log:
            log.sent("page", "h", "http://h/")
    old = time.time() - 7200
    for path in (tmp_path / "old", tmp_path / "old" / "run-00000-0.log", tmp_path / "current",
                 tmp_path / "current" / "run-00000-0.log"):
        os.utime(path, (old, old))
    assert sweep_stale(str(tmp_path), 3600, keep="current") == 1
    assert sorted(os.listdir(tmp_path)) == ["current", "fresh"]
    assert sweep_stale(str(tmp_path / "missing"), 3600, keep="x") == 0


def test_local_masters_retry_failed_tasks(spark):
    from jobs.engine.session import with_task_retries
    assert spark.sparkContext.master == "local[2, 4]"  # conftest asks for local[2]; the default is 4
    assert [with_task_retries(m, 4) for m in ("local", "local[*]", " local[ 3 ] ", "local[2,1]", "yarn",
                                              "spark://h:7077", "local-cluster[2,1,512]")] == [
        "local[1, 4]", "local[*, 4]", "local[3, 4]", "local[2,1]", "yarn", "spark://h:7077", "local-cluster[2,1,512]"]
    assert with_task_retries("local[2]", 1) == "local[2]"
