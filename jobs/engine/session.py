"""The one place a SparkSession is built.

Runs started by deltacrawl (``deltacrawl ...``) start their own JVM with the configured master,
the cached jars and the Delta SQL extension, and on a cluster master (anything but ``local``)
ship what the executors need (``spark.python_env``): by default the packed Python environment
with deltacrawl installed in it (jobs/engine/package.py), unpacked on each executor and used as its
Python. Under ``spark-submit`` the JVM already exists: master, memory, jars and archives come from
spark-submit (README, "Running on a cluster"), and only SQL and storage settings are applied here.

A crawl root on object storage (``s3a://``) adds the hadoop-aws jars and the s3a settings
(endpoint, region, path-style access, credentials) resolved by ``crawl.s3.s3_settings`` from
``conf/`` and the standard AWS variables, so that Spark's s3a and the fetch tasks' boto3 see the
same store.

Speculative execution is always off: a speculative copy of a fetch task would send a second
request for every URL of its hosts (jobs/fetch.py refuses to run when it is on).
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from pyspark.sql import SparkSession

from crawl.config import Config, spark_settings
from jobs.engine.class_archive import ensure_archive
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.jars import JAR_SETS, default_jars_dir, ensure_jars


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_object_store(crawl_root: str | None) -> bool:
    from crawl.s3 import is_s3_uri
    return bool(crawl_root) and is_s3_uri(crawl_root)


def s3a_hadoop_conf(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Hadoop s3a settings for the object store that ``crawl.s3.s3_settings`` resolves."""
    from crawl.s3 import s3_settings
    s3 = s3_settings(cfg)
    conf = {"fs.s3a.endpoint.region": s3.region,
            "fs.s3a.path.style.access": str(bool(s3.path_style)).lower()}
    if s3.endpoint_url:
        conf["fs.s3a.endpoint"] = s3.endpoint_url
        conf["fs.s3a.connection.ssl.enabled"] = str(s3.endpoint_url.lower().startswith("https:")).lower()
    if s3.access_key_id and s3.secret_access_key:
        conf["fs.s3a.access.key"] = s3.access_key_id
        conf["fs.s3a.secret.key"] = s3.secret_access_key
        if s3.session_token:
            conf["fs.s3a.session.token"] = s3.session_token
            conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return conf


def _jar_conf(cfg: Mapping[str, Any], sets: list[str]) -> dict[str, str]:
    cfg = Config.of(cfg)
    jars_dir = default_jars_dir(cfg.spark.jars_dir)
    paths, packages = [], []
    for name in sets:
        found = ensure_jars(jars_dir, name)
        if found is None:  # no Maven here: Spark's own resolution
            packages += JAR_SETS[name]()
        else:
            paths += [str(p) for p in found]
    conf = {}
    if paths:
        conf["spark.jars"] = ",".join(paths)
    if packages:
        conf.update({"spark.jars.packages": ",".join(packages), "spark.jars.ivy": str(jars_dir / "ivy")})
    return conf


