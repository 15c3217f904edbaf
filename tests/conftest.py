"""Shared fixtures: ONE SparkSession for the whole run (local[2], 2 shuffle partitions, UTC,
UI off, Delta on), fast crawl configs, and the bundled test web on loopback."""
from __future__ import annotations

import json

import pytest

from crawl.config import build_config
from crawl.net.addresses import networks_of

# The address guard (crawl/net/addresses.py) refuses loopback like every internal address. The test
# webs live on 127.0.0.2 ... 127.0.0.254 (crawl.devweb.web.host_address), and the tests allow
# exactly those: never 127.0.0.1 or ::1, which tests/test_address_guard.py uses as the "inside"
# a crawl must not reach with these very settings.
TEST_WEB_NETWORKS = networks_of(f"127.0.0.{i}" for i in range(2, 255))

# Settings that keep tests fast on a 2-core machine; everything else is the documented default.
FAST = {
    "spark.master": "local[2]",
    "spark.shuffle_partitions": 2,
    "fetch.delay_s": 0.2,
    "fetch.tasks": 2,
    "fetch.connect_timeout_s": 2.0,
    "fetch.read_timeout_s": 3.0,
    "fetch.total_timeout_s": 5.0,
    "fetch.allow_networks": json.dumps(TEST_WEB_NETWORKS),  # JSON: FAST also becomes --conf key=value
    # An operator and a contact (crawl/fetch/identity.py): many tests inject named hosts (a.example);
    # "deltacrawl" in it is what tests/politeness.py checks the test web saw.
    "fetch.user_agent": "deltacrawl-tests/0.1 (+http://127.0.0.1/; tests@localhost)",
    # The JVMs the tests start as subprocesses (the CLI's, a standalone cluster's, Airflow's tasks)
    # live for a step or a short crawl: the quick JIT compiler alone makes each ~13 % cheaper
    # (BENCHMARKS.md "JVM options"), for the short crawls too ("auto" gives it to single steps
    # only). The session's own JVM (the spark fixture) keeps both compilers. They keep the JVM's
    # own collector (G1) too, not the documented throughput one: the suite's figures were taken so.
    "spark.jit": "quick",
    "spark.jvm_options": "",
    # No MLflow run: a crawl's MLflow bookkeeping (a new SQLite store, its schema migrations, metrics
    # per step, the charts) made test_e2e.py and test_sql.py cost 312 CPU s instead of 279
    # (docs/development.md). The tests of
    # tracking itself (tests/test_tracking.py, the Airflow DAG run) crawl with TRACKED; the cycles
    # table is written either way.
    "mlflow.tracking_uri": "off",
}
# FAST with MLflow as shipped (a SQLite store in the crawl root)
TRACKED = {**FAST, "mlflow.tracking_uri": ""}


def make_config(**overrides):
    merged = dict(FAST)
    merged.update({k.replace("__", "."): v for k, v in overrides.items()})
    return build_config(overrides=merged)


@pytest.fixture(scope="session")
def spark():
    from jobs.engine.session import build_spark
    # it lives as long as the whole run, where the optimising compiler can pay for itself: both JIT
    # compilers, not FAST's quick one alone, and the documented JVM options. Its queries run
    # interpreted, without Spark's code generation: on test-sized data, compiling each query's Java
    # (Janino, then the JIT compiling Janino and the generated classes) costs more than it saves:
    # over a whole run the two session JVMs used 804 CPU s instead of 984 (docs/development.md). The
    # JVMs of the CLI, kill, cluster and Airflow tests run every step the way users do, with code
    # generation.
    session = build_spark(make_config(**{"spark.jit": "full", "spark.jvm_options": build_config()["spark.jvm_options"],
                                         "spark.conf.spark.sql.codegen.wholeStage": "false",
                                         "spark.conf.spark.sql.codegen.factoryMode": "NO_CODEGEN"}))
    yield session
    session.stop()


@pytest.fixture
def cfg():
    return make_config()


@pytest.fixture
def root(tmp_path):
    from jobs.engine.crawl_root import CrawlRoot
    return CrawlRoot(str(tmp_path / "crawl"))


@pytest.fixture
def devweb():
    from crawl.devweb.web import DevWeb
    web = DevWeb(hosts=10, pages_per_host=8, port=0, seed=7, crawl_delay_s=0.4)
    web.start()
    yield web
    web.stop()


@pytest.fixture
def named_devweb():
    """The test web as the internet looks: hosts by name over HTTPS (a local CA), their http origins
    redirecting to https, names from a DNS server on loopback (crawl/devweb/web.py, named)."""
    from crawl.devweb.web import DevWeb
    web = DevWeb(hosts=10, pages_per_host=8, port=0, seed=7, crawl_delay_s=0.4, named=True)
    web.start()
    yield web
    web.stop()


def web_conf(web):
    """``--conf key=value`` arguments: FAST, plus what a crawl of ``web`` sets (DevWeb.crawl_config:
    its networks, and, named, its DNS server and CA file)."""
    values = {**FAST, **{k: json.dumps(v) if isinstance(v, list) else v
                         for k, v in web.crawl_config(make_config()).items()}}
    return [arg for k, v in values.items() for arg in ("--conf", f"{k}={v}")]


def write_seeds(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def moto_s3():
    """The endpoint URL of a moto S3 server on 127.0.0.1, for the whole run (tests/s3server.py)."""
    from tests.s3server import moto_server
    with moto_server() as endpoint:
        yield endpoint


# Modules whose tests start JVMs of their own (subprocesses, a cluster, Airflow's tasks) or crawl
# for several cycles: marked slow as a whole. Tests elsewhere that do so carry @pytest.mark.slow.
SLOW_MODULES = {"test_airflow", "test_cluster", "test_kill", "test_generate_race", "test_logs", "test_e2e",
                "test_discovery_e2e", "test_tracking", "test_sql"}


# The modules that take longest, longest first (seconds of work in `make test` on this machine,
# 2026-12-02, from --junitxml: 5,046 s in all, 42 min on two workers). `make test` runs the suite
# on two workers, a module at a time each (pytest-xdist, --dist loadfile --no-loadscope-reorder:
# see Makefile); starting the longest modules first keeps one worker from being left with a long
# module at the end while the other is idle. Every other module (under a minute each) follows, in
# file order.
LONGEST_FIRST = ("test_cluster",        # 788, ~560 since its local twin crawl went: a standalone cluster
                 "test_airflow",        # 482 with six cold JVMs in a row; now ten, two at a time: its real crawl 245 s against 223 s
                 "test_discovery_e2e",  # 437
                 "test_dedup_job",      # 385
                 "test_jobs", "test_sql", "test_e2e", "test_tracking", "test_maintain", "test_cli", "test_kill",
                 "test_generate_race", "test_s3_failures", "test_update_recovery", "test_logs", "test_generate",
                 "test_fetch_retry")


def pytest_collection_modifyitems(config, items):
    """The markers of pyproject.toml, from what each test uses: ``spark`` for every test that needs
    the shared SparkSession (directly or through another fixture), ``cluster`` and ``airflow`` by
    module, ``slow`` by module (SLOW_MODULES) or by the test's own mark. Then the longest modules
    first (LONGEST_FIRST); a module's tests keep their order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__.rsplit(".", 1)[-1], len(rank)))
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if module in ("test_cluster", "test_airflow"):
            item.add_marker(getattr(pytest.mark, module[len("test_"):]))
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
