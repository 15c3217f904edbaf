"""jobs/engine/tables.py: a crawl root made by an older deltacrawl gets the columns it lacks."""
from __future__ import annotations

from pyspark.sql.types import StructType

from crawl.fetch.robots import answers_of
from jobs.engine.schemas import HOST_STATE_SCHEMA
from jobs.engine.tables import ensure_tables

# host_state columns a newer deltacrawl added (robots.txt per origin, DNS and TLS, held_back): an old table lacks them
NEWER = ("robots_scheme", "robots_other", "addresses", "addresses_expire_at", "dns_queries", "dns_error", "tls_error",
         "held_back")


def test_an_old_host_state_gets_the_new_columns_and_its_robots_cache_is_not_reused(spark, root):
    old = StructType([f for f in HOST_STATE_SCHEMA.fields if f.name not in NEWER])
    row = {f.name: None for f in old.fields}
    row.update(host="a.test", host_bucket=1, robots_status=200, robots_txt="User-agent: *\nDisallow: /\n",
               requests=3, pages_fetched=2, errors=0)
    spark.createDataFrame([tuple(row[f.name] for f in old.fields)], old).write.format("delta") \
        .partitionBy("host_bucket").save(root.hostdb)
    ensure_tables(spark, root)
    table = spark.read.format("delta").load(root.hostdb)
    assert [f.name for f in table.schema.fields] == HOST_STATE_SCHEMA.fieldNames()
    [migrated] = [r.asDict() for r in table.collect()]
    assert all(migrated[c] is None for c in NEWER) and migrated["requests"] == 3
    # written before robots.txt was read per origin: not a cached answer of either origin (read again once)
    assert answers_of({**migrated, "robots_fetched_at": 1e9}) == {}


def _stats_both_ways(spark, root) -> dict:
    """stats of ``root`` read by DuckDB (the default) and by Spark: asserted equal, returned."""
    import time

    from crawl.config import with_values
    from jobs import stats
    from tests.conftest import make_config
    cfg, now = make_config(), time.time()
    duck = stats.collect_stats(spark, cfg, root, now)
    assert duck == stats.collect_stats(spark, with_values(cfg, {"crawldb.driver_reader": "spark"}), root, now)
    return duck


def test_stats_reads_an_old_crawl_root_both_ways(spark, root):
    """stats on tables an older deltacrawl wrote (no held_back, content_type or parse_error in the
    crawldb; no DNS, TLS or held_back columns in the hostdb), never touched by a step since:
    read whole by DuckDB into a local relation (reads.queried_frame) or by Spark, the same report,
    the missing columns counted as empty."""
    from datetime import datetime

    from jobs.engine.schemas import URL_STATE_SCHEMA
    url_old = StructType([f for f in URL_STATE_SCHEMA.fields if f.name not in ("held_back", "content_type",
                                                                                "parse_error")])
    rows = []
    for i, status in enumerate(("fetched", "fetched", "unfetched", "gone")):
        row = {f.name: None for f in url_old.fields}
        row.update(url=f"http://a.test/{i}", url_hash=i, host="a.test", host_bucket=1, status=status, depth=i,
                   score=1.0, discovered_at=datetime(2026, 1, 1), retries=0, change_count=0, fetch_count=0,
                   http_status=200 if status == "fetched" else None)
        rows.append(tuple(row[f.name] for f in url_old.fields))
    spark.createDataFrame(rows, url_old).write.format("delta").partitionBy("host_bucket").save(root.crawldb)
    host_old = StructType([f for f in HOST_STATE_SCHEMA.fields if f.name not in NEWER])
    host = {f.name: None for f in host_old.fields}
    host.update(host="a.test", host_bucket=1, robots_status=200, requests=3, pages_fetched=2, errors=0)
    spark.createDataFrame([tuple(host[f.name] for f in host_old.fields)], host_old).write.format("delta") \
        .partitionBy("host_bucket").save(root.hostdb)
    duck = _stats_both_ways(spark, root)
    assert duck["total_urls"] == 4 and dict(duck["by_status"]) == {"fetched": 2, "unfetched": 1, "gone": 1}
    assert duck["held_back"] == [] and duck["by_content_type"] == [] and duck["hostdb"]["dns_errors"] == 0


def test_stats_of_empty_tables_both_ways(spark, root):
    """stats of a crawl root whose tables hold no row yet (an inject of nothing): DuckDB's empty
    read (reads.queried_frame) makes a local relation as Spark's read does, the same report."""
    ensure_tables(spark, root)
    duck = _stats_both_ways(spark, root)
    assert duck["total_urls"] == 0 and duck["by_status"] == [] and duck["hostdb"]["links"]["found"] == 0
