"""crawl — inject once, then N cycles of generate → fetch → update in one SparkSession, then stats.

Inputs:   a seeds file (--seeds), or --with-devweb: start the bundled local test web on
          loopback (devweb.* options) and seed from it.
Outputs:  everything the individual steps write; the stats table at the end; after each cycle,
          one row per step in <crawl_root>/cycles (Delta: counts and seconds; inject is cycle 0);
          an MLflow run (params = the effective config, metrics per cycle with step = cycle
          number, stats/figures/config JSON and PNG charts as artifacts) in the store
          --mlflow-uri / mlflow.tracking_uri names, by default <crawl_root>/mlflow.db (see
          jobs/engine/tracking.py; "off" disables it, and a tracking failure never fails the crawl).
Overlap:  with crawl.overlap (--overlap), cycles overlap so the fetcher is not idle while the
          other steps run: segment N is fetched on a thread of its own while the driver runs
          dedup and update of segment N - 1 and then generates segment N + 1 from what is not
          leased (N's URLs are), and N + 1's fetch starts as soon as N's ends. Every step that
          commits to the crawldb (generate's lease, update's MERGE) stays on the driver's own
          thread, one after another, so no two of them ever race; fetch only reads it. Politeness
          holds across the overlap: a segment's first request to a host keeps the gap after the
          last request of the segment fetched before (jobs/fetch.py recent_contacts). Crash
          safety is each step's own (markers, leases): a crawl that dies leaves at most two
          segments not updated, and the next crawl finishes them (Re-run).
Re-run:   safe: inject is idempotent, each cycle makes a new segment, each run has a new crawl id
          (its cycles rows are appended, earlier ones stay). Stops early (exit 0) when nothing
          is due any more. Picks up where a crawl whose driver died left off: the driver writes
          its owner record (segments/<id>/_owner: host, boot id, pid and its start time, crawl
          id) into each segment it generates and rewrites it every crawl.owner_stale_s / 10 s
          until the segment is updated; before its first cycle a crawl takes over each segment
          not updated whose owner is gone (on this machine: its process is; elsewhere: no
          rewrite for crawl.owner_stale_s), or that has no owner (a standalone generate's) and
          whose lease ended, by renewing its lease (one commit, conditional on the lease read
          before the owner: two crawls never take one segment, nor one a live crawl's), and
          fetches what the dead run did not commit (from its request log), dedups and updates
          it, one log line per segment, its steps in cycle 0 (jobs/engine/segment_owners.py;
          docs/architecture.md "Crash safety"). `deltacrawl fetch`/`dedup`/`update` of each
          segment not updated are the recovery by hand, as after any death.
Exit:     0 done · 2 bad input · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/crawl_cycles.py --seeds seeds.txt --cycles 3 --crawl-root /data/crawl
"""
from __future__ import annotations

import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from crawl.config import Config, with_values
from crawl.crawldb.segment_owner import this_process
from crawl.tracking import INJECT_CYCLE
from jobs import dedup, fetch, generate, inject, stats, update
from jobs.engine.commit_info import set_crawl_cycle
from jobs.engine.runtime import run_main
from jobs.engine.errors import EXIT_OK, UserError
from jobs.engine.logs import step_logger
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.segment_owners import OwnedSegments, segment_leases, take_over, unfinished_segments
from jobs.engine.tables import snapshots_built_meanwhile
from jobs.engine.tracking import CrawlRecorder, CrawlTracker, OneLineWarnings, new_crawl_id


@dataclass
class CrawlResult:
    cycles_run: int
    crawl_id: str = ""
    segments: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    step_seconds: list[dict[str, float]] = field(default_factory=list)
    mlflow_run_id: str | None = None


