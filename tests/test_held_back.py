"""Every URL that is not fetched says why (issue 52, item 2): an answer that is not content carries
its status line in ``error`` (a 429/503 with its Retry-After), and the URLs a host holds back
(robots.txt unreachable, a long Retry-After, ...) carry the host's reason in ``held_back``
(crawl/crawldb/held_back.py), set by update on every URL of the host and cleared when a later
cycle finds the host well; a URL the fetch did not attempt for a reason of its own (its origin's
robots.txt failed, the fetch's time limit) carries that; seeds injected for a held-back host take
its reason at once; stats counts them. The rules without Spark first (with the real fetcher's
words), then one small crawl over a loopback web whose hosts fail and recover, with both of
update's paths compared."""
from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiohttp import web as aioweb

from crawl.crawldb import held_back as hb
from crawl.fetch.http import answer_error
from crawl.rule_ops import NUMPY_OPS
from tests.fixed_web import FixedWeb

SEGMENT = "20261207000000-abcdef"


# --------------------------------------------------------------------------- the rules

def test_an_answer_that_is_not_content_is_its_status_line_with_retry_after():
    assert answer_error(503, "Service Unavailable", "120") == "HTTP 503 Service Unavailable, Retry-After 120"
    assert answer_error(429, "", None) == "HTTP 429 Too Many Requests"  # no phrase sent: RFC 9110's
    assert answer_error(500, "Oops", " ") == "HTTP 500 Oops"             # an empty Retry-After says nothing
    assert answer_error(599, None) == "HTTP 599"                          # no phrase known
    assert len(answer_error(503, "x" * 1000, "1")) == 300                 # a table column, not a page


# how crawl/fetch/fetcher.py words a host's stop_reason, and the reason each gives
STOPS = [("robots.txt unreachable", hb.ROBOTS_UNREACHABLE), ("robots.txt unparsable", hb.ROBOTS_UNPARSABLE),
         ("server asked to wait 120s", hb.HOST_BACKOFF), ("tls certificate", hb.TLS_ERROR),
         ("dns servfail", hb.DNS_ERROR), ("dns", hb.DNS_ERROR), ("blocked_address: loopback", hb.BLOCKED_ADDRESS),
         ("slow", hb.SLOW_HOST), ("5 network errors in a row", hb.NETWORK_ERRORS),
         ("something new", hb.HOST_STOPPED)]


@pytest.mark.parametrize("stop_reason, reason", STOPS)
def test_a_stopped_host_holds_its_urls_back_with_the_reason_of_its_stop(stop_reason, reason):
    assert hb.held_back_rule(stop_reason, False, None, None, NUMPY_OPS) == reason
    # a stop says more than a deferral or a trap budget
    assert hb.held_back_rule(stop_reason, True, "deep paths", 4, NUMPY_OPS) == reason


def test_a_deferred_host_and_a_trap_hold_back_and_a_well_host_does_not():
    assert hb.held_back_rule(None, True, None, None, NUMPY_OPS) == hb.CRAWL_DELAY
    assert hb.held_back_rule(None, True, "x", 4, NUMPY_OPS) == hb.CRAWL_DELAY
    assert hb.held_back_rule(None, False, "repeating path", None, NUMPY_OPS) == hb.TRAP_BUDGET
    assert hb.held_back_rule(None, None, None, 8, NUMPY_OPS) == hb.TRAP_BUDGET  # an earlier cycle's signal
    assert hb.held_back_rule(None, False, None, None, NUMPY_OPS) is None
    assert hb.held_back_rule(None, None, None, None, NUMPY_OPS) is None  # a segment of an older deltacrawl
    assert set(hb.REASONS) == {r for _, r in STOPS} | {hb.CRAWL_DELAY, hb.TRAP_BUDGET, hb.TIME_LIMIT}


