#!/usr/bin/env python
"""What a PDF costs the parse step against an HTML page: CPU per document, one core.

Run:      .venv/bin/python bench/pdf_extract.py [--rounds 5] [--out-json FILE]
          pdfminer.six (the alternative) comes from bench/requirements.txt; without it its rows say
          "not installed".

Corpus    generated in memory, the same bytes on every run, nothing downloaded:
            html        a 14 KB page with 120 links (navigation, paragraphs of text)
            pdf-1/10/100  PDFs of 1, 10 and 100 pages of 40 lines each and 3 URI link
                        annotations a page, written by crawl/devweb/pdfs.py's make_pdf (the
                        builder the test web serves its PDFs with)
Methods   each timed on every document of its kind, in a rotating order, for --rounds rounds, in
          this one process (the libraries already imported; one untimed pass first):
            parse_page  crawl.parse.page.parse_page (HTML: text, links, fingerprints)
            parse_pdf   crawl.parse.pdf.parse_pdf (pypdf: text, title, links, fingerprints), the
                        documented defaults (parse.pdf_max_pages = 100)
            pdfminer    pdfminer.high_level.extract_text (text only: no links, no fingerprint)
Reported  per method and document the median CPU ms (time.process_time: the machine is shared,
          wall time includes other processes' turns) and the ratio to parse_page's HTML page.
"""
from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawl.config import build_config  # noqa: E402
from crawl.devweb.pdfs import make_pdf  # noqa: E402
from crawl.parse.page import ParseOptions, parse_page  # noqa: E402
from crawl.parse.pdf import parse_pdf  # noqa: E402

WORDS = ("river", "authority", "report", "water", "quality", "flood", "valley", "budget", "board",
         "minutes", "annex", "survey", "station", "level", "measure", "season")


def _line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12))


def html_page() -> bytes:
    nav = "".join(f'<li><a href="/section/{k}.html">Section {k}</a></li>' for k in range(20))
    paras = "".join(f'<p>{_line(i)} <a href="/doc/{i}.html">{WORDS[i % 16]}</a> {_line(i + 1)}</p>\n'
                    for i in range(100))
    return (f"<!DOCTYPE html><html><head><title>Report</title></head><body><ul>{nav}</ul>\n"
            f"{paras}</body></html>").encode()


def pdf(pages: int) -> bytes:
    return make_pdf([([_line(p * 40 + i) for i in range(40)], [f"/doc/{p}-{k}.html" for k in range(3)])
                     for p in range(pages)], title="Report")


def _pdfminer():
    try:
        from pdfminer.high_level import extract_text
    except ImportError:
        return None
    return lambda body: extract_text(io.BytesIO(body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out-json")
    args = ap.parse_args(argv)
    options = ParseOptions.from_config(build_config())
    url = "http://127.0.0.1:8000/report"
    docs = {"html": html_page(), "pdf-1": pdf(1), "pdf-10": pdf(10), "pdf-100": pdf(100)}
    miner = _pdfminer()
    methods = {("parse_page", "html"): lambda: parse_page(docs["html"], url, "text/html", options)}
    for name in ("pdf-1", "pdf-10", "pdf-100"):
        methods[("parse_pdf", name)] = lambda b=docs[name]: parse_pdf(b, url, "application/pdf", options)
        if miner is not None:
            methods[("pdfminer", name)] = lambda b=docs[name]: miner(b)
    for run in methods.values():  # untimed: a first call pays for lazy imports and caches
        run()
    times: dict[tuple[str, str], list[float]] = {k: [] for k in methods}
    keys = list(methods)
    for r in range(args.rounds):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            t0 = time.process_time()
            methods[key]()
            times[key].append(1000 * (time.process_time() - t0))
    base = statistics.median(times[("parse_page", "html")])
    print(f"CPU ms per document, median of {args.rounds} rounds (one core, libraries imported)")
    print(f"{'method':<12}{'document':<10}{'bytes':>10}{'CPU ms':>10}{'x html page':>13}")
    result = {}
    for (method, doc), ts in times.items():
        ms = statistics.median(ts)
        result[f"{method}/{doc}"] = ms
        print(f"{method:<12}{doc:<10}{len(docs[doc]):>10,}{ms:>10.1f}{ms / base:>13.1f}")
    if miner is None:
        print("pdfminer    not installed (.venv/bin/pip install -r bench/requirements.txt)")
    if args.out_json:
        Path(args.out_json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
