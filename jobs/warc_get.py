"""warc-get — print the archived record of a URL, reading only that record of its WARC file.

Inputs:   <crawl_root>/warc_index (Delta) and the WARC file it names (warc_uri: a local path, or
          an S3 object read with one ranged GET — endpoint and credentials from [s3] or the
          standard AWS configuration; index rows older than warc_uri: <crawl_root>/warc/<warc_file>).
Outputs:  on stdout, the record's WARC headers and HTTP headers, then a blank line and the
          payload (as stored: decoded body); --headers-only stops before the payload. The
          newest record of the URL is shown unless --all lists every capture.
Re-run:   always safe (reads only).
Exit:     0 found · 1 URL not archived · 2 bad URL / no index · 3 failure.
Example:  deltacrawl warc-get http://127.0.0.2:8470/p/1.html --crawl-root ./crawl-data
"""
from __future__ import annotations

import os
import sys
from typing import Any, Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawl.s3 import is_s3_uri, s3_settings
from crawl.net.urls import InvalidUrl, normalize_url, url_hash
from crawl.fetch.warc_read import read_record_at
from jobs.engine.runtime import run_spark_step
from jobs.engine.errors import EXIT_NOTHING_TO_DO, EXIT_OK, UserError
from jobs.engine.crawl_root import CrawlRoot
from jobs.engine.tables import table_exists


def captures(spark: SparkSession, root: CrawlRoot, url: str) -> list[dict[str, Any]]:
    """Every archived record of ``url``, newest first."""
    if not table_exists(spark, root.warc_index):
        raise UserError(f"no WARC index in {root.root}: nothing has been fetched with warc.enabled")
    rows = (spark.read.format("delta").load(root.warc_index)
            .filter((F.col("url_hash") == url_hash(url)) & (F.col("url") == url))
            .orderBy(F.col("fetched_at").desc(), F.col("warc_file").desc(), F.col("warc_offset").desc())
            .collect())
    return [r.asDict() for r in rows]


def render(record: Mapping[str, Any], headers_only: bool) -> bytes:
    lines = [f"WARC-Type: {record['warc_type']}", f"WARC-Target-URI: {record['target_uri']}",
             f"WARC-Date: {record['warc_date']}", f"WARC-Record-ID: {record['record_id']}", ""]
    if record.get("http_status") is not None:
        lines.append(f"HTTP status: {record['http_status']}")
    lines += [f"{k}: {v}" for k, v in record.get("http_headers") or []]
    text = ("\n".join(lines) + "\n").encode("utf-8", "replace")
    if headers_only:
        return text
    return text + b"\n" + (record.get("payload") or b"")


def run(spark: SparkSession, cfg: Mapping[str, Any], root: CrawlRoot, url: str, headers_only: bool = False,
        list_all: bool = False, out=None) -> int:
    out = out if out is not None else sys.stdout.buffer
    try:
        canonical = normalize_url(url)
    except InvalidUrl as exc:
        raise UserError(f"not a crawlable URL: {url} ({exc})") from None
    found = captures(spark, root, canonical)
    if not found:
        print(f"warc-get: {canonical} is not archived in {root.root}", file=sys.stderr)
        return EXIT_NOTHING_TO_DO
    if list_all:
        for c in found:
            out.write((f"{c['fetched_at']}  {c['http_status']}  {c['mime'] or '-'}  "
                       f"{record_location(root, c)}  {c['warc_offset']}  {c['warc_length']}\n").encode("utf-8"))
        out.flush()
        return EXIT_OK
    newest = found[0]
    out.write(render(read_capture(cfg, root, newest, canonical), headers_only))
    out.flush()
    return EXIT_OK


def record_location(root: CrawlRoot, capture: Mapping[str, Any]) -> str:
    """The file (path or S3 URI) of an index row; rows from before warc_uri name only the file.
    A local path that is gone but whose file is in this crawl root's warc/ folder means the crawl
    root was moved or copied since (warc_uri holds absolute paths): the file here is the one."""
    uri = capture.get("warc_uri")
    here = f"{root.warc_dir}/{capture['warc_file']}"
    if not uri:
        return here
    if not is_s3_uri(uri) and "://" not in uri and not os.path.exists(uri) and root.is_local \
            and os.path.exists(here.removeprefix("file://")):
        return here
    return uri


def read_capture(cfg: Mapping[str, Any], root: CrawlRoot, capture: Mapping[str, Any], url: str) -> dict[str, Any]:
    """The record an index row points at; a file or object that cannot be read is a UserError."""
    location = record_location(root, capture)
    settings = s3_settings(cfg) if is_s3_uri(location) else None
    try:
        return read_record_at(location, int(capture["warc_offset"]), capture.get("warc_length"), settings=settings)
    except FileNotFoundError as exc:
        detail = f" ({exc})" if is_s3_uri(location) else ""
        raise UserError(f"WARC file {location} is missing{detail}; the index says {url} is there") from None
    except (OSError, ValueError) as exc:  # access denied, endpoint unreachable, no record at the offset
        raise UserError(" ".join(str(exc).split())) from None


def configure(parser) -> None:
    parser.description = "Print the archived WARC record of a URL (seeks to its offset)."
    parser.add_argument("url", metavar="URL")
    parser.add_argument("--headers-only", action="store_true", help="print the headers, not the payload")
    parser.add_argument("--all", action="store_true", help="list every capture of the URL instead")


def step(spark, cfg, root, args) -> int:
    return run(spark, cfg, root, args.url, headers_only=args.headers_only, list_all=args.all)


def main(argv: list[str] | None = None) -> int:
    return run_spark_step("deltacrawl warc-get", argv, configure, step)


if __name__ == "__main__":
    sys.exit(main())
