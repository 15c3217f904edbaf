"""WHATWG URL parsing, through ada (the ``ada-url`` package: the URL parser of Node.js, fuzzed in
OSS-Fuzz). crawl.net.urls parses and resolves every URL here, then applies the crawler's own
rules to the parts; this module only turns ada's answer into those parts.

We call ada's C API (``ada_c.h``) through the cffi module that ``ada-url`` builds
(``ada_url._ada_wrapper``) rather than through its Python classes: ``ada_url.parse_url`` builds a
dict and two enums per call and costs about 14 us a URL on this machine, ``ada_url.URL`` with
the five attributes read about 23 us; one parse here, base included, about 2-4 us (measured
2026-12-02, 2 cores; see BENCHMARKS.md "Link pipeline"). That module is not ada-url's documented
interface, so setup.py pins ada-url to one version, and tests/test_whatwg.py holds ``parse`` to
``ada_url.URL`` on a corpus of URLs: an upgrade that changes the binding fails there, loudly.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ada_url._ada_wrapper import ffi, lib

_OMITTED = 0xFFFFFFFF  # ada::url_components::omitted: the component is absent
# ada_url_components (ada_c.h): protocol_end, username_end, host_start, host_end, port,
# pathname_start, search_start, hash_start, each a uint32 in native order
_COMPONENTS = struct.Struct("=8I")
# bound once: an attribute of the cffi lib costs a lookup per use, as much as the parse itself
_parse, _parse_with_base, _get_href, _get_components, _free = (
    lib.ada_parse, lib.ada_parse_with_base, lib.ada_get_href, lib.ada_get_components, lib.ada_free)
_unpack, _buffer = ffi.unpack, ffi.buffer
_unpack_components = _COMPONENTS.unpack
if ffi.sizeof("ada_url_components") != _COMPONENTS.size:  # the binding changed under the pin
    raise ImportError(f"ada-url's ada_url_components is {ffi.sizeof('ada_url_components')} bytes, "
                      f"crawl/net/whatwg.py reads {_COMPONENTS.size}: install the ada-url version setup.py pins")


class Parts(NamedTuple):
    """A parsed absolute URL, as the WHATWG URL Standard serialises it: ``scheme`` lower-case
    without ":"; ``host`` a lower-case ASCII domain (IDNA/UTS 46 applied, percent-escapes
    decoded), a dotted-quad IPv4 address or a bracketed IPv6 one, "" for a URL without a host;
    ``port`` None when absent or the scheme's default; ``path`` percent-encoded with dot-segments
    removed; ``query`` None when there is no "?" (else without it). The userinfo and the fragment
    are not kept (the crawler drops both). (ada's host type is not passed on: ada 4.0.0 reports
    a domain for a URL resolved against a base with an IP host; the text tells them apart.)"""
    scheme: str
    host: str
    port: int | None
    path: str
    query: str | None


def parse(ref: bytes, base: bytes | None = None) -> Parts | None:
    """``ref`` (UTF-8) parsed as a URL, resolved against ``base`` (UTF-8, itself a valid absolute
    URL) if given; None if the WHATWG parser fails on it (bad host, port out of range, a
    relative reference without a base ...). crawl.net.urls says why."""
    handle = _parse(ref, len(ref)) if base is None else _parse_with_base(ref, len(ref), base, len(base))
    try:
        raw = _get_href(handle)
        if not raw.length:  # what ada_get_href gives for a failed parse (a URL is never empty)
            return None
        # the serialisation of a URL is ASCII: non-ASCII is percent-encoded or punycoded
        href = _unpack(raw.data, raw.length).decode("ascii")
        # the components, a struct of eight uint32 inside the parsed URL: copied out in one call
        # (reading seven fields one by one through cffi costs more than the parse)
        components = _unpack_components(_buffer(_get_components(handle), _COMPONENTS.size))
    finally:
        _free(handle)
    #   https://user:pass@example.com:1234/foo/bar?baz#quux
    #         |     |    |          | ^^^^|       |   |
    #         |     |    |          | |   |       |   `-- hash_start
    #         |     |    |          | |   |       `------ search_start
    #         |     |    |          | |   `-------------- pathname_start
    #         |     |    |          | `------------------ port
    #         |     |    |          `-------------------- host_end
    #         |     |    `------------------------------- host_start (at "@" after a userinfo)
    #         |     `------------------------------------ username_end
    #         `------------------------------------------ protocol_end (after ":")
    protocol_end, _username_end, host_start, host_end, port, pathname_start, search_start, hash_start = components
    end = len(href) if hash_start == _OMITTED else hash_start
    if search_start == _OMITTED:
        query = None
        path_end = end
    else:
        query = href[search_start + 1:end]
        path_end = search_start
    host = href[host_start:host_end]
    if host[:1] == "@":
        host = host[1:]
    return Parts(href[:protocol_end - 1], host, None if port == _OMITTED else port,
                 href[pathname_start:path_end], query)


def can_parse(url: bytes) -> bool:
    """Whether ``url`` (UTF-8) is a valid absolute URL (one that can serve as a base)."""
    return bool(lib.ada_can_parse(url, len(url)))


def version() -> str:
    """ada's version, e.g. "4.0.0" (the C library's, which the ada-url package bundles)."""
    v = lib.ada_get_version_components()
    return f"{v.major}.{v.minor}.{v.revision}"
