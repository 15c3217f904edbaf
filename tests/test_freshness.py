"""Issue 32's findings about the recrawl schedule, pinned on a real crawl of the test web
(loopback HTTP, the shared SparkSession, the schedule's clock compressed through config)."""
from __future__ import annotations

import re

from crawl.devweb.web import DevWeb
from jobs import cli
from tests.conftest import FAST, write_seeds
from tests.politeness import assert_polite

TOP_N = 4


def _fetched_per_cycle(err: str) -> list[int]:
    """URLs in each cycle's segment, from generate's summary lines."""
    return [int(n) for n in re.findall(r"generate: .*segment \S+: (\d+) URLs from \d+ hosts", err)]


def test_every_cycle_uses_the_whole_budget_once_the_urls_are_known(spark, tmp_path, capsys):
    """Finding 1: with a hand-set fetch value, pages found together came due together, the
    cycles between those waves fetched a fraction of top_n (63 % overall), and `deltacrawl
    crawl` stopped at the first cycle with nothing due. Now update fits the fetch value to the
    budget and generate fills the places due URLs leave with the known URLs closest to due
    (generate.fill_budget): every cycle after the first is full, though the test web's pages
    never change and nothing is due yet when the next cycle starts."""
    web = DevWeb(hosts=2, pages_per_host=5, port=0, seed=3, crawl_delay_s=0.0, links_per_page=3)
    web.start()
    try:
        seeds = write_seeds(tmp_path / "seeds.txt", web.seed_urls())
        overrides = {**FAST, "fetch.delay_s": 0.05, "generate.top_n": TOP_N, "generate.max_urls_per_host": TOP_N,
                     "schedule.min_interval_s": 1, "schedule.max_interval_s": 3600,
                     "schedule.prior_min_change_s": 1, "schedule.prior_max_change_s": 86400,
                     "sitemaps.enabled": "false", "mlflow.tracking_uri": "off"}
        conf = [arg for k, v in overrides.items() for arg in ("--conf", f"{k}={v}")]
        cycles = 5
        rc = cli.main(["crawl", "--seeds", seeds, "--cycles", str(cycles), "--crawl-root", str(tmp_path / "crawl"),
                       *conf])
        out, err = capsys.readouterr()
        assert rc == 0, err
        per_cycle = _fetched_per_cycle(err)
        assert per_cycle[0] == len(web.seed_urls()), err
        assert per_cycle[1:] == [TOP_N] * (cycles - 1), (per_cycle, err)  # never "nothing due", never short
        assert "fetch value fitted to the budget" in err
        log = web.requests()
        pages = [e for e in log if e["path"] != "/robots.txt"]
        assert len(pages) <= sum(per_cycle)  # robots-denied URLs are never requested
        assert_polite(web, log, 0.05)
    finally:
        web.stop()
