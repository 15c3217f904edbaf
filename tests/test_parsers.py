"""The parser registry (crawl/parse/registry.py): built-in parsers by media type, parse.disabled,
and a parser package installed through the ``deltacrawl.parsers`` entry point group: a
dist-info directory and a module on sys.path (a tmp_path), found by importlib.metadata, listed
by `deltacrawl parsers`, chosen by priority and used by the fetcher."""
from __future__ import annotations

import pathlib
import sys
import textwrap

import pytest

from crawl.config import ConfigError, build_config
from crawl.crawldb.status import FetchStatus as FS
from crawl.fetch.fetcher import fetch_partition
from crawl.parse.page import ParseOptions, parse_page
from crawl.parse.registry import BUILT_IN, ParserRegistry, describe, installed_parsers, parse_document, registry_for
from tests.fixed_web import FixedWeb
from tests.test_fetcher import cfg as fetch_cfg, rows_for

PAGE = b"<html><head><title>T</title></head><body><a href='/a'>a</a> words here</body></html>"
URL = "http://127.0.0.1:8000/"
REPO = pathlib.Path(__file__).resolve().parent.parent

PLUGIN = '''
from crawl.dedup.fingerprint import fingerprint
from crawl.parse.page import ParseResult, decode_html
from crawl.parse.registry import ParserSpec


def parse_text(body, url, content_type_header, options, x_robots_tag=None):
    text, charset = decode_html(body, content_type_header)
    fp = fingerprint(text)
    links = [url.rsplit("/", 1)[0] + "/" + w[5:] for w in text.split() if w.startswith("link:")]
    first = next((line.strip() for line in text.splitlines() if line.strip()), None)
    return ParseResult(links[:options.max_outlinks], charset, "text: " + (first or ""), None,
                       text_hash=fp.text_hash, simhash=fp.simhash if fp.words else None, signature=fp.signature)


def parse_html_loudly(body, url, content_type_header, options, x_robots_tag=None):
    raise RuntimeError("this plugin parser always fails")


TEXT = ParserSpec("plaintext", ("text/plain",), parse_text)


class Loud:  # not a ParserSpec: any object with media_types, parse and priority will do
    media_types = ["text/html"]
    priority = 5
    parse = staticmethod(parse_html_loudly)


LOUD = Loud()
'''


def test_built_in_parsers_by_type():
    reg = ParserRegistry(BUILT_IN)
    assert reg.for_type("text/html").name == "html" and reg.for_type("application/xhtml+xml").name == "html"
    assert reg.for_type("APPLICATION/PDF").name == "pdf"
    assert reg.for_type("image/png") is None
    assert ParserRegistry(BUILT_IN, disabled=["pdf"]).for_type("application/pdf") is None


def test_parse_document_dispatches_by_type_and_html_is_unchanged():
    assert parse_document(PAGE, URL, "text/html", ParseOptions(10)) == parse_page(PAGE, URL, "text/html", 10)
    assert parse_document(PAGE, URL, None, 10) == parse_page(PAGE, URL, None, 10)  # sniffed as HTML
    assert parse_document(PAGE, URL, "image/png", 10).error == "parse_error: no parser for image/png"
    off = ParseOptions(10, disabled=("html",))
    assert parse_document(PAGE, URL, "text/html", off).error == "parse_error: no parser for text/html"
    only_pdf = ParseOptions(10, content_types=("application/pdf",))
    assert parse_document(PAGE, URL, "text/html", only_pdf).error == "parse_error: no parser for text/html"


