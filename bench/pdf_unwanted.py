#!/usr/bin/env python
"""What an unwanted content type costs the fetch: read in full, headers + a truncated body, or
never requested (issue 51, item 5), side by side in one run.

Run:      .venv/bin/python bench/pdf_unwanted.py [--images 10] [--image-mib 16] [--rounds 3]
          [--out-json FILE]

Web       one loopback host (127.0.0.2, its own process, stdlib http.server): an HTML index
          linking to --images images of --image-mib MiB of random bytes (image/png, as cameras
          and CMSs serve them: incompressible) and the images themselves, each under two URLs:
          /img/N (no extension) and /img/N.png. No robots.txt (404: everything allowed).
Methods   two fetch cycles each, through the real fetcher (crawl.fetch.fetcher.fetch_partition,
          in this process, parsing in the task, a WARC file written per cycle): cycle 1 fetches the
          index and keeps the links the fetch task's rules let through, cycle 2 fetches those:
            full        fetch.content_types + image/png: images read in full and archived
                        (no parser for them: stored, not parsed); links to /img/N
            truncated   the default fetch.content_types: an image is stored as its headers and
                        a body cut at fetch.max_other_body_bytes (1 MiB); links to /img/N
            suffix      the default discovery.deny_extensions: the index links /img/N.png,
                        dropped by the suffix rule in cycle 1, never requested
          The methods rotate order each round (--rounds), each against the same server.
Reported  per method, the median over rounds of: CPU seconds of this process (user + sys, both
          cycles: the fetcher, the WARC writer, parsing the index), body bytes the fetcher kept
          (sum of content_length), bytes the server wrote to its sockets (a cut body stops when
          the client closes; what the kernel buffered is counted as sent), WARC bytes written,
          and the requests made.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawl.config import build_config  # noqa: E402
from crawl.fetch.fetcher import fetch_partition  # noqa: E402
from crawl.fetch.warc import WarcWriter  # noqa: E402
from crawl.net.addresses import networks_of  # noqa: E402
from crawl.net.urls import host_bucket, host_of, normalize_url, url_hash  # noqa: E402

ADDRESS = "127.0.0.2"
MIB = 2**20
METHODS = ("full", "truncated", "suffix")


def _serve(port_out, images: int, image_bytes: int) -> None:
    """The web, in its own process (its CPU is not the fetcher's)."""
    body = os.urandom(image_bytes)
    sent = {"bytes": 0, "requests": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, ctype: str, payload: bytes) -> None:
            with lock:
                sent["requests"] += 1
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            view = memoryview(payload)
            for start in range(0, len(payload), 64 * 1024):
                try:
                    self.wfile.write(view[start:start + 64 * 1024])
                except OSError:  # the client closed: a cut body
                    self.close_connection = True
                    return
                with lock:
                    sent["bytes"] += len(view[start:start + 64 * 1024])

        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/stats":
                payload = json.dumps(sent).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            elif path in ("/plain/", "/suffix/"):
                suffix = ".png" if path == "/suffix/" else ""
                links = "".join(f'<li><a href="/img/{i}{suffix}">image {i}</a></li>\n' for i in range(images))
                self._send(200, "text/html; charset=utf-8",
                           f"<html><head><title>Gallery</title></head><body><ul>\n{links}</ul></body></html>".encode())
            elif path.startswith("/img/"):
                self._send(200, "image/png", body)
            else:
                self._send(404, "text/plain", b"not found")

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):  # a client that hung up: expected here
            pass

    server = Server((ADDRESS, 0), Handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


def _stats(port: int) -> dict:
    with socket.create_connection((ADDRESS, port), timeout=10) as s:
        s.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def _rows(urls: list[str]) -> list[dict]:
    rows = []
    for u in urls:
        u = normalize_url(u)
        host = host_of(u)
        rows.append({"url": u, "url_hash": url_hash(u), "host": host, "host_bucket": host_bucket(host, 16),
                     "depth": 0, "score": 1.0, "segment_id": "bench", "etag": None, "last_modified": None,
                     "robots_status": None, "robots_txt": None, "robots_fetched_at": None})
    return rows


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_method(method: str, port: int, image_bytes: int) -> dict:
    base = build_config()
    overrides = {"fetch.delay_s": 0.0, "sitemaps.enabled": False, "fetch.allow_networks": networks_of([ADDRESS]),
                 "fetch.read_timeout_s": 30.0, "fetch.total_timeout_s": 120.0}
    if method == "full":
        overrides["fetch.content_types"] = [*base["fetch.content_types"], "image/png"]
        overrides["fetch.max_body_bytes"] = max(int(base["fetch.max_body_bytes"]), image_bytes + 1)
    cfg = build_config(overrides=overrides)
    index = f"http://{ADDRESS}:{port}/{'suffix' if method == 'suffix' else 'plain'}/"
    before = _stats(port)
    with tempfile.TemporaryDirectory(prefix="pdf-unwanted-") as folder:
        cpu = _cpu()
        with WarcWriter(folder, "BENCH-unwanted", 1 << 30, {"operator": "bench"}) as archive:
            first = [r for r in fetch_partition(_rows([index]), cfg, archive=archive) if r["kind"] == "url"]
            links = first[0]["outlinks"] or []
            second = ([r for r in fetch_partition(_rows(links), cfg, archive=archive) if r["kind"] == "url"]
                      if links else [])
        cpu = _cpu() - cpu
        warc = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    after = _stats(port)
    rows = first + second
    return {"cpu_s": cpu, "kept_bytes": sum(r["content_length"] or 0 for r in rows),
            "sent_bytes": after["bytes"] - before["bytes"], "warc_bytes": warc,
            "requests": after["requests"] - before["requests"], "images_fetched": len(second),
            "truncated": sum(1 for r in second if r["truncated"]),
            "statuses": sorted({r["fetch_status"] for r in rows})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=10)
    ap.add_argument("--image-mib", type=float, default=16.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out-json")
    args = ap.parse_args()
    image_bytes = int(args.image_mib * MIB)
    ctx = multiprocessing.get_context("spawn")
    port_q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(port_q, args.images, image_bytes), daemon=True)
    server.start()
    try:
        port = port_q.get(timeout=60)
        results: dict[str, list[dict]] = {m: [] for m in METHODS}
        run_method("truncated", port, image_bytes)  # untimed: imports, first connections
        for r in range(args.rounds):
            for method in METHODS[r % 3:] + METHODS[:r % 3]:
                results[method].append(run_method(method, port, image_bytes))
    finally:
        server.kill()
        server.join(10)
    summary = {}
    print(f"{args.images} images of {args.image_mib:g} MiB, {args.rounds} rounds, load "
          f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'method':<10} {'CPU s':>7} {'kept MiB':>9} {'sent MiB':>9} {'WARC MiB':>9} {'requests':>9}  images (cut)")
    for method in METHODS:
        runs = results[method]
        med = {k: statistics.median(r[k] for r in runs) for k in ("cpu_s", "kept_bytes", "sent_bytes", "warc_bytes",
                                                                  "requests")}
        summary[method] = {**med, "images_fetched": runs[-1]["images_fetched"], "truncated": runs[-1]["truncated"],
                           "statuses": runs[-1]["statuses"]}
        print(f"{method:<10} {med['cpu_s']:>7.2f} {med['kept_bytes'] / MIB:>9.1f} {med['sent_bytes'] / MIB:>9.1f} "
              f"{med['warc_bytes'] / MIB:>9.1f} {med['requests']:>9.0f}  {runs[-1]['images_fetched']} "
              f"({runs[-1]['truncated']})")
    if args.out_json:
        Path(args.out_json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
