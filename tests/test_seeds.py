import gzip

import pytest

from crawl.crawldb.seeds import SeedFileEncodingError, parse_seed_lines, read_seed_file


def test_parse_seed_lines():
    lines = ["# comment", "", "http://A.com/", "http://a.com:80/", "  https://b.com/x  extra=meta",
             "not-a-url", "ftp://c.com/", "\ufeffhttp://d.com"]
    parsed = parse_seed_lines(lines)
    assert parsed.urls == ["http://a.com/", "https://b.com/x", "http://d.com/"]
    assert parsed.duplicates == 1
    assert [(n, reason.split()[0]) for n, _, reason in parsed.rejected] == [(6, "unsupported"), (7, "unsupported")]


@pytest.mark.parametrize("encoding, words", [("utf-16", "UTF-16 byte-order mark"), ("utf-32", "UTF-32 byte-order mark"),
                                              ("utf-16-le", "UTF-16 without a byte-order mark")])
def test_a_seeds_file_that_is_not_utf8_is_one_message(tmp_path, encoding, words):
    path = tmp_path / "seeds.txt"
    path.write_bytes("http://a.example/\nhttp://b.example/\n".encode(encoding))
    with pytest.raises(SeedFileEncodingError, match=words):
        read_seed_file(str(path))


@pytest.mark.parametrize("data", [
    gzip.compress(b"http://a.example/\n" * 500, mtime=0),  # a compressed seeds file
    bytes(range(256)) * 16,                                 # every byte value, as in random or packed data
    b"\x7fELF\x02\x01\x01" + b"\x00" * 4000,                 # an executable's header: mostly NUL
])
def test_a_binary_seeds_file_is_not_text_not_utf16(tmp_path, data):
    path = tmp_path / "seeds.txt"
    path.write_bytes(data)
    with pytest.raises(SeedFileEncodingError, match="is not a text file") as refused:
        read_seed_file(str(path))
    assert "UTF-16" not in str(refused.value)


def test_a_stray_bad_byte_spoils_only_its_line(tmp_path):
    path = tmp_path / "seeds.txt"
    path.write_bytes(b"http://a.example/\n\x00\x01binary\xff\nhttp://b.example/\n")
    parsed = read_seed_file(str(path))
    assert parsed.urls == ["http://a.example/", "http://b.example/"] and len(parsed.rejected) == 1


def test_seeds_longer_than_links_may_be_are_bad_lines():
    long_path = "a" * 3000
    parsed = parse_seed_lines([f"http://long.example/{long_path}", "http://short.example/"], max_url_length=2048)
    assert parsed.urls == ["http://short.example/"]
    [(number, _text, reason)] = parsed.rejected
    assert number == 1 and reason.startswith("too_long") and "discovery.max_url_length (2048)" in reason
    # without the limit (the library's own use), only crawl.net.urls.MAX_URL_LENGTH applies
    assert len(parse_seed_lines([f"http://long.example/{long_path}"]).urls) == 1
