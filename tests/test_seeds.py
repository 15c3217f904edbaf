from crawl.seeds import parse_seed_lines


def test_parse_seed_lines():
    lines = ["# comment", "", "http://A.com/", "http://a.com:80/", "  https://b.com/x  extra=meta",
             "not-a-url", "ftp://c.com/", "\ufeffhttp://d.com"]
    parsed = parse_seed_lines(lines)
    assert parsed.urls == ["http://a.com/", "https://b.com/x", "http://d.com/"]
    assert parsed.duplicates == 1
    assert [(n, reason.split()[0]) for n, _, reason in parsed.rejected] == [(6, "unsupported"), (7, "unsupported")]