def test_only_hosts_whose_reason_changed_have_their_other_urls_rewritten():
    a, b, c, d = (0, "a"), (1, "b"), (2, "c"), (3, "d")
    previous = {a: {"held_back": hb.ROBOTS_UNREACHABLE}, b: {"held_back": None},
                c: {"held_back": hb.HOST_BACKOFF}, d: {"held_back": hb.HOST_BACKOFF, "last_segment_id": SEGMENT}}
    reasons = {a: hb.ROBOTS_UNREACHABLE, b: hb.HOST_BACKOFF, c: None, d: hb.HOST_BACKOFF}
    # a: held back before and still: nothing to rewrite; b: newly held back; c: recovered;
    # d: the same reason, but the hostdb already took this segment (a re-run): its rows are checked
    changed = hb.changed_hosts(reasons, previous, SEGMENT)
    assert changed == {b: hb.HOST_BACKOFF, c: None, d: hb.HOST_BACKOFF}

    def row(host, url, value):
        return {"host_bucket": host[0], "host": host[1], "url_hash": hash(url), "url": url, "held_back": value}
    rows = [row(a, "a1", None), row(b, "b1", None), row(b, "b2", hb.HOST_BACKOFF), row(b, "b3", None),
            row(c, "c1", hb.HOST_BACKOFF), row(c, "c2", None), row(d, "d1", None), row(d, "d2", hb.HOST_BACKOFF)]
    attempted = {(hash("b3"), "b3")}  # the segment's own rows are its updates', not rewrites
    assert hb.rewrites(rows, changed, attempted) == [
        (1, hash("b1"), "b1", hb.HOST_BACKOFF), (2, hash("c1"), "c1", None), (3, hash("d1"), "d1", hb.HOST_BACKOFF)]


def test_the_segments_rows_and_new_rows_take_their_hosts_reason():
    host_rows = [{"host_bucket": 0, "host": "a", "stop_reason": "robots.txt unreachable", "deferred": False,
                  "trap_signal": None},
                 {"host_bucket": 1, "host": "b", "stop_reason": None, "deferred": False, "trap_signal": None}]
    previous = {(1, "b"): {"url_budget": 4, "held_back": hb.TRAP_BUDGET}, (2, "c"): {"held_back": hb.CRAWL_DELAY}}
    reasons = hb.host_reasons(host_rows, previous)
    assert reasons == {(0, "a"): hb.ROBOTS_UNREACHABLE, (1, "b"): hb.TRAP_BUDGET}  # b's budget stays lowered
    updates = [{"host_bucket": 0, "host": "a", "url_hash": 1, "url": "a1", "held_back": None},
               {"host_bucket": 1, "host": "b", "url_hash": 2, "url": "b1", "held_back": None}]
    new_rows = [{"host_bucket": 0, "host": "a", "held_back": None}, {"host_bucket": 2, "host": "c", "held_back": None},
                {"host_bucket": 3, "host": "d", "held_back": None}]
    hb.with_reasons(updates, new_rows, reasons, previous)
    assert [r["held_back"] for r in updates] == [hb.ROBOTS_UNREACHABLE, hb.TRAP_BUDGET]
    # a host not in the segment: host_state's reason; one the hostdb does not know: none
    assert [r["held_back"] for r in new_rows] == [hb.ROBOTS_UNREACHABLE, hb.CRAWL_DELAY, None]


def test_a_url_the_fetch_did_not_attempt_carries_its_own_reason_before_its_hosts():
    def rule(status, error, host):
        return hb.url_reason_rule(status, error, host, NUMPY_OPS)
    not_attempted = "not_attempted"
    # its origin's robots.txt failed while the host's other origin was read (crawl/fetch/fetcher.py's words)
    assert rule(not_attempted, "robots.txt unreachable (HTTP 500): the host's https:// URLs not crawled",
                None) == hb.ROBOTS_UNREACHABLE
    assert rule(not_attempted, "robots.txt unparsable: ValueError: x", None) == hb.ROBOTS_UNPARSABLE
    assert rule(not_attempted, "fetch.time_limit_s reached", hb.TRAP_BUDGET) == hb.TIME_LIMIT
    # not attempted for its host's sake, or attempted: the host's reason
    assert rule(not_attempted, "server asked to wait 120s", hb.HOST_BACKOFF) == hb.HOST_BACKOFF
    assert rule("ok", None, hb.TRAP_BUDGET) == hb.TRAP_BUDGET
    assert rule("server_error", "fetch.time_limit_s reached", None) is None  # only a URL not attempted
    assert rule(None, None, None) is None


def test_urls_the_fetch_time_limit_cut_say_so():
    """The real fetcher with a time limit that is over before the first request may start (a
    microsecond; nothing is contacted): every URL is not attempted, and its row says time_limit."""
    from crawl.fetch.fetcher import fetch_partition
    from tests.test_fetcher import cfg, rows_for
    urls = [f"http://127.0.0.2:18080/{i}" for i in range(3)] + ["http://127.0.0.3:18080/"]
    out = fetch_partition(rows_for(urls), cfg(fetch__time_limit_s=1e-6))
    outcomes = [r for r in out if r["kind"] == "url"]
    assert {o["fetch_status"] for o in outcomes} == {"not_attempted"} and len(outcomes) == 4
    updates = [{k: o[k] for k in ("host_bucket", "host", "url_hash", "url")} for o in outcomes]
    hb.with_reasons(updates, [], {}, {}, outcomes)
    assert {u["held_back"] for u in updates} == {hb.TIME_LIMIT}


