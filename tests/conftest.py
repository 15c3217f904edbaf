"""Shared fixtures: ONE SparkSession for the whole run (local[2], 2 shuffle partitions, UTC,
UI off, Delta on), fast crawl configs, the bundled test web on loopback, and ONE real crawl of it
for the whole run (named_crawl), which the modules that check a whole crawl read."""
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
    # only). The session's own JVM (the spark fixture) keeps both compilers. They collect garbage
    # with the serial collector: a cold `deltacrawl stats` cost 19.0 / 19.4 CPU s against G1's
    # 21.1 / 21.3 and the documented throughput collector's 19.2 / 21.1 (all of the JVM's processes,
    # counted in a cgroup, interleaved, 2026-12-07): no collector threads to start or feed.
    "spark.jit": "quick",
    "spark.jvm_options": "-XX:+UseSerialGC",
    # ... and run their queries interpreted, as the session does (the spark fixture, below): a cold
    # JVM that runs a step on a few rows pays more to compile each query's generated Java than it
    # saves (a cold stats of a 364-URL crawl: 30.3 CPU s with code generation, 26.5 without). The
    # users' way, with code generation, is what test_cli's spark-submit step runs.
    "spark.conf.spark.sql.codegen.wholeStage": "false",
    "spark.conf.spark.sql.codegen.factoryMode": "NO_CODEGEN",
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
    # it lives as long as the whole run, where the optimising compiler pays for itself: both JIT
    # compilers, not FAST's quick one alone (with it five Spark-heavy modules took the same machine
    # CPU and 1.1x the wall, docs/decisions.md "The quick compiler for one step"), and the
    # documented JVM options. Its queries run interpreted, without Spark's code generation
    # (FAST): on test-sized data, compiling each query's Java
    # (Janino, then the JIT compiling Janino and the generated classes) costs more than it saves:
    # over a whole run the two session JVMs used 804 CPU s instead of 984 (docs/development.md).
    session = build_spark(make_config(**{"spark.jit": "full", "spark.jvm_options": build_config()["spark.jvm_options"]}))
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


# The shared crawl (named_crawl): 3 cycles, as tests/test_e2e.py's end-to-end crawl has always had
NAMED_CRAWL_CYCLES = 3
# its test web as the internet looks: hosts by name over HTTPS (a local CA), their http origins
# redirecting to https, names from a DNS server on loopback (crawl/devweb/web.py, named); and the
# demo's hostile hosts
NAMED_CRAWL_WEB = dict(hosts=10, pages_per_host=8, seed=7, crawl_delay_s=0.4, hostile=True, named=True)


