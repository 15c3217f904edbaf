"""The same crawl on a real Spark standalone cluster whose only shared storage is S3.

A master and two workers are started with pyspark's own ``spark-class`` (each worker with its
own work and local dirs, one core each), and ``deltacrawl crawl --conf spark.master=spark://...``
crawls the bundled test web for one cycle with its crawl root in a moto S3 bucket, given
nothing but the standard AWS variables — exactly what a user types. The executors start with a
bare Python: our code and its dependencies reach them in the packed environment.

Checked from the results, not from logs: the fetch tasks ran in two executors; every host of a
segment was fetched by exactly one task; the test web's own request log shows no politeness
breach; the crawldb, hostdb and WARC index hold what the test web says they must (the oracle a
local crawl is held to: tests/expected.py); the WARC files in the bucket are complete and
readable (warcio check, warc-get's ranged read); the cluster's processes are gone afterwards.
"""
from __future__ import annotations

import os
import time
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from crawl.devweb.web import DevWeb
from jobs import cli
from jobs.engine.package import build_env_archive
from tests.conftest import FAST, write_seeds
from tests.expected import assert_breadth_first, assert_hosts_and_index
from tests.politeness import assert_polite
from tests.s3server import aws_environ, new_bucket
from tests.sparkcluster import StandaloneCluster, die_with_parent

# One cycle: every step runs on the cluster once (inject, generate, fetch on the executors, dedup,
# update); what a second cycle adds (the first one's links fetched) is the local crawls' to check
# (tests/test_e2e.py), and here it cost a cold cycle more of the driver and both executors.
CYCLES = 1
DELTACRAWL = str(Path(sys.executable).with_name("deltacrawl"))
# Both runs crawl with exactly these settings.
CONF = {**FAST, "fetch.tasks": 2}
# The cluster run only: executors that fit the 1-core workers, and no wait for a data-local slot
# (a fetch task's input is a few rows; waiting 3 s for "locality" would only idle an executor).
CLUSTER_CONF = {"spark.conf.spark.executor.memory": "768m", "spark.conf.spark.cores.max": "2",
                "spark.conf.spark.locality.wait": "0"}
# A bound for a hung run, far above any healthy one: this test must never fail on a slow machine.
RUN_TIMEOUT_S = 3600
# Whichever test comes first starts the cluster and runs the crawl (cluster_run) inside its own
# bound: about 3 minutes with the suite's load on two cores (one cycle), far more on a busier machine.
pytestmark = pytest.mark.timeout(900)


def conf_args(conf: dict) -> list[str]:
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([DELTACRAWL, *args], env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          preexec_fn=die_with_parent)


def s3_client(endpoint: str):
    import boto3
    from tests.s3server import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=REGION,
                                          aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY)


def download_prefix(client, bucket: str, prefix: str, dest: Path) -> list[str]:
    """Copy every object under ``prefix`` to ``dest`` (same relative paths); return their keys."""
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            target = dest / obj["Key"][len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(target))
            keys.append(obj["Key"])
    return keys


@pytest.fixture(scope="module")
def web():
    web = DevWeb(hosts=6, pages_per_host=6, port=0, seed=11, crawl_delay_s=0.4).start()
    yield web
    web.stop()


