"""crawl/net/whatwg.py calls ada's C API through the cffi module of the ada-url package, which is
not that package's documented interface: these tests hold its answers to ada_url.URL (the
documented one) on a corpus of URLs, so an upgrade of ada-url that changes the binding fails here
rather than in a crawl."""
from __future__ import annotations

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.net import whatwg

BASES = [None, "http://example.com/a/b/c?q=1#f", "https://user:pw@[::1]:8443/x/", "http://127.0.0.1:81/",
         "https://xn--bcher-kva.example/d/"]
REFS = ["http://example.com", "HTTPS://Example.COM:443/a/../b?c=d#e", "http://u:p@a.com:8080/x?y",
        "http://@a.com/", "http://:p@a.com/", "//cdn.example.com/x.js", "../up?x", "?only", "#frag", "",
        "http://[2001:DB8::1]:80/p", "http://0x7f.1/", "http://Bücher.example/ä?ö#ü", "http://a.com/%zz%41",
        "http://a.com:99999/", "http://exa mple.com/", "mailto:x@a.com", "javascript:void(0)", "http:g",
        "http://a.com/a\\b", "https://a.com/?", "https://a.com/#", "http://a.com/" + "x" * 3000]


def _reference(ref: str, base: str | None) -> whatwg.Parts | None:
    try:
        url = ada_url.URL(ref, base) if base is not None else ada_url.URL(ref)
    except ValueError:
        return None
    port = int(url.port) if url.port else None
    return whatwg.Parts(url.protocol[:-1], url.hostname, port, url.pathname,
                        url.search[1:] if url.search else ("" if url.href.split("#")[0].endswith("?") else None))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("ref", REFS)
def test_parse_agrees_with_ada_url(ref, base):
    got = whatwg.parse(ref.encode(), base.encode() if base else None)
    assert got == _reference(ref, base)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.lists(st.sampled_from(list("aZ09.-_:/?#@[]%\\ ü") + ["http://", "https://", "//", "../"]),
                max_size=20).map("".join),
       st.sampled_from(BASES))
def test_parse_agrees_with_ada_url_on_generated_input(ref, base):
    assert whatwg.parse(ref.encode(), base.encode() if base else None) == _reference(ref, base)


def test_can_parse_and_version():
    assert whatwg.can_parse(b"http://a.com/") and not whatwg.can_parse(b"/relative")
    assert whatwg.version().count(".") == 2
