#!/usr/bin/env python
"""Dedup quality benchmark: exact and near-duplicate detection on a labelled synthetic corpus,
SimHash (crawl.dedup.fingerprint) next to datasketch MinHashLSH, MinHash confirmation of SimHash
candidates, and the cost per page of each fingerprint.

Run:      .venv/bin/python bench/dedup_quality.py [--docs 2000] [--seed 7] [--k 3] [--no-sweep]
          [--num-perm 128] [--mh-threshold 0.7 ...] [--mh-shingles 1 ...] [--confirm-num-perm 64]
          [--confirm-jaccard 0.6] [--min-jaccard 0.7] [--body-edits-only] [--out-json FILE]
          (defaults: about 30 s on 2 cores, of which the brute-force all-pairs scans are most)
Corpus:   generated here from --seed, no downloads. 30,000 pseudo-words; a background Zipf-
          Mandelbrot distribution (frequent words short) mixed 85/15 with one or two of 60
          topics, so that, as in English, the 10 / 100 / 1,000 commonest words make about
          27 / 48 / 69 % of the tokens. 40 sites, each with its own boilerplate (logo, 6-12 nav
          links, 15-40 words of footer, authors). --docs originals of 300-2,000 body words
          (log-uniform) in sentences and paragraphs with some numbers and h2 headings, in the
          site's HTML: header + nav, byline with <time> (ISO and "March 5, 2024 10:32"), article,
          "Related" aside (3 titles of the site's pages), footer with copyright year and
          "N comments · N views", styles, scripts, a noscript and an svg.
          Families: 40 % of originals stay alone; 60 % get one near copy (edit level 1, 2, 5,
          10 % in turn) and, half of them, also an exact copy:
          exact copy  same words; another of 4 markup templates (semantic tags or divs,
                      minified or indented, comments, <em>/<a> around whole words, other
                      whitespace); other script contents, other digits in the timestamp,
                      counters and copyright year;
          near copy   round(level x body words) edit operations on the body words
                      (substitution 50 %, insertion 25 %, deletion 25 %, random positions, new
                      words drawn from the page's own word distribution), plus a new date (month
                      name too), a new "Related" list and new counters (--body-edits-only: same
                      date and list; new counters only); any template.
Truth:    pairs of pages from the same original; a pair's level is the larger edit level of its
          two pages (originals and exact copies: 0). Precision counts every same-family pair
          found as correct (10 % copies are copies too); recall is per level; the target is
          precision >= 0.95 and recall >= 0.90 over the pairs of levels 1, 2 and 5 %.
Measures: the crawler's own dedup step (crawl/dedup/rules.py), in plain Python: fingerprint(page_text(
          html)), pages sharing a (band, value) of crawl.dedup.rules.band_rows (SimHash 4 x 16-bit bands +
          MinHash 8 x 8 LSH bands), kept when is_near_duplicate(max_hamming=3, min_jaccard=
          --min-jaccard) by crawl.dedup.rules.confirm's rule (SimHash-band candidates by Hamming alone,
          MinHash-band ones by either test; also counted: the pairs that testing every candidate
          both ways would add), plus equal text_hash; with its candidate count and fingerprint us/page;
          exact dedup (equal text_hash); SimHash with crawl.dedup.fingerprint's defaults: the 4 x 16-bit
          band join done here with numpy (pages sharing a (band, value); pages without words
          excluded), then Hamming <= --k, checked against a brute-force scan of all pairs, which
          also gives the distance distribution per level and, for k = 0..16, recall and the
          number of unrelated pairs within k; datasketch MinHashLSH (--num-perm, each
          --mh-threshold x --mh-shingles word-shingle size) candidates, and those whose estimated
          Jaccard reaches the threshold; SimHash band candidates confirmed by MinHash Jaccard
          (--confirm-num-perm, word sets) with and without the Hamming test; unless --no-sweep,
          the SimHash evaluation for other features (word 1/2/3-grams; tf, sqrt tf, 1 + ln tf,
          binary weights); microseconds per page of page_text, fingerprint, simhash, text_hash
          and minhash (first 500 pages, median of 3 passes) and on a 50 KB HTML page / 50 KB of
          text (median of 30 runs).
Checks:   exact dedup finds every level-0 pair and nothing else; the script's band cut equals
          crawl.dedup.fingerprint.bands; for k <= 3 the band join finds exactly the pairs the brute-force
          scan finds within k (pigeonhole). Missed quality targets are reported, not failed: they
          are what this benchmark measures.
Exit:     0 done · 1 a check failed (figures are still printed and written) · 2 bad arguments.
"""
from __future__ import annotations

import argparse
import collections
import itertools
import math
import os
import random
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/_common.py
from _common import finish, fmt, machine_facts  # noqa: E402

from crawl.dedup import fingerprint as fp  # noqa: E402

LEVELS = (1, 2, 5, 10)          # near-copy edit levels, % of body words
TARGET_LEVELS = (1, 2, 5)       # "near copies with <= 5 % edits"
TARGET_PRECISION, TARGET_RECALL = 0.95, 0.90
DELTACRAWL_MAX_HAMMING = 3      # crawl/dedup/rules.py's max_hamming, as the job calls it
DELTACRAWL_LABEL = "deltacrawl dedup: text_hash + SimHash<=3 or MinHash-band J>={j} (crawl/dedup/rules.py)"
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")


# =========================================================================== the corpus

