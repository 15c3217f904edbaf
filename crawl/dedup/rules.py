"""Near-duplicate detection as pure functions: band rows, the duplicate test, the canonical rule.

Every fetched page with text carries three fingerprints (crawl/dedup/fingerprint.py, computed in the
parser child): ``text_hash`` (exact duplicates of the normalised text), a 64-bit ``simhash`` and
a 64-permutation MinHash ``signature`` of its word set.

Candidates come from an equi-join on band rows, so no pair of pages is ever compared unless
they share a band:

  * SimHash bands 0..3: the fingerprint cut into 4 x 16 bits. Two fingerprints within 3 bits
    share at least one band (pigeonhole; Manku, Jain & Das Sarma, WWW 2007), so every pair
    within ``dedup.max_hamming`` <= 3 is found.
  * MinHash bands 4..11: the signature cut into 8 bands of 8 values (LSH, Broder 1997; Leskovec,
    Rajaraman & Ullman ch. 3); a pair with Jaccard similarity s shares a band with probability
    1 - (1 - s^8)^8: 0.97 at s = 0.8, 0.57 at s = 0.7.

Why both: on the labelled corpus of bench/dedup_quality.py, SimHash within 3 bits finds only
45 % of the near copies with 1-5 % of their words edited (their median distance is 3-5 bits),
while MinHash on word sets finds 99-100 % at precision 1.0. A candidate pair is a duplicate when
its SimHash distance is within ``max_hamming`` OR its estimated Jaccard similarity (share of
equal signature values) reaches ``min_jaccard``: ``confirm`` says which test applies to a
candidate. A pair that shares only a SimHash band needs the Hamming test: against 5 M pages a
16-bit band value is shared by chance with ~76 pages per band, so nearly all SimHash candidates
are random pages 20-40 bits away, and jobs/dedup.py rejects them in the join, without reading a
signature. A pair that shares a MinHash band (a 64-bit hash of 8 values: chance collisions are
negligible) gets both tests. On bench/dedup_quality.py's corpus this rule finds 2,388 of the
2,406 near pairs that testing every candidate both ways finds (recall over 1-5 % edits 0.994
instead of 0.998, precision 1.000 either way; BENCHMARKS.md).

Canonical rule, one per duplicate group: the page fetched first wins (so an established page
keeps its place and a re-run sees the same winner); ties — pages first fetched in the same
instant, typically never — go to the higher score, then the shorter URL, then the URL itself.
A duplicate's ``dup_of`` is the best page among its own duplicates, followed to the end of any
chain (jobs/dedup.py ``_resolve_chains``): it always names a canonical page.
"""
from __future__ import annotations

import hashlib
from typing import Iterable

from crawl.rule_ops import NUMPY_OPS, nulls_first_key

SIMHASH_BANDS = 4
SIGNATURE_BANDS = 8
SIGNATURE_ROWS = 8
BANDS_PER_PAGE = SIMHASH_BANDS + SIGNATURE_BANDS  # band rows of a page: at most this many
_VALUES = SIGNATURE_BANDS * SIGNATURE_ROWS  # = crawl.dedup.fingerprint.SIGNATURE_PERMUTATIONS
_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def simhash_bands(simhash: int) -> list[tuple[int, int]]:
    """[(band 0..3, 16-bit value)] of a SimHash."""
    u = simhash & _MASK64
    return [(i, (u >> (16 * i)) & 0xFFFF) for i in range(SIMHASH_BANDS)]


def signature_bands(signature: bytes) -> list[tuple[int, int]]:
    """[(band 4..11, signed 64-bit hash of the band's 8 MinHash values)] of a signature."""
    if len(signature) != _VALUES * 8:
        raise ValueError(f"a signature has {_VALUES} 8-byte values, got {len(signature)} bytes")
    width = SIGNATURE_ROWS * 8
    return [(SIMHASH_BANDS + b, _signed(int.from_bytes(
                hashlib.blake2b(signature[b * width:(b + 1) * width], digest_size=8).digest(), "big")))
            for b in range(SIGNATURE_BANDS)]


