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
    """Finding 1: with a hand-set fetch value, pages found together came due together and the
    cycles between those waves fetched a fraction of top_n (63 % overall). With the fetch value
    fitted to the budget at every update (the default), the pages' intervals ask for a little
    more than a cycle takes, so once every URL is known each cycle is full. The test web's pages
    never change: the fitted intervals must still keep refetching them within the budget."""
    web = DevWeb(hosts=2, pages_per_host=5, port=0, seed=3, crawl_delay_s=0.0, links_per_page=3)
    web.start()
    try:
        seeds = write_seeds(tmp_path / "seeds.txt", web.seed_urls())
        overrides = {**FAST, "fetch.delay_s": 0.05, "generate.top_n": TOP_N, "generate.max_urls_per_host": TOP_N,
                     "schedule.min_interval_s": 1, "schedule.max_interval_s": 3600,
                     "schedule.prior_min_change_s": 1, "schedule.prior_max_change_s": 86400,
                     "sitemaps.enabled": "false", "mlflow.tracking_uri": "off"}
        conf = [arg for k, v in overrides.items() for arg in ("--conf", f"{k}={v}")]
        cycles = 9
        rc = cli.main(["crawl", "--seeds", seeds, "--cycles", str(cycles), "--crawl-root", str(tmp_path / "crawl"),
                       *conf])
        out, err = capsys.readouterr()
        assert rc == 0, err
        per_cycle = _fetched_per_cycle(err)
        assert len(per_cycle) == cycles, err  # never "nothing due"
        log = web.requests()
        pages = [e for e in log if e["path"] != "/robots.txt"]
        known = len({e["path"] + e["host"] for e in pages})
        # cycles that still had new URLs to fetch are full or take what there is; from the first
        # cycle after every page was fetched once, every cycle takes top_n
        first_pass = next(i for i in range(cycles) if sum(per_cycle[:i + 1]) >= known)
        assert first_pass <= cycles - 4, (per_cycle, known)
        assert per_cycle[first_pass + 1:] == [TOP_N] * (cycles - first_pass - 1), (per_cycle, err)
        assert "fetch value fitted to the budget" in err
        assert_polite(web, log, 0.05)
    finally:
        web.stop()
