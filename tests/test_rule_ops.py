"""crawl/rule_ops.py: a rule written once over the ops gives the same answer on Python values
(NUMPY_OPS, the driver paths) and on Spark Columns (jobs.engine.column_ops.COLUMN_OPS), nulls included
(every rule both paths share: update's, its held_back reasons and rewrites, dedup's, generate's
ranking and selection, the host overrides' caps, the SimHash distance and the canonical page's
key), and an ordering spec sorts Python rows as Spark's orderBy sorts them."""
from __future__ import annotations

import itertools

from pyspark.sql import Column
from pyspark.sql import functions as F

from crawl.crawldb import held_back as hb
from crawl.crawldb.in_memory import duplicate_score_rule, lastmod_hint_rule, lost_content_rule, within_budget_rule
from crawl.crawldb.schedule import priority, priority_rule, valued_rule
from crawl.crawldb.selection import (early_rule, fetchable_rule, fetched_after_rule, host_cap_rule, is_discovery_rule,
                                     over_quota_rule, unexpired_rule)
from crawl.dedup.rules import canonical_key, first_fetched_rule, hamming
from crawl.rule_ops import NUMPY_OPS, By, nulls_first_key, sort_key
from jobs.engine.column_ops import COLUMN_OPS, spark_order
from jobs.engine.schemas import from_epoch_col
from jobs.generate import held_back_rule

NOW = 1_800_000_000.0
SETTINGS = {"score_exponent": 0.5, "depth_decay": 0.9, "score_floor": 1e-6}


def _grid():
    """Every combination of a few values, nulls included, for the rules' operands."""
    return [dict(zip(("score", "depth", "due", "interval", "count", "status", "text", "old", "dup", "at"), values))
            for values in itertools.product(
                [None, 0.0, 2.0], [None, 0, 3], [None, NOW - 7200.0, NOW + 1.0], [None, 0.0, 3600.0], [None, 0, 2],
                ["ok", "not_found"], [None, 5], [None, 5, 6], [None, "http://a.test/"], [None, NOW - 10.5e-6])]


def _rules(row, ops, col):
    """Each rule of both paths applied to the row's operands (``col``: how a field is read), as
    the paths apply them: the driver's priority through crawl.crawldb.schedule.priority (numbers,
    None as NaN), generate's Spark query through the rule itself."""
    if ops is NUMPY_OPS:
        weight = priority(col("score"), col("depth"), NOW, col("due"), col("interval"), **SETTINGS)

        def time(value):  # how the driver compares times: whole microseconds
            return NUMPY_OPS.micros(value)
    else:
        weight = priority_rule(col("score"), col("depth"), NOW, col("due"), col("interval"), ops, **SETTINGS)

        def time(value):  # how Spark compares them: timestamps
            return from_epoch_col(value if isinstance(value, Column) else F.lit(value))
    return (
        weight,
        is_discovery_rule(col("count"), ops),
        host_cap_rule(ops.lit(3), col("count"), ops),
        lost_content_rule(col("status"), col("text"), col("old"), col("dup"), ops),
        lastmod_hint_rule(time(col("due")), time(col("at")), ops),
        fetched_after_rule(time(col("at")), time(NOW - 20e-6), ops),
        within_budget_rule(ops.lit(2), ops.lit(3), col("count"), ops),
        first_fetched_rule(col("due"), col("at"), ops),
    )


def _ranking_grid():
    """Every combination of a few values, nulls included, for the operands of generate's ranking
    (a refresh value, a URL taken early) and selection."""
    return [dict(zip(("status", "score", "depth", "due", "last", "interval", "value", "slope", "lease", "rank"), values))
            for values in itertools.product(
                ["fetched", "not_modified", "unfetched"], [None, 2.0], [None, 3], [None, NOW - 7200.0, NOW + 1.0],
                [None, NOW - 7200.0, NOW - 3599.0], [None, 0.0, 3600.0], [None, 50.0], [None, 0.0, 2.0],
                [None, NOW, NOW + 600.0], [1, 3])]


