"""Whose a segment is (crawl/crawldb/segment_owner.py) and the take-over of a dead crawl driver's
segments (jobs/engine/segment_owners.py): a live crawl's segment is never taken, a standalone
generate's only once its lease ended, and a dead driver's at once. (The whole story, a real crawl
killed in a fetch and run again: tests/test_crawl_overlap.py.)"""
from __future__ import annotations

import dataclasses
import os
import time

from pyspark.sql import functions as F

from crawl.crawldb.segment_owner import SegmentOwner, owner_is_gone, process_start, this_process
from jobs import generate, inject
from jobs.engine.crawl_root import read_marker, write_marker
from jobs.engine.segment_owners import OwnedSegments, segment_leases, take_over, unfinished_segments
from crawl.config import with_values
from tests.conftest import write_seeds

HERE = SegmentOwner("crawler-1", "boot-a", 100, "5000", "crawl-x")


def test_an_owner_on_this_machine_is_gone_as_soon_as_its_process_is():
    owner = SegmentOwner("crawler-1", "boot-a", 42, "777", "crawl-y")
    assert not owner_is_gone(owner, HERE, 1e9, 600, running=lambda pid: True, started=lambda pid: "777")
    assert owner_is_gone(owner, HERE, 0, 600, running=lambda pid: False, started=lambda pid: "")
    # the pid is another process's now (its start time differs); unknown start times: alive
    assert owner_is_gone(owner, HERE, 0, 600, running=lambda pid: True, started=lambda pid: "778")
    assert not owner_is_gone(owner, HERE, 0, 600, running=lambda pid: True, started=lambda pid: "")


def test_an_owner_before_a_reboot_is_gone_and_one_elsewhere_when_its_heartbeat_is_stale():
    before_reboot = SegmentOwner("crawler-1", "boot-0", 42, "777", "")
    assert owner_is_gone(before_reboot, HERE, 0, 600, running=lambda pid: True, started=lambda pid: "777")
    elsewhere = SegmentOwner("crawler-2", "boot-b", 100, "5000", "")  # same pid: another machine's
    assert not owner_is_gone(elsewhere, HERE, 599, 600, running=lambda pid: False)
    assert owner_is_gone(elsewhere, HERE, 601, 600, running=lambda pid: True)


def test_owner_records_round_trip_and_this_process_is_alive_until_its_crawl_ends():
    me = this_process("crawl-z")
    assert SegmentOwner.parse(me.record()) == me and me.pid == os.getpid()
    assert me.pid_start == process_start(os.getpid()) != ""  # Linux: /proc says
    assert not owner_is_gone(me, this_process("other"), 1e9, 600)
    ended = dataclasses.replace(me, ended=True)  # a crawl that failed in a process that lives on
    assert SegmentOwner.parse(ended.record()) == ended and owner_is_gone(ended, this_process("other"), 0, 600)
    assert SegmentOwner.parse(None) is None and SegmentOwner.parse("leased by someone") is None


def test_a_live_crawls_segment_is_never_taken_a_dead_ones_at_once_a_standalone_ones_after_its_lease(
        spark, cfg, root, tmp_path):
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", [f"http://127.0.0.{h}:8000/p{i}.html"
                                                                      for h in (2, 3) for i in range(3)]))
    mine = OwnedSegments(spark, root, this_process("crawl-a"), 600)
    other_crawl = OwnedSegments(spark, root, this_process("crawl-b"), 600)
    cfg_one = with_values(cfg, {"generate.top_n": 2, "generate.max_urls_per_host": 1})
    live = generate.run(spark, cfg_one, root, owner=mine).segment_id
    standalone = generate.run(spark, cfg_one, root).segment_id
    assert live and standalone and unfinished_segments(spark, root) == sorted([live, standalone])
    leases = segment_leases(spark, root, [live, standalone])
    assert set(leases) == {live, standalone}
    assert take_over(spark, root, live, leases[live], other_crawl, 3600) is None  # its driver (this process) is alive
    assert take_over(spark, root, standalone, leases[standalone], other_crawl, 3600) is None  # no owner to ask

    def lease_until(segment):
        return {r["u"] for r in spark.read.format("delta").load(root.crawldb).filter(F.col("segment_id") == segment)
                .select(F.unix_micros("lease_until").alias("u")).collect()}

    # the live segment's driver dies: its record names a process that is not running any more
    # (this pid, started at another time: a pid used again)
    dead = SegmentOwner(mine.owner.host, mine.owner.boot_id, os.getpid(), "1", "crawl-a")
    write_marker(spark, root.owner_marker(live), dead.record())
    before = lease_until(live)
    taken = take_over(spark, root, live, leases[live], other_crawl, 3600)
    assert taken is not None and taken.steps() == ["fetch", "dedup", "update"] and "crawl-a" in taken.why
    [after] = lease_until(live)
    assert after > max(before)  # one lease, renewed
    assert SegmentOwner.parse(read_marker(spark, root.owner_marker(live))) == other_crawl.owner
    assert take_over(spark, root, live, after / 1e6, mine, 3600) is None  # now the other crawl's, alive
    # a crawl that read the lease before that take-over and the owner record after it (here: that
    # owner died too) renews nothing: the lease it read is no row's any more
    write_marker(spark, root.owner_marker(live), dead.record())
    assert take_over(spark, root, live, leases[live], mine, 3600) is None and lease_until(live) == {after}

    later = time.time() + float(cfg["generate.lease_s"]) + 60
    taken = take_over(spark, root, standalone, leases[standalone], other_crawl, 3600, now=later)
    assert taken is not None and "no crawl driver" in taken.why
