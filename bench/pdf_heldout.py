#!/usr/bin/env python
"""Held-out check of PDF crawling (issue 51, "Done when"): a PDF web of another shape and seed
than the test web's ``pdfs`` host, crawled with ``deltacrawl crawl``, checked from the crawldb.

Run:      .venv/bin/python bench/pdf_heldout.py [--seed 20261207] [--cycles 6] [--keep DIR]

Web       two loopback hosts in this process (stdlib http.server; no robots.txt: all allowed),
          documents written by crawl/devweb/pdfs.py's byte-level builders, words drawn from
          --seed (so the texts are unlike the demo's and each other's):
            docs  (127.0.0.61)  /             HTML index: two PDFs, an octet-stream PDF, an HTML
                                              page, seven hostile PDFs
                                /pub/a.pdf    titled, 2 pages; links to /pub/a1.pdf, /pub/a2.pdf
                                              and a pages-host page
                                /pub/b.pdf    3 pages, links on the last; its text is /notes.html's
                                              (twins), links to /pub/b1.pdf
                                /pub/a1.pdf, /pub/a2.pdf, /pub/b1.pdf   only PDFs link to them;
                                              they link to pages two PDFs deep, and /pub/b1.pdf to
                                              /get?doc=9, an octet-stream PDF only a PDF links to,
                                              which links to a page three PDFs deep
                                /get?doc=7    a PDF sent as application/octet-stream
                                /bad/*.pdf    bomb (200 MiB in one stream), streams (5 x 50 MiB),
                                              page-tree cycle, truncated, 150,000 pages, arrays
                                              nested 50,000 deep, garbage after %PDF-
            pages (127.0.0.62)  /deep/K.html, /from-a.html, /from-octet.html: HTML pages no HTML
                                page links to, each linking back to the docs index
Crawl     ``deltacrawl crawl --seeds <the docs index> --cycles N`` (a process, the documented
          defaults except spark.master local[2], fetch.delay_s 0.2, the two addresses allowed,
          MLflow off), then ``deltacrawl sql`` (DuckDB) on its crawldb and cycles tables.
Checks    every page only a PDF links to is fetched; every readable PDF (octet-stream ones
          included, recorded as application/pdf) has text_hash and simhash on its crawldb row and
          no parse_error; each hostile PDF was requested once and is one recorded parse_error,
          fetched, with no fingerprint; /pub/b.pdf and /notes.html are a duplicate pair; the
          crawl exits 0; the cycles table's fetch rows count the PDFs by content type. Prints
          each check and exits 1 if any failed.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crawl.devweb.pdfs import bomb, cycle, deep, make_pdf, many_pages, many_streams  # noqa: E402

DOCS, PAGES = "127.0.0.61", "127.0.0.62"
PDF, OCTETS, HTML = "application/pdf", "application/octet-stream", "text/html; charset=utf-8"


def build_web(seed: int, pages_base: str, docs_base: str) -> tuple[dict, dict]:
    """({(host, path): (body, content type)}, the oracle: what each group of URLs is)."""
    rng = random.Random(seed)
    vocabulary = sorted({"".join(rng.choice("abcdefghiklmnoprstuvw") for _ in range(rng.randint(3, 9)))
                         for _ in range(3000)})

    def text(words: int = 14) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(words))

    def page(title: str, body: str) -> bytes:
        return (f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
                f"<p>{body}</p><p><a href=\"{docs_base}/\">documents</a></p></body></html>").encode()

    deep_pages = [f"{pages_base}/deep/{k}.html" for k in range(5)]
    twin_text = text(18)
    docs: dict[str, tuple[bytes, str]] = {
        "/pub/a.pdf": (make_pdf([([text(), text()], ["/pub/a1.pdf", f"{pages_base}/from-a.html"]),
                                 ([text()], ["/pub/a2.pdf"])], title=text(4).title()), PDF),
        "/pub/b.pdf": (make_pdf([([twin_text], []), ([], []), ([], ["/pub/b1.pdf"])]), PDF),
        "/pub/a1.pdf": (make_pdf([([text()], deep_pages[:2])], title=text(3)), PDF),
        "/pub/a2.pdf": (make_pdf([([text()], [deep_pages[2], "/pub/b1.pdf"])]), PDF),
        "/pub/b1.pdf": (make_pdf([([text(), text()], [deep_pages[3], "/get?doc=9"])]), PDF),
        "/get?doc=7": (make_pdf([([text()], [f"{pages_base}/from-octet.html"])]), OCTETS),
        "/get?doc=9": (make_pdf([([text()], [deep_pages[4]])]), OCTETS),
        "/notes.html": (f"<html><body><p>{twin_text}</p></body></html>".encode(), HTML),
    }
    a = docs["/pub/a.pdf"][0]
    hostile = {
        "/bad/bomb.pdf": bomb(200), "/bad/streams.pdf": many_streams(5, 50), "/bad/cycle.pdf": cycle(),
        "/bad/truncated.pdf": a[: len(a) // 2], "/bad/pages.pdf": many_pages(150_000),
        "/bad/nested.pdf": deep(50_000), "/bad/garbage.pdf": b"%PDF-1.6\n" + rng.randbytes(40_000),
    }
    docs.update({path: (body, PDF) for path, body in hostile.items()})
    index_links = ["/pub/a.pdf", "/pub/b.pdf", "/get?doc=7", "/notes.html", *hostile]
    docs["/"] = (page("Documents", "".join(f'<a href="{p}">{p}</a> ' for p in index_links)), HTML)
    web = {(DOCS, path): v for path, v in docs.items()}
    only_from_pdf = [*deep_pages, f"{pages_base}/from-a.html", f"{pages_base}/from-octet.html"]
    for url in only_from_pdf:
        web[(PAGES, url[len(pages_base):])] = (page(text(3).title(), text(30)), HTML)
    oracle = {
        "only_from_pdf": only_from_pdf + [f"{docs_base}{p}" for p in
                                          ("/pub/a1.pdf", "/pub/a2.pdf", "/pub/b1.pdf", "/get?doc=9")],
        "readable_pdfs": [f"{docs_base}{p}" for p, (_, t) in docs.items()
                          if p not in hostile and (t in (PDF, OCTETS))],
        "hostile": [f"{docs_base}{p}" for p in hostile],
        "twins": (f"{docs_base}/pub/b.pdf", f"{docs_base}/notes.html"),
    }
    return web, oracle


class Web:
    def __init__(self, seed: int):
        self.requests: Counter = Counter()
        self.servers = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 (http.server's name)
                host = self.server.server_address[0]
                with lock:
                    outer.requests[(host, self.path)] += 1
                body, ctype = outer.content.get((host, self.path), (b"not found", None))
                self.send_response(200 if ctype else 404)
                self.send_header("Content-Type", ctype or "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        for address in (DOCS, PAGES):
            server = Server((address, 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)
        self.docs_base = f"http://{DOCS}:{self.servers[0].server_address[1]}"
        self.pages_base = f"http://{PAGES}:{self.servers[1].server_address[1]}"
        self.content, self.oracle = build_web(seed, self.pages_base, self.docs_base)

    def stop(self):
        for server in self.servers:
            server.shutdown()
            server.server_close()


def deltacrawl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "deltacrawl"), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=3600)


def sql(root: str, query: str) -> list[dict]:
    done = deltacrawl("sql", "--format", "json", "--crawl-root", root, query)
    if done.returncode != 0:
        raise SystemExit(f"deltacrawl sql failed: {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _as_dict(value) -> dict:
    """A map column as DuckDB's JSON gives it (an object, or a list of key/value pairs)."""
    if isinstance(value, list):
        return {item["key"]: item["value"] for item in value}
    return dict(value or {})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--keep", help="crawl root to keep (default: a temporary one, removed)")
    args = ap.parse_args()
    web = Web(args.seed)
    with tempfile.TemporaryDirectory(prefix="pdf-heldout-") as tmp:
        root = args.keep or str(Path(tmp) / "crawl")
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text(web.docs_base + "/\n")
        conf = {"spark.master": "local[2]", "spark.shuffle_partitions": 2, "fetch.delay_s": 0.2,
                "fetch.allow_networks": json.dumps([f"{DOCS}/32", f"{PAGES}/32"])}
        started = time.time()
        try:
            done = deltacrawl("crawl", "--seeds", str(seeds), "--cycles", str(args.cycles), "--crawl-root", root,
                              "--mlflow-uri", "off", *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")])
        finally:
            web.stop()
        seconds = time.time() - started
        print(f"deltacrawl crawl: exit {done.returncode}, {seconds:.0f} s, {args.cycles} cycles, seed {args.seed}")
        if done.returncode != 0:
            print(done.stderr[-3000:])
            return 1
        rows = {r["url"]: r for r in sql(root, "SELECT url, status, content_type, text_hash, simhash, "
                                               "parse_error, dup_of, depth FROM crawldb")}
        cycles = sql(root, "SELECT cycle, by_content_type FROM cycles WHERE step = 'fetch' ORDER BY cycle")
    oracle = web.oracle
    checks: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append((name, ok, detail))

    def row(url: str) -> dict:
        return rows.get(url) or {}

    missing = [u for u in oracle["only_from_pdf"] if row(u).get("status") not in ("fetched", "duplicate")]
    check(f"every page only a PDF links to fetched ({len(oracle['only_from_pdf'])})", not missing, f"missing {missing}")
    unread = [u for u in oracle["readable_pdfs"] if row(u).get("text_hash") is None or row(u).get("simhash") is None
              or row(u).get("parse_error") is not None or (row(u).get("content_type") or "").split(";")[0] != PDF]
    check(f"every readable PDF fingerprinted (text_hash, simhash), recorded as {PDF} ({len(oracle['readable_pdfs'])})",
          not unread, f"not: {[(u, row(u)) for u in unread]}")
    bad = [u for u in oracle["hostile"] if not (row(u).get("status") == "fetched"
                                                and (row(u).get("parse_error") or "").startswith("parse_error: pdf: ")
                                                and row(u).get("text_hash") is None)]
    check(f"each hostile PDF one recorded parse_error ({len(oracle['hostile'])})", not bad,
          f"not: {[(u, row(u)) for u in bad]}")
    docs_port = web.docs_base.rsplit(":", 1)[1]
    times = {u: web.requests[(DOCS, u.split(docs_port, 1)[1])] for u in oracle["hostile"]}
    check("each hostile PDF requested once", all(n == 1 for n in times.values()), str(times))
    pdf_url, html_url = oracle["twins"]
    pair = {row(pdf_url).get("dup_of"), row(html_url).get("dup_of")} - {None}
    check("the PDF and its HTML twin are a duplicate pair", pair in ({pdf_url}, {html_url}),
          f"{row(pdf_url)} / {row(html_url)}")
    counted = sum(_as_dict(c["by_content_type"]).get(PDF, 0) for c in cycles)
    n_pdfs = len(oracle["readable_pdfs"]) + len(oracle["hostile"])
    check(f"the cycles table's fetch rows count {n_pdfs} PDF answers", counted == n_pdfs, f"{cycles}")
    for url in oracle["hostile"]:
        print(f"  {url.rsplit('/', 1)[1]:<14} {row(url).get('parse_error', '')[:110]}")
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + ("" if ok else f": {detail[:1500]}"))
    print(f"crawldb: {len(rows)} URLs; by status {dict(Counter(r['status'] for r in rows.values()))}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
