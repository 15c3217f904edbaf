"""generate's ranking (priority = importance × staleness), its discovery/refresh budget split and
its per-host caps, on real Spark and Delta with crawldb rows written directly."""
from __future__ import annotations

import numpy as np
import pytest

from crawl.crawldb import schedule, selection
from crawl.config import ConfigError
from crawl.crawldb.status import new_url_state
from crawl.net.urls import host_bucket, host_of, url_hash
from crawl.rule_ops import NUMPY_OPS
from jobs import generate
from jobs.inject import rows_to_url_state
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.schemas import HOST_STATE_SCHEMA, HOST_STATE_TIMES, URL_STATE_SCHEMA, epoch_schema, from_epoch
from jobs.engine.tables import ensure_tables
from tests.both_paths import both_generate_paths
from tests.conftest import make_config

NOW = 1_800_000_000.0
DAY = 86400.0


def priority_kw(cfg):
    return {k: float(cfg[f"schedule.{k}"]) for k in ("score_exponent", "depth_decay", "score_floor")}


def unfetched(cfg, url, score=1.0, depth=0, discovered_ago=60.0, due_in=None):
    """A URL never fetched, discovered ``discovered_ago`` seconds before NOW (due since then,
    or ``due_in`` seconds after NOW)."""
    host = host_of(url)
    row = new_url_state(url, host, host_bucket(host, int(cfg["crawldb.host_buckets"])), url_hash(url), depth,
                        score, NOW - discovered_ago)
    if due_in is not None:
        row["next_fetch_at"] = NOW + due_in
    return row


def fetched(cfg, url, score=1.0, depth=0, overdue=60.0, interval=DAY):
    """A URL fetched before, due ``overdue`` seconds ago after an interval of ``interval`` seconds."""
    row = unfetched(cfg, url, score, depth, discovered_ago=30 * DAY)
    row.update(status="fetched", fetch_count=1, http_status=200, last_fetched_at=NOW - overdue - interval,
               next_fetch_at=NOW - overdue, fetch_interval_s=int(interval))
    return row


def expected_priority(cfg, row):
    return schedule.priority(row["score"], row["depth"], NOW, row["next_fetch_at"], row["fetch_interval_s"],
                             **priority_kw(cfg))


@pytest.fixture(scope="module")
def empty_tables(spark, tmp_path_factory):
    """A crawl root whose tables are made and empty, once for the module: each case below copies
    it (new_root) instead of creating the Delta tables again (~2 CPU s a root)."""
    path = tmp_path_factory.mktemp("generate-template") / "crawl"
    ensure_tables(spark, CrawlRoot(str(path)))
    return path


@pytest.fixture
def new_root(empty_tables, tmp_path):
    """new_root(name): a fresh copy of empty_tables at <tmp_path>/<name>."""
    import shutil

    def make(name: str) -> CrawlRoot:
        shutil.copytree(empty_tables, tmp_path / name)
        return CrawlRoot(str(tmp_path / name))
    return make


def write_crawldb(spark, root, rows):
    ensure_tables(spark, root)  # (made already in a copy of empty_tables: then only a check)
    names = URL_STATE_SCHEMA.fieldNames()
    (rows_to_url_state(spark, [{f: r.get(f) for f in names} for r in rows])
     .write.format("delta").mode("append").save(root.crawldb))


def write_hostdb(spark, cfg, root, hosts):
    """host_state rows: {host: {column: value}} (times in epoch seconds)."""
    schema = epoch_schema(HOST_STATE_SCHEMA)
    rows = []
    for host, values in hosts.items():
        row = {f: None for f in schema.fieldNames()}
        row.update(host=host, host_bucket=host_bucket(host, int(cfg["crawldb.host_buckets"])), requests=0,
                   pages_fetched=0, errors=0, **values)
        rows.append(tuple(row[f] for f in schema.fieldNames()))
    df = from_epoch(spark.createDataFrame(rows, schema), HOST_STATE_TIMES)
    df.write.format("delta").mode("append").save(root.hostdb)


def generated(spark, cfg, root, rows, hosts=None):
    """URLs of the segment generate makes at NOW from a crawldb of ``rows``."""
    write_crawldb(spark, root, rows)
    if hosts:
        write_hostdb(spark, cfg, root, hosts)
    with both_generate_paths() as checked:  # every case below: chosen in memory and by Spark alike
        result = generate.run(spark, cfg, root, now=NOW)
    assert checked == [result.segment_id] and result.segment_id is not None
    urls = [r["url"] for r in spark.read.parquet(root.fetchlist(result.segment_id)).collect()]
    assert len(urls) == result.urls == len(set(urls))
    return set(urls)


