"""crawl.crawldb.discovery: what a fetch task keeps of the links it finds, and the per-host trap signal."""
from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.net.bloom import BloomFilter
from crawl.crawldb.discovery import KNOWN, TRAP_LINK_EXPLOSION, TRAP_NEAR_DUPLICATES, TaskLinks
from crawl.net.filters import LinkFilter
from crawl.net.urls import host_of
from crawl.dedup.fingerprint import page_text, word_set_signature
from tests.conftest import make_config

HOST = "a.example"


def page_signature(html: str) -> bytes | None:
    return word_set_signature(page_text(html))  # what the parser child computes


def _page(words: str) -> str:
    return f"<html><head><title>t</title><script>var x = 1;</script></head><body><p>{words}</p></body></html>"


def test_links_are_filtered_and_known_ones_dropped_by_the_bloom_filter():
    bloom = BloomFilter.for_capacity(10, 0.01)
    bloom.add(f"http://{HOST}/known")
    host = TaskLinks(make_config(), bloom).for_host(HOST)
    kept = host.keep([f"http://{HOST}/new", f"http://{HOST}/known", f"http://{HOST}/a/a/a/",
                      f"http://{HOST}/img.png", "http://other.example/x"])
    assert kept == [f"http://{HOST}/new", "http://other.example/x"]
    assert host.in_scope == 3  # the known link counts: the page's score is shared by all three
    assert host.rejects == {KNOWN: 1, "repeating_path": 1, "extension": 1}
    summary = host.summary()
    assert summary["links_found"] == 5 and summary["links_kept"] == 2 and summary["trap_signal"] is None


def test_links_past_the_crawl_depth_are_dropped_and_counted():
    host = TaskLinks(make_config(update__max_depth=2)).for_host(HOST)
    assert host.keep([f"http://{HOST}/a"], depth=1) == [f"http://{HOST}/a"]
    assert host.keep([f"http://{HOST}/b", f"http://{HOST}/c"], depth=2) == []
    assert host.rejects == {"max_depth": 2}


def test_scope_is_relative_to_the_linking_host():
    host = TaskLinks(make_config(discovery__scope="host")).for_host(HOST)
    assert host.keep(["http://other.example/x", f"http://{HOST}/y"]) == [f"http://{HOST}/y"]
    assert host.rejects == {"scope": 1}


def test_signatures_of_near_identical_pages_agree_and_unrelated_pages_do_not():
    import numpy as np
    rng = random.Random(1)
    base = " ".join("".join(rng.choice("klmnopqrst") for _ in range(5)) for _ in range(400))
    a = np.frombuffer(page_signature(_page(base + " calendar 2026 11")), dtype=np.uint64)
    b = np.frombuffer(page_signature(_page(base + " calendar 2026 12")), dtype=np.uint64)
    other = " ".join("".join(rng.choice("abcdefghij") for _ in range(5)) for _ in range(400))
    c = np.frombuffer(page_signature(_page(other)), dtype=np.uint64)
    assert (a == b).mean() > 0.9 and (a == c).mean() < 0.1
    assert page_signature("<html><body></body></html>") is None


def test_a_host_of_near_identical_pages_is_a_trap():
    task = TaskLinks(make_config(discovery__trap_min_pages=5))
    trap, normal = task.for_host("trap.example"), task.for_host(HOST)
    for month in range(1, 13):  # a calendar: the same page but for the date
        trap.keep([])
        trap.add_signature(page_signature(_page(f"Calendar 2026-{month:02d} Next month Previous month Home")))
    rng = random.Random(5)
    vocabulary = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(2000)]
    for _ in range(12):  # distinct articles (digits would not do: normalisation folds them)
        normal.keep([])
        normal.add_signature(page_signature(_page(" ".join(rng.choice(vocabulary) for _ in range(200)))))
    assert trap.trap_signal() == TRAP_NEAR_DUPLICATES
    assert normal.trap_signal() is None


def test_a_host_whose_pages_explode_into_new_links_is_a_trap():
    task = TaskLinks(make_config(discovery__trap_min_pages=3, discovery__trap_new_urls_per_page=20.0))
    host = task.for_host(HOST)
    for page in range(4):
        host.keep([f"http://{HOST}/p{page}/{i}" for i in range(30)])
    assert host.trap_signal() == TRAP_LINK_EXPLOSION
    calm = task.for_host("calm.example")
    for _page in range(4):
        calm.keep([f"http://calm.example/p/{i}" for i in range(30)])  # the same links on every page
    assert calm.trap_signal() is None


_POOL = [f"http://{HOST}/p/{i}" for i in range(12)] + [f"http://{HOST}/img{i}.png" for i in range(3)] + \
        [f"http://{HOST}/a/a/a/{i}" for i in range(2)] + [f"http://other{i}.example/x" for i in range(4)] + \
        ["ftp://a.example/f", f"http://{HOST}:8080/p"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_POOL), max_size=25), min_size=1, max_size=8),
       st.sampled_from(["any", "host", "domain"]))
def test_links_recurring_across_a_hosts_pages_are_judged_as_on_first_sight(pages, scope):
    """keep() remembers each link's verdict for the host (navigation and footer links recur on every
    page): what it keeps and counts is what the filter, host_of and the Bloom filter say of every
    link afresh."""
    cfg = make_config(discovery__scope=scope, discovery__trap_min_pages=2, discovery__trap_new_urls_per_page=2.0)
    bloom = BloomFilter.for_capacity(100, 0.01)
    for url in _POOL[::3]:
        bloom.add(url)
    task = TaskLinks(cfg, bloom)
    host = task.for_host(HOST)
    link_filter = LinkFilter.from_config(cfg)
    rejects: Counter = Counter()
    same_host: set[str] = set()
    for links in pages:
        expected, in_scope = [], 0
        for url in links:
            reason = link_filter.reject_reason(url, HOST)
            if reason is None:
                in_scope += 1
                if host_of(url) == HOST:
                    same_host.add(url)
                if url in bloom:
                    reason = KNOWN
            if reason is None:
                expected.append(url)
            else:
                rejects[reason] += 1
        assert host.keep(links) == expected
        assert host.in_scope == in_scope
    assert host.rejects == rejects
    summary = host.summary()
    assert summary["links_found"] == sum(map(len, pages))
    assert summary["links_kept"] == sum(map(len, pages)) - sum(rejects.values())
    explodes = len(pages) >= 2 and len(same_host) > 2.0 * len(pages)
    assert summary["trap_signal"] == (TRAP_LINK_EXPLOSION if explodes else None)
