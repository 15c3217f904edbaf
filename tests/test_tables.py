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
