"""Two generates at once, and segments whose lease never committed (issue 14, item 3): never
two segments holding the same URL, never a fetch of a segment that holds no lease."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from pyspark.sql import functions as F

from jobs import fetch, generate, inject
from jobs.engine.errors import ConcurrentStepError, UserError
from jobs.engine.crawl_root import list_segments
from jobs.engine.tables import ensure_cycles_table
from crawl.config import with_values
from tests.conftest import FAST, write_seeds

DELTACRAWL = os.path.join(os.path.dirname(sys.executable), "deltacrawl")


def fetchlist_urls(spark, root, segment):
    return {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).select("url").collect()}


def leases(spark, root):
    """{segment id: leased URLs} from the crawldb."""
    out: dict[str, set[str]] = {}
    for r in (spark.read.format("delta").load(root.crawldb).filter(F.col("lease_until").isNotNull())
              .select("segment_id", "url").collect()):
        out.setdefault(r["segment_id"], set()).add(r["url"])
    return out


RIVAL_URLS = [f"http://h{i}.rival.example/" for i in range(5)]


@pytest.fixture(scope="module")
def rival_template(spark, tmp_path_factory):
    """A crawl root with RIVAL_URLS injected, once for the module: the tests that need a few due
    URLs copy it (rival_root) instead of injecting into a new root each (~6-9 CPU s an inject)."""
    from jobs.engine.crawl_root import CrawlRoot
    from tests.conftest import make_config
    base = tmp_path_factory.mktemp("race-template")
    inject.run(spark, make_config(), CrawlRoot(str(base / "crawl")), write_seeds(base / "seeds.txt", RIVAL_URLS))
    return base / "crawl"


@pytest.fixture
def rival_root(rival_template, root):
    """A fresh copy of rival_template at the test's own crawl root (the root fixture's path)."""
    shutil.copytree(rival_template, root.root)
    return root


def test_two_generates_at_once_never_lease_a_url_twice(spark, cfg, root, tmp_path):
    urls = [f"http://h{i % 7}.race.example/p{i}" for i in range(40)]
    inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt", urls))
    ensure_cycles_table(spark, root)  # both runs append a row to it
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("DELTACRAWL_VERBOSE", None)
    # the suite's fast settings (tests/conftest.py FAST: 2 shuffle partitions, not 8; the quick JIT
    # compiler), as the other CLI tests pass them
    fast = [arg for k, v in FAST.items() for arg in ("--conf", f"{k}={v}")]
    argv = [DELTACRAWL, "generate", "--crawl-root", root.root, *fast, "--conf", "generate.max_urls_per_host=3"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    results = [(p.wait(timeout=900), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    codes = sorted(code for code, _, _ in results)
    assert set(codes) <= {0, 3, 99}, results
    assert 0 in codes, results
    for code, _out, err in results:
        if code == 3:  # lost the race: one line (and the hint lines), no Java trace
            assert "ConcurrentStepError" in err and "run generate again" in err, err
            assert "at org.apache" not in err and len(err.strip().splitlines()) <= 4, err
    made = {out.strip() for code, out, _ in results if code == 0}
    on_disk = set(list_segments(spark, root))
    assert on_disk == made  # a loser leaves no segment behind
    held = leases(spark, root)
    assert set(held) == made
    for segment in made:
        assert os.path.exists(root.leased_marker(segment))
        assert fetchlist_urls(spark, root, segment) == held[segment]  # exactly its own URLs
    if len(made) == 2:  # both won, one after the other: disjoint segments
        first, second = sorted(made)
        assert not fetchlist_urls(spark, root, first) & fetchlist_urls(spark, root, second)


def test_fetch_refuses_a_segment_without_a_lease(spark, cfg, rival_root):
    root = rival_root  # any due URLs will do: a copy of the module's injected root
    segment = generate.run(spark, cfg, root).segment_id
    # the orphan a generate killed between its fetchlist and its lease MERGE leaves behind
    orphan = "20200101000000-0a0b0c"
    shutil.copytree(root.fetchlist(segment), root.fetchlist(orphan))
    with pytest.raises(UserError, match="holds no lease"):
        fetch.run(spark, cfg, root, orphan)
    # a segment from before the marker existed still passes when the crawldb leases it URLs
    os.remove(root.leased_marker(segment))
    fetch.check_leased(spark, root, segment)


@pytest.mark.parametrize("local_max_due", [10000, 0], ids=["in-memory", "spark"])
def test_a_url_a_rival_leased_meanwhile_is_never_in_the_segment(spark, cfg, rival_root, monkeypatch,
                                                                 local_max_due):
    """A rival generate leases one of the URLs this one chose after it read the crawldb and
    before its own lease commits: the lease passes over that row. The segment must not be
    fetched with it: the generate gives its other leases back, removes its segment and says to
    run again; the rival's lease stands."""
    root, urls = rival_root, RIVAL_URLS  # the five URLs injected, none leased yet

    def rival_first(lease):
        def leasing(spark_, *args):
            now = args[-1]  # both lease functions end with now
            spark.sql(f"UPDATE delta.`{root.crawldb}` SET lease_until = timestamp_micros({int((now + 600) * 1e6)}), "
                      f"segment_id = '20200101000000-aaaaaa' WHERE url = '{urls[2]}'").collect()
            return lease(spark_, *args)
        return leasing

    # between this generate's fetchlist (written) and its lease
    monkeypatch.setattr(generate, "lease_in_place", rival_first(generate.lease_in_place))
    monkeypatch.setattr(generate, "lease_by_merge", rival_first(generate.lease_by_merge))
    with pytest.raises(ConcurrentStepError, match="1 of this segment.s 5 URLs"):
        generate.run(spark, with_values(cfg, {"generate.local_max_due": local_max_due}), root)
    assert list_segments(spark, root) == []
    assert leases(spark, root) == {"20200101000000-aaaaaa": {urls[2]}}
    monkeypatch.undo()
    again = generate.run(spark, cfg, root)  # the four given back are due again at once
    assert fetchlist_urls(spark, root, again.segment_id) == set(urls) - {urls[2]}
