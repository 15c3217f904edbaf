"""bench/_realistic_web.py: the web bench/cost.py measures on must be what its docstring says, or
every CPU-per-page figure in BENCHMARKS.md "Cost per page" is measured on something else. bench/'s own
test, not the crawler's: `make bench-test`."""
from __future__ import annotations

import gzip
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from _realistic_web import MAX_BYTES, MIN_BYTES, RealisticWeb, RealisticWebProcess  # noqa: E402

from crawl.parse.links import extract_outlinks  # noqa: E402


def test_statuses_are_exact_shares_and_deterministic():
    web = RealisticWeb(hosts=100, pages=30, seed=7, port=8000)
    assert web.expected_statuses() == {"200": 2850, "301": 60, "404": 90}
    again = RealisticWeb(hosts=100, pages=30, seed=7, port=8000)
    assert [web.page_status(h, k) for h in range(100) for k in range(30)] == \
           [again.page_status(h, k) for h in range(100) for k in range(30)]
    assert web.html(3, 4) == again.html(3, 4)
    assert RealisticWeb(hosts=100, pages=30, seed=8, port=8000).html(3, 4) != web.html(3, 4)


def test_pages_have_realistic_size_structure_and_links():
    web = RealisticWeb(hosts=20, pages=30, seed=1, port=8000)
    sizes, links = [], []
    for h in range(3):
        for k in range(30):
            html = web.html(h, k)
            sizes.append(len(html.encode()))
            for part in ("<head>", "<style>", "<script>", '<nav class="main-nav">', "<article>", "<footer>"):
                assert part in html
            links.append(extract_outlinks(html, f"{web.base(h)}/p/{k}.html", 1000))
    assert all(MIN_BYTES <= s <= MAX_BYTES + 2_000 for s in sizes)  # a page ends after the paragraph that reaches its size
    sizes.sort()
    assert 35_000 < sizes[len(sizes) // 2] < 70_000
    counts = sorted(len(x) for x in links)
    assert 60 <= counts[len(counts) // 2] <= 90
    assert any(not u.startswith(web.base(0)) for u in links[0])  # some cross-host links


def test_server_answers_gzip_404_301_robots_and_counts(tmp_path):
    proc = RealisticWebProcess(hosts=3, pages=30, seed=1, log_path=str(tmp_path / "web.log"))
    try:
        web = proc.web
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
        statuses = {}
        for h in range(3):
            for k in range(30):
                req = urllib.request.Request(f"{web.base(h)}/p/{k}.html", headers={"Accept-Encoding": "gzip"})
                try:
                    with opener.open(req, timeout=30) as resp:
                        assert resp.headers["Content-Encoding"] == "gzip"
                        assert gzip.decompress(resp.read()).decode() == web.html(h, k)
                        code = resp.status
                except urllib.error.HTTPError as exc:
                    code = exc.code
                    if code == 301:
                        assert exc.headers["Location"] == web.redirect_target(h, k)
                assert code == web.page_status(h, k)
                statuses[str(code)] = statuses.get(str(code), 0) + 1
        with opener.open(f"{web.base(0)}/robots.txt", timeout=30) as resp:
            assert resp.read().decode() == web.robots_txt(0)
        seen = proc.counters(reset=True)
        assert seen["page_status"] == statuses == web.expected_statuses()
        assert seen["robots"] == 1 and seen["not_gzip"] == 0 and seen["max_in_flight_per_host"] == 1
        assert proc.counters()["page_status"] == {}
    finally:
        proc.stop()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the test looks at the 301 itself
        return None