# --------------------------------------------------------------------------- a crawl

PAIR_ADDRESS = "127.0.0.251"  # no other test web uses it (test_fetcher_origins's pair is on .253)


class OriginPair:
    """http://PAIR_ADDRESS/ and https://PAIR_ADDRESS/ (ports 80 and 443: one host key, two origins),
    each a small page at every path but the ``failing`` robots.txt of the origins named there."""

    def __init__(self, ca, failing: set[str]):
        self.servers = []
        for scheme, port in (("http", 80), ("https", 443)):
            server = ThreadingHTTPServer((PAIR_ADDRESS, port), self._handler(scheme in failing))
            if scheme == "https":
                server.socket = ca.server_context([PAIR_ADDRESS]).wrap_socket(server.socket, server_side=True)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)

    @staticmethod
    def _handler(robots_fails: bool):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                failing = robots_fails and self.path == "/robots.txt"
                body = b"no" if failing else b"<html><body>page</body></html>"
                self.send_response(500 if failing else 200)
                self.send_header("Content-Type", "text/plain" if failing else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        return Handler

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

class FailingWeb(FixedWeb):
    """FixedWeb whose ``failing`` paths answer a fixed error: {(host, path): (status, headers)}."""

    def __init__(self, hosts: int):
        super().__init__(hosts)
        self.failing: dict[tuple[int, str], tuple[int, dict[str, str]]] = {}

    async def _handle(self, request):
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        ip = sockname[0] if sockname else ""
        host = self.addresses.index(ip) if ip in self.addresses else None
        answer = self.failing.get((host, request.path))
        if answer is not None:
            return aioweb.Response(status=answer[0], headers=answer[1], text="no")
        return await super()._handle(request)


def test_held_back_urls_carry_their_hosts_reason_until_it_recovers(spark, root, tmp_path):
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from jobs import fetch, generate, inject, stats, update
    from tests.both_paths import _both_paths
    from tests.conftest import make_config, write_seeds

    from jobs.engine.column_ops import COLUMN_OPS

    # the rule in Spark gives what it gives on the driver, for every way a host can be held back
    cases = [(stop, deferred, trap, budget) for stop in [s for s, _ in STOPS] + [None]
             for deferred, trap, budget in ((None, None, None), (True, None, None), (False, "x", None), (False, None, 4))]
    frame = spark.createDataFrame(cases, "stop string, deferred boolean, trap string, budget int")
    by_spark = [r[0] for r in frame.select(hb.held_back_rule(F.col("stop"), F.col("deferred"), F.col("trap"),
                                                              F.col("budget"), COLUMN_OPS)).collect()]
    assert by_spark == [hb.held_back_rule(*case, NUMPY_OPS) for case in cases]

    from crawl.devweb.tls import LocalCA
    ca = LocalCA()
    # one host on http:// and https:// (ports 80 and 443, so root only), whose https robots.txt fails
    pair = OriginPair(ca, failing={"https"}) if os.geteuid() == 0 else None
    web = FailingWeb(hosts=3).start()
    try:
        page = "<html><body>{}</body></html>"
        ok, busy = web.put(0, "/", page.format("home")), web.put(0, "/busy", page.format("busy"))
        robots_down = [web.put(1, f"/{i}", page.format(i)) for i in range(4)]
        unavailable = [web.put(2, f"/{i}", page.format(i)) for i in range(4)]
        web.failing[(0, "/busy")] = (429, {})                       # a 429: retried, the host goes on
        web.failing[(1, "/robots.txt")] = (500, {})                 # robots.txt unreachable: none crawled
        for url in unavailable:                                     # 503, wait 120 s: the host stops
            web.failing[(2, "/" + url.rsplit("/", 1)[1])] = (503, {"Retry-After": "120"})
        # two URLs a host a cycle: the others of a held-back host are reached only through its reason
        origins = [f"https://{PAIR_ADDRESS}/a", f"http://{PAIR_ADDRESS}/b"] if pair else []
        cfg = make_config(fetch__delay_s=0.05, fetch__tasks=1, generate__max_urls_per_host=2,
                          fetch__max_wait_in_cycle_s=30.0, fetch__tls_ca_file=ca.write_pem(str(tmp_path / "ca.pem")))
        inject.run(spark, cfg, root, write_seeds(tmp_path / "seeds.txt",
                                                 [ok, busy, *robots_down, *unavailable, *origins]))

        def cycle(both_paths: bool) -> None:
            segment = generate.run(spark, cfg, root).segment_id
            assert segment is not None
            fetch.run(spark, cfg, root, segment)
            if not both_paths:
                update.run(spark, cfg, root, segment)
                return
            # update computes its writes in memory and by Spark: the same rows, reasons and rewrites included
            with _both_paths(update, "sources", "local_sources", "spark_sources",
                             ("updates", "new_rows", "hints", "host_counts", "reasons")) as checked:
                update.run(spark, cfg, root, segment)
            assert checked == [segment]

        def rows() -> dict[str, dict]:
            return {r["url"]: r.asDict() for r in spark.read.format("delta").load(root.crawldb).collect()}

        cycle(both_paths=True)
        urls = rows()
        assert {urls[u]["held_back"] for u in robots_down} == {hb.ROBOTS_UNREACHABLE}
        assert {urls[u]["status"] for u in robots_down} == {"unfetched"}
        assert {urls[u]["held_back"] for u in unavailable} == {hb.HOST_BACKOFF}
        answered = [urls[u] for u in unavailable if urls[u]["http_status"] == 503]
        assert len(answered) == 1 and answered[0]["status"] == "retry"
        assert answered[0]["error"] == "HTTP 503 Service Unavailable, Retry-After 120"
        assert urls[busy]["status"] == "retry" and urls[busy]["error"] == "HTTP 429 Too Many Requests"
        assert urls[busy]["held_back"] is None and urls[ok]["held_back"] is None and urls[ok]["status"] == "fetched"
        hosts = {r["host"]: r["held_back"] for r in spark.read.format("delta").load(root.hostdb).collect()}
        assert sorted(hosts.values(), key=str) == [None] * (1 + bool(pair)) + [hb.HOST_BACKOFF, hb.ROBOTS_UNREACHABLE]
        if pair:  # the failing origin's URL carries the reason; the other origin's was fetched, and the host is well
            assert urls[origins[0]]["held_back"] == hb.ROBOTS_UNREACHABLE and urls[origins[0]]["status"] == "unfetched"
            assert urls[origins[1]]["held_back"] is None and urls[origins[1]]["status"] == "fetched"
            assert hosts[PAIR_ADDRESS] is None

        summary = stats.collect_stats(spark, cfg, root)
        assert summary["held_back"] == sorted([(hb.HOST_BACKOFF, 4), (hb.ROBOTS_UNREACHABLE, 4 + bool(pair))],
                                              key=lambda r: (-r[1], r[0]))
        text = stats.format_stats(summary)
        assert "held back by their host, by reason" in text and "robots_unreachable" in text

        # a seed injected for a host held back takes the host's reason at once, before any update
        seed = web.put(1, "/new", page.format("new"))
        inject.run(spark, cfg, root, write_seeds(tmp_path / "more.txt", [seed]))
        assert rows()[seed]["held_back"] == hb.ROBOTS_UNREACHABLE
        robots_down.append(seed)  # (and it recovers with its host below)

        # both hosts recover; their backoff and the 503's retry wait are over
        web.failing.clear()
        # (and the wait they asked for, which the next fetch would carry over: backoff_s)
        DeltaTable.forPath(spark, root.hostdb).update(set={"backoff_until": F.lit(None).cast("timestamp"),
                                                           "backoff_s": F.lit(None).cast("double")})
        DeltaTable.forPath(spark, root.crawldb).update(F.col("url").isin(*robots_down, *unavailable),
                                                       {"next_fetch_at": "timestamp'2000-01-01'"})
        cycle(both_paths=False)  # (the paths' clearing rules are the ones above, with a null reason)
        urls = rows()
        # two URLs of each were fetched; every URL of theirs lost the reason
        assert sum(urls[u]["status"] == "fetched" for u in robots_down + unavailable) == 4
        assert {urls[u]["held_back"] for u in robots_down + unavailable} == {None}
        hosts = {r["host"]: r["held_back"] for r in spark.read.format("delta").load(root.hostdb).collect()}
        if pair:
            # the pair's only URL left was of the failing origin: now no origin of it could be read,
            # so the host backs off as a whole, and its fetched http:// URL is held back with it
            assert hosts.pop(PAIR_ADDRESS) == hb.ROBOTS_UNREACHABLE
            assert urls[origins[1]]["held_back"] == hb.ROBOTS_UNREACHABLE
        assert set(hosts.values()) == {None}
    finally:
        web.stop()
        if pair:
            pair.close()
