"""The generated sites of DevWeb's normal hosts: addresses, pages, links, robots.txt, sitemaps.

``GeneratedSite`` is a mixin of ``crawl.devweb.web.DevWeb``: it reads the parameters DevWeb's
constructor sets (``seed``, ``hosts``, ``pages_per_host``, ``links_per_page``,
``cross_host_links``, ``crawl_delay_s``, ``sitemaps``, ``port``, ``addresses``, ...) and
computes every page, robots.txt and sitemap without touching the server.

Site layout of each host::

    /robots.txt           depends on robots_kind(i) = KINDS[i % 4]:
                            "disallow"    -> User-agent: * / Disallow: /private/
                            "crawl_delay" -> User-agent: * / Crawl-delay: <s> / Disallow: /private/
                            "missing"     -> 404
                            "allow_all"   -> User-agent: * / Disallow:
    /                     index, links to /p/0.html and a few other pages
    /p/{k}.html           k in 0..pages_per_host-1
    /private/{k}.html     only on hosts whose robots.txt disallows /private/
    anything else         404 (small HTML body)

Page ``/p/k.html`` has ``links_per_page`` internal links. The first ones
follow a fixed pattern: ``k+1``, ``2k+1`` and ``2k+2``, where those pages
exist. The rest go to random pages. Because of this pattern, every page is
reachable from ``/`` in O(log pages_per_host) hops. The hrefs come in mixed
forms (``3.html``, ``./4.html``, ``../p/5.html``, ``/p/6.html``,
``http://<same host>/p/7.html``), and some carry a ``#fragment``. A page also
has ``cross_host_links`` absolute links to pages of other hosts of the same
DevWeb (only when hosts > 1). On hosts that disallow ``/private/``, the index
and every third page also link into ``/private/``, and the private pages link
back to public ones. A crawler that ignores robots.txt therefore shows up in
the request log. Hosts that do not disallow ``/private/`` never link there.

Determinism: all content (titles, text, link targets and href forms) comes
from ``random.Random`` instances seeded with the string
``"{seed}:{host index}:{page kind}:{page number}"``. The global ``random``
module is never used. Cross-host links embed the port, so two DevWeb
instances with the same parameters (seed, hosts, pages_per_host,
links_per_page, cross_host_links) and the same port serve byte-identical
sites. ``outlinks(url)`` computes the links of a page without a running
server. The port must be known: either ``port != 0`` or ``start()`` was
called.

Sitemaps (opt-in, ``sitemaps=True``)
-------------------------------------
Each host then also has ``orphan_pages`` pages ``/o/{k}.html`` that no page links to: only a
sitemap lists them (``sitemap_only_urls()``), so a crawler finds them only by reading sitemaps.
Per robots kind:

    disallow      robots.txt adds ``Sitemap: http://<host>/sitemap_index.xml``: an index of
                  /sitemap-pages.xml.gz (gzip; every /p/ page, with <lastmod>) and
                  /sitemap-orphans.xml (``sitemap_lastmod`` sets the <lastmod>)
    crawl_delay   robots.txt adds ``Sitemap: http://<host>/sitemap-orphans.xml``
    missing       (no robots.txt) /sitemap.xml lists the orphan pages
    allow_all     robots.txt lists no sitemap; /sitemap.xml lists the orphan pages
"""

from __future__ import annotations

import gzip
import random
import re
from urllib.parse import urldefrag, urljoin, urlsplit

KINDS = ("disallow", "crawl_delay", "missing", "allow_all")
# the named test web's domain (RFC 6761 reserves .test for testing: it never resolves elsewhere)
DOMAIN = "devweb.test"


def netloc_of(name: str, port: int, default_port: int) -> str:
    """A URL's host key: ``name:port``, or ``name`` on the scheme's default port."""
    return name if port == default_port else f"{name}:{port}"

_PAGE_RE = re.compile(r"/(p|private|o)/(\d+)\.html")  # fullmatch, as every route