def _ship_python(cfg: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
    """Make the executors run our code: returns the settings and a code zip to add after start (if any)."""
    cfg = Config.of(cfg)
    from jobs.engine.package import ENV_ALIAS, EXECUTOR_PYTHON, build_code_zip, build_env_archive
    mode = str(cfg.spark.python_env).strip()
    if mode == "code":
        return {}, str(build_code_zip())
    archive = str(build_env_archive()) if mode == "auto" else mode
    # Python workers are started with the driver's PYSPARK_PYTHON, resolved in the executor's
    # working directory, where spark.archives unpacks the environment under ENV_ALIAS.
    os.environ["PYSPARK_PYTHON"] = EXECUTOR_PYTHON
    return {"spark.archives": f"{archive}#{ENV_ALIAS}", "spark.pyspark.python": EXECUTOR_PYTHON}, None


def _start_jvm(settings: Mapping[str, str]) -> None:
    """Start the driver's JVM with its output in a log file (jobs/engine/logs.py), so stderr carries our
    lines only; with --verbose (no file) pyspark starts it as usual when the session is built."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from jobs.engine.logs import open_jvm_log
    handle = open_jvm_log()
    if handle is None:
        return
    conf = SparkConf(loadDefaults=False).setAll(settings.items())
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": handle, "stderr": handle})
    finally:
        handle.close()  # the JVM holds its own descriptor
    SparkContext(conf=conf, gateway=gateway)


DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def check_delta_session(spark: SparkSession) -> SparkSession:
    """A session someone else started (a pyspark shell, a notebook) is used as it is, so it must
    have Delta's SQL extension: without it every table read fails later, far from the cause."""
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", None) or ""):
        from jobs.engine.errors import UserError
        raise UserError(
            "the running SparkSession has no Delta Lake (spark.sql.extensions lacks "
            f"{DELTA_EXTENSION}), and Spark cannot add it to a session that exists: use "
            "'deltacrawl shell', or call spark.stop() before build_spark(), or start pyspark with "
            "--jars \"$(deltacrawl jars)\" --conf spark.sql.extensions=" + DELTA_EXTENSION +
            " --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog")
    return spark


_LOCAL_RE = re.compile(r"local(?:\[\s*(\*|\d+)\s*\])?")


def with_task_retries(master: str, max_failures: int) -> str:
    """``local`` / ``local[N]`` / ``local[*]`` never retry a failed task: they become
    ``local[N, max_failures]``. Any other master (a cluster's, or a local one that already says
    how many failures it allows) is returned as it is; a cluster reads spark.task.maxFailures."""
    match = _LOCAL_RE.fullmatch(master.strip())
    if match is None or max_failures <= 1:
        return master
    return f"local[{match.group(1) or 1}, {max_failures}]"


# Only the quick JIT compiler (C1), and the code cache at its tiered size: that option alone shrinks
# it to 48 MB, which a crawl of a few minutes fills, and the JIT then stops for the rest of the run.
QUICK_JIT = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")


def small_local_crawl(crawl_root: str | None, max_mb: float) -> bool:
    """``crawl_root`` is a folder on this machine whose crawldb's data files add up to at most
    ``max_mb`` MB (no crawldb yet: 0). Read from the file system before any JVM starts."""
    if not crawl_root or max_mb <= 0:
        return False
    root = CrawlRoot(crawl_root)
    if not root.is_local:  # an object store's or another file system's: not read from here
        return False
    limit, total = max_mb * 1024 * 1024, 0
    for folder, _, files in os.walk(root.local_path(root.crawldb)):
        for name in files:
            if name.endswith(".parquet"):
                try:
                    total += os.path.getsize(os.path.join(folder, name))
                except OSError:  # vacuumed meanwhile
                    continue
                if total > limit:
                    return False
    return True


def jit_options(cfg: Mapping[str, Any], one_step: bool, crawl_root: str | None = None,
                master: str = "local") -> list[str]:
    """The JVM options spark.jit asks for: the quick compiler alone for "quick", and for "auto" in a
    process that runs one step and exits, or that runs on a local master over a small local crawl
    root (small_local_crawl with crawldb.local_read_max_mb: a crawl, sql or shell on the driver's
    machine whose steps take their in-memory paths); none for "full". conf/defaults.toml says why."""
    cfg = Config.of(cfg)
    mode = cfg.spark.jit
    if mode == "auto":
        quick = one_step or (master.startswith("local")
                             and small_local_crawl(crawl_root, cfg.crawldb.local_read_max_mb))
        return list(QUICK_JIT) if quick else []
    return list(QUICK_JIT) if mode == "quick" else []


def java_options(cfg: Mapping[str, Any], master: str, class_archive: Path | None = None,
                 one_step: bool = False, crawl_root: str | None = None) -> dict[str, str]:
    """The driver's JVM options (our log settings, the class archive if there is one, spark.jit's,
    then spark.jvm_options, so that an option there wins) and, for a cluster master, the
    executors' (spark.jit's and spark.jvm_options). ``one_step``: the process runs one step;
    ``crawl_root``: the crawl root it works on (spark.jit "auto" looks at its crawldb's size)."""
    cfg = Config.of(cfg)
    extra = [*jit_options(cfg, one_step, crawl_root, master), *str(cfg.spark.jvm_options).split()]
    log_conf = resources.files("conf").joinpath("log4j2.properties")
    # the archive, and the JVM's own warnings (an archive it cannot use, say) on stderr instead of
    # stdout, which carries a command's results
    archive = ([f"-XX:SharedArchiveFile={class_archive}", "-Xlog:disable", "-Xlog:all=warning:stderr"]
               if class_archive is not None else [])
    out = {"spark.driver.extraJavaOptions": " ".join([f"-Dlog4j.configurationFile=file:{log_conf}", *archive,
                                                      *extra])}
    if extra and not master.startswith("local"):
        out["spark.executor.extraJavaOptions"] = " ".join(extra)
    return out


def build_spark(cfg: Mapping[str, Any], crawl_root: str | None = None, one_step: bool = False) -> SparkSession:
    """The SparkSession with Delta (and S3 for a crawl root there). ``one_step``: this process runs
    one step and exits (spark.jit "auto" then gives its JVM the quick compiler alone)."""
    cfg = Config.of(cfg)
    active = SparkSession.getActiveSession()
    if active is not None:
        return check_delta_session(active)
    object_store = is_object_store(crawl_root)
    settings = {
        "spark.app.name": cfg.spark.app_name,
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(cfg.spark.shuffle_partitions),
        # Delta's log replay defaults to 50 partitions: far too many for small tables.
        "spark.databricks.delta.snapshotPartitions": str(cfg.spark.snapshot_partitions),
        "spark.sql.codegen.cache.maxEntries": str(cfg.spark.codegen_cache_entries),
        "spark.sql.session.timeZone": "UTC",
        # tables are addressed by path; keep Spark from creating ./spark-warehouse in the cwd
        "spark.sql.warehouse.dir": os.path.join(tempfile.gettempdir(), "deltacrawl-spark-warehouse"),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
    }
    hadoop = s3a_hadoop_conf(cfg) if object_store else {}
    settings.update({f"spark.hadoop.{key}": value for key, value in hadoop.items()})
    code_zip = None
    if not _under_spark_submit():
        master = with_task_retries(cfg.spark.master, cfg.spark.task_max_failures)
        from pyspark import SparkContext
        archive = ensure_archive(cfg) if SparkContext._gateway is None else None
        settings.update({"spark.master": master,
                         "spark.driver.memory": cfg.spark.driver_memory,
                         "spark.ui.enabled": str(cfg.spark.ui_enabled).lower(),
                         "spark.speculation": "false",
                         "spark.task.maxFailures": str(cfg.spark.task_max_failures),
                         **java_options(cfg, master, archive, one_step, crawl_root)})
        if master.startswith("local"):
            # Keep the driver on loopback (this machine's host name may resolve elsewhere), and run
            # Python workers with the interpreter that runs us, so they see the same packages.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        else:
            shipped, code_zip = _ship_python(cfg)
            settings.update(shipped)
        settings.update(_jar_conf(cfg, ["delta", "s3"] if object_store else ["delta"]))
        settings.update(spark_settings(cfg))  # the user's own Spark settings win
        if SparkContext._gateway is None:  # no JVM yet (after spark.stop() pyspark keeps and reuses its JVM)
            _start_jvm(settings)
    spark = SparkSession.builder.config(map=settings).getOrCreate()
    spark.sparkContext.setLogLevel(cfg.spark.log_level)
    if code_zip:
        spark.sparkContext.addPyFile(code_zip)
    if hadoop:  # under spark-submit the context existed before the builder's settings
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in hadoop.items():
            conf.set(key, value)
    return spark