def _ranking_rules(row, ops, col):
    """generate's ranking and selection rules (and update's duplicate score) applied to the row's
    operands as the paths apply them: on the driver to numbers (None as NaN, as generate reads its
    Arrow columns), in Spark to Columns; times as each path compares them."""
    if ops is NUMPY_OPS:
        def num(name):
            value = col(name)
            return float("nan") if value is None else value

        def time(value):
            return NUMPY_OPS.micros(value)
    else:
        num = col

        def time(value):
            return from_epoch_col(value if isinstance(value, Column) else F.lit(value))
    early = early_rule(col("status"), num("due"), num("last"), NOW, 3600.0, ops)
    valued = dict(early=early, status=col("status"), refresh_value=num("value"), refresh_slope=num("slope"),
                  last_fetched_at=num("last"))
    if ops is NUMPY_OPS:
        weight = priority(num("score"), num("depth"), NOW, num("due"), num("interval"), **SETTINGS, **valued)
    else:
        weight = priority_rule(col("score"), col("depth"), NOW, col("due"), col("interval"), ops, **SETTINGS, **valued)
    return (
        weight,  # importance, staleness, early staleness, the refresh value, as generate ranks
        early,
        valued_rule(col("status"), num("value"), num("slope"), num("last"), num("interval"), ops),
        fetchable_rule(time(num("due")), time(num("lease")), time(NOW), early, ops),
        over_quota_rule(col("rank"), is_discovery_rule(col("depth"), ops), (2, 1), ops),
        unexpired_rule(time(num("lease")), time(NOW), ops),
        held_back_rule(time(num("due")), time(num("lease")), time(NOW), ops),
        duplicate_score_rule(num("score"), col("value"), 0.1, ops),
    )


def _same_on_both_paths(spark, rows, schema, rules):
    df = spark.createDataFrame([tuple(r.values()) for r in rows], schema)
    by_spark = df.select(*[c.alias(f"r{i}") for i, c in enumerate(rules(None, COLUMN_OPS, F.col))]).collect()
    for row, got in zip(rows, by_spark):
        expected = rules(row, NUMPY_OPS, row.get)
        for i, (mine, theirs) in enumerate(zip(expected, got)):
            mine = None if NUMPY_OPS.is_null(mine) else mine
            if isinstance(theirs, float):
                assert abs(float(mine) - theirs) <= 1e-12 * max(1.0, abs(theirs)), (i, row)
            else:
                assert (theirs is None and mine is None) or bool(mine) == bool(theirs) and (
                    not isinstance(theirs, int) or int(mine) == theirs), (i, row, mine, theirs)


def test_every_shared_rule_is_the_same_on_python_values_and_on_columns(spark):
    _same_on_both_paths(spark, _grid(), "score double, depth int, due double, interval double, count int, "
                                        "status string, text long, old long, dup string, at double", _rules)
    _same_on_both_paths(spark, _ranking_grid(), "status string, score double, depth int, due double, last double, "
                                                "interval double, value double, slope double, lease double, rank int",
                        _ranking_rules)


