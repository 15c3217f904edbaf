"""Outlink extraction from HTML with selectolax.

Links come from ``a[href]`` and ``area[href]``, resolved against ``<base href>`` when the page
has one (HTML Living Standard, "document base URL"), else against the page URL; each is then
normalised (crawl.urls). Links that are not crawlable http(s) URLs are dropped, duplicates are
removed keeping document order, and at most ``max_outlinks`` are returned.
"""
from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from crawl.urls import InvalidUrl, normalize_url


def extract_outlinks(html: bytes | str, page_url: str, max_outlinks: int) -> list[str]:
    if isinstance(html, bytes):
        html = html.decode("utf-8", "replace")
    try:
        tree = HTMLParser(html)
    except Exception:  # malformed markup is parsed leniently; anything worse yields no links
        return []
    base = page_url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        try:
            base = normalize_url(base_node.attributes.get("href") or "", base=page_url)
        except InvalidUrl:
            base = page_url
    seen: set[str] = set()
    links: list[str] = []
    for node in tree.css("a[href], area[href]"):
        href = node.attributes.get("href")
        if not href:
            continue
        try:
            url = normalize_url(href, base=base)
        except InvalidUrl:
            continue
        if url in seen or url == page_url:
            continue
        seen.add(url)
        links.append(url)
        if len(links) >= max_outlinks:
            break
    return links
