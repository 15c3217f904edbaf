"""The push inbox of change hints (crawl/crawldb/hints.py): a small append-only Delta table,
<crawl_root>/hints, and its consumption by generate.

The table (HINTS_SCHEMA): one row per hinted URL per push — url, url_hash, host, host_bucket
(as in the crawldb), hinted_at (when the hint arrived), source (what pushed it: "push" for
``deltacrawl hint``). ``deltacrawl hint`` only appends (a blind append never conflicts with
another commit, so hints can arrive while any step runs); generate is its only reader.

Consumption (``consume_hints``, called by generate before it chooses): the rows of the versions
after the last consumed one (<crawl_root>/hints/_consumed, a marker naming that version) are
read through the table's change feed, one row per URL (its latest hint) is MERGEd into the
crawldb (a known URL due at the hint's time when crawl.crawldb.hints.HINT_APPLIES_SQL says so,
an unknown one inserted while its host's total budget has room: discovery.max_urls_per_host_total
or an override's max_urls_total, as for discovered links), the hinted hosts' url_count is counted again from the crawldb, and then
the marker moves to the version read. A hint for a URL leased to a segment at that moment is not
applied but appended to the inbox again, as it was: that segment's update is about to set the
URL's next fetch from its own answer, which may be older than the hint, and the next generate
decides with that answer in the crawldb (HINT_APPLIES_SQL: applied if our copy predates the hint). A step that dies between the commit and the marker leaves
the marker behind: the next generate reads those hints again, and applying a hint twice changes
nothing (the crawldb rows already say what the hints asked), so every hint counts once and none
is lost. A change feed that no longer reaches back to the marker (the log was cleaned up) is
replaced by the whole table, for the same reason.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from crawl.config import Config
from crawl.crawldb.hints import HINT_APPLIES_SQL
from crawl.crawldb.in_memory import within_budget_rule
from crawl.crawldb.status import new_url_state
from crawl.net.urls import host_bucket, host_of, url_hash
from jobs.engine.column_ops import COLUMN_OPS
from jobs.engine.discover import host_total_cap, split_known
from jobs.engine.crawl_root import CrawlRoot, read_marker, write_marker
from jobs.engine.errors import ConcurrentStepError, describe_failure, is_commit_conflict
from jobs.engine.logs import step_logger
from jobs.engine.reads import read_host_state, read_url_state
from jobs.engine.schemas import URL_STATE_SCHEMA, from_epoch_col
from jobs.engine.tables import CHANGE_FEED_PROPERTY, check_not_foreign, table_version
from jobs.engine.writes import merge_counts, recount_url_counts

HINTS_SCHEMA = StructType([
    StructField("url", StringType(), False),
    StructField("url_hash", LongType(), False),
    StructField("host", StringType(), False),
    StructField("host_bucket", IntegerType(), False),
    StructField("hinted_at", TimestampType(), False),
    StructField("source", StringType(), False),
])
PUSH_SOURCE = "push"
_KEY = "t.host_bucket = s.host_bucket AND t.url_hash = s.url_hash AND t.url = s.url"


def hints_path(root: CrawlRoot) -> str:
    return f"{root.root}/hints"


def consumed_marker(root: CrawlRoot) -> str:
    # inside the table's folder: Delta and VACUUM leave files whose names start with "_" alone
    return f"{hints_path(root)}/_consumed"


def ensure_hints_table(spark: SparkSession, root: CrawlRoot) -> None:
    """Create the hints table if missing, with its change feed on from the first version (the
    consumption reads the versions it has not seen through it)."""
    path = hints_path(root)
    if DeltaTable.isDeltaTable(spark, path):
        return
    check_not_foreign(spark, path)
    (DeltaTable.createIfNotExists(spark).location(path).addColumns(HINTS_SCHEMA)
     .comment("deltacrawl hints: URLs site owners said changed, consumed by generate")
     .property(CHANGE_FEED_PROPERTY, "true").execute())


def append_hints(spark: SparkSession, cfg: Config, root: CrawlRoot, urls: list[str], now: float,
                 source: str = PUSH_SOURCE) -> None:
    """Append ``urls`` (normalised and filtered: crawl.crawldb.hints.parse_hint_lines), hinted at ``now``."""
    buckets = cfg.crawldb.host_buckets
    rows = [(u, url_hash(u), host_of(u), host_bucket(host_of(u), buckets), float(now), source) for u in urls]
    schema = StructType([f if f.name != "hinted_at" else StructField("hinted_at", DoubleType(), False)
                         for f in HINTS_SCHEMA.fields])
    frame = spark.createDataFrame(rows, schema).withColumn("hinted_at", from_epoch_col(F.col("hinted_at")))
    ensure_hints_table(spark, root)
    frame.select(*HINTS_SCHEMA.fieldNames()).write.format("delta").mode("append").save(hints_path(root))


@dataclass
class HintsConsumed:
    version: int | None = None  # the hints table's version read (None: no table, or nothing new)
    hinted: int = 0             # distinct URLs in the hints read
    made_due: int = 0           # known URLs made due
    inserted: int = 0           # unknown URLs inserted
    over_budget: int = 0        # unknown URLs not inserted: their host holds all the URLs it may

    def summary(self) -> str:
        return (f"hints up to version {self.version}: {self.hinted} URLs, {self.made_due} known made due, "
                f"{self.inserted} new" + (f", {self.over_budget} new ones over their host's total budget "
                                          "(discovery.max_urls_per_host_total) left out" if self.over_budget else ""))


def _latest_per_url(rows: DataFrame) -> DataFrame:
    latest = Window.partitionBy("host_bucket", "url_hash", "url").orderBy(F.col("hinted_at").desc())
    return rows.withColumn("_n", F.row_number().over(latest)).filter(F.col("_n") == 1).drop("_n")


def _unread_hints(spark: SparkSession, path: str, after: int | None, upto: int) -> tuple[DataFrame, int]:
    """(one row per URL: its latest hint, how many) of versions ``after`` + 1 … ``upto``, read
    through the change feed; all of them when ``after`` is None, or when the feed no longer reaches
    back that far (its log cleaned up: the hints applied again change nothing). Cached."""
    if after is not None:
        changes = None
        try:
            changes = _latest_per_url(
                spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", after + 1)
                .option("endingVersion", upto).load(path)
                .filter(F.col("_change_type") == "insert").select(*HINTS_SCHEMA.fieldNames())).cache()
            return changes, changes.count()
        except Exception as exc:  # logged below; every hint is read instead, which changes nothing twice
            if changes is not None:
                changes.unpersist()
            step_logger("generate").warning("the hints' change feed from version %d is not readable (%s): "
                                            "reading every hint, which changes nothing twice", after + 1,
                                            describe_failure(exc))
    every = _latest_per_url(spark.read.format("delta").option("versionAsOf", upto).load(path)).cache()
    return every, every.count()


def consume_hints(spark: SparkSession, cfg: Config, root: CrawlRoot) -> HintsConsumed:
    """Apply the hints not consumed yet to the crawldb (module docstring); nothing without a
    hints table or new versions."""
    path = hints_path(root)
    if not DeltaTable.isDeltaTable(spark, path):
        return HintsConsumed()
    upto = table_version(spark, path)
    marker = read_marker(spark, consumed_marker(root))
    after = int(marker) if marker and marker.isdigit() else None
    if after is not None and after > upto:
        after = None  # the table was made anew since (removed by hand): read every hint, applied twice is no harm
    if after == upto:
        return HintsConsumed()
    hints, hinted = _unread_hints(spark, path, after, upto)
    try:
        made_due = inserted = over_budget = 0
        if hinted:
            now = time.time()
            within, over_budget = _within_host_budgets(spark, cfg, root, hints)
            made_due, inserted = _merge_hints(spark, cfg, root, within, now)
            # counted, not added: hints read twice give the same value
            recount_url_counts(spark, root, hints)
            _hints_for_leased_urls_again(spark, root, hints, now)
    finally:
        hints.unpersist()
    write_marker(spark, consumed_marker(root), f"{upto}\n")
    result = HintsConsumed(upto, hinted, made_due, inserted, over_budget)
    step_logger("generate").info("%s", result.summary())
    return result


def _leased(now: float) -> Column:
    """The crawldb row ``t`` is leased to a segment at ``now`` (epoch seconds)."""
    return F.col("t.lease_until").isNotNull() & (F.col("t.lease_until") > from_epoch_col(F.lit(now)))


def _hints_for_leased_urls_again(spark: SparkSession, root: CrawlRoot, hints: DataFrame, now: float) -> int:
    """Append the hints for URLs leased at ``now`` to the inbox again (module docstring); how many.
    A blind append: it never conflicts, and read twice (a generate that died before its marker)
    it is only applied, or carried, once more."""
    leased = (hints.alias("s").join(read_url_state(spark, root).alias("t"), ["host_bucket", "url_hash", "url"])
              .filter(_leased(now)).select(*[F.col(f"s.{c}").alias(c) if c not in ("host_bucket", "url_hash", "url")
                                             else F.col(c) for c in HINTS_SCHEMA.fieldNames()])).cache()
    try:
        count = leased.count()
        if count:
            leased.write.format("delta").mode("append").save(hints_path(root))
            step_logger("generate").info("%d hints for URLs leased to a segment kept for the next generate", count)
        return count
    finally:
        leased.unpersist()


def _within_host_budgets(spark: SparkSession, cfg: Config, root: CrawlRoot,
                         hints: DataFrame) -> tuple[DataFrame, int]:
    """(the hints to merge, how many were left out): every hint for a known URL, and those for
    unknown URLs while their host's total budget has room (discovery.max_urls_per_host_total or an
    override's max_urls_total, beside hostdb's url_count), the latest hinted first, as update
    keeps discovered links within it (jobs/engine/discover.py). A push of a million URLs of one
    host is otherwise a trap that bypasses the cap."""
    unknown, known = split_known(hints, read_url_state(spark, root))
    counts = read_host_state(spark, root).select("host_bucket", "host", "url_count")
    latest_first = Window.partitionBy("host").orderBy(F.col("hinted_at").desc(), F.col("url"))
    ranked = (unknown.join(counts, ["host_bucket", "host"], "left")
              .withColumn("_keep", within_budget_rule(F.row_number().over(latest_first), host_total_cap(cfg),
                                                      F.col("url_count"), COLUMN_OPS))
              .select(*HINTS_SCHEMA.fieldNames(), "_keep").cache())
    try:
        over = ranked.filter(~F.col("_keep")).count()
        if not over:
            return hints, 0
        kept = ranked.filter(F.col("_keep")).drop("_keep")
        return known.select(*HINTS_SCHEMA.fieldNames()).unionByName(kept).localCheckpoint(), over
    finally:
        ranked.unpersist()


def _merge_hints(spark: SparkSession, cfg: Config, root: CrawlRoot, hints: DataFrame,
                 now: float) -> tuple[int, int]:
    """(made due, inserted): one MERGE of the hints into the crawldb; a leased URL is left as it
    is (``_hints_for_leased_urls_again``)."""
    # a new URL: crawl.crawldb.status.new_url_state's row (a seed's: depth 0, inject.seed_score),
    # due at the hint's time
    template = new_url_state("", "", 0, 0, 0, cfg.inject.seed_score, 0.0)
    values: dict[str, Any] = {f.name: F.lit(template.get(f.name)).cast(f.dataType) for f in URL_STATE_SCHEMA.fields}
    values.update({c: F.col(f"s.{c}") for c in ("url", "url_hash", "host", "host_bucket")})
    values.update(discovered_at=F.col("s.hinted_at"), next_fetch_at=F.col("s.hinted_at"))
    try:
        counts = merge_counts(DeltaTable.forPath(spark, root.crawldb).alias("t")
                              .merge(hints.alias("s"), _KEY)
                              .whenMatchedUpdate(condition=F.expr(HINT_APPLIES_SQL) & ~_leased(now),
                                                 set={"next_fetch_at": F.col("s.hinted_at")})
                              .whenNotMatchedInsert(values=values)
                              .execute())
    except Exception as exc:
        if not is_commit_conflict(exc):
            raise
        raise ConcurrentStepError("another step committed to the crawldb while generate applied the pushed "
                                  "hints: nothing was applied; run generate again") from None
    return counts["updated"], counts["inserted"]
