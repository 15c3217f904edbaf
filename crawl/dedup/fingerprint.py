"""Content fingerprints of fetched pages: the exact-duplicate key and the 64-bit SimHash.

Plain values in, plain values out (ints, strings); no Spark. The dedup step joins on them:

  * ``text_hash``: exact duplicates. A signed 64-bit blake2b of ``normalise_text`` (fits a
    Spark LongType), so two pages are "the same" when their visible text is the same up to
    markup, whitespace, case, punctuation and digits (timestamps, counters, dates).
  * ``simhash``: near duplicates. A 64-bit SimHash (Charikar, "Similarity estimation
    techniques from rounding algorithms", STOC 2002) of weighted word features, as used for
    web-crawl dedup by Manku, Jain and Das Sarma ("Detecting near-duplicates for web
    crawling", WWW 2007): two pages are near duplicates when their fingerprints differ in at
    most k = 3 of 64 bits. ``bands`` cuts a fingerprint into 4 x 16 bits; by the pigeonhole
    principle two fingerprints within 3 bits agree on at least one whole band, so an
    equi-join on (band_index, band_value) finds every candidate pair, and ``hamming`` then
    decides. Measured (bench/dedup_quality.py): k = 3 is precise but catches only about
    half of the copies with 1-5 % of their words edited; see BENCHMARKS.md.
  * ``minhash``: a datasketch MinHash of the set of words, for confirming candidates or
    for MinHash LSH (the benchmark compares both with the SimHash route).

Signed values: Spark has no unsigned 64-bit type, so both hashes are returned as signed
64-bit ints (two's complement of the unsigned value). ``bands`` and ``hamming`` accept
either form.

Empty text: a page with no words (empty body, only scripts/markup, only punctuation or
symbols) has ``text_hash == EMPTY_TEXT_HASH`` and ``simhash == EMPTY_SIMHASH == 0``, and
``fingerprint(...).words == 0``. All such pages collide in every band — the "hot band" the
Spark job has to handle: it should skip pages with ``words == 0`` (or fewer than a small
minimum) rather than declare every empty page a duplicate of every other.

Stability: the hashes are defined by this module alone (blake2b; a polynomial word hash
with the MurmurHash3 64-bit finaliser; fixed constants), not by Python's per-process
``hash()``, so they are equal on every machine. Text normalisation uses the Unicode tables
of the running Python (``unicodedata.unidata_version``); only characters assigned in a newer
Unicode version can normalise differently on another Python minor version.

Speed: the normaliser and the SimHash are vectorised with numpy (one pass over the code
points, word hashes by segmented sums, feature bits by ``unpackbits``), because this runs
on every fetched page; bench/dedup_quality.py reports microseconds per 50 KB page. The
normaliser's array work, the word hashes and the word-set MinHash signature are computed in C
when crawl/dedup/_fasthash.c is built (the same values; ``_normalise_array``, ``_word_hashes_numpy``
and ``_signature_of_numpy`` are the references the tests compare them with): ~3x faster.
"""
from __future__ import annotations

import hashlib
import sys
import unicodedata
from typing import Any, NamedTuple

import numpy as np

from crawl import native

__all__ = [
    "EMPTY_SIMHASH", "EMPTY_TEXT_HASH", "SIMHASH_MAX_CHARS", "SIMHASH_SHINGLES", "SIMHASH_WEIGHTING",
    "TextFingerprint", "bands", "fingerprint", "hamming", "minhash", "normalise_text", "page_text",
    "simhash", "text_hash",
]

# Tags whose content is never visible text: scripts, styles, the no-script fallback (a
# crawler is a script-less browser, but the fallback is usually "please enable JavaScript"
# boilerplate that would make unrelated pages look alike), inert templates, and SVG
# drawings (their <text> nodes are labels, not prose).
INVISIBLE_TAGS = ("script", "style", "noscript", "template", "svg")

