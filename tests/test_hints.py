"""Change hints pushed into the inbox (issue 32, "Change hints"): crawl/crawldb/hints.py parses
and filters, jobs/hint.py appends, generate applies them (jobs/engine/hint_inbox.py)."""
from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from crawl.crawldb.hints import SHOWN_BAD_LINES, parse_hint_lines
from crawl.net.filters import LinkFilter
from jobs import cli, fetch, generate, hint, inject, update
from jobs.engine.crawl_root import CrawlRoot, read_marker, write_marker
from jobs.engine.hint_inbox import consume_hints, consumed_marker, hints_path
from jobs.engine.tables import table_version
from tests.conftest import make_config, write_seeds
from tests.fixed_web import FixedWeb
from tests.test_update_recovery import assert_consistent


def test_hint_lines_are_normalised_like_seeds_and_filtered_like_links():
    cfg = make_config(discovery__deny_extensions=json.dumps(["jpg"]))
    lines = ["# changed today", "HTTP://Example.COM:80/a#frag  2026-12-04", "", "http://example.com/a",
             "not-a-url", "ftp://example.com/file", "http://example.com/photo.jpg", "http://example.com/b"]
    parsed = parse_hint_lines(lines, LinkFilter.from_config(cfg), int(cfg["discovery.max_url_length"]))
    assert parsed.urls == ["http://example.com/a", "http://example.com/b"]
    assert parsed.duplicates == 1
    assert [n for n, _text, _reason in parsed.rejected] == [5, 6, 7]
    assert "extension" in parsed.rejected[2][2]
    message = parsed.describe_rejected()
    assert message.startswith("3 bad lines skipped (line 5: 'not-a-url'")
    many = parse_hint_lines([f"bad {i}" if i % 2 else f"::{i}" for i in range(20)], LinkFilter.from_config(cfg))
    assert f"and {20 - SHOWN_BAD_LINES} more" in many.describe_rejected()


@pytest.fixture(scope="module")
def fetched_once(spark, tmp_path_factory):
    """Where both tests below start: a crawl root whose first segment, the two seeds /known.html
    and /other.html of a FixedWeb host (which also serves /new.html, linked from nowhere), is
    fetched and not updated yet (both URLs leased to it). Each test crawls on a copy of it
    (copy_of); the web serves the whole module, ``seen`` is how many requests it had then."""
    tmp = tmp_path_factory.mktemp("hints")
    web = FixedWeb(hosts=1).start()
    try:
        known, other = (web.put(0, p, f"<html><body>{p}</body></html>") for p in ("/known.html", "/other.html"))
        new = web.put(0, "/new.html", "<html><body>new</body></html>")
        # the first generate takes the two new seeds whatever generate.fill_budget says (nothing
        # was fetched before: no URL to take early), so this serves both tests' configs
        cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1, sitemaps__enabled=False)
        root = CrawlRoot(str(tmp / "crawl"))
        inject.run(spark, cfg, root, write_seeds(tmp / "seeds.txt", [known, other]))
        first = generate.run(spark, cfg, root).segment_id
        fetch.run(spark, cfg, root, first)
        yield SimpleNamespace(web=web, root=root, first=first, known=known, other=other, new=new,
                              seen=len(web.requests()))
    finally:
        web.stop()


def copy_of(fetched_once, tmp_path) -> CrawlRoot:
    root = CrawlRoot(str(tmp_path / "crawl"))
    shutil.copytree(fetched_once.root.root, root.root)
    return root


