"""WARC/1.1 output for the fetcher: one ``WarcWriter`` per Spark task.

Files look like Common Crawl's: ``{prefix}-{YYYYMMDDHHMMSS}-{serial:05d}.warc.gz`` (the timestamp
is when the file was opened, UTC). Every record is its own gzip member, so a reader can seek
straight to a record's offset (crawl.fetch.warc_read). Each file starts with a
``warcinfo`` record. A file appears under its final name only when it is complete (on roll or
``close``), so a task that dies never leaves a half-written file under a final name: in a local
directory it is written as ``{name}.open`` and renamed; on S3 it is a multipart upload, sent a
part at a time as it fills and completed at the end (crawl.fetch.warc_store). What dead task
attempts leave (``.open`` files, in-progress uploads) is removed by ``sweep_unfinished``; complete
files that no committed result names (``unindexed_files``: a task attempt or a fetch run that died
after closing them) are removed by the step that finds them (fetch, maintain). A file is rolled
once it has reached ``max_file_bytes``: the next exchange goes into a new file with the next
serial (an exchange's request and response always share a file).

Everything the web sends is sanitised rather than trusted: header names are reduced to token
characters, header values lose control characters and have non-ASCII percent-encoded, URLs are
percent-encoded where they hold spaces, controls or non-ASCII. The body handed in is the decoded
payload, so the stored HTTP headers are made to agree with it: Content-Encoding and
Transfer-Encoding are removed and Content-Length is set to the stored length; the original values
are kept as ``X-Crawler-Content-Encoding`` / ``X-Crawler-Transfer-Encoding`` /
``X-Crawler-Content-Length`` (as Common Crawl and StormCrawler do).

A non-http(s) target URI (only garbage input can give one) is still written, but without
WARC-Payload-Digest: readers take the whole block of such a record as its payload.

Pure library code: no pyspark here.
"""
from __future__ import annotations

import hashlib
import http
import math
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable
from urllib.parse import quote, urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter
# zlib-ng, not the standard zlib: the same gzip members (any gzip reader, warcio included, reads
# them) for about half the CPU at the same level, and a little smaller (docs/decisions.md "WARC
# compression"). Compressing every page is the largest single CPU cost of a fetch task.
from zlib_ng import zlib_ng

from crawl.fetch.warc_store import FILE_SUFFIX, LocalWarcStore, WarcStore

WARC_VERSION = "WARC/1.1"
WARC_FORMAT = "WARC File Format 1.1"
WARC_CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
REVISIT_PROFILE_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

_TOKEN_DROP = re.compile(r"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]*")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")   # every control character but TAB
# Printable ASCII that may stay as is in a URI (RFC 3986 reserved + unreserved + "%").
_URI_SAFE = "!#$%&'()*+,-./:;=?@[]_~"
# Printable ASCII that may stay as is in a header value (everything visible, space, tab).
_VALUE_SAFE = "".join(chr(c) for c in range(0x20, 0x7f) if not chr(c).isalnum()) + "\t"
_HEADER_NAME_MAX = 256
_HEADER_VALUE_MAX = 16384


def _software() -> str:
    try:
        from importlib.metadata import version
        return f"deltacrawl/{version('deltacrawl')}"
    except Exception:  # not installed (e.g. run from a source tree)
        return "deltacrawl/unknown"


# --------------------------------------------------------------------------- sanitising
def _raw(value: Any) -> bytes:
    """Any value to the bytes it stands for (str as UTF-8; the lone surrogates aiohttp uses for
    undecodable header bytes become those bytes again). Never fails."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, str):
        value = str(value)
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace")


def _to_text(value: Any) -> str:
    """Any value to str: UTF-8 where valid, else Latin-1 (never fails)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
    raw = _raw(value)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _ascii_value(value: Any, limit: int = _HEADER_VALUE_MAX) -> str:
    """A header value safe to write on one line: control characters become spaces, bytes
    outside ASCII are percent-encoded (as received), surrounding whitespace is stripped and
    the length capped."""
    if value.__class__ is str and value.isascii() and value.isprintable():
        return value.strip()[:limit]  # the usual case, already one printable ASCII line
    raw = _CONTROL.sub(b" ", _raw(value)).strip()
    if not raw.isascii():
        return quote(raw, safe=_VALUE_SAFE)[:limit]
    return raw.decode("ascii")[:limit]


