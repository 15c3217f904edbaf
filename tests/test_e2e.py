"""End to end: `deltacrawl crawl` for 3 cycles over the bundled test web as the internet looks (10
hosts by name over HTTPS, names from its DNS server on loopback, its CA trusted with
fetch.tls_ca_file), checked from the crawldb (everything reachable was fetched), the hostdb (the
hosts' addresses kept, one DNS query per name for the whole crawl) and the server's request log
(robots.txt first, nothing disallowed, never faster than the configured delay).

The crawl is the suite's shared one (tests/conftest.py, named_crawl), which also seeds the demo's
hostile hosts: normal hosts never link to them, so the checks of the normal hosts hold as on a
crawl of those alone."""
from __future__ import annotations

import re
import time

from crawl.config import with_values
from tests.conftest import FAST, write_seeds
from tests.expected import assert_breadth_first, assert_hosts_and_index
from tests.both_paths import both_generate_paths, both_update_paths
from tests.politeness import assert_polite


def test_three_cycles_over_the_test_web(spark, named_crawl):
    devweb, root, cycles = named_crawl.web, named_crawl.root, named_crawl.cycles
    assert cycles == 3
    assert all(u.startswith("https://site") for u in devweb.seed_urls())
    assert set(devweb.seed_urls()) < set(named_crawl.seeds)
    out, err = named_crawl.out, named_crawl.err
    # the stats report on stdout, progress on stderr: a start and an end line per step, a line per cycle
    assert "by status" in out and "top 10 hosts" in out and "crawl: cycle" not in out
    assert len(re.findall(r"^\d\d:\d\d:\d\d crawl: cycle \d/\d done in ", err, re.M)) == cycles, err
    for step in ("generate", "fetch", "dedup", "update"):
        assert len(re.findall(rf"^\d\d:\d\d:\d\d {step}: cycle \d.*: started$", err, re.M)) == cycles, err
        assert len(re.findall(rf"^\d\d:\d\d:\d\d {step}: .* \(\d+\.\d s\)$", err, re.M)) == cycles, err

    normal = set(devweb.host_names)
    every_row = spark.read.format("delta").load(f"{root}/crawldb").collect()
    rows = {r["url"]: r for r in every_row if r["host"] in normal}
    assert len(rows) < len(every_row)  # the hostile hosts were crawled too
    fetched = assert_breadth_first(rows, devweb, devweb.seed_urls(), cycles)
    denied = {u for u, r in rows.items() if r["status"] == "robots_denied"}
    assert denied, "the test web should have led the crawler to some disallowed pages"

    names = {name.split(":")[0] for name in devweb.host_names}
    log = [e for e in named_crawl.log if e["host"].split(":")[0] in names]
    assert_polite(devweb, log, float(FAST["fetch.delay_s"]))
    assert {e["host"] for e in log} == normal  # https only: no request to an http origin
    pages = [e for e in log if e["path"] not in ("/robots.txt", "/sitemap.xml")]
    assert len(pages) == len(fetched)  # every page requested exactly once
    hosts = {r["host"]: r for r in spark.read.format("delta").load(f"{root}/hostdb").collect() if r["host"] in normal}
    index = [r for r in spark.read.format("delta").load(f"{root}/warc_index").collect() if r["url"] in rows]
    assert_hosts_and_index(rows, hosts, index, log)
    for i, name in enumerate(devweb.host_names):
        h = hosts[name]
        assert list(h["addresses"]) == [devweb.addresses[i]] and h["addresses_expire_at"] is not None
        assert h["dns_error"] is None and h["tls_error"] is None and h["robots_scheme"] == "https"
        # the addresses are kept in host_state: one A and one AAAA query for the whole crawl
        dns_name = name.split(":")[0]
        assert named_crawl.dns_queries[dns_name] == 2 and h["dns_queries"] == 2, dns_name