def run(spark: SparkSession, cfg: Config, root: CrawlRoot, seeds_path: str, cycles: int,
        tracker: CrawlTracker | None = None) -> CrawlResult:
    """Inject, ``cycles`` cycles, stats. Each step's figures go to the cycles table after each
    cycle and, with a ``tracker`` (what main() opens from --mlflow-uri / mlflow.*), to MLflow."""
    result = CrawlResult(cycles_run=0, crawl_id=new_crawl_id())
    recorder = CrawlRecorder(spark, root, result.crawl_id, tracker, OneLineWarnings("deltacrawl crawl"))
    if tracker is not None:
        tracker.start(result.crawl_id, cfg, {"deltacrawl.crawl_root": root.root, "deltacrawl.seeds": seeds_path,
                                             "deltacrawl.cycles_requested": str(cycles)})
        result.mlflow_run_id = tracker.run_id
    status = "FAILED"
    owned = OwnedSegments(spark, root, this_process(result.crawl_id), float(cfg.crawl.owner_stale_s)).start()
    try:
        set_crawl_cycle(spark, result.crawl_id, INJECT_CYCLE)  # every Delta commit says its cycle
        recorder.run_step(INJECT_CYCLE, "inject", lambda: inject.run(spark, cfg, root, seeds_path), seeds_path)
        _finish_dead_segments(spark, cfg, root, recorder, owned)
        recorder.end_cycle()
        if cfg.crawl.overlap:
            _overlapping_cycles(spark, cfg, root, cycles, recorder, result, owned)
        else:
            _cycles_in_turn(spark, cfg, root, cycles, recorder, result, owned)
        result.stats = stats.run(spark, cfg, root)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except Exception:
        recorder.end_cycle()  # the steps of the failed cycle that did finish (no-op if none)
        raise
    finally:
        owned.stop()
        recorder.close(cancel=status == "KILLED")  # its figures are complete before the run ends
        set_crawl_cycle(spark, None, None)
        if tracker is not None:
            if status == "FINISHED":
                tracker.finish(recorder.cycles, result.stats, {"deltacrawl.cycles_run": str(result.cycles_run),
                                                               "deltacrawl.segments": ",".join(result.segments)})
            else:
                tracker.abort(status)
    return result


def _cycle_done(recorder: CrawlRecorder, result: CrawlResult, cycle: int, cycles: int, segment: str) -> None:
    timings = {f.step: f.seconds for f in recorder.end_cycle(cycle)}
    result.cycles_run = cycle
    result.segments.append(segment)
    result.step_seconds.append(timings)
    step_logger("crawl").info("cycle %d/%d done in %.1f s (%s)", cycle, cycles, sum(timings.values()),
                              ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))


def _finish_dead_segments(spark: SparkSession, cfg: Config, root: CrawlRoot, recorder: CrawlRecorder,
                          owned: OwnedSegments) -> None:
    """Before its first cycle, the crawl finishes the segments a crawl driver that died left (no
    _updated marker, owner gone: jobs/engine/segment_owners.py), oldest first, in turn: fetch what
    the dead run did not commit (the fetch re-reads its request log), dedup, update. Their steps
    count in cycle 0, with inject."""
    segments = unfinished_segments(spark, root)
    leases = segment_leases(spark, root, segments)  # before any owner record is read (take_over)
    for segment in segments:
        taken = take_over(spark, root, segment, leases.get(segment), owned, float(cfg.generate.lease_s))
        if taken is None:
            continue
        step_logger("crawl").info("segment %s: %s: finishing it (%s)", segment, taken.why, ", ".join(taken.steps()))
        for name in taken.steps():
            module = {"fetch": fetch, "dedup": dedup, "update": update}[name]
            recorder.run_step(INJECT_CYCLE, name, lambda: module.run(spark, cfg, root, segment), f"segment {segment}")
        owned.done(segment)


