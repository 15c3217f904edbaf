"""maintain — compact, purge, vacuum and checkpoint the crawl root's tables; expire old segments.

Inputs:   the Delta tables of <crawl_root> that exist (crawldb, hostdb, warc_index, dedup/pages,
          dedup/bands, cycles, hints), <crawl_root>/segments/, <crawl_root>/warc/ (its unfinished and
          unindexed files).
Outputs:  per table, in this order:
          1. table properties from [maintain] (one commit, only when they differ):
             delta.deletedFileRetentionDuration = maintain.vacuum_retain_hours,
             delta.logRetentionDuration = maintain.log_retain_days, delta.checkpointInterval =
             maintain.checkpoint_interval;
          2. OPTIMIZE: bin-packing compaction of small files (per host_bucket partition for the
             crawldb and hostdb; no ZORDER: measured in docs/decisions.md "Maintenance" — at one file
             per bucket it changes nothing a lookup reads and rewrites every bucket on every run);
             files carrying deletion vectors are rewritten without the deleted rows;
          3. REORG TABLE ... APPLY (PURGE) where deletion vectors are left after 2;
          4. VACUUM with RETAIN maintain.vacuum_retain_hours (Delta's retention check stays on);
          5. a checkpoint of the newest version, so readers (Spark, delta-rs, DuckDB) replay no log.
          Then segments: an updated segment (marker _updated) older than maintain.segment_retain_days
          is deleted; one never updated whose lease has expired ("abandoned") likewise, only past that
          retention; a segment any crawldb URL is still leased to is never deleted. Then WARC
          leftovers (local *.warc.gz.open files, S3 in-progress uploads) started more than
          generate.lease_s ago are removed (crawl.fetch.warc_store.sweep_unfinished), and so are complete
          WARC files as old that nothing indexes or will index, of segments not in flight
          (unindexed_warc: left by a task attempt or a fetch run that died). On stdout: one row per
          table (files and MB before / after, deletion vectors purged, files vacuumed) and what
          happened to segments, leftovers and unindexed files. --dry-run prints the same plan and
          changes nothing.
Guard:    maintain refuses (exit 2, one line) while a step holds the crawl root: when a segment is in
          flight (not updated, and crawldb URLs are leased to it: fetch, dedup or update may run on
          it at any moment), or when the crawldb's or hostdb's newest commit by a step is younger
          than maintain.quiet_s (read from the Delta log, no Spark job). There is no lock: a step
          started after this check is not blocked. Delta's optimistic concurrency then makes the
          two conflict, never corrupt the table: the one committing second fails with a
          ConcurrentModificationException (ConcurrentDeleteReadException when it read files the
          other removed, e.g. a MERGE after OPTIMIZE; MetadataChangedException after the property
          commit), exits 3, and is simply run again (every step is safe to re-run).
Re-run:   safe: a second run finds little to compact, nothing to purge, and vacuums what the first
          one's rewrite left once the retention has passed.
Exit:     0 done · 2 bad input, or refused because a step holds the crawl root · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/maintain.py --crawl-root /data/crawl [--dry-run]
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawl.config import Config
from crawl.crawldb.segment_ids import segment_time
from crawl.fetch.warc_store import WarcStore, remove_files, segment_of_file, sweep_unfinished, unindexed_files, warc_store
from crawl.s3 import is_s3_uri
from jobs.engine.runtime import run_spark_step
from jobs.engine.errors import EXIT_OK, UserError
from jobs.engine.logs import log_step, step_logger
from jobs.engine.crawl_root import CrawlRoot, check_segment_id, delete_path, list_segments, path_exists
from jobs.engine.schemas import from_epoch_col
from jobs.engine.hint_inbox import hints_path
from jobs.engine.tables import latest_snapshot, table_exists

# Operations maintain itself commits: they do not count as "a step wrote recently".
MAINTENANCE_OPERATIONS = ("OPTIMIZE", "VACUUM START", "VACUUM END", "REORG", "SET TBLPROPERTIES")
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# VACUUM lists a table's folder with this many Spark tasks; Spark's default is 10,000, which made a
# VACUUM of a table of a few dozen files take minutes on 2 cores. spark.shuffle_partitions is used.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@dataclass
class TableResult:
    name: str
    files_before: int
    bytes_before: int
    dvs_before: int
    files_after: int | None = None      # None: dry run
    bytes_after: int | None = None
    dvs_purged: int = 0
    files_vacuumed: int | None = None   # dry run: files VACUUM would delete
    properties_set: bool = False


@dataclass
class SegmentPlan:
    segment_id: str
    state: str          # updated · abandoned (never updated, lease expired) · in_flight · leased (updated, leases left)
    age_days: float
    leased_urls: int
    delete: bool


@dataclass
class MaintainResult:
    dry_run: bool
    tables: list[TableResult] = field(default_factory=list)
    segments: list[SegmentPlan] = field(default_factory=list)
    leftovers: int = 0
    unindexed: int = 0      # complete WARC files nothing indexes, removed (unindexed_warc)
    blockers: list[str] = field(default_factory=list)  # dry run: why a real run would refuse now

    @property
    def segments_removed(self) -> list[str]:
        return [s.segment_id for s in self.segments if s.delete]

    def summary(self) -> str:
        verb = "would compact" if self.dry_run else "compacted"
        before = sum(t.files_before for t in self.tables)
        after = "?" if self.dry_run else sum(t.files_after or 0 for t in self.tables)
        return (f"{verb} {len(self.tables)} tables ({before} -> {after} files), "
                f"{'would remove' if self.dry_run else 'removed'} {len(self.segments_removed)} segments "
                f"and {self.leftovers} WARC leftovers and {self.unindexed} unindexed WARC files")


# --------------------------------------------------------------------------- what maintain looks at

def maintained_tables(root: CrawlRoot) -> list[tuple[str, str]]:
    # the hint inbox grows by one small file per push: compacting it never loses an unconsumed
    # hint (OPTIMIZE adds no change-feed rows; a feed that no longer reaches back to the consumed
    # marker after VACUUM is replaced by the whole table, jobs/engine/hint_inbox.py)
    return [("crawldb", root.crawldb), ("hostdb", root.hostdb), ("warc_index", root.warc_index),
            ("dedup/pages", root.dedup_pages), ("dedup/bands", root.dedup_bands), ("cycles", root.cycles),
            ("hints", hints_path(root))]


def file_stats(spark: SparkSession, path: str) -> tuple[int, int, int]:
    """(data files, bytes, files with a deletion vector) of the newest version, from Delta's own
    file list (the snapshot's add actions): what a reader has to open."""
    files = DataFrame(latest_snapshot(spark, path).allFiles().toDF(), spark)
    row = files.agg(F.count("*").alias("n"), F.sum("size").alias("bytes"),
                    F.count("deletionVector").alias("dvs")).collect()[0]
    return int(row["n"]), int(row["bytes"] or 0), int(row["dvs"])


def table_properties(cfg: Mapping[str, Any]) -> dict[str, str]:
    """The retention and checkpoint properties maintain keeps on every table (conf/defaults.toml
    [maintain] says what they promise)."""
    cfg = Config.of(cfg)
    return {"delta.deletedFileRetentionDuration": f"interval {cfg.maintain.vacuum_retain_hours} hours",
            "delta.logRetentionDuration": f"interval {cfg.maintain.log_retain_days} days",
            "delta.checkpointInterval": str(cfg.maintain.checkpoint_interval)}


def _properties_differ(spark: SparkSession, path: str, wanted: Mapping[str, str]) -> bool:
    configuration = latest_snapshot(spark, path).metadata().configuration()
    return any(not configuration.contains(k) or str(configuration.apply(k)) != v for k, v in wanted.items())


def _last_step_commit_age(spark: SparkSession, path: str, now: float, quiet_s: float) -> float | None:
    """Seconds since the newest commit of the table made by anything but maintain itself (None:
    only maintain's). The newest commit's time comes from the snapshot (no Spark job); only when
    that one is younger than ``quiet_s`` is the history read, to skip maintain's own commits (a
    second maintain right after a first must not refuse)."""
    age = now - int(latest_snapshot(spark, path).timestamp()) / 1000.0
    if age >= quiet_s:
        return age
    history = (DeltaTable.forPath(spark, path).history(20)
               .select(F.unix_millis("timestamp").alias("ms"), "operation").collect())
    for row in history:  # newest first
        if row["operation"] not in MAINTENANCE_OPERATIONS:
            return now - row["ms"] / 1000.0
    return None


def leased_by_segment(spark: SparkSession, root: CrawlRoot, now: float) -> dict[str, int]:
    """crawldb URLs whose lease is still in force, per segment."""
    if not table_exists(spark, root.crawldb):
        return {}
    rows = (spark.read.format("delta").load(root.crawldb)
            .filter(F.col("lease_until") > from_epoch_col(F.lit(now)))
            .groupBy("segment_id").agg(F.count("*").alias("n")).collect())
    return {r["segment_id"]: int(r["n"]) for r in rows if r["segment_id"]}


def plan_segments(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, now: float) -> list[SegmentPlan]:
    cfg = Config.of(cfg)
    retain_s = cfg.maintain.segment_retain_days * 86400
    leased = leased_by_segment(spark, root, now)
    plans = []
    for segment_id in list_segments(spark, root):
        try:
            check_segment_id(segment_id)
        except UserError:
            continue  # not a folder generate made: not ours to delete
        age_s = now - segment_time(segment_id)
        updated = path_exists(spark, root.updated_marker(segment_id))
        n = leased.get(segment_id, 0)
        state = ("leased" if n else "updated") if updated else ("in_flight" if n else "abandoned")
        plans.append(SegmentPlan(segment_id, state, age_s / 86400, n, delete=n == 0 and age_s > retain_s))
    return plans


def blockers(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, segments: list[SegmentPlan],
             now: float) -> list[str]:
    """Why maintain must not run now (empty: it may)."""
    cfg = Config.of(cfg)
    found = [f"segment {s.segment_id} is in flight ({s.leased_urls} URLs leased to it, not updated): fetch, "
             f"dedup or update may write at any moment" for s in segments if s.state == "in_flight"]
    quiet_s = cfg.maintain.quiet_s
    if quiet_s > 0:
        for name, path in (("crawldb", root.crawldb), ("hostdb", root.hostdb)):
            if table_exists(spark, path):
                age = _last_step_commit_age(spark, path, now, quiet_s)
                if age is not None and age < quiet_s:
                    found.append(f"the {name} was written {age:.0f} s ago (less than maintain.quiet_s = "
                                 f"{quiet_s:g} s): a step may still be running")
    return found


def warc_leftovers(cfg: Mapping[str, Any], store: WarcStore, now: float, dry_run: bool) -> int:
    """Unfinished WARC files (local .open files, S3 uploads) started more than generate.lease_s ago:
    removed (or, dry run, counted)."""
    cfg = Config.of(cfg)
    older_than_s = cfg.generate.lease_s
    if dry_run:
        return sum(1 for leftover in store.unfinished() if leftover.started_at < now - older_than_s)
    return sweep_unfinished(store, older_than_s=older_than_s, now=now)


def unindexed_warc(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, store: WarcStore,
                   in_flight: set[str], now: float, dry_run: bool) -> list[str]:
    """Complete WARC files nothing indexes or will index (crawl.fetch.warc_store.unindexed_files), of
    segments not in flight, written more than generate.lease_s ago (as for leftovers: a fetch
    started on a segment whose lease had expired may still be running): a file is wanted while
    warc_index names it, or while the segment's committed fetch results (not yet updated) name
    it; any other file of a finished, abandoned or deleted segment was closed by a task attempt or
    a fetch run that died. Removed (dry run: listed only); returns their names."""
    cfg = Config.of(cfg)
    cutoff = now - cfg.generate.lease_s
    names = [name for name, written_at in store.finished().items() if written_at < cutoff]
    segments = {s for s in map(segment_of_file, names) if s is not None} - in_flight
    if not segments:
        return []
    wanted: dict[str, set[str]] = {s: set() for s in segments}
    if table_exists(spark, root.warc_index):
        for r in (spark.read.format("delta").load(root.warc_index)
                  .filter(F.col("segment_id").isin(sorted(segments))).select("segment_id", "warc_file")
                  .distinct().collect()):
            wanted[r["segment_id"]].add(r["warc_file"])
    for segment_id in sorted(segments):
        if (path_exists(spark, root.fetched(segment_id) + "/_SUCCESS")
                and not path_exists(spark, root.updated_marker(segment_id))):
            wanted[segment_id] |= {r["warc_file"] for r in spark.read.parquet(root.fetched(segment_id))
                                   .filter((F.col("kind") == "url") & F.col("warc_file").isNotNull())
                                   .select("warc_file").distinct().collect()}
    unwanted = unindexed_files(names, wanted)
    if unwanted and not dry_run:
        removed = remove_files(store, unwanted)
        step_logger("maintain").info("removed %d complete WARC files that nothing indexes (of task attempts or "
                                     "fetch runs that died): %s", removed,
                                     ", ".join(unwanted[:3]) + (", ..." if len(unwanted) > 3 else ""))
    return unwanted


# --------------------------------------------------------------------------- what maintain does

@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Spark SQL settings for the statements inside only; the previous values come back after."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def maintain_table(spark: SparkSession, cfg: Mapping[str, Any], name: str, path: str, dry_run: bool,
                   zorder_by: str | None = None) -> TableResult:
    cfg = Config.of(cfg)
    log = step_logger("maintain")
    files, nbytes, dvs = file_stats(spark, path)
    result = TableResult(name, files, nbytes, dvs)
    retain_h = cfg.maintain.vacuum_retain_hours
    table = f"delta.`{path}`"
    listing = str(cfg.spark.shuffle_partitions)
    if dry_run:
        # the real run sets the table's retention first; here Delta's check would compare with the
        # old one, so it is off for this listing only (a DRY RUN deletes nothing)
        with session_settings(spark, {RETENTION_CHECK: "false", LISTING_PARALLELISM: listing}):
            result.files_vacuumed = spark.sql(f"VACUUM {table} RETAIN {retain_h} HOURS DRY RUN").count()
        result.properties_set = _properties_differ(spark, path, table_properties(cfg))
        return result
    wanted = table_properties(cfg)
    if _properties_differ(spark, path, wanted):
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ("
                  + ", ".join(f"'{k}' = '{v}'" for k, v in wanted.items()) + ")")
        result.properties_set = True
    log.info("%s: %d files, %.1f MB, %d with deletion vectors: OPTIMIZE", name, files, nbytes / 1e6, dvs)
    spark.sql(f"OPTIMIZE {table}" + (f" ZORDER BY ({zorder_by})" if zorder_by else "")).collect()
    if file_stats(spark, path)[2]:
        spark.sql(f"REORG TABLE {table} APPLY (PURGE)").collect()
    before_vacuum = int(latest_snapshot(spark, path).version())
    with session_settings(spark, {LISTING_PARALLELISM: listing}):
        spark.sql(f"VACUUM {table} RETAIN {retain_h} HOURS").collect()
    result.files_vacuumed = vacuumed_files(spark, path, before_vacuum)
    delta_log = DeltaTable.forPath(spark, path)._jdt.deltaLog()
    none = spark.sparkContext._jvm.scala.Option.empty()
    delta_log.checkpoint(latest_snapshot(spark, path), none)
    result.files_after, result.bytes_after, dvs_after = file_stats(spark, path)
    result.dvs_purged = dvs - dvs_after
    return result