def top_by_priority(cfg, rows, n):
    """A host's n best rows: each pool (refresh: fetched before; discovery) by priority, the two
    taking turns, refresh first (crawl.crawldb.selection.HOST_RANK)."""
    pools = [sorted([r for r in rows if bool(r.get("fetch_count")) == refresh], key=lambda r: -expected_priority(cfg, r))
             for refresh in (True, False)]
    turns = [pool[k] for k in range(max(len(p) for p in pools)) for pool in pools if k < len(pool)]
    for pool in pools:  # no tie at either pool's cut
        taken = sum(1 for r in turns[:n] if r in pool)
        if 0 < taken < len(pool):
            assert expected_priority(cfg, pool[taken - 1]) > expected_priority(cfg, pool[taken])
    return {r["url"] for r in turns[:n]}


# --------------------------------------------------------------------------- the priority Column

def test_priority_column_equals_crawl_schedule_priority(spark):
    cfg = make_config()
    cases = [  # score, depth, next_fetch_at, fetch_interval_s, status, last_fetched_at, refresh_value, refresh_slope
        (1.0, 0, NOW - 60.0, None, "unfetched", None, None, None),          # never fetched: staleness 1
        (0.25, 3, NOW - 3 * DAY, 86400, "fetched", NOW - 4 * DAY, None, None),  # 3 intervals overdue
        (9.0, 1, NOW - 1.5, 3600, "fetched", NOW - 3601.5, None, None),      # barely due
        (1e-9, 0, NOW - 10 * DAY, 3600, "retry", None, None, None),          # score below the floor
        (2.0, 12, NOW - 100.0, 0, "fetched", NOW - 100.0, None, None),       # a zero interval counts as none
        (4.0, 0, NOW + 3600.0, 86400, "retry", NOW - 82800.0, None, None),   # not due yet, not taken early: 0
        (4.0, 0, NOW, 86400, "fetched", NOW - 86400.0, None, None),          # due right now: 1
        (0.5, 2, None, None, "unfetched", None, None, None),                 # no next_fetch_at: 1
        (4.0, 0, NOW + 21600.0, 86400, "fetched", NOW - 64800.0, None, None),  # taken early: 3/4 of its interval gone
        (4.0, 0, NOW + 21600.0, 86400, "notmodified", NOW - 600.0, None, None),  # too recent to be taken early: 0
        # ranked by what a fetch buys: value × (τ / interval)^slope
        (0.1, 1, NOW - 3600.0, 3600, "fetched", NOW - 7200.0, 5000.0, 1.5),  # twice its interval: 5000 × 2^1.5
        (0.1, 1, NOW + 1800.0, 3600, "notmodified", NOW - 1800.0, 5000.0, 2.0),  # half its interval: 5000 / 4
        (0.1, 1, NOW - 3600.0, 3600, "retry", NOW - 7200.0, 5000.0, 1.5),    # a retry: importance × staleness
        (0.1, 1, NOW - 3600.0, 3600, "fetched", NOW - 7200.0, 5000.0, None),  # no slope: importance × staleness
    ]
    df = from_epoch(spark.createDataFrame(
        cases, "score double, depth int, next_fetch_at double, fetch_interval_s long, status string, "
               "last_fetched_at double, refresh_value double, refresh_slope double"), ["next_fetch_at", "last_fetched_at"])
    got = [r["p"] for r in df.select(generate.priority_col(cfg, NOW).alias("p")).collect()]
    got_valued = [r["v"] for r in df.select(generate.valued_col().alias("v")).collect()]
    early = [selection.early_rule(np.array([c[4]], dtype=object), np.array([c[2]], dtype=float),
                                  np.array([c[5]], dtype=float), NOW, float(cfg["schedule.min_interval_s"]), NUMPY_OPS)[0]
             for c in cases]
    want = [schedule.priority(s, d, NOW, t, i, early=e, status=st, refresh_value=v, refresh_slope=k,
                              last_fetched_at=last, **priority_kw(cfg))
            for (s, d, t, i, st, last, v, k), e in zip(cases, early)]
    want_valued = [bool(schedule.valued(st, v, k, last, i)) for (_, _, _, i, st, last, v, k) in cases]
    assert got == pytest.approx(want, rel=1e-12, abs=0.0)
    assert got_valued == want_valued == [False] * 10 + [True, True, False, False]
    assert want[5] == 0.0 and want[0] == 1.0 and want[9] == 0.0
    # importance 4^score_exponent, three quarters of its interval
    assert want[8] == pytest.approx(4.0 ** float(cfg["schedule.score_exponent"]) * 0.75)
    assert want[10] == pytest.approx(5000.0 * 2.0 ** 1.5) and want[11] == pytest.approx(5000.0 / 4.0)
    kw = priority_kw(cfg)
    assert want[12] == pytest.approx(want[13]) == pytest.approx(0.1 ** kw["score_exponent"] * kw["depth_decay"] * 2.0)


