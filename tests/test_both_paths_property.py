"""generate, dedup and update decide small inputs on the driver and large ones by Spark
queries; both must give the same tables (one rule, one implementation, and a
property test). Hypothesis generates small crawl databases and segments — every status, leases,
held-back hosts, lowered budgets, host overrides, a skewed host holding most URLs, exact and
near duplicates, hot band values, stale band rows, redirects and their chains, sitemap lastmod
hints, per-host total budgets — and each test runs both paths of one step on them and asserts
equal rows (floats to 12 significant digits, as tests/both_paths.py compares them).

Spark costs seconds per query, not per row, so one example holds several independent cases:
each case has its own hosts (``h<i>.c<case>.test``), URLs, text hashes, SimHash band values
and MinHash values, so the cases cannot meet in any join or group, and one Spark evaluation
decides them all. Dedup and update read their settings once for the whole input: an example is
one Spark pass of one setting, and holds many cases (they cost next to nothing more: dedup of 3
or of 12 cases, the same ~20 CPU s a pass), so a few examples (settings) cover as many cases as more
examples of fewer cases did. Generate, whose top_n is shared by everything it ranks, runs one
query per case, unioned into one job: its cost grows with the cases (~3 CPU s each), so each
case has its own settings (caps, budgets, overrides), and a few examples cover more settings
than one setting per example did. Hypothesis's first example is its simplest (few, nearly
empty cases). Examples are derandomised: the same cases on every run.
"""
from __future__ import annotations

import json
import struct

import numpy as np

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawl.crawldb.schedule_fit import Fitted
from crawl.crawldb import schedule
from crawl.crawldb.status import ALL_STATUSES, DUPLICATE, FetchStatus, schedule_policy
from crawl.dedup.rules import band_rows
from crawl.net.urls import host_bucket, url_hash
from jobs import dedup, generate, update
from jobs.engine.reads import projected_arrow
from jobs.engine.schemas import (DEDUP_BANDS_SCHEMA, DEDUP_PAGES_SCHEMA, FETCHED_SCHEMA, FETCHLIST_SCHEMA,
                                 HOST_STATE_SCHEMA, HOST_STATE_TIMES, URL_STATE_SCHEMA, URL_STATE_TIMES, epoch_schema,
                                 from_epoch)
from tests.both_paths import table_rows
from tests.conftest import make_config

FIXED = dict(derandomize=True, database=None, deadline=None,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                    HealthCheck.function_scoped_fixture])
NOW = 1_800_000_000.0
DAY = 86_400.0
SEGMENT = "20270115080000-a2a2a2"
BUCKETS = 16


def _host(case: int, i: int) -> str:
    return f"h{i}.c{case}.test"


def _case_of(host: str) -> int:
    return int(host.split(".")[1][1:])


def _url_state_row(url: str, **values) -> dict:
    host = url.split("/")[2]
    row = {f.name: None for f in URL_STATE_SCHEMA.fields}
    row.update(url=url, url_hash=url_hash(url), host=host, host_bucket=host_bucket(host, BUCKETS), status="unfetched",
               depth=0, score=1.0, discovered_at=NOW - 30 * DAY, retries=0, change_count=0, fetch_count=0)
    row.update(values)
    return row


def _host_state_row(host: str, **values) -> dict:
    row = {f.name: None for f in HOST_STATE_SCHEMA.fields}
    row.update(host=host, host_bucket=host_bucket(host, BUCKETS), requests=0, pages_fetched=0, errors=0)
    row.update(values)
    return row


def _frame(spark, rows: list[dict], schema, times):
    """A DataFrame of ``rows`` (times as epoch seconds) in ``schema`` (times as timestamps)."""
    names = schema.fieldNames()
    return from_epoch(spark.createDataFrame([tuple(r[n] for n in names) for r in rows], epoch_schema(schema)), times)


# --------------------------------------------------------------------------- generate

