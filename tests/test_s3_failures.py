"""An object-storage crawl root that is missing, refuses us, or goes away mid-fetch.

Each ends in one clear line (exit 2 before Spark starts when it can be told then, exit 3 when it
happens during a step), and never in a half-written object or an inconsistent crawldb.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


from crawl.devweb.web import DevWeb
from tests.conftest import FAST, write_seeds
from tests.s3server import aws_environ, new_bucket
from tests.sparkcluster import free_port
from tests.test_cluster import DELTACRAWL, RUN_TIMEOUT_S, conf_args, download_prefix, s3_client


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([DELTACRAWL, *args], env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_bucket_is_one_line_before_spark_starts(moto_s3):
    proc = cli(["stats", "--crawl-root", "s3a://no-such-bucket-here/crawl"], dict(os.environ, **aws_environ(moto_s3)))
    assert proc.returncode == 2
    assert "no such bucket 'no-such-bucket-here'" in one_line_error(proc)


def test_unreachable_endpoint_is_one_line(moto_s3):
    env = dict(os.environ, **aws_environ(f"http://127.0.0.1:{free_port()}"))
    proc = cli(["generate", "--crawl-root", "s3a://bucket/crawl"], env)
    assert proc.returncode == 2
    assert "cannot reach the S3 endpoint" in one_line_error(proc)


def test_bad_credentials_are_one_line(tmp_path):
    """moto checks signatures only when told to (from its first request on): its own process."""
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                              env=dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = dict(os.environ, **aws_environ(f"http://127.0.0.1:{port}"))
        deadline = time.monotonic() + 60
        while True:  # until the server answers (403 from then on)
            proc = cli(["inject", str(write_seeds(tmp_path / "s.txt", ["http://127.0.0.2/"])),
                        "--crawl-root", "s3a://bucket/crawl",
                        *conf_args({"fetch.allow_networks": FAST["fetch.allow_networks"]})], env)
            if "cannot reach" not in proc.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert proc.returncode == 2
        assert "access denied" in one_line_error(proc)
    finally:
        server.kill()
        server.wait()


# Spark's s3a retries an unreachable endpoint for about a minute per operation by default (right
# for a blip, slow for a test of an outage): once here.
FEW_RETRIES = {"spark.conf.spark.hadoop.fs.s3a.retry.limit": 1, "spark.conf.spark.hadoop.fs.s3a.attempts.maximum": 1,
               "spark.conf.spark.hadoop.fs.s3a.retry.interval": "100ms",
               # one attempt per task: a retried fetch task meets the same dead endpoint, only later
               "spark.task_max_failures": 1}


class RestartableMoto:
    """A moto server on a fixed port that can go away and come back with what it held (every moto
    server of a process serves the same in-memory state)."""

    def __init__(self):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server = None

    def start(self) -> "RestartableMoto":
        from moto.server import ThreadedMotoServer
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            listener = getattr(self.server, "_server", None)
            if listener is not None:
                listener.server_close()  # refuse connections from now on, instead of hanging them
            self.server = None


def upload_root(client, local: Path, bucket: str, prefix: str) -> None:
    """Copy a crawl root made on the local disk into ``bucket`` under ``prefix`` (same relative paths:
    Delta's log names its files relative to the table). The local file system's checksum files
    (.name.crc) stay behind: s3a writes none."""
    for path in sorted(local.rglob("*")):
        if path.is_file() and not (path.name.startswith(".") and path.name.endswith(".crc")):
            client.upload_file(str(path), bucket, f"{prefix}{path.relative_to(local).as_posix()}")


def test_endpoint_down_mid_fetch_leaves_nothing_half_written(spark, tmp_path):
    """`deltacrawl fetch` of a segment in an s3a crawl root, the endpoint going away once the fetch
    has begun. The segment is injected and generated in the tests' session and copied into the
    bucket: the cold process under test is the fetch's alone (a whole `deltacrawl crawl` spent most
    of its time in inject and generate on s3a, before the moment the test is about)."""
    from jobs import generate, inject
    from jobs.engine.crawl_root import CrawlRoot
    from tests.conftest import make_config
    moto = RestartableMoto().start()
    web = DevWeb(hosts=3, pages_per_host=6, port=0, seed=3, crawl_delay_s=1.0).start()
    try:
        bucket = new_bucket(moto.endpoint, "down")
        root = f"s3a://{bucket}/crawl"
        env = dict(os.environ, **aws_environ(moto.endpoint), SPARK_LOCAL_IP="127.0.0.1",
                   XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"))
        seeds = write_seeds(tmp_path / "seeds.txt", web.seed_urls())
        local = CrawlRoot(str(tmp_path / "local"))
        cfg = make_config()
        inject.run(spark, cfg, local, seeds)
        segment = generate.run(spark, cfg, local).segment_id
        assert segment
        upload_root(s3_client(moto.endpoint), tmp_path / "local", bucket, "crawl/")
        proc = subprocess.Popen([DELTACRAWL, "fetch", segment, "--crawl-root", root,
                                 *conf_args(FAST), *conf_args(FEW_RETRIES)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # the fetch has begun once the test web sees a page request: then the endpoint goes away
            while not any(e["path"] not in ("/robots.txt", "/sitemap.xml") for e in web.requests()):
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.02)
            moto.stop()
            out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 3, out + err
        # the line that says what failed names the store that went away (Spark's own log lines
        # above it are issue 14's business)
        failed = [line for line in err.splitlines() if line.startswith("deltacrawl fetch: failed: ")]
        assert len(failed) == 1 and ("S3 endpoint" in failed[0] or "s3a://" in failed[0]), err[-3000:]
    finally:
        web.stop()
        moto.stop()

    moto.start()  # the endpoint is back, with what it held
    try:
        client = s3_client(moto.endpoint)
        copy = tmp_path / "copy"
        keys = download_prefix(client, bucket, "crawl/", copy)
        warcs = [k for k in keys if k.startswith("crawl/warc/")]
        assert all(k.endswith(".warc.gz") for k in warcs), warcs  # nothing half-written visible
        for key in warcs:
            check = subprocess.run([str(Path(sys.executable).with_name("warcio")), "check",
                                    str(copy / key[len("crawl/"):])], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        # the crawldb is consistent: every seed once, leased to the segment whose fetch failed
        rows = spark.read.format("delta").load(str(copy / "crawldb")).collect()
        assert sorted(r["url"] for r in rows) == sorted(web.seed_urls())
        assert all(r["status"] == "unfetched" and r["lease_until"] is not None for r in rows)
        assert {r["segment_id"] for r in rows} == {segment}
        # no results committed: at most the output committer's scratch space (_temporary/, which
        # it could not delete with the endpoint gone; the next fetch of the segment replaces it)
        fetched = [k for k in keys if k.startswith(f"crawl/segments/{segment}/fetched/")]
        assert all("/_temporary/" in k for k in fetched), fetched
    finally:
        moto.stop()


def test_fetch_refuses_speculative_execution(tmp_path):
    """A speculative copy of a fetch task would request its hosts' URLs twice: fetch refuses to
    run when speculation is on (sessions deltacrawl starts itself have it off), before a JVM starts
    (under spark-submit, the session's own setting is checked)."""
    proc = cli(["fetch", "20261201000000-abcdef", "--crawl-root", str(tmp_path / "crawl"),
                "--conf", "spark.conf.spark.speculation=true", *conf_args(FAST)],
               dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    assert proc.returncode == 2
    assert "spark.speculation=true" in one_line_error(proc)