def _header_name(name: Any) -> str:
    if name.__class__ is str and _TOKEN.fullmatch(name):  # the usual case, already a token
        return name[:_HEADER_NAME_MAX]
    return _TOKEN_DROP.sub("", _to_text(name))[:_HEADER_NAME_MAX]


def _clean_headers(headers: Iterable[Any] | None) -> list[tuple[str, str]]:
    """(name, value) pairs with valid token names and one-line ASCII values; junk is dropped."""
    out: list[tuple[str, str]] = []
    if not headers:
        return out
    try:
        items = list(headers.items()) if hasattr(headers, "items") else list(headers)
    except Exception:  # headers we cannot list are left out of the record's extra headers
        return out
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            continue
        name = _header_name(name)
        if name:
            out.append((name, _ascii_value(value)))
    return out


def _clean_uri(url: Any) -> str:
    """A URI with no whitespace, controls or non-ASCII (those are percent-encoded) and a
    lower-case scheme."""
    text = quote(_raw(url).strip(), safe=_URI_SAFE)
    scheme, sep, rest = text.partition(":")
    if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.\-]*", scheme):
        text = scheme.lower() + ":" + rest
    return text


def _is_http(uri: str) -> bool:
    # WARC readers (warcio among them) only parse the HTTP headers of http(s) records
    return uri.startswith(("http:", "https:"))


def _gzip_compressor(level: int):
    """A compressor whose output is one gzip member (RFC 1952) at ``level``."""
    return zlib_ng.compressobj(level, zlib_ng.DEFLATED, zlib_ng.MAX_WBITS + 16)


class _LevelGzip:
    """warcio's GzippingWrapper with a chosen compression level."""

    def __init__(self, out, level: int):
        self.compressor = _gzip_compressor(level)
        self.out = out

    def write(self, buff):
        self.out.write(self.compressor.compress(buff))

    def flush(self):
        self.out.write(self.compressor.flush())
        self.out.flush()


class _WARCWriter(WARCWriter):
    """warcio's writer, except that it can be told to leave out WARC-Payload-Digest.

    Readers treat the whole block of a non-http(s) record as its payload, so the digest of the
    HTTP body would fail their check; for such (garbage) URIs the optional header is omitted."""

    def ensure_digest(self, record, block=True, payload=True):
        if getattr(record, "no_payload_digest", False):
            record.rec_headers.remove_header("WARC-Payload-Digest")
            payload = False
        super().ensure_digest(record, block=block, payload=payload)

    gzip_level = 6

    def _write_warc_record(self, out, record):
        # warcio compresses at level 9; zlib's default level 6 is several times cheaper on
        # HTML for a few percent more bytes (what gzip(1) and most crawlers use).
        wrapper = _LevelGzip(out, self.gzip_level)
        self.gzip = False
        try:
            super()._write_warc_record(wrapper, record)  # ends with wrapper.flush(): one member
        finally:
            self.gzip = True

    def create_warc_record(self, uri, record_type, *args, **kwargs):
        record = super().create_warc_record(uri, record_type, *args, **kwargs)
        if record_type in ("request", "response") and not _is_http(uri or ""):
            record.no_payload_digest = True
            record.rec_headers.remove_header("WARC-Payload-Digest")
        return record


def _request_target(uri: str) -> tuple[str, str]:
    """(path?query for the request line, Host header value)."""
    try:
        parts = urlsplit(uri)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return path, parts.netloc
    except ValueError:
        return "/", ""


_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _sha1(*parts: bytes) -> str:
    """A WARC digest value: "sha1:" and the base32 SHA-1 of the concatenated ``parts``.
    (A SHA-1 is 160 bits, 32 base32 digits without padding: read off one integer, cheaper than
    base64.b32encode, which is pure Python.)"""
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part)
    n = int.from_bytes(digest.digest(), "big")
    return "sha1:" + "".join([_B32[(n >> shift) & 31] for shift in range(155, -1, -5)])


def _http_head(first_line: str, headers: list[tuple[str, str]]) -> bytes:
    """An HTTP message head as stored in a request/response record (values are already ASCII,
    see _clean_headers)."""
    lines = [first_line]
    lines.extend(f"{name}: {value}" for name, value in headers)
    lines.append("\r\n")
    return "\r\n".join(lines).encode("ascii", "replace")


