"""The training step of the driver's class archive (jobs/engine/class_archive.py), run as a child
process: ``python -m jobs.engine.class_archive_training ARCHIVE_PATH``. It starts Spark with Delta
and ``-XX:ArchiveClassesAtExit=ARCHIVE_PATH``, does what a small step does, and waits for its JVM
to exit, which is when the JVM writes the archive. Its own module, so that class_archive (imported
by jobs/engine/session.py) does not import the session back."""
from __future__ import annotations

import os
import sys
import tempfile


def train(dump_to: str) -> None:
    """What the archive is made of: the classes a small step loads (a Delta write, read and
    MERGE, a query plan, a Python task). Its JVM writes them to ``dump_to`` when it exits."""
    from crawl.config import build_config
    from jobs.engine.session import build_spark
    defaults = build_config()
    cfg = build_config(overrides={"spark.master": "local[1]", "spark.class_data_sharing": False,
                                  "spark.jvm_options": f"{defaults['spark.jvm_options']} "
                                                       f"-XX:ArchiveClassesAtExit={dump_to}"})
    spark = build_spark(cfg)
    with tempfile.TemporaryDirectory(prefix="deltacrawl-cds-") as work:
        table = os.path.join(work, "t")
        spark.range(100).selectExpr("id", "cast(id as string) as url").write.format("delta").save(table)
        from delta.tables import DeltaTable
        updates = spark.range(50, 150).selectExpr("id", "concat('u', id) as url")
        (DeltaTable.forPath(spark, table).alias("t").merge(updates.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        merged = spark.read.format("delta").load(table)
        merged.groupBy((merged.id % 7).alias("k")).count().collect()
        spark.sparkContext.parallelize(range(10), 1).mapPartitions(lambda rows: [sum(rows)]).collect()
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # the JVM exits when its stdin closes, and writes the archive as it does
        proc.stdin.close()
        proc.wait(timeout=600)


if __name__ == "__main__":
    train(sys.argv[1])
