"""crawl — inject once, then N cycles of generate → fetch → update in one SparkSession, then stats.

Inputs:   a seeds file (--seeds), or --with-devweb: start the bundled local test web on
          loopback (devweb.* options) and seed from it.
Outputs:  everything the individual steps write; the stats table at the end.
Re-run:   safe: inject is idempotent, each cycle makes a new segment. Stops early (exit 0) when
          nothing is due any more.
Exit:     0 done · 2 bad input · 3 failure.
Example:  spark-submit --jars "$(deltacrawl jars)" jobs/crawl.py --seeds seeds.txt --cycles 3 --crawl-root /data/crawl
"""
from __future__ import annotations

if __name__ == "__main__":  # run as `spark-submit jobs/<step>.py`: import our packages, not sibling files
    import os as _os, sys as _sys
    _sys.path[0] = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))

import os
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Mapping

from pyspark.sql import SparkSession

from jobs import dedup, fetch, generate, inject, stats, update
from jobs.common import EXIT_OK, UserError, report, run_main
from jobs.tables import CrawlRoot


@dataclass
class CrawlResult:
    cycles_run: int
    segments: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    step_seconds: list[dict[str, float]] = field(default_factory=list)


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, seeds_path: str, cycles: int) -> CrawlResult:
    result = CrawlResult(cycles_run=0)
    inject.run(spark, cfg, root, seeds_path)
    for cycle in range(1, cycles + 1):
        timings: dict[str, float] = {}
        started = time.monotonic()
        gen = generate.run(spark, cfg, root)
        timings["generate"] = time.monotonic() - started
        if gen.segment_id is None:
            report(f"crawl: cycle {cycle}: nothing due, stopping")
            break
        started = time.monotonic()
        fetch.run(spark, cfg, root, gen.segment_id)
        timings["fetch"] = time.monotonic() - started
        started = time.monotonic()
        dedup.run(spark, cfg, root, gen.segment_id)
        timings["dedup"] = time.monotonic() - started
        started = time.monotonic()
        update.run(spark, cfg, root, gen.segment_id)
        timings["update"] = time.monotonic() - started
        result.cycles_run = cycle
        result.segments.append(gen.segment_id)
        result.step_seconds.append(timings)
        report(f"crawl: cycle {cycle}/{cycles} done in {sum(timings.values()):.1f}s "
               f"({', '.join(f'{k} {v:.1f}s' for k, v in timings.items())})")
    result.stats = stats.run(spark, cfg, root)
    return result


def start_devweb(cfg: Mapping[str, Any], crawl_root: str, stack: ExitStack) -> str:
    """Start the bundled test web for this run and write its seeds file; return the file's path."""
    from crawl.devweb import DevWeb
    web = DevWeb(hosts=int(cfg["devweb.hosts"]), pages_per_host=int(cfg["devweb.pages_per_host"]),
                 port=int(cfg["devweb.port"]), seed=int(cfg["devweb.seed"]),
                 crawl_delay_s=float(cfg["devweb.crawl_delay_s"]))
    try:
        web.start()
    except OSError as exc:
        raise UserError(f"cannot start the test web on port {cfg['devweb.port']}: {exc.strerror or exc} "
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
        fh.writelines(url + "\n" for url in web.seed_urls())
    report(f"crawl: test web serving {len(web.seed_urls())} hosts on loopback "
           f"({web.seed_urls()[0]} ... {web.seed_urls()[-1]})")
    return path


def configure(parser) -> None:
    parser.description = "Inject seeds, then run N generate/fetch/update cycles and print stats."
    parser.add_argument("--seeds", metavar="FILE", help="seeds file (one URL per line)")
    parser.add_argument("--cycles", type=int, default=3, help="number of cycles (default: 3)")
    parser.add_argument("--with-devweb", action="store_true",
                        help="start the bundled local test web and crawl it (seeds default to its hosts)")


def main(argv: list[str] | None = None) -> int:
    def body(args, cfg) -> int:
        from jobs.session import build_spark
        if args.cycles < 1:
            raise UserError("--cycles must be at least 1")
        if not args.seeds and not args.with_devweb:
            raise UserError("give --seeds FILE (or --with-devweb to crawl the bundled test web)")
        with ExitStack() as stack:  # the test web (if any) lives as long as the crawl
            seeds = args.seeds or start_devweb(cfg, args.crawl_root, stack)
            inject.load_seeds(seeds)  # fail fast, before a JVM is started
            run(build_spark(cfg, args.crawl_root), cfg, CrawlRoot(args.crawl_root), seeds, args.cycles)
        return EXIT_OK
    return run_main("deltacrawl crawl", argv, configure, body)


if __name__ == "__main__":
    sys.exit(main())
