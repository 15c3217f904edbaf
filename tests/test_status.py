"""Every transition of the status model (crawl/crawldb/status.py)."""
import pytest

from crawl.crawldb import status as S
from crawl.crawldb.status import FetchStatus as FS

from crawl.config import build_config

POLICY = S.schedule_policy(build_config(overrides={
    "schedule.retry_interval_s": 100, "schedule.max_retries": 2, "schedule.gone_interval_s": 1000,
    "schedule.gone_max_checks": 3}))
LONGEST = POLICY.options.max_interval_s
T0 = 1_000_000.0


def state(**kw):
    s = S.new_url_state("http://a.com/", "a.com", 3, 42, 1, 0.5, T0)
    s.update(kw)
    return s


def outcome(fs, code=None, at=T0 + 10, **kw):
    o = {"fetch_status": fs, "http_status": code, "fetched_at": at, "content_hash": None, "content_type": None,
         "etag": None, "last_modified": None, "redirect_to": None, "error": None}
    o.update(kw)
    return o


def test_new_url_is_unfetched_and_due():
    s = state()
    assert s["status"] == S.UNFETCHED and s["next_fetch_at"] == T0 and s["depth"] == 1
    assert S.is_due(s, T0) and not S.is_due(s, T0 - 1)


def test_lease_blocks_generate_until_expiry():
    leased = S.lease(state(), "seg1", T0, 60)
    assert leased["segment_id"] == "seg1" and leased["lease_until"] == T0 + 60
    assert not S.is_due(leased, T0 + 59)
    assert S.is_due(leased, T0 + 60)


def _duplicate():
    fetched = S.apply_fetch(state(lease_until=T0 + 5), outcome(FS.OK, 200, content_hash="h1", etag='"e"'), POLICY)
    return S.mark_duplicate(fetched, "http://b.com/", POLICY)


def test_duplicate_is_rechecked_after_the_longest_interval():
    dup = _duplicate()
    assert dup["status"] == S.DUPLICATE and dup["dup_of"] == "http://b.com/"
    assert dup["next_fetch_at"] == T0 + 10 + LONGEST and dup["fetch_interval_s"] == LONGEST
    assert not S.is_due(dup, T0 + 10 + LONGEST - 1) and S.is_due(dup, T0 + 10 + LONGEST)


def test_duplicate_304_stays_duplicate():
    again = S.apply_fetch(_duplicate(), outcome(FS.NOT_MODIFIED, 304, at=T0 + 100), POLICY)
    assert again["status"] == S.DUPLICATE and again["dup_of"] == "http://b.com/"
    assert again["next_fetch_at"] == T0 + 100 + LONGEST and again["observed_count"] == 2


@pytest.mark.parametrize("fs, code, status", [(FS.OK, 200, S.FETCHED), (FS.NOT_FOUND, 404, S.GONE),
                                              (FS.SERVER_ERROR, 503, S.RETRY), (FS.REDIRECT, 301, S.REDIRECT_PERM),
                                              (FS.ROBOTS_DENIED, None, S.ROBOTS_DENIED)])
def test_duplicate_released_by_any_other_answer(fs, code, status):
    new = S.apply_fetch(_duplicate(), outcome(fs, code, content_hash="h2", redirect_to="http://c.com/",
                                              at=T0 + 100), POLICY)
    assert new["status"] == status and new["dup_of"] is None


def test_duplicate_kept_while_not_attempted():
    new = S.apply_fetch(_duplicate(), outcome(FS.NOT_ATTEMPTED, None, at=T0 + 100), POLICY)
    assert new["status"] == S.DUPLICATE and new["dup_of"] == "http://b.com/"


def test_ok_fetch():
    new = S.apply_fetch(state(lease_until=T0 + 5, retries=1), outcome(FS.OK, 200, content_hash="h1",
                                                                       content_type="text/html", etag='"e"'), POLICY)
    assert new["status"] == S.FETCHED and new["http_status"] == 200
    assert new["last_fetched_at"] == T0 + 10
    assert POLICY.options.min_interval_s <= new["fetch_interval_s"] <= LONGEST
    assert new["next_fetch_at"] == pytest.approx(T0 + 10 + new["fetch_interval_s"], abs=1)
    assert new["content_hash"] == "h1" and new["etag"] == '"e"' and new["fetch_count"] == 1
    assert new["retries"] == 0 and new["lease_until"] is None and new["change_count"] == 0
    assert new["observed_count"] == 1 and new["first_observed_at"] == new["last_observed_at"] == T0 + 10


def _fetched_before(**kw):
    return state(status=S.FETCHED, content_hash="old", observed_count=3, change_count=1, fetch_count=3,
                 first_observed_at=T0 - 30 * 86400, last_observed_at=T0 - 86400, **kw)


