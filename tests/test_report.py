import re

from crawl.report import format_stats


def test_format_stats_sections_and_shares():
    text = format_stats({
        "crawl_root": "/c", "version": 3, "total_urls": 4, "hosts": 2, "due_now": 1, "leased": 0, "max_depth": 2,
        "by_status": [("fetched", 3), ("unfetched", 1)], "by_http_status": [(200, 3), (None, 1)],
        "top_hosts": [("a.com", 3), ("b.com", 1)],
        "hostdb": {"deferred": 1, "backing_off": 2, "robots_errors": 4, "stopped": [("3 network errors in a row", 1)],
                   "overrides": [("a.com", "a.com (gap 0.2s)")]}})
    assert "Delta version 3" in text
    assert "fetched" in text and "75.0%" in text and "(none)" in text
    assert "top 2 hosts by URLs" in text
    assert "backing off" in text and "3 network errors in a row" in text and "a.com (gap 0.2s)" in text
    assert re.search(r"robots\.txt unreachable/unparsable +4\n", text)


def test_format_stats_empty_crawldb():
    text = format_stats({"crawl_root": "/c", "version": 0, "total_urls": 0, "hosts": 0, "due_now": 0, "leased": 0,
                         "max_depth": None, "by_status": [], "by_http_status": [], "top_hosts": []})
    assert "(none)" in text and "total URLs" in text


def test_leases_in_force_say_how_to_run_their_segment_again():
    text = format_stats({"crawl_root": "/c", "version": 0, "total_urls": 3, "hosts": 1, "due_now": 0, "leased": 3,
                         "max_depth": 0, "by_status": [("unfetched", 3)], "by_http_status": [], "top_hosts": [],
                         "leases": [("20261201120000-abcdef", 3, "2026-12-01 13:00")]})
    assert ("3 leased by segment 20261201120000-abcdef since 2026-12-01 12:00 UTC until 2026-12-01 13:00 UTC: "
            "if its fetch stopped, 'deltacrawl fetch 20261201120000-abcdef' runs it again (then dedup and update); "
            "to abandon it, remove /c/segments/20261201120000-abcdef: its URLs are due again when the lease ends"
            ) in text


def test_sitemap_problems_show_with_their_hosts_only_when_there_are_some():
    stats = {"crawl_root": "/c", "version": 0, "total_urls": 1, "hosts": 1, "due_now": 0, "leased": 0,
             "max_depth": 0, "by_status": [], "by_http_status": [], "top_hosts": [],
             "hostdb": {"deferred": 0, "backing_off": 0, "stopped": [], "overrides": [],
                        "links": {"found": 3, "kept": 2, "sitemap_urls": 1}, "link_rejects": [],
                        "sitemap_errors": 3, "sitemap_problem_hosts": [
                            ("a.com", "3 files, last: http://a.com/s.xml: doctype not allowed")]}}
    text = format_stats(stats)
    assert "sitemap and feed files refused or cut short (all cycles): 3" in text
    assert "  a.com  3 files, last: http://a.com/s.xml: doctype not allowed" in text
    stats["hostdb"]["sitemap_errors"] = 0
    assert "refused or cut short" not in format_stats(stats)


def test_dns_and_tls_failures_and_queries_show_in_stats():
    stats = {"crawl_root": "/c", "version": 0, "total_urls": 1, "hosts": 3, "due_now": 0, "leased": 0,
             "max_depth": 0, "by_status": [], "by_http_status": [], "top_hosts": [],
             "hostdb": {"deferred": 0, "backing_off": 2, "robots_errors": 0, "dns_errors": 1, "tls_errors": 2,
                        "stopped": [("tls expired", 1)], "overrides": [],
                        "dns": {"queries": 12, "hosts": 3, "most": [("a.test", "8 queries")]}}}
    text = format_stats(stats)
    assert re.search(r"name did not resolve \(dns_error\) +1\n", text)
    assert re.search(r"TLS handshake failed \(tls_error\) +2\n", text)
    assert "DNS queries (all cycles): 12 for 3 hosts, 4.0 per host" in text and "a.test  8 queries" in text
