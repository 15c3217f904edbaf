"""What a fetch task keeps of the links it finds, and the per-host trap signal.

A fetch task holds every page a host yields in this cycle, so it can judge links and hosts
before anything crosses a shuffle:

  * every link is checked by crawl.net.filters.LinkFilter (scheme, length, depth, repeating
    path, extension, include/exclude rules, scope); rejections are counted by reason;
  * links the crawldb already knows are dropped by the seen-URL Bloom filter (crawl.net.bloom,
    built from the crawldb once per cycle). A false positive only delays a new URL until
    another page links to it; the crawldb MERGE stays the exact source of truth;
  * the trap signal: when a host's pages are mostly near-identical (a calendar, a session id
    in the path: the MinHash of each page's words, compared with datasketch's LSH), or
    its pages keep yielding many new same-host links, the host is flagged and update lowers
    its per-cycle budget (host_state.url_budget).

Counts are plain dicts that end up in the segment's host rows (``link_rejects``) and, summed,
in host_state and ``deltacrawl stats``.
"""
from __future__ import annotations

import functools
from collections import Counter
from typing import Any, Iterable, Mapping

from crawl.config import Config
from crawl.net.bloom import BloomFilter
from crawl.net.filters import LinkFilter
from crawl.net.urls import UrlRules, host_of

# reasons counted besides LinkFilter's and the normaliser's
KNOWN = "known"            # dropped by the seen-URL Bloom filter (probably in the crawldb already)
MAX_DEPTH = "max_depth"    # the linking page is update.max_depth hops from a seed already
TRAP_NEAR_DUPLICATES = "near_duplicate_pages"
TRAP_LINK_EXPLOSION = "link_explosion"

_MINHASH_PERMUTATIONS = 64  # crawl.dedup.fingerprint.SIGNATURE_PERMUTATIONS
# Bound on a host's memo of link verdicts (see HostLinks.keep): a host whose pages link to more
# distinct URLs than this (a trap) has the rest judged afresh on every page.
_VERDICT_MEMO_MAX = 100_000
_UNSEEN = object()  # not in the memo


@functools.lru_cache(maxsize=16)
def _lsh_params(threshold: float) -> tuple[int, int]:
    """datasketch's (bands, rows) for ``threshold`` at our signature size, computed once per
    process: MinHashLSH integrates false-positive and false-negative areas numerically to find
    them, some 500 scipy integrations, which took more time per host than its pages' lookups."""
    from datasketch import MinHashLSH
    lsh = MinHashLSH(threshold=threshold, num_perm=_MINHASH_PERMUTATIONS)
    return lsh.b, lsh.r


class TaskLinks:
    """Shared by every host of one fetch task: the rules, the filter and the Bloom filter."""

    def __init__(self, cfg: Config, bloom: BloomFilter | None = None):
        self.rules = UrlRules.from_config(cfg)
        self.filter = LinkFilter.from_config(cfg)
        self.bloom = bloom
        self.trap_min_pages = cfg.discovery.trap_min_pages
        self.trap_near_dup_share = cfg.discovery.trap_near_dup_share
        self.trap_similarity = cfg.discovery.trap_similarity
        self.trap_new_urls_per_page = cfg.discovery.trap_new_urls_per_page
        self.max_depth = cfg.update.max_depth

    def for_host(self, host: str) -> "HostLinks":
        return HostLinks(host, self)