@pytest.fixture(scope="session")
def named_crawl(spark, tmp_path_factory):
    """ONE real crawl for the modules that check what a whole crawl leaves (test_e2e, test_sql,
    test_tracking): ``deltacrawl crawl`` (the CLI's main, in-process, on the shared SparkSession)
    for NAMED_CRAWL_CYCLES cycles over the named test web (NAMED_CRAWL_WEB: 10 hosts by name over
    HTTPS, crawl delay 0.4 s) with the demo's hostile hosts among the seeds (devweb.hostile:
    failures, traps and duplicates for the SQL examples to find), MLflow tracking as shipped
    (TRACKED: a SQLite store in the crawl root), started from an empty working directory.

    Built once per run, not per module nor per worker: the first worker to ask builds it in the
    run's shared temporary folder under a lock, the others wait for it and read what it wrote
    (_build_named_crawl). Its crawl root is ``<shared>/named-crawl/crawl-data`` (docs/sql.md's
    relative path works from its parent). Tests only read it; a module that writes copies it
    first (copy_named_crawl). ``web`` is the same test web, not started: its link graph
    (outlinks, is_disallowed), names and addresses; ``log`` is the server's request log of the
    whole crawl and ``dns_queries`` its DNS server's count per name."""
    import fcntl
    import os
    import shutil
    from types import SimpleNamespace

    from crawl.devweb.web import DevWeb
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    base = shared / "named-crawl"
    with open(shared / "named-crawl.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (base / "crawl.json").exists():
                shutil.rmtree(base, ignore_errors=True)  # what a failed build elsewhere left
                _build_named_crawl(spark, base)
            facts = json.loads((base / "crawl.json").read_text(encoding="utf-8"))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    web = DevWeb(port=facts["port"], https_port=facts["https_port"], **NAMED_CRAWL_WEB)
    web.seeded_hostile = tuple(facts["seeded_hostile"])
    return SimpleNamespace(web=web, **{k: v for k, v in facts.items() if k not in ("port", "https_port",
                                                                                   "seeded_hostile")})


def _build_named_crawl(spark, base):
    """named_crawl's crawl, in ``base``; what the tests read besides the crawl root goes to
    ``base/crawl.json``, written last (its presence says the build finished)."""
    import contextlib
    import io
    import os

    from crawl.devweb.web import DevWeb
    from jobs import cli
    cwd = base / "cwd"
    cwd.mkdir(parents=True)
    web = DevWeb(port=0, **NAMED_CRAWL_WEB)
    web.seeded_hostile = tuple(make_config()["devweb.hostile"])
    built_ahead = lambda: max(spark.sparkContext.statusTracker().getJobIdsForGroup("deltacrawl-snapshots"),  # noqa: E731
                              default=-1)
    before = built_ahead()
    out, err = io.StringIO(), io.StringIO()
    root = str(base / "crawl-data")
    web.start()
    old = os.getcwd()
    try:
        seeds = web.demo_seed_urls()
        seeds_path = write_seeds(base / "seeds.txt", seeds)
        conf = web_conf(web, TRACKED)
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(["crawl", "--seeds", seeds_path, "--cycles", str(NAMED_CRAWL_CYCLES),
                           "--crawl-root", root, *conf])
    finally:
        os.chdir(old)
        web.stop()
    assert rc == 0, err.getvalue()
    names = {n.split(":")[0] for n in web.host_names} | {n.split(":")[0] for n in web.hostile_hosts.values()}
    facts = {"root": root, "cycles": NAMED_CRAWL_CYCLES, "seeds": seeds, "seeds_path": seeds_path, "cwd": str(cwd),
             "out": out.getvalue(), "err": err.getvalue(), "log": web.requests(),
             "dns_queries": {n: web.dns.queries_for(n) for n in sorted(names)},
             "snapshots_built_ahead": built_ahead() > before, "port": web.port, "https_port": web.https_port,
             "seeded_hostile": list(web.seeded_hostile)}
    (base / "crawl.json").write_text(json.dumps(facts), encoding="utf-8")


def copy_named_crawl(named_crawl, dest) -> str:
    """A copy of named_crawl's crawl root at ``<dest>/crawl-data``, for a module that changes it
    (or must not see another module's changes); returns its path."""
    import shutil
    target = str(dest / "crawl-data")
    shutil.copytree(named_crawl.root, target)
    return target


def web_conf(web, base=FAST):
    """``--conf key=value`` arguments: ``base`` (FAST unless given), plus what a crawl of ``web``
    sets (DevWeb.crawl_config: its networks, and, named, its DNS server and CA file)."""
    values = {**base, **{k: json.dumps(v) if isinstance(v, list) else v
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
# 2026-12-07 at 34c3eed, from --durations: 3,330 s in all, 27.7 min on two workers). `make test`
# runs the suite on two workers, a module at a time each (pytest-xdist, --dist loadfile
# --no-loadscope-reorder: see Makefile); starting the longest modules first keeps one worker from
# being left with a long module at the end while the other is idle. test_sql comes early and
# test_e2e and test_tracking late: whichever asks first builds the shared crawl (named_crawl) and
# another worker asking meanwhile would wait for it. Every other module (under a minute each)
# follows, in file order.
LONGEST_FIRST = ("test_airflow",          # 426 with nine cold JVMs; ~230 with five (one real cycle) since
                 "test_cluster",          # 285 with two cycles, one since
                 "test_sql",              # 174 with the shared crawl's 109
                 "test_dedup_job",        # 255
                 "test_crawl_overlap",    # 180
                 "test_kill",             # 161
                 "test_discovery_e2e",    # 159
                 "test_both_paths_property", "test_maintain", "test_jobs", "test_freshness", "test_hints",
                 "test_generate_race", "test_update_recovery", "test_e2e", "test_logs", "test_held_back",
                 "test_feeds", "test_cli", "test_address_guard", "test_s3_failures", "test_fetch_retry",
                 "test_generate", "test_tracking")


def _tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process, the children it has waited for, and every live
    process below it (the shared session's JVM, servers, subprocess steps), from /proc."""
    import os
    stats = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(pid)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
    below, todo = set(), [os.getpid()]
    while todo:
        parent = todo.pop()
        below.add(parent)
        todo.extend(pid for pid, (ppid, _) in stats.items() if ppid == parent and pid not in below)
    return sum(stats[pid][1] for pid in below if pid in stats) / os.sysconf("SC_CLK_TCK")


_CPU_CGROUP: list = []  # [path of this worker's own cpu accounting group, its counter's scale], once made


def _remove_stale_groups(base: str) -> None:
    """Remove the groups of workers that are gone: a worker cannot always remove its own as it ends
    (pyspark stops the session's JVM only when the interpreter exits, after pytest_unconfigure)."""
    import os
    for name in os.listdir(base):
        if name.startswith("deltacrawl-test-") and not os.path.exists(f"/proc/{name.rsplit('-', 1)[1]}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:  # a process still in it, or another worker removed it first
                pass


def _cgroup_cpu_s() -> float | None:
    """CPU seconds charged so far to this worker's own cgroup: every process it started, also those
    that left its process tree (a subprocess started in a session of its own, Airflow's task
    runners, daemonised servers). The worker moves itself into a new group the first time (cgroup v1
    cpuacct or v2, where this user may make one: root in a container); None where it cannot."""
    import os
    if not _CPU_CGROUP:
        _CPU_CGROUP.append(None)
        for base, counter in (("/sys/fs/cgroup/cpuacct", "cpuacct.usage"), ("/sys/fs/cgroup", "cpu.stat")):
            if not os.path.exists(os.path.join(base, counter)) and not os.path.exists(os.path.join(base, "cgroup.procs")):
                continue
            group = os.path.join(base, f"deltacrawl-test-{os.getpid()}")
            _remove_stale_groups(base)
            try:
                os.makedirs(group, exist_ok=True)
                with open(os.path.join(group, "cgroup.procs"), "w") as fh:
                    fh.write(str(os.getpid()))
            except OSError:
                continue
            _CPU_CGROUP[0] = os.path.join(group, counter)
            break
    if _CPU_CGROUP[0] is None:
        return None
    with open(_CPU_CGROUP[0]) as fh:
        text = fh.read()
    if _CPU_CGROUP[0].endswith("cpuacct.usage"):
        return int(text) / 1e9  # nanoseconds
    return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6  # cgroup v2: microseconds


def pytest_unconfigure(config):
    """The worker's cpu accounting group (_cgroup_cpu_s) goes when it ends: the worker moves back to
    the parent group and removes its own (left in place while a straggler still runs in it, such as
    the session's JVM: the next run's workers remove it then, _remove_stale_groups)."""
    import os
    if _CPU_CGROUP and _CPU_CGROUP[0]:
        group = os.path.dirname(_CPU_CGROUP[0])
        try:
            with open(os.path.join(os.path.dirname(group), "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
            os.rmdir(group)
        except OSError:
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """DELTACRAWL_TEST_CPU=FILE: one line per test (its set-up, call and tear-down) appended to FILE
    with its CPU seconds and wall seconds, tab-separated, to rank the suite's tests by what they cost
    the machine rather than by a loaded run's durations. The CPU is the worker's own cgroup's where
    it can make one (_cgroup_cpu_s: everything the test started, wherever it went), else its
    process tree's (_tree_cpu_s: misses what left the tree)."""
    import os
    import time
    out = os.environ.get("DELTACRAWL_TEST_CPU")
    if not out:
        yield
        return
    cpu = _cgroup_cpu_s
    if cpu() is None:
        cpu = _tree_cpu_s
    before, wall = cpu(), time.monotonic()
    yield
    with open(out, "a") as f:
        f.write(f"{item.nodeid}\t{cpu() - before:.1f}\t{time.monotonic() - wall:.1f}\n")


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
        if "named_crawl" in getattr(item, "fixturenames", ()) and item.get_closest_marker("timeout") is None:
            # whichever test asks first builds the shared crawl (or waits for another worker's)
            # inside its own bound: a 3-cycle crawl takes 100-200 s on a loaded 2-core machine
            item.add_marker(pytest.mark.timeout(600))