def _cycles_in_turn(spark: SparkSession, cfg: Config, root: CrawlRoot, cycles: int,
                    recorder: CrawlRecorder, result: CrawlResult, owned: OwnedSegments) -> None:
    """generate → fetch → dedup → update, one cycle after the other."""
    for cycle in range(1, cycles + 1):
        set_crawl_cycle(spark, result.crawl_id, cycle)
        gen = recorder.run_step(cycle, "generate", lambda: generate.run(spark, cfg, root, owner=owned))
        if gen.segment_id is None:
            recorder.end_cycle()
            step_logger("crawl").info("cycle %d: nothing due, stopping", cycle)
            break
        segment = gen.segment_id
        # fetch mostly waits on hosts (politeness): meanwhile the driver builds the snapshots
        # of the tables dedup and update read next (their versions do not change during it)
        with snapshots_built_meanwhile(spark, (root.dedup_pages, root.dedup_bands, root.crawldb, root.hostdb,
                                               root.warc_index)):
            recorder.run_step(cycle, "fetch", lambda: fetch.run(spark, cfg, root, segment), f"segment {segment}")
        for name, module in (("dedup", dedup), ("update", update)):
            recorder.run_step(cycle, name, lambda: module.run(spark, cfg, root, segment), f"segment {segment}")
        owned.done(segment)
        _cycle_done(recorder, result, cycle, cycles, segment)


