"""inject — normalise seed URLs and insert the new ones into the crawldb.

Inputs:   a local seeds file (one URL per line, # comments; see crawl/crawldb/seeds.py).
Outputs:  new rows in <crawl_root>/crawldb (status unfetched, depth 0, due now); the seeds'
          hosts' url_count in <crawl_root>/hostdb, counted from the crawldb (a row for a host
          new to the hostdb); creates the crawldb and hostdb if they do not exist. Run on its own, a row in <crawl_root>/cycles
          (jobs/engine/tracking.py).
Re-run:   safe. A URL already in the crawldb is left untouched (MERGE ... WHEN NOT MATCHED);
          url_count is counted again, not added to.
Exit:     0 done · 2 seeds file missing/unreadable or without a single valid URL, or seeds of
          hosts that are not loopback IP literals while fetch.user_agent names no contact of the
          operator's (crawl/fetch/identity.py; nothing written) · 3 unexpected failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/inject.py seeds.txt --crawl-root /data/crawl
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from crawl.config import Config
from crawl.crawldb.seeds import SeedParse, read_seed_file
from crawl.crawldb.status import new_url_state
from crawl.fetch.identity import identity_refusal
from crawl.net.addresses import AddressPolicy
from crawl.net.urls import host_bucket, host_of, url_hash
from jobs.engine.commit_info import writes_commits
from jobs.engine.runtime import add_run_options, reading_input_file, run_spark_step
from jobs.engine.errors import EXIT_OK, UserError
from jobs.engine.logs import step_logger
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.schemas import URL_STATE_SCHEMA, URL_STATE_TIMES, epoch_schema, from_epoch
from jobs.engine.tables import ensure_tables
from jobs.engine.tracking import record_step
from jobs.engine.writes import merge_counts, recount_url_counts

MERGE_KEY = "t.host_bucket = s.host_bucket AND t.url_hash = s.url_hash AND t.url = s.url"
SHOWN_REJECTS = 5


@dataclass
class InjectResult:
    valid: int
    inserted: int
    already_known: int
    rejected: int
    duplicates: int

    def summary(self) -> str:
        return (f"{self.valid} valid seeds, {self.inserted} new, {self.already_known} already known, "
                f"{self.rejected} bad lines skipped, {self.duplicates} duplicate lines")


def seed_rows(urls: list[str], cfg: Config, now: float) -> list[dict[str, Any]]:
    buckets = cfg.crawldb.host_buckets
    score = cfg.inject.seed_score
    rows = []
    for url in urls:
        host = host_of(url)
        rows.append(new_url_state(url, host, host_bucket(host, buckets), url_hash(url), 0, score, now))
    return rows


def rows_to_url_state(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    schema = epoch_schema(URL_STATE_SCHEMA)
    df = spark.createDataFrame([tuple(r[f] for f in schema.fieldNames()) for r in rows], schema)
    return from_epoch(df, URL_STATE_TIMES)


def load_seeds(path: str, cfg: Config | None = None) -> SeedParse:
    """The seeds file parsed; URLs longer than discovery.max_url_length (as for links) are bad lines.
    Seeds of hosts that are not loopback IP literals need fetch.user_agent to name the operator
    (crawl/fetch/identity.py)."""
    with reading_input_file("seeds", path):
        parsed = read_seed_file(path, cfg.discovery.max_url_length if cfg is not None else None)
    for number, text, reason in parsed.rejected[:SHOWN_REJECTS]:
        step_logger("inject").warning("skipped line %d: %r: %s", number, text, reason)
    if len(parsed.rejected) > SHOWN_REJECTS:
        step_logger("inject").warning("... and %d more bad lines", len(parsed.rejected) - SHOWN_REJECTS)
    if not parsed.urls:
        raise UserError(f"no valid URL in seeds file {path} ({len(parsed.rejected)} bad lines)")
    if cfg is not None:
        refusal = identity_refusal(map(host_of, parsed.urls), cfg.fetch.user_agent)
        if refusal is not None:
            raise UserError(refusal)
        warn_refused_seeds(parsed.urls, cfg)
    return parsed


def warn_refused_seeds(urls: list[str], cfg: Config) -> None:
    """Seeds whose host the address guard refuses as written (an internal IP literal, a metadata
    name, a bad port) are injected all the same, and their fetch records blocked_address with the
    reason, as for any URL (a name's addresses are only known when it is fetched); one line says so
    now, with what would allow them."""
    policy = AddressPolicy.from_config(cfg)
    refused = [(url, r) for url in urls
               if (r := policy.host_refusal(host_of(url), url.split("://", 1)[0])) is not None]
    if refused:
        url, refusal = refused[0]
        step_logger("inject").warning(
            "%d seed(s) point where the address guard refuses to go (first: %s, %s): they will be recorded as "
            "blocked_address; to crawl an intranet on purpose, list its networks in fetch.allow_networks",
            len(refused), url, refusal.message())


@writes_commits("inject")
def run(spark: SparkSession, cfg: Config, root: CrawlRoot, seeds_path: str,
        now: float | None = None, parsed: SeedParse | None = None) -> InjectResult:
    if parsed is None:
        parsed = load_seeds(seeds_path, cfg)  # validate before touching the crawl root
    now = time.time() if now is None else now
    ensure_tables(spark, root)
    source = rows_to_url_state(spark, seed_rows(parsed.urls, cfg, now))
    hosts = spark.read.format("delta").load(root.hostdb)
    if "held_back" in hosts.columns:  # a seed of a host held back takes its reason at once (crawl/crawldb/held_back.py)
        reasons = hosts.select("host_bucket", "host", hosts["held_back"].alias("_reason"))
        source = (source.drop("held_back").join(reasons, ["host_bucket", "host"], "left")
                  .withColumnRenamed("_reason", "held_back").select(*source.columns))
    crawldb = DeltaTable.forPath(spark, root.crawldb)
    inserted = merge_counts(crawldb.alias("t").merge(source.alias("s"), MERGE_KEY)
                            .whenNotMatchedInsertAll().execute())["inserted"]
    recount_url_counts(spark, root, source)  # seeds count in url_count (a re-run counts again)
    result = InjectResult(valid=len(parsed.urls), inserted=inserted, already_known=len(parsed.urls) - inserted,
                          rejected=len(parsed.rejected), duplicates=parsed.duplicates)
    return result


def configure(parser) -> None:
    parser.description = "Normalise seed URLs and insert the new ones into the crawldb."
    parser.add_argument("seeds", metavar="SEEDS_FILE", help="file with one URL per line")
    add_run_options(parser)


def main(argv: list[str] | None = None) -> int:
    parsed: list[SeedParse] = []

    def step(spark, cfg, root, args) -> int:
        record_step(spark, cfg, root, "inject", lambda: run(spark, cfg, root, args.seeds, parsed=parsed[0]),
                    args, f"seeds {args.seeds}")
        return EXIT_OK
    # the seeds are read and checked before a JVM is started
    return run_spark_step("deltacrawl inject", argv, configure, step,
                          lambda args, cfg: parsed.append(load_seeds(args.seeds, cfg)), creates_root=True)


if __name__ == "__main__":
    sys.exit(main())
