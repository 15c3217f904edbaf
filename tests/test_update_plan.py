"""crawl/crawldb/in_memory.py, update's writes for a small segment, on crafted rows: which URLs
it updates, which new URLs each host's budget lets in (best first) and counts out, which known
URLs become due now. (tests/both_paths.py compares it with the Spark queries on a real crawl, and
tests/test_both_paths_property.py on generated ones.)"""
from __future__ import annotations

from crawl.crawldb import in_memory
from crawl.crawldb.status import DUPLICATE, FETCHED, FetchStatus, new_url_state, schedule_policy
from crawl.net.urls import host_bucket, host_of, url_hash
from crawl.fetch.politeness import override_value
from jobs.engine.host_caps import override_cap
from tests.conftest import make_config

SEGMENT = "20261201000000-abcdef"
NOW = 1_800_000_000.0
BUCKETS = 64
POLICY = schedule_policy(make_config())


def _state(url, **changes):
    host = host_of(url)
    state = new_url_state(url, host, host_bucket(host, BUCKETS), url_hash(url), 1, 1.0, NOW - 1000)
    state.update(changes)
    return state


def _outcome(url, status=FetchStatus.OK, links=(), **changes):
    host = host_of(url)
    row = {"url": url, "url_hash": url_hash(url), "host": host, "host_bucket": host_bucket(host, BUCKETS),
           "segment_id": SEGMENT, "depth": 1, "score": 1.0, "fetch_status": status, "http_status": 200,
           "fetched_at": NOW - 10, "content_hash": "c", "content_type": "text/html", "etag": None,
           "last_modified": None, "redirect_to": None, "error": None, "parse_error": None, "warc_file": None,
           "warc_offset": None, "warc_length": None, "canonical": None, "noindex": False, "text_hash": 7,
           "simhash": 1, "outlinks": list(links), "redirect_hops": 0}
    row.update(changes)
    return row


def _plan(outcomes, crawldb_rows, url_counts=None, cap=10, hosts=(), dup_of=None):
    outcomes = in_memory.with_duplicates(outcomes, dup_of or {}, 0.1)
    cands = in_memory.candidates(outcomes, hosts, 0.5, 1000, 5, 0.5, BUCKETS)
    crawldb = {in_memory.key_of(r): r for r in crawldb_rows}
    return in_memory.plan(outcomes, cands, crawldb, url_counts or {}, lambda host: cap, POLICY, NOW, SEGMENT)


def test_only_urls_still_leased_to_the_segment_are_updated():
    mine = _state("http://a.test/1", lease_until=NOW + 60, segment_id=SEGMENT)
    other = _state("http://a.test/2", lease_until=NOW + 60, segment_id="20261201000000-000000")
    released = _state("http://a.test/3", lease_until=None, segment_id=SEGMENT)
    plan = _plan([_outcome(s["url"]) for s in (mine, other, released)], [mine, other, released])
    assert [(u["url"], u["status"], u["lease_until"]) for u in plan.updates] == [("http://a.test/1", FETCHED, None)]
    assert plan.new_rows == [] and plan.hints == []


def test_a_host_budget_lets_in_the_best_new_urls_and_counts_the_rest():
    # a.test holds 8 URLs of its 10: two new ones fit, by score, then depth, then URL
    page = _state("http://a.test/", lease_until=NOW + 60, segment_id=SEGMENT)
    rich = _outcome("http://a.test/", links=("http://a.test/x", "http://a.test/y", "http://a.test/z", "http://b.test/"))
    poor = _outcome("http://a.test/p", links=("http://a.test/z",), score=0.01)
    plan = _plan([rich, poor], [page, _state("http://a.test/p", lease_until=NOW + 60, segment_id=SEGMENT)],
                 url_counts={(host_bucket("a.test", BUCKETS), "a.test"): 8})
    new = {r["url"]: r for r in plan.new_rows}
    # z has two in-links (their shares add up), x and y one each and tie: x before y by URL
    assert set(new) == {"http://a.test/z", "http://a.test/x", "http://b.test/"}
    assert new["http://a.test/z"]["inlinks"] == 2 and new["http://a.test/z"]["discovered_segment"] == SEGMENT
    assert new["http://a.test/z"]["score"] == rich["score"] * 0.5 / 4 + poor["score"] * 0.5 / 1
    assert sorted(plan.host_counts) == sorted([(host_bucket("a.test", BUCKETS), "a.test", 2, 1),
                                               (host_bucket("b.test", BUCKETS), "b.test", 1, 0)])