# Feature choice for the SimHash, measured with bench/dedup_quality.py (BENCHMARKS.md,
# "Dedup quality"; 3,814 pages, English-like word frequencies): word 1-grams weighted
# 1 + ln tf. Raw tf lets the function words that every page shares dominate the vector:
# unrelated pages came out a median 10 bits apart (22 with 1 + ln tf), precision at k = 3
# fell to 0.05 and the band join returned 29 % of all pairs as candidates. 2- and 3-grams
# push near copies apart (p90 distance 13-15 bits at 5 % edits; recall at k = 3 below 0.1).
# Changing either value changes every stored fingerprint: do it only together with a
# re-fingerprinting of the crawldb.
SIMHASH_SHINGLES: tuple[int, ...] = (1,)
SIMHASH_WEIGHTING = "log"

# Only the first SIMHASH_MAX_CHARS characters of a text are fingerprinted by ``simhash``
# and ``minhash``, which bounds time and memory on huge pages (a 10 MiB body); a page's
# near-duplicate identity is settled long before that. ``text_hash`` reads all of it.
SIMHASH_MAX_CHARS = 1_000_000

EMPTY_SIMHASH = 0

_MASK64 = (1 << 64) - 1
_SPACE = 32
_ZERO = 48  # "0"


def _signed64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


# --------------------------------------------------------------------------------------------
# Visible text
# --------------------------------------------------------------------------------------------

def page_text(html: str | bytes, tree: Any = None) -> str:
    """The visible text of an HTML page: the ``<body>`` text without script, style,
    noscript, template and svg content, whitespace collapsed to single spaces.

    Text nodes are joined with a space, so block elements never glue words together
    ("Home</a><a>About" gives "Home About"); the price is that markup inside a word
    (``wo<b>rd</b>``) splits it. ``bytes`` are decoded as UTF-8 with replacement (decode
    with crawl.parse.page.decode_html first when the charset is known). Never raises: anything
    the parser cannot handle gives ``""``.

    ``tree``: the page already parsed from ``html`` by selectolax's LexborHTMLParser (so a
    caller that also wants its links parses it once). It is changed: the invisible elements are
    removed from it, so read everything else from it first.

    The crawler's own parse (crawl.parse.page.parse_page) calls ``visible_text``, which raises, and
    records a failure as the page's parse_error instead of an empty text nobody can see.
    """
    try:
        return visible_text(html, tree)
    except Exception:  # noqa: BLE001 — documented above: "" for callers that want no exception
        return ""


def visible_text(html: str | bytes, tree: Any = None, collapse_whitespace: bool = True) -> str:
    """``page_text``, but a failure of the HTML parser raises instead of giving ``""``.

    ``collapse_whitespace=False`` leaves the text nodes' white space as it is (they are still
    joined with a space): for a caller that only fingerprints the text, since ``fingerprint``
    does not depend on runs of white space, and collapsing them costs more than parsing the page
    (0.15 ms of a 50 KB page, docs/decisions.md "After the first cuts")."""
    if tree is None:
        if isinstance(html, (bytes, bytearray, memoryview)):
            html = bytes(html).decode("utf-8", "replace")
        if not isinstance(html, str) or not html:
            return ""
        from selectolax.lexbor import LexborHTMLParser  # imported here: numpy-only users skip it

        tree = LexborHTMLParser(html)
    tree.strip_tags(list(INVISIBLE_TAGS))
    node = tree.body if tree.body is not None else tree.root
    if node is None:
        return ""
    text = node.text(separator=" ")
    return " ".join(text.split()) if collapse_whitespace else text


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------

_CLASS_SEP, _CLASS_WORD, _CLASS_DIGIT = 0, 1, 2
_BMP_CLASSES: np.ndarray | None = None


def _char_class(ch: str) -> int:
    cat = unicodedata.category(ch)
    if cat == "Nd":
        return _CLASS_DIGIT
    if cat[0] in "LMN":  # letters, combining marks (Indic vowel signs), other numbers
        return _CLASS_WORD
    return _CLASS_SEP


def _bmp_classes() -> np.ndarray:
    # Built once per process (~0.1 s): a class per Basic Multilingual Plane code point, so
    # classifying a page is one numpy gather instead of a regex over every character.
    global _BMP_CLASSES
    if _BMP_CLASSES is None:
        table = np.zeros(0x10000, dtype=np.uint8)
        for cp in range(0x10000):
            table[cp] = _char_class(chr(cp))
        _BMP_CLASSES = table
    return _BMP_CLASSES