def vacuumed_files(spark: SparkSession, path: str, after_version: int) -> int | None:
    """numDeletedFiles of the VACUUM END commit after ``after_version`` (None where Delta does not
    log VACUUM: spark.databricks.delta.vacuum.logging.enabled)."""
    for row in DeltaTable.forPath(spark, path).history(3).select("version", "operation", "operationMetrics").collect():
        if row["version"] > after_version and row["operation"] == "VACUUM END":
            return int((row["operationMetrics"] or {}).get("numDeletedFiles", 0))
    return None


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, dry_run: bool = False,
        now: float | None = None) -> MaintainResult:
    now = time.time() if now is None else now
    result = MaintainResult(dry_run)
    result.segments = plan_segments(spark, cfg, root, now)
    found = blockers(spark, cfg, root, result.segments, now)
    if found and not dry_run:
        raise UserError(f"refusing to maintain {root.root} while a step holds it: {found[0]}"
                        + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    result.blockers = found
    for name, path in maintained_tables(root):
        if table_exists(spark, path):
            result.tables.append(maintain_table(spark, cfg, name, path, dry_run))
    log = step_logger("maintain")
    for plan in result.segments:
        if plan.delete and not dry_run:
            log.info("segment %s (%s, %.1f days old): deleted", plan.segment_id, plan.state, plan.age_days)
            delete_path(spark, root.segment(plan.segment_id))
    if root.is_local or is_s3_uri(root.root):  # other roots (HDFS) hold no WARC files (fetch refuses them)
        store = warc_store(root.warc_dir, cfg)
        result.leftovers = warc_leftovers(cfg, store, now, dry_run)
        in_flight = {s.segment_id for s in result.segments if s.state == "in_flight"}
        result.unindexed = len(unindexed_warc(spark, cfg, root, store, in_flight, now, dry_run))
    return result


# --------------------------------------------------------------------------- report

def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}"