def test_known_urls_become_due_for_a_newer_lastmod_and_for_a_lost_canonical_page():
    fetched_at = NOW - 5000
    listed = _state("http://a.test/listed", status=FETCHED, last_fetched_at=fetched_at)
    same = _state("http://a.test/same", status=FETCHED, last_fetched_at=fetched_at)
    canonical = _state("http://a.test/c", lease_until=NOW + 60, segment_id=SEGMENT, text_hash=7)
    copy = _state("http://b.test/copy", status=DUPLICATE, dup_of="http://a.test/c")
    copy_fetched = _state("http://b.test/copy2", status=DUPLICATE, dup_of="http://a.test/c",
                          lease_until=NOW + 60, segment_id=SEGMENT)
    hosts = [{"sitemap_entries": [{"url": "http://a.test/listed", "lastmod": fetched_at + 1},
                                  {"url": "http://a.test/same", "lastmod": fetched_at}]}]
    rows = [listed, same, canonical, copy, copy_fetched]
    unchanged = _plan([_outcome("http://a.test/c"), _outcome("http://b.test/copy2")], rows, hosts=hosts)
    assert [h[2] for h in unchanged.hints] == ["http://a.test/listed"]
    assert unchanged.new_rows == []  # sitemap entries known to the crawldb are not new
    # the canonical page's text changed: its duplicate not fetched in this segment is due now
    changed = _plan([_outcome("http://a.test/c", text_hash=8), _outcome("http://b.test/copy2")], rows, hosts=hosts)
    assert sorted(h[2] for h in changed.hints) == ["http://a.test/listed", "http://b.test/copy"]
    assert all(h[3] == NOW for h in changed.hints)
    for status in (FetchStatus.NOT_FOUND, FetchStatus.REDIRECT):
        gone = _plan([_outcome("http://a.test/c", status=status), _outcome("http://b.test/copy2")], rows)
        assert [h[2] for h in gone.hints] == ["http://b.test/copy"], status


def test_a_duplicate_page_is_marked_and_its_links_count_less():
    page = _state("http://a.test/d", lease_until=NOW + 60, segment_id=SEGMENT)
    plan = _plan([_outcome("http://a.test/d", links=("http://a.test/n",))], [page],
                 dup_of={(page["url_hash"], page["url"]): "http://a.test/c"})
    assert plan.updates[0]["status"] == DUPLICATE and plan.updates[0]["dup_of"] == "http://a.test/c"
    assert plan.new_rows[0]["score"] == 1.0 * 0.1 * 0.5


def test_override_value_is_override_cap(spark):
    cfg = make_config(fetch__host_overrides=[
        {"pattern": "shop.test", "delay_s": 2.0},  # first match, but it sets no cap: skipped
        {"pattern": "shop.test", "max_urls_per_cycle": 5},
        {"pattern": "*.shop.test", "max_urls_per_cycle": 3},  # shop.test too, but after the entry above
        {"pattern": "Big.Test", "max_urls_per_cycle": 7}])
    hosts = ["shop.test", "shop.test:8080", "a.shop.test", "myshop.test", "big.test:81", "other.test"]
    by_spark = {r["host"]: r["cap"] for r in spark.createDataFrame([(h,) for h in hosts], "host string")
                .select("host", override_cap(cfg, "max_urls_per_cycle", 100).alias("cap")).collect()}
    assert {h: override_value(cfg, "max_urls_per_cycle", 100, h) for h in hosts} == by_spark
    assert by_spark == {"shop.test": 5, "shop.test:8080": 5, "a.shop.test": 3, "myshop.test": 100,
                        "big.test:81": 7, "other.test": 100}
