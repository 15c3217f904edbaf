"""Issue 32's findings about the recrawl schedule, pinned on a real crawl of the test web
(loopback HTTP, the shared SparkSession, the schedule's clock compressed through config)."""
from __future__ import annotations

import email.utils
import re

import pytest

from crawl.devweb.web import DevWeb
from jobs import cli
from tests.conftest import FAST, write_seeds
from tests.politeness import assert_polite

TOP_N = 5


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
    # 8 URLs (a home page linking to its 3 others, one robots-denied, on each of 2 hosts) and a
    # budget of 5: cycle 1 fetches the 4 seeds (each host's home page and /p/0.html), cycle 2 the 4
    # URLs they led to (all that is due) and 1 known URL not due yet, cycle 3 known URLs not due
    # yet only (every URL was in cycle 1 or 2): the cycle that is short of due URLs and the cycle
    # with none due, both full
    web = DevWeb(hosts=2, pages_per_host=2, port=0, seed=3, crawl_delay_s=0.0, links_per_page=3)
    web.start()
    try:
        seed_urls = web.seed_urls() + [f"{web.origin(i)}/p/0.html" for i in range(web.hosts)]
        seeds = write_seeds(tmp_path / "seeds.txt", seed_urls)
        overrides = {**FAST, "fetch.delay_s": 0.05, "generate.top_n": TOP_N, "generate.max_urls_per_host": TOP_N,
                     "schedule.min_interval_s": 1, "schedule.max_interval_s": 3600,
                     "schedule.prior_min_change_s": 1, "schedule.prior_max_change_s": 86400,
                     "sitemaps.enabled": "false", "mlflow.tracking_uri": "off"}
        conf = [arg for k, v in overrides.items() for arg in ("--conf", f"{k}={v}")]
        cycles = 3
        rc = cli.main(["crawl", "--seeds", seeds, "--cycles", str(cycles), "--crawl-root", str(tmp_path / "crawl"),
                       *conf])
        out, err = capsys.readouterr()
        assert rc == 0, err
        per_cycle = _fetched_per_cycle(err)
        assert per_cycle[0] == len(seed_urls), err
        assert per_cycle[1:] == [TOP_N] * (cycles - 1), (per_cycle, err)  # never "nothing due", never short
        assert "schedule fitted to" in err and "a fetch is worth" in err
        log = web.requests()
        pages = [e for e in log if e["path"] != "/robots.txt"]
        assert len(pages) <= sum(per_cycle)  # robots-denied URLs are never requested
        assert_polite(web, log, 0.05)
    finally:
        web.stop()


def test_last_modified_and_known_links_as_the_crawldb_records_them(spark, root, tmp_path):
    """Findings 3 and 4 over HTTP (their effect on a whole crawl: tests/test_refresh_allocation.py).
    3: a page whose Last-Modified says it has not changed for months is known unchanged for that
    long from its first answer (unchanged_s), so its next fetch is worth far less than that of a
    page without one. 4: a page's score is shared by all its links, the
    ones the crawldb already knows included (before, /a got half the page's cash when /c and /d
    were known, and a quarter when they were not)."""
    from jobs import fetch, generate, inject, update
    from tests.conftest import make_config
    from tests.fixed_web import LAST_MODIFIED, FixedWeb
    web = FixedWeb(hosts=1).start()
    try:
        links = "".join(f'<a href="/{p}">{p}</a>' for p in "abcd")
        home = web.put(0, "/", f"<html><body>{links}</body></html>", last_modified=None)
        for p in "abcd":
            web.put(0, f"/{p}", f"<html><body>page {p}</body></html>",
                    last_modified=LAST_MODIFIED if p == "a" else None)
        cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1, sitemaps__enabled="false", generate__fill_budget="false")
        known = [f"{web.base(0)}/c", f"{web.base(0)}/d"]
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", [home, *known]))
        for _ in range(2):  # the seeds, then /a and /b
            segment = generate.run(spark, cfg, root).segment_id
            fetch.run(spark, cfg, root, segment)
            update.run(spark, cfg, root, segment)
        rows = {r["url"].rsplit("/", 1)[1]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
        factor = float(cfg["update.outlink_score_factor"])
        assert rows["a"]["score"] == pytest.approx(factor / 4) and rows["b"]["score"] == pytest.approx(factor / 4)
        assert rows["a"]["status"] == rows["b"]["status"] == "fetched"
        age = rows["a"]["first_observed_at"].timestamp() - email.utils.parsedate_to_datetime(LAST_MODIFIED).timestamp()
        # finding 2's part over HTTP: the first answer's Last-Modified dates a change to its second
        # (schedule.record_exposure), and the page is known unchanged since
        assert age < float(cfg["schedule.prior_max_change_s"])
        assert rows["a"]["unchanged_s"] == pytest.approx(age - 1.0, abs=5)
        assert rows["a"]["change_span_s"] == 1.0 and rows["a"]["exposure_changes"] == 1
        assert rows["b"]["unchanged_s"] == rows["b"]["change_span_s"] == 0.0 and rows["b"]["exposure_changes"] == 0
        for r in (rows["a"], rows["b"]):
            assert r["refresh_value"] > 0 and 0 <= r["refresh_slope"] <= 2
        worth = {p: rows[p]["refresh_value"] * (rows["b"]["fetch_interval_s"] / rows[p]["fetch_interval_s"])
                 ** rows[p]["refresh_slope"] for p in "ab"}  # what each buys once /b is due
        assert worth["a"] < 0.1 * worth["b"]
    finally:
        web.stop()