class HostLinks:
    """One host's link bookkeeping for this cycle."""

    def __init__(self, host: str, task: TaskLinks):
        self.host = host
        self.task = task
        self.rejects: Counter[str] = Counter()
        self.found = 0            # links seen on the host's pages (after normalisation)
        self.kept = 0             # links that leave the task
        self.pages = 0            # pages whose links were judged
        self.in_scope = 0         # the last page's links that passed the rules, known or not (keep)
        self._new_same_host: set[str] = set()
        # url -> the reason it was dropped, or None (kept): a link's verdict depends only on the
        # URL, this host, the task's rules and its Bloom filter, all fixed for the task; and the
        # navigation, footer and related links of a host recur on most of its pages (about half
        # of a page's links on bench/cost.py's realistic web).
        self._verdicts: dict[str, str | None] = {}
        self._lsh = None
        self._similar_pages = 0
        self._signed_pages = 0

    def add_rejects(self, rejected: Mapping[str, int]) -> None:
        """Count links the extractor already dropped (normalisation failures, nofollow, cap)."""
        self.rejects.update({k: int(v) for k, v in rejected.items() if v})

    def keep(self, links: Iterable[str], depth: int = 0) -> list[str]:
        """The links of one page (``depth`` hops from a seed) worth sending to update: within the
        crawl depth, filtered, and not already known according to the Bloom filter. ``in_scope``
        is then how many passed the rules, known or not: what the page's score is shared by
        (issue 32, finding 4: dividing it by the unknown ones only made a link's score depend on
        which of its siblings happened to be found first)."""
        task = self.task
        self.in_scope = 0
        if depth + 1 > task.max_depth:
            links = list(links)
            self.pages += 1
            self.found += len(links)
            if links:
                self.rejects[MAX_DEPTH] += len(links)
            return []
        reject_reason = task.filter.reject_reason
        bloom = task.bloom
        own = self.host
        verdicts = self._verdicts
        rejects = self.rejects
        kept: list[str] = []
        self.pages += 1
        found = in_scope = 0
        for url in links:
            found += 1
            reason = verdicts.get(url, _UNSEEN)
            if reason is _UNSEEN:
                reason = reject_reason(url, own)
                if reason is None:
                    # the trap signal counts distinct in-scope same-host links whether or not the
                    # crawldb knows them, so it does not depend on the Bloom filter being on
                    if host_of(url) == own:
                        self._new_same_host.add(url)
                    if bloom is not None and url in bloom:
                        reason = KNOWN
                if len(verdicts) < _VERDICT_MEMO_MAX:
                    verdicts[url] = reason
            if reason is None or reason == KNOWN:  # passed the rules, known or not
                in_scope += 1
            if reason is not None:
                rejects[reason] += 1
                continue
            kept.append(url)
        self.found += found
        self.in_scope = in_scope
        self.kept += len(kept)
        return kept

    def add_signature(self, signature: bytes | None) -> None:
        """A parsed page's word-set MinHash (crawl.dedup.fingerprint.word_set_signature, computed in
        the parser child): is it near-identical to an earlier page of this host?"""
        if not signature:
            return
        import numpy as np
        from datasketch import MinHash, MinHashLSH

        from crawl.dedup.fingerprint import _signature_permutations
        values = np.frombuffer(signature, dtype=np.uint64)
        if len(values) != _MINHASH_PERMUTATIONS:
            return
        if self._lsh is None:
            self._lsh = MinHashLSH(threshold=self.task.trap_similarity, num_perm=_MINHASH_PERMUTATIONS,
                                   params=_lsh_params(self.task.trap_similarity))
        # The permutations are passed, not drawn: datasketch would otherwise draw 64 of them
        # from a new RandomState for every page (0.37 ms, measured with bench/fetch.py's profile).
        mh = MinHash(num_perm=_MINHASH_PERMUTATIONS, hashvalues=values, scheme="legacy",
                     permutations=_signature_permutations())
        key = str(self._signed_pages)
        self._signed_pages += 1
        if self._lsh.query(mh):
            self._similar_pages += 1
        self._lsh.insert(key, mh)

    def trap_signal(self) -> str | None:
        """Why the host looks like a trap this cycle, or None."""
        task = self.task
        if self._signed_pages >= task.trap_min_pages and \
                self._similar_pages > task.trap_near_dup_share * self._signed_pages:
            return TRAP_NEAR_DUPLICATES
        if self.pages >= task.trap_min_pages and \
                len(self._new_same_host) > task.trap_new_urls_per_page * self.pages:
            return TRAP_LINK_EXPLOSION
        return None

    def summary(self) -> dict[str, Any]:
        """Fields for the host's row of the segment."""
        return {"link_rejects": dict(self.rejects) or None, "links_found": self.found,
                "links_kept": self.kept, "trap_signal": self.trap_signal(),
                "similar_pages": self._similar_pages}