def overlap_fetch_config(spark: SparkSession, cfg: Config) -> Config:
    """The config fetch runs with while other steps run beside it: with fetch.tasks = 0 (Spark's
    default parallelism) it takes half the task slots, so the driver's steps have the rest (its
    tasks mostly wait on hosts: fewer tasks, each with more hosts, lose little)."""
    if cfg.fetch.tasks:
        return cfg
    return with_values(cfg, {"fetch.tasks": max(1, spark.sparkContext.defaultParallelism // 2)})


def _overlapping_cycles(spark: SparkSession, cfg: Config, root: CrawlRoot, cycles: int,
                        recorder: CrawlRecorder, result: CrawlResult, owned: OwnedSegments) -> None:
    """crawl.overlap: fetch N on its own thread while the driver runs dedup and update of N - 1 and
    generate N + 1 (module docstring)."""
    fetch_cfg = overlap_fetch_config(spark, cfg)
    crawl_id = result.crawl_id

    def finish(cycle: int, segment: str) -> None:
        set_crawl_cycle(spark, crawl_id, cycle)
        for name, module in (("dedup", dedup), ("update", update)):
            recorder.run_step(cycle, name, lambda: module.run(spark, cfg, root, segment), f"segment {segment}")
        owned.done(segment)
        _cycle_done(recorder, result, cycle, cycles, segment)

    def generate_next(cycle: int) -> generate.GenerateResult:
        set_crawl_cycle(spark, crawl_id, cycle)
        return recorder.run_step(cycle, "generate", lambda: generate.run(spark, cfg, root, owner=owned))

    cycle = 1
    gen = generate_next(cycle)
    pending: tuple[int, str] | None = None  # fetched, not updated yet
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltacrawl-fetch") as fetcher:
        while True:
            if gen.segment_id is None:
                if pending is None:
                    recorder.end_cycle(cycle)
                    step_logger("crawl").info("cycle %d: nothing due, stopping", cycle)
                    break
                # nothing due but what the segment in hand holds (at the start of a crawl every
                # known URL may be in it): update it, then generate again, in turn
                finish(*pending)
                pending = None
                gen = generate_next(cycle)
                continue
            segment = gen.segment_id
            fetching = fetcher.submit(recorder.run_step, cycle, "fetch",
                                      lambda s=segment: fetch.run(spark, fetch_cfg, root, s), f"segment {segment}")
            try:
                if pending is not None:
                    finish(*pending)
                    pending = None
                gen = None
                if cycle < cycles:
                    gen = generate_next(cycle + 1)
            finally:
                fetching.result()  # a failed fetch raises here, once the driver's steps are done
            pending = (cycle, segment)
            if gen is None:
                break
            cycle += 1
        if pending is not None:
            finish(*pending)


def start_devweb(cfg: Config, crawl_root: str, stack: ExitStack) -> tuple[str, dict[str, Any]]:
    """Start the bundled test web for this run and write its seeds file; return the file's path and
    the options a crawl of it sets (DevWeb.crawl_config: its networks, which the address guard would
    refuse, a user agent naming the test web, and, named, its DNS server and CA file)."""
    from crawl.devweb.web import DevWeb
    try:
        web = DevWeb.from_config(cfg)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        web.start()
    except OSError as exc:
        raise UserError(f"cannot start the test web on port {cfg.devweb.port}: {exc.strerror or exc} "
                        f"(try --conf devweb.port=0)") from None
    stack.callback(web.stop)
    if "://" in crawl_root and not crawl_root.startswith("file://"):
        # the seeds file is read on this machine: beside the crawl root only when that is local
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="deltacrawl-devweb-"))
    else:
        folder = crawl_root.removeprefix("file://")
    path = os.path.join(folder, "devweb-seeds.txt")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# seeds of the bundled local test web (written by deltacrawl crawl --with-devweb)\n")
        fh.writelines(url + "\n" for url in web.demo_seed_urls())
    step_logger("crawl").info("test web serving %d hosts on loopback (%s ... %s)%s", len(web.seed_urls()),
                              web.seed_urls()[0], web.seed_urls()[-1],
                              f", and hosts that misbehave: {', '.join(web.seeded_hostile)}" if web.seeded_hostile else "")
    return path, web.crawl_config(cfg)


def configure(parser) -> None:
    parser.description = "Inject seeds, then run N generate/fetch/update cycles and print stats."
    parser.add_argument("--seeds", metavar="FILE", help="seeds file (one URL per line)")
    parser.add_argument("--cycles", type=int, default=3, help="number of cycles (default: 3)")
    parser.add_argument("--overlap", action="store_true",
                        help="overlap the cycles: fetch one segment while the others are updated and generated "
                             "(crawl.overlap)")
    parser.add_argument("--with-devweb", action="store_true",
                        help="start the bundled local test web and crawl it (seeds default to its hosts)")
    parser.add_argument("--mlflow-uri", metavar="URI",
                        help="MLflow tracking URI for this crawl's run, or 'off' (default: mlflow.tracking_uri, "
                             "else <crawl_root>/mlflow.db; see conf/defaults.toml [mlflow])")


def main(argv: list[str] | None = None) -> int:
    def checks(args, cfg) -> None:
        """Bad input is refused before a crawl root is made or a JVM started."""
        if args.cycles < 1:
            raise UserError("--cycles must be at least 1")
        if not args.seeds and not args.with_devweb:
            raise UserError("give --seeds FILE (or --with-devweb to crawl the bundled test web)")
        if args.seeds:
            inject.load_seeds(args.seeds, cfg)
        elif args.with_devweb:
            from crawl.devweb.web import DevWeb
            try:
                DevWeb.from_config(cfg)  # devweb.hostile's names: checked, not started
            except ValueError as exc:
                raise UserError(str(exc)) from None
        # whether this run makes the crawl root (run_main does, after these checks): a test web
        # that cannot start (its port taken) must not leave an empty one behind
        local = args.crawl_root.removeprefix("file://")
        args.root_made_here = local if "://" not in local and not os.path.exists(local) else None

    def body(args, cfg) -> int:
        from jobs.engine.session import build_spark
        if args.overlap:
            cfg = with_values(cfg, {"crawl.overlap": True})
        with ExitStack() as stack:  # the test web (if any) lives as long as the crawl
            seeds = args.seeds
            if not seeds:  # --with-devweb (checks() refused a run with neither)
                try:
                    seeds, options = start_devweb(cfg, args.crawl_root, stack)
                except UserError:
                    if args.root_made_here:
                        with suppress(OSError):  # only if still empty: nothing was written
                            os.rmdir(args.root_made_here)
                    raise
                cfg = with_values(cfg, options)
            tracker = CrawlTracker.open(cfg, args.crawl_root, args.mlflow_uri, "deltacrawl crawl")
            run(build_spark(cfg, args.crawl_root), cfg, CrawlRoot(args.crawl_root), seeds, args.cycles, tracker)
        return EXIT_OK
    return run_main("deltacrawl crawl", argv, configure, body, creates_root=True, precheck=checks)


if __name__ == "__main__":
    sys.exit(main())