def test_one_cycle_over_the_hostile_web(spark, tmp_path, capsys):
    """Through the real jobs: no task fails, every URL ends in a recorded status, the hostdb
    holds back the hosts that asked for it, and per-host overrides cap generate."""
    from crawl.devweb.web import HOSTILE, DevWeb
    from jobs import fetch, generate, inject, stats, update
    from jobs.engine.crawl_root import CrawlRoot
    from tests.conftest import make_config

    web = DevWeb(hosts=1, pages_per_host=4, port=0, seed=5, hostile=True).start()
    try:
        seeds = [u for name in HOSTILE for u in web.hostile_urls(name)]
        seeds += [f"http://{web.hostile_hosts['messy']}/p/{k}.html" for k in range(4)]
        messy = web.hostile_hosts["messy"].split(":")[0]
        cfg = make_config(fetch__total_timeout_s=3.0, fetch__max_body_bytes=1 << 20,
                          fetch__host_overrides=[{"pattern": messy, "max_urls_per_cycle": 3}])
        root = CrawlRoot(str(tmp_path / "crawl"))
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", seeds))
        with both_generate_paths() as checked:  # a host override's cap
            seg = generate.run(spark, cfg, root)
        assert checked
        fl = {r["url"] for r in spark.read.parquet(root.fetchlist(seg.segment_id)).collect()}
        assert len([u for u in fl if messy in u]) == 3  # the override's cap, not the default 100
        result = fetch.run(spark, cfg, root, seg.segment_id)
        assert result.urls == len(fl)  # one outcome per URL: nothing lost, no task failed
        with both_update_paths() as checked:  # every kind of failure, redirects, a host override
            update.run(spark, cfg, root, seg.segment_id)
        assert checked
        # a crawldb above crawldb.local_read_max_mb: Spark computes the writes
        assert update.local_sources(spark, with_values(cfg, {"crawldb.local_read_max_mb": 0}), root, seg.segment_id, 0.0) is None
    finally:
        web.stop()
    rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    for url in fl:
        assert rows[url]["lease_until"] is None, url
    hosts = {r["host"]: r for r in spark.read.format("delta").load(root.hostdb).collect()}
    assert hosts[web.hostile_hosts["robots_500"]]["backoff_until"] is not None
    assert hosts[web.hostile_hosts["crawl_delay_big"]]["deferred_until"] is not None
    assert hosts[web.hostile_hosts["messy"]]["override_pattern"] == messy
    # held-back hosts are not generated again while their backoff runs
    with both_generate_paths() as checked:
        seg2 = generate.run(spark, cfg, root)
    assert checked
    if seg2.segment_id:
        hosts2 = {r["host"] for r in spark.read.parquet(root.fetchlist(seg2.segment_id)).collect()}
        assert web.hostile_hosts["robots_500"] not in hosts2 and web.hostile_hosts["crawl_delay_big"] not in hosts2
    summary = stats.run(spark, cfg, root)
    assert summary["hostdb"]["backing_off"] >= 3 and summary["hostdb"]["deferred"] == 1
    assert summary["hostdb"]["robots_errors"] >= 1  # robots_redirect_loop: more than 5 redirects
    assert "hosts held back" in capsys.readouterr().out