def _warc_date(ts: Any) -> str:
    """Epoch seconds -> WARC-Date (UTC, second precision, microseconds when non-zero)."""
    try:
        ts = float(ts)
        if not math.isfinite(ts):
            raise ValueError
        dt = datetime.fromtimestamp(ts, timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        dt = datetime.now(timezone.utc)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        text += f".{dt.microsecond:06d}"
    return text + "Z"


def _status_line(status: Any, reason: Any) -> str:
    try:
        code = int(status)
        if not 0 <= code <= 999:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        code = 0
    text = _ascii_value(reason, 512)
    if not text:
        try:
            text = http.HTTPStatus(code).phrase
        except ValueError:
            text = ""
    return f"{code:03d} {text}".rstrip()


def _record_id(value: Any) -> str | None:
    text = _ascii_value(value, 512).replace(" ", "")
    if not text:
        return None
    return text if text.startswith("<") and text.endswith(">") else f"<{text}>"


def _adjust_response_headers(headers: list[tuple[str, str]], body_len: int) -> list[tuple[str, str]]:
    """Make stored headers agree with the stored (decoded, maybe truncated) payload."""
    out: list[tuple[str, str]] = []
    moved: list[tuple[str, str]] = []
    lengths: list[str] = []
    for name, value in headers:
        lower = name.lower()
        if lower == "content-encoding":
            if value.strip().lower() in ("", "identity"):
                continue
            moved.append(("X-Crawler-Content-Encoding", value))
        elif lower == "transfer-encoding":
            moved.append(("X-Crawler-Transfer-Encoding", value))
        elif lower == "content-length":
            lengths.append(value)
        else:
            out.append((name, value))
    if lengths and (len(lengths) > 1 or lengths[0].strip() != str(body_len)):
        moved.extend(("X-Crawler-Content-Length", v) for v in lengths)
    out.extend(moved)
    out.append(("Content-Length", str(body_len)))
    return out


# --------------------------------------------------------------------------- writer
@dataclass(frozen=True)
class WarcLocation:
    warc_file: str       # file name (no directory)
    offset: int          # byte offset of the record's gzip member in the file
    length: int          # compressed length of that member
    record_id: str       # WARC-Record-ID of the response/revisit record
    payload_digest: str | None  # "sha1:BASE32..." as warcio computes it


class WarcWriter:
    """Writes rolled, per-record-gzipped WARC/1.1 files into ``store``: a local directory (a
    str, or a LocalWarcStore) or an S3WarcStore.

    Files are opened lazily: a writer that writes nothing creates no file. Use as a context
    manager or call ``close()``; if the ``with`` block raises, the current file is aborted, since
    the task's results that would point into it are not committed: a local file is closed but left
    under its ``.open`` name (exactly what a hard crash leaves), an S3 upload is aborted.
    """

    def __init__(self, store: str | os.PathLike | WarcStore, prefix: str, max_file_bytes: int, info: dict[str, str],
                 gzip_level: int = 6):
        if not prefix or "/" in prefix or os.sep in prefix:
            raise ValueError(f"bad WARC file prefix: {prefix!r}")
        if int(max_file_bytes) <= 0:
            raise ValueError(f"max_file_bytes must be > 0, got {max_file_bytes!r}")
        self.store = LocalWarcStore(os.fspath(store)) if isinstance(store, (str, os.PathLike)) else store
        self.prefix = prefix
        self.max_file_bytes = int(max_file_bytes)
        self.info = dict(info or {})
        self.files: list[str] = []
        self._serial = 0
        self._sink: Any = None  # the current file's sink (see "stores" above)
        self._name: str | None = None
        self._warcinfo_id: str | None = None
        self._closed = False
        self._warc = _WARCWriter(None, gzip=True, warc_version=WARC_VERSION)
        self._warc.gzip_level = int(gzip_level)

    # -- files
    def _open_new(self) -> None:
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        self._name = f"{self.prefix}-{stamp}-{self._serial:05d}{FILE_SUFFIX}"
        self._serial += 1
        self._sink = self.store.open(self._name)
        self._warc.out = self._sink
        fields: dict[str, str] = {
            "software": _software(),
            "format": WARC_FORMAT,
            "conformsTo": WARC_CONFORMS_TO,
        }
        for key, value in self.info.items():
            key = _header_name(key)
            if key and key not in ("format", "conformsTo"):
                fields[key] = _ascii_value(value)
        record = self._warc.create_warcinfo_record(self._name, fields)
        self._warcinfo_id = record.rec_headers.get_header("WARC-Record-ID")
        self._write(record)

    def _finish_current(self, complete: bool = True) -> None:
        """Make the current file appear under its final name (``complete``), or abort it."""
        if self._sink is None:
            return
        sink, name = self._sink, self._name
        self._sink = self._name = self._warcinfo_id = None
        self._warc.out = None
        if not complete:
            sink.abort()
            return
        try:
            sink.finish()
        except BaseException:
            sink.abort()
            raise
        self.files.append(name)

    def _ensure_room(self) -> None:
        if self._closed:
            raise ValueError("WarcWriter is closed")
        if self._sink is not None and self._sink.tell() >= self.max_file_bytes:
            self._finish_current()
        if self._sink is None:
            self._open_new()

    def _write(self, record) -> tuple[int, int]:
        """Write one warcio record as one gzip member; (offset, compressed length)."""
        start = self._append(lambda: self._warc.write_record(record))
        return start, self._sink.tell() - start

    def _append(self, write: Any) -> int:
        """Call ``write()`` to append to the current file, flush, and return the offset it
        started at. On an I/O error the partial write is cut off again so the file stays valid,
        then the error is raised."""
        sink = self._sink
        start = sink.tell()
        try:
            write()
            sink.flush()
        except BaseException:
            try:
                sink.cut(start)
            except Exception:  # cleanup: the original error is re-raised below
                pass
            raise
        return start

    # -- records
    def _base_headers(self, rec_type: str, uri: str, date: str, ip: Any) -> dict[str, str]:
        headers = {"WARC-Type": rec_type, "WARC-Record-ID": self._warc._make_warc_id(),
                   "WARC-Target-URI": uri, "WARC-Date": date}
        if self._warcinfo_id:
            headers["WARC-Warcinfo-ID"] = self._warcinfo_id
        ip_text = _ascii_value(ip, 64).replace(" ", "") if ip else ""
        if ip_text:
            headers["WARC-IP-Address"] = ip_text
        return headers

    def _request_record(self, uri: str, date: str, ip: Any, request_headers: Any,
                        concurrent_to: str):
        path, host = _request_target(uri)
        headers = _clean_headers(request_headers)
        if host and not any(n.lower() == "host" for n, _ in headers):
            headers.insert(0, ("Host", host))
        http_headers = StatusAndHeaders(f"{path} HTTP/1.1", headers, protocol="GET")
        warc_headers = self._base_headers("request", uri, date, ip)
        warc_headers["WARC-Concurrent-To"] = concurrent_to
        return self._warc.create_warc_record(uri, "request", http_headers=http_headers,
                                             warc_headers_dict=warc_headers)

    def write_exchange(self, url: str, request_headers: list[tuple[str, str]], status: int, reason: str,
                       response_headers: list[tuple[str, str]], body: bytes, fetched_at: float,
                       ip: str | None = None, truncated: str | None = None,
                       tls: tuple[str, str] | None = None) -> WarcLocation:
        """A request record then a response record (the request's WARC-Concurrent-To names the
        response); returns the response record's location. ``tls``: (protocol, cipher suite) of an
        https connection, written as WARC-Protocol (e.g. ``tls/1.3``) and WARC-Cipher-Suite, the
        fields the WARC 1.1 annotations proposal (iipc/warc-specifications) adds for them.

        Every fetched page comes through here, so the two records are serialised directly:
        what warcio's writer would write for them, without its record objects (~100 instead of
        ~150 us per exchange of a 1 KB page). warcio reads and checks them (tests/test_warc.py
        runs `warcio check`)."""
        uri = _clean_uri(url)
        date = _warc_date(fetched_at)
        if body is None:
            body = b""
        elif not isinstance(body, bytes):
            body = body.encode("utf-8", "replace") if isinstance(body, str) else bytes(body)
        self._ensure_room()

        resp_headers = _adjust_response_headers(_clean_headers(response_headers), len(body))
        http_head = _http_head(f"HTTP/1.1 {_status_line(status, reason)}", resp_headers)
        warc_headers = self._base_headers("response", uri, date, ip)
        resp_id = warc_headers["WARC-Record-ID"]
        if tls:
            protocol, cipher = (_ascii_value(v, 64).replace(" ", "") for v in tls)
            if protocol:
                warc_headers["WARC-Protocol"] = protocol
            if cipher:
                warc_headers["WARC-Cipher-Suite"] = cipher
        trunc = _TOKEN_DROP.sub("", _to_text(truncated))[:64] if truncated else ""
        if trunc:
            warc_headers["WARC-Truncated"] = trunc
        payload_digest = None
        if _is_http(uri):  # see _WARCWriter: readers take a non-http record's whole block as payload
            payload_digest = warc_headers["WARC-Payload-Digest"] = _sha1(body)
        response = self._member(warc_headers, "application/http; msgtype=response", http_head, body)

        path, host = _request_target(uri)
        headers = _clean_headers(request_headers)
        if host and not any(n.lower() == "host" for n, _ in headers):
            headers.insert(0, ("Host", host))
        req_headers = self._base_headers("request", uri, date, ip)
        req_headers["WARC-Concurrent-To"] = resp_id
        request = self._member(req_headers, "application/http; msgtype=request",
                               _http_head(f"GET {path} HTTP/1.1", headers), b"")

        data = request + response
        start = self._append(lambda: self._sink.write(data))
        return WarcLocation(self._name, start + len(request), len(response), resp_id, payload_digest)

    def _member(self, warc_headers: dict[str, str], content_type: str, http_head: bytes, payload: bytes) -> bytes:
        """One record as one gzip member: the WARC/1.1 header block (``warc_headers``, then the
        block digest, content type and length), the HTTP head and payload, the two CRLFs."""
        block_digest = _sha1(http_head, payload)
        lines = [WARC_VERSION]
        lines.extend(f"{name}: {value}" for name, value in warc_headers.items())
        lines.append(f"WARC-Block-Digest: {block_digest}")
        lines.append(f"Content-Type: {content_type}")
        lines.append(f"Content-Length: {len(http_head) + len(payload)}")
        lines.append("\r\n")
        compressor = _gzip_compressor(self._warc.gzip_level)
        parts = [compressor.compress("\r\n".join(lines).encode("ascii", "replace")),
                 compressor.compress(http_head), compressor.compress(payload),
                 compressor.compress(b"\r\n\r\n"), compressor.flush()]
        return b"".join(parts)

    def write_revisit(self, url: str, request_headers, status: int, reason: str, response_headers,
                      fetched_at: float, refers_to_record_id: str | None, refers_to_date: float | None,
                      refers_to_uri: str | None, payload_digest: str | None) -> WarcLocation:
        """A request record then a revisit record (profile server-not-modified, for a 304) with
        WARC-Refers-To / -Refers-To-Date / -Refers-To-Target-URI when known; returns the
        revisit record's location."""
        uri = _clean_uri(url)
        date = _warc_date(fetched_at)
        self._ensure_room()

        http_headers = StatusAndHeaders(_status_line(status, reason), _clean_headers(response_headers),
                                        protocol="HTTP/1.1")
        warc_headers = self._base_headers("revisit", uri, date, None)
        revisit = self._warc.create_warc_record(uri, "revisit", http_headers=http_headers,
                                                warc_headers_dict=warc_headers)
        rec = revisit.rec_headers
        rec.add_header("WARC-Profile", REVISIT_PROFILE_NOT_MODIFIED)
        ref_id = _record_id(refers_to_record_id) if refers_to_record_id else None
        if ref_id:
            rec.add_header("WARC-Refers-To", ref_id)
        if refers_to_date is not None:
            rec.add_header("WARC-Refers-To-Date", _warc_date(refers_to_date))
        ref_uri = _clean_uri(refers_to_uri) if refers_to_uri else ""
        if ref_uri:
            rec.add_header("WARC-Refers-To-Target-URI", ref_uri)
        digest = _ascii_value(payload_digest, 256).replace(" ", "") if payload_digest else ""
        if digest:
            rec.add_header("WARC-Payload-Digest", digest)
        rev_id = rec.get_header("WARC-Record-ID")
        request = self._request_record(uri, date, None, request_headers, rev_id)

        self._write(request)
        offset, length = self._write(revisit)
        return WarcLocation(self._name, offset, length, rev_id, digest or None)

    def close(self) -> list[str]:
        """Finish the current file (it appears under its final name); return all final names."""
        if not self._closed:
            self._closed = True
            self._finish_current()
        return list(self.files)

    def abort(self) -> None:
        """Close without finalising: a local file stays under its ``.open`` name, an S3 upload is
        aborted (best effort: if that fails too, sweep_unfinished aborts it later)."""
        if not self._closed:
            self._closed = True
            self._finish_current(complete=False)

    def __enter__(self) -> "WarcWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
