"""crawl/fetch/warc.py: WARC/1.1 writing (naming, rolling, per-record gzip, sanitising) and reading."""
import gzip
import json
import os
import re
import subprocess
import sys
import zlib

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawl.fetch.warc import REVISIT_PROFILE_NOT_MODIFIED, WarcLocation, WarcWriter
from crawl.fetch.warc_read import read_record

PREFIX = "CC-SEG-20250101000000-part-00007"
NAME_RX = re.compile(re.escape(PREFIX) + r"-(\d{14})-(\d{5})\.warc\.gz$")
INFO = {"operator": "test@example.org", "robots": "obey", "http-header-user-agent": "deltacrawl-test/0.1"}
REQ = [("User-Agent", "deltacrawl-test/0.1"), ("Accept", "*/*")]
T0 = 1_700_000_000.25


def _writer(tmp_path, max_bytes=1 << 30, info=INFO):
    return WarcWriter(str(tmp_path), PREFIX, max_bytes, info)


def _records(path):
    """[(offset, warc headers, http headers, content bytes)] for every record of a file."""
    out = []
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for rec in it:
            content = rec.content_stream().read()
            out.append((it.get_record_offset(), rec.rec_headers, rec.http_headers, content))
    return out


def _warcio(*args):
    return subprocess.run([sys.executable, "-m", "warcio.cli", *args], capture_output=True, text=True)