@st.composite
def generate_config(draw, case: int):
    """A case's own generate settings: its Spark query is its own (top_n is per crawl), so each
    case of an example can rank under other caps, budgets and overrides at no extra cost."""
    overrides = draw(st.lists(st.sampled_from([
        {"pattern": f"h0.c{case}.test", "max_urls_per_cycle": 1},
        {"pattern": f"*.c{case}.test", "max_urls_per_cycle": 3},
        {"pattern": f"H1.C{case}.TEST", "max_urls_per_cycle": 2},  # patterns match any case
        {"pattern": "*.test", "delay_s": 1.0}]), max_size=3, unique_by=lambda e: e["pattern"]))
    return make_config(generate__max_urls_per_host=draw(st.integers(1, 5)),
                       generate__fill_budget=draw(st.booleans()),
                       generate__top_n=draw(st.integers(1, 12)),
                       generate__discovery_share=draw(st.sampled_from([0.0, 0.3, 0.5, 1.0])),
                       schedule__score_exponent=draw(st.sampled_from([0.5, 1.0])),
                       schedule__depth_decay=draw(st.sampled_from([0.5, 0.9, 1.0])),
                       fetch__host_overrides=json.dumps(overrides))


@st.composite
def generate_case(draw, case: int):
    """(the case's settings, its crawldb rows, its hostdb rows)."""
    cfg = draw(generate_config(case))
    robots_ttl_s, sitemaps_ttl_s = float(cfg["fetch.robots_ttl_s"]), float(cfg["sitemaps.ttl_s"])
    hosts = [_host(case, i) for i in range(draw(st.integers(1, 4)))]
    skewed = draw(st.booleans())  # one host holds most of the case's URLs
    urls = []
    for i in range(draw(st.integers(0, 14))):
        host = hosts[0] if skewed and draw(st.integers(0, 4)) else draw(st.sampled_from(hosts))
        urls.append(_url_state_row(
            f"http://{host}/p{i}",
            status=draw(st.sampled_from(ALL_STATUSES)),
            # few distinct scores and depths: equal priorities, decided by the orderings' later fields
            depth=draw(st.integers(0, 2)),
            score=draw(st.sampled_from([0.0, 1e-7, 0.5, 1.0, 1.0, 2.0])),
            next_fetch_at=draw(st.sampled_from([None, NOW - 3 * DAY, NOW - 3600.0, NOW - 1e-6, NOW, NOW + 1.0,
                                                NOW + DAY])),
            fetch_interval_s=draw(st.sampled_from([None, None, 0, 3600, 86_400])),
            # around schedule.min_interval_s (3600 s): URLs that generate.fill_budget may take early or not
            last_fetched_at=draw(st.sampled_from([None, NOW - 2 * DAY, NOW - 3600.0, NOW - 3599.0, NOW - 600.0])),
            fetch_count=draw(st.integers(0, 3)),
            lease_until=draw(st.sampled_from([None, None, NOW - 60.0, NOW, NOW + 600.0])),
            etag=draw(st.sampled_from([None, '"e1"'])),
            redirect_hops=draw(st.sampled_from([None, 0, 2])),
            # a refresh value ranks the URL by what its fetch buys (valued_rule): few distinct
            # values, so equal priorities are decided by the later fields too
            refresh_value=draw(st.sampled_from([None, 0.0, 50.0, 50.0, 8000.0])),
            refresh_slope=draw(st.sampled_from([None, 0.0, 1.0, 2.0]))))
    host_rows = []
    for host in hosts:
        if not draw(st.integers(0, 5)):
            continue  # a host without a hostdb row
        host_rows.append(_host_state_row(
            host,
            url_budget=draw(st.sampled_from([None, None, 0, 1, 2, 4])),
            deferred_until=draw(st.sampled_from([None, None, None, NOW - 60.0, NOW + 600.0])),
            backoff_until=draw(st.sampled_from([None, None, None, NOW - 60.0, NOW + 600.0])),
            backoff_s=draw(st.sampled_from([None, 2.0])),
            robots_status=draw(st.sampled_from([None, 200, 404])),
            robots_txt=f"User-agent: *\nDisallow: /private-{host}\n",
            robots_fetched_at=draw(st.sampled_from([None, NOW - 10.0, NOW - robots_ttl_s, NOW - robots_ttl_s - 10.0])),
            sitemaps=draw(st.sampled_from([None, [f"http://{host}/sitemap.xml"]])),
            sitemaps_fetched_at=draw(st.sampled_from([None, NOW - 10.0, NOW - sitemaps_ttl_s - 10.0])),
            # per-origin robots.txt: the other origin's answer rides by its own time (JSON)
            robots_scheme=draw(st.sampled_from([None, "http", "https"])),
            robots_other=draw(st.sampled_from([None, "{", json.dumps(
                {"scheme": "https", "status": 200, "txt": "", "error": None,
                 "fetched_at": draw(st.sampled_from([NOW - 10.0, NOW - robots_ttl_s, NOW - robots_ttl_s - 10.0]))})])),
            addresses=draw(st.sampled_from([None, ["127.0.0.9"]])),
            addresses_expire_at=draw(st.sampled_from([None, NOW - 1.0, NOW, NOW + 300.0]))))
    return cfg, urls, host_rows