def test_the_pdfs_of_the_shared_crawl(spark, named_crawl):
    """The demo's ``pdfs`` host (crawl/devweb/pdfs.py) in the shared crawl: every page reachable
    only through a PDF's link annotations discovered and fetched, every PDF's text fingerprinted
    on its crawldb row (the one served as application/octet-stream too, recorded as a PDF), the
    HTML page with a PDF's text a duplicate of it, each hostile PDF one recorded parse error, the
    image fetched and not parsed, and the host crawled politely."""
    from crawl.devweb import pdfs
    devweb = named_crawl.web
    assert "pdfs" in devweb.seeded_hostile
    host = devweb.hostile_hosts["pdfs"]
    site = pdfs.PdfSite(devweb.hostile_urls("pdfs")[0])
    assert set(site.seed_urls()) <= set(named_crawl.seeds)
    rows = {r["url"]: r for r in spark.read.format("delta").load(f"{named_crawl.root}/crawldb").collect()
            if r["host"] == host}
    fetched = assert_breadth_first(rows, site, site.seed_urls(), named_crawl.cycles)
    assert fetched == {site.url(p) for p in pdfs.LINKS}  # the whole site, /only-from-pdf/ included
    for path in pdfs.PDFS:
        row = rows[site.url(path)]
        assert row["content_type"] == "application/pdf" and row["parse_error"] is None, row
        assert row["text_hash"] is not None and row["simhash"] is not None, row
    report, twin = rows[site.url("/report.pdf")], rows[site.url("/twin.html")]
    assert report["text_hash"] == twin["text_hash"] and report["simhash"] == twin["simhash"]
    assert {report["dup_of"], twin["dup_of"]} - {None} in ({report["url"]}, {twin["url"]}), (report, twin)
    assert sum(r["dup_of"] is not None for r in rows.values()) == 1  # the twins are the host's only pair
    for path in pdfs.HOSTILE_PDFS:
        row = rows[site.url(path)]
        assert row["parse_error"].startswith("parse_error: pdf: ") and row["text_hash"] is None, row
    picture = rows[site.url("/picture")]
    assert picture["content_type"] == "image/png" and picture["text_hash"] is None
    # the crawl's stats report counts the URLs by content type (no other host serves PDFs)
    n_pdfs = len(pdfs.PDFS) + len(pdfs.HOSTILE_PDFS)
    assert re.search(rf"^  application/pdf \({len(pdfs.HOSTILE_PDFS)} parse errors\) +{n_pdfs} ", named_crawl.out, re.M), \
        named_crawl.out
    log = [e for e in named_crawl.log if e["host"] == host]
    assert_polite(site, log, float(FAST["fetch.delay_s"]))
    assert sorted(e["path"] for e in log if e["path"] not in ("/robots.txt", "/sitemap.xml")) == sorted(pdfs.LINKS)


def test_duckdb_and_spark_read_a_whole_table_alike(spark, named_crawl):
    """reads.whole_arrow by DuckDB's delta extension (crawldb.driver_reader "auto", the default
    here) and by Spark ("spark"): the same rows, values and Python types, for the projections
    generate reads whole (the crawldb's due columns with epoch seconds and microseconds, every
    hostdb column it keeps, robots.txt bodies and lists included), the whole crawldb and the
    hostdb's columns update reads, and dedup's two tables as dedup reads them (signatures)."""
    import pyarrow as pa

    from jobs import dedup, generate, update
    from jobs.engine import reads
    from jobs.engine.crawl_root import CrawlRoot
    from jobs.engine.schemas import URL_STATE_SCHEMA, URL_STATE_TIMES
    from tests.conftest import make_config
    root = CrawlRoot(named_crawl.root)
    reads_ = [(root.crawldb, generate.DUE_COLUMNS, generate.DUE_TIMES, generate._DUE_MICROS),
              (root.hostdb, generate._ALL_HOST_COLUMNS, generate._ALL_HOST_TIMES, None),
              (root.crawldb, URL_STATE_SCHEMA.fieldNames(), URL_STATE_TIMES, None),
              (root.hostdb, update.HOST_COLUMNS, (), None),
              (root.dedup_pages, [*dedup._KNOWN_COLUMNS, "first_fetched_at"], ["first_fetched_at"], None),
              (root.dedup_bands, dedup._SLICE_COLUMNS, (), None)]
    duck, by_spark = make_config(crawldb__driver_reader="auto"), make_config(crawldb__driver_reader="spark")
    assert reads._duckdb_cursor() is not None  # installed here: the test compares two readers
    for path, columns, epoch, micros in reads_:
        a = reads.whole_arrow(spark, duck, root, path, columns, epoch, micros)
        b = reads.whole_arrow(spark, by_spark, root, path, columns, epoch, micros)
        assert a.column_names == b.column_names == [*columns, *(micros or {})]

        def rows(table: pa.Table) -> list:
            return sorted((tuple((v, type(v)) for v in row.values()) for row in table.to_pylist()), key=repr)
        assert a.num_rows > 0 and rows(a) == rows(b), path
    # stats asks its questions of both tables read whole by DuckDB (reads.queried_frame) or of
    # Spark's reads: the same answers
    from jobs import stats
    now = time.time()
    assert stats.collect_stats(spark, duck, root, now) == stats.collect_stats(spark, by_spark, root, now)