def _assert_valid(path):
    check = _warcio("check", "-v", path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest failed" not in check.stdout
    index = _warcio("index", "-f", "offset,length,warc-type,warc-target-uri,http:status", path)
    assert index.returncode == 0, index.stderr
    rows = [json.loads(line) for line in index.stdout.splitlines()]
    assert rows and rows[0]["warc-type"] == "warcinfo"
    return rows


def test_naming_warcinfo_and_open_files(tmp_path):
    with _writer(tmp_path) as w:
        loc = w.write_exchange("http://example.com/", REQ, 200, "OK",
                               [("Content-Type", "text/html")], b"<html>hi</html>", T0, ip="10.0.0.1")
        assert os.listdir(tmp_path) == [loc.warc_file + ".open"]
        assert w.files == []
    assert isinstance(loc, WarcLocation)
    assert NAME_RX.match(loc.warc_file) and NAME_RX.match(loc.warc_file).group(2) == "00000"
    assert w.files == [loc.warc_file] == w.close()        # close is idempotent
    assert os.listdir(tmp_path) == [loc.warc_file]
    path = str(tmp_path / loc.warc_file)
    rows = _assert_valid(path)
    assert [r["warc-type"] for r in rows] == ["warcinfo", "request", "response"]
    assert int(rows[2]["offset"]) == loc.offset and int(rows[2]["length"]) == loc.length

    info = read_record(path, 0)
    assert info["warc_type"] == "warcinfo"
    fields = dict(line.split(": ", 1) for line in info["payload"].decode().splitlines() if line)
    assert fields["software"].startswith("deltacrawl/")
    assert fields["format"] == "WARC File Format 1.1"
    assert fields["conformsTo"].startswith("https://iipc.github.io/warc-specifications/")
    for key, value in INFO.items():
        assert fields[key] == value
    warcinfo_headers = _records(path)[0][1]
    assert warcinfo_headers.protocol == "WARC/1.1"
    assert warcinfo_headers.get_header("WARC-Filename") == loc.warc_file


def test_no_records_no_file(tmp_path):
    with _writer(tmp_path) as w:
        pass
    assert w.files == [] and os.listdir(tmp_path) == []


def test_rolling_at_max_file_bytes(tmp_path):
    max_bytes = 6000
    locs = []
    with _writer(tmp_path, max_bytes) as w:
        for i in range(12):
            body = os.urandom(1500)                     # incompressible: ~1.6 KB per exchange
            locs.append((i, body, w.write_exchange(f"http://example.com/p{i}", REQ, 200, "OK",
                                                   [("Content-Type", "application/octet-stream")],
                                                   body, T0 + i)))
    files = w.files
    assert len(files) >= 3
    assert sorted(os.listdir(tmp_path)) == sorted(files)   # no .open left
    serials = [int(NAME_RX.match(f).group(2)) for f in files]
    assert serials == list(range(len(files)))
    sizes = [os.path.getsize(tmp_path / f) for f in files]
    biggest_exchange = 2 * 1024 + 1500
    for size in sizes[:-1]:                                 # rolled only once the limit was reached,
        assert max_bytes <= size < max_bytes + biggest_exchange   # then right away
    assert {loc.warc_file for _, _, loc in locs} == set(files)
    for f in files:
        rows = _assert_valid(str(tmp_path / f))
        assert read_record(str(tmp_path / f), 0)["warc_type"] == "warcinfo"
        assert [r["warc-type"] for r in rows[1:]] == ["request", "response"] * ((len(rows) - 1) // 2)
    for i, body, loc in locs:
        rec = read_record(str(tmp_path / loc.warc_file), loc.offset)
        assert rec["target_uri"] == f"http://example.com/p{i}" and rec["payload"] == body


def test_read_record_round_trip_and_gzip_members(tmp_path):
    cases = [
        ("http://example.com/empty", 204, "No Content", b""),
        ("https://example.com/a?x=1&y=2", 200, "OK", b"hello world\r\n\r\n"),
        ("http://example.com/missing", 404, "Not Found", b"<h1>nope</h1>"),
        ("http://example.com/big", 200, "OK", os.urandom(10 << 20)),   # the body limit, 10 MiB
        ("http://example.com/bin", 200, "OK", bytes(range(256)) * 64),
    ]
    with _writer(tmp_path) as w:
        locs = [w.write_exchange(url, REQ, status, reason, [("Content-Type", "x/y")], body, T0)
                for url, status, reason, body in cases]
    path = str(tmp_path / locs[0].warc_file)
    _assert_valid(path)
    raw = open(path, "rb").read()
    for (url, status, _, body), loc in zip(cases, locs):
        rec = read_record(path, loc.offset)
        assert (rec["warc_type"], rec["target_uri"], rec["http_status"]) == ("response", url, status)
        assert rec["payload"] == body
        assert rec["record_id"] == loc.record_id
        assert rec["warc_date"] == "2023-11-14T22:13:20.250000Z"
        assert dict(rec["http_headers"])["Content-Length"] == str(len(body))
        assert loc.payload_digest and loc.payload_digest.startswith("sha1:")
        # [offset, offset+length) is exactly one complete gzip member
        d = zlib.decompressobj(wbits=31)
        one = d.decompress(raw[loc.offset:loc.offset + loc.length])
        assert d.eof and d.unused_data == b"" and one.startswith(b"WARC/1.1\r\n")
    with pytest.raises(ValueError):
        read_record(path, locs[1].offset + 3)


def test_request_and_response_linked(tmp_path):
    with _writer(tmp_path) as w:
        loc = w.write_exchange("http://example.com/x", REQ, 200, "OK", [], b"x", T0, ip="192.0.2.1")
    recs = _records(str(tmp_path / loc.warc_file))
    (_, req, req_http, _), (resp_off, resp, _, _) = recs[1], recs[2]
    assert req.get_header("WARC-Type") == "request" and resp.get_header("WARC-Type") == "response"
    assert resp_off == loc.offset and resp.get_header("WARC-Record-ID") == loc.record_id
    assert req.get_header("WARC-Concurrent-To") == loc.record_id
    assert req.get_header("WARC-Target-URI") == resp.get_header("WARC-Target-URI") == "http://example.com/x"
    assert req.get_header("WARC-Date") == resp.get_header("WARC-Date")
    assert resp.get_header("WARC-IP-Address") == "192.0.2.1"
    assert resp.get_header("WARC-Payload-Digest") == loc.payload_digest
    assert req_http.protocol == "GET" and req_http.statusline == "/x HTTP/1.1"
    assert req_http.get_header("Host") == "example.com"
    assert req_http.get_header("User-Agent") == "deltacrawl-test/0.1"
    warcinfo_id = recs[0][1].get_header("WARC-Record-ID")
    assert req.get_header("WARC-Warcinfo-ID") == resp.get_header("WARC-Warcinfo-ID") == warcinfo_id


def test_revisit(tmp_path):
    with _writer(tmp_path) as w:
        orig = w.write_exchange("http://example.com/r", REQ, 200, "OK", [("ETag", '"v1"')], b"body", T0)
        rev = w.write_revisit("http://example.com/r", REQ + [("If-None-Match", '"v1"')], 304, "Not Modified",
                              [("ETag", '"v1"')], T0 + 86400, orig.record_id, T0, "http://example.com/r",
                              orig.payload_digest)
        bare = w.write_revisit("http://example.com/s", REQ, 304, "", [], T0 + 10, None, None, None, None)
    path = str(tmp_path / rev.warc_file)
    _assert_valid(path)
    by_off = {off: (h, http) for off, h, http, _ in _records(path)}
    h, http_headers = by_off[rev.offset]
    assert h.get_header("WARC-Type") == "revisit"
    assert h.get_header("WARC-Record-ID") == rev.record_id
    assert h.get_header("WARC-Profile") == REVISIT_PROFILE_NOT_MODIFIED
    assert h.get_header("WARC-Refers-To") == orig.record_id
    assert h.get_header("WARC-Refers-To-Date") == "2023-11-14T22:13:20.250000Z"
    assert h.get_header("WARC-Refers-To-Target-URI") == "http://example.com/r"
    assert h.get_header("WARC-Payload-Digest") == orig.payload_digest == rev.payload_digest
    assert http_headers.get_statuscode() == "304"
    requests = [hh for hh, _ in by_off.values() if hh.get_header("WARC-Type") == "request"]
    assert any(r.get_header("WARC-Concurrent-To") == rev.record_id for r in requests)
    rec = read_record(path, rev.offset)
    assert (rec["warc_type"], rec["http_status"], rec["payload"]) == ("revisit", 304, b"")

    h, _ = by_off[bare.offset]
    assert h.get_header("WARC-Profile") == REVISIT_PROFILE_NOT_MODIFIED
    for name in ("WARC-Refers-To", "WARC-Refers-To-Date", "WARC-Refers-To-Target-URI", "WARC-Payload-Digest"):
        assert h.get_header(name) is None
    assert bare.payload_digest is None


def test_truncated(tmp_path):
    with _writer(tmp_path) as w:
        cut = w.write_exchange("http://example.com/t", REQ, 200, "OK", [("Content-Length", "999999")],
                               b"a" * 100, T0, truncated="length")
        whole = w.write_exchange("http://example.com/u", REQ, 200, "OK", [], b"b", T0)
    path = str(tmp_path / cut.warc_file)
    _assert_valid(path)
    by_off = {off: (h, http) for off, h, http, _ in _records(path)}
    h, http_headers = by_off[cut.offset]
    assert h.get_header("WARC-Truncated") == "length"
    assert http_headers.get_header("Content-Length") == "100"
    assert http_headers.get_header("X-Crawler-Content-Length") == "999999"
    assert by_off[whole.offset][0].get_header("WARC-Truncated") is None


def test_weird_inputs_do_not_crash(tmp_path):
    weird = [
        ("X-Unicode", "caf\u00e9 \u2603 \U0001F600"),
        ("X-Control", "a\r\nInjected: yes\x00\x07\x1b[31m"),
        ("X-Surrogate", b"\xff\xfe latin".decode("utf-8", "surrogateescape")),
        ("X-Lone-Surrogate", "a\ud800b"),
        (b"X-Bytes", b"\xe9t\xe9\r\n"),
        ("Bad Name: with colon", "v"),
        ("", "empty name"),
        ("X-None", None),
        ("X-Int", 42),
        ("Set-Cookie", "a=b; Path=/; Domain=\u00fc.example"),
        ("only-one-element",),
        ("X-Long", "z" * 100_000),
    ]
    with _writer(tmp_path, info={"operator": "op\r\nx\u00e9", "bad key:": "v", "empty": ""}) as w:
        locs = [
            w.write_exchange("http://example.com/a path/with spaces?q=a b#frag", weird, 200, "OK\r\nX: y",
                             weird, b"x", T0, ip=" 10.0.0.1\n", truncated="length\r\n"),
            w.write_exchange("http://ex\u00e4mple.com/\u00fcber?\u00e7=1", None, 200, "\u00d6K", None,
                             b"", float("nan"), ip=None),
            w.write_exchange("not a url at all", [], 999, None, [], b"\x00" * 10, -1e30),
            w.write_exchange("", [], "abc", "", [], None, None),
            w.write_exchange("http://[::1/broken", [], 200, "OK", {"X-Dict": "v\n"}, bytearray(b"ba"), T0),
            w.write_revisit("http://example.com/ r\u00e9v", weird, 304, "\u00e9", weird, T0,
                            "urn:uuid:not-bracketed", float("inf"), "http://example.com/ r\u00e9v", "sha1:\r\nX"),
        ]
    for f in w.files:
        _assert_valid(str(tmp_path / f))
    path = str(tmp_path / locs[0].warc_file)
    rec = read_record(path, locs[0].offset)
    assert " " not in rec["target_uri"] and rec["payload"] == b"x"
    headers = dict(rec["http_headers"])
    assert "Injected" not in headers
    for name, value in rec["http_headers"]:
        assert value.isascii() and "\r" not in value and "\n" not in value
        assert re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name)
    assert headers["X-Unicode"] == "caf%C3%A9 %E2%98%83 %F0%9F%98%80"
    assert headers["X-Surrogate"] == "%FF%FE latin" and headers["X-Bytes"] == "%E9t%E9"
    assert headers["X-Lone-Surrogate"] == "a?b" and headers["X-Control"] == "a  Injected: yes   [31m"
    assert len(headers["X-Long"]) <= 16384
    assert read_record(path, locs[1].offset)["payload"] == b""
    # a non-http(s) target: readers take the whole block as payload, so no payload digest is written
    odd = read_record(path, locs[2].offset)
    assert odd["warc_type"] == "response" and odd["target_uri"] == "not%20a%20url%20at%20all"
    assert odd["payload"].endswith(b"\r\n\r\n" + b"\x00" * 10) and locs[2].payload_digest is None
    assert read_record(path, locs[4].offset)["payload"] == b"ba"


def test_content_encoding_gzip_stored_decoded(tmp_path):
    body = b"<html>" + b"compressible text " * 500 + b"</html>"
    wire = gzip.compress(body)
    headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip"),
               ("Content-Length", str(len(wire))), ("Vary", "Accept-Encoding")]
    chunked = [("Content-Type", "text/plain"), ("Content-Encoding", "br"), ("Transfer-Encoding", "chunked")]
    with _writer(tmp_path) as w:
        loc = w.write_exchange("http://example.com/gz", REQ + [("Accept-Encoding", "gzip, br")], 200, "OK",
                               headers, body, T0)
        loc2 = w.write_exchange("http://example.com/chunked", REQ, 200, "OK", chunked, b"plain", T0)
    path = str(tmp_path / loc.warc_file)
    _assert_valid(path)
    rec = read_record(path, loc.offset)
    h = dict(rec["http_headers"])
    assert rec["payload"] == body
    assert "Content-Encoding" not in h and "Transfer-Encoding" not in h
    assert h["Content-Length"] == str(len(body))
    assert h["X-Crawler-Content-Encoding"] == "gzip"
    assert h["X-Crawler-Content-Length"] == str(len(wire))
    assert h["Content-Type"] == "text/html; charset=utf-8" and h["Vary"] == "Accept-Encoding"
    h2 = dict(read_record(path, loc2.offset)["http_headers"])
    assert h2["X-Crawler-Transfer-Encoding"] == "chunked" and h2["X-Crawler-Content-Encoding"] == "br"
    assert "Transfer-Encoding" not in h2 and h2["Content-Length"] == "5"
    # a standard reader, decoding as the headers say, gets the same bytes back
    contents = {off: content for off, _, _, content in _records(path)}
    assert contents[loc.offset] == body and contents[loc2.offset] == b"plain"