def band_rows(simhash: int | None, signature: bytes | None) -> list[tuple[int, int]]:
    """All band rows of a page; none for a page without text (simhash None): empty pages all
    look alike and would make one giant candidate set."""
    if simhash is None:
        return []
    rows = simhash_bands(simhash)
    if signature:
        rows += signature_bands(signature)
    return rows


def hamming(a, b, ops=NUMPY_OPS):
    """Bits in which two SimHashes (signed 64-bit) differ; Python ints, or Columns with
    ``ops`` = jobs.engine.column_ops.COLUMN_OPS (jobs/dedup.py decides SimHash candidates in the join)."""
    return ops.bit_count(ops.xor(a, b))


def jaccard_estimate(a: bytes | None, b: bytes | None) -> float:
    """Share of equal MinHash values: an unbiased estimate of the word sets' Jaccard similarity."""
    if not a or not b or len(a) != len(b):
        return 0.0
    equal = sum(1 for i in range(0, len(a), 8) if a[i:i + 8] == b[i:i + 8])
    return equal / (len(a) // 8)


def is_near_duplicate(simhash_a: int | None, signature_a: bytes | None, simhash_b: int | None,
                      signature_b: bytes | None, max_hamming: int, min_jaccard: float) -> bool:
    if simhash_a is None or simhash_b is None:
        return False
    if hamming(simhash_a, simhash_b) <= max_hamming:
        return True
    return jaccard_estimate(signature_a, signature_b) >= min_jaccard


def confirm(band: int, simhash_a: int | None, signature_a: bytes | None, simhash_b: int | None,
            signature_b: bytes | None, max_hamming: int, min_jaccard: float) -> bool:
    """Is a candidate pair that shares band ``band`` a near duplicate? SimHash bands (0..3):
    within ``max_hamming`` bits; MinHash bands: that, or estimated Jaccard >= ``min_jaccard``.
    (A pair sharing bands of both kinds is a duplicate if either test says so.)"""
    if band < SIMHASH_BANDS:
        return simhash_a is not None and simhash_b is not None and hamming(simhash_a, simhash_b) <= max_hamming
    return is_near_duplicate(simhash_a, signature_a, simhash_b, signature_b, max_hamming, min_jaccard)


# What a duplicate matched by (dedup's ``match`` column). A pair found both ways counts as exact:
# both paths take the smaller of the two, so EXACT must sort before NEAR.
EXACT = "exact"
NEAR = "near"
assert EXACT < NEAR


def first_fetched_rule(fetched_at, known_first, ops=NUMPY_OPS):
    """When a segment's page was first fetched: dedup/pages' first_fetched_at if the page is
    there already (``known_first``), else this fetch."""
    return ops.coalesce(known_first, fetched_at)


def canonical_key(first_fetched_at, score, url, ops=NUMPY_OPS) -> tuple:
    """The canonical rule's key, smallest wins: (first fetched, −score, length of the URL, URL).
    The one definition: jobs/dedup.py compares it as a Spark struct (``ops`` =
    jobs.engine.column_ops.COLUMN_OPS), crawl/dedup/in_memory.py as a tuple with nulls first
    (crawl.rule_ops.nulls_first_key), as Spark compares a struct's fields."""
    return (first_fetched_at, ops.neg(score), ops.length(url), url)


def best_of(candidates: Iterable[tuple[float, float, str]]) -> str:
    """The canonical URL among (first_fetched_at, score, url) triples."""
    return min(candidates, key=lambda c: nulls_first_key(canonical_key(*c)))[2]


def is_cool_band(holders, max_candidates: int):
    """A band value held by at most ``max_candidates`` rows (the segment's and the table's) is
    joined; a hotter one (boilerplate-only pages) is left out. Plain numbers or Columns."""
    return holders <= max_candidates


def band_collisions(new_holders, holders):
    """Candidate pairs one cool band value makes: each of the segment's rows holding it with
    every other row holding it (a pair counts once per band it shares). Plain numbers or Columns."""
    return new_holders * (holders - 1)