_WORDS = (
    "spark delta crawl frontier batch fetch parse robots politeness host page link "
    "anchor index table merge partition shuffle executor driver stage task queue "
    "latency throughput lake parquet schema column vector lambda graph rank score "
    "river mountain forest cloud ocean harbor lantern meadow pebble willow copper "
    "amber cobalt saffron thistle juniper falcon otter badger heron marten lynx "
    "quietly briskly gently rarely often always never slowly swiftly boldly"
).split()


def _make_vocabulary() -> tuple[str, ...]:
    """4,000 pseudo-words (syllables of _WORDS' words glued together, deterministic): distinct
    pages of the test web share few words, as real pages do, so dedup does not see them as
    near copies of each other."""
    rng = random.Random("devweb-vocabulary")
    syllables = sorted({w[i:i + 3] for w in _WORDS for i in range(0, max(1, len(w) - 2), 2)})
    words: set[str] = set(_WORDS)
    while len(words) < 4000:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))))
    return tuple(sorted(words))


_VOCABULARY = _make_vocabulary()


def host_address(i: int) -> str:
    """Loopback IPv4 address of host ``i``: 127.0.0.2, ..., 127.0.0.254, 127.0.1.2, ..."""
    if i < 0:
        raise ValueError("host index must be >= 0")
    hi, lo = divmod(i, 253)
    if hi > 255:
        raise ValueError(f"too many hosts for 127.0.0.0/8: {i}")
    return f"127.0.{hi}.{lo + 2}"