def test_the_held_back_rules_give_the_same_reasons_on_python_values_and_on_columns(spark):
    """update's held_back rules (crawl/crawldb/held_back.py): a host's reason, whether it changed,
    and which of its URLs get it written; strings and nulls compared as they are."""
    stops = [None, "robots.txt unreachable", "x " + hb.NETWORK_ERRORS_SUFFIX, "something else"]
    reasons = [None, hb.CRAWL_DELAY, hb.TRAP_BUDGET]
    rows = [dict(zip(("stop", "deferred", "trap", "budget", "previous", "reason", "last", "changed"), values))
            for values in itertools.product(stops, [None, False, True], [None, "deep paths"], [None, 4], reasons,
                                            reasons, [None, "s1", "s2"], [False, True])]
    df = spark.createDataFrame([tuple(r.values()) for r in rows],
                               "stop string, deferred boolean, trap string, budget int, previous string, "
                               "reason string, last string, changed boolean")

    def rules(col, ops):
        return (hb.held_back_rule(col("stop"), col("deferred"), col("trap"), col("budget"), ops),
                hb.differs_rule(col("previous"), col("reason"), ops),
                hb.changed_rule(col("previous"), col("reason"), col("last"), "s1", ops),
                hb.rewrite_rule(col("changed"), col("previous"), col("reason"), ops))

    by_spark = df.select(*[c.alias(f"r{i}") for i, c in enumerate(rules(F.col, COLUMN_OPS))]).collect()
    for row, got in zip(rows, by_spark):
        expected = tuple(None if NUMPY_OPS.is_null(v) else v for v in rules(row.get, NUMPY_OPS))
        assert tuple(got) == expected, row


def test_an_ordering_sorts_python_rows_as_spark_orders_them(spark):
    order = (By("a", descending=True), By("b"), By("c"))
    rows = [{"a": a, "b": b, "c": c} for a, b, c in itertools.product([None, 1.0, 2.5], [None, 0, 7], ["x", "é", "z"])]
    df = spark.createDataFrame([(r["a"], r["b"], r["c"]) for r in rows], "a double, b int, c string")
    expected = [tuple(r.values()) for r in sorted(rows, key=sort_key(order))]
    assert [tuple(r) for r in df.orderBy(*spark_order(order)).collect()] == expected


def test_the_canonical_key_compares_as_spark_compares_its_struct(spark):
    pages = [(first, score, url) for first, score, url in itertools.product(
        [None, 1.0, 2.0], [None, 0.5, 3.0], ["http://a.test/xy", "http://a.test/z", "http://b.test/z"])]
    df = spark.createDataFrame(pages, "first double, score double, url string")
    key = F.struct(*canonical_key(F.col("first"), F.col("score"), F.col("url"), COLUMN_OPS))
    by_spark = [tuple(r) for r in df.orderBy(key.asc()).collect()]
    assert by_spark == sorted(pages, key=lambda p: nulls_first_key(canonical_key(*p)))


def test_hamming_counts_the_same_bits_on_columns(spark):
    values = [0, 1, -1, -(1 << 63), (1 << 63) - 1, 0x0F0F_0F0F_0F0F_0F0F, -0x1234_5678_9ABC_DEF0]
    pairs = list(itertools.product(values, values))
    df = spark.createDataFrame(pairs, "a long, b long")
    got = [r[0] for r in df.select(hamming(F.col("a"), F.col("b"), COLUMN_OPS)).collect()]
    assert got == [hamming(a, b) for a, b in pairs]
    assert hamming(0, -1) == 64


def test_host_override_caps_are_the_same_for_a_host_and_for_a_column(spark):
    from crawl.fetch.politeness import override_value
    from crawl.config import build_config
    from jobs.engine.host_caps import override_cap
    cfg = build_config(overrides={"fetch.host_overrides": [{"pattern": "*.a.example", "max_urls_per_cycle": 3},
                                                           {"pattern": "x.a.example", "max_urls_per_cycle": 9},
                                                           {"pattern": "b.example", "delay_s": 1.0},
                                                           {"pattern": "b.example", "max_urls_per_cycle": 5}]})
    hosts = ["a.example", "x.a.example:8080", "X.A.Example", "b.example:81", "xa.example", "[::1]:80", "c.example"]
    df = spark.createDataFrame([(h,) for h in hosts], "host string")
    got = [r[0] for r in df.select(override_cap(cfg, "max_urls_per_cycle", 7)).collect()]
    assert got == [override_value(cfg, "max_urls_per_cycle", 7, h) for h in hosts] == [3, 3, 3, 5, 7, 7, 7]