def test_consistent_content_length_is_kept_as_is(tmp_path):
    with _writer(tmp_path) as w:
        loc = w.write_exchange("http://example.com/", REQ, 200, "OK", [("Content-Length", "3")], b"abc", T0)
    h = read_record(str(tmp_path / loc.warc_file), loc.offset)["http_headers"]
    assert [v for n, v in h if n.lower() == "content-length"] == ["3"]
    assert not any(n.startswith("X-Crawler-") for n, _ in h)


def test_failed_task_leaves_only_open_file(tmp_path):
    with pytest.raises(RuntimeError):
        with _writer(tmp_path) as w:
            loc = w.write_exchange("http://example.com/", REQ, 200, "OK", [], b"x", T0)
            raise RuntimeError("task died")
    assert os.listdir(tmp_path) == [loc.warc_file + ".open"]
    assert w.files == []


def test_bad_config_is_an_error(tmp_path):
    with pytest.raises(ValueError):
        WarcWriter(str(tmp_path), PREFIX, 0, {})
    with pytest.raises(ValueError):
        WarcWriter(str(tmp_path), "a/b", 1000, {})


def test_fast_paths_give_what_the_general_ones_give():
    """_sha1's base32 equals base64.b32encode; a str header value or name takes a fast path,
    the same text as bytes the general one: both must agree."""
    import base64
    import hashlib
    import random

    from crawl.fetch import warc
    rng = random.Random(7)
    for _ in range(500):
        data = rng.randbytes(rng.randint(0, 200))
        assert warc._sha1(data) == "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()
    alphabet = [chr(c) for c in range(128)] + ["é", "ü", "\u2028"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        as_bytes = text.encode("utf-8")
        assert warc._ascii_value(text) == warc._ascii_value(as_bytes)
        assert warc._ascii_value(text, 4) == warc._ascii_value(as_bytes, 4)
        assert warc._header_name(text) == warc._header_name(as_bytes)


def test_an_io_error_mid_exchange_leaves_a_valid_file(tmp_path):
    """A write that fails halfway (disk full) is cut off again: the file keeps the records
    before it, takes the next ones, and passes `warcio check`."""
    w = _writer(tmp_path)
    first = w.write_exchange("http://example.com/1", REQ, 200, "OK", [], b"one", T0)
    real = w._sink

    class HalfThenFail:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise OSError("No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    w._sink = HalfThenFail(real)
    with pytest.raises(OSError):
        w.write_exchange("http://example.com/2", REQ, 200, "OK", [], os.urandom(20_000), T0)
    w._sink = real
    third = w.write_exchange("http://example.com/3", REQ, 200, "OK", [], b"three", T0)
    w.close()
    path = str(tmp_path / first.warc_file)
    rows = _assert_valid(path)
    assert [r["warc-target-uri"] for r in rows if r["warc-type"] == "response"] == \
        ["http://example.com/1", "http://example.com/3"]
    assert read_record(path, third.offset)["payload"] == b"three"