class Language:
    """Pseudo-words with Zipf frequencies and topics: enough structure that unrelated pages
    share function words and same-topic pages share content words, as real pages do."""

    def __init__(self, rng: random.Random, nprng: np.random.Generator, vocab: int = 30000,
                 topics: int = 60, topic_words: int = 400):
        onsets = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v",
                  "w", "z", "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr"]
        vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"]
        codas = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng"]
        words: set[str] = set()
        while len(words) < vocab:
            syllables = 1 + min(4, int(nprng.exponential(0.9)))
            words.add("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                              for _ in range(syllables)))
        # Frequent words are short (Zipf's law of abbreviation): rank by length plus noise.
        # (sorted first: set order depends on the per-process string hash seed)
        self.words = sorted(sorted(words), key=lambda w: len(w) + rng.random() * 4)
        ranks = np.arange(len(self.words))
        # Zipf-Mandelbrot, tuned with the 85 % background mix below so that, as in English,
        # the 10 / 100 / 1,000 most frequent words make about 27 / 48 / 69 % of the tokens.
        background = 1.0 / (ranks + 1.5) ** 1.1
        self.background = background / background.sum()
        self.topics = []
        for _ in range(topics):
            members = nprng.choice(np.arange(300, vocab), size=topic_words, replace=False)
            weights = 1.0 / (np.arange(topic_words) + 1.0) ** 0.9
            self.topics.append((members, weights / weights.sum()))

    def sampler(self, nprng: np.random.Generator, topic_ids: list[int], mix: list[float]):
        """A function n -> n word indices from background + topics mixed as ``mix``."""
        def draw(n: int) -> np.ndarray:
            source = nprng.choice(len(mix), size=n, p=mix)
            out = np.empty(n, dtype=np.int64)
            picks = source == 0
            out[picks] = nprng.choice(len(self.background), size=int(picks.sum()), p=self.background)
            for s, t in enumerate(topic_ids, start=1):
                picks = source == s
                members, weights = self.topics[t]
                out[picks] = members[nprng.choice(len(members), size=int(picks.sum()), p=weights)]
            return out
        return draw


class Site:
    def __init__(self, index: int, lang: Language, rng: random.Random, nprng: np.random.Generator):
        draw = lang.sampler(nprng, [rng.randrange(len(lang.topics))], [0.5, 0.5])
        words = lambda n: [lang.words[i] for i in draw(n)]  # noqa: E731
        self.index = index
        self.name = " ".join(words(2)).title()
        self.nav = [" ".join(words(rng.choice((1, 1, 2)))).title() for _ in range(rng.randint(6, 12))]
        self.footer = " ".join(words(rng.randint(15, 40))).capitalize() + "."
        self.authors = [" ".join(words(2)).title() for _ in range(5)]
        self.titles: list[str] = []  # titles of its pages, for "Related" lists


class Doc:
    """An original's content: title, paragraphs of sentences of word strings."""

    def __init__(self, lang: Language, site: Site, rng: random.Random, nprng: np.random.Generator):
        topic = rng.randrange(len(lang.topics))
        if rng.random() < 0.3:
            self.draw = lang.sampler(nprng, [topic, rng.randrange(len(lang.topics))], [0.85, 0.1, 0.05])
        else:
            self.draw = lang.sampler(nprng, [topic], [0.85, 0.15])
        self.lang = lang
        n = int(round(math.exp(rng.uniform(math.log(300), math.log(2000)))))
        tokens = [lang.words[i] for i in self.draw(n)]
        self.title = " ".join(lang.words[i] for i in self.draw(rng.randint(4, 8))).capitalize()
        site.titles.append(self.title)
        self.site = site
        self.author = rng.choice(site.authors)
        self.words = tokens                     # body words, edited for near copies
        # Layout as cut points, so edited copies keep the same kind of structure.
        self.sentence_lengths = []
        left = n
        while left > 0:
            k = min(left, rng.randint(6, 28))
            self.sentence_lengths.append(k)
            left -= k
        self.rng_state = rng.random()


def _number(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return str(rng.randint(1990, 2026))
    if kind == 1:
        return f"{rng.randint(1, 999)},{rng.randint(0, 999):03d}"
    if kind == 2:
        return f"{rng.randint(1, 99)}.{rng.randint(0, 9)}%"
    return str(rng.randint(2, 60))


def _sentences(words: list[str], lengths: list[int], rng: random.Random) -> list[str]:
    out, i = [], 0
    total = len(words)
    for k in lengths:
        chunk = words[i:i + k]
        i += k
        if not chunk:
            continue
        chunk = [w + ("," if rng.random() < 0.06 and j < len(chunk) - 1 else "") for j, w in enumerate(chunk)]
        if rng.random() < 0.1:
            chunk.insert(rng.randrange(len(chunk) + 1), _number(rng))
        s = " ".join(chunk)
        out.append(s[0].upper() + s[1:] + rng.choice(".....?!"))
    if i < total:  # insertions made the text longer than the layout: one more sentence
        rest = " ".join(words[i:])
        out.append(rest[0].upper() + rest[1:] + ".")
    return out


def _timestamp(rng: random.Random, month: int) -> tuple[str, str]:
    """(ISO timestamp, "March 5, 2024 10:32") in ``month``, everything else drawn from ``rng``."""
    day, year = rng.randint(1, 28), rng.randint(2019, 2026)
    hh, mm, ss = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    iso = f"{year}-{month + 1:02d}-{day:02d}T{hh:02d}:{mm:02d}:{ss:02d}Z"
    return iso, f"{MONTHS[month]} {day}, {year} {hh}:{mm:02d}"


def render(doc: Doc, words: list[str], rng: random.Random, month: int, related: list[str],
           template: int) -> str:
    """One page of ``doc`` with body ``words`` as HTML; ``rng`` decides everything that may
    differ between exact copies (digits, markup, scripts, whitespace)."""
    site = doc.site
    iso, human = _timestamp(rng, month)
    sentences = _sentences(words, doc.sentence_lengths, random.Random(doc.rng_state))
    paragraphs, i = [], 0
    layout = random.Random(doc.rng_state + 1)
    while i < len(sentences):
        k = layout.randint(2, 7)
        paragraphs.append(sentences[i:i + k])
        i += k
    session = "%016x" % rng.getrandbits(64)
    nl, ind = ("\n", "  ") if template % 2 == 0 else ("", "")

    def inline(sentence: str) -> str:
        if template < 2:
            return sentence
        parts = sentence.split(" ")
        for j in range(len(parts)):
            r = rng.random()
            if r < 0.03:
                parts[j] = f"<em>{parts[j]}</em>"
            elif r < 0.05:
                parts[j] = f'<a href="/t/{rng.randrange(999)}">{parts[j]}</a>'
        return (" " if template == 2 else "  \n ").join(parts)

    body = []
    for n, para in enumerate(paragraphs):
        if n and n % 4 == 0:
            heading = " ".join(para[0].split(" ")[:3]).rstrip(".,!?")
            body.append(f"<h2>{heading}</h2>")
        text = " ".join(inline(s) for s in para)
        body.append(f"<p>{text}</p>" if template != 3 else f'<div class="para p{n}">{text}</div>')
    comments, views = rng.randint(0, 500), rng.randint(100, 99999)
    nav_items = "".join(f'{ind}<li><a href="/{k}/">{label}</a></li>{nl}' for k, label in enumerate(site.nav))
    related_items = "".join(f'<li><a href="/r/{k}">{t}</a></li>' for k, t in enumerate(related))
    tag = ("header", "nav", "main", "footer") if template in (0, 2) else ("div", "div", "div", "div")
    comment = f"<!-- generated {iso} node {rng.randint(1, 64)} -->" if template in (1, 3) else ""
    return (
        f'<!DOCTYPE html>{nl}<html lang="en"><head><meta charset="utf-8">{nl}'
        f"<title>{doc.title} | {site.name}</title>{nl}"
        f"<style>.c{template}{{margin:{rng.randint(0, 9)}px}} body{{font-family:serif}}</style>{nl}"
        f'<script>var session="{session}"; var t0={rng.randint(10**9, 2 * 10**9)};</script>{nl}'
        f'</head>{nl}<body class="c{template}">{comment}{nl}'
        f'<{tag[0]} class="site-header"><a class="logo" href="/">{site.name}</a>{nl}'
        f'<{tag[1]} class="menu"><ul>{nl}{nav_items}</ul></{tag[1]}></{tag[0]}>{nl}'
        f'<{tag[2]} id="content"><article><h1>{doc.title}</h1>{nl}'
        f'<p class="byline">By {doc.author} · <time datetime="{iso}">{human}</time></p>{nl}'
        + nl.join(body) +
        f'{nl}</article><aside><h3>Related</h3><ul>{related_items}</ul></aside></{tag[2]}>{nl}'
        f'<{tag[3]} class="site-footer"><p>{site.footer}</p>{nl}'
        f"<p>© {iso[:4]} {site.name}. All rights reserved.</p>{nl}"
        f"<p>{comments} comments · {views:,} views</p></{tag[3]}>{nl}"
        f'<noscript>Please enable JavaScript to see comments.</noscript>'
        f'<svg width="10" height="10"><text x="0" y="9">icon</text></svg>'
        f'<script>analytics.track("{session}", {rng.random():.6f});</script>{nl}'
        "</body></html>\n"
    )


def edit_words(words: list[str], level: int, doc: Doc, rng: random.Random) -> list[str]:
    """``round(level % x len(words))`` random substitutions / insertions / deletions."""
    out = list(words)
    ops = max(1, round(len(words) * level / 100))
    fresh = iter([doc.lang.words[i] for i in doc.draw(ops)])
    for _ in range(ops):
        r = rng.random()
        if r < 0.5 and out:
            out[rng.randrange(len(out))] = next(fresh)
        elif r < 0.75:
            out.insert(rng.randrange(len(out) + 1), next(fresh))
        elif len(out) > 1:
            del out[rng.randrange(len(out))]
    return out


def build_corpus(n_docs: int, seed: int, body_edits_only: bool = False) -> dict[str, Any]:
    """Pages (HTML) with their family id, level (0 original/exact copy, else edit %) and site.
    ``body_edits_only``: near copies keep the original's date and "Related" list (same
    random draws otherwise, so the rest of the corpus is unchanged)."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    lang = Language(rng, nprng)
    sites = [Site(i, lang, rng, nprng) for i in range(40)]
    docs = [Doc(lang, rng.choice(sites), rng, nprng) for _ in range(n_docs)]
    html, family, level, site, kind = [], [], [], [], []

    def add(page: str, fam: int, lev: int, what: str, doc: Doc) -> None:
        html.append(page)
        family.append(fam)
        level.append(lev)
        site.append(doc.site.index)
        kind.append(what)

    next_level = itertools.cycle(LEVELS)
    for f, doc in enumerate(docs):
        month = rng.randrange(12)
        related = rng.sample(doc.site.titles, min(3, len(doc.site.titles)))
        add(render(doc, doc.words, rng, month, related, rng.randrange(4)), f, 0, "original", doc)
        if rng.random() < 0.4:
            continue
        if rng.random() < 0.5:
            add(render(doc, doc.words, rng, month, related, rng.randrange(4)), f, 0, "exact", doc)
        lev = next(next_level)
        new_related = rng.sample(doc.site.titles, min(3, len(doc.site.titles)))
        new_month = (month + rng.randint(1, 11)) % 12
        if body_edits_only:
            new_related, new_month = related, month
        add(render(doc, edit_words(doc.words, lev, doc, rng), rng, new_month, new_related, rng.randrange(4)),
            f, lev, f"near{lev}", doc)
    return {"html": html, "family": np.array(family), "level": np.array(level), "site": np.array(site),
            "kind": kind, "originals": n_docs}


# =========================================================================== evaluation
# A pair of pages i < j is the int64 key i * n + j, so that sets of pairs are numpy arrays.

class Truth:
    """Every same-family pair (i < j) with its level: the larger edit level of its two pages
    (originals and exact copies are level 0)."""

    def __init__(self, family: np.ndarray, level: np.ndarray, site: np.ndarray):
        self.n = n = len(family)
        self.site = site
        members: dict[int, list[int]] = collections.defaultdict(list)
        for i, f in enumerate(family.tolist()):
            members[f].append(i)
        keys, levels = [], []
        for ids in members.values():
            for a, b in itertools.combinations(ids, 2):
                keys.append(a * n + b)
                levels.append(max(int(level[a]), int(level[b])))
        order = np.argsort(keys)
        self.keys = np.array(keys, dtype=np.int64)[order]
        self.levels = np.array(levels, dtype=np.int64)[order]
        self.pairs_by_level = {lev: int(np.count_nonzero(self.levels == lev)) for lev in (0,) + LEVELS}

    def level_of(self, keys: np.ndarray) -> np.ndarray:
        """Level of each key, -1 for pairs of unrelated pages."""
        pos = np.searchsorted(self.keys, keys)
        pos = np.minimum(pos, max(0, len(self.keys) - 1))
        hit = (self.keys[pos] == keys) if len(self.keys) else np.zeros(len(keys), dtype=bool)
        return np.where(hit, self.levels[pos] if len(self.keys) else -1, -1)

    def score(self, found: np.ndarray) -> dict[str, Any]:
        found = np.unique(np.asarray(found, dtype=np.int64))
        levels = self.level_of(found)
        wrong = found[levels < 0]
        by_level = {}
        for lev in (0,) + LEVELS:
            total = self.pairs_by_level[lev]
            hit = int(np.count_nonzero(levels == lev))
            by_level[lev] = {"pairs": total, "found": hit, "recall": hit / total if total else None}
        target_total = sum(by_level[lev]["pairs"] for lev in TARGET_LEVELS)
        target_hit = sum(by_level[lev]["found"] for lev in TARGET_LEVELS)
        correct = len(found) - len(wrong)
        return {
            "found": len(found), "correct": correct, "false_pairs": len(wrong),
            "false_pairs_same_site": int(np.count_nonzero(self.site[wrong // self.n] == self.site[wrong % self.n])),
            "precision": correct / len(found) if len(found) else None,
            "recall_by_level": by_level,
            "target_recall": target_hit / target_total if target_total else None,
        }


def unsigned(hashes: list[int]) -> np.ndarray:
    return np.array([h & ((1 << 64) - 1) for h in hashes], dtype=np.uint64)


def band_join(u: np.ndarray, eligible: np.ndarray | None = None, n_bands: int = 4) -> np.ndarray:
    """Candidate pairs (keys): pages sharing a (band_index, band_value) — what the Spark job's
    equi-join produces (crawl.dedup.fingerprint.bands cuts the same bits). Pages not ``eligible``
    (no words: fingerprint 0, the hot band) take no part."""
    n = len(u)
    ids_all = np.arange(n) if eligible is None else np.flatnonzero(eligible)
    width = 64 // n_bands
    out = []
    for band in range(n_bands):
        values = (u[ids_all] >> np.uint64(band * width)) & np.uint64((1 << width) - 1)
        order = np.argsort(values, kind="stable")
        values, ids = values[order], ids_all[order]
        cut = np.flatnonzero(np.diff(values)) + 1
        for group in np.split(ids, cut):
            if len(group) > 1:
                a, b = np.triu_indices(len(group), 1)
                lo, hi = np.minimum(group[a], group[b]), np.maximum(group[a], group[b])
                out.append(lo.astype(np.int64) * n + hi)
    return np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def hamming_of(u: np.ndarray, keys: np.ndarray) -> np.ndarray:
    n = len(u)
    return np.bitwise_count(u[keys // n] ^ u[keys % n]).astype(np.int64)


def jaccard_of(sig_matrix: np.ndarray, keys: np.ndarray, chunk: int = 200_000) -> np.ndarray:
    """Estimated Jaccard (share of equal MinHash values) of each pair: what
    LeanMinHash.jaccard computes, for many pairs at once."""
    n = len(sig_matrix)
    out = np.empty(len(keys), dtype=np.float64)
    for lo in range(0, len(keys), chunk):
        k = keys[lo:lo + chunk]
        out[lo:lo + chunk] = (sig_matrix[k // n] == sig_matrix[k % n]).mean(axis=1)
    return out


def all_pairs_scan(u: np.ndarray, family: np.ndarray, site: np.ndarray, max_k: int) -> dict[str, Any]:
    """Brute force over all pairs: the histogram of distances between unrelated pages (same
    site / other site) and every pair within ``max_k`` (keys)."""
    n = len(u)
    hist_same_site = np.zeros(65, dtype=np.int64)
    hist_other_site = np.zeros(65, dtype=np.int64)
    within = []
    for i in range(n - 1):
        d = np.bitwise_count(u[i] ^ u[i + 1:]).astype(np.int64)
        unrelated = family[i + 1:] != family[i]
        same_site = site[i + 1:] == site[i]
        hist_same_site += np.bincount(d[unrelated & same_site], minlength=65)
        hist_other_site += np.bincount(d[unrelated & ~same_site], minlength=65)
        close = np.flatnonzero(d <= max_k)
        if len(close):
            within.append(i * n + i + 1 + close.astype(np.int64))
    return {"hist_same_site": hist_same_site, "hist_other_site": hist_other_site,
            "within": np.concatenate(within) if within else np.zeros(0, dtype=np.int64)}


def simhash_quality(u: np.ndarray, truth: Truth, family: np.ndarray, site: np.ndarray, k: int) -> dict[str, Any]:
    """Distance percentiles per level and, per k in 0..16, the recall per level, the number
    of unrelated pairs within k and the precision of "Hamming <= k" over all pairs."""
    scan = all_pairs_scan(u, family, site, max_k=k)
    dist = hamming_of(u, truth.keys)
    per_level = {}
    for lev in (0,) + LEVELS:
        ds = dist[truth.levels == lev]
        per_level[lev] = ({"median": float(np.median(ds)), "p90": float(np.percentile(ds, 90)),
                           "max": int(ds.max())} if len(ds) else None)
    unrelated_hist = scan["hist_same_site"] + scan["hist_other_site"]
    unrelated_cum = np.cumsum(unrelated_hist)
    sweep = []
    for kk in range(0, 17):
        within = dist <= kk
        row: dict[str, Any] = {"k": kk, "unrelated_within_k": int(unrelated_cum[kk])}
        for lev in (0,) + LEVELS:
            tot = truth.pairs_by_level[lev]
            row[f"recall_{lev}"] = int(np.count_nonzero(within & (truth.levels == lev))) / tot if tot else None
        target = np.isin(truth.levels, TARGET_LEVELS)
        row["target_recall"] = (int(np.count_nonzero(within & target)) / int(np.count_nonzero(target))
                                if target.any() else None)
        correct = int(np.count_nonzero(within))
        row["precision"] = correct / (correct + row["unrelated_within_k"]) if correct else None
        sweep.append(row)
    return {"distance_by_level": per_level, "k_sweep": sweep, "unrelated_pairs": int(unrelated_cum[-1]),
            "unrelated_median_distance": _hist_median(unrelated_hist),
            "unrelated_same_site_median_distance": _hist_median(scan["hist_same_site"]),
            "at_k": sweep[k] if k <= 16 else None, "within_k": scan["within"]}


def _hist_median(hist: np.ndarray) -> float | None:
    total = int(hist.sum())
    if not total:
        return None
    return float(np.searchsorted(np.cumsum(hist), (total + 1) / 2))


def minhash_lsh_pairs(sigs: list, threshold: float, num_perm: int) -> tuple[np.ndarray, np.ndarray, float, tuple[int, int]]:
    """datasketch MinHashLSH over all pages: (candidate keys, keys of candidates whose
    estimated Jaccard reaches ``threshold``, seconds, (bands, rows per band) it chose)."""
    from datasketch import MinHashLSH
    n = len(sigs)
    t0 = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    for i, m in enumerate(sigs):
        lsh.insert(i, m, check_duplication=False)
    keys = set()
    for i, m in enumerate(sigs):
        for j in lsh.query(m):
            if j != i:
                keys.add(min(i, j) * n + max(i, j))
    candidates = np.array(sorted(keys), dtype=np.int64)
    confirmed = np.array([key for key in candidates.tolist()
                          if sigs[key // n].jaccard(sigs[key % n]) >= threshold], dtype=np.int64)
    return candidates, confirmed, time.perf_counter() - t0, (lsh.b, lsh.r)


def deltacrawl_pairs(prints: list, n: int, max_hamming: int, min_jaccard: float) -> dict[str, Any]:
    """The crawler's dedup step (crawl/dedup/rules.py) in plain Python: pages without words are
    skipped; candidates are pages sharing a (band, value) from ``crawl.dedup.rules.band_rows``
    (SimHash bands 0..3 + MinHash LSH bands 4..11), confirmed by ``is_near_duplicate``;
    plus every pair with equal ``text_hash``. Keys of the pairs found, and counts/seconds."""
    from crawl.dedup import rules as dedup
    t0 = time.perf_counter()
    buckets: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    exact: dict[int, list[int]] = collections.defaultdict(list)
    for i, f in enumerate(prints):
        if f.words == 0:
            continue
        exact[f.text_hash].append(i)
        for row in dedup.band_rows(f.simhash, f.signature):
            buckets[row].append(i)
    def pairs_of(simhash_bands: bool) -> set[int]:
        return {a * n + b for (band, _), ids in buckets.items()
                if len(ids) > 1 and (band < dedup.SIMHASH_BANDS) == simhash_bands
                for a, b in itertools.combinations(ids, 2)}

    def confirmed(keys: set[int], band: int) -> set[int]:
        return {key for key in keys
                if dedup.confirm(band, prints[key // n].simhash, prints[key // n].signature,
                                 prints[key % n].simhash, prints[key % n].signature,
                                 max_hamming=max_hamming, min_jaccard=min_jaccard)}

    # crawl.dedup.rules.confirm's rule, as jobs/dedup.py applies it: SimHash-band candidates by Hamming
    # alone, MinHash-band candidates by Hamming or Jaccard
    simhash_cands, signature_cands = pairs_of(True), pairs_of(False)
    candidates = simhash_cands | signature_cands
    near = confirmed(simhash_cands, 0) | confirmed(signature_cands, dedup.SIMHASH_BANDS)
    # for the record: every candidate tested both ways (the rule before it was split by band kind)
    near_both_ways = confirmed(candidates, dedup.SIMHASH_BANDS)
    exact_keys = {a * n + b for ids in exact.values() for a, b in itertools.combinations(ids, 2)}
    found = near | exact_keys
    seconds = time.perf_counter() - t0
    simhash_only = {(i, v) for i, v in buckets if i < dedup.SIMHASH_BANDS}
    return {"found": np.array(sorted(found), dtype=np.int64), "candidates": len(candidates),
            "near": len(near), "exact": len(exact_keys), "exact_not_near": len(exact_keys - near),
            "simhash_candidates": len(simhash_cands), "signature_candidates": len(signature_cands),
            "near_both_ways": len(near_both_ways), "lost_by_band_rule": len(near_both_ways - near),
            "buckets": len(buckets), "simhash_buckets": len(simhash_only), "seconds": seconds}


def timed(fn, items: list) -> tuple[list, float]:
    """(results, microseconds per item) of one pass."""
    t0 = time.perf_counter()
    out = [fn(x) for x in items]
    return out, (time.perf_counter() - t0) / max(1, len(items)) * 1e6


def us_per_item(fn, items: list, passes: int = 3) -> float:
    """Median over ``passes`` passes of the microseconds per item (the machine is shared)."""
    return sorted(timed(fn, items)[1] for _ in range(passes))[passes // 2]


def median_us(fn, arg, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(arg)
        runs.append(time.perf_counter() - t0)
    runs.sort()
    return runs[len(runs) // 2] * 1e6


def big_page(html_pages: list[str], size: int = 50 * 1024) -> str:
    """A ``size``-character HTML page (ASCII: as many bytes): the first page's markup with
    the article bodies of the following pages appended until it is big enough."""
    head, tail = html_pages[0].split("</article>", 1)
    parts = [head]
    total = len(head) + len(tail)
    for page in html_pages[1:]:
        body = page.split('<time', 1)[1].split("</time></p>", 1)[1].split("</article>", 1)[0]
        body = body[:size - total]  # the last body is cut short (mid-tag is fine for a parser)
        parts.append(body)
        total += len(body)
        if total >= size:
            break
    return "".join(parts) + "</article>" + tail


# =========================================================================== the benchmark

SWEEP = (((1,), "log"), ((1,), "tf"), ((1,), "sqrt"), ((1,), "binary"), ((1, 2), "log"), ((1, 2), "tf"),
         ((2,), "log"), ((3,), "log"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Dedup quality: SimHash vs MinHashLSH on a labelled synthetic corpus.")
    p.add_argument("--docs", type=int, default=2000, help="original documents (default 2000; ~1.9 pages each)")
    p.add_argument("--seed", type=int, default=7, help="corpus seed (default 7)")
    p.add_argument("--k", type=int, default=3, help="SimHash Hamming threshold, 0-16 (default 3; the "
                                                     "4 x 16-bit band join is exhaustive only for k <= 3)")
    p.add_argument("--num-perm", type=int, default=128, help="MinHashLSH permutations (default 128)")
    p.add_argument("--mh-threshold", type=float, action="append",
                   help="MinHashLSH Jaccard threshold, repeatable (default 0.7, 0.8 and 0.9)")
    p.add_argument("--mh-shingles", type=int, action="append",
                   help="MinHashLSH word shingle size, repeatable (default 1 and 3)")
    p.add_argument("--confirm-num-perm", type=int, default=64,
                   help="permutations of the MinHash that confirms SimHash candidates (default 64)")
    p.add_argument("--confirm-jaccard", type=float, default=0.6,
                   help="Jaccard a SimHash candidate needs to be confirmed (default 0.6)")
    p.add_argument("--min-jaccard", type=float, default=0.7,
                   help="min_jaccard of the deltacrawl dedup row (crawl.dedup.rules.is_near_duplicate; default 0.7)")
    p.add_argument("--no-sweep", action="store_true", help="skip the SimHash feature sweep")
    p.add_argument("--body-edits-only", action="store_true",
                   help="near copies keep the original's date and Related list (only the body is edited)")
    p.add_argument("--out-json", metavar="FILE", help="write every figure to this JSON file")
    args = p.parse_args(argv)
    args.mh_threshold = args.mh_threshold or [0.7, 0.8, 0.9]
    args.mh_shingles = args.mh_shingles or [1, 3]
    if args.docs < 10 or not 0 <= args.k <= 16 or args.num_perm < 2 or args.confirm_num_perm < 2:
        p.error("--docs >= 10, 0 <= --k <= 16, --num-perm and --confirm-num-perm >= 2")
    if not all(0 < t <= 1 for t in args.mh_threshold + [args.confirm_jaccard, args.min_jaccard]) or min(args.mh_shingles) < 1:
        p.error("thresholds must be in (0, 1], shingle sizes >= 1")
    return args


def _recalls(s: dict[str, Any]) -> dict[str, Any]:
    return {str(lev): v["recall"] for lev, v in s["recall_by_level"].items()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"check: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failures.append(what)

    result: dict[str, Any] = {
        "benchmark": "dedup_quality", "machine": machine_facts(extra_dists=("numpy", "datasketch", "selectolax")),
        "params": {k: v for k, v in vars(args).items() if k != "out_json"},
        "command": "python bench/dedup_quality.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "simhash_features": {"shingles": list(fp.SIMHASH_SHINGLES), "weighting": fp.SIMHASH_WEIGHTING},
    }

    # ---- corpus
    t0 = time.perf_counter()
    corpus = build_corpus(args.docs, args.seed, args.body_edits_only)
    html, family, level, site = corpus["html"], corpus["family"], corpus["level"], corpus["site"]
    truth = Truth(family, level, site)
    gen_s = time.perf_counter() - t0
    texts = [fp.page_text(h) for h in html]
    prints = [fp.fingerprint(t) for t in texts]
    u = unsigned([f.simhash for f in prints])
    eligible = np.array([f.words > 0 for f in prints])
    kinds = collections.Counter(corpus["kind"])
    result["corpus"] = {
        "originals": args.docs, "pages": len(html), "pages_by_kind": dict(sorted(kinds.items())),
        "pairs_by_level": {str(lev): c for lev, c in truth.pairs_by_level.items()},
        "mean_html_kb": float(np.mean([len(h.encode()) for h in html]) / 1024),
        "mean_words": float(np.mean([f.words for f in prints])), "min_words": int(min(f.words for f in prints)),
        "pages_without_words": int(np.count_nonzero(~eligible)), "generate_s": gen_s,
    }
    print(f"bench: {len(html):,} pages from {args.docs:,} originals, {len(truth.keys):,} true pairs; "
          f"generated in {gen_s:.1f} s", flush=True)

    # ---- exact duplicates: pages with equal text_hash
    groups: dict[int, list[int]] = collections.defaultdict(list)
    for i, f in enumerate(prints):
        groups[f.text_hash].append(i)
    n = len(html)
    exact_keys = np.array([a * n + b for ids in groups.values() for a, b in itertools.combinations(ids, 2)],
                          dtype=np.int64)
    exact = truth.score(exact_keys)
    result["exact"] = {"found": exact["found"], "precision": exact["precision"],
                       "recall_exact_copies": exact["recall_by_level"][0]["recall"],
                       "near_copy_pairs_merged": exact["correct"] - exact["recall_by_level"][0]["found"],
                       "false_pairs": exact["false_pairs"]}
    check(exact["recall_by_level"][0]["recall"] == 1.0, "text_hash finds every exact-copy pair")
    check(exact["found"] == exact["recall_by_level"][0]["found"], "text_hash pairs are exact copies only")

    # ---- the crawler's dedup step (crawl/dedup/rules.py), run as the job runs it
    dc = deltacrawl_pairs(prints, n, DELTACRAWL_MAX_HAMMING, args.min_jaccard)
    dcs = truth.score(dc["found"])
    some_html = html[: min(500, len(html))]
    result["deltacrawl_dedup"] = {
        "what": DELTACRAWL_LABEL.format(j=args.min_jaccard), "max_hamming": DELTACRAWL_MAX_HAMMING, "min_jaccard": args.min_jaccard,
        "candidates": dc["candidates"], "near_pairs": dc["near"], "exact_pairs": dc["exact"],
        "exact_pairs_not_near": dc["exact_not_near"], "band_buckets": dc["buckets"], "join_and_test_s": dc["seconds"],
        "simhash_candidates": dc["simhash_candidates"], "signature_candidates": dc["signature_candidates"],
        "near_pairs_both_tests_on_every_candidate": dc["near_both_ways"], "near_pairs_lost_by_band_rule": dc["lost_by_band_rule"],
        **{key: dcs[key] for key in ("found", "precision", "target_recall", "false_pairs", "false_pairs_same_site")},
        "recall_by_level": _recalls(dcs),
        "pages_timed": len(some_html),
        "fingerprint_of_html_us": us_per_item(lambda h: fp.fingerprint(fp.page_text(h)), some_html),
        "fingerprint_of_text_us": us_per_item(fp.fingerprint, texts[: len(some_html)]),
    }
    check(dcs["recall_by_level"][0]["recall"] == 1.0, "deltacrawl dedup finds every exact-copy pair")

    # ---- SimHash: band join + Hamming <= k, checked against all pairs
    width_ok = all(fp.bands(int(h)) == [(b, (int(h) >> (16 * b)) & 0xFFFF) for b in range(4)] for h in u[:500])
    check(width_ok, "crawl.dedup.fingerprint.bands cuts the bits this script's band join uses")
    t0 = time.perf_counter()
    candidates = band_join(u, eligible)
    band_join_s = time.perf_counter() - t0
    ham = hamming_of(u, candidates)
    sim_keys = candidates[ham <= args.k]
    quality = simhash_quality(u, truth, family, site, args.k)
    if args.k <= 3:
        check(np.array_equal(sim_keys, np.sort(quality["within_k"])),
              f"band join finds exactly the {len(quality['within_k']):,} pairs within {args.k} bits "
              "(brute force over all pairs)")
    sim = truth.score(sim_keys)
    uniform_expected = n * (n - 1) / 2 * (1 - (1 - 2 ** -16) ** 4)
    bucket_sizes = collections.Counter(b for h in u[eligible] for b in fp.bands(int(h)))
    result["simhash"] = {
        "k": args.k, "candidates": len(candidates), "candidates_if_uniform": uniform_expected,
        "largest_band_buckets": [c for _, c in bucket_sizes.most_common(3)], "band_join_s": band_join_s,
        **{key: sim[key] for key in ("found", "precision", "target_recall", "false_pairs", "false_pairs_same_site")},
        "recall_by_level": _recalls(sim),
        "distance_by_level": {str(k): v for k, v in quality["distance_by_level"].items()},
        "unrelated_median_distance": quality["unrelated_median_distance"],
        "unrelated_same_site_median_distance": quality["unrelated_same_site_median_distance"],
        "unrelated_pairs": quality["unrelated_pairs"], "k_sweep": quality["k_sweep"],
        "false_pairs_per_million_unrelated": sim["false_pairs"] / max(1, quality["unrelated_pairs"]) * 1e6,
    }
    result["simhash"]["k_for_target_recall"] = next(
        (r for r in quality["k_sweep"] if (r["target_recall"] or 0) >= TARGET_RECALL), None)

    # ---- MinHash: the peer (datasketch MinHashLSH) and confirmation of SimHash candidates
    peers = []
    sig_cache: dict[tuple[int, int], tuple[list, float]] = {}
    for sh in args.mh_shingles:
        sig_cache[(args.num_perm, sh)] = timed(lambda t: fp.minhash(t, args.num_perm, shingles=(sh,)), texts)
        sigs, us = sig_cache[(args.num_perm, sh)]
        for threshold in args.mh_threshold:
            cands, confirmed, seconds, (b, rows) = minhash_lsh_pairs(sigs, threshold, args.num_perm)
            for what, found in (("LSH candidates", cands), (f"LSH + est. J >= {threshold}", confirmed)):
                s = truth.score(found)
                peers.append({"shingles": sh, "threshold": threshold, "bands": b, "rows": rows,
                              "what": what, "found": s["found"],
                              "precision": s["precision"], "target_recall": s["target_recall"],
                              "recall_by_level": _recalls(s), "false_pairs": s["false_pairs"],
                              "lsh_s": seconds, "minhash_us_per_page": us})
    result["minhash_lsh"] = peers

    conf_key = (args.confirm_num_perm, 1)
    if conf_key not in sig_cache:
        sig_cache[conf_key] = timed(lambda t: fp.minhash(t, args.confirm_num_perm, shingles=(1,)), texts)
    conf_sigs = sig_cache[conf_key][0]
    sig_matrix = np.stack([m.hashvalues for m in conf_sigs])
    sample = candidates[:20000]
    t0 = time.perf_counter()
    for key in sample.tolist():  # per pair, as a job calling LeanMinHash.jaccard would
        conf_sigs[key // n].jaccard(conf_sigs[key % n])
    jaccard_us = (time.perf_counter() - t0) / max(1, len(sample)) * 1e6
    jac = jaccard_of(sig_matrix, candidates)
    tj = args.confirm_jaccard
    variants = [
        (f"band, Hamming <= {args.k}", ham <= args.k),
        (f"band, Hamming <= {args.k}, J >= {tj}", (ham <= args.k) & (jac >= tj)),
        (f"band, J >= {tj} (no Hamming test)", jac >= tj),
        (f"band, Hamming <= 12, J >= {tj}", (ham <= 12) & (jac >= tj)),
    ] + [(f"band, J >= {t}", jac >= t) for t in (0.5, 0.7, 0.8) if t != tj]
    confirm_rows = []
    for what, mask in variants:
        s = truth.score(candidates[mask])
        confirm_rows.append({"what": what, "found": s["found"], "precision": s["precision"],
                             "target_recall": s["target_recall"], "recall_by_level": _recalls(s),
                             "false_pairs": s["false_pairs"]})
    cand_levels = truth.level_of(candidates)
    true_j, false_j = jac[cand_levels > 0], jac[cand_levels < 0]
    result["confirmation"] = {
        "num_perm": args.confirm_num_perm, "jaccard": tj, "rows": confirm_rows,
        "minhash_us_per_page": None, "jaccard_us_per_candidate": jaccard_us,  # (timed with the rest below)
        "candidates_to_check": len(candidates),
        "near_copy_candidate_jaccard_p10": float(np.percentile(true_j, 10)) if len(true_j) else None,
        "unrelated_candidate_jaccard_max": float(false_j.max()) if len(false_j) else None,
        "unrelated_candidate_jaccard_p99": float(np.percentile(false_j, 99)) if len(false_j) else None,
    }

    # ---- feature sweep
    if not args.no_sweep:
        sweep = []
        for shingles, weighting in SWEEP:
            hs, us = timed(lambda t: fp.simhash(t, shingles=shingles, weighting=weighting), texts)
            uu = unsigned(hs)
            q = simhash_quality(uu, truth, family, site, args.k)
            cand = band_join(uu, eligible)
            banded = truth.score(cand[jaccard_of(sig_matrix, cand) >= tj])
            at = q["at_k"]
            need = next((r for r in q["k_sweep"] if (r["target_recall"] or 0) >= TARGET_RECALL), None)
            sweep.append({
                "shingles": list(shingles), "weighting": weighting, "us_per_page": us,
                "precision_at_k": at["precision"], "target_recall_at_k": at["target_recall"],
                "recall_at_k": {str(lev): at[f"recall_{lev}"] for lev in (0,) + LEVELS},
                "p90_distance_5pct": (q["distance_by_level"][5] or {}).get("p90"),
                "unrelated_median_distance": q["unrelated_median_distance"],
                "k_for_target": need["k"] if need else None,
                "precision_at_that_k": need["precision"] if need else None,
                "band_candidates": len(cand), "band_candidates_vs_uniform": len(cand) / uniform_expected,
                "band_J_precision": banded["precision"], "band_J_target_recall": banded["target_recall"],
            })
        result["feature_sweep"] = sweep

    # ---- timings
    some = texts[: len(some_html)]
    page_text_us = us_per_item(fp.page_text, some_html)
    fingerprint_us = us_per_item(fp.fingerprint, some)
    simhash_us = us_per_item(fp.simhash, some)
    text_hash_us = us_per_item(fp.text_hash, some)
    mh64_us = us_per_item(lambda t: fp.minhash(t, 64), some)
    mh128_us = us_per_item(lambda t: fp.minhash(t, 128), some)
    result["confirmation"]["minhash_us_per_page"] = (
        mh64_us if args.confirm_num_perm == 64 else mh128_us if args.confirm_num_perm == 128
        else us_per_item(lambda t: fp.minhash(t, args.confirm_num_perm), some))
    page50 = big_page(html)
    page50_text = fp.page_text(page50)
    text50 = (page50_text + " ") * (50 * 1024 // max(1, len(page50_text)) + 1)
    text50 = text50[:50 * 1024]
    result["timing"] = {
        "pages_timed": len(some), "mean_page_kb": float(np.mean([len(h.encode()) for h in some_html]) / 1024),
        "page_text_us": page_text_us, "fingerprint_us": fingerprint_us, "simhash_us": simhash_us,
        "text_hash_us": text_hash_us, "minhash64_us": mh64_us, "minhash128_us": mh128_us,
        "page_50kb": {"html_bytes": len(page50.encode()), "text_chars": len(page50_text),
                      "page_text_us": median_us(fp.page_text, page50, 30),
                      "fingerprint_us": median_us(fp.fingerprint, page50_text, 30),
                      "simhash_us": median_us(fp.simhash, page50_text, 30),
                      "minhash64_us": median_us(lambda t: fp.minhash(t, 64), page50_text, 30)},
        "text_50kb": {"chars": len(text50),
                      "fingerprint_us": median_us(fp.fingerprint, text50, 30),
                      "simhash_us": median_us(fp.simhash, text50, 30),
                      "minhash64_us": median_us(lambda t: fp.minhash(t, 64), text50, 30)},
    }
    result["seconds"] = time.perf_counter() - started

    def verdict(what: str, precision: float | None, recall: float | None) -> dict[str, Any]:
        return {"what": what, "precision": precision, "target_recall": recall,
                "met": (precision or 0) >= TARGET_PRECISION and (recall or 0) >= TARGET_RECALL}

    band_j = next(row for row in confirm_rows if row["what"].endswith("(no Hamming test)"))
    dcr = result["deltacrawl_dedup"]
    verdicts = [verdict(DELTACRAWL_LABEL.format(j=args.min_jaccard), dcr["precision"], dcr["target_recall"]),
                verdict(f"SimHash {fp.SIMHASH_WEIGHTING} 1-grams, 4 x 16 bands, Hamming <= {args.k}",
                        sim["precision"], sim["target_recall"]),
                verdict(f"SimHash band candidates + MinHash J >= {tj}", band_j["precision"], band_j["target_recall"])]
    need = result["simhash"]["k_for_target_recall"]
    if need:
        per_million = need["unrelated_within_k"] / max(1, quality["unrelated_pairs"]) * 1e6
        verdicts.append(verdict(f"SimHash Hamming <= {need['k']} over all pairs (a 4 x 16 band join cannot "
                                f"find these; {per_million:.1f} false pairs per million unrelated pairs, so "
                                "precision falls as the crawl grows)", need["precision"], need["target_recall"]))
    verdicts += [verdict(f"MinHashLSH {p['shingles']}-gram sets, threshold {p['threshold']} ({p['what']})",
                         p["precision"], p["target_recall"]) for p in peers if p["what"] != "LSH candidates"]
    result["targets"] = {"precision": TARGET_PRECISION, "recall": TARGET_RECALL, "verdicts": verdicts,
                         "simhash_k_met": verdicts[1]["met"], "deltacrawl_met": verdicts[0]["met"]}
    return finish(result, failures, args.out_json, report)


# =========================================================================== the report

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _levels(r: dict[str, Any]) -> str:
    return " ".join(f"{_pct(r.get(str(lev)))}" for lev in (0,) + LEVELS)


def report(r: dict[str, Any]) -> None:
    m, c = r["machine"], r["corpus"]
    print(f"\n== dedup quality ({m['date_utc']}, {m['nproc']} cores, load {m['loadavg_at_start']} -> "
          f"{m['loadavg_at_end']}, commit {m['git_commit']}, numpy {m['numpy']}, datasketch {m['datasketch']})")
    print(f"corpus: {c['pages']:,} pages ({', '.join(f'{k} {v:,}' for k, v in c['pages_by_kind'].items())}); "
          f"mean {c['mean_html_kb']:.1f} KB HTML, {c['mean_words']:.0f} words (min {c['min_words']}); "
          f"true pairs by level {c['pairs_by_level']}")
    e = r["exact"]
    print(f"exact (text_hash): {e['found']:,} pairs, precision {_pct(e['precision'])}, recall of exact copies "
          f"{_pct(e['recall_exact_copies'])}, near copies merged {e['near_copy_pairs_merged']}")
    d = r["deltacrawl_dedup"]
    print(f"\n{d['what']}: {d['candidates']:,} candidate pairs from {d['band_buckets']:,} band rows "
          f"(join + test {d['join_and_test_s']:.1f} s), {d['near_pairs']:,} near + {d['exact_pairs']:,} exact pairs "
          f"({d['exact_pairs_not_near']} exact only; candidates {d['simhash_candidates']:,} SimHash-band, "
          f"{d['signature_candidates']:,} MinHash-band; testing every candidate both ways would find "
          f"{d['near_pairs_lost_by_band_rule']} more near pairs): {d['found']:,} found, precision {_pct(d['precision'])}, "
          f"target recall (1-5 %) {_pct(d['target_recall'])}, false pairs {d['false_pairs']}")
    print("  recall by level  0 / 1 / 2 / 5 / 10 %: " + _levels(d["recall_by_level"]))
    print(f"  fingerprint per page (first {d['pages_timed']} pages, median of 3 passes): "
          f"fingerprint(page_text(html)) {d['fingerprint_of_html_us']:.0f} us, fingerprint(text) "
          f"{d['fingerprint_of_text_us']:.0f} us")
    s = r["simhash"]
    print(f"\nSimHash {r['simhash_features']} k={s['k']}: {s['candidates']:,} band candidates "
          f"({s['candidates'] / max(1e-9, s['candidates_if_uniform']):.0f}x what uniform fingerprints would give; "
          f"largest buckets {s['largest_band_buckets']}), {s['found']:,} pairs within k: precision "
          f"{_pct(s['precision'])}, target recall (1-5 %) {_pct(s['target_recall'])}, false pairs "
          f"{s['false_pairs']} ({s['false_pairs_same_site']} same site; "
          f"{s['false_pairs_per_million_unrelated']:.0f} per million unrelated pairs)")
    print("  recall by level  0 / 1 / 2 / 5 / 10 %: " + _levels(s["recall_by_level"]))
    print("  Hamming distance by level (median / p90 / max): " + ", ".join(
        f"{lev}%: {v['median']:.0f}/{v['p90']:.0f}/{v['max']}" for lev, v in s["distance_by_level"].items() if v))
    print(f"  unrelated pairs: {s['unrelated_pairs']:,}, median distance {s['unrelated_median_distance']} "
          f"(same site {s['unrelated_same_site_median_distance']})")
    print("  k   recall 0/1/2/5/10 %              target  unrelated<=k  precision")
    for row in s["k_sweep"]:
        if row["k"] in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16):
            print(f"  {row['k']:<3} {_levels({str(lv): row[f'recall_{lv}'] for lv in (0,) + LEVELS})}   "
                  f"{_pct(row['target_recall'])}  {row['unrelated_within_k']:>12,}  {_pct(row['precision'])}")
    need = s["k_for_target_recall"]
    print("  smallest k with target recall >= 0.90: " + (f"{need['k']} (precision there {_pct(need['precision'])})"
                                                        if need else "none up to 16"))
    print(f"\nMinHashLSH (datasketch) peer, {r['params']['num_perm']} perms, word-shingle sets:")
    print("  shingles threshold bands x rows  what                        found  precision  target  "
          "recall 0/1/2/5/10 %")
    for p in r["minhash_lsh"]:
        print(f"  {p['shingles']:>8} {p['threshold']:>9} {p['bands']:>5} x {p['rows']:<4}  {p['what']:<26} "
              f"{p['found']:>6,}  {_pct(p['precision'])}      {_pct(p['target_recall'])}  {_levels(p['recall_by_level'])}")
    conf = r["confirmation"]
    print(f"\nMinHash confirmation of SimHash band candidates ({conf['num_perm']} perms, word sets; "
          f"{conf['minhash_us_per_page']:.0f} us/page, {conf['jaccard_us_per_candidate']:.1f} us/candidate, "
          f"{conf['candidates_to_check']:,} candidates):")
    for row in conf["rows"]:
        print(f"  {row['what']:<36} {row['found']:>6,}  precision {_pct(row['precision'])}  target "
              f"{_pct(row['target_recall'])}  recall {_levels(row['recall_by_level'])}  false {row['false_pairs']}")
    print(f"  Jaccard of near-copy candidates p10 {_pct(conf['near_copy_candidate_jaccard_p10'])}; of unrelated "
          f"candidates p99 {_pct(conf['unrelated_candidate_jaccard_p99'])}, max {_pct(conf['unrelated_candidate_jaccard_max'])}")
    if "feature_sweep" in r:
        print(f"\nSimHash feature sweep (k={s['k']}):")
        print("  shingles weighting  us/page  prec@k  target@k  recall 0/1/2/5/10 @k        p90d@5%  unrel.med  "
              "k->0.9 (prec)   band cand (x unif)  band+J prec/target")
        for w in r["feature_sweep"]:
            need = f"{w['k_for_target']} ({_pct(w['precision_at_that_k'])})" if w["k_for_target"] is not None else "-"
            print(f"  {str(w['shingles']):<8} {w['weighting']:<9} {w['us_per_page']:>7.0f}  {_pct(w['precision_at_k'])}  "
                  f"{_pct(w['target_recall_at_k'])}     {_levels(w['recall_at_k'])}  {fmt(w['p90_distance_5pct'])}"
                  f"     {fmt(w['unrelated_median_distance'])}     {need:<14} {w['band_candidates']:>7,} ({w['band_candidates_vs_uniform']:.0f}x)"
                  f"     {_pct(w['band_J_precision'])}/{_pct(w['band_J_target_recall'])}")
    t = r["timing"]
    print(f"\ntiming per page (first {t['pages_timed']} pages, mean {t['mean_page_kb']:.1f} KB; median of 3 passes): "
          f"page_text {t['page_text_us']:.0f} us, fingerprint (text_hash + simhash + words) "
          f"{t['fingerprint_us']:.0f} us, simhash {t['simhash_us']:.0f} us, text_hash {t['text_hash_us']:.0f} us, "
          f"minhash 64 perms {t['minhash64_us']:.0f} us, 128 perms {t['minhash128_us']:.0f} us")
    p50, x50 = t["page_50kb"], t["text_50kb"]
    print(f"50 KB HTML page ({p50['html_bytes']:,} bytes, {p50['text_chars']:,} text chars): page_text "
          f"{p50['page_text_us']:.0f} us, fingerprint {p50['fingerprint_us']:.0f} us, simhash {p50['simhash_us']:.0f} us, "
          f"minhash64 {p50['minhash64_us']:.0f} us")
    print(f"50 KB of text ({x50['chars']:,} chars): fingerprint {x50['fingerprint_us']:.0f} us, simhash "
          f"{x50['simhash_us']:.0f} us, minhash64 {x50['minhash64_us']:.0f} us")
    print(f"\ntarget: precision >= {TARGET_PRECISION} and recall >= {TARGET_RECALL} for near copies with 1-5 % edits")
    for v in r["targets"]["verdicts"]:
        print(f"  {'met   ' if v['met'] else 'MISSED'} {v['what']}: precision {_pct(v['precision'])}, "
              f"recall {_pct(v['target_recall'])}")
    print(f"whole run {r['seconds']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