def test_budget_split_rounds_the_discovery_share_up():
    assert generate.budget_split(20, 0.3) == (6, 14)
    assert generate.budget_split(7, 0.5) == (4, 3)
    assert generate.budget_split(10, 0.7) == (7, 3)  # not 8: 0.7 × 10 is 7.000000000000001
    assert generate.budget_split(5, 0.0) == (0, 5)
    assert generate.budget_split(5, 1.0) == (5, 0)


def test_discovery_share_must_be_a_share():
    assert make_config(generate__discovery_share=0.0)["generate.discovery_share"] == 0.0
    with pytest.raises(ConfigError, match="discovery_share"):
        make_config(generate__discovery_share=1.5)
    with pytest.raises(ConfigError, match="discovery_share"):
        make_config(generate__discovery_share=-0.1)


# --------------------------------------------------------------------------- generate on a crawldb

def test_priority_orders_across_hosts(spark, new_root):
    cfg = make_config(generate__top_n=4)
    # one known URL per host (no cap binds), importance and overdueness mixed
    rows = [fetched(cfg, f"http://h{i}.example/", score=score, depth=depth, overdue=overdue, interval=interval)
            for i, (score, depth, overdue, interval) in enumerate([
                (1.0, 0, 60.0, DAY), (4.0, 0, 60.0, DAY), (0.01, 5, 60.0, DAY), (1.0, 0, 3 * DAY, DAY),
                (0.25, 1, 10 * DAY, DAY), (1.0, 3, 2 * 3600.0, 3600.0), (2.0, 2, 0.5 * DAY, DAY),
                (0.5, 0, 1.0, 3600.0)])]
    assert generated(spark, cfg, new_root("c"), rows) == top_by_priority(cfg, rows, 4)


def test_overdue_important_url_beats_barely_due_unimportant_one(spark, new_root):
    cfg = make_config(generate__top_n=1, generate__discovery_share=0.0)
    overdue_important = fetched(cfg, "http://a.example/important", score=1.0, overdue=2 * DAY, interval=DAY)
    barely_due = fetched(cfg, "http://b.example/minor", score=0.04, depth=2, overdue=1.0, interval=3600.0)
    assert generated(spark, cfg, new_root("c"),
                     [overdue_important, barely_due]) == {"http://a.example/important"}
    # staleness is not a tie-breaker: a URL ten intervals overdue beats one four times as
    # important that has only just become due (ranking by score would pick the latter)
    long_overdue = fetched(cfg, "http://a.example/stale", score=1.0, overdue=10 * 3600.0, interval=3600.0)
    high_score = fetched(cfg, "http://b.example/popular", score=16.0, overdue=1.0, interval=DAY)
    assert expected_priority(cfg, long_overdue) > expected_priority(cfg, high_score)
    assert generated(spark, cfg, new_root("d"),
                     [long_overdue, high_score]) == {"http://a.example/stale"}


def split_crawldb(cfg, due_discovery=100, due_refresh=100):
    """100 new and 100 known URLs over 10 hosts, distinct priorities; beyond ``due_*`` of each
    pool the URLs are not due yet."""
    rows = []
    for i in range(100):
        host = f"http://h{i % 10}.example"
        rows.append(unfetched(cfg, f"{host}/new{i}", score=0.5 + i / 100, depth=1,
                              due_in=None if i < due_discovery else 3600.0))
        if i < due_refresh:
            rows.append(fetched(cfg, f"{host}/old{i}", score=0.5 + i / 97, overdue=60.0 + 600.0 * i))
        else:
            rows.append(fetched(cfg, f"{host}/old{i}", overdue=-3600.0))
    return rows


def pools(urls):
    return ({u for u in urls if "/new" in u}, {u for u in urls if "/old" in u})


