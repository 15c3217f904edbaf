"""The one place a SparkSession is built.

Local runs (``deltacrawl ...``) start their own JVM with the configured master, the cached
Delta jars and the Delta SQL extension. Under ``spark-submit`` the JVM already exists: master,
memory and jars come from spark-submit (``--jars "$(deltacrawl jars)"``), and only SQL settings
are applied here.
"""
from __future__ import annotations

import os
import sys
import tempfile
from importlib import resources
from typing import Any, Mapping

from pyspark.sql import SparkSession

from jobs.jars import default_jars_dir, delta_coordinates, ensure_delta_jars


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_spark(cfg: Mapping[str, Any]) -> SparkSession:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = (SparkSession.builder.appName(cfg["spark.app_name"])
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.sql.shuffle.partitions", str(cfg["spark.shuffle_partitions"]))
               # Delta's log replay defaults to 50 partitions: far too many for small tables.
               .config("spark.databricks.delta.snapshotPartitions", str(cfg["spark.shuffle_partitions"]))
               .config("spark.sql.session.timeZone", "UTC")
               # tables are addressed by path; keep Spark from creating ./spark-warehouse in the cwd
               .config("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "deltacrawl-spark-warehouse"))
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.adaptive.enabled", "true"))
    if not _under_spark_submit():
        master = cfg["spark.master"]
        log_conf = resources.files("conf").joinpath("log4j2.properties")
        builder = (builder.master(master)
                   .config("spark.driver.memory", cfg["spark.driver_memory"])
                   .config("spark.ui.enabled", str(cfg["spark.ui_enabled"]).lower())
                   .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log_conf}"))
        if master.startswith("local"):
            # Keep the driver on loopback (this machine's host name may resolve elsewhere), and run
            # Python workers with the interpreter that runs us, so they see the same packages.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        jars_dir = default_jars_dir(cfg["spark.jars_dir"])
        jars = ensure_delta_jars(jars_dir)
        if jars is not None:
            builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
        else:
            builder = (builder.config("spark.jars.packages", ",".join(delta_coordinates()))
                       .config("spark.jars.ivy", str(jars_dir / "ivy")))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(cfg["spark.log_level"])
    return spark