def test_options_from_config():
    cfg = build_config(overrides={"parse.disabled": ["pdf"], "fetch.content_types": ["Text/HTML"],
                                  "parse.pdf_max_pages": 7, "parse.pdf_max_stream_mb": 3})
    options = ParseOptions.from_config(cfg)
    assert options.disabled == ("pdf",) and options.content_types == ("text/html",)
    assert options.pdf_max_pages == 7 and options.pdf_max_stream_bytes == 3 * 2**20


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A parser package "deltacrawl-plaintext" installed on sys.path: its module and its
    dist-info (METADATA and entry_points.txt), as pip would leave them; plus a broken entry point."""
    (tmp_path / "dc_plaintext.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    info = tmp_path / "deltacrawl_plaintext-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deltacrawl-plaintext\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[deltacrawl.parsers]\nplaintext = dc_plaintext:TEXT\nloud = dc_plaintext:LOUD\n"
        "missing = dc_plaintext_gone:PARSER\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed_parsers(refresh=True)
    try:
        yield tmp_path
    finally:
        monkeypatch.undo()
        sys.modules.pop("dc_plaintext", None)
        installed_parsers(refresh=True)


def test_an_installed_parser_is_found_listed_and_used(plugin):
    parsers, broken = installed_parsers()
    by_name = {p.name: p for p in parsers}
    assert by_name["plaintext"].media_types == ("text/plain",) and by_name["plaintext"].origin == "deltacrawl-plaintext"
    assert by_name["loud"].priority == 5
    assert [name for name, _ in broken] == ["missing"]  # reported, and the others still load

    cfg = build_config(overrides={"fetch.content_types": ["text/html", "application/pdf", "text/plain"]})
    lines = describe(cfg)
    assert any(line.startswith("plaintext\tpriority 0\tdeltacrawl-plaintext\ton\ttext/plain") for line in lines)
    assert any(line.startswith("missing\tBROKEN\tModuleNotFoundError") for line in lines)

    options = ParseOptions.from_config(cfg)
    result = parse_document(b"Hello there\nlink:next.txt\n", "http://127.0.0.1:8000/dir/a.txt", "text/plain", options)
    assert result.error is None and result.title == "text: Hello there"
    assert result.outlinks == ["http://127.0.0.1:8000/dir/next.txt"]
    # the plugin of priority 5 wins text/html over the built-in; its exception is a parse error
    assert registry_for(options).for_type("text/html").name == "loud"
    assert parse_document(PAGE, URL, "text/html", options).error == (
        "parse_error: parser loud: RuntimeError: this plugin parser always fails")
    # ... until config turns it off
    off = ParseOptions.from_config(build_config(overrides={"parse.disabled": ["loud"]}))
    assert parse_document(PAGE, URL, "text/html", off) == parse_page(PAGE, URL, "text/html", off)
    assert any(line.startswith("loud\tpriority 5\tdeltacrawl-plaintext\toff (parse.disabled)")
               for line in describe(build_config(overrides={"parse.disabled": ["loud"]})))


def test_the_fetcher_uses_an_installed_parser(plugin):
    web = FixedWeb(hosts=1).start()
    try:
        text_url = web.put(0, "/notes.txt", "Field notes\nlink:more.txt\n", "text/plain; charset=utf-8")
        page_url = web.put(0, "/index.html", PAGE.decode(), "text/html")
        cfg = fetch_cfg(fetch__content_types=["text/html", "text/plain"], parse__disabled=["loud"])
        out = fetch_partition(rows_for([text_url, page_url]), cfg)
    finally:
        web.stop()
    got = {r["url"]: r for r in out if r["kind"] == "url"}
    notes = got[text_url]
    assert notes["fetch_status"] == FS.OK and notes["parse_error"] is None
    assert notes["outlinks"] == [web.base(0) + "/more.txt"] and notes["text_hash"] is not None
    assert got[page_url]["parse_error"] is None and got[page_url]["outlinks"] == [web.base(0) + "/a"]


def test_deltacrawl_parsers_lists_them(plugin, capsys):
    from jobs.cli import main
    assert main(["parsers", "--conf", "parse.disabled=[\"pdf\"]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["html\tpriority 0\tbuilt-in\ton\ttext/html, application/xhtml+xml",
                         "pdf\tpriority 0\tbuilt-in\toff (parse.disabled)\tapplication/pdf"]
    assert "plaintext\tpriority 0\tdeltacrawl-plaintext\ton\ttext/plain (not in fetch.content_types)" in lines
    assert any(line.startswith("missing\tBROKEN\t") for line in lines)


def test_an_installed_parser_runs_in_the_guarded_child(plugin):
    # A fresh interpreter with the package on its path, as an installed one is: the parser child
    # (forkserver) imports the plugin by reference and runs it under the pool's limits.
    code = textwrap.dedent('''
        import asyncio
        from crawl.parse.page import ParseOptions
        from crawl.parse.pool import BatchingParser, ParserPool

        async def run():
            options = ParseOptions(10, content_types=("text/plain", "text/html"), disabled=("loud",))
            with BatchingParser(ParserPool(workers=1, time_limit_s=60.0)) as parser:
                return await asyncio.gather(
                    parser.parse(b"In the child\\nlink:b.txt", "http://127.0.0.1:8000/a.txt", "text/plain", options),
                    parser.parse(b"<a href=/x>x</a>", "http://127.0.0.1:8000/", "text/html", options))

        if __name__ == "__main__":
            text, page = asyncio.run(run())
            print(repr((text.title, text.outlinks, text.error, page.outlinks, page.error)))
    ''')
    script = plugin / "run_pool.py"
    script.write_text(code, encoding="utf-8")
    import os
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin), str(REPO)]))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == repr(("text: In the child", ["http://127.0.0.1:8000/b.txt"], None,
                                        ["http://127.0.0.1:8000/x"], None))


@pytest.mark.parametrize("key, value", [("fetch.content_types", ["text/html", "pdf"]),
                                        ("fetch.content_types", ["text/html", ""]),
                                        ("parse.disabled", [1]),
                                        ("parse.pdf_max_pages", 0), ("parse.pdf_max_stream_mb", -1),
                                        ("parse.pdf_max_document_mb", 0),
                                        ("fetch.max_pdf_bytes", 0), ("fetch.max_other_body_bytes", -1)])
def test_bad_parser_options_name_their_key(key, value):
    # refused when the config is loaded, before any step starts (one line, exit 2)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_config(overrides={key: value})