def _normalised_codepoints(text: str) -> np.ndarray:
    """``normalise_text(text)`` as a uint32 array of code points (see there)."""
    if not text:
        return np.zeros(0, dtype=np.uint32)
    # NFKC, then case folding, then NFKC again: Unicode's "compatibility caseless match"
    # (Unicode Standard, section 3.13, D146) — case folding can un-normalise a string.
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    if _FASTHASH is not None:
        out = _FASTHASH.normalise(cps, _bmp_classes())
        if out is not None:  # None: code points beyond the BMP, classified below
            return np.frombuffer(out, dtype=np.uint32)
    return _normalise_array(cps)


def _normalise_array(cps: np.ndarray) -> np.ndarray:
    """The array part of _normalised_codepoints in numpy (crawl/dedup/_fasthash.c normalise is its
    copy in C; tests/test_fingerprint.py compares them)."""
    classes = np.empty(len(cps), dtype=np.uint8)
    small = cps < 0x10000
    classes[small] = _bmp_classes()[cps[small]]
    if not small.all():  # astral planes (emoji, rare CJK): few distinct code points per page
        big = np.flatnonzero(~small)
        uniq, inverse = np.unique(cps[big], return_inverse=True)
        classes[big] = np.array([_char_class(chr(int(c))) for c in uniq], dtype=np.uint8)[inverse]
    is_sep = classes == _CLASS_SEP
    is_digit = classes == _CLASS_DIGIT
    # Keep a character unless it continues a run of separators or a run of digits (both
    # runs collapse to one character), and drop separators at either end.
    drop = np.zeros(len(cps), dtype=bool)
    drop[1:] = (is_sep[1:] & is_sep[:-1]) | (is_digit[1:] & is_digit[:-1])
    out = cps.copy()
    out[is_sep] = _SPACE
    out[is_digit] = _ZERO
    out = out[~drop]
    if len(out) and out[0] == _SPACE:
        out = out[1:]
    if len(out) and out[-1] == _SPACE:
        out = out[:-1]
    # A number written with separators ("2024-03-05 10:32", "1,024", "3.5 %") is now a
    # sequence of "0" words; merge it into one, so that "987 views" and "1,024 views" (or
    # "10:32" and "10:32:07") normalise alike. A "0" word is one character between spaces.
    if len(out) > 2:
        is_space = out == _SPACE
        zero_word = out == _ZERO
        zero_word[1:] &= is_space[:-1]
        zero_word[:-1] &= is_space[1:]
        repeat = np.zeros(len(out), dtype=bool)
        repeat[2:] = zero_word[2:] & zero_word[:-2]   # "0 0": the second "0" ...
        repeat[:-1] |= repeat[1:]                     # ... and the space before it go
        out = out[~repeat]
    return out


def normalise_text(text: str) -> str:
    """The text the fingerprints are computed from: words separated by single spaces.

    1. Unicode NFKC and case folding (``"ﬁ"`` -> ``"fi"``, full-width -> ASCII, ``"Straße"``
       -> ``"strasse"``);
    2. every maximal run of decimal digits becomes one ``"0"``: dates, times, counters,
       view counts and session numbers change on every fetch of an otherwise unchanged
       page and must not defeat exact dedup. The price: pages that differ *only* in
       numbers (a price list, a calendar day) count as duplicates — for a crawler's dedup
       that is mostly what one wants (such pages are typically traps);
    3. every character that is not a letter, combining mark or number (punctuation,
       symbols, emoji, underscores, whitespace, control characters) separates words;
    4. separators collapse to one space, none at either end;
    5. consecutive words that are just ``"0"`` merge into one: a number written with
       separators ("1,024", "2024-03-05 10:32", "3.5 %") is one ``"0"`` whatever its
       format or size ("987 views" and "1,024 views" agree). Digits inside a word stay a
       part of it (``"mp3"`` -> ``"mp0"``).

    ``"Posted 2024-03-05 10:32 — 1,024 views!"`` -> ``"posted 0 views"``.
    """
    if not isinstance(text, str):
        return ""
    return _normalised_codepoints(text).tobytes().decode("utf-32-le")


