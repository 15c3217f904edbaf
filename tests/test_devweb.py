"""Tests for crawl.devweb.web and crawl.devweb.site (the bundled loopback test web). No Spark needed."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections import deque
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from protego import Protego
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from crawl.devweb.site import host_address
from crawl.devweb.web import DevWeb

HOSTS = 5
PAGES = 6
UA = "deltacrawl-test/1.0"


def fetch(url: str, ua: str = UA) -> tuple[int, str, str]:
    """(status, content-type, body) without raising on HTTP errors."""
    req = urllib.request.Request(url, headers={"User-Agent": ua})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode("utf-8")


def served_links(url: str, html: str) -> set[str]:
    out = set()
    for a in HTMLParser(html).css("a[href]"):
        out.add(urldefrag(urljoin(url, a.attributes["href"]))[0])
    return out


@pytest.fixture(scope="module")
def web():
    dw = DevWeb(hosts=HOSTS, pages_per_host=PAGES, port=0, seed=7, crawl_delay_s=0.25)
    dw.start()
    yield dw
    dw.stop()


def all_page_urls(dw: DevWeb) -> list[str]:
    urls = []
    for i, root in enumerate(dw.seed_urls()):
        urls.append(root)
        urls += [f"{root}p/{k}.html" for k in range(PAGES)]
        if dw.robots_kind(i) in ("disallow", "crawl_delay"):
            urls += [f"{root}private/{k}.html" for k in range(dw.private_pages)]
    return urls


def test_host_addresses():
    assert host_address(0) == "127.0.0.2"
    assert host_address(252) == "127.0.0.254"
    assert host_address(253) == "127.0.1.2"
    assert host_address(506) == "127.0.2.2"


def test_host_names_and_seeds(web):
    assert web.port > 0
    assert web.host_names == [f"127.0.0.{i + 2}:{web.port}" for i in range(HOSTS)]
    assert web.seed_urls() == [f"http://{h}/" for h in web.host_names]


def test_robots_variants(web):
    kinds = [web.robots_kind(i) for i in range(HOSTS)]
    assert kinds == ["disallow", "crawl_delay", "missing", "allow_all", "disallow"]
    for i, root in enumerate(web.seed_urls()):
        status, ctype, body = fetch(root + "robots.txt")
        kind = kinds[i]
        if kind == "missing":
            assert status == 404
            continue
        assert status == 200
        assert ctype.startswith("text/plain")
        if kind == "disallow":
            assert body == "User-agent: *\nDisallow: /private/\n"
        elif kind == "crawl_delay":
            assert body == "User-agent: *\nCrawl-delay: 0.25\nDisallow: /private/\n"
            assert Protego.parse(body).crawl_delay("deltacrawl") == 0.25
        else:
            assert body == "User-agent: *\nDisallow:\n"


def test_pages_are_html_with_links(web):
    for url in all_page_urls(web):
        status, ctype, body = fetch(url)
        assert status == 200, url
        assert ctype == "text/html; charset=utf-8"
        tree = HTMLParser(body)
        assert tree.css_first("title").text().strip()
        assert tree.css("p")
        assert tree.css("a[href]"), url
    # text varies by page
    root = web.seed_urls()[0]
    assert fetch(root + "p/1.html")[2] != fetch(root + "p/2.html")[2]


def test_outlinks_match_served_html(web):
    for url in all_page_urls(web):
        _, _, body = fetch(url)
        expected = served_links(url, body)
        got = web.outlinks(url)
        assert len(got) == len(set(got))
        assert set(got) == expected, url
        for u in got:
            assert "#" not in u
            assert urlsplit(u).netloc in web.host_names


def test_link_forms_and_cross_host(web):
    hrefs = set()
    cross = 0
    for i, root in enumerate(web.seed_urls()):
        for k in range(PAGES):
            url = f"{root}p/{k}.html"
            tree = HTMLParser(fetch(url)[2])
            hrefs |= {a.attributes["href"] for a in tree.css("a[href]")}
            cross += sum(urlsplit(u).netloc != web.host_names[i] for u in web.outlinks(url))
    assert any(h.startswith("/p/") for h in hrefs)
    assert any(h.startswith("./") for h in hrefs)
    assert any(h.startswith("../") for h in hrefs)
    assert any(h[0].isdigit() for h in hrefs)
    assert any("#" in h for h in hrefs)
    assert cross > 0


def test_outlinks_non_pages(web):
    root = web.seed_urls()[0]
    assert web.outlinks(root + "robots.txt") == []
    assert web.outlinks(root + f"p/{PAGES}.html") == []
    assert web.outlinks(root + "nope") == []
    assert web.outlinks("http://example.com/p/1.html") == []
    # hosts without a private area
    assert web.outlinks(web.seed_urls()[2] + "private/0.html") == []


def test_hosts_reachable_from_root(web):
    for i, root in enumerate(web.seed_urls()):
        host = web.host_names[i]
        seen = {root}
        depth = {root: 0}
        q = deque([root])
        while q:
            u = q.popleft()
            for v in web.outlinks(u):
                if urlsplit(v).netloc == host and v not in seen:
                    seen.add(v)
                    depth[v] = depth[u] + 1
                    q.append(v)
        pages = {f"{root}p/{k}.html" for k in range(PAGES)}
        assert pages <= seen
        assert max(depth[p] for p in pages) <= 4
        has_private = any("/private/" in u for u in seen)
        assert has_private == (web.robots_kind(i) in ("disallow", "crawl_delay"))


def test_is_disallowed_matches_protego(web):
    for _i, root in enumerate(web.seed_urls()):
        status, _, body = fetch(root + "robots.txt")
        rp = Protego.parse(body if status == 200 else "")
        urls = set(all_page_urls(web)) | {root + "private/0.html", root + "private/", root + "x"}
        for url in urls:
            if not url.startswith(root):
                continue
            assert web.is_disallowed(url) == (not rp.can_fetch(url, "deltacrawl")), url
    assert web.is_disallowed(web.seed_urls()[0] + "private/0.html")
    assert not web.is_disallowed(web.seed_urls()[3] + "private/0.html")


def test_not_found(web):
    root = web.seed_urls()[3]
    for path in ("nope", "p/", f"p/{PAGES}.html", "p/abc.html", "private/0.html"):
        status, ctype, body = fetch(root + path)
        assert status == 404, path
        assert ctype.startswith("text/html")
        assert "404" in body


def test_request_log(web):
    web.clear_log()
    assert web.requests() == []
    roots = web.seed_urls()
    fetch(roots[1] + "p/2.html?x=1", ua="agent-a")
    fetch(roots[3] + "robots.txt", ua="agent-b")
    fetch(roots[2] + "robots.txt")
    log = web.requests()
    assert [(e["host"], e["path"], e["status"], e["method"]) for e in log] == [
        (web.host_names[1], "/p/2.html?x=1", 200, "GET"),
        (web.host_names[3], "/robots.txt", 200, "GET"),
        (web.host_names[2], "/robots.txt", 404, "GET"),
    ]
    assert [e["user_agent"] for e in log] == ["agent-a", "agent-b", UA]
    ts = [e["ts"] for e in log]
    assert all(isinstance(t, float) for t in ts)
    assert ts == sorted(ts)
    log[0]["path"] = "mutated"
    assert web.requests()[0]["path"] == "/p/2.html?x=1"
    web.clear_log()
    assert web.requests() == []


def test_log_path(tmp_path):
    path = tmp_path / "requests.jsonl"
    with DevWeb(hosts=2, pages_per_host=3, log_path=str(path)) as dw:
        fetch(dw.seed_urls()[1])
        fetch(dw.seed_urls()[0] + "p/0.html")
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert lines == dw.requests()
        assert [x["path"] for x in lines] == ["/", "/p/0.html"]


def test_determinism(web):
    a = DevWeb(hosts=HOSTS, pages_per_host=PAGES, port=web.port, seed=7)
    b = DevWeb(hosts=HOSTS, pages_per_host=PAGES, port=web.port, seed=7)
    c = DevWeb(hosts=HOSTS, pages_per_host=PAGES, port=web.port, seed=8)
    urls = all_page_urls(web)
    assert [a.outlinks(u) for u in urls] == [b.outlinks(u) for u in urls]
    assert [a.outlinks(u) for u in urls] == [web.outlinks(u) for u in urls]
    assert [a.outlinks(u) for u in urls] != [c.outlinks(u) for u in urls]


def test_port_required_before_start():
    dw = DevWeb(hosts=2, pages_per_host=3)
    with pytest.raises(RuntimeError):
        dw.outlinks("http://127.0.0.2:1/")
    dw.stop()  # stop before start is a no-op


def test_stop_idempotent_and_frees_port():
    dw = DevWeb(hosts=3, pages_per_host=3).start()
    port = dw.port
    assert fetch(dw.seed_urls()[2])[0] == 200
    dw.stop()
    dw.stop()
    for i in range(3):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host_address(i), port))
            s.listen()
    # a fresh instance can serve on the same fixed port right away
    with DevWeb(hosts=3, pages_per_host=3, port=port) as again:
        assert again.host_names[0] == f"127.0.0.2:{port}"
        assert fetch(again.seed_urls()[0])[0] == 200
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.2:{port}/", timeout=2)


def test_the_devweb_command_prints_only_seeds_on_stdout_and_writes_the_crawls_options(tmp_path):
    """`deltacrawl devweb > seeds.txt` keeps only seed URLs (status on stderr), and --conf-out writes
    the options a crawl of it needs as a config file the crawler loads (docs/airflow.md's first run)."""
    import subprocess
    import sys
    import time

    from crawl.config import build_config
    conf_out = tmp_path / "devweb.toml"
    proc = subprocess.Popen([sys.executable, "-m", "jobs.cli", "devweb", "--conf", "devweb.port=0",
                             "--conf", "devweb.https_port=0", "--conf-out", str(conf_out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # a bound for a hang, not a timing
        while not (conf_out.exists() and conf_out.stat().st_size):
            assert proc.poll() is None and time.monotonic() < deadline, "deltacrawl devweb did not start"
            time.sleep(0.2)
        time.sleep(1)  # the seeds are printed right after the file is written
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    seeds = out.splitlines()
    assert seeds and all(line.startswith("https://") and ".devweb.test:" in line for line in seeds), out
    assert "crawl it with:" in err
    cfg = build_config(str(conf_out))
    assert cfg["fetch.tls_ca_file"] and cfg["fetch.dns_servers"] and len(cfg["fetch.allow_networks"]) > 1
    import ipaddress
    assert not any(ipaddress.ip_address("127.0.0.1") in ipaddress.ip_network(n) for n in cfg["fetch.allow_networks"])
