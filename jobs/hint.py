"""hint — push change hints: URLs a site owner says changed (IndexNow-style).

Inputs:   a local file of URLs, one per line (the seeds file's format: # comments, anything after
          the first whitespace ignored; crawl/crawldb/seeds.py), and an existing crawl root.
Outputs:  rows appended to <crawl_root>/hints (Delta, append-only: jobs/engine/hint_inbox.py), one per
          URL kept: normalised like seeds, and kept by the URL filters of [discovery] (a hint is
          judged like a link). Nothing else is touched: the next generate applies them — a known
          URL due now (unless fetched since the hint), an unknown one inserted as new — and
          robots.txt, the address guard and politeness judge them at fetch time like any URL.
          Hints are consumed by generate rather than update so that they count in the very next
          cycle, even when no segment is waiting for update.
Re-run:   safe: hints of the same URLs again change nothing more (a URL is due once).
          An append never conflicts with a running step.
Exit:     0 hints appended · 2 file missing/unreadable/not text, no crawldb, not one valid URL
          (nothing written; bad lines are counted, the first few named), or hosts that are not
          loopback IP literals while fetch.user_agent names no contact (crawl/fetch/identity.py)
          · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/hint.py changed.txt --crawl-root /data/crawl
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from crawl.config import Config
from crawl.crawldb.hints import HintParse, parse_hint_lines
from crawl.crawldb.seeds import check_encoding
from crawl.fetch.identity import identity_refusal
from crawl.net.filters import LinkFilter
from crawl.net.urls import host_of
from jobs.engine.runtime import reading_input_file, run_spark_step
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.errors import EXIT_OK, UserError
from jobs.engine.hint_inbox import append_hints
from jobs.engine.logs import log_step, step_logger
from jobs.engine.tables import table_exists


@dataclass
class HintResult:
    accepted: int
    rejected: int
    duplicates: int

    def summary(self) -> str:
        return (f"{self.accepted} hinted URLs appended (applied by the next generate), {self.rejected} bad lines "
                f"skipped, {self.duplicates} duplicate lines")


def load_hints(path: str, cfg: Config) -> HintParse:
    """The hint file parsed and filtered; a clear UserError for a file that cannot be used, or for
    hosts that are not loopback IP literals while fetch.user_agent names no contact
    (crawl/fetch/identity.py)."""
    with reading_input_file("hints", path):
        with open(path, "rb") as raw:
            check_encoding(raw.read(4096))
        with open(path, encoding="utf-8", errors="replace") as fh:
            parsed = parse_hint_lines(fh, LinkFilter.from_config(cfg), cfg.discovery.max_url_length)
    bad = parsed.describe_rejected()
    if not parsed.urls:
        raise UserError(f"no valid URL in hints file {path}" + (f": {bad}" if bad else " (it has no URL lines)"))
    refusal = identity_refusal(map(host_of, parsed.urls), cfg.fetch.user_agent)
    if refusal is not None:
        raise UserError(refusal)
    if bad:
        step_logger("hint").warning("%s", bad)
    return parsed


def run(spark: SparkSession, cfg: Config, root: CrawlRoot, path: str, now: float | None = None,
        parsed: HintParse | None = None) -> HintResult:
    if parsed is None:
        parsed = load_hints(path, cfg)  # validate before touching the crawl root
    if not table_exists(spark, root.crawldb):
        raise UserError(f"no crawldb in {root.root}: run 'deltacrawl inject SEEDS_FILE' first")
    append_hints(spark, cfg, root, parsed.urls, time.time() if now is None else now)
    return HintResult(len(parsed.urls), len(parsed.rejected), parsed.duplicates)


def configure(parser) -> None:
    parser.description = ("Append change hints (URLs that changed, one per line) for the next generate: known URLs "
                          "become due, new ones are added.")
    parser.add_argument("urls", metavar="URLS_FILE", help="file with one URL per line")


def main(argv: list[str] | None = None) -> int:
    parsed: list[HintParse] = []

    def step(spark, cfg, root, args) -> int:
        log_step("hint", f"hints {args.urls}", lambda: run(spark, cfg, root, args.urls, parsed=parsed[0]),
                 lambda result: result.summary())
        return EXIT_OK
    # the file is read and checked before a JVM is started
    return run_spark_step("deltacrawl hint", argv, configure, step,
                          lambda args, cfg: parsed.append(load_hints(args.urls, cfg)))


if __name__ == "__main__":
    sys.exit(main())