def text_hash(text: str) -> int:
    """Exact-duplicate key: blake2b (8-byte digest) of the UTF-8 ``normalise_text(text)``,
    as a signed big-endian 64-bit int. Text without words hashes to ``EMPTY_TEXT_HASH``."""
    return _text_hash_of(normalise_text(text))


def _text_hash_of(normalised: str) -> int:
    digest = hashlib.blake2b(normalised.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


EMPTY_TEXT_HASH = _text_hash_of("")


# --------------------------------------------------------------------------------------------
# Word features
# --------------------------------------------------------------------------------------------

# Word hash: a polynomial over the word's code points, sum(c_i * P^(i+1)) mod 2^64 for
# i = 0.. len-1, avalanched by the MurmurHash3 64-bit finaliser (fmix64). P is the 64-bit
# FNV prime: odd, hence invertible mod 2^64, which lets all words of a page be hashed at
# once from one prefix sum over the page (Karp and Rabin 1987): the sum over a word is a
# difference of two prefix sums, shifted back to the word's start by P^-start.
_P = 0x100000001B3
_P_INV = pow(_P, -1, 1 << 64)
_POW = np.ones(1, dtype=np.uint64)      # P^i, grown on demand (at most SIMHASH_MAX_CHARS + 1)
_POW_INV = np.ones(1, dtype=np.uint64)  # P^-i


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(P^i, P^-i) mod 2^64 for i = 0..n at least."""
    global _POW, _POW_INV
    if len(_POW) <= n:
        size = max(1 << 16, 1 << n.bit_length())
        step = np.empty(size, dtype=np.uint64)
        step[0] = 1
        step[1:] = _P
        pow_ = np.cumprod(step)  # uint64 products wrap: arithmetic mod 2^64, as intended
        step[1:] = _P_INV
        _POW, _POW_INV = pow_, np.cumprod(step)
    return _POW, _POW_INV


# Odd multipliers that make a shingle hash depend on word order.
_SHINGLE_MULT = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                          0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD], dtype=np.uint64)
_SHINGLE_SEED = np.array([0, 0x8CB92BA72F3D8DD7, 0x5851F42D4C957F2D, 0x14057B7EF767814F,
                          0xA0761D6478BD642F], dtype=np.uint64)


def _fmix64(h: np.ndarray) -> np.ndarray:
    # MurmurHash3's 64-bit finaliser: a bijection whose output bits each depend on every
    # input bit — SimHash needs every feature bit to be an unbiased coin (Charikar 2002).
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def _word_hashes(cps: np.ndarray) -> np.ndarray:
    """One uint64 hash per word of a normalised code-point array (single spaces, no space
    at either end)."""
    if _FASTHASH is not None:
        return np.frombuffer(_FASTHASH.word_hashes(np.ascontiguousarray(cps, dtype=np.uint32), _P), dtype=np.uint64)
    return _word_hashes_numpy(cps)


def _word_hashes_numpy(cps: np.ndarray) -> np.ndarray:
    """_word_hashes in numpy: the reference (crawl/dedup/_fasthash.c word_hashes is its copy in C)."""
    n = len(cps)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    is_space = cps == _SPACE
    start = ~is_space
    start[1:] &= is_space[:-1]
    starts = np.flatnonzero(start)
    ends = np.append(starts[1:], n)  # a word's segment runs to the next word: spaces weigh 0
    pow_, pow_inv = _powers(n + 1)
    values = cps.astype(np.uint64)
    values[is_space] = 0
    values *= pow_[1:n + 1]
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(values, out=prefix[1:])
    return _fmix64((prefix[ends] - prefix[starts]) * pow_inv[starts])


def _features(words: np.ndarray, shingles: tuple[int, ...]) -> np.ndarray:
    """Feature hashes: every word ``w``-gram for each ``w`` in ``shingles``; a text shorter
    than ``w`` words gives one ``w``-gram feature of all its words."""
    parts = []
    n = len(words)
    for w in shingles:
        if n == 0:
            break
        width = min(w, n)
        if width == 1 and w == 1:
            parts.append(words)
            continue
        acc = np.full(n - width + 1, _SHINGLE_SEED[min(w, len(_SHINGLE_SEED) - 1)], dtype=np.uint64)
        for j in range(width):
            acc = acc + words[j:n - width + 1 + j] * _SHINGLE_MULT[j % len(_SHINGLE_MULT)]
        parts.append(_fmix64(acc))
    if not parts:
        return np.zeros(0, dtype=np.uint64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


_WEIGHT_SCALE = float(1 << 20)


def _weights(counts: np.ndarray, weighting: str) -> np.ndarray:
    if weighting == "tf":
        return counts.astype(np.float64)
    if weighting == "log":  # sublinear tf (Salton & Buckley 1988): 1 + ln tf
        return 1.0 + np.log(counts)
    if weighting == "sqrt":
        return np.sqrt(counts.astype(np.float64))
    if weighting == "binary":
        return np.ones(len(counts), dtype=np.float64)
    raise ValueError(f"unknown weighting {weighting!r}: expected 'tf', 'sqrt', 'log' or 'binary'")


def _simhash_of(features: np.ndarray, weighting: str) -> int:
    if len(features) == 0:
        return EMPTY_SIMHASH
    unique, counts = np.unique(features, return_counts=True)
    # Weights rounded to multiples of 2^-20: every partial sum is then an integer below 2^53,
    # exact in float64 whatever order BLAS adds in, so a near-tie bit cannot come out
    # differently on another CPU (the fingerprint must be the same on every machine).
    weights = np.round(_weights(counts, weighting) * _WEIGHT_SCALE)
    # Charikar's rounding: bit j is set when the features with bit j set outweigh those
    # without (ties: not set). unpackbits on the little-endian bytes puts bit j of each
    # hash in column j.
    column_sums = np.zeros(64, dtype=np.float64)
    chunk = 1 << 13  # bounds the (features x 64) float64 bit matrix to 4 MiB
    for lo in range(0, len(unique), chunk):
        block = unique[lo:lo + chunk].astype("<u8").view(np.uint8).reshape(-1, 8)
        bits = np.unpackbits(block, axis=1, bitorder="little").astype(np.float64)
        column_sums += weights[lo:lo + chunk] @ bits
    set_bits = 2.0 * column_sums > weights.sum()
    value = int.from_bytes(np.packbits(set_bits, bitorder="little").tobytes(), "little")
    return _signed64(value)


def simhash(text: str, *, shingles: tuple[int, ...] = SIMHASH_SHINGLES,
            weighting: str = SIMHASH_WEIGHTING) -> int:
    """64-bit SimHash of the normalised words of ``text``, as a signed 64-bit int.

    Features are word ``w``-grams for each ``w`` in ``shingles``, each weighted by its
    count in the page (``weighting``: ``"log"`` = 1 + ln tf, ``"tf"``, ``"sqrt"``,
    ``"binary"``). The
    keyword arguments exist for bench/dedup_quality.py's feature sweep; stored fingerprints
    must use the defaults (``SIMHASH_SHINGLES``, ``SIMHASH_WEIGHTING``). Text without words
    gives ``EMPTY_SIMHASH`` (0). Only the first ``SIMHASH_MAX_CHARS`` characters count.
    """
    if not isinstance(text, str):
        return EMPTY_SIMHASH
    words = _word_hashes(_normalised_codepoints(text[:SIMHASH_MAX_CHARS]))
    return _simhash_of(_features(words, shingles), weighting)


class TextFingerprint(NamedTuple):
    """Everything the dedup step stores about a page's text (one normalisation pass)."""
    text_hash: int   # exact-duplicate key, signed 64-bit
    simhash: int     # near-duplicate fingerprint, signed 64-bit; 0 when words == 0
    words: int       # number of normalised words; 0 means "no text", skip it in dedup
    signature: bytes | None = None  # MinHash of the word set (``word_set_signature``); None without words


SIGNATURE_PERMUTATIONS = 64
_MERSENNE61 = np.uint64((1 << 61) - 1)
_MAX32 = np.uint64((1 << 32) - 1)
_SIGNATURE_PERMS: np.ndarray | None = None


def _signature_permutations() -> np.ndarray:
    """(a, b) of the 64 permutations h -> (a h + b) mod (2^61 - 1), drawn as datasketch's legacy
    scheme draws them (seed 1). Built here: importing datasketch pulls in scipy, too heavy for
    the memory-limited parser child this runs in."""
    global _SIGNATURE_PERMS
    if _SIGNATURE_PERMS is None:
        gen = np.random.RandomState(1)
        _SIGNATURE_PERMS = np.array([(gen.randint(1, _MERSENNE61, dtype=np.uint64),
                                      gen.randint(0, _MERSENNE61, dtype=np.uint64))
                                     for _ in range(SIGNATURE_PERMUTATIONS)], dtype=np.uint64).T
    return _SIGNATURE_PERMS


# crawl/dedup/_fasthash.c reads and writes native-order integers: little-endian, as "<u4" above
_FASTHASH = native.load("_fasthash") if sys.byteorder == "little" else None
_SIGNATURE_AB: tuple[bytes, bytes] | None = None


def _signature_of(words: np.ndarray) -> bytes | None:
    """MinHash (Broder 1997) of a set of word hashes: 64 uint64 values, as bytes. In C when
    crawl.dedup._fasthash is built (the same bytes, several times faster: no np.unique, no 64-bit
    division), else _signature_of_numpy."""
    global _SIGNATURE_AB
    if len(words) == 0:
        return None
    if _FASTHASH is None:
        return _signature_of_numpy(words)
    if _SIGNATURE_AB is None:
        a, b = _signature_permutations()
        _SIGNATURE_AB = (np.ascontiguousarray(a).tobytes(), np.ascontiguousarray(b).tobytes())
    return _FASTHASH.minhash(np.ascontiguousarray(words, dtype=np.uint64), *_SIGNATURE_AB)


def _signature_of_numpy(words: np.ndarray) -> bytes | None:
    """_signature_of in numpy: the reference (tests/test_fingerprint.py compares the two)."""
    if len(words) == 0:
        return None
    hv = np.unique(words & _MAX32)
    a, b = _signature_permutations()
    out = np.full(SIGNATURE_PERMUTATIONS, _MAX32, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for lo in range(0, len(hv), 4096):  # bounds the (words x 64) matrix to 2 MiB
            phv = np.bitwise_and((hv[lo:lo + 4096, None] * a + b) % _MERSENNE61, _MAX32)
            np.minimum(out, phv.min(axis=0), out=out)
    return out.tobytes()


def word_set_signature(text: str) -> bytes | None:
    """The 64-permutation MinHash of the set of normalised words of ``text`` (bytes of 64
    uint64), or None for text without words. Two pages' signatures agree in about a Jaccard
    share of their 64 positions: the near-duplicate test that survives 1-10 % edits
    (bench/dedup_quality.py), and the per-host trap signal (crawl/crawldb/discovery.py)."""
    if not isinstance(text, str):
        return None
    return _signature_of(_word_hashes(_normalised_codepoints(text[:SIMHASH_MAX_CHARS])))


def fingerprint(text: str) -> TextFingerprint:
    """``text_hash``, ``simhash``, the word count and the word-set signature of ``text``,
    normalising it once.

    Runs of white space in ``text`` do not change the result: normalisation turns every run of
    separators into one space (white space is a separator before and after NFKC and case folding,
    and never composes with a neighbour), and a text too long for the SimHash is cut only after
    its white space is collapsed. So ``fingerprint(t) == fingerprint(" ".join(t.split()))``
    (tests/test_fingerprint.py), and a caller may pass uncollapsed text."""
    if not isinstance(text, str):
        text = ""
    if len(text) > SIMHASH_MAX_CHARS:
        text = " ".join(text.split())  # the cut below counts the collapsed text's characters
    cps = _normalised_codepoints(text)
    n_words = int(np.count_nonzero(cps == _SPACE)) + 1 if len(cps) else 0  # single spaces
    if len(text) <= SIMHASH_MAX_CHARS:
        words = _word_hashes(cps)
        sh = _simhash_of(_features(words, SIMHASH_SHINGLES), SIMHASH_WEIGHTING)
        sig = _signature_of(words)
    else:
        sh = simhash(text)
        sig = word_set_signature(text)
    return TextFingerprint(_text_hash_of(cps.tobytes().decode("utf-32-le")), sh, n_words, sig)


# --------------------------------------------------------------------------------------------
# Bands and distance
# --------------------------------------------------------------------------------------------

def bands(h: int, n_bands: int = 4) -> list[tuple[int, int]]:
    """``[(band_index, band_value), ...]``: the 64 bits of ``h`` cut into ``n_bands`` equal
    bands, band 0 the lowest bits; values are unsigned (16 bits each for 4 bands).

    Two fingerprints within ``n_bands - 1`` bits of each other share at least one
    (band_index, band_value) pair (pigeonhole: ``n_bands - 1`` differing bits cannot touch
    all ``n_bands`` bands), which makes near-duplicate search an equi-join (Manku et al.
    2007, section 3). ``n_bands`` must divide 64.
    """
    if n_bands <= 0 or 64 % n_bands:
        raise ValueError(f"n_bands must divide 64, got {n_bands}")
    width = 64 // n_bands
    mask = (1 << width) - 1
    u = h & _MASK64
    return [(i, (u >> (i * width)) & mask) for i in range(n_bands)]


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints (signed or unsigned)."""
    return ((a ^ b) & _MASK64).bit_count()


# --------------------------------------------------------------------------------------------
# MinHash (datasketch)
# --------------------------------------------------------------------------------------------

_PERMUTATIONS: dict[tuple[int, int], np.ndarray] = {}


def _affine32_permutations(num_perm: int, seed: int) -> np.ndarray:
    # datasketch's own (a, b) parameters for (num_perm, seed), computed once per process.
    key = (num_perm, seed)
    if key not in _PERMUTATIONS:
        from datasketch import MinHash
        _PERMUTATIONS[key] = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    return _PERMUTATIONS[key]


def minhash(text: str, num_perm: int = 64, *, shingles: tuple[int, ...] = (1,), seed: int = 1):
    """A ``datasketch.LeanMinHash`` (scheme ``affine32``) of the *set* of word features of
    ``text`` (``shingles`` as in ``simhash``; duplicates count once; the low 32 bits of
    each feature hash are the set elements).

    ``a.jaccard(b)`` estimates the Jaccard similarity of two pages' feature sets (standard
    error about ``1 / sqrt(num_perm)``); ``.hashvalues`` is the plain uint32 array to store.
    The values are exactly what ``datasketch.MinHash(num_perm, seed, hashfunc=int)
    .update_batch(elements)`` computes (a test holds this), done here in one numpy
    expression because datasketch's per-element Python loop costs more than the rest.
    Two MinHashes compare only if they share ``num_perm``, ``seed`` and ``shingles``. Text
    without words gives the MinHash of the empty set (every value at the maximum), whose
    Jaccard with another empty MinHash is 1.0 — skip such pages, as with the SimHash.
    """
    from datasketch import LeanMinHash

    if not isinstance(text, str):
        text = ""
    words = _word_hashes(_normalised_codepoints(text[:SIMHASH_MAX_CHARS]))
    elements = np.unique((_features(words, shingles) & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    a, b = _affine32_permutations(num_perm, seed)
    if len(elements):
        # datasketch affine32: MurmurHash3 32-bit finaliser, then a * h + b mod 2^32 per
        # permutation, minimum over the set.
        h = elements
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x85EBCA6B)
        h = h ^ (h >> np.uint32(13))
        h = h * np.uint32(0xC2B2AE35)
        h = h ^ (h >> np.uint32(16))
        values = np.full(num_perm, 0xFFFFFFFF, dtype=np.uint32)
        for lo in range(0, len(h), 4096):  # bounds the (elements x num_perm) matrix
            block = h[lo:lo + 4096, None] * a[None, :] + b[None, :]
            np.minimum(values, block.min(axis=0), out=values)
    else:
        values = np.full(num_perm, 0xFFFFFFFF, dtype=np.uint32)
    return LeanMinHash(seed=seed, hashvalues=values, scheme="affine32")