def test_hints_make_known_urls_due_and_add_new_ones(spark, fetched_once, tmp_path, capsys):
    web, first = fetched_once.web, fetched_once.first
    known, new = fetched_once.known, fetched_once.new
    root = copy_of(fetched_once, tmp_path)
    seen = len(web.requests())  # the other test may have crawled this web before
    cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1, sitemaps__enabled=False)
    update.run(spark, cfg, root, first)
    assert generate.run(spark, cfg, root).segment_id is None  # nothing due: both fetched just now

    # garbage only: refused before Spark, with the count and the first lines, nothing written
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not-a-url\n::\nhttp://\n", encoding="utf-8")
    assert cli.main(["hint", str(garbage), "--crawl-root", root.root]) == 2
    err = capsys.readouterr().err
    assert "no valid URL in hints file" in err and "3 bad lines skipped" in err and "'not-a-url'" in err
    assert "Traceback" not in err
    assert not DeltaTable.isDeltaTable(spark, hints_path(root))
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 8)
    assert cli.main(["hint", str(tmp_path / "binary.txt"), "--crawl-root", root.root]) == 2
    assert "is not a text file" in capsys.readouterr().err

    result = hint.run(spark, cfg, root, write_seeds(tmp_path / "changed.txt", [known, new, "garbage line"]))
    assert (result.accepted, result.rejected) == (2, 1)
    segment = generate.run(spark, cfg, root).segment_id
    assert segment is not None
    chosen = {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()}
    assert chosen == {known, new}  # the hinted known URL, due again, and the new one; not the other
    assert read_marker(spark, consumed_marker(root)) == str(table_version(spark, hints_path(root)))
    fetch.run(spark, cfg, root, segment)
    update.run(spark, cfg, root, segment)
    rows = {r["url"]: r for r in spark.read.format("delta").load(root.crawldb).collect()}
    assert rows[known]["status"] == "notmodified" and rows[new]["status"] == "fetched"
    assert_consistent(spark, root)  # the new URL counts in its host's url_count
    log = web.requests()
    requests = [e for e in log[:fetched_once.seen] + log[seen:] if e["path"] == "/known.html"]
    assert len(requests) == 2 and requests[1]["inm"]  # the hinted refetch was conditional

    # consumed once: the next generate finds nothing new; and hints read again (a generate
    # that died before moving the marker) change nothing
    assert generate.run(spark, cfg, root).segment_id is None
    os.remove(root.local_path(consumed_marker(root)))
    again = consume_hints(spark, cfg, root)
    assert (again.hinted, again.made_due, again.inserted) == (2, 0, 0)
    assert generate.run(spark, cfg, root).segment_id is None
    write_marker(spark, consumed_marker(root), "99\n")  # a marker beyond the table (made anew since)
    assert consume_hints(spark, cfg, root).hinted == 2
    due = spark.read.format("delta").load(root.crawldb).filter(F.col("next_fetch_at") <= F.current_timestamp())
    assert due.count() == 0

    # new URLs only while their host's total budget has room (3 URLs known, 4 allowed); a known
    # URL is made due whatever the budget says
    capped = make_config(fetch__delay_s=0.05, fetch__tasks=1, sitemaps__enabled=False,
                         discovery__max_urls_per_host_total=4)
    extra = [f"{web.base(0)}/extra{i}.html" for i in range(3)]
    hint.run(spark, capped, root, write_seeds(tmp_path / "many.txt", [known, *extra]))
    result = consume_hints(spark, capped, root)
    assert (result.hinted, result.made_due, result.inserted, result.over_budget) == (4, 1, 1, 2)
    assert spark.read.format("delta").load(root.crawldb).count() == 4
    assert_consistent(spark, root)


def test_a_hint_for_a_url_leased_to_a_segment_waits_for_that_segments_answer(spark, fetched_once, tmp_path):
    """A hint that arrives after a leased URL was fetched, but before its segment's update, was
    applied and then overwritten by that update (the URL's next fetch set from the older answer):
    lost. Now it is carried to the next generate, which applies it as the answer in the crawldb
    is older than the hint; and a hint older than the answer is dropped there."""
    # the module's first segment: its two URLs fetched, the segment not updated yet, both leased
    page, first = fetched_once.known, fetched_once.first
    root = copy_of(fetched_once, tmp_path)
    cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1, sitemaps__enabled=False, generate__fill_budget=False)
    hint.run(spark, cfg, root, write_seeds(tmp_path / "changed.txt", [page]))
    assert generate.run(spark, cfg, root).segment_id is None  # leased: not applied, carried
    assert spark.read.format("delta").load(hints_path(root)).count() == 2  # the push and its carry
    update.run(spark, cfg, root, first)
    segment = generate.run(spark, cfg, root).segment_id
    assert segment is not None
    assert {r["url"] for r in spark.read.parquet(root.fetchlist(segment)).collect()} == {page}
    fetch.run(spark, cfg, root, segment)
    update.run(spark, cfg, root, segment)
    assert_consistent(spark, root)
    # a hint older than the copy: dropped, not carried again
    assert generate.run(spark, cfg, root).segment_id is None
    assert spark.read.format("delta").load(hints_path(root)).count() == 2