@settings(max_examples=4, **FIXED)
@given(cases=st.integers(3, 8).flatmap(lambda n: st.tuples(*(generate_case(c) for c in range(n)))))
def test_generate_chooses_the_same_fetchlist_both_ways(spark, cases):
    url_state = _frame(spark, [r for _, urls, _ in cases for r in urls], URL_STATE_SCHEMA, URL_STATE_TIMES)
    host_state = _frame(spark, [h for _, _, hosts in cases for h in hosts], HOST_STATE_SCHEMA, HOST_STATE_TIMES)

    # driver: the due URLs read whole through Arrow, and by the due filter (a larger crawldb); of
    # the settings drawn, only generate.fill_budget decides which URLs are due
    due_by_fill = {}
    for fill in sorted({cfg["generate.fill_budget"] for cfg, _, _ in cases}):
        cfg = next(cfg for cfg, _, _ in cases if cfg["generate.fill_budget"] == fill)
        due_by_fill[fill] = generate._due_rows(url_state, cfg, NOW, 10_000, whole=True)
        assert table_rows(due_by_fill[fill]) == table_rows(generate._due_rows(url_state, cfg, NOW, 10_000, whole=False))
    hosts = generate._host_rows(spark, host_state, None)
    local = []
    for case, (cfg, _, _) in enumerate(cases):
        local += generate.choose_in_memory([r for r in due_by_fill[cfg["generate.fill_budget"]]
                                            if _case_of(r["host"]) == case], hosts, cfg, SEGMENT, NOW, with_bodies=True)
    columns = FETCHLIST_SCHEMA.fieldNames()
    by_driver = generate.in_memory_frame(spark, local).select(*columns)

    # Spark: one select_fetchlist per case, with the case's settings, unioned into one job
    by_spark = None
    for cfg, urls, hosts_of_case in cases:
        if not urls:  # nothing to choose (Hypothesis's first, simplest example has no URL at all)
            continue
        case_hosts = _frame(spark, hosts_of_case, HOST_STATE_SCHEMA, HOST_STATE_TIMES)
        due_of_case = generate.select_due(_frame(spark, urls, URL_STATE_SCHEMA, URL_STATE_TIMES), case_hosts, cfg, NOW)
        chosen = generate.select_fetchlist(due_of_case.select(*generate.DUE_COLUMNS), case_hosts, cfg, SEGMENT,
                                           NOW).select(*columns)
        by_spark = chosen if by_spark is None else by_spark.unionByName(chosen)
    assert table_rows(by_driver) == (table_rows(by_spark) if by_spark is not None else [])


# --------------------------------------------------------------------------- dedup

def _signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


