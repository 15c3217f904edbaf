"""Shared fixtures: ONE SparkSession for the whole run (local[2], 2 shuffle partitions, UTC,
UI off, Delta on), fast crawl configs, and the bundled test web on loopback."""
from __future__ import annotations

import pytest

from crawl.config import build_config

# Settings that keep tests fast on a 2-core machine; everything else is the documented default.
FAST = {
    "spark.master": "local[2]",
    "spark.shuffle_partitions": 2,
    "fetch.delay_s": 0.2,
    "fetch.tasks": 2,
    "fetch.connect_timeout_s": 2.0,
    "fetch.read_timeout_s": 3.0,
    "fetch.total_timeout_s": 5.0,
}


def make_config(**overrides):
    merged = dict(FAST)
    merged.update({k.replace("__", "."): v for k, v in overrides.items()})
    return build_config(overrides=merged)


@pytest.fixture(scope="session")
def spark():
    from jobs.session import build_spark
    session = build_spark(make_config())
    yield session
    session.stop()


@pytest.fixture
def cfg():
    return make_config()


@pytest.fixture
def root(tmp_path):
    from jobs.tables import CrawlRoot
    return CrawlRoot(str(tmp_path / "crawl"))


@pytest.fixture
def devweb():
    from crawl.devweb import DevWeb
    web = DevWeb(hosts=10, pages_per_host=8, port=0, seed=7, crawl_delay_s=0.4)
    web.start()
    yield web
    web.stop()


def write_seeds(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def moto_s3():
    """The endpoint URL of a moto S3 server on 127.0.0.1, for the whole run (tests/s3server.py)."""
    from tests.s3server import moto_server
    with moto_server() as endpoint:
        yield endpoint