@pytest.fixture(scope="module")
def cluster_run(web, moto_s3, tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    bucket = new_bucket(moto_s3, "cluster")
    root = f"s3a://{bucket}/crawl"
    seeds = write_seeds(base / "seeds.txt", web.seed_urls())
    # (an s3a root's MLflow store lives on the driver's machine, under XDG_DATA_HOME: a temp dir here)
    env = dict(os.environ, **aws_environ(moto_s3), SPARK_LOCAL_IP="127.0.0.1", XDG_DATA_HOME=str(base / "data"))
    web.clear_log()
    cluster = StandaloneCluster(base / "spark", workers=2, cores=1, memory="1g")
    # The executors' packed environment (spark.python_env "auto") is built, or found in the cache,
    # while the cluster's JVMs start, instead of by the driver once they are up: the driver finds
    # it under the same key (this Python, the same files) and ships it as it would have.
    with ThreadPoolExecutor(max_workers=1) as pool:
        packing = pool.submit(build_env_archive)
        with cluster:
            packing.result()
            # (CONF names local[2] as the master: the cluster's comes last, and wins)
            proc = run_cli(["crawl", "--seeds", seeds, "--cycles", str(CYCLES), "--crawl-root", root,
                            *conf_args(CONF), *conf_args(CLUSTER_CONF), "--conf",
                            f"spark.master={cluster.master_url}"], env)
            apps = cluster_apps(cluster)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    client = s3_client(moto_s3)
    keys = download_prefix(client, bucket, "crawl/", base / "copy")
    return SimpleNamespace(root=root, bucket=bucket, env=env, endpoint=moto_s3, log=web.requests(), copy=base / "copy",
                           keys=keys, stdout=proc.stdout, cluster=cluster, apps=apps, client=client, seeds=seeds)


def cluster_apps(cluster, attempts: int = 20) -> list[dict]:
    """The master's applications, completed or active. An application that just ended can be in
    neither list for a moment (the master moves it between them; seen under load), so ask again a
    few times, half a second apart, before taking none for an answer."""
    apps: list[dict] = []
    for _ in range(attempts):
        status = cluster.status()
        apps = status.get("completedapps", []) + status.get("activeapps", [])
        if apps:
            break
        time.sleep(0.5)
    return apps


def segments(copy: Path) -> list[str]:
    return sorted(p.name for p in (copy / "segments").iterdir())


def test_fetch_tasks_ran_on_two_executors_one_task_per_host(cluster_run, spark):
    assert cluster_run.apps and cluster_run.apps[0]["name"] == "deltacrawl"
    segs = segments(cluster_run.copy)
    assert len(segs) == CYCLES
    executors = set()
    for seg in segs:
        rows = spark.read.parquet(str(cluster_run.copy / "segments" / seg / "fetched")).collect()
        assert rows, seg
        tasks_per_host: dict[str, set] = {}
        for r in rows:
            tasks_per_host.setdefault(r["host"], set()).add(r["fetch_task"])
            executors.add(r["fetch_executor"])
        assert all(len(t) == 1 for t in tasks_per_host.values()), tasks_per_host
    # two different executor processes of the cluster fetched pages
    assert len(executors) >= 2, executors


def test_cluster_crawl_was_polite(cluster_run, web):
    assert_polite(web, cluster_run.log, float(CONF["fetch.delay_s"]))
    pages = [e["host"] + e["path"] for e in cluster_run.log if e["path"] not in ("/robots.txt", "/sitemap.xml")]
    assert len(pages) == len(set(pages)), "a page was requested twice"


def test_cluster_crawl_holds_what_the_test_web_says(cluster_run, spark, web):
    """The same oracle as a local crawl's (tests/test_e2e.py): worked out from the test web, not
    from a second crawl."""
    def rows(table):
        return spark.read.format("delta").load(str(cluster_run.copy / table)).collect()
    crawldb = {r["url"]: r for r in rows("crawldb")}
    fetched = assert_breadth_first(crawldb, web, web.seed_urls(), CYCLES)
    assert len(fetched) == len(web.seed_urls())  # the home pages; the links they hold are known, unfetched
    assert_hosts_and_index(crawldb, {r["host"]: r for r in rows("hostdb")}, rows("warc_index"), cluster_run.log)


def test_warcs_in_the_bucket_are_complete_and_readable(cluster_run, spark, monkeypatch, capsys):
    warcs = [k for k in cluster_run.keys if k.startswith("crawl/warc/")]
    assert warcs and all(k.endswith(".warc.gz") for k in warcs), warcs  # nothing half-written visible
    assert not cluster_run.client.list_multipart_uploads(Bucket=cluster_run.bucket).get("Uploads")
    for key in warcs:
        check = subprocess.run([str(Path(sys.executable).with_name("warcio")), "check",
                                str(cluster_run.copy / key[len("crawl/"):])], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    index = spark.read.format("delta").load(str(cluster_run.copy / "warc_index")).collect()
    assert {r["warc_uri"] for r in index} == {f"s3://{cluster_run.bucket}/{k}" for k in warcs}
    page = next(r for r in index if r["http_status"] == 200)
    # warc-get reads the record from the bucket with a ranged GET: its index row (the bucket's
    # warc_index, copied) names the object by its s3:// URI. In this process, on the shared session:
    # a cold JVM of its own (~13 CPU s) would add only a local Spark reading Delta on s3a, which
    # the cluster run's driver did for every step.
    for key, value in aws_environ(cluster_run.endpoint).items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    rc = cli.main(["warc-get", page["url"], "--crawl-root", str(cluster_run.copy), *conf_args(CONF)])
    out, err = capsys.readouterr()
    assert rc == 0, err[-3000:]
    assert f"WARC-Target-URI: {page['url']}" in out and "HTTP status: 200" in out
    assert "<html" in out.lower()


def test_cluster_processes_are_stopped(cluster_run):
    for proc in cluster_run.cluster.procs:
        assert proc.poll() is not None
    # and nothing of it is left listening
    with pytest.raises(OSError):
        cluster_run.cluster.status()