@st.composite
def dedup_case(draw, case: int):
    """(segment pages as fetched_pages rows, dedup/pages rows, dedup/bands rows) of one case.
    Its SimHash bands carry the case in their high byte and its MinHash values in their high
    bits: no band value is shared with another case."""
    clusters = [[draw(st.integers(0, 255)) for _ in range(4)] for _ in range(draw(st.integers(1, 3)))]

    def fingerprints(serial: int) -> tuple[int, int, bytes | None]:
        k = draw(st.integers(0, len(clusters) - 1))
        low = list(clusters[k])
        for bit in draw(st.lists(st.integers(0, 31), max_size=5)):  # a near copy: a few bits off
            low[bit // 8] ^= 1 << (bit % 8)
        simhash = _signed(sum(((case << 8) | low[b]) << (16 * b) for b in range(4)))
        signature = None
        if draw(st.integers(0, 4)):
            values = [(case << 40) | (k << 20) | j for j in range(64)]
            for j in draw(st.lists(st.integers(0, 63), max_size=30)):  # words edited: values differ
                values[j] = (case << 40) | (0xFFFFF << 8) | ((serial * 64 + j) & 0xFF) | ((serial & 0xFFF) << 28)
            signature = struct.pack(">64Q", *values)
        text = case * 1000 + 100 + serial  # its own text
        return text, simhash, signature

    def url(kind: str, i: int) -> str:
        host = _host(case, draw(st.integers(0, 1)))
        return f"http://{host}/{'x' * draw(st.integers(0, 2))}{kind}{i}"

    pages, known = [], []
    for i in range(draw(st.integers(1, 8))):
        u = url("s", i)
        text, simhash, signature = fingerprints(i)
        if pages and not draw(st.integers(0, 3)):  # an exact copy of an earlier page of the segment
            other = draw(st.sampled_from(pages))
            text, simhash, signature = other["text_hash"], other["simhash"], other["signature"]
        pages.append({"url": u, "url_hash": url_hash(u), "host_bucket": host_bucket(u.split("/")[2], BUCKETS),
                      "text_hash": text, "simhash": simhash, "signature": signature,
                      "score": draw(st.sampled_from([0.5, 1.0, 2.0])),
                      "fetched_at": draw(st.sampled_from([NOW - DAY, NOW]))})
    for j in range(draw(st.integers(0, 6))):
        if pages and not draw(st.integers(0, 2)):  # a page the segment fetched again: its old row
            u = draw(st.sampled_from(pages))["url"]
        else:
            u = url("k", j)
        if any(k["url"] == u for k in known):
            continue
        text, simhash, signature = fingerprints(100 + j)
        if pages and not draw(st.integers(0, 2)):  # an earlier page with a text of the segment
            text = draw(st.sampled_from(pages))["text_hash"]
        known.append({"url": u, "url_hash": url_hash(u), "host_bucket": host_bucket(u.split("/")[2], BUCKETS),
                      "text_hash": text, "simhash": simhash, "signature": signature,
                      "score": draw(st.sampled_from([0.5, 1.0, 2.0])),
                      "first_fetched_at": draw(st.sampled_from([NOW - 3 * DAY, NOW - DAY, NOW])),
                      "segment_id": "20270101000000-000000"})
    bands = [{"band": b, "value": v, "url_hash": k["url_hash"], "url": k["url"], "simhash": k["simhash"]}
             for k in known for b, v in band_rows(k["simhash"], k["signature"])]
    return pages, known, bands


@st.composite
def dedup_example(draw):
    cfg = make_config(dedup__max_band_candidates=draw(st.sampled_from([1, 2, 3, 1000])),
                      dedup__max_hamming=draw(st.sampled_from([0, 2, 3])),
                      dedup__min_jaccard=draw(st.sampled_from([0.5, 0.7])))
    cases = [draw(dedup_case(c)) for c in range(draw(st.integers(8, 20)))]
    return cfg, cases, draw(st.booleans())


_FETCHED_PAGE = [f for f in FETCHED_SCHEMA.fields if f.name in dedup._PAGE_COLUMNS or f.name == "fetched_at"]


@settings(max_examples=4, **FIXED)
@given(example=dedup_example())
def test_dedup_decides_the_same_duplicates_both_ways(spark, example):
    from pyspark.sql.types import StructType
    cfg, cases, whole = example
    pages = [p for case in cases for p in case[0]]
    schema = StructType(_FETCHED_PAGE)
    fetched = spark.createDataFrame([tuple(p[f.name] for f in _FETCHED_PAGE) for p in pages], schema)
    known = _frame(spark, [k for case in cases for k in case[1]], DEDUP_PAGES_SCHEMA, ("first_fetched_at",))
    bands = spark.createDataFrame([tuple(b[n] for n in DEDUP_BANDS_SCHEMA.fieldNames()) for case in cases
                                   for b in case[2]], DEDUP_BANDS_SCHEMA)

    small = dedup.decide_in_memory(spark, cfg, fetched, known, bands, whole=whole)
    assert small is not None

    with_first = dedup.with_first(fetched, known).cache()
    new_bands = dedup.page_bands(spark, with_first).cache()
    slices: list = []
    _, (dups, cand, cached) = dedup.decide_by_spark(spark, cfg, with_first, new_bands, known, bands, slices)
    try:
        assert table_rows(small.decision.duplicates) == table_rows(dups)
        assert (small.decision.collisions, small.decision.hot_values) == (cand.collisions, cand.hot_values)
    finally:
        for df in (*cached, *slices, new_bands, with_first):
            df.unpersist()


# --------------------------------------------------------------------------- update

_OUTCOMES = [FetchStatus.OK, FetchStatus.OK, FetchStatus.NOT_MODIFIED, FetchStatus.REDIRECT, FetchStatus.NOT_FOUND,
             FetchStatus.CLIENT_ERROR, FetchStatus.SERVER_ERROR, FetchStatus.NETWORK_ERROR,
             FetchStatus.ROBOTS_DENIED, FetchStatus.DEFERRED]


def _fetched_row(kind: str, host: str, **values) -> dict:
    row = {f.name: None for f in FETCHED_SCHEMA.fields}
    row.update(kind=kind, host=host, host_bucket=host_bucket(host, BUCKETS), segment_id=SEGMENT)
    row.update(values)
    return row


@st.composite
def update_case(draw, case: int):
    """(crawldb rows, segment rows (url and host), dedup's answer rows, hostdb rows) of one case."""
    hosts = [_host(case, i) for i in range(draw(st.integers(1, 3)))]
    attempted = [f"http://{draw(st.sampled_from(hosts))}/s{i}" for i in range(draw(st.integers(1, 6)))]
    others = [f"http://{draw(st.sampled_from(hosts))}/k{i}" for i in range(draw(st.integers(0, 4)))]
    # few new URLs: pages of different depths link the same ones (least depth, summed score)
    fresh = [f"http://{draw(st.sampled_from(hosts))}/n{i}" for i in range(draw(st.integers(0, 5)))]
    links = st.sampled_from(attempted + others + fresh)
    old_text = st.sampled_from([None, case * 1000 + 1, case * 1000 + 2])

    crawldb = []
    for u in attempted:
        if not draw(st.integers(0, 7)):
            continue  # attempted, yet not in the crawldb
        leased = draw(st.integers(0, 4))
        crawldb.append(_url_state_row(
            u, status=draw(st.sampled_from(ALL_STATUSES)), depth=draw(st.integers(0, 2)),
            fetch_count=draw(st.integers(0, 2)), text_hash=draw(old_text),
            content_hash=draw(st.sampled_from([None, "c1"])),
            last_fetched_at=draw(st.sampled_from([None, NOW - 5 * DAY])),
            first_observed_at=None, next_fetch_at=NOW - 60.0,
            lease_until=NOW + 600.0 if leased else draw(st.sampled_from([None, NOW - 60.0])),
            segment_id=SEGMENT if leased else draw(st.sampled_from([None, "20270101000000-0000ff"]))))
    for u in others:
        status = draw(st.sampled_from([DUPLICATE, DUPLICATE, "fetched", "unfetched", "gone"]))
        crawldb.append(_url_state_row(
            u, status=status, dup_of=draw(st.sampled_from(attempted + others)) if status == DUPLICATE else None,
            last_fetched_at=draw(st.sampled_from([None, NOW - 5 * DAY, NOW - DAY])),
            next_fetch_at=draw(st.sampled_from([NOW - 60.0, NOW + 30 * DAY])), fetch_count=1,
            text_hash=draw(old_text)))

    segment, duplicates = [], []
    for u in attempted:
        status = draw(st.sampled_from(_OUTCOMES))
        row = _fetched_row("url", u.split("/")[2], url=u, url_hash=url_hash(u), fetch_status=status,
                           depth=draw(st.integers(0, 2)), score=draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
                           fetched_at=NOW - 100.0, content_hash="c2")
        if status == FetchStatus.OK:
            row.update(http_status=200, text_hash=draw(old_text), simhash=5,
                       outlinks=draw(st.lists(links, max_size=6)))
            canonical = [x for x in attempted + others if x != u]
            if canonical and draw(st.integers(0, 2)) == 0:
                duplicates.append((row["url_hash"], u, draw(st.sampled_from(canonical))))
        elif status == FetchStatus.REDIRECT:
            target = draw(links)
            row.update(http_status=draw(st.sampled_from([301, 302])), redirect_to=target, outlinks=[target],
                       redirect_hops=draw(st.sampled_from([None, 0, 1, 2])))
        elif status == FetchStatus.NOT_MODIFIED:
            row.update(http_status=304)
        segment.append(row)
    for host in hosts:
        if draw(st.booleans()):
            entries = [{"url": draw(links), "lastmod": draw(st.sampled_from([None, NOW - 10 * DAY, NOW - 2 * DAY,
                                                                             NOW - 10.0]))}
                       for _ in range(draw(st.integers(0, 4)))]
            segment.append(_fetched_row("host", host, requests=1, pages_fetched=1, errors=0,
                                        sitemap_entries=entries or None, sitemaps_fetched_at=NOW - 50.0))
    host_rows = [_host_state_row(h, url_count=draw(st.sampled_from([None, 0, 2, 5]))) for h in hosts
                 if draw(st.integers(0, 3))]
    return crawldb, segment, duplicates, host_rows


@st.composite
def update_example(draw):
    overrides = draw(st.lists(st.sampled_from([
        {"pattern": "h0.c0.test", "max_urls_total": 2},
        {"pattern": "*.c1.test", "max_urls_total": 4}]), max_size=2, unique_by=lambda e: e["pattern"]))
    cfg = make_config(discovery__max_urls_per_host_total=draw(st.integers(1, 6)),
                      update__max_depth=draw(st.sampled_from([1, 3, 3])),
                      fetch__max_redirects=draw(st.integers(0, 2)),
                      update__outlink_score_factor=draw(st.sampled_from([0.5, 0.85])),
                      fetch__host_overrides=json.dumps(overrides))
    fitted = None
    if draw(st.booleans()):  # what update fits to the crawl reaches apply_fetch in both paths
        prior = np.geomspace(1.0, 50.0, schedule.RATE_GRID_POINTS)
        fitted = Fitted(draw(st.sampled_from([None, 7.5])), tuple(float(v) for v in prior / prior.sum()),
                        draw(st.sampled_from([0.0, 500.0, 5e6])))
    cases = [draw(update_case(c)) for c in range(draw(st.integers(6, 14)))]
    return cfg, schedule_policy(cfg, fitted), cases, draw(st.booleans())


@settings(max_examples=5, **FIXED)
@given(example=update_example())
def test_update_writes_the_same_rows_both_ways(spark, example):
    cfg, policy, cases, deduped = example
    url_state = _frame(spark, [r for case in cases for r in case[0]], URL_STATE_SCHEMA, URL_STATE_TIMES)
    names = FETCHED_SCHEMA.fieldNames()
    fetched = spark.createDataFrame([tuple(r[n] for n in names) for case in cases for r in case[1]], FETCHED_SCHEMA)
    dups = (spark.createDataFrame([d for case in cases for d in case[2]], "url_hash long, url string, dup_of string")
            if deduped else None)
    host_state = _frame(spark, [h for case in cases for h in case[3]], HOST_STATE_SCHEMA, HOST_STATE_TIMES)

    local = update.sources_in_memory(spark, cfg, fetched, lambda: dups, update.whole_crawldb(url_state),
                                     lambda: projected_arrow(host_state, update.HOST_COLUMNS), SEGMENT, NOW, policy=policy)
    assert local is not None
    by_spark = update.sources_by_spark(spark, cfg, fetched, dups, url_state, host_state, SEGMENT, NOW, policy=policy)
    try:
        for name in ("updates", "new_rows", "hints", "host_counts"):
            assert table_rows(getattr(local, name)) == table_rows(getattr(by_spark, name)), name
    finally:
        by_spark.release()