def format_result(result: MaintainResult) -> str:
    head = "dry run: nothing changed; what a run would do\n" if result.dry_run else ""
    lines = [f"{'table':<12} {'files before':>12} {'after':>6} {'MB before':>10} {'after':>7} "
             f"{'DV files':>8} {'purged':>6} {'vacuumed':>8}"]
    for t in result.tables:
        lines.append(f"{t.name:<12} {t.files_before:>12} {'-' if t.files_after is None else t.files_after:>6} "
                     f"{_mb(t.bytes_before):>10} {_mb(t.bytes_after):>7} {t.dvs_before:>8} "
                     f"{'-' if result.dry_run else t.dvs_purged:>6} "
                     f"{'?' if t.files_vacuumed is None else t.files_vacuumed:>8}")
    if not result.tables:
        lines.append("(no tables)")
    by_state: dict[str, int] = {}
    for s in result.segments:
        by_state[s.state] = by_state.get(s.state, 0) + 1
    states = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in sorted(by_state.items())) or "none"
    removed = result.segments_removed
    verb = "to remove" if result.dry_run else "removed"
    lines.append(f"segments: {len(result.segments)} ({states}); {verb}: {len(removed)}"
                 + (f" ({', '.join(removed[:5])}{', ...' if len(removed) > 5 else ''})" if removed else ""))
    lines.append(f"WARC leftovers {verb}: {result.leftovers}")
    lines.append(f"unindexed WARC files {verb}: {result.unindexed}")
    for reason in result.blockers:
        lines.append(f"a run now would refuse: {reason}")
    return head + "\n".join(lines)


# --------------------------------------------------------------------------- command

def configure(parser) -> None:
    parser.description = ("Compact, purge deletion vectors, vacuum and checkpoint the crawl root's tables; remove "
                          "old segments and unfinished or unindexed WARC files (options maintain.*). Refuses while a step "
                          "holds the crawl root.")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")


def step(spark, cfg, root, args) -> int:
    result, _ = log_step("maintain", "dry run" if args.dry_run else "",
                         lambda: run(spark, cfg, root, dry_run=args.dry_run), lambda r: r.summary())
    print(format_result(result), flush=True)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_spark_step("deltacrawl maintain", argv, configure, step)


if __name__ == "__main__":
    sys.exit(main())