def test_changed_content_counts_a_change_and_shortens_the_interval():
    new = S.apply_fetch(_fetched_before(), outcome(FS.OK, 200, content_hash="new"), POLICY)
    same = S.apply_fetch(_fetched_before(), outcome(FS.OK, 200, content_hash="old"), POLICY)
    assert new["change_count"] == 2 and new["last_changed_at"] == T0 + 10
    assert same["change_count"] == 1 and same["last_changed_at"] is None
    assert new["fetch_interval_s"] < same["fetch_interval_s"]


def test_the_text_hash_decides_whether_content_changed():
    # other bytes (a new timestamp in the markup), the same normalised text: not a change
    new = S.apply_fetch(_fetched_before(text_hash=7), outcome(FS.OK, 200, content_hash="new", text_hash=7), POLICY)
    assert new["change_count"] == 1 and new["text_hash"] == 7
    changed = S.apply_fetch(_fetched_before(text_hash=7), outcome(FS.OK, 200, content_hash="old", text_hash=8), POLICY)
    assert changed["change_count"] == 2


def test_not_modified_lengthens_the_interval_like_unchanged_content():
    first = S.apply_fetch(_fetched_before(), outcome(FS.NOT_MODIFIED, 304), POLICY)
    later = S.apply_fetch(first, outcome(FS.NOT_MODIFIED, 304, at=first["next_fetch_at"]), POLICY)
    assert first["observed_count"] == 4 and first["change_count"] == 1
    assert later["fetch_interval_s"] >= first["fetch_interval_s"]


def test_important_pages_get_shorter_intervals():
    low = S.apply_fetch(_fetched_before(score=0.01), outcome(FS.OK, 200, content_hash="new"), POLICY)
    high = S.apply_fetch(_fetched_before(score=10.0), outcome(FS.OK, 200, content_hash="new"), POLICY)
    assert high["fetch_interval_s"] < low["fetch_interval_s"]


def test_not_modified_without_a_stored_copy_is_retried():
    new = S.apply_fetch(state(), outcome(FS.NOT_MODIFIED, 304), POLICY)
    assert new["status"] == S.RETRY and new["retries"] == 1 and "without a stored copy" in new["error"]


def test_not_modified_keeps_content():
    new = S.apply_fetch(state(status=S.FETCHED, content_hash="h", etag="e1"), outcome(FS.NOT_MODIFIED, 304), POLICY)
    assert new["status"] == S.NOTMODIFIED and new["content_hash"] == "h" and new["etag"] == "e1"


@pytest.mark.parametrize("code,expected", [(301, S.REDIRECT_PERM), (308, S.REDIRECT_PERM),
                                           (302, S.REDIRECT_TEMP), (303, S.REDIRECT_TEMP), (307, S.REDIRECT_TEMP)])
def test_redirects(code, expected):
    new = S.apply_fetch(state(), outcome(FS.REDIRECT, code, redirect_to="http://a.com/new"), POLICY)
    assert new["status"] == expected and new["redirect_to"] == "http://a.com/new"
    assert new["next_fetch_at"] == T0 + 10 + LONGEST


@pytest.mark.parametrize("fs,code", [(FS.NOT_FOUND, 404), (FS.NOT_FOUND, 410), (FS.CLIENT_ERROR, 403)])
def test_permanent_errors_are_gone_and_rechecked_less_often_then_never(fs, code):
    s = S.apply_fetch(state(), outcome(fs, code), POLICY)
    assert s["status"] == S.GONE and s["gone_checks"] == 1 and s["next_fetch_at"] == T0 + 1010
    s = S.apply_fetch(s, outcome(fs, code, at=T0 + 2000), POLICY)
    assert s["gone_checks"] == 2 and s["next_fetch_at"] == T0 + 2000 + 2000
    s = S.apply_fetch(s, outcome(fs, code, at=T0 + 5000), POLICY)
    assert s["gone_checks"] == 3 and s["next_fetch_at"] == T0 + 5000 + 4000
    s = S.apply_fetch(s, outcome(fs, code, at=T0 + 9000), POLICY)  # past schedule.gone_max_checks
    assert s["gone_checks"] == 4 and s["next_fetch_at"] is None and not S.is_due(s, T0 + 10**9)
    back = S.apply_fetch(dict(s, next_fetch_at=T0), outcome(FS.OK, 200, content_hash="x", at=T0 + 9500), POLICY)
    assert back["status"] == S.FETCHED and back["gone_checks"] == 0


@pytest.mark.parametrize("fs,code", [(FS.SERVER_ERROR, 503), (FS.SERVER_ERROR, 429), (FS.NETWORK_ERROR, None),
                                     (FS.DNS_ERROR, None), (FS.TLS_ERROR, None)])
def test_transient_errors_retry_then_give_up(fs, code):
    s = state()
    s = S.apply_fetch(s, outcome(fs, code, error="boom"), POLICY)
    assert s["status"] == S.RETRY and s["retries"] == 1 and s["next_fetch_at"] == T0 + 110 and s["error"] == "boom"
    s = S.apply_fetch(s, outcome(fs, code), POLICY)
    assert s["status"] == S.RETRY and s["retries"] == 2 and s["next_fetch_at"] == T0 + 210  # the wait doubles
    s = S.apply_fetch(s, outcome(fs, code), POLICY)
    assert s["status"] == S.GONE and s["retries"] == 3 and s["gone_checks"] == 1


