"""Reading one WARC record back, at its offset, from a local file or an S3 object (a ranged GET):
what ``deltacrawl warc-get`` and the tests use. Every record crawl.fetch.warc writes is its own gzip
member, so a reader can seek straight to it.

Pure library code: no pyspark here.
"""
from __future__ import annotations

import io
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator

from crawl.fetch.warc_store import _local_path
from crawl.s3 import S3Settings, is_s3_uri, make_client, s3_errors, s3_uri, split_s3_uri


def read_record(path: str, offset: int) -> dict:
    """Seek to ``offset`` in a local WARC file and read ONE record (see ``parse_record``)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return parse_record(fh, path, offset)


def read_record_at(location: str, offset: int, length: int | None = None, settings: S3Settings | None = None,
                   client: Any = None) -> dict:
    """ONE record of a WARC file that is a local path or an S3 object (s3://, s3a://, s3n://
    URI). An object is read with a ranged GET: exactly ``length`` bytes when the length is known
    (warc_index has it), else from ``offset`` on, as far as the record goes. ``settings`` (or a
    ready ``client``) say how to reach the object store.

    Raises ValueError if no record starts at ``offset``; FileNotFoundError, PermissionError or
    ConnectionError (one-line messages) if the file or object cannot be read."""
    if not is_s3_uri(location):
        return read_record(_local_path(location), offset)
    if client is None:
        if settings is None:
            raise ValueError(f"reading {location} needs S3 settings or a client")
        client = make_client(settings)
    bucket, key = split_s3_uri(location)
    last = f"{offset + int(length) - 1}" if length else ""
    endpoint = settings.endpoint_url if settings is not None else client.meta.endpoint_url
    from botocore.exceptions import ClientError
    with s3_errors(f"reading {s3_uri(bucket, key)}", endpoint):
        try:
            body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={offset}-{last}")["Body"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "InvalidRange":
                raise
            body = io.BytesIO()  # the offset lies past the object's end
        try:
            # a known length is read whole here, so that a network error is reported as one
            stream = io.BytesIO(body.read()) if length else body
            return parse_record(stream, location, offset)
        finally:
            body.close()


class _Rejoined:
    """A stream whose first bytes were read already (to check them), then the rest of it."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._rest.read(size)
        if size is None or size < 0:
            data, self._head = self._head + self._rest.read(), b""
            return data
        data, self._head = self._head[:size], self._head[size:]
        return data if len(data) == size else data + self._rest.read(size - len(data))


def parse_record(stream: BinaryIO, where: str, offset: int) -> dict:
    """Parse ONE record from ``stream``, positioned at ``offset`` of the file ``where`` (both only
    for messages; a ``.gz`` name means the record must be a gzip member).

    Returns {"warc_type", "target_uri", "warc_date", "record_id", "http_status" (int or None),
    "http_headers" (list of (name, value)), "payload" (bytes as stored; for records written here
    that is the decoded body)}. Raises ValueError if no record starts there.
    """
    head = stream.read(2)
    # every record we write is its own gzip member: anything else is a wrong offset (without
    # this check, warcio may decode compressed noise as some record by chance)
    if where.endswith(".gz") and head != b"\x1f\x8b":
        raise ValueError(f"no WARC record at offset {offset} in {where}")
    try:
        record = next(iter(ArchiveIterator(_Rejoined(head, stream))))
    except StopIteration:
        raise ValueError(f"no WARC record at offset {offset} in {where}") from None
    except Exception as exc:
        raise ValueError(f"no WARC record at offset {offset} in {where}: {exc}") from exc
    rec = record.rec_headers
    status = None
    headers: list[tuple[str, str]] = []
    if record.http_headers is not None:
        headers = list(record.http_headers.headers)
        if record.rec_type in ("response", "revisit"):
            try:
                status = int(record.http_headers.get_statuscode())
            except (TypeError, ValueError):
                status = None
    return {
        "warc_type": record.rec_type,
        "target_uri": rec.get_header("WARC-Target-URI"),
        "warc_date": rec.get_header("WARC-Date"),
        "record_id": rec.get_header("WARC-Record-ID"),
        "http_status": status,
        "http_headers": headers,
        "payload": record.raw_stream.read(),
    }