def test_budget_split_between_discovery_and_refresh(spark, new_root):
    cfg = make_config(generate__top_n=20, generate__discovery_share=0.3)
    rows = split_crawldb(cfg)
    new, old = pools(generated(spark, cfg, new_root("c"), rows))
    assert (len(new), len(old)) == (6, 14)
    # each pool by priority
    assert new == top_by_priority(cfg, [r for r in rows if r["fetch_count"] == 0], 6)
    assert old == top_by_priority(cfg, [r for r in rows if r["fetch_count"] > 0], 14)
    # without the split, known URLs (staleness > 1) would have taken every place
    by_priority = sorted(rows, key=lambda r: -expected_priority(cfg, r))[:20]
    assert all(r["fetch_count"] > 0 for r in by_priority)


def test_a_short_pool_leaves_its_share_to_the_other(spark, new_root):
    cfg = make_config(generate__top_n=20, generate__discovery_share=0.3)
    rows = split_crawldb(cfg, due_discovery=3)
    new, old = pools(generated(spark, cfg, new_root("c"), rows))
    assert new == {"http://h0.example/new0", "http://h1.example/new1", "http://h2.example/new2"}
    assert len(old) == 17
    assert old == top_by_priority(cfg, [r for r in rows if r["fetch_count"] > 0 and r["next_fetch_at"] <= NOW], 17)
    # and the other way round: 2 due known URLs leave 18 places to discovery
    rows = split_crawldb(cfg, due_refresh=2)
    new, old = pools(generated(spark, cfg, new_root("d"), rows))
    assert (len(new), old) == (18, {"http://h0.example/old0", "http://h1.example/old1"})


def test_per_host_caps_hold_and_rank_by_priority(spark, new_root):
    cfg = make_config(generate__top_n=100, generate__max_urls_per_host=5, generate__discovery_share=0.5,
                      fetch__host_overrides='[{"pattern": "small.example", "max_urls_per_cycle": 2}]')
    rows = []
    for host in ("a.example", "b.example", "small.example", "trap.example", "busy.example"):
        for i in range(15):
            # score falls with i, overdueness rises faster: priority order is not score order
            rows.append(fetched(cfg, f"http://{host}/old{i}", score=1.0 / (1 + i), overdue=3600.0 * i * i,
                                interval=3600.0))
            rows.append(unfetched(cfg, f"http://{host}/new{i}", score=0.1 + i / 100, depth=1))
    hosts = {"trap.example": {"url_budget": 3},                  # lowered by update's trap signal
             "busy.example": {"backoff_until": NOW + 600.0}}     # 429s: generate stays away
    urls = generated(spark, cfg, new_root("c"), rows, hosts)
    per_host = {}
    for u in urls:
        per_host.setdefault(host_of(u), set()).add(u)
    assert {h: len(u) for h, u in per_host.items()} == {"a.example": 5, "b.example": 5, "small.example": 2,
                                                       "trap.example": 3}
    for host, chosen in per_host.items():
        assert chosen == top_by_priority(cfg, [r for r in rows if r["host"] == host], len(chosen))
    # the highest-scored URL of a host is not among its chosen: priority ranks within a host
    assert "http://a.example/old0" not in urls and "http://a.example/old14" in urls


def test_hosts_are_cut_to_the_largest_cap_before_the_shuffle(spark):
    """The per-host cap is a literal bound too (largest_host_cap), so Spark keeps only each host's
    best rows per partition before the window's shuffle (WindowGroupLimit): a giant host's due
    URLs are never all shuffled and sorted in one task. The plan says so; the caps' results are
    test_per_host_caps_hold_and_rank_by_priority's."""
    from jobs.engine.schemas import HOST_STATE_SCHEMA
    cfg = make_config(generate__max_urls_per_host=5,
                      fetch__host_overrides='[{"pattern": "big.example", "max_urls_per_cycle": 40}, '
                                            '{"pattern": "slow.example", "delay_s": 9}]')
    assert generate.largest_host_cap(cfg) == 40
    names = URL_STATE_SCHEMA.fieldNames()
    rows = [unfetched(cfg, f"http://{('big', 'a', 'b')[i % 3]}.example/p{i}") for i in range(90)]
    due = rows_to_url_state(spark, [{f: r.get(f) for f in names} for r in rows])
    fetchlist = generate.select_fetchlist(due, spark.createDataFrame([], HOST_STATE_SCHEMA), cfg,
                                          "20260101000000-abcdef", NOW)
    assert "WindowGroupLimit" in fetchlist._jdf.queryExecution().executedPlan().toString()
    per_host = {}
    for r in fetchlist.select("host").collect():
        per_host[r["host"]] = per_host.get(r["host"], 0) + 1
    assert per_host == {"big.example": 30, "a.example": 5, "b.example": 5}