def test_retry_then_success_resets_retries():
    s = S.apply_fetch(state(), outcome(FS.NETWORK_ERROR), POLICY)
    s = S.apply_fetch(s, outcome(FS.OK, 200, content_hash="x"), POLICY)
    assert s["status"] == S.FETCHED and s["retries"] == 0 and s["error"] is None


def test_robots_denied():
    new = S.apply_fetch(state(), outcome(FS.ROBOTS_DENIED), POLICY)
    assert new["status"] == S.ROBOTS_DENIED and new["fetch_count"] == 0 and new["next_fetch_at"] == T0 + 10 + LONGEST


def test_deferred_leaves_the_url_due_and_unleased():
    before = state(lease_until=T0 + 50, segment_id="s")
    new = S.apply_fetch(before, outcome(FS.DEFERRED), POLICY)
    assert new["status"] == S.UNFETCHED and new["next_fetch_at"] == before["next_fetch_at"]
    assert new["lease_until"] is None and new["last_fetched_at"] is None


def test_unknown_outcome_is_rejected():
    with pytest.raises(ValueError):
        S.apply_fetch(state(), outcome("weird", 200), POLICY)


def test_apply_fetch_is_pure():
    s = state()
    copy = dict(s)
    S.apply_fetch(s, outcome(FS.OK, 200), POLICY)
    assert s == copy


@pytest.mark.parametrize("code,loc,expected", [
    (200, False, FS.OK), (204, False, FS.OK), (304, False, FS.NOT_MODIFIED), (301, True, FS.REDIRECT),
    (302, False, FS.CLIENT_ERROR), (404, False, FS.NOT_FOUND), (410, False, FS.NOT_FOUND),
    (403, False, FS.CLIENT_ERROR), (429, False, FS.SERVER_ERROR), (500, False, FS.SERVER_ERROR),
    (503, False, FS.SERVER_ERROR), (100, False, FS.NETWORK_ERROR)])
def test_classify_http_status(code, loc, expected):
    assert S.classify_http_status(code, loc) == expected


def test_outlink_score():
    assert S.outlink_score(1.0, 4, 0.5) == 0.125
    assert S.outlink_score(1.0, 0, 0.5) == 0.0


def test_discovered_links_depth_score_and_redirect_chains():
    page = {"outlinks": ["http://a.com/1", "http://a.com/2"], "depth": 1, "score": 1.0,
            "fetch_status": FS.OK, "redirect_hops": 0}
    assert S.discovered_links(page, 0.5, 10, 5) == [("http://a.com/1", 2, 0.25, 0), ("http://a.com/2", 2, 0.25, 0)]
    assert S.discovered_links(page, 0.5, 1, 5) == []  # past max_depth
    hop = {"outlinks": ["http://a.com/next"], "depth": 0, "score": 1.0, "fetch_status": FS.REDIRECT,
           "redirect_hops": 4}
    assert S.discovered_links(hop, 0.5, 10, 5) == [("http://a.com/next", 1, 0.5, 5)]  # the 5th hop is kept
    assert S.discovered_links(dict(hop, redirect_hops=5), 0.5, 10, 5) == []  # a 6th is not
    assert S.discovered_links(dict(page, outlinks=[]), 0.5, 10, 5) == []


def test_a_links_score_share_does_not_depend_on_which_siblings_are_known():
    """Issue 32, finding 4: the score was divided by the links that survived the seen-URL filter,
    so the same link got twice the share once half its siblings were known. It is divided by
    all the page's links within the rules (outlinks_total), known or not."""
    first = {"outlinks": [f"http://a.com/{i}" for i in range(4)], "outlinks_total": 4, "depth": 0, "score": 1.0,
             "fetch_status": FS.OK, "redirect_hops": 0}
    later = dict(first, outlinks=["http://a.com/0", "http://a.com/1"])  # /2 and /3 known by now
    assert {u: s for u, _, s, _ in S.discovered_links(first, 0.5, 10, 5)}["http://a.com/0"] == 0.125
    assert {u: s for u, _, s, _ in S.discovered_links(later, 0.5, 10, 5)}["http://a.com/0"] == 0.125
    # a segment fetched before the count existed shares among the links it holds
    assert S.discovered_links(dict(later, outlinks_total=None), 0.5, 10, 5)[0][2] == 0.25


def test_an_internal_error_uses_nothing_up():
    """Our own failure (crawl/fetch/fetcher.py InternalError) is reported not_attempted: the URL stays
    as it was, due, with no retry used."""
    s = S.apply_fetch(dict(state(), retries=2), outcome(FS.NOT_ATTEMPTED, error="internal error: boom"), POLICY)
    assert s["retries"] == 2 and s["status"] == state()["status"] and s["lease_until"] is None
