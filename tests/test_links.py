from crawl.links import extract_outlinks

PAGE = "http://a.com/dir/page.html"


def test_relative_absolute_and_area_links():
    html = """<html><body><a href="x.html">x</a><a href="/root">r</a><a href="../up#f">u</a>
    <a href="http://B.com:80/">b</a><map><area href="area.html"></map><a>no href</a></body></html>"""
    assert extract_outlinks(html, PAGE, 100) == [
        "http://a.com/dir/x.html", "http://a.com/root", "http://a.com/up", "http://b.com/", "http://a.com/dir/area.html"]


def test_base_href_is_used():
    html = '<html><head><base href="http://c.com/base/"></head><body><a href="y">y</a></body></html>'
    assert extract_outlinks(html, PAGE, 100) == ["http://c.com/base/y"]


def test_non_http_schemes_dropped_and_duplicates_removed():
    html = ('<a href="mailto:a@b">m</a><a href="javascript:void(0)">j</a><a href="tel:1">t</a>'
            '<a href="data:text/html,hi">d</a><a href="x">x</a><a href="./x#y">x2</a><a href="#top">self</a>')
    assert extract_outlinks(html, PAGE, 100) == ["http://a.com/dir/x"]


def test_cap_on_outlinks():
    html = "".join(f'<a href="/p{i}">p</a>' for i in range(1000))
    links = extract_outlinks(html, PAGE, 10)
    assert links == [f"http://a.com/p{i}" for i in range(10)]


def test_malformed_html_and_bytes():
    assert extract_outlinks(b"<a href='ok'><div><<<>>><a href=\"http://[bad/\">", PAGE, 10) == ["http://a.com/dir/ok"]
    assert extract_outlinks(b"\xff\xfe\x00garbage", PAGE, 10) == []
    assert extract_outlinks("", PAGE, 10) == []