def _address_index(ip: str) -> int | None:
    """Inverse of host_address(), or None if ``ip`` is not a DevWeb address."""
    parts = ip.split(".")
    if len(parts) != 4 or parts[0] != "127" or parts[1] != "0":
        return None
    try:
        hi, lo = int(parts[2]), int(parts[3])
    except ValueError:
        return None
    if not (0 <= hi <= 255 and 2 <= lo <= 254):
        return None
    return hi * 253 + (lo - 2)


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class GeneratedSite:
    """The normal hosts' content and naming; a mixin of DevWeb (see the module docstring)."""

    # ------------------------------------------------------------------ naming

    @staticmethod
    def host_address(i: int) -> str:
        return host_address(i)

    def host_name(self, i: int) -> str:
        """Host i's host key, as its URLs carry it: ``ip:port``, or in the named test web
        ``site{i}.devweb.test:port`` (the https port; no port when it is 443)."""
        self._need_port()
        if self.named:
            return netloc_of(f"site{i}.{DOMAIN}", self.https_port, 443)
        return f"{self.addresses[i]}:{self.port}"

    def origin(self, i: int) -> str:
        """``scheme://host key`` of host i's pages: https in the named test web, else http."""
        return f"{self.scheme}://{self.host_name(i)}"

    @property
    def scheme(self) -> str:
        return "https" if self.named else "http"

    def robots_kind(self, host_index: int) -> str:
        return KINDS[host_index % 4]

    def has_private(self, host_index: int) -> bool:
        """True if the host disallows /private/ in robots.txt (and so has a private area)."""
        return self.robots_kind(host_index) in ("disallow", "crawl_delay")

    def seed_urls(self) -> list[str]:
        self._need_port()
        return [self.origin(i) + "/" for i in range(self.hosts)]

    def sitemap_only_urls(self) -> list[str]:
        """The pages only a sitemap lists (empty unless ``sitemaps=True``)."""
        self._need_port()
        return [f"{self.origin(i)}/o/{k}.html" for i in range(self.hosts) for k in range(self.orphan_pages)]

    def _sitemap(self, host: int, path: str) -> tuple[bytes, str] | None:
        """(body, content type) of a sitemap file of a normal host, or None."""
        if not self.sitemaps:
            return None
        root = self.origin(host)
        kind = self.robots_kind(host)

        def urlset(paths: list[str], lastmod: bool = False) -> bytes:
            items = "".join(f"<url><loc>{root}{p}</loc>" + (f"<lastmod>{self.sitemap_lastmod}</lastmod>" if lastmod else "")
                            + "</url>" for p in paths)
            return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/'
                    f'sitemap/0.9">{items}</urlset>\n').encode()

        orphans = [f"/o/{k}.html" for k in range(self.orphan_pages)]
        if path == "/sitemap_index.xml" and kind == "disallow":
            items = "".join(f"<sitemap><loc>{root}{p}</loc></sitemap>"
                            for p in ("/sitemap-pages.xml.gz", "/sitemap-orphans.xml"))
            return ('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="http://www.sitemaps.org/'
                    f'schemas/sitemap/0.9">{items}</sitemapindex>\n').encode(), "application/xml"
        if path == "/sitemap-pages.xml.gz" and kind == "disallow":
            body = urlset([f"/p/{k}.html" for k in range(self.pages_per_host)], lastmod=True)
            return gzip.compress(body, mtime=0), "application/gzip"
        if path == "/sitemap-orphans.xml" and kind in ("disallow", "crawl_delay"):
            return urlset(orphans), "application/xml"
        if path == "/sitemap.xml" and kind in ("missing", "allow_all"):
            return urlset(orphans), "application/xml"
        return None

    def _need_port(self) -> None:
        if not self.port:
            raise RuntimeError("DevWeb port unknown: call start() first or pass port != 0")

    def _host_index(self, netloc: str) -> int | None:
        """Host index for a netloc of this DevWeb's normal hosts (its host key: ``ip:port``, or
        ``site{i}.devweb.test[:port]`` when named), else None."""
        if self.named:
            name, _, port = netloc.partition(":")
            m = re.fullmatch(r"site(\d+)\." + re.escape(DOMAIN), name.lower())
            if not m or int(port or 443) != self.https_port or int(m.group(1)) >= self.hosts:
                return None
            return int(m.group(1))
        ip, sep, port = netloc.rpartition(":")
        if not sep or not port.isdigit() or int(port) != self.port:
            return None
        idx = _address_index(ip)
        if idx is None or idx >= self.hosts:
            return None
        return idx

    # ------------------------------------------------------------------ content

    def _rng(self, host: int, kind: str, page: int | str) -> random.Random:
        return random.Random(f"{self.seed}:{host}:{kind}:{page}")

    def _page_href(self, rng: random.Random, host: int, target: str, n: int, base_dir: str) -> str:
        """An href for page /{target}/{n}.html written in a random (valid) form.

        ``base_dir`` is the directory of the linking page: "" for "/", "p" or "private".
        """
        path = f"/{target}/{n}.html"
        forms = [path, f"{self.origin(host)}{path}"]
        if base_dir == "":
            forms += [f"{target}/{n}.html", f"./{target}/{n}.html"]
        elif base_dir == target:
            forms += [f"{n}.html", f"./{n}.html", f"../{target}/{n}.html"]
        else:
            forms += [f"../{target}/{n}.html"]
        href = rng.choice(forms)
        if rng.random() < 0.25:
            href += f"#sec-{rng.randrange(1, 4)}"
        return href

    def _internal_targets(self, rng: random.Random, k: int) -> list[int]:
        n = self.pages_per_host
        want = self.links_per_page
        targets: list[int] = []
        for t in (k + 1, 2 * k + 1, 2 * k + 2):
            if t < n and t not in targets and len(targets) < want:
                targets.append(t)
        pool = [t for t in range(n) if t != k and t not in targets]
        rng.shuffle(pool)
        while len(targets) < want:
            if pool:
                targets.append(pool.pop())
            else:  # tiny sites: repeat targets (with another href form)
                targets.append(rng.randrange(n))
        return targets

    def _links(self, host: int, path: str) -> list[tuple[str, str]] | None:
        """The (href, anchor text) pairs of the page at ``path``, or None if it is not a page."""
        n = self.pages_per_host
        links: list[tuple[str, str]] = []
        if path in ("", "/"):
            rng = self._rng(host, "index", 0)
            links.append((self._page_href(rng, host, "p", 0, ""), "Start here"))
            for t in rng.sample(range(n), min(3, n)):
                links.append((self._page_href(rng, host, "p", t, ""), f"Page {t}"))
            if self.has_private(host):
                t = rng.randrange(self.private_pages)
                links.append((self._page_href(rng, host, "private", t, ""), "Members only"))
            return links
        m = _PAGE_RE.fullmatch(path)
        if not m:
            return None
        area, k = m.group(1), int(m.group(2))
        if area == "o":
            return [("/", "Home")] if k < self.orphan_pages else None
        if area == "p":
            if k >= n:
                return None
            rng = self._rng(host, "p", k)
            for t in self._internal_targets(rng, k):
                links.append((self._page_href(rng, host, "p", t, "p"), f"Page {t}"))
            if self.hosts > 1:
                for _ in range(self.cross_host_links):
                    other = rng.randrange(self.hosts - 1)
                    other += other >= host
                    t = rng.randrange(n)
                    url = f"{self.origin(other)}/p/{t}.html"
                    links.append((url, f"Elsewhere: host {other} page {t}"))
            if self.has_private(host) and k % 3 == 0:
                t = rng.randrange(self.private_pages)
                links.append((self._page_href(rng, host, "private", t, "p"), "Members only"))
            return links
        # private area
        if not self.has_private(host) or k >= self.private_pages:
            return None
        rng = self._rng(host, "private", k)
        links.append(("/", "Home"))
        t = rng.randrange(n)
        links.append((self._page_href(rng, host, "p", t, "private"), f"Page {t}"))
        if self.private_pages > 1:
            t = (k + 1) % self.private_pages
            links.append((self._page_href(rng, host, "private", t, "private"), f"Private {t}"))
        return links

    def _render(self, host: int, path: str) -> str | None:
        links = self._links(host, path)
        if links is None:
            return None
        rng = self._rng(host, "text", path)
        words = lambda a, b: " ".join(rng.choice(_VOCABULARY) for _ in range(rng.randint(a, b)))  # noqa: E731
        title = f"Host {host} {path} - {words(2, 4)}"
        paras = [words(12, 40).capitalize() + "." for _ in range(rng.randint(1, 3))]
        body = [f"<h1>{_html_escape(title)}</h1>"]
        body += [f"<p>{_html_escape(p)}</p>" for p in paras]
        body.append("<ul>")
        body += [f'<li><a href="{_html_escape(h)}">{_html_escape(t)}</a></li>' for h, t in links]
        body.append("</ul>")
        body.append(f"<p>{_html_escape(words(6, 20).capitalize())}.</p>")
        return (
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_html_escape(title)}</title>\n</head>\n<body>\n"
            + "\n".join(body)
            + "\n</body>\n</html>\n"
        )

    def robots_txt(self, host_index: int) -> str | None:
        """The robots.txt body of a host, or None when it has none (served as 404)."""
        kind = self.robots_kind(host_index)
        root = self.origin(host_index)
        if kind == "disallow":
            extra = f"Sitemap: {root}/sitemap_index.xml\n" if self.sitemaps else ""
            return "User-agent: *\nDisallow: /private/\n" + extra
        if kind == "crawl_delay":
            extra = f"Sitemap: {root}/sitemap-orphans.xml\n" if self.sitemaps else ""
            return f"User-agent: *\nCrawl-delay: {self.crawl_delay_s}\nDisallow: /private/\n" + extra
        if kind == "allow_all":
            return "User-agent: *\nDisallow:\n"
        return None

    def outlinks(self, url: str) -> list[str]:
        """Absolute, fragment-free URLs the page at ``url`` links to (deduplicated, in page order).

        Returns [] for URLs that are not pages of this DevWeb (robots.txt, 404s, other hosts).
        """
        self._need_port()
        parts = urlsplit(url)
        if parts.scheme != self.scheme:
            return []
        host = self._host_index(parts.netloc)
        if host is None:
            return []
        links = self._links(host, parts.path)
        if links is None:
            return []
        out: list[str] = []
        seen: set[str] = set()
        for href, _ in links:
            absu = urldefrag(urljoin(url, href))[0]
            if absu not in seen:
                seen.add(absu)
                out.append(absu)
        return out

    def is_disallowed(self, url: str) -> bool:
        """True if the robots.txt of the url's host disallows it (for every user agent).

        URLs of hosts that are not part of this DevWeb are never disallowed.
        """
        self._need_port()
        parts = urlsplit(url)
        host = self._host_index(parts.netloc)
        if host is None:
            return False
        return self.has_private(host) and (parts.path or "/").startswith("/private/")
